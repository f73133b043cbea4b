/*
 * The schema machine: Kafka messages decoded and encoded at C speed by running a program that
 * odradek/protocol/schema.py derives from a message's declaration at one version (the same `Message`
 * that its Python codec is generated from, so each message is still declared once). The Python codec
 * stays the reference: schema.py runs it whenever this machine refuses something (any exception here),
 * so that errors carry the reference's kind and text, and tests compare the two on every message version.
 *
 * A struct's program is a tuple:
 *   (container class, fields, absent, tag_defaults, flexible, tag_parsers, known_names, tagged, template)
 *   fields        ((name, op, encode default), ...) in wire order
 *   absent        ((name, kind, value), ...): the defaults to make afresh for each decoded struct, of fields
 *                 this version lacks, then tag_defaults those of its tagged fields (kind 1: a new empty list,
 *                 2: Container(value), 3: copy_default(value))
 *   template      a dict of every key in the decoded struct's order, holding the immutable defaults
 *   tag_parsers   {tag: (name, op)}, for decoding a flexible struct's tagged fields
 *   known_names   frozenset of the struct's field names (encoding refuses other keys) or None
 *   tagged        ((tag, name, op, encode default), ...) in tag order, for encoding
 * An op is (code | flags << 4, argument): flags COMPACT and NULLABLE; the argument is an array's element op,
 * or a struct's program.
 *
 * decode(programs, view, offset) -> (values, end): the parts one after the other from the buffer `view`;
 *   records fields are slices of `view`.
 * encode(programs, parts, framed) -> (bytes, splices): parts are (message, version, value), each written by
 *   its program; framed puts the 4-byte size first
 *   (counting the spliced records); splices are Splice(position, value) for records given as objects with
 *   a `length` (sent beside the frame).
 *
 * Bounds: every read is checked against the end of its range (a tagged field's range is its declared size),
 * array counts against the input's size, varints stop at five bytes, strings at 32,767 bytes: never a read
 * out of bounds, never an allocation the input's size does not pay for.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

enum {
    OP_BOOL, OP_INT8, OP_INT16, OP_UINT16, OP_INT32, OP_INT64, OP_FLOAT64, OP_UUID,
    OP_STRING, OP_BYTES, OP_RECORDS, OP_ARRAY, OP_STRUCT, OP_NULLABLE_STRUCT
};
enum { COMPACT = 1, NULLABLE = 2 };
enum { P_CLASS, P_FIELDS, P_ABSENT, P_TAG_DEFAULTS, P_FLEXIBLE, P_TAG_PARSERS, P_KNOWN, P_TAGGED, P_TEMPLATE };

static PyObject *DecodeError, *EncodeError, *ContainerBase, *copy_default, *uuid_of_bytes, *uuid_bytes, *SpliceClass;
static PyObject *empty_tuple, *str_unknown_tags, *str_length;

#define OP_WORD(op) ((int)PyLong_AsLong(PyTuple_GET_ITEM(op, 0)))
#define OP_ARG(op) PyTuple_GET_ITEM(op, 1)

/* ---------------------------------------------------------------------------------------------------- */
/* Decoding */

typedef struct {
    const uint8_t *buf;
    Py_ssize_t pos;
    Py_ssize_t end;  /* the end of this range: the input's, or a tagged field's */
    Py_ssize_t size; /* the input's size, which bounds array counts */
    PyObject *view;  /* the input, which records fields are slices of */
} reader;

static int fail(const char *message) {
    PyErr_SetString(DecodeError, message);
    return -1;
}

static inline int need(reader *r, Py_ssize_t n) {
    if (n < 0 || r->end - r->pos < n)
        return fail("truncated");
    return 0;
}

/* An unsigned varint of at most five bytes (up to 35 bits, as the reference reads it). */
static int read_uvarint(reader *r, int64_t *out) {
    uint64_t result = 0;
    for (int shift = 0; shift < 35; shift += 7) {
        if (r->pos >= r->end)
            return fail("truncated varint");
        uint8_t b = r->buf[r->pos++];
        result |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *out = (int64_t)result;
            return 0;
        }
    }
    return fail("unsigned varint longer than 5 bytes");
}

static inline int read_uvarint_fast(reader *r, int64_t *out) {
    if (r->pos < r->end && r->buf[r->pos] < 0x80) {
        *out = r->buf[r->pos++];
        return 0;
    }
    return read_uvarint(r, out);
}

static inline int16_t be16(const uint8_t *p) { return (int16_t)(((uint16_t)p[0] << 8) | p[1]); }
static inline int32_t be32(const uint8_t *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}
static inline int64_t be64(const uint8_t *p) {
    return (int64_t)(((uint64_t)(uint32_t)be32(p) << 32) | (uint32_t)be32(p + 4));
}

/* A length or count: compact (unsigned varint, less one) or of `width` bytes (2 or 4). */
static int read_length(reader *r, int compact, int width, int64_t *out) {
    if (compact) {
        if (read_uvarint_fast(r, out) < 0)
            return -1;
        *out -= 1;
        return 0;
    }
    if (need(r, width) < 0)
        return -1;
    *out = width == 2 ? be16(r->buf + r->pos) : be32(r->buf + r->pos);
    r->pos += width;
    return 0;
}

static PyObject *decode_struct(reader *r, PyObject *program);

