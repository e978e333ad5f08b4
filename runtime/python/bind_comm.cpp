// bind_comm.cpp — tessera._runtime.Comm (<tessera/comm.h>): communicators over MPI or NCCL. Buffers are
// addresses (ints) with an element count and a dtype code: tessera.comm turns numpy arrays and DeviceArrays
// into them and keeps them alive for the call. Every operation releases the GIL (it waits for peers).
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "bindings.h"

namespace tsr_py {

namespace {

using CommState = Owned<tsr_comm_t>;

tsr_comm_options_t options_of(uint32_t backend, uint32_t flags, uint64_t timeout_ms, uint32_t units = 0) {
  tsr_comm_options_t o;
  tsrCommOptionsInitialize(&o);
  o.backend = backend;
  o.flags = flags;
  o.timeout_ms = timeout_ms;
  o.units = units;
  return o;
}

inline const void* ptr(uintptr_t address) { return reinterpret_cast<const void*>(address); }
inline void* mut(uintptr_t address) { return reinterpret_cast<void*>(address); }

class Comm {
 public:
  explicit Comm(std::shared_ptr<CommState> state) : state_(std::move(state)) {}

  static Comm create(const py::object& context, int world, int rank, const py::bytes& id, uint32_t backend,
                     uint32_t flags, uint64_t timeout_ms, uint32_t units) {
    std::string bytes = id;
    if (bytes.size() != TSR_COMM_UNIQUE_ID_BYTES)
      raise_error(TSR_ERROR_INVALID_VALUE, "the unique id must be " + std::to_string(TSR_COMM_UNIQUE_ID_BYTES) +
                                               " bytes, got " + std::to_string(bytes.size()));
    tsr_comm_unique_id_t uid;
    memcpy(uid.bytes, bytes.data(), sizeof uid.bytes);
    auto state = std::make_shared<CommState>(context_state(context), tsrReleaseComm);
    tsr_context_t ctx = state->context->live();
    tsr_comm_options_t o = options_of(backend, flags, timeout_ms, units);
    released([&] { return tsrCommCreate(ctx, &o, world, rank, &uid, &state->handle); });
    return Comm(state);
  }

  static Comm from_env(const py::object& context, uint32_t backend, uint32_t flags, uint64_t timeout_ms,
                       uint32_t units) {
    auto state = std::make_shared<CommState>(context_state(context), tsrReleaseComm);
    tsr_context_t ctx = state->context->live();
    tsr_comm_options_t o = options_of(backend, flags, timeout_ms, units);
    released([&] { return tsrCommCreateFromEnv(ctx, &o, &state->handle); });
    return Comm(state);
  }

  int rank() const {
    int r;
    check(tsrCommGetRank(state_->live(), &r));
    return r;
  }
  int size() const {
    int s;
    check(tsrCommGetSize(state_->live(), &s));
    return s;
  }
  // The tsr_comm_t, for a function call's options (bind_function.cpp).
  uintptr_t address() const { return reinterpret_cast<uintptr_t>(state_->live()); }
  uint32_t backend() const {
    uint32_t b;
    check(tsrCommGetBackend(state_->live(), &b));
    return b;
  }

  std::optional<Comm> split(int color, int key) const {
    tsr_comm_t c = state_->live();
    auto sub = std::make_shared<CommState>(state_->context, tsrReleaseComm);
    released([&] { return tsrCommSplit(c, color, key, &sub->handle); });
    if (!sub->handle) return std::nullopt;
    return Comm(sub);
  }

  void async_error() const { check(tsrCommGetAsyncError(state_->live())); }
  void abort() const { check(tsrCommAbort(state_->live())); }

