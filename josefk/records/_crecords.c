/* Optional C accelerator for josefk.records: the validator's one pass over a batch's records,
   and the producer's encoding of one record into a batch.

   Owns three functions and a type. scan_records is the C twin of
   josefk.records.scan._scan_records_python (the pure-Python fallback; both must give the
   same results, and a property test holds them to it). It walks records laid out as in josefk/records/record.py's docstring,
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

   accept_plain_batches(data, crc32c, max_bytes, ts_low, ts_high, check_timestamps,
                        keys_required) -> (record_count, has_producer_id, spans) | None

       The produce validator's fast path (josefk.records.scan.accept_plain_batches says
       what it takes): a buffer of whole uncompressed v2 batches that pass every check with
       nothing to correct comes back as one (position, batch length, last offset delta, max
       timestamp) span per batch; anything else is None, never an error, and the Python
       validator decides it. `crc32c` is the CRC function the rest of josefk uses.

   RecordWriter(header_size, *, keep_times=False)

       A batch's record bytes and counts (josefk.records.builder.PyRecordWriter is its Python
       twin; a property test holds them to the same results). `buffer` is a bytearray that
       starts with `header_size` zero bytes; `record_count`, `base_timestamp`,
       `max_timestamp` and `last_offset_delta` are what the batch header needs.
       append(key, value, headers, timestamp) encodes a record at the next offset as
       append_record does and returns its offset delta, or None for a record append_record
       declines or whose timestamp is no int within int64 (or whose delta is not); the
       caller then encodes it and calls note(offset_delta, timestamp). With `keep_times`
       each record's timestamp and the CLOCK_MONOTONIC time of its append (the clock of
       time.perf_counter) are kept in C arrays: timestamp(i), appended_at(i), and
       latencies(until), each record's seconds from its append to `until`. release()
       drops the buffer and keeps the rest. The producer's per-record path is this one call.

   Imports nothing from Python.
*/

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <time.h>

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

/* ---------------------------------------------------------------- accept_plain_batches */

static inline int64_t
be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return (int64_t)v;
}

static inline int32_t
be32(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8)
                     | (uint32_t)p[3]);
}

static inline int16_t
be16(const unsigned char *p)
{
    return (int16_t)(((uint16_t)p[0] << 8) | (uint16_t)p[1]);
}

/* 1 when the records of one uncompressed batch (`p` from its first record to `stop`) are
   exactly `count` well-framed records, with keys when `keys_required` and, when
   `check_timestamps`, timestamps within [ts_low, ts_high] (or -1); their largest timestamp
   delta in *max_delta. 0 for anything else. */
static int
records_acceptable(const unsigned char *p, Py_ssize_t at, Py_ssize_t stop, Py_ssize_t count,
                   int64_t base_timestamp, int64_t ts_low, int64_t ts_high, int check_timestamps,
                   int keys_required, int64_t *max_delta)
{
    *max_delta = INT64_MIN;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t length, delta = 0;
        int has_key = 0;
        if (read_varint(p, &at, stop, 5, &length) <= 0 || length <= 0 || length > stop - at)
            return 0;
        if (check_body(p, at, at + (Py_ssize_t)length, &delta, &has_key) != NULL)
            return 0;
        if (keys_required && !has_key)
            return 0;
        if (check_timestamps) {
            int64_t timestamp;
            if (__builtin_add_overflow(base_timestamp, delta, &timestamp))
                return 0;
            if (timestamp != -1 && (timestamp < ts_low || timestamp > ts_high))
                return 0;
        }
        if (delta > *max_delta)
            *max_delta = delta;
        at += (Py_ssize_t)length;
    }
    return at == stop;
}

/* accept_plain_batches(data, crc32c, max_bytes, ts_low, ts_high, check_timestamps,
                        keys_required) -> (record_count, has_producer_id, spans) | None */
