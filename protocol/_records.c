/*
 * The record walk of the produce path: every record of a magic-2 batch's (decompressed) records section
 * checked the way Kafka's DefaultRecord.readFrom reads it, at C speed and without a Python object per
 * record. See odradek/protocol/record_walk.py, the one caller, for what the results mean.
 *
 * walk(records, count, base_timestamp, is_log_append_time, log_append_time, now, before_max, after_max,
 *      check_timestamps, require_keys) -> (max_timestamp, offsets_in_sequence, errors)
 *
 * records           a buffer holding exactly the records of one batch (after decompression)
 * count             the batch's recordsCount (>= 0)
 * is_log_append_time  a LogAppendTime batch: every record's timestamp is log_append_time (its max timestamp)
 * check_timestamps  compare each record's timestamp with now - before_max .. now + after_max (KIP-937)
 * require_keys      a record without a key is an error (compacted topics)
 *
 * max_timestamp is the largest record timestamp, or -1 (NO_TIMESTAMP) when none is larger;
 * offsets_in_sequence says whether the offset deltas are 0, 1, 2, ...; errors is None, or a list of
 * (record index, kind, timestamp, offset delta) with kind 0 for a missing key and 1 for a timestamp out of
 * range, as Kafka's LogValidator.validateRecord reports them (a key error hides a timestamp error).
 *
 * Malformed records raise MalformedRecords(kind, message): kind 0 for what Kafka reports as
 * InvalidRecordException, kind 1 for a record length varint longer than five bytes, which Kafka's
 * uncompressed iterator lets escape as an IllegalArgumentException (UNKNOWN_SERVER_ERROR).
 *
 * A large section (RELEASE_GIL_BYTES or more) is walked without the GIL, taken back only to report: the
 * produce path walks such batches on a worker thread, and the event loop must run meanwhile. A small one
 * keeps the GIL, as taking it back could wait a whole switch interval for another thread.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static PyObject *MalformedRecords;

enum { MALFORMED = 0, OVERLONG_LENGTH = 1 };
enum { MISSING_KEY = 0, TIMESTAMP_OUT_OF_RANGE = 1 };
enum { OK = 0, TRUNCATED = -1, OVERLONG = -2 };

#define RELEASE_GIL_BYTES (1 << 20)

/* Run `stmt` (which calls into Python) holding the GIL, when the walk released it. */
#define WITH_GIL(stmt)                                                                                     \
    do {                                                                                                   \
        if (released != NULL)                                                                              \
            PyEval_RestoreThread(released);                                                                \
        stmt;                                                                                              \
        if (released != NULL)                                                                              \
            released = PyEval_SaveThread();                                                                \
    } while (0)

typedef struct {
    const uint8_t *p;
    const uint8_t *end;
} cursor;

/* Zigzag varint of at most 5 bytes (ByteUtils.readVarint): the 5th byte's extra bits are dropped as Java's
 * int arithmetic drops them. */
static inline int read_varint(cursor *c, int32_t *out) {
    if (c->p < c->end && *c->p < 0x80) { /* most varints in a record are one byte */
        uint32_t b = *c->p++;
        *out = (int32_t)((b >> 1) ^ (~(b & 1) + 1));
        return OK;
    }
    uint32_t value = 0;
    for (int shift = 0; shift < 35; shift += 7) {
        if (c->p >= c->end)
            return TRUNCATED;
        uint8_t b = *c->p++;
        value |= (uint32_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = (int32_t)((value >> 1) ^ (~(value & 1) + 1));
            return OK;
        }
    }
    return OVERLONG;
}

/* Zigzag varlong of at most 10 bytes (ByteUtils.readVarlong). */
static inline int read_varlong(cursor *c, int64_t *out) {
    if (c->p < c->end && *c->p < 0x80) {
        uint64_t b = *c->p++;
        *out = (int64_t)((b >> 1) ^ (~(b & 1) + 1));
        return OK;
    }
    uint64_t value = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (c->p >= c->end)
            return TRUNCATED;
        uint8_t b = *c->p++;
        value |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = (int64_t)((value >> 1) ^ (~(value & 1) + 1));
            return OK;
        }
    }
    return OVERLONG;
}

