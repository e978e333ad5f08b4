/* host_function_direct.c — where tsrFunctionCall computes a result in its output's memory and where it keeps the
 * copy out of an intermediate (docs/c-api.md, "Functions"), on any backend: the functions of
 * tests/c/function_images.py's DIRECT, each 2x + y + 1 (reread: also 2·that) over N elements.
 *
 *   host_function_direct IMAGE BACKEND
 *
 * Every case writes a "## NAME" mark to $FAKE_CUDA_LOG before its call; tests/c/test_function_direct.py reads
 * the fake CUDA driver's lines between the marks (a result computed in place leaves no cuMemcpyDtoDAsync; a
 * copied one, one). Each result is checked bit for bit here (x holds integers and y quarters: every value is
 * exact in f32), and, where the output lies inside a larger buffer, that nothing around it was written. */
#include <stdint.h>

#include "check.h"

#define N 100
#define PAD 64  /* floats before and after an output placed inside a larger buffer */

static float hx[N], hy[N], want[N];
static int64_t shape[1] = {N};
static tsr_context_t ctx;
static DLDevice device;
static const DLDataType f32 = {kDLFloat, 32, 1};

static void phase(const char* name) {
  const char* path = getenv("FAKE_CUDA_LOG");
  FILE* f = path ? fopen(path, "a") : NULL;
  if (f) {
    fprintf(f, "## %s\n", name);
    fclose(f);
  }
}

static void* device_copy_of(const float* host, size_t count) {
  void* d;
  MUST(tsrAlloc(ctx, count * sizeof *host, TSR_ALLOC_DEFAULT, &d));
  MUST(tsrMemcpy(ctx, d, host, count * sizeof *host, TSR_MEMCPY_HOST_TO_DEVICE));
  return d;
}

/* `count` floats of device memory `d` from element `at` on equal `expect` (NULL: -7 each), bit for bit. */
static bool holds(const void* d, size_t at, const float* expect, size_t count, size_t total) {
  float* got = malloc(total * sizeof *got);
  MUST(tsrMemcpy(ctx, got, d, total * sizeof *got, TSR_MEMCPY_DEVICE_TO_HOST));
  bool same = true;
  for (size_t i = 0; i < count; i++) {
    float e = expect ? expect[i] : -7.0f;
    if (memcmp(&got[at + i], &e, sizeof e) != 0) {
      if (same) printf("     element %zu: %g, %g expected\n", at + i, got[at + i], e);
      same = false;
    }
  }
  free(got);
  return same;
}

/* A buffer of PAD + N + PAD floats, each -7, on the device. */
static void* padded(void) {
  float h[PAD + N + PAD];
  for (size_t i = 0; i < PAD + N + PAD; i++) h[i] = -7.0f;
  return device_copy_of(h, PAD + N + PAD);
}

/* Calls `fn` with x, y on `stream` into an output at `byte_offset` bytes into a padded buffer (strides NULL or
 * `strides`), then checks the output and that the padding around it stayed -7. */
static void call_into(const char* what, tsr_function_t fn, tsr_stream_t stream, const DLTensor* const* in,
                      uint64_t byte_offset, int64_t* strides) {
  void* buffer = padded();
  DLTensor out = {buffer, device, 1, f32, shape, strides, byte_offset};
  const DLTensor* outs[1] = {&out};
  phase(what);
  expect(what, tsrFunctionCall(fn, stream, in, 2, outs, 1), TSR_SUCCESS);
  if (stream) MUST(tsrStreamSynchronize(stream));
  phase("checks");
  size_t first = byte_offset / sizeof(float);
  char line[160];
  if (!strides) {
    snprintf(line, sizeof line, "%s: the result, bit for bit", what);
    check(line, holds(buffer, first, want, N, PAD + N + PAD));
    snprintf(line, sizeof line, "%s: nothing written before or after it", what);
    check(line, holds(buffer, 0, NULL, first, PAD + N + PAD) &&
                    holds(buffer, first + N, NULL, PAD + N + PAD - first - N, PAD + N + PAD));
  } else {  /* reversed: element i at first - i */
    float reversed[N];
    for (int i = 0; i < N; i++) reversed[i] = want[N - 1 - i];
    snprintf(line, sizeof line, "%s: the result, reversed, bit for bit", what);
    check(line, holds(buffer, first - (N - 1), reversed, N, PAD + N + PAD));
    snprintf(line, sizeof line, "%s: nothing written before or after it", what);
    check(line, holds(buffer, 0, NULL, first - (N - 1), PAD + N + PAD) &&
                    holds(buffer, first + 1, NULL, PAD + N + PAD - first - 1, PAD + N + PAD));
  }
  MUST(tsrFree(ctx, buffer));
}

