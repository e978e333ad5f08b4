// bindings.cpp — tessera._runtime: a thin pybind11 layer over libtessera for tessera/runtime.py.
//
// Ownership mirrors the C API: a Module keeps its Context alive and a Kernel keeps its Module alive (through
// shared state, not Python references). Context.close() destroys the context at once, like
// tsrDestroyContext; Modules and Kernels of a closed context then raise Error instead of touching freed
// handles. Failures raise Error(RuntimeError) carrying the status code and tsrGetLastErrorMessage().
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/tessera.h"

namespace py = pybind11;

namespace {

PyObject* error_type;  // tessera._runtime.Error, created at import

[[noreturn]] void raise_error(tsr_status_t status, const std::string& message) {
  py::object exc = py::reinterpret_borrow<py::object>(error_type)(message);
  exc.attr("status") = static_cast<int>(status);
  exc.attr("status_name") = tsrGetStatusName(status);
  PyErr_SetObject(error_type, exc.ptr());
  throw py::error_already_set();
}

// Call right after the failing tsr* call, on the same thread: the message is thread-local.
void check(tsr_status_t status) {
  if (status == TSR_SUCCESS) return;
  std::string message = tsrGetLastErrorMessage();
  raise_error(status, message.empty() ? tsrGetErrorString(status) : message);
}

struct ContextState {
  tsr_context_t handle = nullptr;  // nullptr once closed
  ~ContextState() {
    if (handle) tsrDestroyContext(handle);
  }
  tsr_context_t live() const {
    if (!handle) raise_error(TSR_ERROR_INVALID_HANDLE, "the context is closed");
    return handle;
  }
};

struct ModuleState {
  std::shared_ptr<ContextState> context;
  tsr_module_t handle = nullptr;
  ~ModuleState() {
    if (handle && context->handle) tsrUnloadModule(handle);  // a closed context already unloaded it
  }
  tsr_module_t live() const {
    context->live();
    return handle;
  }
};

size_t dtype_bytes(uint32_t dtype) {
  //                                 -  f32 f64 f16 bf16 i8 i16 i32 i64 u8 u16 u32 u64 i1 e4m3 e5m2 tf32 index
  static const unsigned char size[] = {0, 4, 8, 2, 2, 1, 2, 4, 8, 1, 2, 4, 8, 1, 1, 1, 4, 8};
  return dtype < sizeof size ? size[dtype] : 0;
}

class Kernel {
 public:
  Kernel(std::shared_ptr<ModuleState> module, tsr_kernel_t handle, std::string name)
      : module_(std::move(module)), handle_(handle), name_(std::move(name)) {}

  const std::string& name() const { return name_; }

  size_t arg_count() const {
    module_->live();
    size_t n;
    check(tsrKernelGetArgCount(handle_, &n));
    return n;
  }

  tsr_arg_info_t arg_info(size_t i) const {
    tsr_arg_info_t info;
    check(tsrKernelGetArgInfo(handle_, i, &info));
    return info;
  }

  py::list args() const {
    py::list out;
    for (size_t i = 0, n = arg_count(); i < n; i++) {
      tsr_arg_info_t a = arg_info(i);
      py::dict d;
      d["name"] = a.name;
      d["kind"] = a.kind;
      d["dtype"] = a.dtype;
      d["rank"] = a.rank;
      d["flags"] = a.flags;
      d["dims"] = std::vector<int64_t>(a.dims, a.dims + a.rank);
      out.append(d);
    }
    return out;
  }

  std::array<int64_t, 3> block() const {
    module_->live();
    std::array<int64_t, 3> b;
    const tsr_kernel_attribute_t axes[] = {TSR_KERNEL_ATTR_BLOCK_X, TSR_KERNEL_ATTR_BLOCK_Y, TSR_KERNEL_ATTR_BLOCK_Z};
    for (int i = 0; i < 3; i++) check(tsrKernelGetAttribute(handle_, axes[i], &b[i]));
    return b;
  }

