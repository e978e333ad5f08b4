/* host_function_device.c — tsrFunctionCall on any backend, with tensors in the context's device memory
 * (tsrAlloc, filled with tsrMemcpy): function `axpy` of IMAGE (tests/c/test_function_device.py writes its
 * plan), whose result is A * x + B * y + C elementwise over N elements.
 *
 *   host_function_device IMAGE BACKEND A B C
 *
 * The host checks the result bit for bit (x holds integers and y quarters, so every value is exact in f32)
 * after a call on the NULL stream and one on a stream; tsrFunctionGetResultShapes; that tensors on another
 * DLPack device type or device id are refused naming the argument; a call captured into a graph, replayed by
 * two executable instances with new inputs written into the same buffers, its intermediates held by the graph
 * until the last instance goes; strided views (reversed, every other element) in device memory, refused while
 * capturing; that every intermediate is freed. Calls on a stream queue their work and return without waiting
 * for it (on the CPU: behind a kernel that spins until the host sets a flag, which a call that waited would
 * never see set; on fake CUDA the driver's log shows no synchronize between "## " marks this host writes),
 * their intermediates reused by the next call on the stream and back in the pool once it was waited for; two
 * threads call the function at once, on a stream each and on one stream. */
#include <pthread.h>

#include "check.h"

#define N 100

static size_t allocations(tsr_context_t ctx) {
  tsr_memory_stats_t stats;
  MUST(tsrGetMemoryStats(ctx, &stats));
  return stats.allocations;
}

static float hx[N], hy[N], want[N], A, B, C;

/* New inputs (round r), copied into the device buffers, and what the function gives for them. */
static void set_inputs(tsr_context_t ctx, void* dx, void* dy, int r) {
  for (int i = 0; i < N; i++) {
    hx[i] = (float)(i - 40 + 7 * r);
    hy[i] = 0.25f * (float)((i + r) % 17) - 1.0f;
    want[i] = A * hx[i] + B * hy[i] + C;
  }
  MUST(tsrMemcpy(ctx, dx, hx, sizeof hx, TSR_MEMCPY_HOST_TO_DEVICE));
  MUST(tsrMemcpy(ctx, dy, hy, sizeof hy, TSR_MEMCPY_HOST_TO_DEVICE));
}
static int64_t shape[1] = {N};

/* A mark in the fake CUDA driver's log ($FAKE_CUDA_LOG), which tests/c/test_cuda_fake.py splits at. */
static void phase(const char* name) {
  const char* path = getenv("FAKE_CUDA_LOG");
  FILE* f = path ? fopen(path, "a") : NULL;
  if (f) {
    fprintf(f, "## %s\n", name);
    fclose(f);
  }
}

/* One of two threads calling the function at once: its own buffers, `calls` calls on `stream`, then a wait. */
typedef struct worker {
  tsr_context_t ctx;
  tsr_function_t fn;
  tsr_stream_t stream;
  DLDevice device;
  tsr_status_t status;
  bool same;  /* the result, bit for bit */
} worker_t;

static void* work(void* arg) {
  worker_t* w = arg;
  void *dx, *dy, *dout;
  MUST(tsrAlloc(w->ctx, sizeof hx, TSR_ALLOC_DEFAULT, &dx));
  MUST(tsrAlloc(w->ctx, sizeof hy, TSR_ALLOC_DEFAULT, &dy));
  MUST(tsrAlloc(w->ctx, sizeof want, TSR_ALLOC_DEFAULT, &dout));
  MUST(tsrMemcpy(w->ctx, dx, hx, sizeof hx, TSR_MEMCPY_HOST_TO_DEVICE));
  MUST(tsrMemcpy(w->ctx, dy, hy, sizeof hy, TSR_MEMCPY_HOST_TO_DEVICE));
  DLDataType f32 = {kDLFloat, 32, 1};
  DLTensor x = {dx, w->device, 1, f32, shape, NULL, 0}, y = {dy, w->device, 1, f32, shape, NULL, 0};
  DLTensor out = {dout, w->device, 1, f32, shape, NULL, 0};
  const DLTensor* in[2] = {&x, &y};
  const DLTensor* outs[1] = {&out};
  w->status = TSR_SUCCESS;
  for (int i = 0; i < 200 && !w->status; i++) w->status = tsrFunctionCall(w->fn, w->stream, in, 2, outs, 1);
  if (!w->status) w->status = tsrStreamSynchronize(w->stream);
  float got[N];
  MUST(tsrMemcpy(w->ctx, got, dout, sizeof got, TSR_MEMCPY_DEVICE_TO_HOST));
  w->same = memcmp(got, want, sizeof got) == 0;
  MUST(tsrFree(w->ctx, dx));
  MUST(tsrFree(w->ctx, dy));
  MUST(tsrFree(w->ctx, dout));
  return NULL;
}