/* A varint-prefixed byte field inside the record: a negative length is null (allowed unless !nullable). */
static inline int skip_bytes(cursor *c, int nullable, int *is_null) {
    int32_t length;
    if (read_varint(c, &length) != OK)
        return -1;
    if (length < 0) {
        if (is_null)
            *is_null = 1;
        return nullable ? 0 : -1;
    }
    if (is_null)
        *is_null = 0;
    if ((Py_ssize_t)length > c->end - c->p)
        return -1;
    c->p += length;
    return 0;
}

static PyObject *malformed(int kind, const char *format, ...) {
    va_list args;
    va_start(args, format);
    PyObject *message = PyUnicode_FromFormatV(format, args);
    va_end(args);
    if (message != NULL) {
        PyObject *exc_args = Py_BuildValue("(iN)", kind, message);
        if (exc_args != NULL) {
            PyErr_SetObject(MalformedRecords, exc_args);
            Py_DECREF(exc_args);
        }
    }
    return NULL;
}

static int add_error(PyObject **errors, Py_ssize_t index, int kind, int64_t timestamp, int32_t offset_delta) {
    if (*errors == NULL && (*errors = PyList_New(0)) == NULL)
        return -1;
    PyObject *item = Py_BuildValue("(niLi)", index, kind, (long long)timestamp, offset_delta);
    if (item == NULL)
        return -1;
    int rc = PyList_Append(*errors, item);
    Py_DECREF(item);
    return rc;
}

static PyObject *walk(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    Py_ssize_t count;
    long long base_timestamp, log_append_time, now, before_max, after_max;
    int is_log_append_time, check_timestamps, require_keys;
    if (!PyArg_ParseTuple(args, "y*nLpLLLLpp", &view, &count, &base_timestamp, &is_log_append_time, &log_append_time,
                          &now, &before_max, &after_max, &check_timestamps, &require_keys))
        return NULL;

    cursor c = {(const uint8_t *)view.buf, (const uint8_t *)view.buf + view.len};
    int64_t max_timestamp = -1; /* RecordBatch.NO_TIMESTAMP: Kafka's running max starts there */
    int in_sequence = 1;
    PyObject *errors = NULL;
    PyObject *result = NULL;
    PyThreadState *released = view.len >= RELEASE_GIL_BYTES ? PyEval_SaveThread() : NULL;

    for (Py_ssize_t index = 0; index < count; index++) {
        int32_t size, offset_delta, header_count;
        int64_t timestamp_delta;
        int rc = read_varint(&c, &size);
        if (rc == OVERLONG) {
            WITH_GIL(malformed(OVERLONG_LENGTH, "Varint is too long, the most significant bit in the 5th byte is set"));
            goto done;
        }
        if (rc != OK) {
            WITH_GIL(malformed(MALFORMED, "Incorrect declared batch size, premature EOF reached"));
            goto done;
        }
        if (size < 0 || (Py_ssize_t)size > c.end - c.p) {
            WITH_GIL(malformed(MALFORMED, "Invalid record size: expected %d bytes in record payload, but instead the buffer has only %zd remaining bytes.",
                      (int)size, (Py_ssize_t)(c.end - c.p)));
            goto done;
        }
        cursor r = {c.p, c.p + size};
        int keyless = 0;
        if (size < 1)
            goto invalid_structure;
        r.p++; /* attributes: unused */
        if (read_varlong(&r, &timestamp_delta) != OK || read_varint(&r, &offset_delta) != OK)
            goto invalid_structure;
        if (skip_bytes(&r, 1, &keyless) || skip_bytes(&r, 1, NULL) || read_varint(&r, &header_count) != OK)
            goto invalid_structure;
        if (header_count < 0 || (Py_ssize_t)header_count > r.end - r.p) {
            WITH_GIL(malformed(MALFORMED, "Found invalid number of record headers %d", (int)header_count));
            goto done;
        }
        for (int32_t h = 0; h < header_count; h++) {
            if (skip_bytes(&r, 0, NULL) || skip_bytes(&r, 1, NULL))
                goto invalid_structure;
        }
        if (r.p != r.end) {
            WITH_GIL(malformed(MALFORMED, "Invalid record size: expected to read %d bytes in record payload, but instead read %zd",
                      (int)size, (Py_ssize_t)(r.p - c.p)));
            goto done;
        }
        c.p = r.end;

        if (offset_delta != index)
            in_sequence = 0;
        /* Java long arithmetic wraps; so does this. */
        int64_t timestamp = is_log_append_time ? (int64_t)log_append_time
                                                  : (int64_t)((uint64_t)base_timestamp + (uint64_t)timestamp_delta);
        if (timestamp > max_timestamp)
            max_timestamp = timestamp;
        if (require_keys && keyless) {
            int failed;
            WITH_GIL(failed = add_error(&errors, index, MISSING_KEY, timestamp, offset_delta));
            if (failed)
                goto done;
        } else if (check_timestamps && timestamp != -1) {
            int64_t diff = (int64_t)((uint64_t)now - (uint64_t)timestamp);
            if (diff > before_max || (int64_t)(0 - (uint64_t)diff) > after_max) {
                int failed;
                WITH_GIL(failed = add_error(&errors, index, TIMESTAMP_OUT_OF_RANGE, timestamp, offset_delta));
                if (failed)
                    goto done;
            }
        }
        continue;
    invalid_structure:
        WITH_GIL(malformed(MALFORMED, "Found invalid record structure in record %zd", index));
        goto done;
    }
    if (released != NULL) {
        PyEval_RestoreThread(released);
        released = NULL;
    }
    if (c.p != c.end) {
        malformed(MALFORMED, "Incorrect declared batch size, records still remaining in file");
        goto done;
    }
    result = Py_BuildValue("(LOO)", (long long)max_timestamp, in_sequence ? Py_True : Py_False,
                           errors != NULL ? errors : Py_None);
done:
    if (released != NULL)
        PyEval_RestoreThread(released);
    Py_XDECREF(errors);
    PyBuffer_Release(&view);
    return result;
}

