/* cpu_pool.c — a fixed set of worker threads that split the blocks of a launch through an atomic counter.
 *
 * Blocks run only on the workers, never on the launching thread, so that kernels always get the stack size
 * set here (a host thread may have a small one). One run at a time: run_lock serializes launches. */
#include "cpu_pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "errors.h"

enum { MAX_THREADS = 1024 };
#define WORKER_STACK_BYTES (8u << 20)  /* room for per-block shared-memory arrays and spills */

struct tsr_cpu_pool {
  pthread_mutex_t run_lock;  /* held for a whole run */
  pthread_mutex_t lock;      /* guards the fields below */
  pthread_cond_t wake;       /* workers: a new generation (or stop) */
  pthread_cond_t done;       /* runner: busy reached 0 */
  uint64_t generation;
  bool stopping;
  unsigned busy;  /* workers not yet finished with the current generation */

  /* The current run, written under `lock` before the generation changes. */
  void (*task)(void*, uint64_t);
  void* job;
  uint64_t count;
  _Atomic uint64_t next;

  unsigned thread_count;
  pthread_t threads[];
};

static void drain(tsr_cpu_pool_t* pool) {
  for (;;) {
    uint64_t i = atomic_fetch_add_explicit(&pool->next, 1, memory_order_relaxed);
    if (i >= pool->count) return;
    pool->task(pool->job, i);
  }
}

static void* worker(void* arg) {
  tsr_cpu_pool_t* pool = arg;
  uint64_t seen = 0;
  pthread_mutex_lock(&pool->lock);
  for (;;) {
    while (!pool->stopping && pool->generation == seen) pthread_cond_wait(&pool->wake, &pool->lock);
    if (pool->stopping) break;
    seen = pool->generation;
    pthread_mutex_unlock(&pool->lock);
    drain(pool);
    pthread_mutex_lock(&pool->lock);
    if (--pool->busy == 0) pthread_cond_signal(&pool->done);
  }
  pthread_mutex_unlock(&pool->lock);
  return NULL;
}

static tsr_status_t thread_count(unsigned* out) {
  const char* env = getenv("TESSERA_NUM_THREADS");
  if (env && *env) {
    char* end;
    errno = 0;
    long n = strtol(env, &end, 10);
    if (errno || *end || n < 1 || n > MAX_THREADS)
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "TESSERA_NUM_THREADS='%s' is not an integer in [1, %d]", env,
                      MAX_THREADS);
    *out = (unsigned)n;
    return TSR_SUCCESS;
  }
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  *out = online < 1 ? 1 : online > MAX_THREADS ? MAX_THREADS : (unsigned)online;
  return TSR_SUCCESS;
}

tsr_status_t tsr_cpu_pool_create(tsr_cpu_pool_t** out) {
  unsigned n;
  tsr_status_t st = thread_count(&n);
  if (st) return st;
  tsr_cpu_pool_t* pool = calloc(1, sizeof *pool + n * sizeof(pthread_t));
  if (!pool) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory creating the CPU thread pool");
  pthread_mutex_init(&pool->run_lock, NULL);
  pthread_mutex_init(&pool->lock, NULL);
  pthread_cond_init(&pool->wake, NULL);
  pthread_cond_init(&pool->done, NULL);

  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, WORKER_STACK_BYTES);
  int err = 0;
  /* Fewer workers than asked is still correct; none is not. */
  while (pool->thread_count < n && !(err = pthread_create(&pool->threads[pool->thread_count], &attr, worker, pool)))
    pool->thread_count++;
  pthread_attr_destroy(&attr);
  if (pool->thread_count == 0) {
    tsr_cpu_pool_destroy(pool);
    return tsr_fail(TSR_ERROR_INIT_FAIL, "cannot start CPU worker threads (error %d)", err);
  }
  *out = pool;
  return TSR_SUCCESS;
}

void tsr_cpu_pool_run(tsr_cpu_pool_t* pool, uint64_t count, void (*task)(void*, uint64_t), void* job) {
  pthread_mutex_lock(&pool->run_lock);
  pthread_mutex_lock(&pool->lock);
  pool->task = task;
  pool->job = job;
  pool->count = count;
  atomic_store_explicit(&pool->next, 0, memory_order_relaxed);
  pool->busy = pool->thread_count;
  pool->generation++;
  pthread_cond_broadcast(&pool->wake);
  while (pool->busy) pthread_cond_wait(&pool->done, &pool->lock);
  pthread_mutex_unlock(&pool->lock);
  pthread_mutex_unlock(&pool->run_lock);
}

void tsr_cpu_pool_destroy(tsr_cpu_pool_t* pool) {
  if (!pool) return;
  pthread_mutex_lock(&pool->lock);
  pool->stopping = true;
  pthread_cond_broadcast(&pool->wake);
  pthread_mutex_unlock(&pool->lock);
  for (unsigned i = 0; i < pool->thread_count; i++) pthread_join(pool->threads[i], NULL);
  pthread_cond_destroy(&pool->done);
  pthread_cond_destroy(&pool->wake);
  pthread_mutex_destroy(&pool->lock);
  pthread_mutex_destroy(&pool->run_lock);
  free(pool);
}
