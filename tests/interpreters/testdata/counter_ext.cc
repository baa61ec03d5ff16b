// A test-only CPython extension module with C-level static state, built the
// way Debian builds extension modules (not linked to libpython). The pool has
// never seen it before the test imports it: it must be copied for each
// interpreter, and each copy must keep its own counter.
#include <Python.h>

namespace {

long g_counter = 0;  // one per loaded copy of this module

PyObject* Increment(PyObject*, PyObject*) { return PyLong_FromLong(++g_counter); }
PyObject* Value(PyObject*, PyObject*) { return PyLong_FromLong(g_counter); }

PyMethodDef kMethods[] = {
    {"increment", Increment, METH_NOARGS, "increment() -> new counter value"},
    {"value", Value, METH_NOARGS, "value() -> counter value"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "manypy_counter_ext", "test module", -1, kMethods,
                       nullptr, nullptr, nullptr, nullptr};

}  // namespace

extern "C" PyMODINIT_FUNC PyInit_manypy_counter_ext() { return PyModule_Create(&kModule); }