static PyObject *decode_op(reader *r, PyObject *op) {
    int word = OP_WORD(op), code = word & 15, flags = word >> 4;
    int64_t n;
    const uint8_t *p;
    switch (code) {
    case OP_BOOL:
        if (need(r, 1) < 0)
            return NULL;
        return PyBool_FromLong(r->buf[r->pos++] != 0);
    case OP_INT8:
        if (need(r, 1) < 0)
            return NULL;
        return PyLong_FromLong((int8_t)r->buf[r->pos++]);
    case OP_INT16:
    case OP_UINT16:
        if (need(r, 2) < 0)
            return NULL;
        p = r->buf + r->pos;
        r->pos += 2;
        return PyLong_FromLong(code == OP_INT16 ? (long)be16(p) : (long)(uint16_t)be16(p));
    case OP_INT32:
        if (need(r, 4) < 0)
            return NULL;
        p = r->buf + r->pos;
        r->pos += 4;
        return PyLong_FromLong(be32(p));
    case OP_INT64:
        if (need(r, 8) < 0)
            return NULL;
        p = r->buf + r->pos;
        r->pos += 8;
        return PyLong_FromLongLong(be64(p));
    case OP_FLOAT64:
        if (need(r, 8) < 0)
            return NULL;
        p = r->buf + r->pos;
        r->pos += 8;
        {
            double d = PyFloat_Unpack8((const char *)p, 0);
            if (d == -1.0 && PyErr_Occurred())
                return NULL;
            return PyFloat_FromDouble(d);
        }
    case OP_UUID: {
        if (need(r, 16) < 0)
            return NULL;
        PyObject *raw = PyBytes_FromStringAndSize((const char *)r->buf + r->pos, 16);
        if (raw == NULL)
            return NULL;
        r->pos += 16;
        PyObject *result = PyObject_CallOneArg(uuid_of_bytes, raw);
        Py_DECREF(raw);
        return result;
    }
    case OP_STRING:
        if (read_length(r, flags & COMPACT, 2, &n) < 0)
            return NULL;
        if (n < 0) {
            if (n == -1 && (flags & NULLABLE))
                Py_RETURN_NONE;
            fail("bad string length");
            return NULL;
        }
        if (n > 0x7FFF) {
            fail("string field had invalid length");
            return NULL;
        }
        if (need(r, n) < 0)
            return NULL;
        p = r->buf + r->pos;
        r->pos += n;
        return PyUnicode_DecodeUTF8((const char *)p, n, NULL);
    case OP_BYTES:
        if (read_length(r, flags & COMPACT, 4, &n) < 0)
            return NULL;
        if (n < 0) {
            if (n == -1 && (flags & NULLABLE))
                Py_RETURN_NONE;
            fail("bad bytes length");
            return NULL;
        }
        if (need(r, n) < 0)
            return NULL;
        p = r->buf + r->pos;
        r->pos += n;
        return PyBytes_FromStringAndSize((const char *)p, n);
    case OP_RECORDS:
        if (read_length(r, flags & COMPACT, 4, &n) < 0)
            return NULL;
        if (n < 0) {
            if (n == -1)
                Py_RETURN_NONE; /* Kafka's records fields are nullable in every version */
            fail("bad records length");
            return NULL;
        }
        if (need(r, n) < 0)
            return NULL;
        r->pos += n;
        return PySequence_GetSlice(r->view, r->pos - n, r->pos);
    case OP_ARRAY: {
        if (read_length(r, flags & COMPACT, 4, &n) < 0)
            return NULL;
        if (n < 0) {
            if (n == -1 && (flags & NULLABLE))
                Py_RETURN_NONE;
            fail(n == -1 ? "null array in non-nullable field" : "bad array count");
            return NULL;
        }
        if (n > r->size) {
            fail("count exceeds the remaining input");
            return NULL;
        }
        /* Room made at once for no more elements than bytes remain (an element other than an empty struct takes
         * at least one): a hostile count costs no more memory than the input could fill. */
        Py_ssize_t room = r->end - r->pos;
        room = room < 0 ? 0 : (n < room ? (Py_ssize_t)n : room);
        PyObject *list = PyList_New(room);
        if (list == NULL)
            return NULL;
        PyObject *element = OP_ARG(op);
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *item = decode_op(r, element);
            if (item == NULL) {
                Py_DECREF(list);
                return NULL;
            }
            if (i < room) {
                PyList_SET_ITEM(list, i, item);
            } else {
                int rc = PyList_Append(list, item);
                Py_DECREF(item);
                if (rc < 0) {
                    Py_DECREF(list);
                    return NULL;
                }
            }
        }
        return list;
    }
    case OP_STRUCT:
        return decode_struct(r, OP_ARG(op));
    case OP_NULLABLE_STRUCT:
        if (need(r, 1) < 0)
            return NULL;
        if ((int8_t)r->buf[r->pos++] < 0)
            Py_RETURN_NONE;
        return decode_struct(r, OP_ARG(op));
    }
    PyErr_SetString(PyExc_SystemError, "unknown op");
    return NULL;
}

