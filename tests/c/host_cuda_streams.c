/* host_cuda_streams.c — streams, events, asynchronous copies and graphs on the CUDA backend
 * (<tessera/execution.h>): many launches on two streams ordered by events, pinned and registered host memory
 * in asynchronous copies timed by events, a captured graph replayed against direct launches (with timings),
 * and a kernel's fault reported by the next synchronize.
 *
 *   host_cuda_streams IMAGE [no-graphs]
 *
 * IMAGE has a `saxpy` kernel for the GPU, with either signature host_saxpy.c accepts (examples/saxpy.py, or
 * the test image's PTX record under tests/c/fake_cuda.c). Every launch passes y as the output too, so both
 * compute y = a * x + y. `no-graphs`: the driver lacks CUDA graphs; instantiating one must say so.
 * When $FAKE_CUDA_LOG is set, each phase writes a "## phase" line to it, so the test can read the driver
 * calls of each phase. */
#define _POSIX_C_SOURCE 200809L
#include "phases.h"

static tsr_context_t ctx;
static tsr_kernel_t saxpy;
static size_t nargs;
static int tensors;  /* 2: (a, x, y, dims); 3: (a, x, y, out, dims) */

/* y = a * x + y for n elements, on `s`. */
static tsr_status_t axpy(tsr_stream_t s, float a, float* x, float* y, int64_t n) {
  void* args[8];
  args[0] = &a;
  args[1] = &x;
  args[2] = &y;
  args[3] = &y;  /* the output, for the three-tensor signature */
  for (size_t i = 1 + (size_t)tensors; i < nargs; i++) args[i] = &n;
  uint32_t blocks = (uint32_t)((n + 255) / 256);
  return tsrLaunch(saxpy, s, (tsr_launch_t){blocks, 1, 1, 256, 1, 1, 0}, args, nargs);
}

static float* device_copy(const float* host, int64_t n) {
  float* d;
  MUST(tsrAlloc(ctx, (size_t)n * sizeof *d, 0, (void**)&d));
  MUST(tsrMemcpy(ctx, d, host, (size_t)n * sizeof *d, TSR_MEMCPY_HOST_TO_DEVICE));
  return d;
}

static bool equal(const float* got, const float* want, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (got[i] != want[i]) {
      printf("     element %lld: %.9g, want %.9g\n", (long long)i, got[i], want[i]);
      return false;
    }
  return true;
}

/* Rounds of work alternating between two streams, each waiting for the other's event: products by 1 and
 * 0.5 are exact, so the host's float arithmetic gives the GPU's results bit for bit. */
static void check_two_streams(void) {
  phase("two streams");
  enum { N = 1 << 16, ROUNDS = 8, LAUNCHES = 8 };
  float *ha = malloc(N * sizeof *ha), *hb = malloc(N * sizeof *hb), *got = malloc(N * sizeof *got);
  for (int i = 0; i < N; i++) ha[i] = (float)(i % 7), hb[i] = (float)(i % 5) - 2;
  float *a = device_copy(ha, N), *b = device_copy(hb, N);
  tsr_stream_t s1, s2;
  tsr_event_t e1, e2;
  MUST(tsrCreateStream(ctx, NULL, &s1));
  MUST(tsrCreateStream(ctx, NULL, &s2));
  MUST(tsrCreateEvent(ctx, &e1));
  MUST(tsrCreateEvent(ctx, &e2));
  bool queued = true;
  for (int r = 0; r < ROUNDS; r++) {
    for (int l = 0; l < LAUNCHES; l++) queued &= axpy(s1, 1.0f, a, b, N) == TSR_SUCCESS;    /* b += a */
    queued &= tsrEventRecord(e1, s1) == TSR_SUCCESS;
    queued &= tsrStreamWaitEvent(s2, e1) == TSR_SUCCESS;
    for (int l = 0; l < LAUNCHES; l++) queued &= axpy(s2, 0.5f, b, a, N) == TSR_SUCCESS;   /* a += b / 2 */
    queued &= tsrEventRecord(e2, s2) == TSR_SUCCESS;
    queued &= tsrStreamWaitEvent(s1, e2) == TSR_SUCCESS;
  }
  check("128 launches and 32 event operations queued on two streams", queued);
  expect("tsrSynchronize", tsrSynchronize(ctx), TSR_SUCCESS);
  expect("s1 is idle", tsrStreamQuery(s1), TSR_SUCCESS);
  expect("e2 has completed", tsrEventQuery(e2), TSR_SUCCESS);
  for (int r = 0; r < ROUNDS; r++)
    for (int i = 0; i < N; i++) {
      for (int l = 0; l < LAUNCHES; l++) hb[i] = 1.0f * ha[i] + hb[i];
      for (int l = 0; l < LAUNCHES; l++) ha[i] = 0.5f * hb[i] + ha[i];
    }
  MUST(tsrMemcpy(ctx, got, a, N * sizeof *got, TSR_MEMCPY_DEVICE_TO_HOST));
  check("a: each stream's work saw the other's, in order", equal(got, ha, N));
  MUST(tsrMemcpy(ctx, got, b, N * sizeof *got, TSR_MEMCPY_DEVICE_TO_HOST));
  check("b: likewise", equal(got, hb, N));
  tsrDestroyEvent(e1);
  tsrDestroyEvent(e2);
  tsrDestroyStream(s1);
  tsrDestroyStream(s2);
  tsrFree(ctx, a);
  tsrFree(ctx, b);
  free(ha), free(hb), free(got);
}