  // Each bytes object is the raw value of one argument slot; args[i] points into it.
  void launch(std::array<uint32_t, 3> grid, std::array<uint32_t, 3> block, uint32_t smem_bytes,
              const std::vector<py::bytes>& slots) const {
    module_->live();
    check_slot_sizes(slots);
    std::vector<void*> args(slots.size());
    for (size_t i = 0; i < slots.size(); i++) args[i] = PyBytes_AS_STRING(slots[i].ptr());
    tsr_launch_t l = {grid[0], grid[1], grid[2], block[0], block[1], block[2], smem_bytes};
    tsr_status_t status;
    std::string message;
    {
      py::gil_scoped_release release;  // `slots` keeps the buffers alive meanwhile
      status = tsrLaunch(handle_, nullptr, l, args.data(), args.size());
      if (status) message = tsrGetLastErrorMessage();
    }
    if (status) raise_error(status, message);
  }

 private:
  // A short slot would make the kernel read past the bytes object. Counts are left to tsrLaunch to judge.
  void check_slot_sizes(const std::vector<py::bytes>& slots) const {
    if (slots.size() != arg_count()) return;
    for (size_t i = 0; i < slots.size(); i++) {
      tsr_arg_info_t a = arg_info(i);
      size_t need = a.kind == TSR_ARG_SCALAR ? dtype_bytes(a.dtype) : 8;
      size_t got = static_cast<size_t>(PyBytes_GET_SIZE(slots[i].ptr()));
      if (got < need)
        throw py::value_error("argument " + std::to_string(i) + " ('" + a.name + "') of kernel '" + name_ +
                              "' needs a " + std::to_string(need) + "-byte slot, got " + std::to_string(got) +
                              " bytes");
    }
  }

  std::shared_ptr<ModuleState> module_;
  tsr_kernel_t handle_;
  std::string name_;
};

class Module {
 public:
  explicit Module(std::shared_ptr<ModuleState> state) : state_(std::move(state)) {}

  Kernel kernel(const std::string& name) const {
    tsr_kernel_t k;
    check(tsrGetKernel(state_->live(), name.c_str(), &k));
    return Kernel(state_, k, name);
  }

  std::vector<std::string> kernel_names() const {
    tsr_module_t m = state_->live();
    size_t n;
    check(tsrModuleGetKernelCount(m, &n));
    std::vector<std::string> names;
    for (size_t i = 0; i < n; i++) {
      const char* name;
      check(tsrModuleGetKernelName(m, i, &name));
      names.emplace_back(name);
    }
    return names;
  }

 private:
  std::shared_ptr<ModuleState> state_;
};

class Context {
 public:
  // `backend`: "cpu", "cuda", …; empty: $TESSERA_BACKEND, else "cpu".
  explicit Context(const std::string& backend) : state_(std::make_shared<ContextState>()) {
    tsr_context_options_t options;
    check(tsrContextOptionsInitialize(&options));
    if (!backend.empty()) options.backend = backend.c_str();
    check(tsrCreateContextWithOptions(&options, &state_->handle));
    // The name tsrCreateContext resolved, the same way (backend.h, tsr_backend_find): asking the device's
    // properties instead could fail for reasons of its own (a bad TESSERA_NUM_THREADS on the CPU).
    const char* env = std::getenv("TESSERA_BACKEND");
    backend_ = !backend.empty() ? backend : env && *env ? env : "cpu";
  }

  const std::string& backend() const { return backend_; }

  py::dict properties() const {
    tsr_device_properties_t p;
    check(tsrGetDeviceProperties(state_->live(), &p));
    py::dict d;
    d["backend"] = std::string(p.backend);
    d["name"] = std::string(p.name);
    d["arch"] = std::string(p.arch);
    d["simd_isa"] = std::string(p.simd_isa);
    d["warp_size"] = p.warp_size;
    d["max_threads_per_block"] = p.max_threads_per_block;
    d["max_shared_bytes_per_block"] = p.max_shared_bytes_per_block;
    d["compute_units"] = p.compute_units;
    d["total_memory_bytes"] = p.total_memory_bytes;
    return d;
  }

  // Device memory as plain addresses (ints): tessera.runtime.DeviceArray gives them a shape and a dtype.
  uintptr_t alloc(size_t bytes) const {
    void* p;
    check(tsrAlloc(state_->live(), bytes, TSR_ALLOC_DEFAULT, &p));
    return reinterpret_cast<uintptr_t>(p);
  }