/* Set the defaults of ((name, kind, value), ...) in `result`. */
static int set_defaults(PyObject *result, PyObject *defaults) {
    Py_ssize_t count = PyTuple_GET_SIZE(defaults);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *entry = PyTuple_GET_ITEM(defaults, i);
        PyObject *value = PyTuple_GET_ITEM(entry, 2);
        int rc;
        switch (PyLong_AsLong(PyTuple_GET_ITEM(entry, 1))) {
        case 1:
            value = PyList_New(0);
            goto made;
        case 2: { /* Container(value), a flat struct's copy */
            PyObject *copy = ((PyTypeObject *)ContainerBase)->tp_new((PyTypeObject *)ContainerBase, empty_tuple, NULL);
            if (copy != NULL && PyDict_Update(copy, value) < 0)
                Py_CLEAR(copy);
            value = copy;
            goto made;
        }
        default:
            value = PyObject_CallOneArg(copy_default, value);
        made:
            if (value == NULL)
                return -1;
            rc = PyDict_SetItem(result, PyTuple_GET_ITEM(entry, 0), value);
            Py_DECREF(value);
        }
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* A flexible struct's tagged fields, in strictly increasing tag order, each consumed exactly. */
static int decode_tagged(reader *r, PyObject *result, PyObject *parsers) {
    if (r->pos < r->end && r->buf[r->pos] == 0) { /* most sections are empty */
        r->pos++;
        return 0;
    }
    int64_t count, tag, size, last = -1;
    if (read_uvarint(r, &count) < 0)
        return -1;
    for (int64_t i = 0; i < count; i++) {
        if (read_uvarint(r, &tag) < 0)
            return -1;
        if (tag <= last)
            return fail("tagged fields out of order");
        last = tag;
        if (read_uvarint(r, &size) < 0 || need(r, size) < 0)
            return -1;
        PyObject *key = PyLong_FromLongLong(tag);
        if (key == NULL)
            return -1;
        PyObject *known = PyDict_GetItemWithError(parsers, key);
        if (known == NULL) {
            if (PyErr_Occurred()) {
                Py_DECREF(key);
                return -1;
            }
            PyObject *unknown = PyDict_GetItemWithError(result, str_unknown_tags);
            if (unknown == NULL) {
                if (PyErr_Occurred() || (unknown = PyDict_New()) == NULL) {
                    Py_DECREF(key);
                    return -1;
                }
                int rc = PyDict_SetItem(result, str_unknown_tags, unknown);
                Py_DECREF(unknown);
                if (rc < 0) {
                    Py_DECREF(key);
                    return -1;
                }
            }
            PyObject *data = PyBytes_FromStringAndSize((const char *)r->buf + r->pos, (Py_ssize_t)size);
            int rc = data == NULL ? -1 : PyDict_SetItem(unknown, key, data);
            Py_XDECREF(data);
            Py_DECREF(key);
            if (rc < 0)
                return -1;
            r->pos += size;
            continue;
        }
        Py_DECREF(key);
        reader sub = *r;
        sub.end = r->pos + size;
        PyObject *value = decode_op(&sub, PyTuple_GET_ITEM(known, 1));
        if (value == NULL)
            return -1;
        int rc = PyDict_SetItem(result, PyTuple_GET_ITEM(known, 0), value);
        Py_DECREF(value);
        if (rc < 0)
            return -1;
        if (sub.pos != sub.end)
            return fail("tagged field: trailing bytes");
        r->pos = sub.end;
    }
    return 0;
}

static PyObject *decode_struct(reader *r, PyObject *program) {
    PyTypeObject *cls = (PyTypeObject *)PyTuple_GET_ITEM(program, P_CLASS);
    PyObject *result = cls->tp_new(cls, empty_tuple, NULL);
    if (result == NULL)
        return NULL;
    /* Every key at once, in the reference's order, immutable defaults in place: the decoded fields then
     * replace values rather than grow the dict key by key. */
    if (PyDict_Update(result, PyTuple_GET_ITEM(program, P_TEMPLATE)) < 0)
        goto error;
    PyObject *fields = PyTuple_GET_ITEM(program, P_FIELDS);
    Py_ssize_t count = PyTuple_GET_SIZE(fields);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *field = PyTuple_GET_ITEM(fields, i);
        PyObject *value = decode_op(r, PyTuple_GET_ITEM(field, 1));
        if (value == NULL)
            goto error;
        int rc = PyDict_SetItem(result, PyTuple_GET_ITEM(field, 0), value);
        Py_DECREF(value);
        if (rc < 0)
            goto error;
    }
    if (set_defaults(result, PyTuple_GET_ITEM(program, P_ABSENT)) < 0)
        goto error;
    if (PyTuple_GET_ITEM(program, P_FLEXIBLE) == Py_True) {
        if (set_defaults(result, PyTuple_GET_ITEM(program, P_TAG_DEFAULTS)) < 0)
            goto error;
        if (decode_tagged(r, result, PyTuple_GET_ITEM(program, P_TAG_PARSERS)) < 0)
            goto error;
    }
    return result;
error:
    Py_DECREF(result);
    return NULL;
}

static PyObject *decode(PyObject *self, PyObject *args) {
    PyObject *programs, *view;
    Py_ssize_t offset;
    if (!PyArg_ParseTuple(args, "O!On", &PyTuple_Type, &programs, &view, &offset))
        return NULL;
    if (offset < 0) {
        PyErr_SetString(PyExc_ValueError, "negative offset");
        return NULL;
    }
    Py_buffer buffer;
    if (PyObject_GetBuffer(view, &buffer, PyBUF_SIMPLE) < 0)
        return NULL;
    reader r = {(const uint8_t *)buffer.buf, offset, buffer.len, buffer.len, view};
    Py_ssize_t count = PyTuple_GET_SIZE(programs);
    PyObject *values = PyList_New(count);
    PyObject *result = NULL;
    if (values == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *value = decode_struct(&r, PyTuple_GET_ITEM(programs, i));
        if (value == NULL)
            goto done;
        PyList_SET_ITEM(values, i, value);
    }
    result = Py_BuildValue("(On)", values, r.pos);
done:
    Py_XDECREF(values);
    PyBuffer_Release(&buffer);
    return result;
}

/* ---------------------------------------------------------------------------------------------------- */
/* Encoding */

typedef struct {
    char *data;
    Py_ssize_t len, cap;
    PyObject *splices;      /* list of Splice, or NULL where records placeholders are refused */
    Py_ssize_t spliced;     /* the spliced records' total length */
} writer;

