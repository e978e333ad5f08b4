/* cpu_pool.h — the worker threads that run the blocks of CPU launches. Several launches (from different
 * streams or host threads) may be in the pool at once; workers take blocks from the highest-priority one
 * they are allowed to run, so independent launches overlap. The launching thread runs blocks of its own
 * launch too when it can (a stack as large as a worker's, no affinity hint): a one-block launch then never
 * waits for a worker to wake up. */
#ifndef TESSERA_SRC_CPU_POOL_H_
#define TESSERA_SRC_CPU_POOL_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "tessera/tessera.h"

typedef struct tsr_cpu_pool tsr_cpu_pool_t;

/* The stack of the threads the runtime starts to run kernel blocks: room for per-block shared-memory arrays
 * and spills. A calling thread runs blocks too when its stack has half that (a main thread's 8 MiB stack
 * reports a page less): no kernel frame comes near 4 MiB. */
#define TSR_CPU_STACK_BYTES ((size_t)8 << 20)
#define TSR_CPU_CALLER_STACK_BYTES (TSR_CPU_STACK_BYTES / 2)

/* One launch's blocks: task(arg, i) for every i in [0, count). The submitter fills the first five fields;
 * the rest belong to the pool. */
typedef struct tsr_cpu_job {
  void (*task)(void* arg, uint64_t index);
  void* arg;
  uint64_t count;
  int32_t priority;   /* higher first among jobs waiting for workers */
  uint64_t affinity;  /* bit i: worker i may run blocks; 0 (or no existing worker named) = any */

  atomic_uint_fast64_t next;  /* next block to hand out */
  atomic_bool cancelled;      /* blocks not yet started are skipped */
  unsigned running;           /* workers inside the job (pool lock) */
  bool finished;              /* (pool lock) */
  struct tsr_cpu_job* link;   /* in the pool's queue (pool lock) */
} tsr_cpu_job_t;

/* The number of workers a pool gets: `requested` if not 0, else TESSERA_NUM_THREADS if set (an integer in
 * [1, 1024]; TSR_ERROR_INVALID_VALUE otherwise), else one per online CPU. */
tsr_status_t tsr_cpu_thread_count(unsigned requested, unsigned* out);

/* Starts `threads` workers (fewer if the system refuses some; TSR_ERROR_INIT_FAIL if none starts). */
tsr_status_t tsr_cpu_pool_create(unsigned threads, tsr_cpu_pool_t** out);

/* Runs the job's blocks and returns when every block has returned or been skipped. With `caller_helps` (the
 * calling thread's stack is at least TSR_CPU_CALLER_STACK_BYTES) and no affinity hint, the calling thread runs
 * blocks too, alongside the workers; otherwise only the workers do. Thread-safe. */
void tsr_cpu_pool_run(tsr_cpu_pool_t* pool, tsr_cpu_job_t* job, bool caller_helps);

/* Whether the calling thread's stack is at least TSR_CPU_CALLER_STACK_BYTES (cached per thread). */
bool tsr_cpu_thread_can_run_blocks(void);

/* From a task: skip the job's blocks that have not started yet. */
void tsr_cpu_job_cancel(tsr_cpu_job_t* job);

unsigned tsr_cpu_pool_threads(const tsr_cpu_pool_t* pool);

/* Stops and joins the workers. No run may be in progress. */
void tsr_cpu_pool_destroy(tsr_cpu_pool_t* pool);

#endif  /* TESSERA_SRC_CPU_POOL_H_ */