  void free(uintptr_t address) const { check(tsrFree(state_->live(), reinterpret_cast<void*>(address))); }

  // Host buffer (anything with the buffer protocol, C-contiguous) to device memory at `dst`.
  void copy_to_device(uintptr_t dst, const py::buffer& src) const {
    py::buffer_info info = src.request();
    copy(reinterpret_cast<void*>(dst), info.ptr, buffer_bytes(info), TSR_MEMCPY_HOST_TO_DEVICE);
  }

  // Device memory at `src` into a writable, C-contiguous host buffer (its whole size).
  void copy_to_host(const py::buffer& dst, uintptr_t src) const {
    py::buffer_info info = dst.request(true);
    copy(info.ptr, reinterpret_cast<const void*>(src), buffer_bytes(info), TSR_MEMCPY_DEVICE_TO_HOST);
  }

  void copy_device(uintptr_t dst, uintptr_t src, size_t bytes) const {
    copy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes, TSR_MEMCPY_DEVICE_TO_DEVICE);
  }

  Module load_module(const py::bytes& data) const {
    tsr_context_t ctx = state_->live();
    auto module = std::make_shared<ModuleState>();
    module->context = state_;
    char* bytes;
    Py_ssize_t size;
    PyBytes_AsStringAndSize(data.ptr(), &bytes, &size);
    tsr_status_t status;
    std::string message;
    {
      py::gil_scoped_release release;  // loading writes and dlopen()s code
      status = tsrLoadModule(ctx, bytes, static_cast<size_t>(size), &module->handle);
      if (status) message = tsrGetLastErrorMessage();
    }
    if (status) raise_error(status, message);
    return Module(module);
  }

  void synchronize() const { check(tsrSynchronize(state_->live())); }

  // Destroys the context now; what was loaded through it stops working. Closing twice is harmless.
  void close() {
    if (!state_->handle) return;
    tsr_context_t ctx = std::exchange(state_->handle, nullptr);
    check(tsrDestroyContext(ctx));
  }

  bool closed() const { return state_->handle == nullptr; }

 private:
  static size_t buffer_bytes(const py::buffer_info& info) {
    ssize_t expect = info.itemsize;
    for (ssize_t i = info.ndim - 1; i >= 0; i--) {
      if (info.shape[i] > 1 && info.strides[i] != expect) throw py::value_error("the buffer must be C-contiguous");
      expect *= info.shape[i];
    }
    return static_cast<size_t>(info.size * info.itemsize);
  }

  void copy(void* dst, const void* src, size_t bytes, tsr_memcpy_kind_t kind) const {
    tsr_context_t ctx = state_->live();
    tsr_status_t status;
    std::string message;
    {
      py::gil_scoped_release release;  // the buffers stay referenced by the caller's arguments
      status = tsrMemcpy(ctx, dst, src, bytes, kind);
      if (status) message = tsrGetLastErrorMessage();
    }
    if (status) raise_error(status, message);
  }

  std::shared_ptr<ContextState> state_;
  std::string backend_;
};

const tsr_status_t all_statuses[] = {
    TSR_SUCCESS,           TSR_ERROR_INIT_FAIL,       TSR_ERROR_INVALID_HANDLE, TSR_ERROR_OUT_OF_MEMORY,
    TSR_ERROR_UNSUPPORTED, TSR_ERROR_INVALID_VALUE,   TSR_ERROR_TIMEOUT,        TSR_ERROR_BAD_IMAGE,
    TSR_ERROR_ABI_MISMATCH, TSR_ERROR_NOT_FOUND,      TSR_ERROR_LAUNCH_FAILED};

}  // namespace