static int grow(writer *w, Py_ssize_t n) {
    if (w->len + n <= w->cap)
        return 0;
    Py_ssize_t cap = w->cap ? w->cap : 256;
    while (cap < w->len + n)
        cap *= 2;
    char *data = PyMem_Realloc(w->data, cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    w->data = data;
    w->cap = cap;
    return 0;
}

static inline int put(writer *w, const void *p, Py_ssize_t n) {
    if (grow(w, n) < 0)
        return -1;
    memcpy(w->data + w->len, p, n);
    w->len += n;
    return 0;
}

static inline int put_be(writer *w, uint64_t v, int width) {
    if (grow(w, width) < 0)
        return -1;
    for (int i = width - 1; i >= 0; i--) {
        w->data[w->len + i] = (char)(v & 0xFF);
        v >>= 8;
    }
    w->len += width;
    return 0;
}

static int put_uvarint(writer *w, uint64_t v) {
    if (grow(w, 10) < 0)
        return -1;
    while (v >= 0x80) {
        w->data[w->len++] = (char)((v & 0x7F) | 0x80);
        v >>= 7;
    }
    w->data[w->len++] = (char)v;
    return 0;
}

static int refuse(const char *message) {
    PyErr_SetString(EncodeError, message);
    return -1;
}

/* A length prefix: compact (unsigned varint of n + 1) or of `width` bytes (2 or 4); null is n = -1. */
static int put_length(writer *w, int compact, int width, Py_ssize_t n) {
    if (compact)
        return put_uvarint(w, (uint64_t)(n + 1));
    if (width == 4 && n > INT32_MAX)
        return refuse("length out of range");
    return put_be(w, (uint64_t)(int64_t)n, width);
}

static int put_integer(writer *w, PyObject *value, int code) {
    static const int widths[] = {[OP_INT8] = 1, [OP_INT16] = 2, [OP_UINT16] = 2, [OP_INT32] = 4, [OP_INT64] = 8};
    if (!PyLong_Check(value))
        return refuse("not an integer");
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    int ok;
    switch (code) {
    case OP_INT8: ok = v >= INT8_MIN && v <= INT8_MAX; break;
    case OP_INT16: ok = v >= INT16_MIN && v <= INT16_MAX; break;
    case OP_UINT16: ok = v >= 0 && v <= UINT16_MAX; break;
    case OP_INT32: ok = v >= INT32_MIN && v <= INT32_MAX; break;
    default: ok = 1;
    }
    if (overflow || !ok)
        return refuse("integer out of range");
    return put_be(w, (uint64_t)v, widths[code]);
}

/* The bytes of a bytes-like value the reference would write (bytes, bytearray, a 1-D byte memoryview). */
static int byte_view(PyObject *value, const char **p, Py_ssize_t *n) {
    if (PyBytes_Check(value)) {
        *p = PyBytes_AS_STRING(value);
        *n = PyBytes_GET_SIZE(value);
        return 1;
    }
    if (PyByteArray_Check(value)) {
        *p = PyByteArray_AS_STRING(value);
        *n = PyByteArray_GET_SIZE(value);
        return 1;
    }
    if (PyMemoryView_Check(value)) {
        Py_buffer *b = PyMemoryView_GET_BUFFER(value);
        if (b->ndim != 1 || b->itemsize != 1 || !PyBuffer_IsContiguous(b, 'C'))
            return refuse("not a byte buffer");
        *p = b->buf;
        *n = b->len;
        return 1;
    }
    return 0;
}

static int encode_struct(writer *w, PyObject *program, PyObject *value);

static int encode_op(writer *w, PyObject *op, PyObject *value) {
    int word = OP_WORD(op), code = word & 15, flags = word >> 4;
    const char *p;
    Py_ssize_t n;
    int is_bytes;
    switch (code) {
    case OP_BOOL: {
        int truth = PyObject_IsTrue(value);
        if (truth < 0)
            return -1;
        return put_be(w, (uint64_t)truth, 1);
    }
    case OP_INT8:
    case OP_INT16:
    case OP_UINT16:
    case OP_INT32:
    case OP_INT64:
        return put_integer(w, value, code);
    case OP_FLOAT64: {
        double d = PyFloat_AsDouble(value);
        if (d == -1.0 && PyErr_Occurred())
            return -1;
        if (grow(w, 8) < 0 || PyFloat_Pack8(d, w->data + w->len, 0) < 0)
            return -1;
        w->len += 8;
        return 0;
    }
    case OP_UUID: {
        PyObject *raw = PyObject_CallOneArg(uuid_bytes, value);
        if (raw == NULL)
            return -1;
        int rc = PyBytes_Check(raw) ? put(w, PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw)) : refuse("uuid");
        Py_DECREF(raw);
        return rc;
    }
    case OP_STRING:
        if (value == Py_None) {
            if (!(flags & NULLABLE))
                return refuse("null string in a non-nullable field");
            return put_length(w, flags & COMPACT, 2, -1);
        }
        if (!PyUnicode_Check(value))
            return refuse("not a string");
        p = PyUnicode_AsUTF8AndSize(value, &n);
        if (p == NULL)
            return -1;
        if (n > 0x7FFF)
            return refuse("string too long");
        if (put_length(w, flags & COMPACT, 2, n) < 0)
            return -1;
        return put(w, p, n);
    case OP_BYTES:
        if (value == Py_None) {
            if (!(flags & NULLABLE))
                return refuse("null bytes in a non-nullable field");
            return put_length(w, flags & COMPACT, 4, -1);
        }
        is_bytes = byte_view(value, &p, &n);
        if (is_bytes <= 0)
            return is_bytes < 0 ? -1 : refuse("not bytes");
        if (put_length(w, flags & COMPACT, 4, n) < 0)
            return -1;
        return put(w, p, n);
    case OP_RECORDS: {
        if (value == Py_None)
            return put_length(w, flags & COMPACT, 4, -1);
        is_bytes = byte_view(value, &p, &n);
        if (is_bytes < 0)
            return -1;
        if (is_bytes) {
            if (put_length(w, flags & COMPACT, 4, n) < 0)
                return -1;
            return put(w, p, n);
        }
        if (w->splices == NULL)
            return refuse("records placeholder outside a frame");
        PyObject *length = PyObject_GetAttr(value, str_length);
        if (length == NULL)
            return -1;
        n = PyLong_Check(length) ? PyLong_AsSsize_t(length) : -1;
        Py_DECREF(length);
        if (n < 0) {
            if (!PyErr_Occurred())
                refuse("bad records length");
            return -1;
        }
        if (put_length(w, flags & COMPACT, 4, n) < 0)
            return -1;
        PyObject *position = PyLong_FromSsize_t(w->len);
        if (position == NULL)
            return -1;
        PyObject *call_args[] = {position, value};
        PyObject *splice = PyObject_Vectorcall(SpliceClass, call_args, 2, NULL);
        Py_DECREF(position);
        if (splice == NULL)
            return -1;
        int rc = PyList_Append(w->splices, splice);
        Py_DECREF(splice);
        w->spliced += n;
        return rc;
    }
    case OP_ARRAY: {
        if (value == Py_None) {
            if (!(flags & NULLABLE))
                return refuse("null array in non-nullable field");
            return put_length(w, flags & COMPACT, 4, -1);
        }
        if (!PyList_Check(value) && !PyTuple_Check(value))
            return refuse("not a list");
        n = PySequence_Fast_GET_SIZE(value);
        if (put_length(w, flags & COMPACT, 4, n) < 0)
            return -1;
        PyObject *element = OP_ARG(op);
        /* A list's items are read by index each time: an element's encoding runs no Python that could change
         * it, but the size is checked again all the same. */
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(value); i++) {
            PyObject *item = PySequence_Fast_GET_ITEM(value, i);
            Py_INCREF(item);
            int rc = encode_op(w, element, item);
            Py_DECREF(item);
            if (rc < 0)
                return -1;
        }
        if (PySequence_Fast_GET_SIZE(value) != n)
            return refuse("list changed size");
        return 0;
    }
    case OP_STRUCT:
        return encode_struct(w, OP_ARG(op), value);
    case OP_NULLABLE_STRUCT:
        if (value == Py_None)
            return put_be(w, 0xFF, 1);
        if (put_be(w, 1, 1) < 0)
            return -1;
        return encode_struct(w, OP_ARG(op), value);
    }
    PyErr_SetString(PyExc_SystemError, "unknown op");
    return -1;
}