/* Pinned and registered host memory in copies queued with a launch, timed by events. */
static void check_async_copies(void) {
  phase("async copies");
  enum { N = 1 << 20 };
  size_t bytes = N * sizeof(float);
  float *hx, *hy, *x, *y;
  MUST(tsrAlloc(ctx, bytes, TSR_ALLOC_HOST_PINNED, (void**)&hx));
  MUST(tsrAlloc(ctx, bytes, TSR_ALLOC_HOST_PINNED, (void**)&hy));
  float* result = NULL;
  MUST(posix_memalign((void**)&result, 4096, bytes) ? TSR_ERROR_OUT_OF_MEMORY : TSR_SUCCESS);
  expect("tsrHostRegister (pinned) of the result buffer",
         tsrHostRegister(ctx, result, bytes, TSR_HOST_REGISTER_PINNED), TSR_SUCCESS);
  MUST(tsrAlloc(ctx, bytes, 0, (void**)&x));
  MUST(tsrAlloc(ctx, bytes, 0, (void**)&y));
  for (int i = 0; i < N; i++) hx[i] = (float)(i % 1000), hy[i] = 1.0f;
  void* mapped = NULL;
  expect("tsrHostGetDevicePointer of pinned memory", tsrHostGetDevicePointer(ctx, hx, &mapped), TSR_SUCCESS);
  check("  is an address", mapped != NULL);

  tsr_stream_t s;
  tsr_event_t start, stop;
  MUST(tsrCreateStream(ctx, NULL, &s));
  MUST(tsrCreateEvent(ctx, &start));
  MUST(tsrCreateEvent(ctx, &stop));
  expect("record start", tsrEventRecord(start, s), TSR_SUCCESS);
  expect("copy x in", tsrMemcpyAsync(ctx, x, hx, bytes, TSR_MEMCPY_HOST_TO_DEVICE, s), TSR_SUCCESS);
  expect("copy y in", tsrMemcpyAsync(ctx, y, hy, bytes, TSR_MEMCPY_HOST_TO_DEVICE, s), TSR_SUCCESS);
  expect("y = 2x + y", axpy(s, 2.0f, x, y, N), TSR_SUCCESS);
  expect("copy y out", tsrMemcpyAsync(ctx, result, y, bytes, TSR_MEMCPY_DEVICE_TO_HOST, s), TSR_SUCCESS);
  expect("copy host to host after it", tsrMemcpyAsync(ctx, hy, result, bytes, TSR_MEMCPY_HOST_TO_HOST, s),
         TSR_SUCCESS);
  expect("record stop", tsrEventRecord(stop, s), TSR_SUCCESS);
  expect("tsrEventSynchronize(stop)", tsrEventSynchronize(stop), TSR_SUCCESS);
  bool right = true;
  for (int i = 0; i < N && right; i++) right = result[i] == 2.0f * (float)(i % 1000) + 1.0f && hy[i] == result[i];
  check("the copies and the launch ran in order: result = 2x + 1", right);
  float ms = -1;
  expect("tsrEventElapsedTime(start, stop)", tsrEventElapsedTime(start, stop, &ms), TSR_SUCCESS);
  printf("     8 MiB in, a launch, 4 MiB out and 4 MiB host to host: %.3f ms\n", ms);
  check("  more than 0 ms", ms > 0);
  tsr_event_t never;
  MUST(tsrCreateEvent(ctx, &never));
  expect_msg("elapsed time of an event never recorded", tsrEventElapsedTime(never, stop, &ms),
             TSR_ERROR_INVALID_VALUE, "never recorded");
  expect("waiting for an event never recorded is a no-op", tsrStreamWaitEvent(s, never), TSR_SUCCESS);
  expect("record on the NULL stream", tsrEventRecord(never, NULL), TSR_SUCCESS);
  expect("  completes at once", tsrEventQuery(never), TSR_SUCCESS);
  expect("tsrStreamSynchronize", tsrStreamSynchronize(s), TSR_SUCCESS);
  tsrDestroyEvent(never);
  tsrDestroyEvent(start);
  tsrDestroyEvent(stop);
  tsrDestroyStream(s);
  expect("tsrHostUnregister", tsrHostUnregister(ctx, result), TSR_SUCCESS);
  free(result);
  tsrFree(ctx, hx), tsrFree(ctx, hy), tsrFree(ctx, x), tsrFree(ctx, y);
}

