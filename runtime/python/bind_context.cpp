// bind_context.cpp — tessera._runtime.Context, Module and Kernel: contexts with their options, device
// queries, memory (device, pinned, registered host memory, copies), loading images, launching kernels.
#include <pybind11/stl.h>

#include <array>
#include <optional>
#include <vector>

#include "bindings.h"
#include "launch_plan.h"

namespace tsr_py {

namespace {

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

  // Each bytes object is the raw value of one argument slot; args[i] points into it. The runtime copies the
  // values before returning, so a queued launch does not need them afterwards.
  void launch(std::array<uint32_t, 3> grid, std::array<uint32_t, 3> block, uint32_t smem_bytes,
              const std::vector<py::bytes>& slots, const py::object& stream, double flops, double bytes) const {
    module_->live();
    check_slot_sizes(slots);
    std::vector<void*> args(slots.size());
    for (size_t i = 0; i < slots.size(); i++) args[i] = PyBytes_AS_STRING(slots[i].ptr());
    tsr_launch_desc_t d;
    check(tsrLaunchDescInitialize(&d));
    for (int i = 0; i < 3; i++) d.grid[i] = grid[i], d.block[i] = block[i];
    d.smem_bytes = smem_bytes;
    d.stream = stream_of(stream);
    d.flops = flops;
    d.bytes = bytes;
    d.args = args.data();
    d.nargs = args.size();
    if (!block[0] || !block[1] || !block[2])  /* a 0 in the block is an error here, never "derive it" */
      raise_error(TSR_ERROR_INVALID_VALUE, "kernel '" + name_ + "': block dimensions must be >= 1");
    released([&] { return tsrLaunchTile(handle_, &d); });  // `slots` keeps the values alive meanwhile
  }

  // Kernel.__call__'s checks, laid out once (launch_plan.h).
  void prepare(const py::sequence& records, bool host_memory, const py::dict& refs) {
    plan_ = make_launch_plan(records, host_memory, refs);
  }

  // Launches as `launch` does, from the call's own arguments, where the plan accepts them all; false, having
  // done nothing, where it does not (Kernel.__call__ then packs and checks them in Python).
  bool call(py::handle args, py::handle grid, py::handle block, py::handle smem_bytes, const py::object& stream,
            py::handle flops, py::handle bytes) const {
    LaunchValues v;
    if (!plan_ || !read_launch(*plan_, args.ptr(), grid.ptr(), block.ptr(), smem_bytes.ptr(), flops.ptr(),
                               bytes.ptr(), &v))
      return false;
    module_->live();
    tsr_launch_desc_t d;
    check(tsrLaunchDescInitialize(&d));
    for (int i = 0; i < 3; i++) d.grid[i] = v.grid[i], d.block[i] = v.block[i];
    d.smem_bytes = v.smem_bytes;
    d.stream = stream_of(stream);
    d.flops = v.flops;
    d.bytes = v.bytes;
    d.args = v.args;
    d.nargs = v.nargs;
    if (!v.block[0] || !v.block[1] || !v.block[2])
      raise_error(TSR_ERROR_INVALID_VALUE, "kernel '" + name_ + "': block dimensions must be >= 1");
    released([&] { return tsrLaunchTile(handle_, &d); });
    return true;
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
  std::shared_ptr<LaunchPlan> plan_;  // shared by the copies of this Kernel
};

class Module {
 public:
  explicit Module(std::shared_ptr<ModuleState> state) : state_(std::move(state)) {}

  Kernel kernel(const std::string& name) const {
    tsr_kernel_t k;
    check(tsrGetKernel(state_->live(), name.c_str(), &k));
    return Kernel(state_, k, name);
  }

  py::object function(const std::string& name) const { return make_function(state_, name); }
  py::list function_names() const {
    return module_names(state_->live(), tsrModuleGetFunctionCount, tsrModuleGetFunctionName);
  }
  py::list kernel_names() const {
    return module_names(state_->live(), tsrModuleGetKernelCount, tsrModuleGetKernelName);
  }

 private:
  std::shared_ptr<ModuleState> state_;
};

class Context {
 public:
  // `backend`: "cpu", "cuda", …; empty: $TESSERA_BACKEND, else "cpu". `threads`: CPU workers, 0: the default.
  // `wait_timeout_ms`: the watchdog of waits that name no limit; 0: $TESSERA_WAIT_TIMEOUT_MS, else none.
  Context(const std::string& backend, bool debug, unsigned threads, uint32_t wait_timeout_ms)
      : state_(std::make_shared<ContextState>()) {
    tsr_context_options_t options;
    check(tsrContextOptionsInitialize(&options));
    if (!backend.empty()) options.backend = backend.c_str();
    if (debug) options.flags |= TSR_CONTEXT_DEBUG;
    options.worker_threads = threads;
    options.wait_timeout_ms = wait_timeout_ms;
    check(tsrCreateContextWithOptions(&options, &state_->handle));
    const char* name;
    check(tsrContextGetBackend(state_->handle, &name));
    backend_ = name;
    check(tsrContextIsDebug(state_->handle, &debug_));
  }

