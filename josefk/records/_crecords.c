/* Optional C accelerator for josefk.records: the validator's one pass over a batch's records,
   and the producer's encoding of one record into a batch.

   Owns two functions. scan_records is the C twin of josefk.records.scan._scan_records_python
   (the pure-Python fallback; both must give the same results, and a property test holds
   them to it). It walks records laid out as in josefk/records/record.py's docstring,
   checking each one's framing the way Kafka's reader does, and never creates a Python object
   per record: only the result tuple and, when records break a rule, lists of their indexes.

   scan_records(data, position, count, first_index, base_timestamp, ts_low, ts_high,
                check_timestamps, keys_required, final)
       -> (position, scanned, max_delta, keyless, bad_timestamps, error)

   Walks at most `count` records of `data` (any buffer) from `position`. A record whose
   length, or whose bytes, run past the end of `data` stops the walk there when `final` is
   false (the caller is decompressing a stream and will call again with more bytes); with
   `final` it is an error. `max_delta` is the largest timestamp delta seen (None when no
   record was scanned). `keyless` lists the indexes (first_index + i) of records with a null
   key when `keys_required`; `bad_timestamps` those whose timestamp (base_timestamp + delta)
   is not -1 and lies outside [ts_low, ts_high] when `check_timestamps`; each is None when
   empty. `error` is None, or a message naming the first record whose framing is wrong: then
   the other fields describe the records before it. With `final`, bytes left after `count`
   records are an error too.

   append_record(out, offset_delta, timestamp_delta, key, value, headers) -> bool

       The C twin of josefk.records.builder._encode_record_python (a property test holds them
       to the same bytes): appends one record (length varint, attributes 0, timestamp delta
       varlong, offset delta varint, key, value, headers) to the bytearray `out`, written
       straight into it (no intermediate bytes object), and returns True. It returns False,
       leaving `out` as it was, for any record it does not take: keys, values and header
       values other than None, bytes or bytearray (exact types), headers other than a list or
       tuple of (str, value) tuples, a header key that is not valid UTF-8 text, deltas outside
       their fields, a record over INT32_MAX bytes. The caller then encodes it in Python,
       which raises whatever error the record deserves. The buffer grows by doubling, so a
       1 MB batch is reallocated a handful of times rather than at every 1/8th.

   Imports nothing from Python.
*/

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* Records are listed by index up to this many per call: enough for any batch a client
   builds, and a bound on the memory a hostile batch of tiny records can cost. */
#define MAX_LISTED 100000

/* Zig-zag varint of at most `max_bytes` bytes at *pos, not past `limit`.
   Returns 1 on success, 0 if the bytes run out before its end, -1 if it is too long. */
static int
read_varint(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t limit, int max_bytes,
            int64_t *out)
{
    uint64_t raw = 0;
    int shift = 0;
    Py_ssize_t at = *pos;
    for (int i = 0; i < max_bytes; i++) {
        if (at >= limit)
            return 0;
        unsigned char byte = p[at++];
        raw |= (uint64_t)(byte & 0x7F) << shift;
        if (!(byte & 0x80)) {
            *pos = at;
            *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            return 1;
        }
        shift += 7;
    }
    return -1;
}

static int
append_index(PyObject **list, Py_ssize_t index)
{
    if (*list == NULL) {
        *list = PyList_New(0);
        if (*list == NULL)
            return -1;
    }
    if (PyList_GET_SIZE(*list) >= MAX_LISTED)
        return 0;
    PyObject *value = PyLong_FromSsize_t(index);
    if (value == NULL)
        return -1;
    int rc = PyList_Append(*list, value);
    Py_DECREF(value);
    return rc;
}

/* One record's body, from just after its length varint to `stop`. Returns NULL when the
   framing is right, else a static message. */
