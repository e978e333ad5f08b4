// launch_plan.cpp — the fast path of Kernel.__call__ (launch_plan.h). Every test below mirrors one of
// tessera/runtime.py's (Kernel.pack, _check_array, _array, _scalar_slot, _dim3); where the Python one would
// raise, or where this one cannot tell cheaply, it returns false and Python decides.
#include "launch_plan.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cfloat>
#include <climits>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

namespace tsr_py {

namespace {

using npy_api = py::detail::npy_api;

struct ArgPlan {
  int kind = TSR_ARG_SCALAR;
  py::object dtype;           // tensors: the numpy dtype the array must have (None: Python decides)
  char code = 0;              // scalars: the struct code Python packs with ('f', 'd', 'b', 'h', 'i', 'q', '?')
  char scalar_kind = 0;       // scalars: 'b' bool, 'i' int or index, 'f' float
  int bits = 0;               // int scalars: the range
  std::vector<int64_t> dims;  // tensors: an extent >= 0, or -(slot + 1) of the dimension argument it gives
  bool readonly = false;      // tensors: the kernel does not write it
};

// Python objects read per call, where one attribute read each saves a string lookup and a comparison.
struct Seen {
  std::vector<py::object> torch_types, other_types;         // classes whose __module__ is / is not "torch"
  std::vector<std::pair<py::object, py::object>> torch_dtypes;  // a torch dtype and its numpy dtype
};

}  // namespace

struct LaunchPlan {
  std::vector<ArgPlan> args;
  size_t n_params = 0;
  bool host_memory = true;
  PyTypeObject* device_array = nullptr;
  PyTypeObject *np_integer = nullptr, *np_floating = nullptr, *np_bool = nullptr;
  py::object refs;  // keeps the classes above alive
  py::dict torch_names;  // str(torch dtype) -> numpy dtype (runtime._TORCH)
  py::str s_dtype{"dtype"}, s_shape{"shape"}, s_address{"address"}, s_is_cuda{"is_cuda"},
      s_is_contiguous{"is_contiguous"}, s_data_ptr{"data_ptr"}, s_module{"__module__"};
  Seen seen;
};

std::shared_ptr<LaunchPlan> make_launch_plan(const py::sequence& records, bool host_memory, const py::dict& refs) {
  auto plan = std::make_shared<LaunchPlan>();
  plan->host_memory = host_memory;
  for (const py::handle r : records) {
    auto t = r.cast<py::tuple>();
    ArgPlan a;
    a.kind = t[0].cast<int>();
    a.dtype = t[1].is_none() ? py::object() : py::reinterpret_borrow<py::object>(t[1]);
    std::string code = t[2].cast<std::string>(), kind = t[3].cast<std::string>();
    a.code = code.empty() ? 0 : code[0];
    a.scalar_kind = kind.empty() ? 0 : kind[0];
    a.bits = t[4].cast<int>();
    a.dims = t[5].cast<std::vector<int64_t>>();
    a.readonly = t[6].cast<bool>();
    if (a.kind != TSR_ARG_DIMENSION) plan->n_params++;
    plan->args.push_back(std::move(a));
  }
  plan->refs = refs;
  auto type = [&](const char* key) { return reinterpret_cast<PyTypeObject*>(refs[key].ptr()); };
  plan->device_array = type("DeviceArray");
  plan->np_integer = type("integer");
  plan->np_floating = type("floating");
  plan->np_bool = type("bool_");
  plan->torch_names = refs["torch_dtypes"].cast<py::dict>();
  npy_api::get();  // numpy's C API, loaded now rather than in the first launch
  return plan;
}

namespace {

// Clears the error a failed CPython call set: the Python path will meet it again and report it.
bool decline() {
  PyErr_Clear();
  return false;
}

bool to_int64(PyObject* v, long long* out) {
  int overflow = 0;
  *out = PyLong_AsLongLongAndOverflow(v, &overflow);
  return !overflow && !(*out == -1 && PyErr_Occurred()) ? true : decline();
}

// _scalar_slot: the kinds of value each scalar kind takes, the integer ranges, the floats' largest finite.
bool read_scalar(const LaunchPlan& p, const ArgPlan& a, PyObject* v, uint64_t* slot) {
  *slot = 0;
  if (!a.code) return false;
  if (a.scalar_kind == 'b') {
    int truth;
    if (v == Py_True || v == Py_False) truth = v == Py_True;
    else if (Py_TYPE(v) == p.np_bool && (truth = PyObject_IsTrue(v)) >= 0) {}
    else return decline();
    const unsigned char byte = truth ? 1 : 0;
    std::memcpy(slot, &byte, 1);
    return true;
  }
  if (a.scalar_kind == 'i') {
    long long x;
    if (PyLong_CheckExact(v)) {
      if (!to_int64(v, &x)) return false;
    } else if (PyObject_TypeCheck(v, p.np_integer)) {
      PyObject* i = PyNumber_Index(v);
      if (!i) return decline();
      bool ok = to_int64(i, &x);
      Py_DECREF(i);
      if (!ok) return false;
    } else {
      return false;
    }
    const long long hi = a.bits >= 64 ? LLONG_MAX : (1LL << (a.bits - 1)) - 1, lo = -hi - 1;
    if (x < lo || x > hi) return false;
    switch (a.code) {
      case 'b': { int8_t y = (int8_t)x; std::memcpy(slot, &y, sizeof y); return true; }
      case 'h': { int16_t y = (int16_t)x; std::memcpy(slot, &y, sizeof y); return true; }
      case 'i': { int32_t y = (int32_t)x; std::memcpy(slot, &y, sizeof y); return true; }
      case 'q': { int64_t y = (int64_t)x; std::memcpy(slot, &y, sizeof y); return true; }
      default: return false;
    }
  }
  if (a.scalar_kind != 'f' || (a.code != 'f' && a.code != 'd')) return false;
  double x;
  bool integer = false;  // a Python int: one beyond every float is refused, not taken as inf
  if (PyFloat_CheckExact(v)) {
    x = PyFloat_AS_DOUBLE(v);
  } else if (PyLong_CheckExact(v)) {
    integer = true;
    x = PyLong_AsDouble(v);
    if (x == -1.0 && PyErr_Occurred()) return decline();
  } else if (PyObject_TypeCheck(v, p.np_floating) || PyObject_TypeCheck(v, p.np_integer)) {
    PyObject* f = PyNumber_Float(v);  // float(v), as Python converts it
    if (!f) return decline();
    x = PyFloat_AS_DOUBLE(f);
    Py_DECREF(f);
  } else {
    return false;
  }
  const double largest = a.code == 'f' ? (double)FLT_MAX : DBL_MAX;
  if (std::fabs(x) > largest && (std::isfinite(x) || integer)) return false;
  if (a.code == 'f') {
    const float y = (float)x;  // struct.pack('<f') rounds the same way
    std::memcpy(slot, &y, sizeof y);
  } else {
    std::memcpy(slot, &x, sizeof x);
  }
  return true;
}

// What _array reads of an array argument.
struct ArrayView {
  PyObject* dtype = nullptr;  // borrowed from the array, or owned by `hold`
  int64_t shape[32];
  int ndim = 0;
  bool contiguous = false, writeable = false;
  uint64_t address = 0;
  py::object hold;  // a dtype read from an attribute, kept alive while used
};

bool shape_of(PyObject* t, ArrayView* out) {
  if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) > 32) return false;
  out->ndim = (int)PyTuple_GET_SIZE(t);
  for (int i = 0; i < out->ndim; i++) {
    PyObject* d = PyTuple_GET_ITEM(t, i);
    long long x;
    if (!PyLong_Check(d) || !to_int64(d, &x)) return false;
    out->shape[i] = x;
  }
  return true;
}

