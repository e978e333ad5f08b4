// host_streams.cpp — a C++ host, built with CMake's find_package(Tessera): RAII ownership of libtessera
// handles (the reference counts of the C API behind std::unique_ptr), std::thread workers launching on their
// own streams at once, events ordering the streams, and a captured graph replayed from several threads.
//
//   host_streams_cpp IMAGE      IMAGE: the test image of make_image.py
#include <tessera/tessera.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

// Turns a failed call into an exception carrying the runtime's message.
void check(tsr_status_t status, const char* what) {
  if (status != TSR_SUCCESS)
    throw std::runtime_error(std::string(what) + ": " + tsrGetStatusName(status) + ": " + tsrGetLastErrorMessage());
}

template <class Handle, tsr_status_t (*Release)(Handle)>
struct Releaser {
  void operator()(Handle h) const { Release(h); }
};

using Context = std::unique_ptr<tsr_context, Releaser<tsr_context_t, tsrReleaseContext>>;
using Module = std::unique_ptr<tsr_module, Releaser<tsr_module_t, tsrReleaseModule>>;
using Stream = std::unique_ptr<tsr_stream, Releaser<tsr_stream_t, tsrReleaseStream>>;
using Event = std::unique_ptr<tsr_event, Releaser<tsr_event_t, tsrReleaseEvent>>;
using GraphExec = std::unique_ptr<tsr_graph_exec, Releaser<tsr_graph_exec_t, tsrReleaseGraphExec>>;

Stream make_stream(tsr_context_t ctx) {
  tsr_stream_t s;
  check(tsrCreateStream(ctx, nullptr, &s), "tsrCreateStream");
  return Stream(s);
}

Event make_event(tsr_context_t ctx) {
  tsr_event_t e;
  check(tsrCreateEvent(ctx, &e), "tsrCreateEvent");
  return Event(e);
}

void add_one(tsr_kernel_t k, tsr_stream_t s, std::vector<int64_t>& x) {
  int64_t* p = x.data();
  int64_t n = static_cast<int64_t>(x.size());
  void* args[] = {&p, &n};
  tsr_launch_t launch = {static_cast<uint32_t>((n + 63) / 64), 1, 1, 64, 1, 1, 0};
  check(tsrLaunch(k, s, launch, args, 2), "tsrLaunch(add_one)");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s TEST_IMAGE\n", argv[0]);
    return 2;
  }
  try {
    std::ifstream file(argv[1], std::ios::binary);
    std::vector<char> image((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    tsr_context_t raw_ctx;
    check(tsrCreateContext(&raw_ctx), "tsrCreateContext");
    Context ctx(raw_ctx);
    tsr_module_t raw_mod;
    check(tsrLoadModule(ctx.get(), image.data(), image.size(), &raw_mod), "tsrLoadModule");
    Module mod(raw_mod);
    tsr_kernel_t k;
    check(tsrGetKernel(mod.get(), "add_one", &k), "tsrGetKernel");

    // Threads launching at once, each on its own stream; each stream then waits for the next one's event.
    constexpr int kThreads = 4, kRounds = 50, kN = 2048;
    std::vector<std::vector<int64_t>> data(kThreads, std::vector<int64_t>(kN, 0));
    std::vector<Stream> streams;
    std::vector<Event> done;
    for (int i = 0; i < kThreads; i++) {
      streams.push_back(make_stream(ctx.get()));
      done.push_back(make_event(ctx.get()));
    }
    std::vector<std::thread> threads;
    std::vector<std::string> errors(kThreads);
    for (int i = 0; i < kThreads; i++)
      threads.emplace_back([&, i] {
        try {
          for (int r = 0; r < kRounds; r++) add_one(k, streams[i].get(), data[i]);
          check(tsrEventRecord(done[i].get(), streams[i].get()), "tsrEventRecord");
          check(tsrStreamWaitEvent(streams[i].get(), done[(i + 1) % kThreads].get()), "tsrStreamWaitEvent");
        } catch (const std::exception& e) {
          errors[i] = e.what();
        }
      });
    for (auto& t : threads) t.join();
    for (const auto& e : errors)
      if (!e.empty()) throw std::runtime_error(e);
    check(tsrSynchronize(ctx.get()), "tsrSynchronize");
    for (const auto& d : data)
      for (int64_t v : d)
        if (v != kRounds) throw std::runtime_error("a stream lost or repeated a launch");
    std::printf("ok %d threads x %d launches on their own streams\n", kThreads, kRounds);

    // A graph captured once, replayed by every thread on its stream.
    std::vector<int64_t> counter(kN, 0);
    check(tsrStreamBeginCapture(streams[0].get()), "tsrStreamBeginCapture");
    add_one(k, streams[0].get(), counter);
    tsr_graph_t graph;
    check(tsrStreamEndCapture(streams[0].get(), &graph), "tsrStreamEndCapture");
    tsr_graph_exec_t raw_exec;
    check(tsrGraphInstantiate(graph, &raw_exec), "tsrGraphInstantiate");
    check(tsrDestroyGraph(graph), "tsrDestroyGraph");
    GraphExec exec(raw_exec);
    // Replays of one graph on different streams would race on `counter`: each thread replays on the same
    // stream, so that they queue one after another.
    threads.clear();
    for (int i = 0; i < kThreads; i++)
      threads.emplace_back([&] {
        for (int r = 0; r < kRounds; r++) tsrGraphLaunch(exec.get(), streams[0].get());
      });
    for (auto& t : threads) t.join();
    check(tsrStreamSynchronize(streams[0].get()), "tsrStreamSynchronize");
    for (int64_t v : counter)
      if (v != kThreads * kRounds) throw std::runtime_error("graph replays lost or repeated");
    std::printf("ok %d threads x %d replays of one graph\n", kThreads, kRounds);
  } catch (const std::exception& e) {
    std::printf("FAIL %s\n", e.what());
    return 1;
  }
  std::printf("0 failed\n");
  return 0;
}