/* Two threads calling `fn` at once, on streams a and b (the same stream or two). */
static void two_threads(const char* what, tsr_context_t ctx, tsr_function_t fn, DLDevice device, tsr_stream_t a,
                        tsr_stream_t b) {
  worker_t w[2] = {{ctx, fn, a, device, TSR_SUCCESS, false}, {ctx, fn, b, device, TSR_SUCCESS, false}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++) MUST(pthread_create(&t[i], NULL, work, &w[i]) ? TSR_ERROR_INIT_FAIL : TSR_SUCCESS);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  char line[160];
  for (int i = 0; i < 2; i++) {
    snprintf(line, sizeof line, "%s: thread %d's 200 calls", what, i);
    expect(line, w[i].status, TSR_SUCCESS);
    snprintf(line, sizeof line, "%s: thread %d's result, bit for bit", what, i);
    check(line, w[i].same);
  }
}

/* Copies the device result back and compares it with `want`. */
static void check_result(const char* what, tsr_context_t ctx, void* dout) {
  float got[N];
  MUST(tsrMemcpy(ctx, got, dout, sizeof got, TSR_MEMCPY_DEVICE_TO_HOST));
  int bad = -1;
  for (int i = 0; i < N && bad < 0; i++)
    if (memcmp(&got[i], &want[i], sizeof got[i]) != 0) bad = i;
  if (bad >= 0) printf("     element %d: %g, %g expected\n", bad, got[bad], want[bad]);
  check(what, bad < 0);
}

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s IMAGE BACKEND A B C\n", argv[0]);
    return 2;
  }
  A = strtof(argv[3], NULL), B = strtof(argv[4], NULL), C = strtof(argv[5], NULL);
  tsr_context_options_t options;
  MUST(tsrContextOptionsInitialize(&options));
  options.backend = argv[2];
  tsr_context_t ctx;
  MUST(tsrCreateContextWithOptions(&options, &ctx));
  tsr_module_t module = load_test_image(ctx, argv[1]);
  tsr_function_t fn;
  MUST(tsrModuleGetFunction(module, "axpy", &fn));

  void *dx, *dy, *dout;
  MUST(tsrAlloc(ctx, sizeof hx, TSR_ALLOC_DEFAULT, &dx));
  MUST(tsrAlloc(ctx, sizeof hy, TSR_ALLOC_DEFAULT, &dy));
  MUST(tsrAlloc(ctx, sizeof want, TSR_ALLOC_DEFAULT, &dout));
  set_inputs(ctx, dx, dy, 0);
  DLDevice device = {device_type_of(argv[2]), 0};
  DLDataType f32 = {kDLFloat, 32, 1};
  DLTensor x = {dx, device, 1, f32, shape, NULL, 0}, y = {dy, device, 1, f32, shape, NULL, 0};
  DLTensor out = {dout, device, 1, f32, shape, NULL, 0};
  const DLTensor* in[2] = {&x, &y};
  const DLTensor* outs[1] = {&out};

  int64_t dims[1] = {0};
  DLTensor bare_x = x, bare_y = y;
  bare_x.data = bare_y.data = NULL;
  const DLTensor* bare[2] = {&bare_x, &bare_y};
  expect("result shapes", tsrFunctionGetResultShapes(fn, bare, 2, dims, 1), TSR_SUCCESS);
  check("the result has N elements", dims[0] == N);

  expect("call on the NULL stream", tsrFunctionCall(fn, NULL, in, 2, outs, 1), TSR_SUCCESS);
  check_result("the NULL stream's result", ctx, dout);
  static const float zeros[N];
  MUST(tsrMemcpy(ctx, dout, zeros, sizeof zeros, TSR_MEMCPY_HOST_TO_DEVICE));
  tsr_stream_t stream;
  MUST(tsrCreateStream(ctx, NULL, &stream));
  expect("call on a stream", tsrFunctionCall(fn, stream, in, 2, outs, 1), TSR_SUCCESS);
  MUST(tsrStreamSynchronize(stream));
  check_result("the stream's result", ctx, dout);

  /* memory of another device type, or of another device */
  DLTensor other = y;
  in[1] = &other;
  other.device.device_type = device.device_type == kDLCPU ? kDLCUDA : kDLCPU;
  expect_msg("another device type", tsrFunctionCall(fn, stream, in, 2, outs, 1), TSR_ERROR_INVALID_VALUE,
             "argument 'y' is on DLPack device type");
  other = y;
  other.device.device_id = 1;
  expect_msg("another device", tsrFunctionCall(fn, stream, in, 2, outs, 1), TSR_ERROR_INVALID_VALUE,
             "argument 'y' is on device 1");
  in[1] = &y;

  check("the intermediates are freed", allocations(ctx) == 3);

  /* Calls that do not wait for their stream: on the CPU queued behind a kernel spinning until the host sets a
   * flag (up to 10 s: `seen` is then -1), which the host sets only after the calls returned */
  bool cpu = strcmp(argv[2], "cpu") == 0;
  int32_t* flag = NULL;
  int32_t* seen = NULL;
  if (cpu) {
    MUST(tsrAlloc(ctx, sizeof *flag, TSR_ALLOC_DEFAULT, (void**)&flag));
    MUST(tsrAlloc(ctx, sizeof *seen, TSR_ALLOC_DEFAULT, (void**)&seen));
    *flag = *seen = 0;
    tsr_kernel_t spin;
    MUST(tsrGetKernel(module, "spin_until", &spin));
    int64_t f = 1;
    void* args[3] = {&flag, &seen, &f};
    tsr_launch_t one = {1, 1, 1, 1, 1, 1, 0};
    MUST(tsrLaunch(spin, stream, one, args, 3));
  }
  phase("calls without waiting");
  expect("a first call on the stream", tsrFunctionCall(fn, stream, in, 2, outs, 1), TSR_SUCCESS);
  size_t after_one = allocations(ctx);
  check("its intermediates stay allocated while its work may run", after_one > 3);
  for (int r = 0; r < 20; r++) expect("a call on the stream", tsrFunctionCall(fn, stream, in, 2, outs, 1), TSR_SUCCESS);
  phase("calls returned");
  check("each call reuses the intermediates the one before released on its stream", allocations(ctx) == after_one);
  if (cpu) {
    expect("the stream still runs the spinning kernel", tsrStreamQuery(stream), TSR_ERROR_NOT_READY);
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
  }
  MUST(tsrStreamSynchronize(stream));
  phase("synchronized");
  if (cpu) {
    check("the kernel saw the flag set after the calls returned", *seen == 1);
    MUST(tsrFree(ctx, flag));
    MUST(tsrFree(ctx, seen));
  }
  check_result("the last call's result", ctx, dout);
  check("the intermediates are back in the pool once the stream was waited for", allocations(ctx) == 3);
  tsr_memory_stats_t stats;
  MUST(tsrGetMemoryStats(ctx, &stats));
  check("and none is in use", stats.bytes_in_use == 3 * sizeof want);

  tsr_stream_t other_stream;
  MUST(tsrCreateStream(ctx, NULL, &other_stream));
  phase("threads");
  two_threads("a stream each", ctx, fn, device, stream, other_stream);
  two_threads("one stream", ctx, fn, device, stream, stream);
  /* pending intermediates of a stream go back when it is destroyed */
  expect("a call on the other stream", tsrFunctionCall(fn, other_stream, in, 2, outs, 1), TSR_SUCCESS);
  MUST(tsrDestroyStream(other_stream));
  phase("threads done");
  check("the destroyed stream's intermediates are freed", allocations(ctx) == 3);
  check_result("and its result was written", ctx, dout);

  /* captured: the launches and copies of one call, replayed whole by tsrGraphLaunch */
  tsr_graph_t graph;
  tsr_graph_exec_t execs[2];
  MUST(tsrStreamBeginCapture(stream));
  expect("call while capturing", tsrFunctionCall(fn, stream, in, 2, outs, 1), TSR_SUCCESS);
  MUST(tsrStreamEndCapture(stream, &graph));
  size_t nodes;
  MUST(tsrGraphGetNodeCount(graph, &nodes));
  printf("     %zu nodes\n", nodes);
  check("the graph holds the call's launches and copy", nodes >= 2);
  check("the graph holds the intermediates", allocations(ctx) > 3);
  MUST(tsrGraphInstantiate(graph, &execs[0]));
  MUST(tsrGraphInstantiate(graph, &execs[1]));
  MUST(tsrDestroyGraph(graph));
  check("the instances hold them", allocations(ctx) > 3);
  for (int r = 1; r <= 3; r++) {
    set_inputs(ctx, dx, dy, r);
    MUST(tsrMemcpy(ctx, dout, zeros, sizeof zeros, TSR_MEMCPY_HOST_TO_DEVICE));
    expect("replay", tsrGraphLaunch(execs[r % 2], stream), TSR_SUCCESS);
    MUST(tsrStreamSynchronize(stream));
    check_result("a replay's result", ctx, dout);
  }
  MUST(tsrDestroyGraphExec(execs[0]));
  set_inputs(ctx, dx, dy, 4);
  expect("replay on the NULL stream after the other instance went",
         tsrGraphLaunch(execs[1], NULL), TSR_SUCCESS);
  check_result("its result", ctx, dout);
  MUST(tsrDestroyGraphExec(execs[1]));
  check("the last instance freed the intermediates", allocations(ctx) == 3);

  /* strided views in device memory (copied through host staging): x reversed, its data at its last element
   * (numpy x[::-1]); y and the output every other element after the first (b[1::2] of a buffer of 2N + 1) */
  set_inputs(ctx, dx, dy, 5);
  float rev[N], sparse_y[2 * N + 1], sparse_out[2 * N + 1];
  for (int i = 0; i < N; i++) rev[i] = hx[N - 1 - i];
  for (int i = 0; i < 2 * N + 1; i++) sparse_y[i] = i % 2 ? hy[i / 2] : -7.0f, sparse_out[i] = -7.0f;
  void *rx, *sy, *sout;
  MUST(tsrAlloc(ctx, sizeof rev, TSR_ALLOC_DEFAULT, &rx));
  MUST(tsrAlloc(ctx, sizeof sparse_y, TSR_ALLOC_DEFAULT, &sy));
  MUST(tsrAlloc(ctx, sizeof sparse_out, TSR_ALLOC_DEFAULT, &sout));
  MUST(tsrMemcpy(ctx, rx, rev, sizeof rev, TSR_MEMCPY_HOST_TO_DEVICE));
  MUST(tsrMemcpy(ctx, sy, sparse_y, sizeof sparse_y, TSR_MEMCPY_HOST_TO_DEVICE));
  MUST(tsrMemcpy(ctx, sout, sparse_out, sizeof sparse_out, TSR_MEMCPY_HOST_TO_DEVICE));
  int64_t backwards[1] = {-1}, every_other[1] = {2};
  DLTensor vx = {rx, device, 1, f32, shape, backwards, (N - 1) * sizeof(float)};
  DLTensor vy = {sy, device, 1, f32, shape, every_other, sizeof(float)};
  DLTensor vout = {sout, device, 1, f32, shape, every_other, sizeof(float)};
  const DLTensor* views[2] = {&vx, &vy};
  const DLTensor* view_out[1] = {&vout};
  expect("a call on strided views", tsrFunctionCall(fn, stream, views, 2, view_out, 1), TSR_SUCCESS);
  MUST(tsrStreamSynchronize(stream));
  MUST(tsrMemcpy(ctx, sparse_out, sout, sizeof sparse_out, TSR_MEMCPY_DEVICE_TO_HOST));
  bool same = true;
  for (int i = 0; i < 2 * N + 1; i++) {
    float expected = i % 2 ? want[i / 2] : -7.0f;  /* the elements between the view's are left alone */
    same = same && memcmp(&sparse_out[i], &expected, sizeof expected) == 0;
  }
  check("the views' result, bit for bit, and nothing between its elements", same);
  check("the staging intermediates are freed", allocations(ctx) == 6);
  MUST(tsrStreamBeginCapture(stream));
  expect_msg("strided views while capturing", tsrFunctionCall(fn, stream, views, 2, view_out, 1),
             TSR_ERROR_UNSUPPORTED, "capture");
  MUST(tsrStreamEndCapture(stream, &graph));
  MUST(tsrDestroyGraph(graph));
  MUST(tsrFree(ctx, rx));
  MUST(tsrFree(ctx, sy));
  MUST(tsrFree(ctx, sout));
  /* the context destroyed with a call's intermediates pending, its stream, buffers and module alive: the
   * stream's work finishes first, then everything is freed (ASan's leak check runs this host) */
  phase("last call");
  expect("a last call, not waited for", tsrFunctionCall(fn, stream, in, 2, outs, 1), TSR_SUCCESS);
  MUST(tsrDestroyContext(ctx));
  printf("%d failed\n", failures);
  return failures;
}
