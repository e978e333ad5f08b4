/* host_graphs.c — graph capture and replay (<tessera/execution.h>): what a capture records (and does not
 * run), replays with the recorded argument values on the NULL stream and on streams, events inside graphs,
 * lifetimes (graph vs executable graph, unloaded modules, destroyed contexts) and misuse.
 *
 *   host_graphs IMAGE      IMAGE: the test image of make_image.py */
#include "check.h"

static tsr_context_t ctx;
static tsr_module_t mod;

static const tsr_launch_t block64 = {1, 1, 1, 64, 1, 1, 0};

static tsr_status_t scale_add(tsr_stream_t s, float** out, float* k, int64_t* n) {
  void* args[] = {out, k, n};
  return tsrLaunch(kernel(mod, "scale_add"), s, block64, args, 3);
}

/* x after `replays` replays of the captured step "x = 2x + 1; y = x; x = 2x + 2" from x = 0. */
static float after(int replays, float* y) {
  float x = 0;
  for (int r = 0; r < replays; r++) {
    x = 2 * x + 1;
    *y = x;
    x = 2 * x + 2;
  }
  return x;
}

static bool all_equal(const float* v, int n, float want) {
  for (int i = 0; i < n; i++)
    if (v[i] != want) return false;
  return true;
}

static void check_capture_and_replay(void) {
  enum { N = 64 };
  float *x = calloc(N, sizeof *x), *y = calloc(N, sizeof *y);
  float k = 1;
  int64_t n = N;
  tsr_stream_t s, other;
  tsr_event_t done;
  MUST(tsrCreateStream(ctx, NULL, &s));
  MUST(tsrCreateStream(ctx, NULL, &other));
  MUST(tsrCreateEvent(ctx, &done));

  int capturing = -1;
  expect("not capturing yet", tsrStreamIsCapturing(s, &capturing), TSR_SUCCESS);
  check("  (0)", capturing == 0);
  expect("begin capture", tsrStreamBeginCapture(s), TSR_SUCCESS);
  expect_msg("begin twice", tsrStreamBeginCapture(s), TSR_ERROR_INVALID_VALUE, "already capturing");
  expect("capturing now", tsrStreamIsCapturing(s, &capturing), TSR_SUCCESS);
  check("  (1)", capturing == 1);
  expect("record: x = 2x + 1", scale_add(s, &x, &k, &n), TSR_SUCCESS);
  k = 2;  /* values are recorded when the launch is given: changing k now affects only the next launch */
  expect("record: y = x", tsrMemcpyAsync(ctx, y, x, N * sizeof(float), TSR_MEMCPY_HOST_TO_HOST, s), TSR_SUCCESS);
  expect("record: x = 2x + 2", scale_add(s, &x, &k, &n), TSR_SUCCESS);
  expect("record: event", tsrEventRecord(done, s), TSR_SUCCESS);
  k = 99;
  expect_msg("synchronize a capturing stream", tsrStreamSynchronize(s), TSR_ERROR_INVALID_VALUE, "capturing");
  expect("query a capturing stream", tsrStreamQuery(s), TSR_ERROR_INVALID_VALUE);
  expect("a bad launch is refused while capturing too", tsrLaunch(kernel(mod, "scale_add"), s, block64, NULL, 3),
         TSR_ERROR_INVALID_VALUE);
  tsr_graph_t g;
  expect("end capture", tsrStreamEndCapture(s, &g), TSR_SUCCESS);
  size_t nodes = 0;
  expect("node count", tsrGraphGetNodeCount(g, &nodes), TSR_SUCCESS);
  check("  4 nodes: launch, copy, launch, event record", nodes == 4);
  expect("the stream runs work again", tsrStreamSynchronize(s), TSR_SUCCESS);
  check("capturing ran nothing", all_equal(x, N, 0) && all_equal(y, N, 0));
  expect("the captured event was not recorded", tsrEventQuery(done), TSR_SUCCESS);
  expect_msg("end capture when not capturing", tsrStreamEndCapture(s, &g), TSR_ERROR_INVALID_VALUE, "not capturing");

  tsr_graph_exec_t exec;
  expect("instantiate", tsrGraphInstantiate(g, &exec), TSR_SUCCESS);
  expect("destroy the graph (the executable graph is a copy)", tsrDestroyGraph(g), TSR_SUCCESS);
  expect("replay on the NULL stream", tsrGraphLaunch(exec, NULL), TSR_SUCCESS);
  float want_y, want_x = after(1, &want_y);
  check("one replay: x = (2*0+1)*2+2 = 4, y = 1 (recorded k values 1 and 2)",
        all_equal(x, N, want_x) && all_equal(y, N, want_y));
  for (int r = 0; r < 3; r++) expect("replay on a stream", tsrGraphLaunch(exec, other), TSR_SUCCESS);
  expect("wait for the event the last replay records", tsrEventSynchronize(done), TSR_SUCCESS);
  want_x = after(4, &want_y);
  check("by then all four replays ran, in order", all_equal(x, N, want_x) && all_equal(y, N, want_y));
  expect("synchronize", tsrStreamSynchronize(other), TSR_SUCCESS);

  /* A replay queued behind a sleep keeps its executable graph alive after the creator's release. */
  int32_t ms = 150;
  void* sleep_args[] = {&ms};
  expect("queue a sleep", tsrLaunch(kernel(mod, "sleep_ms"), other, (tsr_launch_t){1, 1, 1, 1, 1, 1, 0},
                                    sleep_args, 1), TSR_SUCCESS);
  expect("queue a replay", tsrGraphLaunch(exec, other), TSR_SUCCESS);
  expect("destroy the executable graph while its replay is queued", tsrDestroyGraphExec(exec), TSR_SUCCESS);
  expect("synchronize", tsrStreamSynchronize(other), TSR_SUCCESS);
  want_x = after(5, &want_y);
  check("the queued replay ran", all_equal(x, N, want_x));
  expect("the executable graph is gone", tsrGraphLaunch(exec, NULL), TSR_ERROR_INVALID_HANDLE);

  tsrDestroyEvent(done);
  tsrDestroyStream(s);
  tsrDestroyStream(other);
  free(x);
  free(y);
}

