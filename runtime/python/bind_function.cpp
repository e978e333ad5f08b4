// bind_function.cpp — tessera._runtime.Function (a module's @function, run by libtessera's tsrFunctionCall:
// tessera.executor is a binding over it) and DLPack capsules both ways (DeviceArray.__dlpack__,
// tessera.runtime.from_dlpack).
//
// DLPack ownership: an exported capsule holds a reference to the exporting Python object until the consumer
// calls the managed tensor's deleter (or, when no consumer took it, until the capsule goes). An imported
// capsule is renamed "used_dltensor[_versioned]" as the protocol says, and the DLPackTensor that took it
// calls the producer's deleter when it goes: numpy arrays made from it keep it as their base.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>
#include <vector>

#include "bindings.h"

namespace tsr_py {

namespace {

PyObject* argument_error;  // tessera._runtime.ArgumentError(Error, ValueError), created at import

// A function call's failure: TSR_ERROR_INVALID_VALUE (a bad argument, an extent a kernel cannot take) is also a
// ValueError, as Python's own argument checks are, so `except ValueError` keeps working across the two.
[[noreturn]] void raise_call_error(tsr_status_t status, const std::string& message) {
  if (status != TSR_ERROR_INVALID_VALUE) raise_error(status, message);
  py::object exc = py::reinterpret_borrow<py::object>(argument_error)(text(message));
  exc.attr("status") = static_cast<int>(status);
  exc.attr("status_name") = tsrGetStatusName(status);
  PyErr_SetObject(argument_error, exc.ptr());
  throw py::error_already_set();
}

// ---- DLPack export ------------------------------------------------------------------------------------

// The DLPack dtype of a numpy dtype (kind, itemsize); bf16 and fp8 DeviceArrays hold bit patterns as uint16
// and uint8 and are exported as such, since the array does not know what the bits mean.
DLDataType dl_dtype(const py::dtype& dt) {
  uint8_t bits = static_cast<uint8_t>(dt.itemsize() * 8);
  switch (dt.kind()) {
    case 'f': return {kDLFloat, bits, 1};
    case 'i': return {kDLInt, bits, 1};
    case 'u': return {kDLUInt, bits, 1};
    case 'b': return {kDLBool, 8, 1};
    case 'c': return {kDLComplex, bits, 1};
  }
  throw py::type_error("a DeviceArray of dtype " + py::str(static_cast<const py::object&>(dt)).cast<std::string>() +
                       " has no DLPack dtype");
}

struct Export {
  DLManagedTensor legacy;
  DLManagedTensorVersioned versioned;
  std::vector<int64_t> shape;
  PyObject* owner;  // a strong reference: the exported memory's Python owner

  static void release(Export* e) {
    // The consumer may call the deleter from any thread, or after the interpreter has finalized.
    if (Py_IsInitialized()) {
      PyGILState_STATE gil = PyGILState_Ensure();
      Py_XDECREF(e->owner);
      PyGILState_Release(gil);
    }
    delete e;
  }
  static void delete_legacy(DLManagedTensor* m) { release(static_cast<Export*>(m->manager_ctx)); }
  static void delete_versioned(DLManagedTensorVersioned* m) { release(static_cast<Export*>(m->manager_ctx)); }
};

// A capsule no consumer took still owns its tensor.
void capsule_destructor(PyObject* capsule) {
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);  // destructors may run while an exception is set
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    m->deleter(m);
  } else if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, "dltensor_versioned"));
    m->deleter(m);
  }
  PyErr_Restore(type, value, trace);
}