/* The steps a graph records: y += x; x -= y / 2 (a rotation: the values stay bounded however often). */
static bool step(tsr_stream_t s, float* x, float* y, int64_t n) {
  return axpy(s, 1.0f, x, y, n) == TSR_SUCCESS && axpy(s, -0.5f, y, x, n) == TSR_SUCCESS;
}

static void check_graphs(bool have_graphs) {
  phase("graphs");
  enum { N = 4096, STEPS = 2, REPLAYS = 100 };
  float* h = malloc(N * sizeof *h);
  float* got = malloc(N * sizeof *got);
  float* want = malloc(N * sizeof *want);
  for (int i = 0; i < N; i++) h[i] = (float)(i % 13) - 6;
  float *gx = device_copy(h, N), *gy = device_copy(h, N), *dx = device_copy(h, N), *dy = device_copy(h, N);
  float* snapshot;
  MUST(tsrAlloc(ctx, N * sizeof *snapshot, 0, (void**)&snapshot));
  tsr_stream_t s;
  tsr_event_t done;
  MUST(tsrCreateStream(ctx, NULL, &s));
  MUST(tsrCreateEvent(ctx, &done));

  expect("tsrStreamBeginCapture", tsrStreamBeginCapture(s), TSR_SUCCESS);
  bool recorded = true;
  for (int k = 0; k < STEPS; k++) recorded &= step(s, gx, gy, N);
  recorded &= tsrMemcpyAsync(ctx, snapshot, gy, N * sizeof *snapshot, TSR_MEMCPY_DEVICE_TO_DEVICE, s) == TSR_SUCCESS;
  recorded &= tsrEventRecord(done, s) == TSR_SUCCESS;
  check("4 launches, a device-to-device copy and an event record captured", recorded);
  tsr_graph_t g;
  expect("tsrStreamEndCapture", tsrStreamEndCapture(s, &g), TSR_SUCCESS);
  size_t nodes = 0;
  tsrGraphGetNodeCount(g, &nodes);
  check("6 nodes", nodes == 6);
  tsr_graph_exec_t exec;
  if (!have_graphs) {
    expect_msg("tsrGraphInstantiate without CUDA graphs in the driver", tsrGraphInstantiate(g, &exec),
               TSR_ERROR_UNSUPPORTED, "lacks");
    tsrDestroyGraph(g);
  } else {
    expect("tsrGraphInstantiate", tsrGraphInstantiate(g, &exec), TSR_SUCCESS);
    tsrDestroyGraph(g);  /* the executable graph is independent of it */
    double t0 = seconds();
    bool replayed = true;
    for (int r = 0; r < REPLAYS; r++) replayed &= tsrGraphLaunch(exec, s) == TSR_SUCCESS;
    double t1 = seconds();
    expect("100 replays queued; synchronize", tsrStreamSynchronize(s), TSR_SUCCESS);
    double t2 = seconds();
    check("  every replay was accepted", replayed);
    expect("the graph's event record completed", tsrEventQuery(done), TSR_SUCCESS);

    double t3 = seconds();
    bool direct = true;
    for (int r = 0; r < REPLAYS; r++)
      for (int k = 0; k < STEPS; k++) direct &= step(s, dx, dy, N);
    double t4 = seconds();
    expect("the same 400 launches directly; synchronize", tsrStreamSynchronize(s), TSR_SUCCESS);
    double t5 = seconds();
    check("  every launch was accepted", direct);
    MUST(tsrMemcpy(ctx, got, gy, N * sizeof *got, TSR_MEMCPY_DEVICE_TO_HOST));
    MUST(tsrMemcpy(ctx, want, dy, N * sizeof *want, TSR_MEMCPY_DEVICE_TO_HOST));
    check("100 replays = 400 direct launches, bit for bit (y)", equal(got, want, N));
    MUST(tsrMemcpy(ctx, got, gx, N * sizeof *got, TSR_MEMCPY_DEVICE_TO_HOST));
    MUST(tsrMemcpy(ctx, want, dx, N * sizeof *want, TSR_MEMCPY_DEVICE_TO_HOST));
    check("  and x", equal(got, want, N));
    MUST(tsrMemcpy(ctx, got, snapshot, N * sizeof *got, TSR_MEMCPY_DEVICE_TO_HOST));
    MUST(tsrMemcpy(ctx, want, dy, N * sizeof *want, TSR_MEMCPY_DEVICE_TO_HOST));
    check("the graph's copy node ran after its launches", equal(got, want, N));
    printf("     timing: host time to submit 400 launches: direct %.2f us per launch, graph replay %.2f us per "
           "launch (%.1fx); until synchronized: direct %.2f us, replay %.2f us per launch\n",
           (t4 - t3) * 1e6 / (REPLAYS * STEPS * 2), (t1 - t0) * 1e6 / (REPLAYS * STEPS * 2),
           (t4 - t3) / (t1 - t0), (t5 - t3) * 1e6 / (REPLAYS * STEPS * 2), (t2 - t0) * 1e6 / (REPLAYS * STEPS * 2));
    expect("replay on the NULL stream (returns when done)", tsrGraphLaunch(exec, NULL), TSR_SUCCESS);
    expect("tsrDestroyGraphExec", tsrDestroyGraphExec(exec), TSR_SUCCESS);
  }
  tsrDestroyEvent(done);
  tsrDestroyStream(s);
  tsrFree(ctx, gx), tsrFree(ctx, gy), tsrFree(ctx, dx), tsrFree(ctx, dy), tsrFree(ctx, snapshot);
  free(h), free(got), free(want);
}

