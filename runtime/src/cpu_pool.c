/* cpu_pool.c — a fixed set of workers serving a queue of jobs (cpu_pool.h).
 *
 * Blocks of a job are handed out through an atomic counter, so workers (and a helping caller) touch the pool
 * lock only to pick a job, and when they leave it. A worker stays in its job until the blocks run out, or until a new job arrives
 * (the pool's epoch changes): then it picks again, so that a high-priority launch does not wait for a long
 * low-priority one to drain. The last worker out of an exhausted job marks it finished. */
#define _GNU_SOURCE /* pthread_getattr_np */
#include "cpu_pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "errors.h"

enum { MAX_THREADS = 1024 };

typedef struct worker {
  struct tsr_cpu_pool* pool;
  unsigned index;
  pthread_t thread;
} worker_t;

struct tsr_cpu_pool {
  pthread_mutex_t lock;  /* guards the queue, the jobs' running/finished, stopping */
  pthread_cond_t wake;   /* workers: a job arrived, or stop */
  pthread_cond_t done;   /* submitters: a job finished */
  tsr_cpu_job_t *head, *tail;
  atomic_uint_fast64_t epoch;  /* bumped by every submission */
  bool stopping;
  uint64_t all_workers;  /* mask of worker indices below 64 */
  unsigned thread_count;
  worker_t workers[];
};

static bool allowed(const tsr_cpu_job_t* job, unsigned worker) {
  return job->affinity == 0 || (worker < 64 && (job->affinity >> worker & 1));
}

/* The job this worker should serve: eligible, unexhausted, highest priority, oldest first. Lock held. */
static tsr_cpu_job_t* pick(tsr_cpu_pool_t* pool, unsigned worker) {
  tsr_cpu_job_t* best = NULL;
  for (tsr_cpu_job_t* j = pool->head; j; j = j->link)
    if (atomic_load_explicit(&j->next, memory_order_relaxed) < j->count && allowed(j, worker) &&
        (!best || j->priority > best->priority))
      best = j;
  return best;
}

static void unlink_job(tsr_cpu_pool_t* pool, tsr_cpu_job_t* job) {
  tsr_cpu_job_t** link = &pool->head;
  tsr_cpu_job_t* prev = NULL;
  while (*link != job) {
    prev = *link;
    link = &(*link)->link;
  }
  *link = job->link;
  if (pool->tail == job) pool->tail = prev;
}

/* Leaves a job (lock held): the last one out of an exhausted job finishes it. */
static void leave(tsr_cpu_pool_t* pool, tsr_cpu_job_t* job) {
  if (--job->running == 0 && atomic_load(&job->next) >= job->count && !job->finished) {
    job->finished = true;
    unlink_job(pool, job);
    pthread_cond_broadcast(&pool->done);
  }
}

static void serve(tsr_cpu_pool_t* pool, tsr_cpu_job_t* job, uint_fast64_t epoch) {
  for (;;) {
    uint_fast64_t i = atomic_fetch_add_explicit(&job->next, 1, memory_order_relaxed);
    if (i >= job->count) return;
    if (!atomic_load_explicit(&job->cancelled, memory_order_relaxed)) job->task(job->arg, i);
    if (atomic_load_explicit(&pool->epoch, memory_order_relaxed) != epoch) return;
  }
}

static void* work(void* arg) {
  worker_t* self = arg;
  tsr_cpu_pool_t* pool = self->pool;
  pthread_mutex_lock(&pool->lock);
  for (;;) {
    tsr_cpu_job_t* job;
    while (!(job = pick(pool, self->index)) && !pool->stopping) pthread_cond_wait(&pool->wake, &pool->lock);
    if (!job) break;
    job->running++;
    uint_fast64_t epoch = atomic_load_explicit(&pool->epoch, memory_order_relaxed);
    pthread_mutex_unlock(&pool->lock);
    serve(pool, job, epoch);
    pthread_mutex_lock(&pool->lock);
    leave(pool, job);
  }
  pthread_mutex_unlock(&pool->lock);
  return NULL;
}

tsr_status_t tsr_cpu_thread_count(unsigned requested, unsigned* out) {
  if (requested) {
    if (requested > MAX_THREADS)
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "%u worker threads asked for; at most %d", requested, MAX_THREADS);
    *out = requested;
    return TSR_SUCCESS;
  }
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