static const char *
check_body(const unsigned char *p, Py_ssize_t at, Py_ssize_t stop, int64_t *timestamp_delta,
           int *has_key)
{
    int64_t value;
    int rc;
    if (at >= stop)
        return "a record ends before its attributes";
    at += 1; /* attributes: unused in v2 */
    rc = read_varint(p, &at, stop, 10, timestamp_delta);
    if (rc <= 0)
        return rc < 0 ? "a timestamp delta is not a valid varlong"
                      : "a record ends inside its timestamp delta";
    rc = read_varint(p, &at, stop, 5, &value); /* offset delta */
    if (rc <= 0)
        return rc < 0 ? "an offset delta is not a valid varint"
                      : "a record ends inside its offset delta";
    rc = read_varint(p, &at, stop, 5, &value); /* key length */
    if (rc <= 0)
        return rc < 0 ? "a key length is not a valid varint" : "a record ends inside its key length";
    if (value < -1)
        return "a record has a negative key length";
    if (value > stop - at)
        return "a record's key runs past the end of the record";
    *has_key = value >= 0;
    if (value > 0)
        at += (Py_ssize_t)value;
    rc = read_varint(p, &at, stop, 5, &value); /* value length */
    if (rc <= 0)
        return rc < 0 ? "a value length is not a valid varint"
                      : "a record ends inside its value length";
    if (value < -1)
        return "a record has a negative value length";
    if (value > stop - at)
        return "a record's value runs past the end of the record";
    if (value > 0)
        at += (Py_ssize_t)value;
    int64_t headers;
    rc = read_varint(p, &at, stop, 5, &headers);
    if (rc <= 0)
        return rc < 0 ? "a header count is not a valid varint"
                      : "a record ends inside its header count";
    if (headers < 0)
        return "a record has a negative header count";
    for (int64_t h = 0; h < headers; h++) {
        rc = read_varint(p, &at, stop, 5, &value);
        if (rc <= 0)
            return rc < 0 ? "a header key length is not a valid varint"
                          : "a record's headers run past the end of the record";
        if (value < 0)
            return "a record has a header with a negative key length";
        if (value > stop - at)
            return "a header key runs past the end of the record";
        at += (Py_ssize_t)value;
        rc = read_varint(p, &at, stop, 5, &value);
        if (rc <= 0)
            return rc < 0 ? "a header value length is not a valid varint"
                          : "a record's headers run past the end of the record";
        if (value < -1)
            return "a record has a header with a negative value length";
        if (value > stop - at)
            return "a header value runs past the end of the record";
        if (value > 0)
            at += (Py_ssize_t)value;
    }
    if (at != stop)
        return "a record's fields do not use exactly the bytes its length claims";
    return NULL;
}

static PyObject *
scan_records(PyObject *Py_UNUSED(self), PyObject *args)
{
    Py_buffer view;
    Py_ssize_t position, count, first_index;
    long long base_timestamp, ts_low, ts_high;
    int check_timestamps, keys_required, final;
    if (!PyArg_ParseTuple(args, "y*nnnLLLppp", &view, &position, &count, &first_index,
                          &base_timestamp, &ts_low, &ts_high, &check_timestamps,
                          &keys_required, &final))
        return NULL;
    const unsigned char *p = (const unsigned char *)view.buf;
    Py_ssize_t end = view.len;
    Py_ssize_t scanned = 0;
    int64_t max_delta = INT64_MIN;
    PyObject *keyless = NULL, *bad_timestamps = NULL;
    const char *error = NULL;
    char message[160];
    if (position < 0 || position > end) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "position outside the buffer");
        return NULL;
    }
    while (scanned < count) {
        Py_ssize_t start = position, at = position;
        int64_t length;
        int rc = read_varint(p, &at, end, 5, &length);
        if (rc < 0) {
            error = "a record length is not a valid varint";
            break;
        }
        if (rc == 0 || (length > 0 && length > end - at)) {
            if (final)
                error = (start == end) ? "the batch holds fewer records than its record count"
                                       : "a record runs past the end of the batch";
            break;
        }
        if (length <= 0) {
            error = "a record claims a length of zero or less";
            break;
        }
        int64_t delta = 0;
        int has_key = 0;
        error = check_body(p, at, at + (Py_ssize_t)length, &delta, &has_key);
        if (error != NULL)
            break;
        Py_ssize_t index = first_index + scanned;
        if (delta > max_delta)
            max_delta = delta;
        if (keys_required && !has_key && append_index(&keyless, index) < 0)
            goto fail;
        if (check_timestamps) {
            int64_t timestamp;
            int bad;
            if (__builtin_add_overflow((int64_t)base_timestamp, delta, &timestamp))
                bad = 1;
            else
                bad = timestamp != -1 && (timestamp < ts_low || timestamp > ts_high);
            if (bad && append_index(&bad_timestamps, index) < 0)
                goto fail;
        }
        position = at + (Py_ssize_t)length;
        scanned++;
    }
    if (error == NULL && final && scanned == count && position != end)
        error = "the batch has bytes after its last record";
    PyBuffer_Release(&view);
    PyObject *error_obj;
    if (error != NULL) {
        snprintf(message, sizeof message, "record %zd: %s", first_index + scanned, error);
        error_obj = PyUnicode_FromString(message);
        if (error_obj == NULL) {
            Py_XDECREF(keyless);
            Py_XDECREF(bad_timestamps);
            return NULL;
        }
    }
    else {
        error_obj = Py_NewRef(Py_None);
    }
    PyObject *max_obj = scanned ? PyLong_FromLongLong(max_delta) : Py_NewRef(Py_None);
    if (max_obj == NULL) {
        Py_DECREF(error_obj);
        Py_XDECREF(keyless);
        Py_XDECREF(bad_timestamps);
        return NULL;
    }
    return Py_BuildValue("(nnNNNN)", position, scanned, max_obj,
                         keyless ? keyless : Py_NewRef(Py_None),
                         bad_timestamps ? bad_timestamps : Py_NewRef(Py_None), error_obj);
