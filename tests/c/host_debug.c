/* host_debug.c — debug mode (docs/runtime.md, "Debug mode"): each kind of planted memory bug is caught and
 * reported as TSR_ERROR_MEMORY_FAULT with a message saying what happened, and the process goes on.
 *
 *   host_debug IMAGE      IMAGE: the test image of make_image.py */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "check.h"

static tsr_context_t ctx;
static tsr_module_t mod;

static const tsr_launch_t one = {1, 1, 1, 1, 1, 1, 0};

/* overrun(out, extra, n): writes out[0 .. n + extra). */
static tsr_status_t overrun(tsr_stream_t s, float* out, int64_t n, int64_t extra) {
  void* args[] = {&out, &extra, &n};
  return tsrLaunch(kernel(mod, "overrun"), s, one, args, 3);
}

static tsr_status_t saxpy(float* x, float* y, int64_t n) {
  float a = 1;
  void* args[] = {&a, &x, &y, &n};
  return tsrLaunch(kernel(mod, "saxpy"), NULL, (tsr_launch_t){(uint32_t)(n + 63) / 64, 1, 1, 64, 1, 1, 0}, args, 4);
}

static void check_bounds(void) {
  float *x, *y;
  MUST(tsrAlloc(ctx, 100 * sizeof(float), 0, (void**)&x));
  MUST(tsrAlloc(ctx, 100 * sizeof(float), 0, (void**)&y));
  for (int i = 0; i < 100; i++) x[i] = 1, y[i] = 0;
  expect("saxpy within the allocations", saxpy(x, y, 100), TSR_SUCCESS);
  expect_msg("saxpy with N = 101 over 100-float allocations", saxpy(x, y, 101), TSR_ERROR_MEMORY_FAULT,
             "4 bytes past its end");
  check("  refused before it ran (y unchanged)", y[0] == 1 && y[99] == 1);
  expect_msg("a tensor starting inside and running out", saxpy(x + 50, y + 50, 60), TSR_ERROR_MEMORY_FAULT,
             "at offset 200");
  expect_msg("tensors starting just past the end (in the slack before the guard page)", saxpy(x + 100, y + 100, 1),
             TSR_ERROR_MEMORY_FAULT, "at offset 400 of the 400-byte allocation");
  float one = 1, *end_x = x + 100, *end_y = y + 100;
  int64_t zero = 0;
  void* empty_args[] = {&one, &end_x, &end_y, &zero};
  expect("  with nothing to access they are fine",
         tsrLaunch(kernel(mod, "saxpy"), NULL, (tsr_launch_t){1, 1, 1, 64, 1, 1, 0}, empty_args, 4), TSR_SUCCESS);
  expect_msg("a tensor starting before an allocation (in its head canary)", saxpy(x - 4, y, 4),
             TSR_ERROR_MEMORY_FAULT, "starts 16 bytes before");
  float host[200];
  expect("host memory the context does not know is not checked", saxpy(host, host + 100, 100), TSR_SUCCESS);
  tsrFree(ctx, x);
  tsrFree(ctx, y);
}

