/* wire._record_kernel: scan_records compiled. The reference, with the full contract, is
 * scan_records in wire/record_kernel.py; this file must give the same answers
 * (tests/wire/test_record_kernel.py holds the two together). Built by setup.py as an optional
 * extension: without a compiler the Python version is used. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

enum { DONE = 0, MORE = 1, BAD = 2 };
enum { OK = 0, OVERLONG = 1, NEG_LENGTH = 2, OVERRUN = 3, NEG_HEADERS = 4, NEG_HEADER_KEY = 5,
       NOT_FILLED = 6 };

/* Kafka's readVarint (5 bytes, low 32 bits) / readVarlong (10 bytes, low 64 bits), zigzag.
 * Returns OK, OVERRUN (the field passes `stop`) or OVERLONG. */
static inline int read_varint(const uint8_t *b, Py_ssize_t *q, Py_ssize_t stop, int wide,
                              int64_t *out) {
    uint64_t raw = 0;
    int limit = wide ? 10 : 5;
    Py_ssize_t p = *q;
    for (int i = 0; i < limit; i++) {
        if (p >= stop)
            return OVERRUN;
        uint8_t c = b[p++];
        if (i < 10)
            raw |= (uint64_t)(c & 0x7F) << (7 * i < 64 ? 7 * i : 63);
        if (c < 0x80) {
            if (wide) {
                *out = (int64_t)((raw >> 1) ^ (uint64_t)(-(int64_t)(raw & 1)));
            } else {
                uint32_t r = (uint32_t)raw;
                *out = (int32_t)((r >> 1) ^ (uint32_t)(-(int32_t)(r & 1)));
            }
            *q = p;
            return OK;
        }
    }
    return OVERLONG;
}

static PyObject *scan_records(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, end, max_records, first_index;
    long long base_ts, now, before_max, after_max;
    int check_ts, need_keys;
    PyObject *bad_keys, *bad_ts;
    if (!PyArg_ParseTuple(args, "y*nnnnLLLLppO!O!", &view, &pos, &end, &max_records,
                          &first_index, &base_ts, &now, &before_max, &after_max, &check_ts,
                          &need_keys, &PyList_Type, &bad_keys, &PyList_Type, &bad_ts))
        return NULL;
    const uint8_t *b = (const uint8_t *)view.buf;
    if (end > view.len)
        end = view.len;
    if (pos < 0 || pos > end) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "scan_records: pos outside the buffer");
        return NULL;
    }
    int64_t max_ts = -1;
    int consecutive = 1, status = DONE;
    Py_ssize_t n = 0, need = 0, start = pos;
    while (n < max_records) {
        start = pos;
        int64_t length, ts_delta, offset_delta, key_len, value_len, headers, size;
        Py_ssize_t q = pos;
        int r = read_varint(b, &q, end, 0, &length);
        if (r == OVERRUN) { status = MORE; need = 0; break; }
        if (r != OK) { status = BAD; need = r; break; }
        if (length < 0) { status = BAD; need = NEG_LENGTH; break; }
        Py_ssize_t stop = q + (Py_ssize_t)length;
        if (stop > end) { status = MORE; need = stop - start; break; }
        q += 1; /* attributes */
        if (q > stop) { status = BAD; need = OVERRUN; break; }
#define FIELD(wide, var) \
        if ((r = read_varint(b, &q, stop, (wide), &(var))) != OK) { status = BAD; need = r; break; }
#define SKIP(sz) \
        if ((sz) > 0) { if ((sz) > stop - q) { status = BAD; need = OVERRUN; break; } q += (Py_ssize_t)(sz); }
        FIELD(1, ts_delta)
        FIELD(0, offset_delta)
        FIELD(0, key_len)
        SKIP(key_len)
        FIELD(0, value_len)
        SKIP(value_len)
        FIELD(0, headers)
        if (headers < 0) { status = BAD; need = NEG_HEADERS; break; }
        int header_failed = 0;
        for (int64_t h = 0; h < headers; h++) {
            if ((r = read_varint(b, &q, stop, 0, &size)) != OK) { need = r; header_failed = 1; break; }
            if (size < 0) { need = NEG_HEADER_KEY; header_failed = 1; break; }
            if (size > stop - q) { need = OVERRUN; header_failed = 1; break; }
            q += (Py_ssize_t)size;
            if ((r = read_varint(b, &q, stop, 0, &size)) != OK) { need = r; header_failed = 1; break; }
            if (size > 0) {
                if (size > stop - q) { need = OVERRUN; header_failed = 1; break; }
                q += (Py_ssize_t)size;
            }
        }
        if (header_failed) { status = BAD; break; }
        if (q != stop) { status = BAD; need = NOT_FILLED; break; }
#undef FIELD
#undef SKIP
        Py_ssize_t index = first_index + n;
        int64_t ts = (int64_t)((uint64_t)base_ts + (uint64_t)ts_delta);
        if (ts > max_ts)
            max_ts = ts;
        if (offset_delta != index)
            consecutive = 0;
        if (need_keys && key_len < 0) {
            PyObject *i = PyLong_FromSsize_t(index);
            if (i == NULL || PyList_Append(bad_keys, i) < 0) { Py_XDECREF(i); goto fail; }
            Py_DECREF(i);
        } else if (check_ts && ts != -1) {
            int64_t diff = (int64_t)((uint64_t)now - (uint64_t)ts);
            int64_t neg = (int64_t)(0 - (uint64_t)diff);
            if (diff > before_max || neg > after_max) {
                PyObject *t = Py_BuildValue("(nLL)", index, (long long)ts, (long long)offset_delta);
                if (t == NULL || PyList_Append(bad_ts, t) < 0) { Py_XDECREF(t); goto fail; }
                Py_DECREF(t);
            }
        }
        pos = stop;
        n++;
    }
    PyBuffer_Release(&view);
    if (status != DONE)
        pos = start;
    return Py_BuildValue("(inn nLO)", status, pos, n, need, (long long)max_ts,
                         consecutive ? Py_True : Py_False);
fail:
    PyBuffer_Release(&view);
    return NULL;
}

static PyMethodDef methods[] = {
    {"scan_records", scan_records, METH_VARARGS, "See wire/record_kernel.py."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_record_kernel", NULL, -1, methods};

PyMODINIT_FUNC PyInit__record_kernel(void) { return PyModule_Create(&module); }