static void check_waits_in_graphs(void) {
  /* s1 sleeps then records e; a graph on s2 waits for e then sets a flag: each replay waits for the newest
   * record of e at the time of the replay. */
  tsr_stream_t s1, s2, cap;
  tsr_event_t e;
  MUST(tsrCreateStream(ctx, NULL, &s1));
  MUST(tsrCreateStream(ctx, NULL, &s2));
  MUST(tsrCreateStream(ctx, NULL, &cap));
  MUST(tsrCreateEvent(ctx, &e));
  int32_t flag = 0, *pflag = &flag;
  int64_t one = 1;
  void* flag_args[] = {&pflag, &one};
  MUST(tsrStreamBeginCapture(cap));
  expect("record: wait for e", tsrStreamWaitEvent(cap, e), TSR_SUCCESS);
  expect("record: set the flag", tsrLaunch(kernel(mod, "set_flag"), cap, (tsr_launch_t){1, 1, 1, 1, 1, 1, 0},
                                           flag_args, 2), TSR_SUCCESS);
  tsr_graph_t g;
  tsr_graph_exec_t exec;
  MUST(tsrStreamEndCapture(cap, &g));
  MUST(tsrGraphInstantiate(g, &exec));
  int32_t ms = 300;
  void* sleep_args[] = {&ms};
  expect("s1: sleep 300 ms", tsrLaunch(kernel(mod, "sleep_ms"), s1, (tsr_launch_t){1, 1, 1, 1, 1, 1, 0}, sleep_args,
                                       1), TSR_SUCCESS);
  expect("s1: record e", tsrEventRecord(e, s1), TSR_SUCCESS);
  expect("replay on s2", tsrGraphLaunch(exec, s2), TSR_SUCCESS);
  check("the replay waits for s1's record", __atomic_load_n(&flag, __ATOMIC_ACQUIRE) == 0);
  expect("synchronize s2", tsrStreamSynchronize(s2), TSR_SUCCESS);
  check("then sets the flag", flag == 1);
  expect("graph launches cannot be captured", tsrStreamBeginCapture(cap), TSR_SUCCESS);
  expect_msg("  replay into a capturing stream", tsrGraphLaunch(exec, cap), TSR_ERROR_INVALID_VALUE, "capturing");
  MUST(tsrStreamEndCapture(cap, &g));
  size_t nodes = 99;
  expect("  nothing was recorded", tsrGraphGetNodeCount(g, &nodes), TSR_SUCCESS);
  check("  (0 nodes)", nodes == 0);
  expect("an empty graph instantiates and replays", tsrGraphInstantiate(g, &exec), TSR_SUCCESS);
  expect("  replay", tsrGraphLaunch(exec, s2), TSR_SUCCESS);
  tsrDestroyStream(s1);
  tsrDestroyStream(s2);
  tsrDestroyStream(cap);
}