// A capsule of the compact row-major tensor at `address` (device `device_type`, `device_id`), keeping `owner`
// alive until the consumer is done. `versioned`: a DLManagedTensorVersioned ("dltensor_versioned", DLPack 1.0).
py::object dlpack_export(const py::object& owner, uintptr_t address, const std::vector<int64_t>& shape,
                         const py::dtype& dtype, int device_type, int device_id, bool versioned, bool readonly) {
  auto* e = new Export{};
  e->shape = shape;
  DLTensor t{};
  t.data = reinterpret_cast<void*>(address);
  t.device = {static_cast<DLDeviceType>(device_type), device_id};
  t.ndim = static_cast<int32_t>(shape.size());
  try {
    t.dtype = dl_dtype(dtype);
  } catch (...) {
    delete e;
    throw;
  }
  t.shape = e->shape.data();
  t.strides = nullptr;  // compact row-major
  e->owner = owner.ptr();
  Py_INCREF(e->owner);
  void* pointer;
  const char* name;
  if (versioned) {
    e->versioned = {{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}, e, Export::delete_versioned,
                    readonly ? DLPACK_FLAG_BITMASK_READ_ONLY : 0, t};
    pointer = &e->versioned, name = "dltensor_versioned";
  } else {
    e->legacy = {t, e, Export::delete_legacy};
    pointer = &e->legacy, name = "dltensor";
  }
  PyObject* capsule = PyCapsule_New(pointer, name, capsule_destructor);
  if (!capsule) {
    Export::release(e);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(capsule);
}

// ---- DLPack import ------------------------------------------------------------------------------------

// A producer's tensor, taken from its capsule; calls the producer's deleter when it goes.
class DLPackTensor {
 public:
  explicit DLPackTensor(const py::capsule& capsule) {
    PyObject* c = capsule.ptr();
    if (PyCapsule_IsValid(c, "dltensor_versioned")) {
      auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(c, "dltensor_versioned"));
      if (m->version.major != DLPACK_MAJOR_VERSION)
        throw py::buffer_error("the DLPack tensor has version " + std::to_string(m->version.major) + "." +
                               std::to_string(m->version.minor) + ", this runtime reads 1.x");
      versioned_ = m, tensor_ = &m->dl_tensor, readonly_ = (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
      PyCapsule_SetName(c, "used_dltensor_versioned");
    } else if (PyCapsule_IsValid(c, "dltensor")) {
      legacy_ = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, "dltensor"));
      tensor_ = &legacy_->dl_tensor;
      PyCapsule_SetName(c, "used_dltensor");
    } else {
      throw py::value_error("not a DLPack capsule, or one already consumed (a capsule is taken once)");
    }
  }
  DLPackTensor(const DLPackTensor&) = delete;
  DLPackTensor& operator=(const DLPackTensor&) = delete;
  ~DLPackTensor() { release(); }

  // Calls the producer's deleter now (what refers to the memory must be gone). Twice is harmless.
  void release() {
    if (versioned_ && versioned_->deleter) versioned_->deleter(versioned_);
    if (legacy_ && legacy_->deleter) legacy_->deleter(legacy_);
    versioned_ = nullptr, legacy_ = nullptr, tensor_ = nullptr;
  }

  const DLTensor& live() const {
    if (!tensor_) raise_error(TSR_ERROR_INVALID_VALUE, "the DLPack tensor was released");
    return *tensor_;
  }

  uintptr_t address() const { return reinterpret_cast<uintptr_t>(live().data) + live().byte_offset; }
  std::pair<int, int> device() const { return {live().device.device_type, live().device.device_id}; }
  std::vector<int64_t> shape() const { return {live().shape, live().shape + live().ndim}; }
  py::object strides() const {  // in elements; None: compact row-major
    if (!live().strides) return py::none();
    return py::cast(std::vector<int64_t>(live().strides, live().strides + live().ndim));
  }
  std::tuple<int, int, int> dtype() const { return {live().dtype.code, live().dtype.bits, live().dtype.lanes}; }
  bool readonly() const { return readonly_; }

  // The tensor as a numpy array of `dtype` (its items' size must be the tensor's), sharing the memory, which
  // must be host memory; `self` is its base, so the producer's tensor lives as long as the array.
  static py::array numpy(py::object self, const py::dtype& dtype) {
    const DLPackTensor& me = self.cast<const DLPackTensor&>();
    const DLTensor& t = me.live();
    if (t.dtype.lanes != 1 || static_cast<ssize_t>(t.dtype.bits) != dtype.itemsize() * 8)
      throw py::type_error("the DLPack tensor's items do not have the size of the numpy dtype");
    std::vector<ssize_t> shape(t.shape, t.shape + t.ndim), strides(t.ndim);
    int64_t step = 1;
    for (int r = t.ndim - 1; r >= 0; r--) {
      strides[r] = static_cast<ssize_t>((t.strides ? t.strides[r] : step) * dtype.itemsize());
      step *= t.shape[r];
    }
    py::array out(dtype, shape, strides, reinterpret_cast<void*>(me.address()), self);
    if (me.readonly_) out.attr("flags").attr("writeable") = false;
    return out;
  }

 private:
  DLManagedTensor* legacy_ = nullptr;
  DLManagedTensorVersioned* versioned_ = nullptr;
  const DLTensor* tensor_ = nullptr;
  bool readonly_ = false;
};