/* obj.get(name, default), borrowed. */
static inline PyObject *get(PyObject *obj, PyObject *name, PyObject *default_) {
    PyObject *value = PyDict_GetItemWithError(obj, name);
    if (value == NULL && !PyErr_Occurred())
        return default_;
    return value;
}

typedef struct {
    int64_t tag;
    PyObject *data; /* bytes (owned) */
} tagged_field;

static int by_tag(const void *a, const void *b) {
    int64_t x = ((const tagged_field *)a)->tag, y = ((const tagged_field *)b)->tag;
    return x < y ? -1 : x > y;
}

/* The tagged-field section: fields whose value is not their default, then unknown tags kept from a decode,
 * in tag order (stable: a known field before an unknown one of the same tag, as the reference sorts). */
static int encode_tagged(writer *w, PyObject *obj, PyObject *tagged) {
    PyObject *unknown = get(obj, str_unknown_tags, Py_None);
    if (unknown == NULL)
        return -1;
    if (unknown != Py_None && !PyDict_Check(unknown))
        return refuse("_unknown_tags is not a dict");
    Py_ssize_t known_count = PyTuple_GET_SIZE(tagged);
    Py_ssize_t unknown_count = unknown == Py_None ? 0 : PyDict_GET_SIZE(unknown);
    if (known_count + unknown_count == 0)
        return put_be(w, 0, 1);
    tagged_field *fields = PyMem_Calloc(known_count + unknown_count, sizeof(tagged_field));
    if (fields == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t count = 0;
    int rc = -1;
    for (Py_ssize_t i = 0; i < known_count; i++) {
        PyObject *entry = PyTuple_GET_ITEM(tagged, i);
        PyObject *default_ = PyTuple_GET_ITEM(entry, 3);
        PyObject *value = get(obj, PyTuple_GET_ITEM(entry, 1), default_);
        if (value == NULL)
            goto done;
        if (value == default_)
            continue;
        Py_INCREF(value);
        int same = PyObject_RichCompareBool(value, default_, Py_EQ);
        if (same != 0) {
            Py_DECREF(value);
            if (same < 0)
                goto done;
            continue;
        }
        writer sub = {NULL, 0, 0, NULL, 0};
        int built = encode_op(&sub, PyTuple_GET_ITEM(entry, 2), value);
        Py_DECREF(value);
        if (built == 0)
            fields[count].data = PyBytes_FromStringAndSize(sub.data ? sub.data : "", sub.len);
        PyMem_Free(sub.data);
        if (built < 0 || fields[count].data == NULL)
            goto done;
        fields[count++].tag = PyLong_AsLongLong(PyTuple_GET_ITEM(entry, 0));
    }
    if (unknown_count) {
        Py_ssize_t known = count, position = 0;
        PyObject *key, *data;
        while (PyDict_Next(unknown, &position, &key, &data)) {
            if (count == known_count + unknown_count || !PyLong_Check(key) || !PyBytes_Check(data)) {
                refuse("unknown tagged fields of another kind");
                goto done;
            }
            int overflow;
            long long tag = PyLong_AsLongLongAndOverflow(key, &overflow);
            if (overflow || tag < 0) {
                if (!PyErr_Occurred())
                    refuse("tag out of range");
                goto done;
            }
            Py_INCREF(data);
            fields[count].data = data;
            fields[count++].tag = tag;
        }
        /* Stable: qsort is not, so sort the unknown ones and merge them after known ones of equal tags. */
        qsort(fields + known, count - known, sizeof(tagged_field), by_tag);
        tagged_field *merged = PyMem_Calloc(count ? count : 1, sizeof(tagged_field));
        if (merged == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        Py_ssize_t a = 0, b = known, m = 0;
        while (a < known || b < count)
            merged[m++] = (b == count || (a < known && fields[a].tag <= fields[b].tag)) ? fields[a++] : fields[b++];
        memcpy(fields, merged, count * sizeof(tagged_field));
        PyMem_Free(merged);
    }
    if (put_uvarint(w, (uint64_t)count) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (put_uvarint(w, (uint64_t)fields[i].tag) < 0 || put_uvarint(w, (uint64_t)PyBytes_GET_SIZE(fields[i].data)) < 0 ||
            put(w, PyBytes_AS_STRING(fields[i].data), PyBytes_GET_SIZE(fields[i].data)) < 0)
            goto done;
    }
    rc = 0;
done:
    for (Py_ssize_t i = 0; i < count; i++)
        Py_XDECREF(fields[i].data);
    PyMem_Free(fields);
    return rc;
}

static int encode_struct(writer *w, PyObject *program, PyObject *obj) {
    if (!PyDict_Check(obj))
        return refuse("not a dict");
    PyObject *known = PyTuple_GET_ITEM(program, P_KNOWN);
    if (known != Py_None) {
        Py_ssize_t position = 0;
        PyObject *key, *value;
        while (PyDict_Next(obj, &position, &key, &value)) {
            int has = PySet_Contains(known, key);
            if (has <= 0)
                return has < 0 ? -1 : refuse("unknown field");
        }
    }
    PyObject *fields = PyTuple_GET_ITEM(program, P_FIELDS);
    Py_ssize_t count = PyTuple_GET_SIZE(fields);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *field = PyTuple_GET_ITEM(fields, i);
        PyObject *value = get(obj, PyTuple_GET_ITEM(field, 0), PyTuple_GET_ITEM(field, 2));
        if (value == NULL)
            return -1;
        Py_INCREF(value);
        int rc = encode_op(w, PyTuple_GET_ITEM(field, 1), value);
        Py_DECREF(value);
        if (rc < 0)
            return -1;
    }
    if (PyTuple_GET_ITEM(program, P_FLEXIBLE) == Py_True)
        return encode_tagged(w, obj, PyTuple_GET_ITEM(program, P_TAGGED));
    return 0;
}

static PyObject *encode(PyObject *self, PyObject *args) {
    PyObject *programs, *parts;
    int framed;
    if (!PyArg_ParseTuple(args, "O!O!p", &PyTuple_Type, &programs, &PyTuple_Type, &parts, &framed))
        return NULL;
    if (PyTuple_GET_SIZE(programs) != PyTuple_GET_SIZE(parts)) {
        PyErr_SetString(PyExc_ValueError, "a program for each part");
        return NULL;
    }
    writer w = {NULL, 0, 0, PyList_New(0), 0};
    PyObject *result = NULL, *data = NULL;
    if (w.splices == NULL)
        return NULL;
    if (framed && put_be(&w, 0, 4) < 0)
        goto done;
    Py_ssize_t count = PyTuple_GET_SIZE(parts);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *part = PyTuple_GET_ITEM(parts, i);
        if (!PyTuple_Check(part) || PyTuple_GET_SIZE(part) != 3) {
            PyErr_SetString(PyExc_TypeError, "a part is (message, version, value)");
            goto done;
        }
        if (encode_struct(&w, PyTuple_GET_ITEM(programs, i), PyTuple_GET_ITEM(part, 2)) < 0)
            goto done;
    }
    if (framed) {
        Py_ssize_t size = w.len - 4 + w.spliced;
        if (size > INT32_MAX) {
            refuse("frame too large");
            goto done;
        }
        for (int i = 3; i >= 0; i--, size >>= 8)
            w.data[i] = (char)(size & 0xFF);
    }
    data = PyBytes_FromStringAndSize(w.data ? w.data : "", w.len);
    if (data != NULL)
        result = PyTuple_Pack(2, data, w.splices);
done:
    Py_XDECREF(data);
    Py_DECREF(w.splices);
    PyMem_Free(w.data);
    return result;
}