  const std::shared_ptr<ContextState>& state() const { return state_; }
  const std::string& backend() const { return backend_; }
  bool debug() const { return debug_ != 0; }

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

  int64_t limit(int which) const {
    int64_t v;
    check(tsrGetLimit(state_->live(), static_cast<tsr_limit_t>(which), &v));
    return v;
  }

  py::dict memory_stats() const {
    tsr_memory_stats_t s;
    check(tsrGetMemoryStats(state_->live(), &s));
    py::dict d;
    d["allocations"] = s.allocations;
    d["bytes_in_use"] = s.bytes_in_use;
    d["bytes_reserved"] = s.bytes_reserved;
    d["bytes_cached"] = s.bytes_cached;
    d["peak_bytes_in_use"] = s.peak_bytes_in_use;
    d["registered_bytes"] = s.registered_bytes;
    return d;
  }

  void trim_memory() const { check(tsrTrimMemory(state_->live())); }

  // Memory as plain addresses (ints): tessera.runtime.DeviceArray gives them a shape and a dtype.
  uintptr_t alloc(size_t bytes, bool pinned) const {
    void* p;
    check(tsrAlloc(state_->live(), bytes, pinned ? TSR_ALLOC_HOST_PINNED : TSR_ALLOC_DEFAULT, &p));
    return reinterpret_cast<uintptr_t>(p);
  }

  void free(uintptr_t address) const { check(tsrFree(state_->live(), reinterpret_cast<void*>(address))); }

  void host_register(uintptr_t address, size_t bytes, bool pinned) const {
    check(tsrHostRegister(state_->live(), reinterpret_cast<void*>(address), bytes,
                          pinned ? TSR_HOST_REGISTER_PINNED : TSR_HOST_REGISTER_DEFAULT));
  }

  void host_unregister(uintptr_t address) const {
    check(tsrHostUnregister(state_->live(), reinterpret_cast<void*>(address)));
  }

  void device_register(uintptr_t address, size_t bytes) const {
    check(tsrDeviceRegister(state_->live(), reinterpret_cast<void*>(address), bytes, TSR_DEVICE_REGISTER_DEFAULT));
  }

  void device_unregister(uintptr_t address) const {
    check(tsrDeviceUnregister(state_->live(), reinterpret_cast<void*>(address)));
  }

  py::dict pointer_info(uintptr_t address) const {
    static const char* const kinds[] = {"unknown", "device", "pinned", "registered", "device_registered"};
    tsr_pointer_info_t info;
    check(tsrPointerGetInfo(state_->live(), reinterpret_cast<const void*>(address), &info));
    py::dict d;
    d["kind"] = kinds[info.kind < sizeof kinds / sizeof *kinds ? info.kind : 0];
    d["base"] = reinterpret_cast<uintptr_t>(info.base);
    d["bytes"] = info.bytes;
    return d;
  }

  // Host buffer (anything with the buffer protocol, C-contiguous) to device memory at `dst`.
  void copy_to_device(uintptr_t dst, const py::buffer& src) const {
    py::buffer_info info = src.request();
    memcpy(reinterpret_cast<void*>(dst), info.ptr, buffer_bytes(info), TSR_MEMCPY_HOST_TO_DEVICE, nullptr);
  }

  // Device memory at `src` into a writable, C-contiguous host buffer (its whole size).
  void copy_to_host(const py::buffer& dst, uintptr_t src) const {
    py::buffer_info info = dst.request(true);
    memcpy(info.ptr, reinterpret_cast<const void*>(src), buffer_bytes(info), TSR_MEMCPY_DEVICE_TO_HOST, nullptr);
  }

  void copy_device(uintptr_t dst, uintptr_t src, size_t bytes) const {
    memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes, TSR_MEMCPY_DEVICE_TO_DEVICE,
           nullptr);
  }

  // tsrMemcpyAsync between addresses; stream None: synchronous. The caller keeps the memory alive until the
  // copy has run (tessera.stream does, for arrays).
  void memcpy_async(uintptr_t dst, uintptr_t src, size_t bytes, int kind, const py::object& stream) const {
    memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes,
           static_cast<tsr_memcpy_kind_t>(kind), stream_of(stream));
  }

