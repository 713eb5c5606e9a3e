/* chainpkg.chainmod: calls through libouter.so into libinner.so, and lists the objects the
 * loader mapped (dl_iterate_phdr), so the test can see which copies of the libraries loaded. */
#define _GNU_SOURCE
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <link.h>

#include "chain.h"

static PyObject *chain_outer_value(PyObject *self, PyObject *args)
{
    int x;
    (void)self;
    if (!PyArg_ParseTuple(args, "i", &x))
        return NULL;
    return PyLong_FromLong(outer_value(x));
}

static int add_object(struct dl_phdr_info *info, size_t size, void *data)
{
    PyObject *list = data;
    PyObject *name;
    (void)size;
    if (info->dlpi_name == NULL || info->dlpi_name[0] == '\0')
        return 0;
    name = PyUnicode_DecodeFSDefault(info->dlpi_name);
    if (name == NULL)
        return 1;
    if (PyList_Append(list, name) < 0) {
        Py_DECREF(name);
        return 1;
    }
    Py_DECREF(name);
    return 0;
}

static PyObject *chain_loaded_objects(PyObject *self, PyObject *unused)
{
    PyObject *list = PyList_New(0);
    (void)self;
    (void)unused;
    if (list == NULL)
        return NULL;
    if (dl_iterate_phdr(add_object, list) != 0) {
        Py_DECREF(list);
        return NULL;
    }
    return list;
}

static PyMethodDef chain_methods[] = {
    {"outer_value", chain_outer_value, METH_VARARGS, "outer_value(x) from libouter.so"},
    {"loaded_objects", chain_loaded_objects, METH_NOARGS, "paths of the loaded shared objects"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef chain_module = {
    PyModuleDef_HEAD_INIT, "chainpkg.chainmod", NULL, -1, chain_methods,
};

PyMODINIT_FUNC PyInit_chainmod(void) { return PyModule_Create(&chain_module); }