// ---- functions ----------------------------------------------------------------------------------------

// The DLPack device type of memory the context's backend allocates (docs/runtime.md, "DLPack").
DLDeviceType device_type_of(const std::string& backend) {
  if (backend == "cuda") return kDLCUDA;
  if (backend == "hip") return kDLROCM;
  if (backend == "level_zero") return kDLOneAPI;
  if (backend == "opencl") return kDLOpenCL;
  return kDLCPU;
}

py::dict spec_dict(const tsr_tensor_spec_t& s) {
  py::dict d;
  d["name"] = text(s.name);
  d["dtype"] = s.dtype_name;
  d["rank"] = s.rank;
  d["extents"] = std::vector<int64_t>(s.extents, s.extents + s.rank);
  d["dims"] = std::vector<std::string>(s.dims, s.dims + s.rank);
  return d;
}

// DLTensors for a call: each argument is a numpy array (host memory: kDLCPU), an (address, shape) tuple (compact
// memory of the context's backend: its device type) or an (address, shape, strides) tuple (strides in elements:
// a producer's strided device tensor, which libtessera gathers and scatters). Their dtype is the signature's: the caller has
// checked that the array holds what the plan stores (tessera.executor's dtype rules, which take bf16 as uint16).
struct Tensors {
  std::vector<DLTensor> tensors;
  std::vector<const DLTensor*> pointers;
  std::vector<int64_t> extents;  // shapes and strides, 2 * rank per tensor

  Tensors(const py::sequence& args, const tsr_tensor_spec_t* specs, size_t n_specs, DLDeviceType device,
          const char* fname, const char* role, bool shapes_only) {
    size_t n = args.size();
    std::vector<py::object> arrays(n);  // null for a device tensor
    struct DeviceTensor {
      uintptr_t address;
      std::vector<int64_t> shape, strides;  // no strides: compact
    };
    std::vector<DeviceTensor> device_tensors(n);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
      py::object item = args[i];
      if (py::isinstance<py::array>(item)) {
        arrays[i] = item;
        total += 2 * static_cast<size_t>(py::reinterpret_borrow<py::array>(item).ndim());
      } else if (py::len(item) == 3) {
        auto [address, shape, strides] =
            item.cast<std::tuple<uintptr_t, std::vector<int64_t>, std::vector<int64_t>>>();
        if (strides.size() != shape.size())
          throw py::value_error(std::string("function '") + fname + "': " + role + " '" +
                                (i < n_specs ? specs[i].name : std::to_string(i).c_str()) + "' has " +
                                std::to_string(strides.size()) + " strides for " + std::to_string(shape.size()) +
                                " axes");
        device_tensors[i] = {address, std::move(shape), std::move(strides)};
        total += 2 * device_tensors[i].shape.size();
      } else {
        auto [address, shape] = item.cast<std::pair<uintptr_t, std::vector<int64_t>>>();
        device_tensors[i] = {address, std::move(shape), {}};
        total += 2 * device_tensors[i].shape.size();
      }
    }
    tensors.resize(n);
    extents.resize(total + 1);  // extents.data() stays put from here on: the tensors point into it
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
      DLTensor& t = tensors[i];
      t = DLTensor{};
      if (i < n_specs) t.dtype = specs[i].dtype;
      t.shape = &extents[at];
      if (arrays[i]) {
        auto a = py::reinterpret_borrow<py::array>(arrays[i]);
        t.data = shapes_only ? nullptr : const_cast<void*>(a.data());
        t.device = {kDLCPU, 0};
        t.ndim = static_cast<int32_t>(a.ndim());
        t.strides = &extents[at + a.ndim()];
        for (ssize_t r = 0; r < a.ndim(); r++) {
          t.shape[r] = a.shape(r);
          if (a.strides(r) % a.itemsize())
            throw py::value_error(std::string("function '") + fname + "': " + role + " '" +
                                  (i < n_specs ? specs[i].name : std::to_string(i).c_str()) +
                                  "' has strides that are not a multiple of its item size");
          t.strides[r] = a.strides(r) / a.itemsize();
        }
        at += 2 * static_cast<size_t>(a.ndim());
      } else {
        const auto& [address, shape, strides] = device_tensors[i];
        t.data = shapes_only ? nullptr : reinterpret_cast<void*>(address);
        t.device = {device, 0};
        t.ndim = static_cast<int32_t>(shape.size());
        std::copy(shape.begin(), shape.end(), t.shape);
        if (!strides.empty()) {
          t.strides = &extents[at + shape.size()];
          std::copy(strides.begin(), strides.end(), t.strides);
        }
        at += 2 * shape.size();
      }
    }
    pointers.resize(n);
    for (size_t i = 0; i < n; i++) pointers[i] = &tensors[i];
  }
};