static void check_lifetimes(const char* image_path) {
  tsr_module_t m = load_test_image(ctx, image_path);
  tsr_stream_t s;
  MUST(tsrCreateStream(ctx, NULL, &s));
  float x = 0, *px = &x, k = 1;
  int64_t n = 1;
  void* args[] = {&px, &k, &n};
  MUST(tsrStreamBeginCapture(s));
  MUST(tsrLaunch(kernel(m, "scale_add"), s, block64, args, 3));
  tsr_graph_t g;
  tsr_graph_exec_t exec;
  MUST(tsrStreamEndCapture(s, &g));
  MUST(tsrGraphInstantiate(g, &exec));
  expect("replay", tsrGraphLaunch(exec, NULL), TSR_SUCCESS);
  check("  x = 1", x == 1);
  expect("retain the graph", tsrRetainGraph(g), TSR_SUCCESS);
  expect("release it (one left)", tsrReleaseGraph(g), TSR_SUCCESS);
  expect("retain the executable graph", tsrRetainGraphExec(exec), TSR_SUCCESS);
  expect("release it (one left)", tsrReleaseGraphExec(exec), TSR_SUCCESS);
  expect("unload the kernel's module", tsrUnloadModule(m), TSR_SUCCESS);
  expect_msg("replay after the module is gone", tsrGraphLaunch(exec, NULL), TSR_ERROR_INVALID_HANDLE, "unloaded");
  expect_msg("instantiate after the module is gone", tsrGraphInstantiate(g, &exec), TSR_ERROR_INVALID_HANDLE,
             "unloaded");
  check("x unchanged", x == 1);

  /* A module loaded again (likely at the same address) is another module: still refused. */
  tsr_module_t again = load_test_image(ctx, image_path);
  expect("replay after the module was loaded again", tsrGraphLaunch(exec, NULL), TSR_ERROR_INVALID_HANDLE);
  MUST(tsrUnloadModule(again));

  expect_msg("capture on the NULL stream", tsrStreamBeginCapture(NULL), TSR_ERROR_INVALID_VALUE, "NULL stream");
  expect("end capture into NULL", tsrStreamEndCapture(s, NULL), TSR_ERROR_INVALID_VALUE);
  expect("instantiate into NULL", tsrGraphInstantiate(g, NULL), TSR_ERROR_INVALID_VALUE);
  expect("a stream passed as a graph", tsrGraphInstantiate((tsr_graph_t)(void*)s, &exec), TSR_ERROR_INVALID_HANDLE);
  expect("an exec passed as a graph", tsrGraphGetNodeCount((tsr_graph_t)(void*)exec, &(size_t){0}),
         TSR_ERROR_INVALID_HANDLE);
  expect("a graph passed as an exec", tsrGraphLaunch((tsr_graph_exec_t)(void*)g, NULL), TSR_ERROR_INVALID_HANDLE);
  expect("NULL exec", tsrGraphLaunch(NULL, NULL), TSR_ERROR_INVALID_HANDLE);

  /* A context destroyed with a capture in progress, a graph and an executable graph alive. */
  tsr_context_t c;
  MUST(tsrCreateContext(&c));
  tsr_module_t cm = load_test_image(c, image_path);
  tsr_stream_t cs;
  tsr_event_t ce;
  MUST(tsrCreateStream(c, NULL, &cs));
  MUST(tsrCreateEvent(c, &ce));
  MUST(tsrStreamBeginCapture(cs));
  MUST(tsrLaunch(kernel(cm, "scale_add"), cs, block64, args, 3));
  MUST(tsrEventRecord(ce, cs));
  tsr_graph_t cg;
  tsr_graph_exec_t cx;
  MUST(tsrStreamEndCapture(cs, &cg));
  MUST(tsrGraphInstantiate(cg, &cx));
  MUST(tsrStreamBeginCapture(cs));
  MUST(tsrEventRecord(ce, cs));
  expect("destroy a context with graphs and a capture in progress", tsrDestroyContext(c), TSR_SUCCESS);
  expect("its graph is gone", tsrGraphGetNodeCount(cg, &(size_t){0}), TSR_ERROR_INVALID_HANDLE);
  expect("its executable graph is gone", tsrGraphLaunch(cx, NULL), TSR_ERROR_INVALID_HANDLE);
  tsrDestroyStream(s);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s TEST_IMAGE\n", argv[0]);
    return 2;
  }
  MUST(tsrCreateContext(&ctx));
  mod = load_test_image(ctx, argv[1]);
  check_capture_and_replay();
  check_waits_in_graphs();
  check_lifetimes(argv[1]);
  expect("destroy the context", tsrDestroyContext(ctx), TSR_SUCCESS);
  return finish();
}