static PyObject *
accept_plain_batches(PyObject *Py_UNUSED(self), PyObject *args)
{
    Py_buffer view;
    PyObject *crc32c;
    long long max_bytes, ts_low, ts_high;
    int check_timestamps, keys_required;
    if (!PyArg_ParseTuple(args, "y*OLLLpp", &view, &crc32c, &max_bytes, &ts_low, &ts_high,
                          &check_timestamps, &keys_required))
        return NULL;
    const unsigned char *p = (const unsigned char *)view.buf;
    Py_ssize_t end = view.len, position = 0;
    long long record_count = 0;
    int has_producer_id = 0;
    PyObject *spans = PyList_New(0);
    if (spans == NULL)
        goto fail;
    while (position < end) {
        if (end - position < 61)
            goto decline;
        const unsigned char *b = p + position;
        Py_ssize_t size = (Py_ssize_t)be32(b + 8) + 12;
        if (size < 61 || size > end - position || size > max_bytes)
            goto decline;
        int16_t attributes = be16(b + 21);
        int32_t last_offset_delta = be32(b + 23), count = be32(b + 57);
        int64_t base_timestamp = be64(b + 27), max_timestamp = be64(b + 35);
        int64_t producer_id = be64(b + 43);
        /* Base offset 0, magic 2, uncompressed, no control batch, a transactional batch
           with a producer id, records numbered 0..count-1: anything else is the Python
           validator's to refuse. */
        if (be64(b) != 0 || b[16] != 2 || (attributes & 0x07) || (attributes & 0x20)
            || ((attributes & 0x10) && producer_id < 0) || count <= 0
            || last_offset_delta != count - 1)
            goto decline;
        PyObject *region = PyMemoryView_FromMemory((char *)b + 21, size - 21, PyBUF_READ);
        if (region == NULL)
            goto fail;
        PyObject *computed = PyObject_CallOneArg(crc32c, region);
        Py_DECREF(region);
        if (computed == NULL)
            goto fail;
        unsigned long crc = PyLong_AsUnsignedLong(computed);
        Py_DECREF(computed);
        if (crc == (unsigned long)-1 && PyErr_Occurred())
            goto fail;
        if (crc != (uint32_t)be32(b + 17))
            goto decline;
        int create_time = !(attributes & 0x08);
        int64_t max_delta;
        if (!records_acceptable(p, position + 61, position + size, count, base_timestamp, ts_low,
                                ts_high, check_timestamps && create_time, keys_required,
                                &max_delta))
            goto decline;
        if (create_time) {
            /* The max timestamp the records give, as the validator computes it: a batch
               whose header says otherwise is the validator's to correct. */
            int64_t computed_max;
            if (__builtin_add_overflow(base_timestamp, max_delta, &computed_max))
                goto decline;
            if (computed_max < -1)
                computed_max = -1;
            if (computed_max != max_timestamp)
                goto decline;
        }
        PyObject *span = Py_BuildValue("(nnnL)", position, size - 12,
                                       (Py_ssize_t)last_offset_delta, (long long)max_timestamp);
        if (span == NULL)
            goto fail;
        int rc = PyList_Append(spans, span);
        Py_DECREF(span);
        if (rc < 0)
            goto fail;
        record_count += count;
        has_producer_id |= producer_id >= 0;
        position += size;
    }
    PyBuffer_Release(&view);
    if (PyList_GET_SIZE(spans) == 0) {
        Py_DECREF(spans);
        Py_RETURN_NONE;
    }
    PyObject *result = Py_BuildValue("(LON)", record_count, has_producer_id ? Py_True : Py_False,
                                     spans);
    return result;
decline:
    PyBuffer_Release(&view);
    Py_DECREF(spans);
    Py_RETURN_NONE;
fail:
    PyBuffer_Release(&view);
    Py_XDECREF(spans);
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

/* Appends one record to the bytearray `out`: 1 when appended, 0 when declined (`out` as it
   was; see append_record in the header comment), -1 with an exception set. */
static int
encode_record(PyObject *out, long long offset_delta, long long timestamp_delta, PyObject *key_obj,
              PyObject *value_obj, PyObject *headers)
{
    if (offset_delta < 0 || offset_delta > INT32_MAX)
        return 0;
    const char *key, *value;
    Py_ssize_t key_len, value_len;
    if (!bytes_piece(key_obj, out, &key, &key_len) || !bytes_piece(value_obj, out, &value, &value_len))
        return 0;
    if (!PyList_CheckExact(headers) && !PyTuple_CheckExact(headers))
        return 0;
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
            return 0;
        body += field_size(hkey_len) + field_size(hvalue_len);
    }
    if (body > INT32_MAX)
        return 0;

    Py_ssize_t start = PyByteArray_GET_SIZE(out);
    Py_ssize_t end = start + uvarint_size((uint64_t)body << 1) + body;
    if (end >= ((PyByteArrayObject *)out)->ob_alloc) {
        /* Grow to twice the size needed, then set the size back: the second resize only
           moves the end (a bytearray shrinks in place down to half its allocation). */
        if (PyByteArray_Resize(out, end * 2) < 0)
            return -1;
    }
    if (PyByteArray_Resize(out, end) < 0)
        return -1;
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
    return 1;
}

static PyObject *
append_record(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "append_record takes 6 arguments");
        return NULL;
    }
    PyObject *out = args[0];
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
    int done = encode_record(out, offset_delta, timestamp_delta, args[3], args[4], args[5]);
    if (done < 0)
        return NULL;
    return PyBool_FromLong(done);
}

/* ---------------------------------------------------------------- RecordWriter */

