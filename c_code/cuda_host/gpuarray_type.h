/*
 * cuda_host/gpuarray_type.h -- C helpers for aesara_bincount.gpu.GpuArrayType, whose
 * values are cupy.ndarray objects.
 *
 * The Type's c_declare / c_init / c_extract / c_sync / c_cleanup are one-line
 * calls into the bc_gpuarray_* functions below; Ops read the device pointer,
 * length and strides of their inputs with bc_gpuarray_info and allocate
 * outputs through CuPy (so that they live in CuPy's memory pool) with
 * bc_cupy_new.  CuPy is imported on first use.
 *
 * Valid C99 and C++ on its own (needs Python.h only).  All functions hold the
 * GIL and return 0 / non-NULL on success, -1 / NULL with a Python exception
 * set on failure.
 */
#ifndef AESARA_BINCOUNT_GPUARRAY_HELPER_H
#define AESARA_BINCOUNT_GPUARRAY_HELPER_H

#include <Python.h>
#include <string.h>

/* A borrowed reference to the attribute `name` of the cupy module (cached). */
static PyObject *bc_cupy_attr(const char *name)
{
    static PyObject *cupy = NULL;
    static PyObject *cache[4] = {NULL, NULL, NULL, NULL};
    static const char *names[4] = {"ndarray", "zeros", "empty", "cuda"};
    int i;
    for (i = 0; i < 4; i++) {
        if (strcmp(names[i], name) == 0)
            break;
    }
    if (i < 4 && cache[i] != NULL)
        return cache[i];
    if (cupy == NULL) {
        cupy = PyImport_ImportModule("cupy");
        if (cupy == NULL)
            return NULL;
    }
    if (i == 4) {
        PyErr_Format(PyExc_AttributeError, "bc_cupy_attr: %s is not cached", name);
        return NULL;
    }
    cache[i] = PyObject_GetAttrString(cupy, name);
    return cache[i];
}

/* c_extract: check that `py` is a cupy.ndarray of `dtype` with `ndim`
 * dimensions and store a new reference in *value. */
static int bc_gpuarray_extract(PyObject *py, PyObject **value, const char *dtype, int ndim)
{
    PyObject *ndarray, *attr;
    long got_ndim;
    int same;
    *value = NULL;
    if (py == Py_None) {
        PyErr_SetString(PyExc_ValueError, "expected a cupy.ndarray, not None");
        return -1;
    }
    ndarray = bc_cupy_attr("ndarray");
    if (ndarray == NULL)
        return -1;
    if (PyObject_IsInstance(py, ndarray) != 1) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "expected a cupy.ndarray, got %s", Py_TYPE(py)->tp_name);
        return -1;
    }
    attr = PyObject_GetAttrString(py, "ndim");
    if (attr == NULL)
        return -1;
    got_ndim = PyLong_AsLong(attr);
    Py_DECREF(attr);
    if (got_ndim == -1 && PyErr_Occurred())
        return -1;
    if (got_ndim != ndim) {
        PyErr_Format(PyExc_TypeError, "expected a cupy.ndarray of %d dimension(s), got %ld", ndim,
                     got_ndim);
        return -1;
    }
    attr = PyObject_GetAttrString(py, "dtype");
    if (attr != NULL) {
        PyObject *name = PyObject_GetAttrString(attr, "name");
        Py_DECREF(attr);
        attr = name;
    }
    if (attr == NULL)
        return -1;
    same = PyUnicode_Check(attr) && PyUnicode_CompareWithASCIIString(attr, dtype) == 0;
    if (!same) {
        PyErr_Format(PyExc_TypeError, "expected a cupy.ndarray of dtype %s, got %S", dtype, attr);
        Py_DECREF(attr);
        return -1;
    }
    Py_DECREF(attr);
    Py_INCREF(py);
    *value = py;
    return 0;
}

/* c_sync: make the Python-side storage `*py` refer to `value` (None if NULL). */
static void bc_gpuarray_sync(PyObject **py, PyObject *value)
{
    PyObject *old = *py;
    *py = value != NULL ? value : Py_None;
    Py_INCREF(*py);
    Py_XDECREF(old);
}

/* c_cleanup */
static void bc_gpuarray_cleanup(PyObject **value)
{
    Py_XDECREF(*value);
    *value = NULL;
}

/* What an Op needs to know of a 0-d or 1-d cupy.ndarray. */
typedef struct bc_gpuarray_info {
    unsigned long long ptr; /* device address of element 0 */
    long long length;       /* elements along the axis (1 when 0-d) */
    long long stride_bytes; /* stride in bytes (0 when 0-d), as CuPy gives it: the
                             * launchers check it is whole elements */
    int itemsize;           /* bytes of an element */
    int ndim;
    int device; /* CUDA device ordinal */
} bc_gpuarray_info;

