/* host_bounds.c — a launch's extents against the memory the runtime knows, in every mode (docs/runtime.md,
 * "Bounds of known memory"): a tensor in a tsrAlloc'd, pinned or registered allocation whose extents (the
 * dimension arguments × the element size) run past its end is refused with TSR_ERROR_MEMORY_FAULT naming the
 * kernel and the tensor, before anything runs — on the NULL stream, on a stream, through the descriptor, and
 * when a graph replays over memory that shrank since its capture. Copies are held to the same rule. Each
 * check runs on a context without and one with debug mode.
 *
 *   host_bounds IMAGE      IMAGE: the test image of make_image.py */
#include "check.h"

enum { N = 100 };

static tsr_context_t ctx;
static tsr_module_t mod;
static char label[160];

static const char* in_mode(const char* what, bool debug) {
  snprintf(label, sizeof label, "%s (%s)", what, debug ? "debug" : "default mode");
  return label;
}

static tsr_launch_t shape(int64_t n) { return (tsr_launch_t){(uint32_t)(n + 63) / 64 + 1, 1, 1, 64, 1, 1, 0}; }

static tsr_status_t saxpy(tsr_stream_t s, float* x, float* y, int64_t n) {
  float a = 1;
  void* args[] = {&a, &x, &y, &n};
  return tsrLaunch(kernel(mod, "saxpy"), s, shape(n), args, 4);
}

static bool all_equal(const float* p, size_t n, float v) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != v) return false;
  return true;
}

static void check_launches(bool debug) {
  float *x, *y;
  MUST(tsrAlloc(ctx, N * sizeof(float), 0, (void**)&x));
  MUST(tsrAlloc(ctx, N * sizeof(float), 0, (void**)&y));
  for (int i = 0; i < N; i++) x[i] = 1, y[i] = 0;
  expect(in_mode("saxpy within its allocations", debug), saxpy(NULL, x, y, N), TSR_SUCCESS);
  expect_msg(in_mode("N = 101 over 100-float allocations", debug), saxpy(NULL, x, y, N + 1), TSR_ERROR_MEMORY_FAULT,
             "tensor argument 1 ('x') of kernel 'saxpy' needs 404 bytes at offset 0 of the 400-byte allocation");
  check("  refused before it ran (y unchanged)", all_equal(y, N, 1));
  expect_msg(in_mode("a tensor starting inside and running out", debug), saxpy(NULL, x + 50, y + 50, 60),
             TSR_ERROR_MEMORY_FAULT, "at offset 200 of the 400-byte allocation");
  expect_msg(in_mode("the written tensor alone is too short", debug), saxpy(NULL, x, y + 1, N),
             TSR_ERROR_MEMORY_FAULT, "tensor argument 2 ('y') of kernel 'saxpy'");
  expect_msg(in_mode("an extent whose byte count overflows", debug), saxpy(NULL, x, y, INT64_MAX),
             TSR_ERROR_MEMORY_FAULT, "past its end");

  tsr_stream_t s;
  MUST(tsrCreateStream(ctx, NULL, &s));
  expect_msg(in_mode("on a stream: refused when queued", debug), saxpy(s, x, y, N + 1), TSR_ERROR_MEMORY_FAULT,
             "past its end");
  expect("  the stream has nothing to report", tsrStreamSynchronize(s), TSR_SUCCESS);
  MUST(tsrDestroyStream(s));

  tsr_launch_desc_t d;
  MUST(tsrLaunchDescInitialize(&d));
  float a = 1;
  int64_t n = N + 1;
  void* args[] = {&a, &x, &y, &n};
  d.grid[0] = 2, d.block[0] = 64, d.block[1] = d.block[2] = 1, d.args = args, d.nargs = 4;
  expect_msg(in_mode("through the descriptor", debug), tsrLaunchTile(kernel(mod, "saxpy"), &d), TSR_ERROR_MEMORY_FAULT,
             "past its end");
  check("  nothing ran", all_equal(y, N, 1));

  float host[2 * N];
  expect(in_mode("host memory the context does not know is not checked", debug), saxpy(NULL, host, host + N, N),
         TSR_SUCCESS);
  MUST(tsrFree(ctx, x));
  MUST(tsrFree(ctx, y));
}

