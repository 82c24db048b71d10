/* Optional C accelerator for josefk.protocol's decoders.

   Owns one thing: walking a decode "plan" over a byte buffer. A plan is built once per
   (message, version) by josefk/protocol/compiler.py from the same declarations its Python
   generator reads, and handed here as nested tuples:

       struct  = (cls, fields, tags, defaults)
       fields  = ((name, kind, element, nullable, min_size, child struct or None), ...)
                 in wire order (the fields present and not tagged in this version)
       tags    = ((tag, field), ...)          the tagged fields of a flexible version
       defaults= ((name, value, is_factory), ...)  every field not in ``fields``

   ``Plan(struct, flexible)`` compiles that into C arrays; calling the plan as
   ``plan(buf, pos)`` decodes one message and returns ``(obj, pos_after)``, exactly like a
   generated Python decoder. Objects are created with the public frozen dataclass's own
   tp_alloc and every slot is filled through the offset of its member descriptor, so they are
   ordinary instances of that class.

   Bad bytes raise only the codec's typed errors (handed over by ``init``); every length is
   checked against the bytes left before anything is allocated for it, and nothing is read
   past the end of the buffer (or of a tagged field's value).

   Imports nothing from Python but what ``init`` passes in (the error classes and uuid.UUID).
*/

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

enum {
    K_BOOL,
    K_INT8,
    K_INT16,
    K_UINT16,
    K_INT32,
    K_UINT32,
    K_INT64,
    K_FLOAT64,
    K_UUID,
    K_STRING,
    K_BYTES,
    K_RECORDS,
    K_STRUCT,
    K_ARRAY,
    K_COUNT
};

static const char *const KIND_NAMES[K_COUNT] = {
    "bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64",
    "uuid", "string", "bytes", "records", "struct", "array",
};

static const Py_ssize_t FIXED_SIZE[K_COUNT] = {1, 1, 2, 2, 4, 4, 8, 8, 16, 0, 0, 0, 0, 0};

/* The codec's error classes and uuid.UUID, set once by init(). */
static PyObject *E_UNDERFLOW, *E_LENGTH, *E_NULL, *E_VARINT, *E_STRING, *E_MALFORMED;
static PyObject *UUID_CLASS, *UUID_KWNAMES;

typedef struct StructPlan StructPlan;

typedef struct {
    Py_ssize_t offset; /* of the slot in an instance of the enclosing struct's class */
    int kind;
    int element; /* for arrays */
    int nullable;
    Py_ssize_t min_size; /* fewest bytes one array element takes */
    const char *name;    /* borrowed from the plan's description */
    StructPlan *child;   /* structs and arrays of structs */
} FieldPlan;

typedef struct {
    uint32_t tag;
    FieldPlan field;
} TagPlan;

typedef struct {
    Py_ssize_t offset;
    PyObject *value; /* borrowed from the description */
    int factory;
} DefaultPlan;

struct StructPlan {
    PyTypeObject *cls; /* borrowed from the description */
    Py_ssize_t nfields, ntags, ndefaults;
    FieldPlan *fields;
    TagPlan *tags;
    DefaultPlan *defaults;
};

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    int flexible;
    StructPlan *root;
    PyObject *description; /* owns every object the C plan borrows */
} PlanObject;

typedef struct {
    const unsigned char *data;
    PyObject *view; /* the buffer object, sliced for records */
    int flexible;
} Ctx;

#define SLOT(obj, offset) (*(PyObject **)((char *)(obj) + (offset)))

/* -- errors ------------------------------------------------------------------------------ */

static void *
underflow(const char *what, Py_ssize_t need, Py_ssize_t left)
{
    PyErr_Format(E_UNDERFLOW, "%s: %zd bytes claimed, %zd left", what, need, left);
    return NULL;
}

/* -- primitive reads ------------------------------------------------------------------------ */

static inline uint32_t
rd32(const unsigned char *s)
{
    return ((uint32_t)s[0] << 24) | ((uint32_t)s[1] << 16) | ((uint32_t)s[2] << 8) | s[3];
}