// Calls v.name() and returns the result (a new reference), or nullptr with no error set.
PyObject* call_method(PyObject* v, PyObject* name) {
  PyObject* r = PyObject_CallMethodNoArgs(v, name);
  if (!r) PyErr_Clear();
  return r;
}

bool is_torch(LaunchPlan& p, PyObject* v) {
  PyObject* type = (PyObject*)Py_TYPE(v);
  for (const auto& t : p.seen.torch_types)
    if (t.ptr() == type) return true;
  for (const auto& t : p.seen.other_types)
    if (t.ptr() == type) return false;
  PyObject* module = PyObject_GetAttr(type, p.s_module.ptr());
  if (!module) return decline();
  int torch = PyUnicode_Check(module) ? PyUnicode_CompareWithASCIIString(module, "torch") == 0 : 0;
  Py_DECREF(module);
  auto& list = torch ? p.seen.torch_types : p.seen.other_types;
  if (list.size() < 16) list.push_back(py::reinterpret_borrow<py::object>(type));
  return torch;
}

// The numpy dtype runtime._TORCH gives a torch dtype, or nullptr.
PyObject* torch_dtype(LaunchPlan& p, PyObject* dtype) {
  for (const auto& [t, np_dtype] : p.seen.torch_dtypes)
    if (t.ptr() == dtype) return np_dtype.ptr();
  PyObject* name = PyObject_Str(dtype);
  if (!name) return decline(), nullptr;
  PyObject* found = PyDict_GetItemWithError(p.torch_names.ptr(), name);  // borrowed
  Py_DECREF(name);
  if (!found) return decline(), nullptr;
  if (p.seen.torch_dtypes.size() < 32)
    p.seen.torch_dtypes.emplace_back(py::reinterpret_borrow<py::object>(dtype),
                                     py::reinterpret_borrow<py::object>(found));
  return found;
}