/* ---------------------------------------------------------------------------------------------------- */

static PyObject *configure(PyObject *self, PyObject *args) {
    PyObject *objects[7];
    if (!PyArg_ParseTuple(args, "OOOOOOO", &objects[0], &objects[1], &objects[2], &objects[3], &objects[4], &objects[5], &objects[6]))
        return NULL;
    PyObject **targets[] = {&DecodeError, &EncodeError, &ContainerBase, &copy_default, &uuid_of_bytes, &uuid_bytes, &SpliceClass};
    for (int i = 0; i < 7; i++) {
        Py_INCREF(objects[i]);
        Py_XSETREF(*targets[i], objects[i]);
    }
    Py_RETURN_NONE;
}

/* A dict of these keys and values, sized for them at once (a struct's template, see decode_struct). */
static PyObject *template(PyObject *self, PyObject *args) {
    PyObject *names, *values;
    if (!PyArg_ParseTuple(args, "O!O!", &PyTuple_Type, &names, &PyTuple_Type, &values))
        return NULL;
    if (PyTuple_GET_SIZE(names) != PyTuple_GET_SIZE(values)) {
        PyErr_SetString(PyExc_ValueError, "as many values as names");
        return NULL;
    }
    PyObject *result = _PyDict_NewPresized(PyTuple_GET_SIZE(names));
    if (result == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
        if (PyDict_SetItem(result, PyTuple_GET_ITEM(names, i), PyTuple_GET_ITEM(values, i)) < 0) {
            Py_DECREF(result);
            return NULL;
        }
    }
    return result;
}

/*
 * Field(name): a decoded struct's field as an attribute (``body.acks``) of its Container class (a dict
 * subclass, see schema.py's _fields_container): reading it is a lookup of the key in the dict, setting and
 * deleting it set and delete the key, as the property of operator.itemgetter with setter and deleter that it
 * stands for (a missing key raises KeyError on reading, AttributeError on deleting). The property's read
 * went through the property, then a call of the itemgetter, about twice this one's instructions, and a
 * produce or fetch request reads a dozen to twenty fields.
 */
typedef struct {
    PyObject_HEAD
    PyObject *name;
} FieldObject;

static int field_init(PyObject *self, PyObject *args, PyObject *kwds) {
    PyObject *name;
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Field(name) takes no keyword arguments");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "U", &name))
        return -1;
    Py_XSETREF(((FieldObject *)self)->name, Py_NewRef(name));
    return 0;
}