fail:
    PyBuffer_Release(&view);
    Py_XDECREF(keyless);
    Py_XDECREF(bad_timestamps);
    return NULL;
}

/* ---------------------------------------------------------------- append_record */

static inline Py_ssize_t
uvarint_size(uint64_t value)
{
    Py_ssize_t size = 1;
    while (value >= 0x80) {
        value >>= 7;
        size++;
    }
    return size;
}

static inline char *
put_uvarint(char *p, uint64_t value)
{
    while (value >= 0x80) {
        *p++ = (char)((value & 0x7F) | 0x80);
        value >>= 7;
    }
    *p++ = (char)value;
    return p;
}

/* A key, value or header value: bytes, bytearray (never `out` itself) or None (len -1).
   Returns 0 for anything else, which the caller leaves to Python. */
static inline int
bytes_piece(PyObject *obj, PyObject *out, const char **data, Py_ssize_t *len)
{
    if (obj == Py_None) {
        *data = NULL;
        *len = -1;
        return 1;
    }
    if (PyBytes_CheckExact(obj)) {
        *data = PyBytes_AS_STRING(obj);
        *len = PyBytes_GET_SIZE(obj);
        return 1;
    }
    if (PyByteArray_CheckExact(obj) && obj != out) {
        *data = PyByteArray_AS_STRING(obj);
        *len = PyByteArray_GET_SIZE(obj);
        return 1;
    }
    return 0;
}

/* Bytes of a length-prefixed field of `len` bytes (-1: null, one byte). */
static inline Py_ssize_t
field_size(Py_ssize_t len)
{
    return len < 0 ? 1 : uvarint_size((uint64_t)len << 1) + len;
}

static inline char *
put_field(char *p, const char *data, Py_ssize_t len)
{
    if (len < 0) {
        *p++ = 1; /* zig-zag -1: null */
        return p;
    }
    p = put_uvarint(p, (uint64_t)len << 1);
    memcpy(p, data, (size_t)len);
    return p + len;
}

/* The i-th header of `headers` (a list or tuple) as UTF-8 key and value pieces; 0 if it is
   not a (str, bytes | bytearray | None) tuple or its key does not encode. */
static int
header_pieces(PyObject *headers, Py_ssize_t i, PyObject *out, const char **key,
              Py_ssize_t *key_len, const char **value, Py_ssize_t *value_len)
{
    PyObject *item = PySequence_Fast_GET_ITEM(headers, i);
    if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 2)
        return 0;
    PyObject *name = PyTuple_GET_ITEM(item, 0);
    if (!PyUnicode_CheckExact(name))
        return 0;
    *key = PyUnicode_AsUTF8AndSize(name, key_len);
    if (*key == NULL) {
        /* Lone surrogates: Python's str.encode raises the error the caller should see. */
        PyErr_Clear();
        return 0;
    }
    return bytes_piece(PyTuple_GET_ITEM(item, 1), out, value, value_len);
}

