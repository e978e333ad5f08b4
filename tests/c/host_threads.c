/* host_threads.c — the thread-safety rules of docs/c-api.md: several host threads launch the same kernel on
 * one context while others allocate and free, and every result is exact.
 *
 *   host_threads IMAGE      IMAGE: the test image of make_image.py (kernel saxpy) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <tessera/tessera.h>

enum { THREADS = 6, LAUNCHES = 200, N = 3000 };

static tsr_context_t ctx;
static tsr_kernel_t saxpy;

/* Thread i adds i to its own y, LAUNCHES times; odd threads also allocate and free between launches. */
static void* work(void* arg) {
  intptr_t id = (intptr_t)arg;
  float* x = malloc(N * sizeof *x);
  float* y = malloc(N * sizeof *y);
  for (int i = 0; i < N; i++) x[i] = 1, y[i] = 0;
  float a = (float)id;
  int64_t n = N;
  void* args[] = {&a, &x, &y, &n};
  tsr_launch_t launch = {(N + 255) / 256, 1, 1, 256, 1, 1, 0};
  intptr_t bad = 0;
  for (int r = 0; r < LAUNCHES; r++) {
    bad += tsrLaunch(saxpy, NULL, launch, args, 4) != TSR_SUCCESS;
    if (id % 2) {
      void* p;
      bad += tsrAlloc(ctx, 4096, 0, &p) != TSR_SUCCESS;
      bad += tsrFree(ctx, p) != TSR_SUCCESS;
    }
  }
  for (int i = 0; i < N; i++) bad += y[i] != (float)(id * LAUNCHES);
  free(x);
  free(y);
  return (void*)bad;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s TEST_IMAGE\n", argv[0]);
    return 2;
  }
  FILE* f = fopen(argv[1], "rb");
  if (!f) return 2;
  static char image[1 << 20];
  size_t size = fread(image, 1, sizeof image, f);
  fclose(f);
  tsr_module_t mod;
  if (tsrCreateContext(&ctx) || tsrLoadModule(ctx, image, size, &mod) || tsrGetKernel(mod, "saxpy", &saxpy)) {
    fprintf(stderr, "setup failed: %s\n", tsrGetLastErrorMessage());
    return 2;
  }
  pthread_t threads[THREADS];
  for (intptr_t i = 0; i < THREADS; i++) pthread_create(&threads[i], NULL, work, (void*)i);
  intptr_t bad = 0;
  for (int i = 0; i < THREADS; i++) {
    void* result;
    pthread_join(threads[i], &result);
    bad += (intptr_t)result;
  }
  tsrDestroyContext(ctx);
  printf("%d threads x %d launches: %ld errors\n", THREADS, LAUNCHES, (long)bad);
  return bad != 0;
}
