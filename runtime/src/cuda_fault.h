/* cuda_fault.h — the fault records of PTX modules compiled with bounds checks (passes/gpu_bounds_checks.py).
 *
 * Such a module defines two globals: `__tessera_fault`, u32[4] in device memory, zero until a check fails
 * ([0] 1 + the failed check's site, [1..3] its block: the first failure of the module, kept by an atomic
 * compare-and-swap), and `__tessera_fault_sites`, two NUL-terminated strings per site: the kernel's name and
 * the report ("tensor 'Out' accessed outside its extents at file.py:12"). A failed check skips its access, so
 * nothing outside a tensor is read or written; the runtime polls the records of the context's checked modules
 * each time it has waited for work and turns a set one into TSR_ERROR_MEMORY_FAULT, clearing it. A module
 * without the record was compiled without checks. */
#ifndef TESSERA_SRC_CUDA_FAULT_H_
#define TESSERA_SRC_CUDA_FAULT_H_

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "cuda_driver.h"
#include "tessera/tessera.h"

typedef struct tsr_cuda_checked {
  CUmodule module;
  CUdeviceptr record, sites;
  size_t sites_bytes;
  struct tsr_cuda_checked *prev, *next;
} tsr_cuda_checked_t;

/* The checked modules of one context. */
typedef struct tsr_cuda_checks {
  pthread_mutex_t lock;
  tsr_cuda_checked_t* head;
} tsr_cuda_checks_t;

/* A failed check, as read back. */
typedef struct tsr_cuda_failure {
  CUfunction function;  /* the kernel, NULL if the module does not name it */
  uint32_t block[3];
  char kernel[128];
  char report[400];
} tsr_cuda_failure_t;

/* Whether `module` (context current) was compiled with checks: *out (malloc'ed, for tsr_cuda_checks_add)
 * when it was, NULL when not. TSR_ERROR_BAD_IMAGE when its globals are not what the compiler writes. */
tsr_status_t tsr_cuda_checked_find(const tsr_cuda_driver_t* cu, CUmodule module, const char* section,
                                   tsr_cuda_checked_t** out);

void tsr_cuda_checks_init(tsr_cuda_checks_t* checks);
void tsr_cuda_checks_add(tsr_cuda_checks_t* checks, tsr_cuda_checked_t* module);
void tsr_cuda_checks_remove(tsr_cuda_checks_t* checks, tsr_cuda_checked_t* module);  /* and frees it */

/* After waiting for work (context current): whether a checked module recorded a failure, then cleared. The
 * records are read only where some module is checked: other contexts pay one unlocked test. */
bool tsr_cuda_checks_poll(tsr_cuda_checks_t* checks, const tsr_cuda_driver_t* cu, tsr_cuda_failure_t* out);

#endif  /* TESSERA_SRC_CUDA_FAULT_H_ */