  Module load_module(const py::bytes& data) const {
    tsr_context_t ctx = state_->live();
    auto module = std::make_shared<ModuleState>(state_, tsrReleaseModule);
    char* bytes;
    Py_ssize_t size;
    PyBytes_AsStringAndSize(data.ptr(), &bytes, &size);
    released([&] { return tsrLoadModule(ctx, bytes, static_cast<size_t>(size), &module->handle); });
    return Module(module);
  }

  // No limit: tsrSynchronize (the watchdog's, if any); else tsrSynchronizeTimeout.
  void synchronize(std::optional<uint32_t> timeout_ms) const {
    tsr_context_t ctx = state_->live();
    released([&] { return timeout_ms ? tsrSynchronizeTimeout(ctx, *timeout_ms) : tsrSynchronize(ctx); });
  }

  // Destroys the context now; what was created through it stops working. Closing twice is harmless.
  void close() {
    if (!state_->handle) return;
    tsr_context_t ctx = std::exchange(state_->handle, nullptr);
    released([&] { return tsrDestroyContext(ctx); });  // waits for the streams' queued work
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

  void memcpy(void* dst, const void* src, size_t bytes, tsr_memcpy_kind_t kind, tsr_stream_t stream) const {
    tsr_context_t ctx = state_->live();
    released([&] { return tsrMemcpyAsync(ctx, dst, src, bytes, kind, stream); });  // callers keep buffers alive
  }

  std::shared_ptr<ContextState> state_;
  std::string backend_;
  int debug_ = 0;
};

}  // namespace

std::shared_ptr<ContextState> context_state(const py::handle& context) {
  return context.cast<const Context&>().state();
}