tsr_status_t tsr_cpu_pool_create(unsigned n, tsr_cpu_pool_t** out) {
  tsr_cpu_pool_t* pool = calloc(1, sizeof *pool + n * sizeof(worker_t));
  if (!pool) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory creating the CPU thread pool");
  pthread_mutex_init(&pool->lock, NULL);
  pthread_cond_init(&pool->wake, NULL);
  pthread_cond_init(&pool->done, NULL);
  atomic_init(&pool->epoch, 0);

  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, TSR_CPU_STACK_BYTES);
  int err = 0;
  /* Fewer workers than asked is still correct; none is not. */
  while (pool->thread_count < n) {
    worker_t* w = &pool->workers[pool->thread_count];
    *w = (worker_t){pool, pool->thread_count, 0};
    if ((err = pthread_create(&w->thread, &attr, work, w))) break;
    pool->thread_count++;
  }
  pthread_attr_destroy(&attr);
  if (pool->thread_count == 0) {
    tsr_cpu_pool_destroy(pool);
    return tsr_fail(TSR_ERROR_INIT_FAIL, "cannot start CPU worker threads (error %d)", err);
  }
  pool->all_workers = pool->thread_count >= 64 ? ~0ull : (1ull << pool->thread_count) - 1;
  *out = pool;
  return TSR_SUCCESS;
}

void tsr_cpu_pool_run(tsr_cpu_pool_t* pool, tsr_cpu_job_t* job, bool caller_helps) {
  atomic_init(&job->next, 0);
  atomic_init(&job->cancelled, false);
  job->running = 0;
  job->finished = job->count == 0;
  job->link = NULL;
  if (job->finished) return;
  if (!(job->affinity & pool->all_workers)) job->affinity = 0;  /* names no worker: the hint is ignored */
  caller_helps = caller_helps && job->affinity == 0;
  if (caller_helps && job->count == 1) {  /* nothing to share: no worker needs to wake */
    atomic_store_explicit(&job->next, 1, memory_order_relaxed);
    job->task(job->arg, 0);
    job->finished = true;
    return;
  }
  pthread_mutex_lock(&pool->lock);
  if (pool->tail) pool->tail->link = job;
  else pool->head = job;
  pool->tail = job;
  atomic_fetch_add(&pool->epoch, 1);
  pthread_cond_broadcast(&pool->wake);
  if (caller_helps) {
    job->running++;
    pthread_mutex_unlock(&pool->lock);
    for (uint_fast64_t i; (i = atomic_fetch_add_explicit(&job->next, 1, memory_order_relaxed)) < job->count;)
      if (!atomic_load_explicit(&job->cancelled, memory_order_relaxed)) job->task(job->arg, i);
    pthread_mutex_lock(&pool->lock);
    leave(pool, job);
  }
  while (!job->finished) pthread_cond_wait(&pool->done, &pool->lock);
  pthread_mutex_unlock(&pool->lock);
}

bool tsr_cpu_thread_can_run_blocks(void) {
  static __thread int cached = -1;  /* -1: not asked yet on this thread */
  if (cached < 0) {
    pthread_attr_t attr;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      pthread_attr_getstacksize(&attr, &size);
      pthread_attr_destroy(&attr);
    }
    cached = size >= TSR_CPU_CALLER_STACK_BYTES;
  }
  return cached;
}

void tsr_cpu_job_cancel(tsr_cpu_job_t* job) { atomic_store(&job->cancelled, true); }

unsigned tsr_cpu_pool_threads(const tsr_cpu_pool_t* pool) { return pool->thread_count; }

void tsr_cpu_pool_destroy(tsr_cpu_pool_t* pool) {
  if (!pool) return;
  pthread_mutex_lock(&pool->lock);
  pool->stopping = true;
  pthread_cond_broadcast(&pool->wake);
  pthread_mutex_unlock(&pool->lock);
  for (unsigned i = 0; i < pool->thread_count; i++) pthread_join(pool->workers[i].thread, NULL);
  pthread_cond_destroy(&pool->done);
  pthread_cond_destroy(&pool->wake);
  pthread_mutex_destroy(&pool->lock);
  free(pool);
}