/*
 * header_class(cls): the class batch_header makes its headers of (record_batch.py's BatchHeader, given once
 * at its import), called with its 16 fields: the 13 in their order on the wire, then size, compression and
 * timestamp_type. A plain_init class (protocol/values.py), so the call fills its slots in C, with no
 * __init__ frame: most of what making a header cost on the produce path.
 *
 * batch_header(buf, pos, from_client) -> BatchHeader | None
 *
 * The magic-2 batch header at `pos`, its size, codec and timestamp type worked out (as parse_header does),
 * when the batch passes every check odradek/protocol/record_batch.py's read_batch_header makes (its size,
 * magic, length, codec id and CRC-32C) and, with `from_client`, those of _check_client_batch. None for
 * anything else, and before header_class: the caller then runs those Python checks, the reference, which
 * raise the refusal with its error and text. So this function only ever saves time: it never refuses, and
 * a batch it passes the reference passes too, with the same header (tests/protocol/test_record_batch.py
 * compares both on good, cut and corrupted batches).
 *
 * The CRC is the SSE4.2 crc32 instruction's; on a processor without it every batch goes to the reference.
 */
enum { HEADER_FIELDS = 16 };
static PyObject *header_type;

static PyObject *header_class(PyObject *self, PyObject *cls) {
    if (!PyType_Check(cls)) {
        PyErr_Format(PyExc_TypeError, "header_class: %R is no class", cls);
        return NULL;
    }
    Py_XSETREF(header_type, Py_NewRef(cls));
    Py_RETURN_NONE;
}

/* A header of these values (references released whatever happens; a NULL among them is an error raised). */
static PyObject *make_header(PyObject *values[HEADER_FIELDS]) {
    PyObject *header = NULL;
    int complete = 1;
    for (int i = 0; i < HEADER_FIELDS; i++)
        complete &= values[i] != NULL;
    if (complete)
        header = PyObject_Vectorcall(header_type, values, HEADER_FIELDS, NULL);
    for (int i = 0; i < HEADER_FIELDS; i++)
        Py_XDECREF(values[i]);
    return header;
}
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_CRC32C_INSTRUCTION 1
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(const uint8_t *p, Py_ssize_t n) {
    uint64_t crc = 0xFFFFFFFFu;
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        crc = __builtin_ia32_crc32di(crc, word);
        p += 8;
        n -= 8;
    }
    uint32_t crc32 = (uint32_t)crc;
    while (n-- > 0)
        crc32 = __builtin_ia32_crc32qi(crc32, *p++);
    return ~crc32;
}
#endif