static void check_overruns(void) {
  float* out;
  MUST(tsrAlloc(ctx, 100 * sizeof(float), 0, (void**)&out));  /* 400 bytes: 48 bytes of slack up to 448 */
  expect("a kernel writing its declared extent", overrun(NULL, out, 100, 0), TSR_SUCCESS);
  expect_msg("a kernel writing 3 floats past its extent: canary", overrun(NULL, out, 100, 3), TSR_ERROR_MEMORY_FAULT,
             "offset 400 of the 400-byte allocation");
  expect("  the allocation is still freed", tsrFree(ctx, out), TSR_ERROR_MEMORY_FAULT);

  MUST(tsrAlloc(ctx, 100 * sizeof(float), 0, (void**)&out));
  expect_msg("a kernel writing 5000 floats past its extent: guard page", overrun(NULL, out, 100, 5000),
             TSR_ERROR_MEMORY_FAULT, "(guard page)");
  check("  the message names the kernel and the block", strstr(tsrGetLastErrorMessage(), "kernel 'overrun' block "
                                                                                        "(0, 0, 0) faulted") != NULL);
  expect("its canaries were overwritten on the way: tsrFree says so", tsrFree(ctx, out), TSR_ERROR_MEMORY_FAULT);
  MUST(tsrAlloc(ctx, 100 * sizeof(float), 0, (void**)&out));
  expect("the next launch runs normally", overrun(NULL, out, 100, 0), TSR_SUCCESS);
  expect("  and leaves the canaries alone", tsrFree(ctx, out), TSR_SUCCESS);

  /* The host writes past the end itself: found when the allocation is freed. */
  MUST(tsrAlloc(ctx, 10, 0, (void**)&out));
  ((char*)out)[12] = 7;
  expect_msg("the host writes 3 bytes past a 10-byte allocation; tsrFree finds it", tsrFree(ctx, out),
             TSR_ERROR_MEMORY_FAULT, "overrun");
  MUST(tsrAlloc(ctx, 10, 0, (void**)&out));
  ((char*)out)[-1] = 7;
  expect_msg("the host writes 1 byte before it", tsrFree(ctx, out), TSR_ERROR_MEMORY_FAULT, "underrun");
}

static void check_freed(void) {
  float *x, *y;
  MUST(tsrAlloc(ctx, 64 * sizeof(float), 0, (void**)&x));
  MUST(tsrAlloc(ctx, 64 * sizeof(float), 0, (void**)&y));
  MUST(tsrFree(ctx, x));
  expect_msg("launch with freed memory", saxpy(x, y, 64), TSR_ERROR_MEMORY_FAULT, "use after free");
  float host[64];
  expect_msg("copy from freed memory", tsrMemcpy(ctx, host, x, 16, TSR_MEMCPY_DEVICE_TO_HOST), TSR_ERROR_MEMORY_FAULT,
             "use after free");
  expect_msg("free twice", tsrFree(ctx, x), TSR_ERROR_MEMORY_FAULT, "double free");

  /* Freed while a queued launch still uses it (the host's bug): the kernel touches poisoned pages, the fault
   * is the stream's error, and the stream skips its later work until the error is reported. */
  tsr_stream_t s;
  MUST(tsrCreateStream(ctx, NULL, &s));
  float* victim;
  MUST(tsrAlloc(ctx, 64 * sizeof(float), 0, (void**)&victim));
  int32_t ms = 200;
  void* sleep_args[] = {&ms};
  MUST(tsrLaunch(kernel(mod, "sleep_ms"), s, one, sleep_args, 1));
  expect("queue a launch on memory", overrun(s, victim, 64, 0), TSR_SUCCESS);
  float later[4] = {0};
  expect("queue another launch", overrun(s, later, 4, 0), TSR_SUCCESS);
  expect("free the memory before the launch ran", tsrFree(ctx, victim), TSR_SUCCESS);
  expect_msg("synchronize reports the fault", tsrStreamSynchronize(s), TSR_ERROR_MEMORY_FAULT, "use after free");
  check("  the stream skipped its later launch", later[0] == 0);
  expect("  reported once: the stream is clean again", tsrStreamQuery(s), TSR_SUCCESS);
  expect("  and runs work", overrun(s, later, 4, 0), TSR_SUCCESS);
  expect("  synchronize", tsrStreamSynchronize(s), TSR_SUCCESS);
  check("  (it ran)", later[0] == 1);
  expect_msg("a bounds fault on a stream is refused when queued", overrun(s, y, 65, 0), TSR_ERROR_MEMORY_FAULT,
             "past its end");

  /* The same with a copy: checked again when it runs. */
  float* source;
  MUST(tsrAlloc(ctx, 64 * sizeof(float), 0, (void**)&source));
  MUST(tsrLaunch(kernel(mod, "sleep_ms"), s, one, sleep_args, 1));
  expect("queue a copy from memory", tsrMemcpyAsync(ctx, host, source, sizeof host, TSR_MEMCPY_DEVICE_TO_HOST, s),
         TSR_SUCCESS);
  expect("free it before the copy ran", tsrFree(ctx, source), TSR_SUCCESS);
  expect_msg("synchronize reports the copy's use after free", tsrStreamSynchronize(s), TSR_ERROR_MEMORY_FAULT,
             "use after free");
  expect_msg("a copy of unchecked kind from freed memory", tsrMemcpy(ctx, host, source, 16, TSR_MEMCPY_DEFAULT),
             TSR_ERROR_MEMORY_FAULT, "use after free");
  float* small;
  MUST(tsrAlloc(ctx, 10 * sizeof(float), 0, (void**)&small));
  expect_msg("a copy of unchecked kind running past an allocation (into its guard page)",
             tsrMemcpy(ctx, host, small, sizeof host, TSR_MEMCPY_DEFAULT), TSR_ERROR_MEMORY_FAULT,
             "leaves the 40-byte allocation");
  expect_msg("  the host side of a copy too", tsrMemcpy(ctx, small, host, sizeof host, TSR_MEMCPY_HOST_TO_HOST),
             TSR_ERROR_MEMORY_FAULT, "destination range of 256 bytes");
  tsrFree(ctx, small);
  tsrDestroyStream(s);
  tsrFree(ctx, y);
}

