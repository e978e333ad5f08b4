/* function_call_c.c — the host overhead of one tsrFunctionCall (bench/function_call_c.py builds and runs it).
 *
 *   function_call_c IMAGE FUNCTION LAUNCHES
 *
 * LAUNCHES (written by function_call_c.py from the function's plan) lists the function's values (their bytes),
 * which are its inputs and results, and each launch of the plan: kernel, grid, block, shared memory and its
 * arguments (a value, an f32 or an i64). Times, best of many after a warm-up, one tsrFunctionCall and the same
 * launches issued directly with tsrLaunch on buffers of our own, and prints both in microseconds; then the
 * same on a stream, per call of 100 queued back to back and one tsrStreamSynchronize (the executor thread
 * runs the kernels while the caller queues more: what a call that does not wait for its stream gains). */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tessera/tessera.h"

#define CHECK(call)                                                                                 \
  do {                                                                                              \
    tsr_status_t st_ = (call);                                                                      \
    if (st_) {                                                                                      \
      fprintf(stderr, "%s failed: %s\n", #call, tsrGetLastErrorMessage());                          \
      exit(1);                                                                                      \
    }                                                                                               \
  } while (0)

enum { MAX_VALUES = 256, MAX_LAUNCHES = 256, MAX_ARGS = 32 };

typedef struct {
  tsr_kernel_t kernel;
  tsr_launch_t shape;
  size_t nargs;
  void* args[MAX_ARGS];
  unsigned char slots[MAX_ARGS][8];
} launch_t;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void* values[MAX_VALUES];
static launch_t launches[MAX_LAUNCHES];

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s IMAGE FUNCTION LAUNCHES\n", argv[0]);
    return 2;
  }
  FILE* f = fopen(argv[1], "rb");
  if (!f) return perror(argv[1]), 1;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  void* image = malloc(size);
  if (fread(image, 1, size, f) != (size_t)size) return perror(argv[1]), 1;
  fclose(f);

  tsr_context_t ctx;
  tsr_module_t mod;
  tsr_function_t fn;
  tsr_function_signature_t sig;
  CHECK(tsrCreateContext(&ctx));
  CHECK(tsrLoadModule(ctx, image, (size_t)size, &mod));
  CHECK(tsrModuleGetFunction(mod, argv[2], &fn));
  CHECK(tsrFunctionGetSignature(fn, &sig));

  FILE* in = fopen(argv[3], "r");
  if (!in) return perror(argv[3]), 1;
  size_t nvalues, nin, nout, nlaunch;
  if (fscanf(in, "%zu", &nvalues) != 1 || nvalues > MAX_VALUES) return fprintf(stderr, "bad values\n"), 1;
  for (size_t i = 0; i < nvalues; i++) {
    size_t bytes;
    if (fscanf(in, "%zu", &bytes) != 1) return 1;
    values[i] = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
    memset(values[i], 0, (bytes + 63) / 64 * 64 + 64);
  }
  /* The call's tensors: value index, rank, extents (f32 everywhere in this benchmark's function). */
  DLTensor tensors[16];
  const DLTensor* ins[8];
  const DLTensor* outs[8];
  int64_t shapes[16][8];
  if (fscanf(in, "%zu %zu", &nin, &nout) != 2 || nin > 8 || nout > 8) return 1;
  for (size_t t = 0; t < nin + nout; t++) {
    size_t v, rank;
    if (fscanf(in, "%zu %zu", &v, &rank) != 2 || v >= nvalues || rank > 8) return 1;
    for (size_t d = 0; d < rank; d++)
      if (fscanf(in, "%lld", (long long*)&shapes[t][d]) != 1) return 1;
    tensors[t] = (DLTensor){.data = values[v], .device = {kDLCPU, 0}, .ndim = (int32_t)rank,
                            .dtype = {kDLFloat, 32, 1}, .shape = shapes[t]};
    if (t < nin) ins[t] = &tensors[t];
    else outs[t - nin] = &tensors[t];
  }
  for (size_t v = 0; v < nvalues; v++) {  /* inputs: small values, so that softmax and friends stay finite */
    float* x = values[v];
    for (size_t i = 0; i < 16; i++) x[i] = (float)(i % 7) * 0.01f;
  }
  if (fscanf(in, "%zu", &nlaunch) != 1 || nlaunch > MAX_LAUNCHES) return 1;
  for (size_t i = 0; i < nlaunch; i++) {
    launch_t* l = &launches[i];
    char name[256];
    unsigned g[3], b[3], smem;
    if (fscanf(in, "%255s %u %u %u %u %u %u %u %zu", name, &g[0], &g[1], &g[2], &b[0], &b[1], &b[2], &smem,
               &l->nargs) != 9 || l->nargs > MAX_ARGS)
      return fprintf(stderr, "bad launch %zu\n", i), 1;
    CHECK(tsrGetKernel(mod, name, &l->kernel));
    l->shape = (tsr_launch_t){.grid_x = g[0], .grid_y = g[1], .grid_z = g[2], .block_x = b[0], .block_y = b[1],
                              .block_z = b[2], .smem_bytes = smem};
    for (size_t a = 0; a < l->nargs; a++) {
      char kind;
      if (fscanf(in, " %c", &kind) != 1) return 1;
      if (kind == 'T') {
        size_t v;
        if (fscanf(in, "%zu", &v) != 1 || v >= nvalues) return 1;
        memcpy(l->slots[a], &values[v], sizeof(void*));
      } else if (kind == 'F') {
        float x;
        if (fscanf(in, "%f", &x) != 1) return 1;
        memcpy(l->slots[a], &x, sizeof x);
      } else {
        long long x;
        if (fscanf(in, "%lld", &x) != 1) return 1;
        memcpy(l->slots[a], &x, sizeof x);
      }
      l->args[a] = l->slots[a];
    }
  }
  fclose(in);

  enum { WARMUP = 50, ROUNDS = 30, REPS = 100 };
  double best_call = 1e9, best_direct = 1e9;
  for (int i = 0; i < WARMUP; i++) {
    CHECK(tsrFunctionCall(fn, NULL, ins, nin, outs, nout));
    for (size_t k = 0; k < nlaunch; k++)
      CHECK(tsrLaunch(launches[k].kernel, NULL, launches[k].shape, launches[k].args, launches[k].nargs));
  }
  for (int r = 0; r < ROUNDS; r++) {  /* alternating, so that a busy machine slows both alike */
    double t0 = now();
    for (int i = 0; i < REPS; i++) CHECK(tsrFunctionCall(fn, NULL, ins, nin, outs, nout));
    double t1 = now();
    for (int i = 0; i < REPS; i++)
      for (size_t k = 0; k < nlaunch; k++)
        CHECK(tsrLaunch(launches[k].kernel, NULL, launches[k].shape, launches[k].args, launches[k].nargs));
    double t2 = now();
    if ((t1 - t0) / REPS < best_call) best_call = (t1 - t0) / REPS;
    if ((t2 - t1) / REPS < best_direct) best_direct = (t2 - t1) / REPS;
  }
  tsr_stream_t s;
  CHECK(tsrCreateStream(ctx, NULL, &s));
  double stream_call = 1e9, stream_direct = 1e9;
  for (int r = 0; r < ROUNDS; r++) {
    double t0 = now();
    for (int i = 0; i < REPS; i++) CHECK(tsrFunctionCall(fn, s, ins, nin, outs, nout));
    CHECK(tsrStreamSynchronize(s));
    double t1 = now();
    for (int i = 0; i < REPS; i++)
      for (size_t k = 0; k < nlaunch; k++)
        CHECK(tsrLaunch(launches[k].kernel, s, launches[k].shape, launches[k].args, launches[k].nargs));
    CHECK(tsrStreamSynchronize(s));
    double t2 = now();
    if ((t1 - t0) / REPS < stream_call) stream_call = (t1 - t0) / REPS;
    if ((t2 - t1) / REPS < stream_direct) stream_direct = (t2 - t1) / REPS;
  }
  printf("steps %zu call_us %.3f direct_us %.3f stream_call_us %.3f stream_direct_us %.3f\n", nlaunch,
         best_call * 1e6, best_direct * 1e6, stream_call * 1e6, stream_direct * 1e6);
  CHECK(tsrDestroyContext(ctx));
  return 0;
}