static inline uint64_t
rd64(const unsigned char *s)
{
    return ((uint64_t)rd32(s) << 32) | rd32(s + 4);
}

/* An unsigned varint of at most 5 bytes (32 bits), as types.read_uvarint. */
static int
read_uvarint(const Ctx *c, Py_ssize_t *p, Py_ssize_t end, uint32_t *out)
{
    Py_ssize_t pos = *p;
    uint32_t value = 0;
    for (int i = 0; i < 5; i++) {
        if (pos + i >= end) {
            PyErr_SetString(E_UNDERFLOW, "input ended inside a varint");
            return -1;
        }
        unsigned char byte = c->data[pos + i];
        value |= (uint32_t)(byte & 0x7F) << (7 * i);
        if (byte < 0x80) {
            if (i == 4 && byte > 0x0F) {
                PyErr_SetString(E_VARINT, "unsigned varint exceeds 32 bits");
                return -1;
            }
            *p = pos + i + 1;
            *out = value;
            return 0;
        }
    }
    PyErr_SetString(E_VARINT, "unsigned varint longer than 5 bytes");
    return -1;
}

/* A length prefix into *n (-1 for null): a compact uvarint minus one in flexible versions,
   else a signed int32 (wide) or int16. */
static int
read_length(const Ctx *c, Py_ssize_t *p, Py_ssize_t end, int wide, int64_t *n)
{
    if (c->flexible) {
        uint32_t raw;
        if (read_uvarint(c, p, end, &raw) < 0)
            return -1;
        *n = (int64_t)raw - 1;
        return 0;
    }
    Py_ssize_t size = wide ? 4 : 2;
    if (end - *p < size) {
        underflow("length prefix", size, end - *p);
        return -1;
    }
    const unsigned char *s = c->data + *p;
    *n = wide ? (int64_t)(int32_t)rd32(s) : (int64_t)(int16_t)(uint16_t)((s[0] << 8) | s[1]);
    *p += size;
    return 0;
}

/* 1: the value is null, 0: a length to use, -1: an error (as the generated _null_check). */
static int
check_null(int64_t n, int nullable, const char *what, const char *name)
{
    if (n >= 0)
        return 0;
    if (nullable && n == -1)
        return 1;
    if (!nullable && n == -1)
        PyErr_Format(E_NULL, "%s %s is not nullable here", what, name);
    else
        PyErr_Format(E_LENGTH, "negative %s %s length %lld", what, name, (long long)n);
    return -1;
}

static PyObject *
make_uuid(const unsigned char *s)
{
    PyObject *raw = PyBytes_FromStringAndSize((const char *)s, 16);
    if (raw == NULL)
        return NULL;
    PyObject *args[1] = {raw};
    PyObject *result = PyObject_Vectorcall(UUID_CLASS, args, 0, UUID_KWNAMES);
    Py_DECREF(raw);
    return result;
}

/* A fixed-size value at s (the caller checked the bytes are there). */
static PyObject *
fixed_value(int kind, const unsigned char *s)
{
    switch (kind) {
    case K_BOOL:
        return PyBool_FromLong(s[0] != 0);
    case K_INT8:
        return PyLong_FromLong((signed char)s[0]);
    case K_INT16:
        return PyLong_FromLong((int16_t)(uint16_t)((s[0] << 8) | s[1]));
    case K_UINT16:
        return PyLong_FromLong((long)(uint16_t)((s[0] << 8) | s[1]));
    case K_INT32:
        return PyLong_FromLong((int32_t)rd32(s));
    case K_UINT32:
        return PyLong_FromUnsignedLong(rd32(s));
    case K_INT64:
        return PyLong_FromLongLong((int64_t)rd64(s));
    case K_FLOAT64: {
        uint64_t bits = rd64(s);
        double d;
        memcpy(&d, &bits, sizeof d);
        return PyFloat_FromDouble(d);
    }
    case K_UUID:
        return make_uuid(s);
    }
    PyErr_SetString(PyExc_SystemError, "not a fixed-size kind");
    return NULL;
}