static void check_env(const char* image_path) {
  setenv("TESSERA_DEBUG", "1", 1);
  tsr_context_t c;
  MUST(tsrCreateContext(&c));
  unsetenv("TESSERA_DEBUG");
  int debug = 0;
  expect("tsrContextIsDebug", tsrContextIsDebug(c, &debug), TSR_SUCCESS);
  check("  1 with TESSERA_DEBUG=1", debug == 1);
  tsr_module_t m = load_test_image(c, image_path);
  float* out;
  MUST(tsrAlloc(c, 100 * sizeof(float), 0, (void**)&out));
  int64_t extra = 3, n = 100;
  void* args[] = {&out, &extra, &n};
  expect("TESSERA_DEBUG=1 turns debug mode on", tsrLaunch(kernel(m, "overrun"), NULL, one, args, 3),
         TSR_ERROR_MEMORY_FAULT);
  MUST(tsrDestroyContext(c));

  MUST(tsrCreateContext(&c));
  m = load_test_image(c, image_path);
  MUST(tsrAlloc(c, 100 * sizeof(float), 0, (void**)&out));
  expect("without it, a kernel's writes past its extents are not caught", tsrLaunch(kernel(m, "overrun"), NULL, one,
         args, 3), TSR_SUCCESS);  /* 412 bytes: inside the pool's 448-byte block, so harmless here */
  n = 101;
  extra = 0;
  expect("but a launch's extents are checked against its allocations in every mode (host_bounds.c)",
         tsrLaunch(kernel(m, "overrun"), NULL, one, args, 3), TSR_ERROR_MEMORY_FAULT);
  MUST(tsrDestroyContext(c));
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s TEST_IMAGE\n", argv[0]);
    return 2;
  }
  tsr_context_options_t o;
  MUST(tsrContextOptionsInitialize(&o));
  o.flags = TSR_CONTEXT_DEBUG;
  MUST(tsrCreateContextWithOptions(&o, &ctx));
  mod = load_test_image(ctx, argv[1]);
  check_bounds();
  check_overruns();
  check_freed();
  check_env(argv[1]);
  o.flags = 0x80;
  tsr_context_t bad;
  expect("unknown context flags", tsrCreateContextWithOptions(&o, &bad), TSR_ERROR_INVALID_VALUE);
  expect("destroy the debug context", tsrDestroyContext(ctx), TSR_SUCCESS);
  return finish();
}
