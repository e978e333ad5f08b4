/* host_threads.c — the thread-safety rules of docs/c-api.md: many host threads at once, each launching on its
 * own streams and on the NULL stream, ordering across threads' streams with events, replaying graphs,
 * allocating and freeing, synchronizing the whole context — and every result exact.
 *
 *   host_threads IMAGE      IMAGE: the test image of make_image.py */
#define _POSIX_C_SOURCE 200809L /* barriers */
#include <pthread.h>

#include "check.h"

enum { THREADS = 6, ROUNDS = 100, N = 3000 };

static tsr_context_t ctx;
static tsr_kernel_t saxpy, add_one;
static tsr_stream_t streams[THREADS];
static tsr_event_t round_done[THREADS];  /* recorded by thread i's stream after each round */
static pthread_barrier_t start;

static const tsr_launch_t grid = {(N + 255) / 256, 1, 1, 256, 1, 1, 0};

/* Thread i: each round adds 1 to its counters on its stream (directly and through a graph replay), waits for
 * its neighbour's stream to finish the same round, and adds i to y on the NULL stream; odd threads also
 * allocate, copy and free; thread 0 synchronizes the whole context now and then. */
static void* work(void* arg) {
  intptr_t id = (intptr_t)arg;
  tsr_stream_t s = streams[id];
  float* x = malloc(N * sizeof *x);
  float* y = calloc(N, sizeof *y);
  int64_t* counts = calloc(N, sizeof *counts);
  int64_t* replayed = calloc(N, sizeof *replayed);
  for (int i = 0; i < N; i++) x[i] = 1;
  float a = (float)id;
  int64_t n = N;
  void* saxpy_args[] = {&a, &x, &y, &n};
  void* count_args[] = {&counts, &n};
  void* replay_args[] = {&replayed, &n};
  intptr_t bad = 0;

  /* A graph of two add_one launches on `replayed`, captured on this thread's stream. */
  tsr_graph_t g;
  tsr_graph_exec_t exec;
  bad += tsrStreamBeginCapture(s) != TSR_SUCCESS;
  bad += tsrLaunch(add_one, s, grid, replay_args, 2) != TSR_SUCCESS;
  bad += tsrLaunch(add_one, s, grid, replay_args, 2) != TSR_SUCCESS;
  bad += tsrStreamEndCapture(s, &g) != TSR_SUCCESS;
  bad += tsrGraphInstantiate(g, &exec) != TSR_SUCCESS;
  bad += tsrDestroyGraph(g) != TSR_SUCCESS;

  pthread_barrier_wait(&start);
  for (int r = 0; r < ROUNDS; r++) {
    bad += tsrLaunch(add_one, s, grid, count_args, 2) != TSR_SUCCESS;
    bad += tsrGraphLaunch(exec, s) != TSR_SUCCESS;
    bad += tsrEventRecord(round_done[id], s) != TSR_SUCCESS;
    bad += tsrStreamWaitEvent(s, round_done[(id + 1) % THREADS]) != TSR_SUCCESS;
    bad += tsrLaunch(saxpy, NULL, grid, saxpy_args, 4) != TSR_SUCCESS;
    if (id % 2) {
      void* p;
      bad += tsrAlloc(ctx, 4096, 0, &p) != TSR_SUCCESS;
      bad += tsrMemcpyAsync(ctx, p, x, 4096, TSR_MEMCPY_HOST_TO_DEVICE, NULL) != TSR_SUCCESS;
      bad += tsrFree(ctx, p) != TSR_SUCCESS;
    }
    if (id == 0 && r % 10 == 0) bad += tsrSynchronize(ctx) != TSR_SUCCESS;
  }
  bad += tsrStreamSynchronize(s) != TSR_SUCCESS;
  for (int i = 0; i < N; i++)
    bad += y[i] != (float)(id * ROUNDS) || counts[i] != ROUNDS || replayed[i] != 2 * ROUNDS;
  bad += tsrDestroyGraphExec(exec) != TSR_SUCCESS;
  free(x);
  free(y);
  free(counts);
  free(replayed);
  return (void*)bad;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s TEST_IMAGE\n", argv[0]);
    return 2;
  }
  MUST(tsrCreateContext(&ctx));
  tsr_module_t mod = load_test_image(ctx, argv[1]);
  saxpy = kernel(mod, "saxpy");
  add_one = kernel(mod, "add_one");
  for (int i = 0; i < THREADS; i++) {
    MUST(tsrCreateStream(ctx, NULL, &streams[i]));
    MUST(tsrCreateEvent(ctx, &round_done[i]));
  }
  pthread_barrier_init(&start, NULL, THREADS);
  pthread_t threads[THREADS];
  for (intptr_t i = 0; i < THREADS; i++) pthread_create(&threads[i], NULL, work, (void*)i);
  intptr_t bad = 0;
  for (int i = 0; i < THREADS; i++) {
    void* result;
    pthread_join(threads[i], &result);
    bad += (intptr_t)result;
  }
  pthread_barrier_destroy(&start);
  MUST(tsrDestroyContext(ctx));
  printf("%d threads x %d rounds on %d streams and the NULL stream: %ld errors\n", THREADS, ROUNDS, THREADS,
         (long)bad);
  return bad != 0;
}