static PyObject *
append_record(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "append_record takes 6 arguments");
        return NULL;
    }
    PyObject *out = args[0], *headers = args[5];
    if (!PyByteArray_CheckExact(out)) {
        PyErr_SetString(PyExc_TypeError, "append_record needs a bytearray");
        return NULL;
    }
    if (!PyLong_Check(args[1]) || !PyLong_Check(args[2]))
        Py_RETURN_FALSE;
    int overflow;
    long long offset_delta = PyLong_AsLongLongAndOverflow(args[1], &overflow);
    if (overflow || offset_delta < 0 || offset_delta > INT32_MAX) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_FALSE;
    }
    long long timestamp_delta = PyLong_AsLongLongAndOverflow(args[2], &overflow);
    if (overflow) /* outside int64 */
        Py_RETURN_FALSE;
    if (timestamp_delta == -1 && PyErr_Occurred())
        return NULL;
    const char *key, *value;
    Py_ssize_t key_len, value_len;
    if (!bytes_piece(args[3], out, &key, &key_len) || !bytes_piece(args[4], out, &value, &value_len))
        Py_RETURN_FALSE;
    if (!PyList_CheckExact(headers) && !PyTuple_CheckExact(headers))
        Py_RETURN_FALSE;
    Py_ssize_t header_count = PySequence_Fast_GET_SIZE(headers);

    uint64_t zz_timestamp = ((uint64_t)timestamp_delta << 1) ^ (uint64_t)(timestamp_delta >> 63);
    /* Every term is below 2**31 + 10 and there are at most a handful before a check, so the
       sums cannot overflow a 64-bit Py_ssize_t. */
    Py_ssize_t body = 1 + uvarint_size(zz_timestamp) + uvarint_size((uint64_t)offset_delta << 1)
                      + field_size(key_len) + field_size(value_len)
                      + uvarint_size((uint64_t)header_count << 1);
    for (Py_ssize_t i = 0; i < header_count && body <= INT32_MAX; i++) {
        const char *hkey, *hvalue;
        Py_ssize_t hkey_len, hvalue_len;
        if (!header_pieces(headers, i, out, &hkey, &hkey_len, &hvalue, &hvalue_len))
            Py_RETURN_FALSE;
        body += field_size(hkey_len) + field_size(hvalue_len);
    }
    if (body > INT32_MAX)
        Py_RETURN_FALSE;

    Py_ssize_t start = PyByteArray_GET_SIZE(out);
    Py_ssize_t end = start + uvarint_size((uint64_t)body << 1) + body;
    if (end >= ((PyByteArrayObject *)out)->ob_alloc) {
        /* Grow to twice the size needed, then set the size back: the second resize only
           moves the end (a bytearray shrinks in place down to half its allocation). */
        if (PyByteArray_Resize(out, end * 2) < 0)
            return NULL;
    }
    if (PyByteArray_Resize(out, end) < 0)
        return NULL;
    char *p = PyByteArray_AS_STRING(out) + start;
    p = put_uvarint(p, (uint64_t)body << 1);
    *p++ = 0; /* record attributes: unused by v2 */
    p = put_uvarint(p, zz_timestamp);
    p = put_uvarint(p, (uint64_t)offset_delta << 1);
    p = put_field(p, key, key_len);
    p = put_field(p, value, value_len);
    p = put_uvarint(p, (uint64_t)header_count << 1);
    for (Py_ssize_t i = 0; i < header_count; i++) {
        const char *hkey, *hvalue;
        Py_ssize_t hkey_len, hvalue_len;
        /* Cannot fail now: the same pieces were taken above, the UTF-8 form is cached. */
        header_pieces(headers, i, out, &hkey, &hkey_len, &hvalue, &hvalue_len);
        p = put_field(p, hkey, hkey_len);
        p = put_field(p, hvalue, hvalue_len);
    }
    assert(p == PyByteArray_AS_STRING(out) + end);
    Py_RETURN_TRUE;
}

static PyMethodDef module_methods[] = {
    {"scan_records", scan_records, METH_VARARGS,
     PyDoc_STR("scan_records(data, position, count, first_index, base_timestamp, ts_low, "
               "ts_high, check_timestamps, keys_required, final) -> (position, scanned, "
               "max_delta, keyless, bad_timestamps, error)")},
    {"append_record", (PyCFunction)(void (*)(void))append_record, METH_FASTCALL,
     PyDoc_STR("append_record(out, offset_delta, timestamp_delta, key, value, headers) -> bool")},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_crecords",
    "The validator's one pass over a batch's records (see josefk.records.scan) and the "
    "producer's encoding of one record (see josefk.records.builder).",
    -1,
    module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__crecords(void)
{
    return PyModule_Create(&module_def);
}
