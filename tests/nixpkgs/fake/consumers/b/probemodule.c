/* B's Python extension, `probe`: importing it loads libprobe.so and so libcuda.so.1.
   probe.init() returns libprobe's probe_init(). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

int probe_init(void);

static PyObject *init(PyObject *self, PyObject *args) {
  (void)self;
  (void)args;
  return PyLong_FromLong(probe_init());
}

static PyMethodDef methods[] = {
    {"init", init, METH_NOARGS, "cuInit(0), through libprobe.so"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "probe", NULL, -1, methods};

PyMODINIT_FUNC PyInit_probe(void) { return PyModule_Create(&module); }