static int bc_read_ll(PyObject *obj, const char *name, long long *value)
{
    PyObject *attr = PyObject_GetAttrString(obj, name);
    if (attr == NULL)
        return -1;
    *value = PyLong_AsLongLong(attr);
    Py_DECREF(attr);
    return (*value == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* The integer attribute `name` of `obj`, as an unsigned 64-bit value (a
 * device address or a stream handle). */
static int bc_read_ull(PyObject *obj, const char *name, unsigned long long *value)
{
    PyObject *attr = PyObject_GetAttrString(obj, name);
    if (attr == NULL)
        return -1;
    *value = PyLong_AsUnsignedLongLong(attr);
    Py_DECREF(attr);
    return (*value == (unsigned long long)-1 && PyErr_Occurred()) ? -1 : 0;
}

/* Device address of the first element of a cupy.ndarray (a.data.ptr). */
static int bc_gpuarray_ptr(PyObject *a, unsigned long long *ptr)
{
    PyObject *data = PyObject_GetAttrString(a, "data");
    int rc;
    if (data == NULL)
        return -1;
    rc = bc_read_ull(data, "ptr", ptr);
    Py_DECREF(data);
    return rc;
}

/* The CUDA device of the cupy.ndarray `a` (a.data.device_id) into *device. */
static int bc_gpuarray_device(PyObject *a, int *device)
{
    long long id;
    PyObject *data = PyObject_GetAttrString(a, "data");
    int rc;
    if (data == NULL)
        return -1;
    rc = bc_read_ll(data, "device_id", &id);
    Py_DECREF(data);
    if (rc == 0)
        *device = (int)id;
    return rc;
}

/* Fill *info for a 0-d or 1-d cupy.ndarray `a`; `what` names it in errors. */
static int bc_gpuarray_info_of(PyObject *a, const char *what, bc_gpuarray_info *info)
{
    long long ndim, itemsize;
    memset(info, 0, sizeof(*info));
    if (bc_read_ll(a, "ndim", &ndim) != 0 || bc_read_ll(a, "itemsize", &itemsize) != 0)
        return -1;
    if (ndim > 1 || itemsize <= 0) {
        PyErr_Format(PyExc_ValueError, "%s must have 0 or 1 dimensions, got %lld", what, ndim);
        return -1;
    }
    info->ndim = (int)ndim;
    info->itemsize = (int)itemsize;
    info->length = 1;
    if (ndim == 1) {
        PyObject *shape = PyObject_GetAttrString(a, "shape");
        PyObject *strides = shape ? PyObject_GetAttrString(a, "strides") : NULL;
        long long stride_bytes = 0;
        if (strides != NULL && PyTuple_Check(shape) && PyTuple_Check(strides) &&
            PyTuple_GET_SIZE(shape) == 1 && PyTuple_GET_SIZE(strides) == 1) {
            info->length = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, 0));
            stride_bytes = PyLong_AsLongLong(PyTuple_GET_ITEM(strides, 0));
        } else if (strides != NULL) {
            PyErr_Format(PyExc_TypeError, "%s: unexpected shape or strides", what);
        }
        Py_XDECREF(shape);
        Py_XDECREF(strides);
        if (PyErr_Occurred())
            return -1;
        info->stride_bytes = stride_bytes;
    }
    if (bc_gpuarray_ptr(a, &info->ptr) != 0)
        return -1;
    return bc_gpuarray_device(a, &info->device);
}

/* A new 1-d cupy.ndarray of `length` elements of `dtype` (a dtype or its name):
 * cupy.zeros when `zero`, else cupy.empty, allocated on CuPy's current
 * device and stream from its memory pool. */
static PyObject *bc_cupy_new(long long length, PyObject *dtype, int zero)
{
    PyObject *fn = bc_cupy_attr(zero ? "zeros" : "empty");
    if (fn == NULL)
        return NULL;
    return PyObject_CallFunction(fn, "(L)O", length, dtype);
}

/* The handle of CuPy's current stream (cupy.cuda.get_current_stream().ptr). */
static int bc_cupy_current_stream(unsigned long long *stream)
{
    PyObject *cuda = bc_cupy_attr("cuda"), *s;
    int rc;
    if (cuda == NULL)
        return -1;
    s = PyObject_CallMethod(cuda, "get_current_stream", NULL);
    if (s == NULL)
        return -1;
    rc = bc_read_ull(s, "ptr", stream);
    Py_DECREF(s);
    return rc;
}

#endif /* AESARA_BINCOUNT_GPUARRAY_HELPER_H */