static void check_host_memory(bool debug) {
  static float registered[N];
  MUST(tsrHostRegister(ctx, registered, sizeof registered, TSR_HOST_REGISTER_DEFAULT));
  expect(in_mode("registered memory within its range", debug), saxpy(NULL, registered, registered, N), TSR_SUCCESS);
  expect_msg(in_mode("registered memory past its range", debug), saxpy(NULL, registered, registered, N + 1),
             TSR_ERROR_MEMORY_FAULT, "of the 400-byte allocation");
  float out[N + 1];
  expect(in_mode("a copy out of registered memory within it", debug),
         tsrMemcpy(ctx, out, registered, sizeof registered, TSR_MEMCPY_HOST_TO_HOST), TSR_SUCCESS);
  expect_msg(in_mode("a copy out of registered memory past it", debug),
         tsrMemcpy(ctx, out, registered + 1, sizeof registered, TSR_MEMCPY_HOST_TO_HOST), TSR_ERROR_MEMORY_FAULT,
         "leaves the 400-byte allocation");
  MUST(tsrHostUnregister(ctx, registered));

  float* pinned;
  tsr_status_t st = tsrAlloc(ctx, N * sizeof(float), TSR_ALLOC_HOST_PINNED, (void**)&pinned);
  if (st == TSR_ERROR_OUT_OF_MEMORY && strstr(tsrGetLastErrorMessage(), "RLIMIT_MEMLOCK")) {
    printf("skip pinned memory: %s\n", tsrGetLastErrorMessage());
    return;
  }
  MUST(st);
  expect_msg(in_mode("pinned memory past its end", debug), saxpy(NULL, pinned, pinned, N + 1), TSR_ERROR_MEMORY_FAULT,
             "of the 400-byte allocation");
  MUST(tsrFree(ctx, pinned));
}

/* A graph captured over registered memory is replayed after the memory was registered again, shorter. */
static void check_graph_replay(bool debug) {
  static float host[N];
  memset(host, 0, sizeof host);
  MUST(tsrHostRegister(ctx, host, sizeof host, TSR_HOST_REGISTER_DEFAULT));
  tsr_stream_t s;
  MUST(tsrCreateStream(ctx, NULL, &s));
  float* out = host;
  float k = 1;
  int64_t n = N;
  void* args[] = {&out, &k, &n};
  MUST(tsrStreamBeginCapture(s));
  MUST(tsrLaunch(kernel(mod, "scale_add"), s, shape(N), args, 3));
  tsr_graph_t g;
  MUST(tsrStreamEndCapture(s, &g));
  tsr_graph_exec_t exec;
  MUST(tsrGraphInstantiate(g, &exec));
  expect(in_mode("replay over the memory it was captured with", debug), tsrGraphLaunch(exec, NULL), TSR_SUCCESS);
  MUST(tsrHostUnregister(ctx, host));
  MUST(tsrHostRegister(ctx, host, sizeof host / 2, TSR_HOST_REGISTER_DEFAULT));
  expect_msg(in_mode("replay after the memory shrank", debug), tsrGraphLaunch(exec, NULL), TSR_ERROR_MEMORY_FAULT,
             "tensor argument 0 ('out') of kernel 'scale_add' needs 400 bytes");
  expect_msg(in_mode("  also on a stream", debug), tsrGraphLaunch(exec, s), TSR_ERROR_MEMORY_FAULT, "past its end");
  check("  neither replay ran (host[99] as after one)", host[N - 1] == 1);
  MUST(tsrHostUnregister(ctx, host));
  MUST(tsrDestroyGraphExec(exec));
  MUST(tsrDestroyGraph(g));
  MUST(tsrDestroyStream(s));
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s TEST_IMAGE\n", argv[0]);
    return 2;
  }
  for (int debug = 0; debug < 2; debug++) {
    tsr_context_options_t o;
    MUST(tsrContextOptionsInitialize(&o));
    o.flags = debug ? TSR_CONTEXT_DEBUG : 0;
    MUST(tsrCreateContextWithOptions(&o, &ctx));
    mod = load_test_image(ctx, argv[1]);
    check_launches(debug);
    check_host_memory(debug);
    check_graph_replay(debug);
    MUST(tsrDestroyContext(ctx));
  }
  return finish();
}