/* Last: a kernel fault ends the CUDA context. The launch is accepted; the stream's synchronize reports it. */
static void check_fault(void) {
  phase("fault");
  tsr_stream_t s;
  MUST(tsrCreateStream(ctx, NULL, &s));
  float* bad = (float*)((uintptr_t)1 << 40);  /* no allocation is there */
  expect("a launch reading unmapped memory is queued", axpy(s, 1.0f, bad, bad, 1 << 20), TSR_SUCCESS);
  expect_msg("tsrStreamSynchronize reports the kernel's fault", tsrStreamSynchronize(s), TSR_ERROR_LAUNCH_FAILED,
             "CUDA_ERROR_ILLEGAL_ADDRESS");
  tsrDestroyStream(s);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s IMAGE [no-graphs]\n", argv[0]);
    return 2;
  }
  bool have_graphs = !(argc > 2 && strcmp(argv[2], "no-graphs") == 0);
  tsr_context_options_t o;
  tsrContextOptionsInitialize(&o);
  o.backend = "cuda";
  MUST(tsrCreateContextWithOptions(&o, &ctx));
  tsr_module_t mod = load_test_image(ctx, argv[1]);
  saxpy = kernel(mod, "saxpy");
  MUST(tsrKernelGetArgCount(saxpy, &nargs));
  tensors = 0;
  for (size_t i = 0; i < nargs; i++) {
    tsr_arg_info_t a;
    MUST(tsrKernelGetArgInfo(saxpy, i, &a));
    tensors += a.kind == TSR_ARG_TENSOR;
  }
  if ((tensors != 2 && tensors != 3) || nargs > 8) {
    printf("FAIL saxpy has %d tensors in %zu arguments\n", tensors, nargs);
    return 2;
  }
  check_two_streams();
  check_async_copies();
  check_graphs(have_graphs);
  check_fault();
  tsrUnloadModule(mod);
  tsrDestroyContext(ctx);
  return finish();
}