class Function {
 public:
  Function(std::shared_ptr<ModuleState> module, const std::string& name) : module_(std::move(module)) {
    tsr_module_t m = module_->live();
    check(tsrModuleGetFunction(m, name.c_str(), &handle_));
    check(tsrFunctionGetSignature(handle_, &signature_));
    const char* backend;
    check(tsrContextGetBackend(module_->context->live(), &backend));
    device_ = device_type_of(backend);
  }

  py::dict signature() const {
    module_->live();
    py::list inputs, outputs;
    for (size_t i = 0; i < signature_.input_count; i++) inputs.append(spec_dict(signature_.inputs[i]));
    for (size_t i = 0; i < signature_.output_count; i++) outputs.append(spec_dict(signature_.outputs[i]));
    py::dict d;
    d["name"] = text(signature_.name);
    d["inputs"] = inputs;
    d["outputs"] = outputs;
    return d;
  }

  // The extents of each result that a call with these inputs produces.
  std::vector<std::vector<int64_t>> result_shapes(const py::sequence& inputs) const {
    module_->live();
    return shapes_of(Tensors(inputs, signature_.inputs, signature_.input_count, device_, signature_.name, "argument",
                             true));
  }

  // tsrFunctionGetResultShapes for the call's tensors `in` (their data is not read).
  std::vector<std::vector<int64_t>> shapes_of(const Tensors& in) const {
    size_t total = 0;
    for (size_t r = 0; r < signature_.output_count; r++) total += signature_.outputs[r].rank;
    std::vector<int64_t> dims(total + 1);
    tsr_status_t st = tsrFunctionGetResultShapes(handle_, in.pointers.data(), in.pointers.size(), dims.data(), total);
    if (st) raise_call_error(st, tsrGetLastErrorMessage());
    std::vector<std::vector<int64_t>> out;
    for (size_t r = 0, at = 0; r < signature_.output_count; at += signature_.outputs[r].rank, r++)
      out.emplace_back(dims.begin() + at, dims.begin() + at + signature_.outputs[r].rank);
    return out;
  }

  // The host call's quick path (tessera.executor's common call): per argument, the numpy dtype an array must
  // have to be passed as it is (None: never, the argument needs Python's checks or a conversion), and per result
  // the numpy dtype it is allocated with. Set once per function; call_plain uses it.
  void set_plain(const std::vector<py::object>& inputs, const std::vector<py::dtype>& results) {
    if (inputs.size() != signature_.input_count || results.size() != signature_.output_count)
      throw py::value_error("set_plain: " + std::to_string(inputs.size()) + " argument and " +
                            std::to_string(results.size()) + " result dtypes for a function of " +
                            std::to_string(signature_.input_count) + " and " +
                            std::to_string(signature_.output_count));
    plain_ = inputs, result_dtypes_ = results, has_plain_ = true;
  }