static void field_dealloc(PyObject *self) {
    Py_XDECREF(((FieldObject *)self)->name);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *field_get(PyObject *self, PyObject *obj, PyObject *type) {
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    return PyObject_GetItem(obj, ((FieldObject *)self)->name);
}

static int field_set(PyObject *self, PyObject *obj, PyObject *value) {
    PyObject *name = ((FieldObject *)self)->name;
    if (value != NULL)
        return PyObject_SetItem(obj, name, value);
    if (PyObject_DelItem(obj, name) == 0)
        return 0;
    if (PyErr_ExceptionMatches(PyExc_KeyError)) {
        PyErr_Clear();
        PyErr_SetObject(PyExc_AttributeError, name);
    }
    return -1;
}

static PyMemberDef field_members[] = {
    {"name", T_OBJECT_EX, offsetof(FieldObject, name), READONLY, "The field's key in the struct's dict."},
    {NULL},
};

static PyTypeObject FieldType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "odradek.protocol._codec.Field",
    .tp_basicsize = sizeof(FieldObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A decoded struct's field read, set and deleted as its dict's key; see the module source.",
    .tp_new = PyType_GenericNew,
    .tp_init = field_init,
    .tp_dealloc = field_dealloc,
    .tp_descr_get = field_get,
    .tp_descr_set = field_set,
    .tp_members = field_members,
};

/*
 * bind_arguments: the values a call gives `names` (the last len(defaults) with these defaults), bound as Python
 * binds a function's arguments to its parameters: the positional values first, then each remaining name by
 * keyword or its default. `values` (len(names) of them) receives borrowed references. A TypeError naming
 * `owner`.`method` (counting its implicit first parameter, cls or self, as Python does) for a surplus,
 * missing, repeated or unknown argument. The one binding of FieldsNew and of slots_init's classes.
 */
static int bind_arguments(const char *owner, const char *method, PyObject *names, PyObject *defaults, PyObject *const *args,
                          Py_ssize_t given, PyObject *kwnames, PyObject **values) {
    Py_ssize_t count = PyTuple_GET_SIZE(names), required = count - PyTuple_GET_SIZE(defaults);
    if (given > count) {
        PyErr_Format(PyExc_TypeError, "%s.%s() takes %zd positional arguments but %zd were given", owner, method, count + 1, given + 1);
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++)
        values[i] = i < given ? args[i] : NULL;
    Py_ssize_t by_name = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < by_name; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        Py_ssize_t index = 0;
        while (index < count && PyTuple_GET_ITEM(names, index) != key)
            index++;
        if (index == count) /* keyword names are interned as a rule: an uninterned one is compared by value */
            for (index = 0; index < count && PyUnicode_Compare(key, PyTuple_GET_ITEM(names, index)) != 0; index++) {
            }
        if (index == count) {
            PyErr_Format(PyExc_TypeError, "%s.%s() got an unexpected keyword argument %R", owner, method, key);
            return -1;
        }
        if (values[index] != NULL) {
            PyErr_Format(PyExc_TypeError, "%s.%s() got multiple values for argument %R", owner, method, key);
            return -1;
        }
        values[index] = args[given + k];
    }
    for (Py_ssize_t i = given; i < count; i++)
        if (values[i] == NULL) {
            if (i < required) {
                PyErr_Format(PyExc_TypeError, "%s.%s() missing required argument: %R", owner, method, PyTuple_GET_ITEM(names, i));
                return -1;
            }
            values[i] = PyTuple_GET_ITEM(defaults, i - required);
        }
    return 0;
}

/*
 * FieldsNew(fields, defaults): the __new__ of a protocol/values.py TupleFields class, a tuple subclass whose
 * items are `fields` (names) and whose last len(defaults) fields have these defaults: called as
 * __new__(cls, *values, **by_name) as the Python one it stands for (bind_arguments). The Python __new__ went
 * through a frame and tuple.__new__'s argument parsing and temporary tuple: ~2.9k instructions per tuple of
 * two fields, against ~1.6k with this one (most of it type_call's and the slot lookup of __new__), and the
 * network layer makes two per request. Called by vectorcall: no argument tuple either.
 */
typedef struct {
    PyObject_HEAD
    PyObject *fields;
    PyObject *defaults;
    vectorcallfunc vectorcall;
} FieldsNewObject;

static PyObject *fields_new_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    PyObject *fields = ((FieldsNewObject *)self)->fields;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 1 || !PyType_Check(args[0]) || !PyType_IsSubtype((PyTypeObject *)args[0], &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "__new__(cls, ...): cls must be a tuple class");
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)args[0];
    Py_ssize_t count = PyTuple_GET_SIZE(fields);
    PyObject *result = cls->tp_alloc(cls, count);
    if (result == NULL)
        return NULL;
    PyObject **items = ((PyTupleObject *)result)->ob_item;
    if (bind_arguments(cls->tp_name, "__new__", fields, ((FieldsNewObject *)self)->defaults, args + 1, nargs - 1, kwnames, items) < 0) {
        memset(items, 0, (size_t)count * sizeof *items); /* borrowed: nothing of them to release */
        Py_DECREF(result);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++)
        Py_INCREF(items[i]);
    return result;
}

static int fields_new_init(PyObject *self, PyObject *args, PyObject *kwds) {
    PyObject *fields, *defaults;
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "FieldsNew(fields, defaults) takes no keyword arguments");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "O!O!", &PyTuple_Type, &fields, &PyTuple_Type, &defaults))
        return -1;
    if (PyTuple_GET_SIZE(defaults) > PyTuple_GET_SIZE(fields)) {
        PyErr_SetString(PyExc_ValueError, "FieldsNew: more defaults than fields");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fields); i++)
        if (!PyUnicode_Check(PyTuple_GET_ITEM(fields, i))) {
            PyErr_SetString(PyExc_TypeError, "FieldsNew: the fields are names");
            return -1;
        }
    Py_XSETREF(((FieldsNewObject *)self)->fields, Py_NewRef(fields));
    Py_XSETREF(((FieldsNewObject *)self)->defaults, Py_NewRef(defaults));
    ((FieldsNewObject *)self)->vectorcall = fields_new_call; /* uninitialised, a call is refused (PyVectorcall_Call) */
    return 0;
}

static void fields_new_dealloc(PyObject *self) {
    Py_XDECREF(((FieldsNewObject *)self)->fields);
    Py_XDECREF(((FieldsNewObject *)self)->defaults);
    Py_TYPE(self)->tp_free(self);
}

static PyTypeObject FieldsNewType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "odradek.protocol._codec.FieldsNew",
    .tp_basicsize = sizeof(FieldsNewObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A TupleFields class's __new__, in C; see the module source.",
    .tp_new = PyType_GenericNew,
    .tp_init = fields_new_init,
    .tp_dealloc = fields_new_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(FieldsNewObject, vectorcall),
};