/* -- decoding ------------------------------------------------------------------------------- */

static PyObject *decode_struct(const Ctx *c, const StructPlan *sp, Py_ssize_t *p, Py_ssize_t end);

/* A string, bytes or records value of n bytes at *p (n >= 0, checked here). */
static PyObject *
sized_value(const Ctx *c, int kind, const char *name, int64_t n, Py_ssize_t *p, Py_ssize_t end)
{
    Py_ssize_t pos = *p;
    if (n > (int64_t)(end - pos))
        return underflow(name, (Py_ssize_t)n, end - pos);
    PyObject *v;
    if (kind == K_STRING) {
        v = PyUnicode_DecodeUTF8((const char *)c->data + pos, (Py_ssize_t)n, NULL);
        if (v == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            PyErr_NormalizeException(&type, &value, &tb);
            PyObject *text = value != NULL ? PyObject_Str(value) : NULL;
            if (text != NULL) {
                PyErr_SetObject(E_STRING, text);
                Py_DECREF(text);
            }
            else {
                PyErr_Clear();
                PyErr_SetString(E_STRING, "invalid utf-8");
            }
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
            return NULL;
        }
    }
    else if (kind == K_BYTES) {
        v = PyBytes_FromStringAndSize((const char *)c->data + pos, (Py_ssize_t)n);
    }
    else { /* records: a zero-copy slice of the caller's buffer object */
        PyObject *start = PyLong_FromSsize_t(pos);
        PyObject *stop = PyLong_FromSsize_t(pos + (Py_ssize_t)n);
        PyObject *slice = (start && stop) ? PySlice_New(start, stop, NULL) : NULL;
        Py_XDECREF(start);
        Py_XDECREF(stop);
        if (slice == NULL)
            return NULL;
        v = PyObject_GetItem(c->view, slice);
        Py_DECREF(slice);
    }
    if (v != NULL)
        *p = pos + (Py_ssize_t)n;
    return v;
}

static PyObject *
decode_array(const Ctx *c, const FieldPlan *f, Py_ssize_t *p, Py_ssize_t end)
{
    int64_t n;
    if (read_length(c, p, end, 1, &n) < 0)
        return NULL;
    int null = check_null(n, f->nullable, "array", f->name);
    if (null < 0)
        return NULL;
    if (null)
        Py_RETURN_NONE;
    int64_t left = end - *p;
    int element = f->element;
    Py_ssize_t size = FIXED_SIZE[element];
    if (size) {
        /* As the generated code: under 32 elements a Struct finds the bytes short
           (BufferUnderflow), from 32 on the count is checked first (InvalidLength); short
           uuid arrays fail in uuid.UUID (MalformedData). */
        if (n * size > left) {
            if (element == K_UUID)
                PyErr_Format(E_MALFORMED, "array %s of %lld uuids cannot fit in %lld bytes",
                             f->name, (long long)n, (long long)left);
            else if (n < 32)
                PyErr_Format(E_UNDERFLOW, "array %s of %lld elements: only %lld bytes left",
                             f->name, (long long)n, (long long)left);
            else
                PyErr_Format(E_LENGTH, "array %s of %lld elements cannot fit in %lld bytes",
                             f->name, (long long)n, (long long)left);
            return NULL;
        }
    }
    else if (n * f->min_size > left) {
        PyErr_Format(E_LENGTH, "array %s of %lld elements cannot fit in %lld bytes", f->name,
                     (long long)n, (long long)left);
        return NULL;
    }
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (list == NULL)
        return NULL;
    Py_ssize_t pos = *p;
    for (Py_ssize_t i = 0; i < (Py_ssize_t)n; i++) {
        PyObject *item;
        if (size) {
            item = fixed_value(element, c->data + pos);
            pos += size;
        }
        else if (element == K_STRUCT) {
            item = decode_struct(c, f->child, &pos, end);
        }
        else {
            int64_t m;
            if (read_length(c, &pos, end, element != K_STRING, &m) < 0)
                goto fail;
            if (m < 0) {
                if (m == -1)
                    PyErr_Format(E_NULL, "null element in array %s", f->name);
                else
                    PyErr_Format(E_LENGTH, "negative length %lld in array %s", (long long)m,
                                 f->name);
                goto fail;
            }
            item = sized_value(c, element, f->name, m, &pos, end);
        }
        if (item == NULL)
            goto fail;
        PyList_SET_ITEM(list, i, item);
    }
    *p = pos;
    return list;
fail:
    Py_DECREF(list);
    return NULL;
}

