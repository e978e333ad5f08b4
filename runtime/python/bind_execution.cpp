// bind_execution.cpp — tessera._runtime.Stream, Event, Graph and GraphExec (<tessera/execution.h>).
// tessera.stream and tessera.graph build the user-facing API (keeping arrays alive for queued work) on these.
#include "bindings.h"

#include <pybind11/stl.h>  // std::optional arguments: None or a value

#include <optional>

namespace tsr_py {

namespace {

using EventState = Owned<tsr_event_t>;
using GraphState = Owned<tsr_graph_t>;
using ExecState = Owned<tsr_graph_exec_t>;

class GraphExec {
 public:
  explicit GraphExec(std::shared_ptr<ExecState> state) : state_(std::move(state)) {}

  void launch(const py::object& stream) const {
    tsr_graph_exec_t exec = state_->live();
    tsr_stream_t s = stream_of(stream);
    released([&] { return tsrGraphLaunch(exec, s); });
  }

 private:
  std::shared_ptr<ExecState> state_;
};

class Graph {
 public:
  explicit Graph(std::shared_ptr<GraphState> state) : state_(std::move(state)) {}

  size_t node_count() const {
    size_t n;
    check(tsrGraphGetNodeCount(state_->live(), &n));
    return n;
  }

  GraphExec instantiate() const {
    auto exec = std::make_shared<ExecState>(state_->context, tsrReleaseGraphExec);
    check(tsrGraphInstantiate(state_->live(), &exec->handle));
    return GraphExec(exec);
  }

 private:
  std::shared_ptr<GraphState> state_;
};

class Event {
 public:
  explicit Event(const py::object& context)
      : state_(std::make_shared<EventState>(context_state(context), tsrReleaseEvent)) {
    check(tsrCreateEvent(state_->context->live(), &state_->handle));
  }

  void record(const py::object& stream) const { check(tsrEventRecord(state_->live(), stream_of(stream))); }

  bool query() const {
    tsr_status_t st = tsrEventQuery(state_->live());
    if (st == TSR_ERROR_NOT_READY) return false;
    check(st);
    return true;
  }

  void synchronize(std::optional<uint32_t> timeout_ms) const {
    tsr_event_t e = state_->live();
    released([&] { return timeout_ms ? tsrEventSynchronizeTimeout(e, *timeout_ms) : tsrEventSynchronize(e); });
  }

  float elapsed_ms(const Event& end) const {
    float ms;
    check(tsrEventElapsedTime(state_->live(), end.state_->live(), &ms));
    return ms;
  }

  tsr_event_t live() const { return state_->live(); }

 private:
  std::shared_ptr<EventState> state_;
};

}  // namespace

Stream::Stream(const py::object& context, int priority, uint64_t affinity)
    : state_(std::make_shared<StreamState>(context_state(context), tsrReleaseStream)) {
  tsr_stream_options_t options;
  check(tsrStreamOptionsInitialize(&options));
  options.priority = priority;
  options.affinity = affinity;
  check(tsrCreateStream(state_->context->live(), &options, &state_->handle));
}

void bind_execution(py::module_& m) {
  py::class_<Stream>(m, "Stream", "A queue of work run in order; streams run independently of each other.")
      .def(py::init<const py::object&, int, uint64_t>(), py::arg("context"), py::arg("priority") = 0,
           py::arg("affinity") = 0,
           "A stream of `context`. Hints: `priority` (higher first when streams compete for the workers), "
           "`affinity` (bit i allows CPU worker i; 0: any).")
      .def("synchronize", [](const Stream& s, std::optional<uint32_t> timeout_ms) {
        tsr_stream_t h = s.live();
        released([&] { return timeout_ms ? tsrStreamSynchronizeTimeout(h, *timeout_ms) : tsrStreamSynchronize(h); });
      }, py::arg("timeout_ms") = py::none(),
      "Waits for the queued work, for at most `timeout_ms` if given (else the context's watchdog, if any): "
      "TSR_ERROR_TIMEOUT leaves the work running. Raises the error it kept, if any (reported once).")
      .def("query", [](const Stream& s) {
        tsr_status_t st = tsrStreamQuery(s.live());
        if (st == TSR_ERROR_NOT_READY) return false;
        check(st);
        return true;
      }, "True when everything queued has run (raises a kept error); False while work is pending.")
      .def("wait_event", [](const Stream& s, const Event& e) { check(tsrStreamWaitEvent(s.live(), e.live())); },
           py::arg("event"), "Later work waits for the event's most recent record.")
      .def("begin_capture", [](const Stream& s) { check(tsrStreamBeginCapture(s.live())); },
           "Records the work given to the stream instead of running it, until end_capture.")
      .def("end_capture", [](const Stream& s) {
        auto state = std::make_shared<GraphState>(s.context(), tsrReleaseGraph);
        check(tsrStreamEndCapture(s.live(), &state->handle));
        return Graph(state);
      }, "Stops recording; returns the recorded Graph.")
      .def_property_readonly("capturing", [](const Stream& s) {
        int capturing;
        check(tsrStreamIsCapturing(s.live(), &capturing));
        return capturing != 0;
      });

  py::class_<Event>(m, "Event", "A point in a stream's work, with the time it completed.")
      .def(py::init<const py::object&>(), py::arg("context"))
      .def("record", &Event::record, py::arg("stream") = py::none(),
           "Records the event at the end of `stream`'s queue (None: completes now).")
      .def("query", &Event::query, "True when its most recent record has completed.")
      .def("synchronize", &Event::synchronize, py::arg("timeout_ms") = py::none(),
           "Waits for its most recent record, for at most `timeout_ms` if given (TSR_ERROR_TIMEOUT).")
      .def("elapsed_ms", &Event::elapsed_ms, py::arg("end"), "Milliseconds from this event's completion to end's.");

  py::class_<Graph>(m, "Graph", "A recorded sequence of stream work (tsrStreamEndCapture).")
      .def_property_readonly("node_count", &Graph::node_count)
      .def("instantiate", &Graph::instantiate, "An executable copy, checked, for replays.");

  py::class_<GraphExec>(m, "GraphExec", "An instantiated graph.")
      .def("launch", &GraphExec::launch, py::arg("stream") = py::none(),
           "Replays the graph on `stream` (None: now, in this thread). Releases the GIL.");
}

}  // namespace tsr_py