PYBIND11_MODULE(_runtime, m) {
  m.doc() = "libtessera bindings: load .tessera images and launch their kernels (see tessera.runtime)";

  error_type = PyErr_NewExceptionWithDoc(
      "tessera._runtime.Error",
      "A libtessera call failed. `status` is the tsr_status_t code, `status_name` its name "
      "(e.g. 'TSR_ERROR_BAD_IMAGE'); the message is tsrGetLastErrorMessage().",
      PyExc_RuntimeError, nullptr);
  if (!error_type) throw py::error_already_set();
  m.add_object("Error", py::reinterpret_borrow<py::object>(error_type));

  py::dict statuses;
  for (tsr_status_t s : all_statuses) statuses[tsrGetStatusName(s)] = static_cast<int>(s);
  m.attr("STATUS") = statuses;

  m.def("version", [] {
    int major, minor, patch;
    check(tsrGetVersion(&major, &minor, &patch));
    return py::make_tuple(major, minor, patch);
  }, "libtessera's version (major, minor, patch).");
  m.def("abi_version", [] {
    uint32_t major, minor;
    check(tsrGetAbiVersion(&major, &minor));
    return py::make_tuple(major, minor);
  }, "The image ABI version this runtime loads (major, minor).");
  m.def("status_name", [](int status) { return tsrGetStatusName(static_cast<tsr_status_t>(status)); },
        py::arg("status"), "The name of a status code, e.g. 'TSR_ERROR_BAD_IMAGE'.");
  m.def("backends", [] {
    size_t n;
    check(tsrGetBackendCount(&n));
    std::vector<std::string> names;
    for (size_t i = 0; i < n; i++) {
      const char* name;
      check(tsrGetBackendName(i, &name));
      names.emplace_back(name);
    }
    return names;
  }, "Names of the backends this machine can run, e.g. ['cpu', 'cuda'].");

  py::class_<Kernel>(m, "Kernel", "A launchable kernel; keeps its module loaded.")
      .def_property_readonly("name", &Kernel::name)
      .def_property_readonly("arg_count", &Kernel::arg_count, "Number of launch argument slots.")
      .def_property_readonly("args", &Kernel::args,
                             "Argument descriptions: dicts of name, kind (0 scalar, 1 tensor, 2 dimension), dtype, "
                             "rank, dims, flags.")
      .def_property_readonly("block", &Kernel::block, "The compiled block shape; (0, 0, 0) means any.")
      .def("launch", &Kernel::launch, py::arg("grid"), py::arg("block"), py::arg("smem_bytes"), py::arg("args"),
           "Runs the kernel and waits for it. `args` holds one bytes object per argument slot: the raw "
           "value (scalar in its dtype, tensor as its 8-byte address, dimension as int64). Releases the GIL.");

  py::class_<Module>(m, "Module", "A loaded image; keeps its context alive.")
      .def("kernel", &Module::kernel, py::arg("name"))
      .def("kernel_names", &Module::kernel_names, "Names of the kernels this runtime can run.");

  py::class_<Context>(m, "Context", "A libtessera context: owns modules, memory and worker threads.")
      .def(py::init<const std::string&>(), py::arg("backend") = "",
           "A context on `backend` ('cpu', 'cuda'; default: $TESSERA_BACKEND, else 'cpu').")
      .def_property_readonly("backend", &Context::backend, "The backend's name: 'cpu', 'cuda', …")
      .def_property_readonly("properties", &Context::properties,
                             "The device: backend, name, arch, warp_size, compute_units, total_memory_bytes, …")
      .def("alloc", &Context::alloc, py::arg("bytes"), "Allocates device memory; returns its address.")
      .def("free", &Context::free, py::arg("address"))
      .def("copy_to_device", &Context::copy_to_device, py::arg("dst"), py::arg("src"),
           "Copies a C-contiguous host buffer to device memory at `dst`. Releases the GIL.")
      .def("copy_to_host", &Context::copy_to_host, py::arg("dst"), py::arg("src"),
           "Fills a writable C-contiguous host buffer from device memory at `src`. Releases the GIL.")
      .def("copy_device", &Context::copy_device, py::arg("dst"), py::arg("src"), py::arg("bytes"))
      .def("load_module", &Context::load_module, py::arg("data"), "Loads a .tessera image from bytes.")
      .def("synchronize", &Context::synchronize)
      .def("close", &Context::close, "Destroys the context and everything loaded through it.")
      .def_property_readonly("closed", &Context::closed)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](Context& self, py::args) { self.close(); });
}