static PyObject *
decode_field(const Ctx *c, const FieldPlan *f, Py_ssize_t *p, Py_ssize_t end)
{
    int kind = f->kind;
    Py_ssize_t size = FIXED_SIZE[kind];
    if (size) {
        if (end - *p < size)
            return underflow(f->name, size, end - *p);
        PyObject *v = fixed_value(kind, c->data + *p);
        if (v != NULL)
            *p += size;
        return v;
    }
    if (kind == K_ARRAY)
        return decode_array(c, f, p, end);
    if (kind == K_STRUCT) {
        if (f->nullable) {
            if (*p >= end)
                return underflow(f->name, 1, 0);
            signed char flag = (signed char)c->data[*p];
            *p += 1;
            if (flag < 0)
                Py_RETURN_NONE;
        }
        return decode_struct(c, f->child, p, end);
    }
    int64_t n;
    if (read_length(c, p, end, kind != K_STRING, &n) < 0)
        return NULL;
    int null = check_null(n, f->nullable, KIND_NAMES[kind], f->name);
    if (null < 0)
        return NULL;
    if (null)
        Py_RETURN_NONE;
    return sized_value(c, kind, f->name, n, p, end);
}

static int
decode_tagged(const Ctx *c, const StructPlan *sp, PyObject *obj, Py_ssize_t *p, Py_ssize_t end)
{
    uint32_t count;
    if (read_uvarint(c, p, end, &count) < 0)
        return -1;
    if ((int64_t)count > (int64_t)(end - *p)) {
        PyErr_Format(E_LENGTH, "%lu tagged fields cannot fit in %zd bytes",
                     (unsigned long)count, end - *p);
        return -1;
    }
    for (uint32_t i = 0; i < count; i++) {
        uint32_t tag, size;
        if (read_uvarint(c, p, end, &tag) < 0 || read_uvarint(c, p, end, &size) < 0)
            return -1;
        if ((int64_t)size > (int64_t)(end - *p)) {
            PyErr_Format(E_UNDERFLOW, "tagged field %lu: %lu bytes claimed, %zd left",
                         (unsigned long)tag, (unsigned long)size, end - *p);
            return -1;
        }
        Py_ssize_t stop = *p + (Py_ssize_t)size;
        for (Py_ssize_t t = 0; t < sp->ntags; t++) {
            const TagPlan *tp = &sp->tags[t];
            if (tp->tag != tag)
                continue;
            /* The value's own bytes bound what it may read; bytes it leaves are skipped. */
            Py_ssize_t q = *p;
            PyObject *v = decode_field(c, &tp->field, &q, stop);
            if (v == NULL)
                return -1;
            PyObject *old = SLOT(obj, tp->field.offset);
            SLOT(obj, tp->field.offset) = v;
            Py_XDECREF(old); /* a repeated tag: the last one wins, as in Python */
            break;
        }
        *p = stop;
    }
    return 0;
}

static PyObject *
decode_struct(const Ctx *c, const StructPlan *sp, Py_ssize_t *p, Py_ssize_t end)
{
    PyObject *obj = sp->cls->tp_alloc(sp->cls, 0);
    if (obj == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < sp->nfields; i++) {
        const FieldPlan *f = &sp->fields[i];
        PyObject *v = decode_field(c, f, p, end);
        if (v == NULL)
            goto fail;
        SLOT(obj, f->offset) = v;
    }
    if (c->flexible && decode_tagged(c, sp, obj, p, end) < 0)
        goto fail;
    for (Py_ssize_t i = 0; i < sp->ndefaults; i++) {
        const DefaultPlan *d = &sp->defaults[i];
        if (SLOT(obj, d->offset) != NULL)
            continue; /* a tagged field that was present */
        PyObject *v;
        if (d->factory) {
            v = PyObject_CallNoArgs(d->value);
            if (v == NULL)
                goto fail;
        }
        else {
            v = Py_NewRef(d->value);
        }
        SLOT(obj, d->offset) = v;
    }
    return obj;
fail:
    Py_DECREF(obj); /* the class's dealloc releases the slots filled so far */
    return NULL;
}