  void all_reduce(uintptr_t send, uintptr_t recv, size_t count, int dtype, int op, const py::object& stream) const {
    tsr_comm_t c = state_->live();
    tsr_stream_t s = stream_of(stream);
    released([&] {
      return tsrCommAllReduce(c, ptr(send), mut(recv), count, static_cast<tsr_dtype_t>(dtype),
                              static_cast<tsr_reduce_op_t>(op), s);
    });
  }
  void reduce_scatter(uintptr_t send, uintptr_t recv, size_t count, int dtype, int op,
                      const py::object& stream) const {
    tsr_comm_t c = state_->live();
    tsr_stream_t s = stream_of(stream);
    released([&] {
      return tsrCommReduceScatter(c, ptr(send), mut(recv), count, static_cast<tsr_dtype_t>(dtype),
                                  static_cast<tsr_reduce_op_t>(op), s);
    });
  }
  void all_gather(uintptr_t send, uintptr_t recv, size_t count, int dtype, const py::object& stream) const {
    tsr_comm_t c = state_->live();
    tsr_stream_t s = stream_of(stream);
    released([&] { return tsrCommAllGather(c, ptr(send), mut(recv), count, static_cast<tsr_dtype_t>(dtype), s); });
  }
  void all_to_all(uintptr_t send, uintptr_t recv, size_t count, int dtype, const py::object& stream) const {
    tsr_comm_t c = state_->live();
    tsr_stream_t s = stream_of(stream);
    released([&] { return tsrCommAllToAll(c, ptr(send), mut(recv), count, static_cast<tsr_dtype_t>(dtype), s); });
  }
  void broadcast(uintptr_t send, uintptr_t recv, size_t count, int dtype, int root, const py::object& stream) const {
    tsr_comm_t c = state_->live();
    tsr_stream_t s = stream_of(stream);
    released([&] {
      return tsrCommBroadcast(c, ptr(send), mut(recv), count, static_cast<tsr_dtype_t>(dtype), root, s);
    });
  }
  void send(uintptr_t buf, size_t count, int dtype, int peer, const py::object& stream) const {
    tsr_comm_t c = state_->live();
    tsr_stream_t s = stream_of(stream);
    released([&] { return tsrCommSend(c, ptr(buf), count, static_cast<tsr_dtype_t>(dtype), peer, s); });
  }
  void recv(uintptr_t buf, size_t count, int dtype, int peer, const py::object& stream) const {
    tsr_comm_t c = state_->live();
    tsr_stream_t s = stream_of(stream);
    released([&] { return tsrCommRecv(c, mut(buf), count, static_cast<tsr_dtype_t>(dtype), peer, s); });
  }

  // Releases the handle now (the wrapper's destructor would otherwise, when Python frees it).
  void close() {
    if (state_->handle && state_->context->handle) tsrReleaseComm(state_->handle);
    state_->handle = nullptr;
  }

 private:
  std::shared_ptr<CommState> state_;
};

}  // namespace

void bind_comm(py::module_& m) {
  m.def("comm_unique_id", [](const py::object& context, uint32_t backend, uint32_t flags, uint64_t timeout_ms) {
    tsr_comm_options_t o = options_of(backend, flags, timeout_ms);
    tsr_comm_unique_id_t id;
    check(tsrCommGetUniqueId(context_state(context)->live(), &o, &id));
    return py::bytes(reinterpret_cast<const char*>(id.bytes), sizeof id.bytes);
  }, py::arg("context"), py::arg("backend") = 0, py::arg("flags") = 0, py::arg("timeout_ms") = 0,
     "tsrCommGetUniqueId: a new id (bytes) for tsrCommCreate.");

  py::class_<Comm>(m, "Comm", "A communicator (tsr_comm_t): see tessera.comm.Communicator.")
      .def_static("create", &Comm::create, py::arg("context"), py::arg("world"), py::arg("rank"), py::arg("id"),
                  py::arg("backend") = 0, py::arg("flags") = 0, py::arg("timeout_ms") = 0, py::arg("units") = 0)
      .def_static("from_env", &Comm::from_env, py::arg("context"), py::arg("backend") = 0, py::arg("flags") = 0,
                  py::arg("timeout_ms") = 0, py::arg("units") = 0)
      .def_property_readonly("rank", &Comm::rank)
      .def_property_readonly("size", &Comm::size)
      .def_property_readonly("backend", &Comm::backend)
      .def_property_readonly("address", &Comm::address, "The tsr_comm_t, for Function.call's comm.")
      .def("split", &Comm::split, py::arg("color"), py::arg("key"))
      .def("async_error", &Comm::async_error)
      .def("abort", &Comm::abort)
      .def("all_reduce", &Comm::all_reduce, py::arg("send"), py::arg("recv"), py::arg("count"), py::arg("dtype"),
           py::arg("op"), py::arg("stream") = py::none())
      .def("reduce_scatter", &Comm::reduce_scatter, py::arg("send"), py::arg("recv"), py::arg("count"),
           py::arg("dtype"), py::arg("op"), py::arg("stream") = py::none())
      .def("all_gather", &Comm::all_gather, py::arg("send"), py::arg("recv"), py::arg("count"), py::arg("dtype"),
           py::arg("stream") = py::none())
      .def("all_to_all", &Comm::all_to_all, py::arg("send"), py::arg("recv"), py::arg("count"), py::arg("dtype"),
           py::arg("stream") = py::none())
      .def("broadcast", &Comm::broadcast, py::arg("send"), py::arg("recv"), py::arg("count"), py::arg("dtype"),
           py::arg("root"), py::arg("stream") = py::none())
      .def("send", &Comm::send, py::arg("buf"), py::arg("count"), py::arg("dtype"), py::arg("peer"),
           py::arg("stream") = py::none())
      .def("recv", &Comm::recv, py::arg("buf"), py::arg("count"), py::arg("dtype"), py::arg("peer"),
           py::arg("stream") = py::none())
      .def("close", &Comm::close);
}

}  // namespace tsr_py
