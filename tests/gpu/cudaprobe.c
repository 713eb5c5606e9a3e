/* B's Python extension for tests/gpu/consumers.sh: importing it loads libvecadd.so, which needs
   libcuda.so.1 (a DT_NEEDED, as llama_cpp's libllama.so). describe() answers (status, device
   count, name of device 0) from the driver API; vecadd(n) adds two vectors on the GPU and returns
   the number of wrong elements (-1 when a CUDA call fails). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

int gpu_describe(char *name, int len, int *count);
int vecadd_check(int n);

static PyObject *describe(PyObject *self, PyObject *args) {
  (void)self;
  (void)args;
  char name[256] = "";
  int count = 0;
  int r = gpu_describe(name, sizeof name, &count);
  return Py_BuildValue("(iis)", r, count, name);
}

static PyObject *vecadd(PyObject *self, PyObject *args) {
  (void)self;
  int n;
  if (!PyArg_ParseTuple(args, "i", &n)) return NULL;
  return PyLong_FromLong(vecadd_check(n));
}

static PyMethodDef methods[] = {
    {"describe", describe, METH_NOARGS, "(status, device count, name of device 0)"},
    {"vecadd", vecadd, METH_VARARGS, "wrong elements of a checked vector add on the GPU"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "cudaprobe", NULL, -1, methods};

PyMODINIT_FUNC PyInit_cudaprobe(void) { return PyModule_Create(&module); }