/* -- plans ---------------------------------------------------------------------------------- */

static void
free_struct_plan(StructPlan *sp)
{
    if (sp == NULL)
        return;
    for (Py_ssize_t i = 0; i < sp->nfields; i++)
        free_struct_plan(sp->fields[i].child);
    for (Py_ssize_t i = 0; i < sp->ntags; i++)
        free_struct_plan(sp->tags[i].field.child);
    PyMem_Free(sp->fields);
    PyMem_Free(sp->tags);
    PyMem_Free(sp->defaults);
    PyMem_Free(sp);
}

static int
kind_of(PyObject *name, int allow_empty, int *out)
{
    const char *s = PyUnicode_AsUTF8(name);
    if (s == NULL)
        return -1;
    if (allow_empty && s[0] == '\0') {
        *out = -1;
        return 0;
    }
    for (int k = 0; k < K_COUNT; k++) {
        if (strcmp(s, KIND_NAMES[k]) == 0) {
            *out = k;
            return 0;
        }
    }
    PyErr_Format(PyExc_ValueError, "unknown field kind %R", name);
    return -1;
}

/* The offset of the slot ``name`` of ``cls``, from its member descriptor. */
static int
slot_offset(PyTypeObject *cls, PyObject *name, Py_ssize_t *out)
{
    PyObject *descr = PyDict_GetItemWithError(cls->tp_dict, name);
    if (descr == NULL) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "%s has no slot %R", cls->tp_name, name);
        return -1;
    }
    if (!Py_IS_TYPE(descr, &PyMemberDescr_Type) || PyDescr_TYPE(descr) != cls) {
        PyErr_Format(PyExc_ValueError, "%s.%U is not a slot of that class", cls->tp_name, name);
        return -1;
    }
    PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
    if (member->type != T_OBJECT_EX || (member->flags & READONLY) || member->offset < 0 ||
        (Py_ssize_t)(member->offset + sizeof(PyObject *)) > cls->tp_basicsize) {
        PyErr_Format(PyExc_ValueError, "%s.%U is not a plain object slot", cls->tp_name, name);
        return -1;
    }
    *out = member->offset;
    return 0;
}

static StructPlan *build_struct(PyObject *desc, int depth);

static int
build_field(FieldPlan *f, PyTypeObject *cls, PyObject *desc, int depth)
{
    PyObject *name, *kind, *element, *child;
    int nullable;
    Py_ssize_t min_size;
    if (!PyArg_ParseTuple(desc, "UUUpnO;field description", &name, &kind, &element, &nullable,
                          &min_size, &child))
        return -1;
    f->name = PyUnicode_AsUTF8(name);
    if (f->name == NULL || slot_offset(cls, name, &f->offset) < 0)
        return -1;
    if (kind_of(kind, 0, &f->kind) < 0 || kind_of(element, 1, &f->element) < 0)
        return -1;
    f->nullable = nullable;
    f->min_size = min_size;
    if (f->kind == K_ARRAY) {
        int e = f->element;
        if (e < 0 || e == K_ARRAY || e == K_RECORDS) {
            PyErr_Format(PyExc_ValueError, "array %s: unsupported element kind", f->name);
            return -1;
        }
        if (FIXED_SIZE[e] == 0 && min_size < 1) {
            PyErr_Format(PyExc_ValueError, "array %s: element size must be positive", f->name);
            return -1;
        }
    }
    int needs_child = f->kind == K_STRUCT || (f->kind == K_ARRAY && f->element == K_STRUCT);
    if (needs_child != (child != Py_None)) {
        PyErr_Format(PyExc_ValueError, "field %s: child struct mismatch", f->name);
        return -1;
    }
    if (needs_child) {
        f->child = build_struct(child, depth + 1);
        if (f->child == NULL)
            return -1;
    }
    return 0;
}