  // One call on host memory with no stream and no communicator, its results allocated here: what
  // tessera.executor's __call__ does for arguments that are numpy arrays (exactly: no subclass), writeable, of
  // the dtypes set_plain named, in one step instead of a shape query, allocations and the call. None where any
  // argument is not such an array (or the count is wrong): the caller takes its general path, which checks,
  // converts and names what is wrong. Returns the one result, or a tuple of them.
  py::object call_plain(const py::tuple& inputs) const {
    module_->live();
    size_t n = inputs.size();
    if (!has_plain_ || n != signature_.input_count) return py::none();
    auto& api = py::detail::npy_api::get();
    for (size_t i = 0; i < n; i++) {
      PyObject* a = PyTuple_GET_ITEM(inputs.ptr(), i);
      if (Py_TYPE(a) != api.PyArray_Type_ || plain_[i].is_none()) return py::none();
      auto array = py::reinterpret_borrow<py::array>(a);
      if (!array.writeable() || !api.PyArray_EquivTypes_(array.dtype().ptr(), plain_[i].ptr())) return py::none();
    }
    Tensors in(inputs, signature_.inputs, signature_.input_count, device_, signature_.name, "argument", false);
    std::vector<std::vector<int64_t>> shapes = shapes_of(in);
    py::tuple results(signature_.output_count);
    for (size_t r = 0; r < shapes.size(); r++)
      results[r] = py::array(result_dtypes_[r], std::vector<ssize_t>(shapes[r].begin(), shapes[r].end()));
    Tensors out(results, signature_.outputs, signature_.output_count, device_, signature_.name, "output", false);
    run(in, out, nullptr, 0);
    return results.size() == 1 ? py::object(results[0]) : py::object(results);
  }

  // tsrFunctionCallWithOptions, `comm` the tsr_comm_t (0: none) of the plan's collective steps; the caller
  // keeps the arrays (and the communicator) alive until the call's work on `stream` has run.
  void call(const py::sequence& inputs, const py::sequence& outputs, const py::object& stream, uintptr_t comm) const {
    module_->live();
    Tensors in(inputs, signature_.inputs, signature_.input_count, device_, signature_.name, "argument", false);
    Tensors out(outputs, signature_.outputs, signature_.output_count, device_, signature_.name, "output", false);
    run(in, out, stream_of(stream), comm);
  }

  // tsrFunctionCallWithOptions on the call's tensors, the GIL released; its failure raised.
  void run(const Tensors& in, const Tensors& out, tsr_stream_t s, uintptr_t comm) const {
    tsr_function_call_options_t options;
    tsrFunctionCallOptionsInitialize(&options);
    options.comm = reinterpret_cast<tsr_comm_t>(comm);
    tsr_status_t status;
    std::string message;
    {
      py::gil_scoped_release release;
      status = tsrFunctionCallWithOptions(handle_, s, in.pointers.data(), in.pointers.size(), out.pointers.data(),
                                          out.pointers.size(), &options);
      if (status) message = tsrGetLastErrorMessage();
    }
    if (status) raise_call_error(status, message.empty() ? tsrGetErrorString(status) : message);
  }

 private:
  std::shared_ptr<ModuleState> module_;
  tsr_function_t handle_ = nullptr;
  tsr_function_signature_t signature_{};
  DLDeviceType device_ = kDLCPU;
  bool has_plain_ = false;            // set_plain was called
  std::vector<py::object> plain_;     // per argument: a numpy dtype, or None
  std::vector<py::dtype> result_dtypes_;
};

}  // namespace

py::object make_function(std::shared_ptr<ModuleState> module, const std::string& name) {
  return py::cast(Function(std::move(module), name));
}

