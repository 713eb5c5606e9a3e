/* A Python extension that needs libcuda.so.1: importing it loads the library (a DT_NEEDED), and
 * cudaprobe.init() returns what cuInit answered (34 from the stub, 0 from the fake driver). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

int cuInit(unsigned int flags);

static PyObject *probe_init(PyObject *self, PyObject *args) {
  (void)self;
  (void)args;
  return PyLong_FromLong(cuInit(0));
}

static PyMethodDef methods[] = {
    {"init", probe_init, METH_NOARGS, "cuInit(0)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "cudaprobe", NULL, -1, methods};

PyMODINIT_FUNC PyInit_cudaprobe(void) { return PyModule_Create(&module); }