static StructPlan *
build_struct(PyObject *desc, int depth)
{
    PyObject *cls, *fields, *tags, *defaults;
    if (depth > 64) {
        PyErr_SetString(PyExc_ValueError, "structs nested too deeply");
        return NULL;
    }
    if (!PyArg_ParseTuple(desc, "O!O!O!O!;struct description", &PyType_Type, &cls,
                          &PyTuple_Type, &fields, &PyTuple_Type, &tags, &PyTuple_Type,
                          &defaults))
        return NULL;
    PyTypeObject *type = (PyTypeObject *)cls;
    if (type->tp_alloc == NULL || type->tp_dict == NULL) {
        PyErr_SetString(PyExc_ValueError, "class cannot be allocated");
        return NULL;
    }
    StructPlan *sp = PyMem_Calloc(1, sizeof(StructPlan));
    if (sp == NULL)
        return (StructPlan *)PyErr_NoMemory();
    sp->cls = type;
    Py_ssize_t nf = PyTuple_GET_SIZE(fields), nt = PyTuple_GET_SIZE(tags),
               nd = PyTuple_GET_SIZE(defaults);
    sp->fields = PyMem_Calloc(nf ? nf : 1, sizeof(FieldPlan));
    sp->tags = PyMem_Calloc(nt ? nt : 1, sizeof(TagPlan));
    sp->defaults = PyMem_Calloc(nd ? nd : 1, sizeof(DefaultPlan));
    if (!sp->fields || !sp->tags || !sp->defaults) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < nf; i++) {
        sp->nfields = i + 1; /* so a failure frees the children built so far */
        if (build_field(&sp->fields[i], type, PyTuple_GET_ITEM(fields, i), depth) < 0)
            goto fail;
    }
    for (Py_ssize_t i = 0; i < nt; i++) {
        PyObject *field;
        unsigned long tag;
        sp->ntags = i + 1;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(tags, i), "kO!;tag description", &tag,
                              &PyTuple_Type, &field))
            goto fail;
        if (tag > UINT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "tag out of range");
            goto fail;
        }
        sp->tags[i].tag = (uint32_t)tag;
        if (build_field(&sp->tags[i].field, type, field, depth) < 0)
            goto fail;
    }
    for (Py_ssize_t i = 0; i < nd; i++) {
        PyObject *name, *value;
        int factory;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(defaults, i), "UOp;default description", &name,
                              &value, &factory))
            goto fail;
        if (slot_offset(type, name, &sp->defaults[i].offset) < 0)
            goto fail;
        sp->defaults[i].value = value;
        sp->defaults[i].factory = factory;
        sp->ndefaults = i + 1;
    }
    return sp;
fail:
    free_struct_plan(sp);
    return NULL;
}

static PyObject *
plan_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PlanObject *plan = (PlanObject *)self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 2 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0)) {
        PyErr_SetString(PyExc_TypeError, "a decoder takes (buf, pos)");
        return NULL;
    }
    if (plan->root == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "plan was cleared");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred())
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *result = NULL;
    if (pos < 0 || pos > view.len) {
        PyErr_Format(E_UNDERFLOW, "position %zd outside a buffer of %zd bytes", pos, view.len);
    }
    else {
        Ctx c = {(const unsigned char *)view.buf, args[0], plan->flexible};
        PyObject *obj = decode_struct(&c, plan->root, &pos, view.len);
        if (obj != NULL) {
            PyObject *end = PyLong_FromSsize_t(pos);
            if (end != NULL)
                result = PyTuple_Pack(2, obj, end);
            Py_XDECREF(end);
            Py_DECREF(obj);
        }
    }
    PyBuffer_Release(&view);
    return result;
}