typedef struct {
    PyObject_HEAD
    PyObject *buffer; /* bytearray: the batch header's room, then the records; NULL once released */
    Py_ssize_t record_count;
    long long base_timestamp;
    long long max_timestamp;
    long long last_offset_delta;
    int keep_times;
    Py_ssize_t times_capacity;
    long long *timestamps; /* each record's timestamp, when keep_times */
    double *appended_at;   /* CLOCK_MONOTONIC seconds (time.perf_counter's clock) of each append */
} RecordWriter;

static int
writer_has_buffer(RecordWriter *self)
{
    if (self->buffer == NULL) {
        PyErr_SetString(PyExc_ValueError, "RecordWriter: the records were released");
        return 0;
    }
    return 1;
}

/* Counts a record of offset delta `offset_delta` and timestamp `timestamp` just written. */
static int
writer_note(RecordWriter *self, long long offset_delta, long long timestamp)
{
    if (self->keep_times) {
        if (self->record_count == self->times_capacity) {
            Py_ssize_t capacity = self->times_capacity ? self->times_capacity * 2 : 64;
            long long *timestamps = PyMem_Realloc(self->timestamps, capacity * sizeof(long long));
            if (timestamps == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            self->timestamps = timestamps;
            double *appended_at = PyMem_Realloc(self->appended_at, capacity * sizeof(double));
            if (appended_at == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            self->appended_at = appended_at;
            self->times_capacity = capacity;
        }
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        self->timestamps[self->record_count] = timestamp;
        self->appended_at[self->record_count] = (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
    }
    if (self->record_count == 0)
        self->base_timestamp = self->max_timestamp = timestamp;
    else if (timestamp > self->max_timestamp)
        self->max_timestamp = timestamp;
    self->record_count++;
    self->last_offset_delta = offset_delta;
    return 0;
}

static PyObject *
writer_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"header_size", "keep_times", NULL};
    Py_ssize_t header_size;
    int keep_times = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "n|$p", keywords, &header_size, &keep_times))
        return NULL;
    if (header_size < 0) {
        PyErr_SetString(PyExc_ValueError, "header_size must not be negative");
        return NULL;
    }
    RecordWriter *self = (RecordWriter *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->buffer = PyByteArray_FromStringAndSize(NULL, header_size);
    if (self->buffer == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    memset(PyByteArray_AS_STRING(self->buffer), 0, (size_t)header_size);
    self->base_timestamp = self->max_timestamp = -1;
    self->last_offset_delta = -1;
    self->keep_times = keep_times;
    return (PyObject *)self;
}

static void
writer_dealloc(RecordWriter *self)
{
    Py_XDECREF(self->buffer);
    PyMem_Free(self->timestamps);
    PyMem_Free(self->appended_at);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* append(key, value, headers, timestamp) -> offset delta | None */
static PyObject *
writer_append(RecordWriter *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "append takes 4 arguments");
        return NULL;
    }
    if (!writer_has_buffer(self))
        return NULL;
    PyObject *timestamp_obj = args[3];
    if (!PyLong_CheckExact(timestamp_obj))
        Py_RETURN_NONE;
    int overflow;
    long long timestamp = PyLong_AsLongLongAndOverflow(timestamp_obj, &overflow);
    if (overflow)
        Py_RETURN_NONE;
    if (timestamp == -1 && PyErr_Occurred())
        return NULL;
    long long timestamp_delta = 0;
    if (self->record_count
        && __builtin_sub_overflow(timestamp, self->base_timestamp, &timestamp_delta))
        Py_RETURN_NONE;
    long long offset_delta = self->last_offset_delta + 1;
    int done = encode_record(self->buffer, offset_delta, timestamp_delta, args[0], args[1], args[2]);
    if (done <= 0)
        return done < 0 ? NULL : Py_NewRef(Py_None);
    if (writer_note(self, offset_delta, timestamp) < 0)
        return NULL; /* the record is in the buffer but not counted: the batch is unusable */
    return PyLong_FromLongLong(offset_delta);
}

