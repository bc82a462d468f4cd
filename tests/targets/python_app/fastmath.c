/* A C extension for the mixed Python + native tracing test: fastmath.dot(a, b) sums a[i] * b[i] in fm_dot. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

__attribute__((noinline)) double fm_dot(const double *a, const double *b, int n) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += a[i] * b[i];
    return sum;
}

static int to_doubles(PyObject *list, double *out, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        out[i] = PyFloat_AsDouble(PyList_GetItem(list, i));
        if (PyErr_Occurred()) return -1;
    }
    return 0;
}

static PyObject *dot(PyObject *self, PyObject *args) {
    PyObject *a, *b;
    double x[16], y[16];
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &a, &PyList_Type, &b)) return NULL;
    Py_ssize_t n = PyList_Size(a);
    if (n != PyList_Size(b) || n > 16) {
        PyErr_SetString(PyExc_ValueError, "two lists of the same length, at most 16");
        return NULL;
    }
    if (to_doubles(a, x, n) || to_doubles(b, y, n)) return NULL;
    return PyFloat_FromDouble(fm_dot(x, y, (int)n));
}

static PyMethodDef methods[] = {{"dot", dot, METH_VARARGS, "The dot product of two lists of floats."},
                                {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "fastmath", NULL, -1, methods};

PyMODINIT_FUNC PyInit_fastmath(void) { return PyModule_Create(&module); }