static PyObject *
plan_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *desc;
    int flexible;
    static char *keywords[] = {"description", "flexible", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!p:Plan", keywords, &PyTuple_Type, &desc,
                                     &flexible))
        return NULL;
    if (E_UNDERFLOW == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "josefk.protocol._cdecode.init() was not called");
        return NULL;
    }
    PlanObject *self = (PlanObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = plan_call;
    self->flexible = flexible;
    self->description = Py_NewRef(desc);
    self->root = build_struct(desc, 0);
    if (self->root == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int
plan_traverse(PlanObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->description);
    return 0;
}

static int
plan_clear(PlanObject *self)
{
    /* The C plan borrows from the description: both go together. */
    free_struct_plan(self->root);
    self->root = NULL;
    Py_CLEAR(self->description);
    return 0;
}

static void
plan_dealloc(PlanObject *self)
{
    PyObject_GC_UnTrack(self);
    plan_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject PlanType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "josefk.protocol._cdecode.Plan",
    .tp_doc = PyDoc_STR("Plan(description, flexible): a compiled decoder; call as "
                        "plan(buf, pos) -> (obj, pos_after)."),
    .tp_basicsize = sizeof(PlanObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = plan_new,
    .tp_dealloc = (destructor)plan_dealloc,
    .tp_traverse = (traverseproc)plan_traverse,
    .tp_clear = (inquiry)plan_clear,
    .tp_vectorcall_offset = offsetof(PlanObject, vectorcall),
    .tp_call = PyVectorcall_Call,
};

/* -- module --------------------------------------------------------------------------------- */

static PyObject *
module_init(PyObject *module, PyObject *args)
{
    PyObject *bu, *il, *un, *iv, *is, *md, *uuid_class;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!O!O:init", &PyType_Type, &bu, &PyType_Type, &il,
                          &PyType_Type, &un, &PyType_Type, &iv, &PyType_Type, &is, &PyType_Type,
                          &md, &uuid_class))
        return NULL;
    PyObject *kwnames = Py_BuildValue("(s)", "bytes");
    if (kwnames == NULL)
        return NULL;
    Py_XSETREF(E_UNDERFLOW, Py_NewRef(bu));
    Py_XSETREF(E_LENGTH, Py_NewRef(il));
    Py_XSETREF(E_NULL, Py_NewRef(un));
    Py_XSETREF(E_VARINT, Py_NewRef(iv));
    Py_XSETREF(E_STRING, Py_NewRef(is));
    Py_XSETREF(E_MALFORMED, Py_NewRef(md));
    Py_XSETREF(UUID_CLASS, Py_NewRef(uuid_class));
    Py_XSETREF(UUID_KWNAMES, kwnames);
    Py_RETURN_NONE;
}

/* frame_buffer(size): a bytearray of ``size`` bytes left as malloc gave them. A received
 * frame is written whole before anyone reads it, and zeroing a buffer of a megabyte first
 * (what bytearray(size) does) is one more pass over memory per frame on the hot path. */
static PyObject *
frame_buffer(PyObject *self, PyObject *arg)
{
    Py_ssize_t size = PyLong_AsSsize_t(arg);
    if (size == -1 && PyErr_Occurred())
        return NULL;
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "negative buffer size");
        return NULL;
    }
    return PyByteArray_FromStringAndSize(NULL, size);
}

static PyMethodDef module_methods[] = {
    {"frame_buffer", frame_buffer, METH_O,
     PyDoc_STR("frame_buffer(size): an uninitialised bytearray for a frame to be received into.")},
    {"init", module_init, METH_VARARGS,
     PyDoc_STR("init(BufferUnderflow, InvalidLength, UnexpectedNull, InvalidVarint, "
               "InvalidString, MalformedData, uuid.UUID): the classes decoding uses.")},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "josefk.protocol._cdecode",
    .m_doc = PyDoc_STR("C decoder for josefk.protocol plans (see compiler.py)."),
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC
PyInit__cdecode(void)
{
    if (PyType_Ready(&PlanType) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL)
        return NULL;
    if (PyModule_AddObjectRef(module, "Plan", (PyObject *)&PlanType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
