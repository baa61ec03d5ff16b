#include "interpreters/shim/python_convert.h"

#include <torch/csrc/autograd/python_variable.h>

#include <string>

#if MANYPY_TORCH_HOOKS
#include <ATen/ATen.h>
#include <c10/core/RefcountedDeleter.h>
#endif

#include "interpreters/python_error.h"

namespace manypy::shim {
namespace {

// Holds a new reference and drops it on scope exit.
struct Ref {
  PyObject* p;
  explicit Ref(PyObject* o) : p(o) {}
  ~Ref() { Py_XDECREF(p); }
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  PyObject* release() { PyObject* o = p; p = nullptr; return o; }
};

std::string Utf8(PyObject* s) {
  Py_ssize_t n = 0;
  const char* data = PyUnicode_AsUTF8AndSize(s, &n);
  if (data == nullptr) ThrowPythonError();
  return std::string(data, n);
}

// str(object), never throwing: used while converting an exception already.
std::string SafeStr(PyObject* object) {
  if (object == nullptr) return "";
  Ref s(PyObject_Str(object));
  if (s.p == nullptr) {
    PyErr_Clear();
    return "<unprintable>";
  }
  const char* data = PyUnicode_AsUTF8(s.p);
  if (data == nullptr) {
    PyErr_Clear();
    return "<unprintable>";
  }
  return data;
}

std::string QualifiedTypeName(PyObject* type) {
  Ref module(PyObject_GetAttrString(type, "__module__"));
  Ref qualname(PyObject_GetAttrString(type, "__qualname__"));
  PyErr_Clear();
  std::string name = qualname.p ? SafeStr(qualname.p) : reinterpret_cast<PyTypeObject*>(type)->tp_name;
  std::string mod = module.p ? SafeStr(module.p) : "";
  return mod.empty() || mod == "builtins" ? name : mod + "." + name;
}

std::string FormatTraceback(PyObject* type, PyObject* value, PyObject* tb) {
  Ref module(PyImport_ImportModule("traceback"));
  if (module.p == nullptr) return PyErr_Clear(), "";
  Ref lines(PyObject_CallMethod(module.p, "format_exception", "OOO", type,
                                value ? value : Py_None, tb ? tb : Py_None));
  if (lines.p == nullptr) return PyErr_Clear(), "";
  Ref empty(PyUnicode_FromString(""));
  Ref joined(PyUnicode_Join(empty.p, lines.p));
  if (joined.p == nullptr) return PyErr_Clear(), "";
  return SafeStr(joined.p);
}

[[noreturn]] void ThrowTypeError(const std::string& message) {
  throw PythonError("TypeError", message, "");
}

}  // namespace

void ThrowPythonError() {
  PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
  PyErr_Fetch(&type, &value, &tb);
  if (type == nullptr) throw PythonError("SystemError", "error reported without a Python exception", "");
  PyErr_NormalizeException(&type, &value, &tb);
  if (tb != nullptr && value != nullptr) PyException_SetTraceback(value, tb);
  std::string name = QualifiedTypeName(type);
  std::string message = SafeStr(value);
  std::string traceback = FormatTraceback(type, value, tb);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  throw PythonError(std::move(name), std::move(message), std::move(traceback));
}

// The tensor this interpreter gets for a host tensor: its own TensorImpl over
// the same bytes (no copy). PyTorch 2.x tags the StorageImpl too
// (StorageImpl::pyobj_slot): once one interpreter has wrapped a storage
// (torch.package's loader calls tensor._typed_storage() on every weight), a
// second interpreter may wrap it only while the first one's Python storage
// object is alive, else "cannot allocate PyObject for Tensor on interpreter
// ... already used by another torch deploy interpreter" (seen loading
// fault_models' scaled in 2 interpreters at once). So on 2.x each interpreter
// also gets its own StorageImpl, sharing the data through a refcounted deleter
// (c10/core/RefcountedDeleter.h), as THPStorage_Wrap does itself.
static at::Tensor OwnTensor(const at::Tensor& tensor) {
#if MANYPY_TORCH_HOOKS
  if (tensor.defined() && tensor.has_storage()) {
    c10::Storage storage = c10::newStorageImplFromRefcountedDataPtr(tensor.storage());
    return at::empty({0}, tensor.options())
        .set_(storage, tensor.storage_offset(), tensor.sizes(), tensor.strides());
  }
#endif
  return tensor.detach();
}

#if MANYPY_TORCH_GLOBAL_INTERPRETER
// PyTorch >= 2.9: one PyObjectSlot, no tag (global_py_interpreter.h). Whether
// `slot` holds no object or one of this runtime's (its type's metatype chain
// ends at this copy's PyType_Type); another's would be handed to this
// interpreter as its own (THPVariable_Wrap returns the slot's object).
static bool UnwrappedOrOurs(const c10::impl::PyObjectSlot* slot) {
  PyObject* o = slot->load_pyobj();
  if (o == nullptr) return true;
  PyTypeObject* type = Py_TYPE(o);
  for (int depth = 0; depth < 16 && Py_TYPE(type) != type; ++depth) type = Py_TYPE(type);
  return type == &PyType_Type;
}

// A tensor about to be wrapped here: its TensorImpl and StorageImpl must not
// be another interpreter's (the one-wrapper rule).
static const at::Tensor& CheckOneWrapper(const at::Tensor& tensor) {
  bool ok = UnwrappedOrOurs(tensor.unsafeGetTensorImpl()->pyobj_slot()) &&
            (!tensor.has_storage() ||
             UnwrappedOrOurs(tensor.storage().unsafeGetStorageImpl()->pyobj_slot()));
  if (!ok) {
    throw PythonError("RuntimeError",
                      "manypy: this tensor's TensorImpl or storage is already wrapped by another "
                      "interpreter (a tensor lent to two interpreters?); each interpreter needs "
                      "its own",
                      "");
  }
  return tensor;
}

// The host's tensor for one of this interpreter's: its own TensorImpl and
// StorageImpl over the same bytes, so no host Value holds an object this
// interpreter wrapped and the host may drop it on any thread. Python-keyed
// tensors (subclasses) and those without storage detach as before.
static at::Tensor HostTensor(const at::Tensor& tensor) {
  if (tensor.defined() && tensor.has_storage() &&
      !tensor.unsafeGetTensorImpl()->key_set().has(c10::DispatchKey::Python)) {
    return OwnTensor(tensor);
  }
  return tensor.detach();
}
#endif

PyObject* ToPython(const Value& value) {
  using K = Value::Kind;
  switch (value.kind()) {
    case K::kNone: Py_RETURN_NONE;
    case K::kBool: return PyBool_FromLong(value.to_bool());
    case K::kInt: return PyLong_FromLongLong(value.to_int());
    case K::kFloat: return PyFloat_FromDouble(value.to_double());
    case K::kStr: return PyUnicode_FromStringAndSize(value.to_str().data(), value.to_str().size());
    case K::kBytes:
      return PyBytes_FromStringAndSize(value.to_bytes().data(), value.to_bytes().size());
    case K::kTensor:
      // A TensorImpl remembers the first interpreter that wrapped it; give this
      // interpreter its own TensorImpl over the same storage (no data copy).
      // A lent tensor shares its storage object (Value::LentTensor).
#if MANYPY_TORCH_GLOBAL_INTERPRETER
      if (value.lent()) {
        try {
          return THPVariable_Wrap(CheckOneWrapper(value.to_tensor().detach()));
        } catch (const PythonError& e) {
          PyErr_SetString(PyExc_RuntimeError, e.message().c_str());
          return nullptr;
        }
      }
#endif
      return THPVariable_Wrap(value.lent() ? value.to_tensor().detach() : OwnTensor(value.to_tensor()));
    case K::kList:
    case K::kTuple: {
      const auto& items = value.items();
      bool is_list = value.kind() == K::kList;
      Ref out(is_list ? PyList_New(items.size()) : PyTuple_New(items.size()));
      if (out.p == nullptr) return nullptr;
      for (size_t i = 0; i < items.size(); ++i) {
        PyObject* item = ToPython(items[i]);
        if (item == nullptr) return nullptr;
        if (is_list) PyList_SET_ITEM(out.p, i, item);
        else PyTuple_SET_ITEM(out.p, i, item);
      }
      return out.release();
    }
    case K::kDict: {
      Ref out(PyDict_New());
      if (out.p == nullptr) return nullptr;
      for (const auto& [k, v] : value.dict_items()) {
        Ref key(ToPython(k));
        Ref val(ToPython(v));
        if (key.p == nullptr || val.p == nullptr || PyDict_SetItem(out.p, key.p, val.p) != 0) {
          return nullptr;
        }
      }
      return out.release();
    }
  }
  PyErr_SetString(PyExc_TypeError, "unknown manypy value kind");
  return nullptr;
}

Value FromPython(PyObject* object) {
  if (object == Py_None) return Value();
  if (PyBool_Check(object)) return Value(object == Py_True);
  if (PyLong_Check(object)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(object, &overflow);
    if (overflow != 0) ThrowTypeError("int does not fit in 64 bits");
    if (v == -1 && PyErr_Occurred()) ThrowPythonError();
    return Value(static_cast<int64_t>(v));
  }
  if (PyFloat_Check(object)) return Value(PyFloat_AS_DOUBLE(object));
  if (PyUnicode_Check(object)) return Value(Utf8(object));
  if (PyBytes_Check(object)) {
    return Value::Bytes(std::string(PyBytes_AS_STRING(object), PyBytes_GET_SIZE(object)));
  }
  if (THPVariable_Check(object)) {
    // The host gets its own TensorImpl, so the Python object can be freed
    // normally and the tensor may outlive this interpreter.
#if MANYPY_TORCH_GLOBAL_INTERPRETER
    return Value(HostTensor(THPVariable_Unpack(object)));
#else
    return Value(THPVariable_Unpack(object).detach());
#endif
  }
  if (PyList_Check(object) || PyTuple_Check(object)) {
    Ref seq(PySequence_Fast(object, "expected a sequence"));
    Check(seq.p);
    Value::Items items;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.p);
    items.reserve(n);
    for (Py_ssize_t i = 0; i < n; ++i) items.push_back(FromPython(PySequence_Fast_GET_ITEM(seq.p, i)));
    return PyList_Check(object) ? Value::List(std::move(items)) : Value::Tuple(std::move(items));
  }
  if (PyDict_Check(object)) {
    Value::DictItems items;
    PyObject *key, *val;
    Py_ssize_t pos = 0;
    while (PyDict_Next(object, &pos, &key, &val)) items.emplace_back(FromPython(key), FromPython(val));
    return Value::Dict(std::move(items));
  }
  ThrowTypeError(std::string("cannot convert a Python object of type '") + Py_TYPE(object)->tp_name +
                 "' to a manypy Value");
}

}  // namespace manypy::shim