static tsr_function_t function(tsr_module_t module, const char* name) {
  tsr_function_t fn;
  MUST(tsrModuleGetFunction(module, name, &fn));
  return fn;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s IMAGE BACKEND\n", argv[0]);
    return 2;
  }
  tsr_context_options_t options;
  MUST(tsrContextOptionsInitialize(&options));
  options.backend = argv[2];
  MUST(tsrCreateContextWithOptions(&options, &ctx));
  device = (DLDevice){device_type_of(argv[2]), 0};
  tsr_module_t module = load_test_image(ctx, argv[1]);
  tsr_function_t axpy = function(module, "axpy");
  for (int i = 0; i < N; i++) {
    hx[i] = (float)(i - 40);
    hy[i] = 0.25f * (float)(i % 17) - 1.0f;
    want[i] = 2.0f * hx[i] + hy[i] + 1.0f;
  }
  void* dx = device_copy_of(hx, N);
  void* dy = device_copy_of(hy, N);
  DLTensor x = {dx, device, 1, f32, shape, NULL, 0}, y = {dy, device, 1, f32, shape, NULL, 0};
  const DLTensor* in[2] = {&x, &y};
  tsr_stream_t stream;
  MUST(tsrCreateStream(ctx, NULL, &stream));

  /* in place: tsrAlloc memory, and 64 bytes into an allocation (TSR_ALLOC_ALIGNMENT-aligned), on the NULL
   * stream and on a stream */
  call_into("direct", axpy, NULL, in, 0, NULL);
  call_into("direct on a stream", axpy, stream, in, 0, NULL);
  call_into("direct 64 bytes in", axpy, stream, in, PAD * sizeof(float), NULL);
  /* memory the context does not know (another library's; on fake CUDA device memory is host memory) */
  if (strcmp(argv[2], "cuda") == 0 || strcmp(argv[2], "cpu") == 0) {
    float* foreign = aligned_alloc(64, (N * sizeof(float) + 63) / 64 * 64);  /* C11: a multiple of 64 */
    if (!foreign) return 2;
    DLTensor out = {foreign, device, 1, f32, shape, NULL, 0};
    const DLTensor* outs[1] = {&out};
    phase("direct into unknown memory");
    expect("direct into unknown memory", tsrFunctionCall(axpy, stream, in, 2, outs, 1), TSR_SUCCESS);
    MUST(tsrStreamSynchronize(stream));
    phase("checks");
    check("direct into unknown memory: the result, bit for bit", memcmp(foreign, want, sizeof want) == 0);
    free(foreign);
  }

  /* copied: a misaligned output (4 and 32 bytes into an allocation), a reversed one (strided: staged through
   * the host), outputs overlapping an argument */
  call_into("misaligned by 4 bytes", axpy, stream, in, (PAD + 1) * sizeof(float), NULL);
  call_into("misaligned by 32 bytes", axpy, stream, in, (PAD + 8) * sizeof(float), NULL);
  int64_t backwards[1] = {-1};
  call_into("reversed", axpy, stream, in, (PAD + N - 1) * sizeof(float), backwards);
  {
    /* the output is x: the steps read x after the first wrote the result */
    void* bx = device_copy_of(hx, N);
    DLTensor xs = {bx, device, 1, f32, shape, NULL, 0};
    const DLTensor* in_x[2] = {&xs, &y};
    const DLTensor* outs[1] = {&xs};
    phase("the output is an argument");
    expect("the output is an argument", tsrFunctionCall(axpy, stream, in_x, 2, outs, 1), TSR_SUCCESS);
    MUST(tsrStreamSynchronize(stream));
    phase("checks");
    check("the output is an argument: the result, bit for bit", holds(bx, 0, want, N, N));
    MUST(tsrFree(ctx, bx));
    /* the output 16 elements (64 bytes) after x's start, in one allocation: aligned, compact, overlapping */
    float both[N + 16];
    for (int i = 0; i < N + 16; i++) both[i] = i < N ? hx[i] : -7.0f;
    void* b = device_copy_of(both, N + 16);
    DLTensor xo = {b, device, 1, f32, shape, NULL, 0}, o = {b, device, 1, f32, shape, NULL, 16 * sizeof(float)};
    const DLTensor* in_o[2] = {&xo, &y};
    const DLTensor* outs_o[1] = {&o};
    phase("the output overlaps an argument");
    expect("the output overlaps an argument", tsrFunctionCall(axpy, stream, in_o, 2, outs_o, 1), TSR_SUCCESS);
    MUST(tsrStreamSynchronize(stream));
    phase("checks");
    check("the output overlaps an argument: the result, bit for bit", holds(b, 16, want, N, N + 16));
    MUST(tsrFree(ctx, b));
  }
  /* device memory only: on a device backend, an output in pinned host memory keeps the copy */
  if (strcmp(argv[2], "cpu") != 0) {
    void* pinned;
    MUST(tsrAlloc(ctx, sizeof want, TSR_ALLOC_HOST_PINNED, &pinned));
    memset(pinned, 0, sizeof want);
    DLTensor out = {pinned, device, 1, f32, shape, NULL, 0};
    const DLTensor* outs[1] = {&out};
    phase("pinned host memory");
    expect("pinned host memory", tsrFunctionCall(axpy, stream, in, 2, outs, 1), TSR_SUCCESS);
    MUST(tsrStreamSynchronize(stream));
    phase("checks");
    check("pinned host memory: the result, bit for bit", memcmp(pinned, want, sizeof want) == 0);
    MUST(tsrFree(ctx, pinned));
  }

  /* captured: the copy is recorded (the graph holds the intermediate), the replays write the output */
  {
    void* dout;
    MUST(tsrAlloc(ctx, sizeof want, TSR_ALLOC_DEFAULT, &dout));
    DLTensor out = {dout, device, 1, f32, shape, NULL, 0};
    const DLTensor* outs[1] = {&out};
    tsr_graph_t graph;
    tsr_graph_exec_t exec;
    phase("captured");
    MUST(tsrStreamBeginCapture(stream));
    expect("a call while capturing", tsrFunctionCall(axpy, stream, in, 2, outs, 1), TSR_SUCCESS);
    MUST(tsrStreamEndCapture(stream, &graph));
    MUST(tsrGraphInstantiate(graph, &exec));
    MUST(tsrDestroyGraph(graph));
    static const float zeros[N];
    MUST(tsrMemcpy(ctx, dout, zeros, sizeof zeros, TSR_MEMCPY_HOST_TO_DEVICE));
    phase("replays");
    for (int r = 0; r < 2; r++) {
      expect("a replay", tsrGraphLaunch(exec, stream), TSR_SUCCESS);
      MUST(tsrStreamSynchronize(stream));
      check("a replay's result, bit for bit", holds(dout, 0, want, N, N));
      MUST(tsrMemcpy(ctx, dout, zeros, sizeof zeros, TSR_MEMCPY_HOST_TO_DEVICE));
    }
    phase("checks");
    MUST(tsrDestroyGraphExec(exec));
    MUST(tsrFree(ctx, dout));
  }

  /* buffer slots: a result alone in its slot is computed in place; one sharing its slot with an intermediate
   * whose storage it is keeps the copy of that storage */
  call_into("a slot of its own", function(module, "sole"), stream, in, 0, NULL);
  call_into("a slot shared", function(module, "shared"), stream, in, 0, NULL);
  {
    /* two results, the second computed from the first after it was written (both in place) */
    void* b2 = padded();
    void* b3 = padded();
    DLTensor o2 = {b2, device, 1, f32, shape, NULL, 0}, o3 = {b3, device, 1, f32, shape, NULL, 0};
    const DLTensor* outs[2] = {&o2, &o3};
    phase("a result read by a later step");
    expect("a result read by a later step", tsrFunctionCall(function(module, "reread"), stream, in, 2, outs, 2),
           TSR_SUCCESS);
    MUST(tsrStreamSynchronize(stream));
    phase("checks");
    float twice[N];
    for (int i = 0; i < N; i++) twice[i] = 2.0f * want[i];
    check("a result read by a later step: the first result", holds(b2, 0, want, N, PAD + N + PAD));
    check("a result read by a later step: the second, from the first", holds(b3, 0, twice, N, PAD + N + PAD));
    MUST(tsrFree(ctx, b2));
    MUST(tsrFree(ctx, b3));
  }
  phase("end");

  tsr_memory_stats_t stats;
  MUST(tsrGetMemoryStats(ctx, &stats));
  check("only x and y are allocated", stats.allocations == 2);
  MUST(tsrDestroyStream(stream));
  MUST(tsrFree(ctx, dx));
  MUST(tsrFree(ctx, dy));
  MUST(tsrDestroyContext(ctx));
  printf("%d failed\n", failures);
  return failures;
}
