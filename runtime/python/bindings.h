// bindings.h — what the files of tessera._runtime share: errors, and the handles' shared state.
//
// Ownership mirrors the C API: a Module, Stream, Event or Graph keeps its Context alive, and a Kernel its
// Module (through shared state, not Python references). Context.close() destroys the context at once, like
// tsrDestroyContext; objects of a closed context then raise Error instead of touching freed handles.
// Failures raise Error(RuntimeError) carrying the status code and tsrGetLastErrorMessage(). Calls that may wait
// (launches, copies, synchronization, loading) release the GIL.
#ifndef TESSERA_PYTHON_BINDINGS_H_
#define TESSERA_PYTHON_BINDINGS_H_

#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <utility>

#include "tessera/tessera.h"

namespace tsr_py {

namespace py = pybind11;

[[noreturn]] void raise_error(tsr_status_t status, const std::string& message);

// Text from an image (kernel names, messages quoting them) as str: bytes that are not UTF-8 are replaced, since
// the C loader checks names for termination, not for their encoding.
py::str text(const std::string& s);

// Call right after the failing tsr* call, on the same thread: the message is thread-local.
void check(tsr_status_t status);

// Runs `call` (returning a tsr_status_t) with the GIL released, and raises its failure.
template <class Call>
void released(Call&& call) {
  tsr_status_t status;
  std::string message;
  {
    py::gil_scoped_release release;
    status = call();
    if (status) message = tsrGetLastErrorMessage();
  }
  if (status) raise_error(status, message.empty() ? tsrGetErrorString(status) : message);
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

// A handle owned by a context: released with the wrapper, unless the context went first (and took it along).
template <class Handle>
struct Owned {
  std::shared_ptr<ContextState> context;
  Handle handle = nullptr;
  tsr_status_t (*release)(Handle) = nullptr;

  Owned(std::shared_ptr<ContextState> c, tsr_status_t (*r)(Handle)) : context(std::move(c)), release(r) {}
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() {
    if (handle && context->handle) {
      py::gil_scoped_release unlocked;  // releasing a stream finishes its queue
      release(handle);
    }
  }
  Handle live() const {
    context->live();
    return handle;
  }
};

using ModuleState = Owned<tsr_module_t>;
using StreamState = Owned<tsr_stream_t>;

// The state of a Python `context` argument (a tessera._runtime.Context), for the classes of other files.
std::shared_ptr<ContextState> context_state(const py::handle& context);

class Stream {
 public:
  Stream(const py::object& context, int priority, uint64_t affinity);
  tsr_stream_t live() const { return state_->live(); }
  const std::shared_ptr<ContextState>& context() const { return state_->context; }

 private:
  std::shared_ptr<StreamState> state_;
};

// The handle of a Python `stream` argument: None is the NULL stream.
inline tsr_stream_t stream_of(const py::object& stream) {
  return stream.is_none() ? nullptr : stream.cast<const Stream&>().live();
}

// Function `name` of a module: a tessera._runtime.Function (bind_function.cpp).
py::object make_function(std::shared_ptr<ModuleState> module, const std::string& name);

// The names of a module's kernels or functions, through the C API's count and index -> name pair.
inline py::list module_names(tsr_module_t m, tsr_status_t (*count)(tsr_module_t, size_t*),
                             tsr_status_t (*name_at)(tsr_module_t, size_t, const char**)) {
  size_t n;
  check(count(m, &n));
  py::list names;
  for (size_t i = 0; i < n; i++) {
    const char* name;
    check(name_at(m, i, &name));
    names.append(text(name));
  }
  return names;
}

void bind_context(py::module_& m);
void bind_execution(py::module_& m);
void bind_function(py::module_& m);
void bind_telemetry(py::module_& m);
void bind_comm(py::module_& m);

}  // namespace tsr_py

#endif  // TESSERA_PYTHON_BINDINGS_H_