static PyObject *
writer_note_method(RecordWriter *self, PyObject *args)
{
    long long offset_delta, timestamp;
    if (!PyArg_ParseTuple(args, "LL", &offset_delta, &timestamp))
        return NULL;
    if (!writer_has_buffer(self))
        return NULL;
    if (offset_delta <= self->last_offset_delta || offset_delta > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "offset delta %lld does not follow %lld", offset_delta,
                     self->last_offset_delta);
        return NULL;
    }
    if (writer_note(self, offset_delta, timestamp) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static int
writer_index(RecordWriter *self, PyObject *arg, Py_ssize_t *index)
{
    if (!self->keep_times) {
        PyErr_SetString(PyExc_ValueError, "RecordWriter made without keep_times");
        return 0;
    }
    *index = PyLong_AsSsize_t(arg);
    if (*index == -1 && PyErr_Occurred())
        return 0;
    if (*index < 0 || *index >= self->record_count) {
        PyErr_SetString(PyExc_IndexError, "record index out of range");
        return 0;
    }
    return 1;
}

static PyObject *
writer_timestamp(RecordWriter *self, PyObject *arg)
{
    Py_ssize_t index;
    if (!writer_index(self, arg, &index))
        return NULL;
    return PyLong_FromLongLong(self->timestamps[index]);
}

static PyObject *
writer_appended_at(RecordWriter *self, PyObject *arg)
{
    Py_ssize_t index;
    if (!writer_index(self, arg, &index))
        return NULL;
    return PyFloat_FromDouble(self->appended_at[index]);
}

static PyObject *
writer_latencies(RecordWriter *self, PyObject *arg)
{
    double until = PyFloat_AsDouble(arg);
    if (until == -1.0 && PyErr_Occurred())
        return NULL;
    if (!self->keep_times) {
        PyErr_SetString(PyExc_ValueError, "RecordWriter made without keep_times");
        return NULL;
    }
    PyObject *list = PyList_New(self->record_count);
    if (list == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < self->record_count; i++) {
        PyObject *latency = PyFloat_FromDouble(until - self->appended_at[i]);
        if (latency == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, latency);
    }
    return list;
}

static PyObject *
writer_release(RecordWriter *self, PyObject *Py_UNUSED(ignored))
{
    Py_CLEAR(self->buffer);
    Py_RETURN_NONE;
}

static PyObject *
writer_get_buffer(RecordWriter *self, void *Py_UNUSED(closure))
{
    if (!writer_has_buffer(self))
        return NULL;
    return Py_NewRef(self->buffer);
}

static PyObject *
writer_get_record_count(RecordWriter *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(self->record_count);
}

static PyObject *
writer_get_base_timestamp(RecordWriter *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(self->base_timestamp);
}

static PyObject *
writer_get_max_timestamp(RecordWriter *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(self->max_timestamp);
}

static PyObject *
writer_get_last_offset_delta(RecordWriter *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(self->last_offset_delta);
}

static PyMethodDef writer_methods[] = {
    {"append", (PyCFunction)(void (*)(void))writer_append, METH_FASTCALL,
     PyDoc_STR("append(key, value, headers, timestamp) -> offset delta, or None when declined")},
    {"note", (PyCFunction)writer_note_method, METH_VARARGS,
     PyDoc_STR("note(offset_delta, timestamp): count a record the caller wrote into buffer")},
    {"timestamp", (PyCFunction)writer_timestamp, METH_O,
     PyDoc_STR("timestamp(index) -> the record's timestamp (keep_times)")},
    {"appended_at", (PyCFunction)writer_appended_at, METH_O,
     PyDoc_STR("appended_at(index) -> time.perf_counter() clock at its append (keep_times)")},
    {"latencies", (PyCFunction)writer_latencies, METH_O,
     PyDoc_STR("latencies(until) -> [until - appended_at(i) for each record] (keep_times)")},
    {"release", (PyCFunction)writer_release, METH_NOARGS,
     PyDoc_STR("release(): drop the buffer, keep the counts and times")},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef writer_getset[] = {
    {"buffer", (getter)writer_get_buffer, NULL, NULL, NULL},
    {"record_count", (getter)writer_get_record_count, NULL, NULL, NULL},
    {"base_timestamp", (getter)writer_get_base_timestamp, NULL, NULL, NULL},
    {"max_timestamp", (getter)writer_get_max_timestamp, NULL, NULL, NULL},
    {"last_offset_delta", (getter)writer_get_last_offset_delta, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject RecordWriterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "josefk.records._crecords.RecordWriter",
    .tp_doc = PyDoc_STR("RecordWriter(header_size, *, keep_times=False): see the module comment"),
    .tp_basicsize = sizeof(RecordWriter),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = writer_new,
    .tp_dealloc = (destructor)writer_dealloc,
    .tp_methods = writer_methods,
    .tp_getset = writer_getset,
};

static PyMethodDef module_methods[] = {
    {"scan_records", scan_records, METH_VARARGS,
     PyDoc_STR("scan_records(data, position, count, first_index, base_timestamp, ts_low, "
               "ts_high, check_timestamps, keys_required, final) -> (position, scanned, "
               "max_delta, keyless, bad_timestamps, error)")},
    {"accept_plain_batches", accept_plain_batches, METH_VARARGS,
     PyDoc_STR("accept_plain_batches(data, crc32c, max_bytes, ts_low, ts_high, "
               "check_timestamps, keys_required) -> (record_count, has_producer_id, spans) "
               "or None")},
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
    if (PyType_Ready(&RecordWriterType) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL)
        return NULL;
    if (PyModule_AddObjectRef(module, "RecordWriter", (PyObject *)&RecordWriterType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