bool read_device_array(LaunchPlan& p, PyObject* v, ArrayView* out) {
  py::object dtype = py::reinterpret_steal<py::object>(PyObject_GetAttr(v, p.s_dtype.ptr()));
  py::object shape = py::reinterpret_steal<py::object>(dtype ? PyObject_GetAttr(v, p.s_shape.ptr()) : nullptr);
  py::object address = py::reinterpret_steal<py::object>(shape ? PyObject_GetAttr(v, p.s_address.ptr()) : nullptr);
  if (!address) return decline();  // e.g. a freed array: Python raises its Error
  if (!shape_of(shape.ptr(), out) || !PyLong_Check(address.ptr())) return false;
  out->address = PyLong_AsUnsignedLongLong(address.ptr());
  if (out->address == (unsigned long long)-1 && PyErr_Occurred()) return decline();
  out->hold = std::move(dtype);
  out->dtype = out->hold.ptr();
  out->contiguous = out->writeable = true;
  return true;
}

bool read_torch(LaunchPlan& p, PyObject* v, ArrayView* out) {
  PyObject* cuda = PyObject_GetAttr(v, p.s_is_cuda.ptr());
  if (!cuda) return decline();
  int is_cuda = PyObject_IsTrue(cuda);
  Py_DECREF(cuda);
  if (is_cuda <= 0) return decline();  // not a CUDA tensor: Python says what it takes
  py::object dtype = py::reinterpret_steal<py::object>(PyObject_GetAttr(v, p.s_dtype.ptr()));
  if (!dtype) return decline();
  out->dtype = torch_dtype(p, dtype.ptr());
  if (!out->dtype) return false;
  py::object shape = py::reinterpret_steal<py::object>(PyObject_GetAttr(v, p.s_shape.ptr()));
  if (!shape) return decline();
  if (!shape_of(shape.ptr(), out)) return false;
  py::object contiguous = py::reinterpret_steal<py::object>(call_method(v, p.s_is_contiguous.ptr()));
  py::object address = py::reinterpret_steal<py::object>(call_method(v, p.s_data_ptr.ptr()));
  if (!contiguous || !address || !PyLong_Check(address.ptr())) return false;
  int c = PyObject_IsTrue(contiguous.ptr());
  if (c < 0) return decline();
  out->contiguous = c;
  out->address = PyLong_AsUnsignedLongLong(address.ptr());
  if (out->address == (unsigned long long)-1 && PyErr_Occurred()) return decline();
  out->writeable = true;
  return true;
}

