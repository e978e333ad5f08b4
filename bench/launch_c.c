/* launch_c.c — the fixed cost of one tsrLaunch from C, with no Python: a 1-element saxpy (grid 1, block 32) on
 * the NULL stream, so the launch returns when the kernel is done. bench/launch_cpu.py builds and runs it.
 *
 *   launch_c IMAGE        (the backend: $TESSERA_BACKEND, else cpu)
 *
 * Prints the best per-call time of 30 rounds of 2,000 launches, after a warm-up, in microseconds. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tessera/tessera.h"

#define CHECK(call)                                                                  \
  do {                                                                               \
    if ((call)) {                                                                    \
      fprintf(stderr, "%s failed: %s\n", #call, tsrGetLastErrorMessage());           \
      return 1;                                                                      \
    }                                                                                \
  } while (0)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  if (argc != 2) return fprintf(stderr, "usage: %s IMAGE\n", argv[0]), 2;
  FILE* f = fopen(argv[1], "rb");
  if (!f) return perror(argv[1]), 1;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  void* image = malloc((size_t)size);
  if (!image || fread(image, 1, (size_t)size, f) != (size_t)size) return perror(argv[1]), 1;
  fclose(f);
  tsr_context_t ctx;
  tsr_module_t mod;
  tsr_kernel_t k;
  CHECK(tsrCreateContext(&ctx));
  CHECK(tsrLoadModule(ctx, image, (size_t)size, &mod));
  CHECK(tsrGetKernel(mod, "saxpy", &k));
  void *x, *out;
  CHECK(tsrAlloc(ctx, 64, TSR_ALLOC_DEFAULT, &x));
  CHECK(tsrAlloc(ctx, 64, TSR_ALLOC_DEFAULT, &out));
  float a = 1.5f;
  int64_t n = 1;
  void* args[] = {&a, &x, &x, &out, &n, &n, &n};  /* a, X, Y, Out, then their extents */
  tsr_launch_t l = {.grid_x = 1, .grid_y = 1, .grid_z = 1, .block_x = 32, .block_y = 1, .block_z = 1};
  size_t nargs;
  CHECK(tsrKernelGetArgCount(k, &nargs));
  if (nargs != sizeof args / sizeof *args) return fprintf(stderr, "saxpy takes %zu arguments\n", nargs), 1;
  for (int i = 0; i < 200; i++) CHECK(tsrLaunch(k, NULL, l, args, nargs));
  double best = 1e9;
  for (int r = 0; r < 30; r++) {
    double t0 = now();
    for (int i = 0; i < 2000; i++) CHECK(tsrLaunch(k, NULL, l, args, nargs));
    double t = (now() - t0) / 2000;
    if (t < best) best = t;
  }
  printf("tsrLaunch %.3f us\n", best * 1e6);
  CHECK(tsrDestroyContext(ctx));
  return 0;
}
