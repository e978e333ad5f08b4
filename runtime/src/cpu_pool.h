/* cpu_pool.h — the worker threads that run the blocks of CPU launches. */
#ifndef TESSERA_SRC_CPU_POOL_H_
#define TESSERA_SRC_CPU_POOL_H_

#include <stdint.h>

#include "tessera/tessera.h"

typedef struct tsr_cpu_pool tsr_cpu_pool_t;

/* Starts the workers: TESSERA_NUM_THREADS of them if set (a positive integer), else one per online CPU.
 * TSR_ERROR_INVALID_VALUE for a malformed TESSERA_NUM_THREADS, TSR_ERROR_INIT_FAIL if no thread starts. */
tsr_status_t tsr_cpu_pool_create(tsr_cpu_pool_t** out);

/* Calls task(job, i) for every i in [0, count) on the workers and returns when all calls have returned.
 * Calls from several threads run one after another. */
void tsr_cpu_pool_run(tsr_cpu_pool_t* pool, uint64_t count, void (*task)(void* job, uint64_t i), void* job);

/* Stops and joins the workers. No run may be in progress. */
void tsr_cpu_pool_destroy(tsr_cpu_pool_t* pool);

#endif  /* TESSERA_SRC_CPU_POOL_H_ */
