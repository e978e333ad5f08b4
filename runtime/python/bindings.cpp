// bindings.cpp — tessera._runtime: the pybind11 module over libtessera that tessera/runtime.py, stream.py,
// graph.py, executor.py and telemetry.py stand on. This file: errors, statuses, versions, backends; the classes
// are in bind_context.cpp (contexts, modules, kernels), bind_execution.cpp (streams, events, graphs),
// bind_function.cpp (functions, DLPack), bind_telemetry.cpp (metrics, trace ranges) and bind_comm.cpp
// (communicators). bindings.h says how
// ownership and errors work.
#include <pybind11/stl.h>

#include <vector>

#include "bindings.h"

namespace tsr_py {

namespace {
PyObject* error_type;  // tessera._runtime.Error, created at import
}

py::str text(const std::string& s) {
  PyObject* str = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
  if (str == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(str);
}

[[noreturn]] void raise_error(tsr_status_t status, const std::string& message) {
  py::object exc = py::reinterpret_borrow<py::object>(error_type)(text(message));
  exc.attr("status") = static_cast<int>(status);
  exc.attr("status_name") = tsrGetStatusName(status);
  PyErr_SetObject(error_type, exc.ptr());
  throw py::error_already_set();
}

void check(tsr_status_t status) {
  if (status == TSR_SUCCESS) return;
  std::string message = tsrGetLastErrorMessage();
  raise_error(status, message.empty() ? tsrGetErrorString(status) : message);
}

}  // namespace tsr_py

using namespace tsr_py;

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
  for (int s = TSR_SUCCESS; s <= TSR_ERROR_MEMORY_FAULT; s++)
    statuses[tsrGetStatusName(static_cast<tsr_status_t>(s))] = s;
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

  bind_context(m);
  bind_execution(m);
  bind_function(m);
  bind_telemetry(m);
  bind_comm(m);
}