void bind_function(py::module_& m) {
  py::object error = m.attr("Error");
  argument_error = PyErr_NewExceptionWithDoc(
      "tessera._runtime.ArgumentError",
      "A function call's bad argument (TSR_ERROR_INVALID_VALUE): an Error that is also a ValueError.",
      py::make_tuple(error, py::handle(PyExc_ValueError)).ptr(), nullptr);
  if (!argument_error) throw py::error_already_set();
  m.add_object("ArgumentError", py::reinterpret_borrow<py::object>(argument_error));

  py::class_<Function>(m, "Function", "An @function of a loaded module, run by libtessera (tsrFunctionCall).")
      .def_property_readonly("signature", &Function::signature,
                             "name, inputs and outputs: dicts of name, dtype (as the plan stores it), rank, "
                             "extents (-1: symbolic) and dims (the plan's spelling).")
      .def("result_shapes", &Function::result_shapes, py::arg("inputs"),
           "tsrFunctionGetResultShapes: each result's extents for these inputs (numpy arrays, or (address, shape) "
           "or (address, shape, strides) of device memory; their data is not read).")
      .def("set_plain", &Function::set_plain, py::arg("inputs"), py::arg("results"),
           "The quick path's dtypes: per argument the numpy dtype passed as it is (None: never), per result its "
           "numpy dtype.")
      .def("call_plain", &Function::call_plain, py::arg("inputs"),
           "A host call with no stream of exact, writeable numpy arrays of the dtypes set_plain named, its results "
           "allocated here (one, or a tuple); None where the arguments are not such arrays. Releases the GIL.")
      .def("call", &Function::call, py::arg("inputs"), py::arg("outputs"), py::arg("stream") = py::none(),
           py::arg("comm") = 0,
           "tsrFunctionCallWithOptions (comm: a Comm's address, 0 for none): inputs and outputs are numpy arrays (host memory) or (address, shape) tuples of the "
           "context's memory (compact), or (address, shape, strides) tuples (strides in elements), holding what "
           "the plan stores; the caller keeps them alive until the stream ran "
           "the call. Releases the GIL.");

  py::class_<DLPackTensor>(m, "DLPackTensor",
                           "A DLPack producer's tensor, taken from its capsule; the producer's deleter runs when "
                           "this goes (or at release()).")
      .def(py::init<const py::capsule&>(), py::arg("capsule"))
      .def_property_readonly("address", &DLPackTensor::address, "data + byte_offset")
      .def_property_readonly("device", &DLPackTensor::device, "(DLDeviceType, device id)")
      .def_property_readonly("shape", &DLPackTensor::shape)
      .def_property_readonly("strides", &DLPackTensor::strides, "In elements; None: compact row-major.")
      .def_property_readonly("dtype", &DLPackTensor::dtype, "(DLDataTypeCode, bits, lanes)")
      .def_property_readonly("readonly", &DLPackTensor::readonly)
      .def("numpy", &DLPackTensor::numpy, py::arg("dtype"),
           "The host tensor as a numpy array of `dtype`, sharing its memory and keeping this alive.")
      .def("release", &DLPackTensor::release, "Calls the producer's deleter now.");

  m.def("dlpack_capsule", &dlpack_export, py::arg("owner"), py::arg("address"), py::arg("shape"), py::arg("dtype"),
        py::arg("device_type"), py::arg("device_id"), py::arg("versioned"), py::arg("readonly") = false,
        "A DLPack capsule of the compact row-major tensor at `address`, keeping `owner` alive until the consumer "
        "calls its deleter.");
  py::dict devices;
  const std::pair<const char*, DLDeviceType> names[] = {
      {"cpu", kDLCPU}, {"cuda", kDLCUDA}, {"cuda_host", kDLCUDAHost}, {"opencl", kDLOpenCL},
      {"rocm", kDLROCM}, {"rocm_host", kDLROCMHost}, {"cuda_managed", kDLCUDAManaged}, {"oneapi", kDLOneAPI}};
  for (const auto& [name, value] : names) devices[name] = static_cast<int>(value);
  m.attr("DLPACK_DEVICE") = devices;
}

}  // namespace tsr_py
