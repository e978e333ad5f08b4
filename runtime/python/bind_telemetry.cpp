// bind_telemetry.cpp — the metrics log and trace ranges of <tessera/telemetry.h>, for tessera.telemetry.
#include "bindings.h"

namespace tsr_py {

void bind_telemetry(py::module_& m) {
  m.def("metrics_open", [](const std::string& path, uint32_t window) { check(tsrMetricsOpen(path.c_str(), window)); },
        py::arg("path"), py::arg("window") = 0u,
        "Opens the metrics log (.jsonl or .csv); `window`: records per name for the p95 (0: 100).");
  m.def("metrics_close", [] { check(tsrMetricsClose()); }, "Flushes and closes the metrics log.");
  m.def("metrics_record", [](const std::string& name, double seconds, double flops, double bytes) {
    check(tsrMetricsRecord(name.c_str(), seconds, flops, bytes));
  }, py::arg("name"), py::arg("seconds"), py::arg("flops") = 0.0, py::arg("bytes") = 0.0,
        "Writes a record for host-side work to the open log.");
  m.def("trace_active", [] {
    int active;
    check(tsrTraceIsActive(&active));
    return active != 0;
  }, "Whether an NVTX library was loaded, so that trace ranges are emitted.");
  m.def("trace_push", [](int phase, const py::object& detail) {
    std::string text = detail.is_none() ? std::string() : detail.cast<std::string>();
    check(tsrTraceRangePush(static_cast<tsr_trace_phase_t>(phase), detail.is_none() ? nullptr : text.c_str()));
  }, py::arg("phase"), py::arg("detail") = py::none(), "Opens a range on this thread (phase: a PHASE value).");
  m.def("trace_pop", [] { check(tsrTraceRangePop()); }, "Closes this thread's innermost range.");
  py::dict phases;
  phases["copy"] = static_cast<int>(TSR_TRACE_COPY);
  phases["mma"] = static_cast<int>(TSR_TRACE_MMA);
  phases["reduce"] = static_cast<int>(TSR_TRACE_REDUCE);
  phases["comm"] = static_cast<int>(TSR_TRACE_COMM);
  phases["host"] = static_cast<int>(TSR_TRACE_HOST);
  m.attr("PHASE") = phases;
}

}  // namespace tsr_py
