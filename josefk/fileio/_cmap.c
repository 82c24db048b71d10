/* A shared file mapping that keeps no file descriptor: josefk.fileio.map_file.
 *
 * Python 3.11's mmap.mmap duplicates the descriptor it maps and holds the copy as long as the
 * map lives, so every mapped index costs an open file. A broker with 10,000 partitions maps
 * 20,000 active indexes besides its 10,000 open .log files; under a hard limit of 20,000
 * descriptors the broker had to unmap and map indexes again on nearly every append. A
 * mapping needs no descriptor once made (as with the JVM's MappedByteBuffer, which Kafka's
 * indexes use), so this one keeps none: only vm.max_map_count bounds them.
 *
 * The object behaves as the parts of mmap.mmap the indexes use: the buffer protocol
 * (writable when mapped writable), len(), slicing into bytes, flush() (msync), close()
 * (BufferError while a view of it exists; the mapping is released when the last view goes),
 * and ValueError on any use after close().
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <sys/mman.h>

typedef struct {
    PyObject_HEAD
    char *data;
    Py_ssize_t size;
    int writable;
    Py_ssize_t exports;
} FileMap;

static int
filemap_check(FileMap *self)
{
    if (self->data == NULL) {
        PyErr_SetString(PyExc_ValueError, "file map closed");
        return -1;
    }
    return 0;
}

static void
filemap_release(FileMap *self)
{
    if (self->data != NULL) {
        munmap(self->data, (size_t)self->size);
        self->data = NULL;
    }
}

static void
filemap_dealloc(FileMap *self)
{
    filemap_release(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
filemap_getbuffer(FileMap *self, Py_buffer *view, int flags)
{
    if (filemap_check(self) < 0) {
        return -1;
    }
    if ((flags & PyBUF_WRITABLE) && !self->writable) {
        PyErr_SetString(PyExc_BufferError, "file map is read-only");
        return -1;
    }
    if (PyBuffer_FillInfo(view, (PyObject *)self, self->data, self->size, !self->writable,
                          flags) < 0) {
        return -1;
    }
    self->exports++;
    return 0;
}

static void
filemap_releasebuffer(FileMap *self, Py_buffer *view)
{
    (void)view;
    self->exports--;
}

static Py_ssize_t
filemap_length(FileMap *self)
{
    if (filemap_check(self) < 0) {
        return -1;
    }
    return self->size;
}

static PyObject *
filemap_subscript(FileMap *self, PyObject *item)
{
    if (filemap_check(self) < 0) {
        return NULL;
    }
    if (PyIndex_Check(item)) {
        Py_ssize_t i = PyNumber_AsSsize_t(item, PyExc_IndexError);
        if (i == -1 && PyErr_Occurred()) {
            return NULL;
        }
        if (i < 0) {
            i += self->size;
        }
        if (i < 0 || i >= self->size) {
            PyErr_SetString(PyExc_IndexError, "file map index out of range");
            return NULL;
        }
        return PyLong_FromLong((unsigned char)self->data[i]);
    }
    if (PySlice_Check(item)) {
        Py_ssize_t start, stop, step;
        if (PySlice_Unpack(item, &start, &stop, &step) < 0) {
            return NULL;
        }
        Py_ssize_t count = PySlice_AdjustIndices(self->size, &start, &stop, step);
        if (step != 1) {
            PyErr_SetString(PyExc_ValueError, "file map slices take no step");
            return NULL;
        }
        return PyBytes_FromStringAndSize(self->data + start, count);
    }
    PyErr_SetString(PyExc_TypeError, "file map indices must be integers or slices");
    return NULL;
}

static PyObject *
filemap_flush(FileMap *self, PyObject *Py_UNUSED(ignored))
{
    if (filemap_check(self) < 0) {
        return NULL;
    }
    if (!self->writable) {
        Py_RETURN_NONE;
    }
    /* Held as an export while the GIL is released: a close() meanwhile (the event loop
     * parking the index while a worker flushes it) raises BufferError instead of unmapping
     * under msync. */
    int result;
    self->exports++;
    Py_BEGIN_ALLOW_THREADS
    result = msync(self->data, (size_t)self->size, MS_SYNC);
    Py_END_ALLOW_THREADS
    self->exports--;
    if (result != 0) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_NONE;
}

static PyObject *
filemap_close(FileMap *self, PyObject *Py_UNUSED(ignored))
{
    if (self->exports > 0) {
        PyErr_SetString(PyExc_BufferError, "cannot close a file map while views of it exist");
        return NULL;
    }
    filemap_release(self);
    Py_RETURN_NONE;
}

static PyObject *
filemap_closed(FileMap *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(self->data == NULL);
}

static PyMethodDef filemap_methods[] = {
    {"flush", (PyCFunction)filemap_flush, METH_NOARGS,
     "Write the mapping's dirty pages to the file and wait (msync MS_SYNC)."},
    {"close", (PyCFunction)filemap_close, METH_NOARGS,
     "Unmap; BufferError while a view exists. Closing twice does nothing."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef filemap_getset[] = {
    {"closed", (getter)filemap_closed, NULL, "Whether close() was called.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyBufferProcs filemap_as_buffer = {
    (getbufferproc)filemap_getbuffer,
    (releasebufferproc)filemap_releasebuffer,
};

static PyMappingMethods filemap_as_mapping = {
    (lenfunc)filemap_length,
    (binaryfunc)filemap_subscript,
    NULL,
};

static PyTypeObject FileMapType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "josefk.fileio._cmap.FileMap",
    .tp_basicsize = sizeof(FileMap),
    .tp_dealloc = (destructor)filemap_dealloc,
    .tp_as_buffer = &filemap_as_buffer,
    .tp_as_mapping = &filemap_as_mapping,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A shared mapping of a file that keeps no descriptor (see map_file).",
    .tp_methods = filemap_methods,
    .tp_getset = filemap_getset,
};

static PyObject *
map_file(PyObject *module, PyObject *args)
{
    (void)module;
    int fd, writable;
    Py_ssize_t length;
    if (!PyArg_ParseTuple(args, "inp:map_file", &fd, &length, &writable)) {
        return NULL;
    }
    if (length <= 0) {
        PyErr_SetString(PyExc_ValueError, "cannot map an empty length");
        return NULL;
    }
    int protection = writable ? (PROT_READ | PROT_WRITE) : PROT_READ;
    void *data;
    Py_BEGIN_ALLOW_THREADS
    data = mmap(NULL, (size_t)length, protection, MAP_SHARED, fd, 0);
    Py_END_ALLOW_THREADS
    if (data == MAP_FAILED) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    FileMap *self = PyObject_New(FileMap, &FileMapType);
    if (self == NULL) {
        munmap(data, (size_t)length);
        return NULL;
    }
    self->data = data;
    self->size = length;
    self->writable = writable;
    self->exports = 0;
    return (PyObject *)self;
}

static PyMethodDef module_methods[] = {
    {"map_file", map_file, METH_VARARGS,
     "map_file(fd, length, writable) -> FileMap: a MAP_SHARED mapping of the first length "
     "bytes of the open file fd, which the caller may close at once."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef cmap_module = {
    PyModuleDef_HEAD_INIT,
    "josefk.fileio._cmap",
    "File maps that keep no file descriptor (see josefk.fileio.map_file).",
    -1,
    module_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__cmap(void)
{
    if (PyType_Ready(&FileMapType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&cmap_module);
    if (module == NULL) {
        return NULL;
    }
    Py_INCREF(&FileMapType);
    if (PyModule_AddObject(module, "FileMap", (PyObject *)&FileMapType) < 0) {
        Py_DECREF(&FileMapType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