// _array and _check_array: the array's description, then dtype, rank, contiguity, writeability, extents.
bool read_tensor(LaunchPlan& p, const ArgPlan& a, PyObject* v, int64_t* dim_values, bool* dim_set, size_t nslots,
                 uint64_t* slot) {
  if (!a.dtype) return false;
  const npy_api& np = npy_api::get();
  ArrayView view;
  if (PyObject_TypeCheck(v, p.device_array)) {
    if (!read_device_array(p, v, &view)) return false;
  } else if (p.host_memory) {
    if (!np.PyArray_Check_(v)) return false;
    const auto* arr = py::detail::array_proxy(v);
    if (arr->nd > 32) return false;
    view.ndim = arr->nd;
    for (int i = 0; i < arr->nd; i++) view.shape[i] = arr->dimensions[i];
    view.dtype = arr->descr;
    view.contiguous = arr->flags & npy_api::NPY_ARRAY_C_CONTIGUOUS_;
    view.writeable = arr->flags & npy_api::NPY_ARRAY_WRITEABLE_;
    view.address = (uint64_t)(uintptr_t)arr->data;
  } else if (!np.PyArray_Check_(v) && is_torch(p, v)) {
    if (!read_torch(p, v, &view)) return false;
  } else {
    return false;  // numpy arrays on a device, __cuda_array_interface__ exporters: the Python path
  }
  if (!PyObject_TypeCheck(view.dtype, (PyTypeObject*)np.PyArrayDescr_Type_) ||
      !np.PyArray_EquivTypes_(view.dtype, a.dtype.ptr()))
    return false;
  if ((size_t)view.ndim != a.dims.size() || !view.contiguous || (!view.writeable && !a.readonly)) return false;
  for (int axis = 0; axis < view.ndim; axis++) {
    const int64_t d = a.dims[axis], extent = view.shape[axis];
    if (d >= 0) {
      if (extent != d) return false;
      continue;
    }
    const size_t s = (size_t)(-(d + 1));
    if (s >= nslots) return false;
    if (!dim_set[s]) dim_set[s] = true, dim_values[s] = extent;
    else if (dim_values[s] != extent) return false;
  }
  *slot = view.address;
  return true;
}

// _dim3, then pybind11's uint32 conversion of each entry.
bool read_dim3(PyObject* v, std::array<uint32_t, 3>* out) {
  PyObject* one[1] = {v};
  PyObject** items = one;
  Py_ssize_t n = 1;
  if (!PyLong_Check(v)) {
    if (!PyTuple_Check(v)) return false;
    n = PyTuple_GET_SIZE(v);
    items = &PyTuple_GET_ITEM(v, 0);
  }
  if (n < 1 || n > 3) return false;
  *out = {1, 1, 1};
  for (Py_ssize_t i = 0; i < n; i++) {
    long long x;
    if (!PyLong_Check(items[i]) || !to_int64(items[i], &x) || x < 0 || x > UINT32_MAX) return false;
    (*out)[i] = (uint32_t)x;
  }
  return true;
}

// float(x or 0)
bool read_work(PyObject* v, double* out) {
  if (v == Py_None) *out = 0;
  else if (PyFloat_CheckExact(v)) *out = PyFloat_AS_DOUBLE(v);
  else if (PyLong_CheckExact(v)) *out = PyLong_AsDouble(v);
  else return false;
  return !(*out == -1.0 && PyErr_Occurred()) ? true : decline();
}

}  // namespace

bool read_launch(LaunchPlan& p, PyObject* args, PyObject* grid, PyObject* block, PyObject* smem_bytes,
                 PyObject* flops, PyObject* bytes, LaunchValues* out) {
  const size_t n = p.args.size();
  if (!PyTuple_Check(args) || (size_t)PyTuple_GET_SIZE(args) != p.n_params || n > LaunchValues::kMaxSlots)
    return false;
  int64_t dim_values[LaunchValues::kMaxSlots];
  bool dim_set[LaunchValues::kMaxSlots] = {}, filled[LaunchValues::kMaxSlots] = {};
  for (size_t i = 0; i < p.n_params; i++) {  // Kernel.pack pairs the first records with the arguments
    const ArgPlan& a = p.args[i];
    PyObject* v = PyTuple_GET_ITEM(args, i);
    if (a.kind == TSR_ARG_SCALAR) {
      if (!read_scalar(p, a, v, &out->slots[i])) return false;
    } else if (a.kind == TSR_ARG_TENSOR) {
      if (!read_tensor(p, a, v, dim_values, dim_set, n, &out->slots[i])) return false;
    } else {
      continue;
    }
    filled[i] = true;
  }
  for (size_t i = 0; i < n; i++) {
    if (p.args[i].kind == TSR_ARG_DIMENSION) {
      if (!dim_set[i]) return false;
      std::memcpy(&out->slots[i], &dim_values[i], sizeof(int64_t));
      filled[i] = true;
    }
    if (!filled[i]) return false;
    out->args[i] = &out->slots[i];
  }
  out->nargs = n;
  long long smem;
  if (!read_dim3(grid, &out->grid) || !read_dim3(block, &out->block) || !PyLong_CheckExact(smem_bytes) ||
      !to_int64(smem_bytes, &smem) || smem < 0 || smem > UINT32_MAX || !read_work(flops, &out->flops) ||
      !read_work(bytes, &out->bytes))
    return false;
  out->smem_bytes = (uint32_t)smem;
  return true;
}

}  // namespace tsr_py