static inline int64_t be64(const uint8_t *p) {
    return (int64_t)(((uint64_t)p[0] << 56) | ((uint64_t)p[1] << 48) | ((uint64_t)p[2] << 40) | ((uint64_t)p[3] << 32) |
                     ((uint64_t)p[4] << 24) | ((uint64_t)p[5] << 16) | ((uint64_t)p[6] << 8) | (uint64_t)p[7]);
}
static inline uint32_t be32u(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}
static inline int32_t be32(const uint8_t *p) { return (int32_t)be32u(p); }
static inline int16_t be16(const uint8_t *p) { return (int16_t)(((uint16_t)p[0] << 8) | (uint16_t)p[1]); }

enum { HEADER_SIZE = 61, LOG_OVERHEAD = 12, MAGIC_V2 = 2, MAX_COMPRESSION_ID = 4, COMPRESSION_MASK = 0x07, TIMESTAMP_TYPE_MASK = 0x08, CONTROL_FLAG = 0x20 };

static PyObject *batch_header(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "batch_header(buf, pos, from_client)");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred())
        return NULL;
    int from_client = PyObject_IsTrue(args[2]);
    if (from_client < 0)
        return NULL;
#ifdef HAVE_CRC32C_INSTRUCTION
    static int has_sse42 = -1;
    if (has_sse42 < 0) {
        __builtin_cpu_init();
        has_sse42 = __builtin_cpu_supports("sse4.2") ? 1 : 0;
    }
    if (!has_sse42 || header_type == NULL)
        Py_RETURN_NONE;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const uint8_t *b = (const uint8_t *)view.buf + pos;
    if (pos < 0 || view.len - pos < HEADER_SIZE || b[16] != MAGIC_V2)
        goto refer;
    int32_t batch_length = be32(b + 8);
    /* The length is checked against what remains before any sum: a huge one must not overflow. */
    if (batch_length < HEADER_SIZE - LOG_OVERHEAD || batch_length > view.len - pos - LOG_OVERHEAD)
        goto refer;
    int16_t attributes = be16(b + 21);
    if ((attributes & COMPRESSION_MASK) > MAX_COMPRESSION_ID)
        goto refer;
    uint32_t crc = be32u(b + 17);
    if (crc32c_sse42(b + 21, (Py_ssize_t)batch_length + LOG_OVERHEAD - 21) != crc)
        goto refer;
    int64_t base_offset = be64(b), producer_id = be64(b + 43);
    int32_t last_offset_delta = be32(b + 23), base_sequence = be32(b + 53), records_count = be32(b + 57);
    if (from_client && (base_offset != 0 || last_offset_delta < 0 || records_count <= 0 ||
                        (int64_t)records_count != (int64_t)last_offset_delta + 1 || (attributes & CONTROL_FLAG) ||
                        (producer_id >= 0 && base_sequence < 0)))
        goto refer;
    PyObject *values[HEADER_FIELDS] = {
        PyLong_FromLongLong(base_offset), PyLong_FromLong(batch_length), PyLong_FromLong(be32(b + 12)),
        PyLong_FromLong(MAGIC_V2), PyLong_FromUnsignedLong(crc), PyLong_FromLong(attributes),
        PyLong_FromLong(last_offset_delta), PyLong_FromLongLong(be64(b + 27)), PyLong_FromLongLong(be64(b + 35)),
        PyLong_FromLongLong(producer_id), PyLong_FromLong(be16(b + 51)), PyLong_FromLong(base_sequence),
        PyLong_FromLong(records_count),
        /* size, compression, timestamp type: as record_batch.py's _header works them out */
        PyLong_FromLongLong((long long)batch_length + LOG_OVERHEAD), PyLong_FromLong(attributes & COMPRESSION_MASK),
        PyLong_FromLong((attributes & TIMESTAMP_TYPE_MASK) >> 3),
    };
    PyBuffer_Release(&view);
    return make_header(values);
refer:
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
#else
    (void)self;
    Py_RETURN_NONE;
#endif
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS, "Check every record of one batch's records section; see the module source."},
    {"batch_header", (PyCFunction)(void (*)(void))batch_header, METH_FASTCALL,
     "A good magic-2 batch header, or None for the Python checks to refuse; see the module source."},
    {"header_class", header_class, METH_O, "The class batch_header makes headers of; see the module source."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_records", "The produce path's batch header checks and record walk, in C.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__records(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    MalformedRecords = PyErr_NewException("odradek.protocol._records.MalformedRecords", PyExc_ValueError, NULL);
    if (MalformedRecords == NULL || PyModule_AddObjectRef(m, "MalformedRecords", MalformedRecords) < 0) {
        Py_XDECREF(MalformedRecords);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