/*
 * slots_init(cls, names, defaults): makes calling `cls` fill the instance's slots in C. `cls` is a class of
 * `type` whose __new__ is object's and whose __init__ only sets each of its parameters, `names`, to the slot
 * of the same name, the last len(defaults) of them with these defaults (protocol/values.py's plain_init
 * checks the __init__'s bytecode before asking this). Calling the class then runs no __init__: the instance
 * is allocated and its slots filled from the arguments as bind_arguments binds them. type_call, the slot lookup of
 * __init__, its argument tuple and its Python frame were ~1.5-2.5k instructions per object, and a small
 * produce or fetch makes half a dozen such objects.
 *
 * The class's `_plain_init` is the SlotsInit holding the slots' offsets, found by the class's own call
 * (tp_vectorcall, which a subclass does not inherit: its instances are made as before).
 */
enum { MAX_PLAIN_SLOTS = 16 };
typedef struct {
    PyObject_HEAD
    PyTypeObject *cls; /* borrowed: the class holds this object, and it is only compared with */
    PyObject *names;
    PyObject *defaults;
    Py_ssize_t offsets[MAX_PLAIN_SLOTS];
} SlotsInitObject;

static PyObject *str_plain_init;

static void slots_init_dealloc(PyObject *self) {
    Py_XDECREF(((SlotsInitObject *)self)->names);
    Py_XDECREF(((SlotsInitObject *)self)->defaults);
    Py_TYPE(self)->tp_free(self);
}

static PyTypeObject SlotsInitType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "odradek.protocol._codec.SlotsInit",
    .tp_basicsize = sizeof(SlotsInitObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A class's slots and defaults, for slots_init; see the module source.",
    .tp_dealloc = slots_init_dealloc,
};

static PyObject *plain_call(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    PyTypeObject *cls = (PyTypeObject *)callable;
    PyObject *found = _PyType_Lookup(cls, str_plain_init);
    if (found == NULL || !Py_IS_TYPE(found, &SlotsInitType) || ((SlotsInitObject *)found)->cls != cls) {
        PyErr_Format(PyExc_TypeError, "%s has no slots_init layout of its own", cls->tp_name);
        return NULL;
    }
    SlotsInitObject *layout = (SlotsInitObject *)found;
    PyObject *values[MAX_PLAIN_SLOTS];
    if (bind_arguments(cls->tp_name, "__init__", layout->names, layout->defaults, args, PyVectorcall_NARGS(nargsf), kwnames, values) < 0)
        return NULL;
    PyObject *made = cls->tp_alloc(cls, 0);
    if (made == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(layout->names); i++)
        *(PyObject **)((char *)made + layout->offsets[i]) = Py_NewRef(values[i]);
    return made;
}

static PyObject *slots_init(PyObject *self, PyObject *args) {
    PyObject *cls, *names, *defaults;
    if (!PyArg_ParseTuple(args, "O!O!O!", &PyType_Type, &cls, &PyTuple_Type, &names, &PyTuple_Type, &defaults))
        return NULL;
    PyTypeObject *type = (PyTypeObject *)cls;
    Py_ssize_t count = PyTuple_GET_SIZE(names);
    if (!Py_IS_TYPE(cls, &PyType_Type) || !(type->tp_flags & Py_TPFLAGS_HEAPTYPE) || type->tp_new != PyBaseObject_Type.tp_new) {
        PyErr_Format(PyExc_TypeError, "slots_init: %R is no class of type with object's __new__", cls);
        return NULL;
    }
    if (count > MAX_PLAIN_SLOTS || PyTuple_GET_SIZE(defaults) > count) {
        PyErr_Format(PyExc_ValueError, "slots_init: at most %d names, and no more defaults than names", MAX_PLAIN_SLOTS);
        return NULL;
    }
    SlotsInitObject *layout = PyObject_New(SlotsInitObject, &SlotsInitType);
    if (layout == NULL)
        return NULL;
    layout->cls = type;
    layout->names = Py_NewRef(names);
    layout->defaults = Py_NewRef(defaults);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        PyObject *descr = PyUnicode_Check(name) ? _PyType_Lookup(type, name) : NULL;
        if (descr == NULL || !Py_IS_TYPE(descr, &PyMemberDescr_Type) || ((PyMemberDescrObject *)descr)->d_member->type != T_OBJECT_EX) {
            PyErr_Format(PyExc_TypeError, "slots_init: %R is no slot of %R", name, cls);
            Py_DECREF(layout);
            return NULL;
        }
        layout->offsets[i] = ((PyMemberDescrObject *)descr)->d_member->offset;
    }
    int failed = PyObject_SetAttr(cls, str_plain_init, (PyObject *)layout);
    Py_DECREF(layout);
    if (failed)
        return NULL;
    type->tp_vectorcall = plain_call;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"template", template, METH_VARARGS, "template(names, values) -> dict, sized for them at once."},
    {"configure", configure, METH_VARARGS,
     "configure(DecodeError, EncodeError, Container, copy_default, uuid_of_bytes, uuid_bytes, Splice)"},
    {"decode", decode, METH_VARARGS, "decode(programs, view, offset) -> (values, end); see the module source."},
    {"encode", encode, METH_VARARGS, "encode(programs, parts, framed) -> (bytes, splices); see the module source."},
    {"slots_init", slots_init, METH_VARARGS, "slots_init(cls, names, defaults): cls made with its slots filled in C; see the module source."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_codec", "The schema machine: Kafka messages decoded and encoded in C.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__codec(void) {
    empty_tuple = PyTuple_New(0);
    str_unknown_tags = PyUnicode_InternFromString("_unknown_tags");
    str_length = PyUnicode_InternFromString("length");
    str_plain_init = PyUnicode_InternFromString("_plain_init");
    if (empty_tuple == NULL || str_unknown_tags == NULL || str_length == NULL || str_plain_init == NULL || PyType_Ready(&FieldType) < 0 ||
        PyType_Ready(&FieldsNewType) < 0 || PyType_Ready(&SlotsInitType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Field", (PyObject *)&FieldType) < 0 || PyModule_AddObjectRef(m, "FieldsNew", (PyObject *)&FieldsNewType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