void bind_context(py::module_& m) {
  py::class_<Kernel>(m, "Kernel", "A launchable kernel; keeps its module loaded.")
      .def_property_readonly("name", &Kernel::name)
      .def_property_readonly("arg_count", &Kernel::arg_count, "Number of launch argument slots.")
      .def_property_readonly("args", &Kernel::args,
                             "Argument descriptions: dicts of name, kind (0 scalar, 1 tensor, 2 dimension), dtype, "
                             "rank, dims, flags.")
      .def_property_readonly("block", &Kernel::block, "The compiled block shape; (0, 0, 0) means any.")
      .def("launch", &Kernel::launch, py::arg("grid"), py::arg("block"), py::arg("smem_bytes"), py::arg("args"),
           py::arg("stream") = py::none(), py::arg("flops") = 0.0, py::arg("bytes") = 0.0,
           "Launches the kernel on `stream` (None: the synchronous default stream: returns when it is done). "
           "`args` holds one bytes object per argument slot: the raw value (scalar in its dtype, tensor as its "
           "8-byte address, dimension as int64); the values are copied before this returns. `flops`/`bytes`: "
           "the launch's work, for the metrics log. Releases the GIL.")
      .def("prepare", &Kernel::prepare, py::arg("records"), py::arg("host_memory"), py::arg("refs"),
           "Lays out the checks of `call` (tessera.runtime.Kernel._fast_plan).")
      .def("call", &Kernel::call,
           "call(args, grid, block, smem_bytes, stream, flops, bytes): launches as tessera.runtime.Kernel does "
           "where the prepared checks accept every argument, and returns True; returns False, having done "
           "nothing, where they do not. Releases the GIL while the kernel runs.");

  py::class_<Module>(m, "Module", "A loaded image; keeps its context alive.")
      .def("kernel", &Module::kernel, py::arg("name"))
      .def("kernel_names", &Module::kernel_names, "Names of the kernels this runtime can run.")
      .def("function", &Module::function, py::arg("name"),
           "Function `name` (tsrModuleGetFunction): a Function, run by libtessera's plan executor.")
      .def("function_names", &Module::function_names, "Names of the module's functions.");

  py::class_<Context>(m, "Context", "A libtessera context: owns modules, memory, streams, events and graphs.")
      .def(py::init<const std::string&, bool, unsigned, uint32_t>(), py::arg("backend") = "",
           py::arg("debug") = false, py::arg("threads") = 0u, py::arg("wait_timeout_ms") = 0u,
           "A context on `backend` ('cpu', 'cuda'; default: $TESSERA_BACKEND, else 'cpu'); `debug`: debug mode "
           "(also on with $TESSERA_DEBUG=1); `threads`: CPU worker threads (0: $TESSERA_NUM_THREADS, else one "
           "per CPU); `wait_timeout_ms`: the watchdog, the limit of waits given none, which then raise "
           "TSR_ERROR_TIMEOUT (0: $TESSERA_WAIT_TIMEOUT_MS, else no limit).")
      .def_property_readonly("backend", &Context::backend, "The backend's name: 'cpu', 'cuda', …")
      .def_property_readonly("debug", &Context::debug, "Whether debug mode is on.")
      .def_property_readonly("properties", &Context::properties,
                             "The device: backend, name, arch, simd_isa, warp_size, compute_units, …")
      .def("limit", &Context::limit, py::arg("limit"), "tsrGetLimit: one of the LIMIT values.")
      .def("memory_stats", &Context::memory_stats)
      .def("trim_memory", &Context::trim_memory, "Returns the pool's cached blocks to the system.")
      .def("alloc", &Context::alloc, py::arg("bytes"), py::arg("pinned") = false,
           "Allocates device memory (or pinned host memory); returns its address.")
      .def("free", &Context::free, py::arg("address"))
      .def("host_register", &Context::host_register, py::arg("address"), py::arg("bytes"), py::arg("pinned") = false)
      .def("host_unregister", &Context::host_unregister, py::arg("address"))
      .def("device_register", &Context::device_register, py::arg("address"), py::arg("bytes"),
           "tsrDeviceRegister: another library's device memory becomes known to the context (copies accept it).")
      .def("device_unregister", &Context::device_unregister, py::arg("address"))
      .def("pointer_info", &Context::pointer_info, py::arg("address"),
           "What the context knows of an address: kind ('device', 'pinned', 'registered', 'device_registered', "
           "'unknown'), base, bytes.")
      .def("copy_to_device", &Context::copy_to_device, py::arg("dst"), py::arg("src"),
           "Copies a C-contiguous host buffer to device memory at `dst`. Releases the GIL.")
      .def("copy_to_host", &Context::copy_to_host, py::arg("dst"), py::arg("src"),
           "Fills a writable C-contiguous host buffer from device memory at `src`. Releases the GIL.")
      .def("copy_device", &Context::copy_device, py::arg("dst"), py::arg("src"), py::arg("bytes"))
      .def("memcpy", &Context::memcpy_async, py::arg("dst"), py::arg("src"), py::arg("bytes"),
           py::arg("kind") = static_cast<int>(TSR_MEMCPY_DEFAULT), py::arg("stream") = py::none(),
           "tsrMemcpyAsync between addresses (stream None: synchronous). Releases the GIL.")
      .def("load_module", &Context::load_module, py::arg("data"), "Loads a .tessera image from bytes.")
      .def("synchronize", &Context::synchronize, py::arg("timeout_ms") = py::none(),
           "Waits for every stream, for at most `timeout_ms` if given (TSR_ERROR_TIMEOUT); raises the first error "
           "they kept.")
      .def("close", &Context::close, "Destroys the context and everything created through it.")
      .def_property_readonly("closed", &Context::closed)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](Context& self, py::args) { self.close(); });

  py::dict limits;
  const std::pair<const char*, tsr_limit_t> names[] = {
      {"max_threads_per_block", TSR_LIMIT_MAX_THREADS_PER_BLOCK},
      {"max_shared_bytes_per_block", TSR_LIMIT_MAX_SHARED_BYTES_PER_BLOCK},
      {"warp_size", TSR_LIMIT_WARP_SIZE},
      {"max_block_dim_x", TSR_LIMIT_MAX_BLOCK_DIM_X}, {"max_block_dim_y", TSR_LIMIT_MAX_BLOCK_DIM_Y},
      {"max_block_dim_z", TSR_LIMIT_MAX_BLOCK_DIM_Z}, {"max_grid_dim_x", TSR_LIMIT_MAX_GRID_DIM_X},
      {"max_grid_dim_y", TSR_LIMIT_MAX_GRID_DIM_Y}, {"max_grid_dim_z", TSR_LIMIT_MAX_GRID_DIM_Z},
      {"compute_units", TSR_LIMIT_COMPUTE_UNITS}, {"simd_width_bytes", TSR_LIMIT_SIMD_WIDTH_BYTES},
      {"alloc_alignment", TSR_LIMIT_ALLOC_ALIGNMENT}, {"total_memory_bytes", TSR_LIMIT_TOTAL_MEMORY_BYTES}};
  for (const auto& [name, value] : names) limits[name] = static_cast<int>(value);
  m.attr("LIMIT") = limits;
  py::dict kinds;
  kinds["host_to_host"] = static_cast<int>(TSR_MEMCPY_HOST_TO_HOST);
  kinds["host_to_device"] = static_cast<int>(TSR_MEMCPY_HOST_TO_DEVICE);
  kinds["device_to_host"] = static_cast<int>(TSR_MEMCPY_DEVICE_TO_HOST);
  kinds["device_to_device"] = static_cast<int>(TSR_MEMCPY_DEVICE_TO_DEVICE);
  kinds["default"] = static_cast<int>(TSR_MEMCPY_DEFAULT);
  m.attr("MEMCPY") = kinds;
}

}  // namespace tsr_py
