/* cuda_fault.c — the fault records of checked PTX modules (cuda_fault.h). */
#include "cuda_fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "gpu_fault.h"

enum { CUDA_ERROR_NOT_FOUND = 500 };

static const char RECORD[] = TSR_GPU_FAULT_RECORD;
static const char SITES[] = TSR_GPU_FAULT_SITES;

tsr_status_t tsr_cuda_checked_find(const tsr_cuda_driver_t* cu, CUmodule module, const char* section,
                                   tsr_cuda_checked_t** out) {
  *out = NULL;
  CUdeviceptr record = 0, sites = 0;
  size_t record_bytes = 0, sites_bytes = 0;
  CUresult r = cu->cuModuleGetGlobal(&record, &record_bytes, module, RECORD);
  if (r == CUDA_ERROR_NOT_FOUND) return TSR_SUCCESS;
  if (!r) r = cu->cuModuleGetGlobal(&sites, &sites_bytes, module, SITES);
  if (r || !tsr_gpu_fault_sizes_ok(record_bytes, sites_bytes))
    return tsr_fail(TSR_ERROR_BAD_IMAGE, "section %s: the bounds checks' globals %s (%zu bytes) and %s (%zu bytes) "
                    "are not what the compiler writes (16 bytes; 1 byte to 16 MiB)", section, RECORD, record_bytes,
                    SITES, sites_bytes);
  tsr_cuda_checked_t* m = calloc(1, sizeof *m);
  if (!m) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory loading section %s", section);
  *m = (tsr_cuda_checked_t){.module = module, .record = record, .sites = sites, .sites_bytes = sites_bytes};
  *out = m;
  return TSR_SUCCESS;
}

void tsr_cuda_checks_init(tsr_cuda_checks_t* checks) {
  pthread_mutex_init(&checks->lock, NULL);
  checks->head = NULL;
}

void tsr_cuda_checks_add(tsr_cuda_checks_t* checks, tsr_cuda_checked_t* m) {
  pthread_mutex_lock(&checks->lock);
  m->prev = NULL;
  m->next = checks->head;
  if (m->next) m->next->prev = m;
  __atomic_store_n(&checks->head, m, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&checks->lock);
}

void tsr_cuda_checks_remove(tsr_cuda_checks_t* checks, tsr_cuda_checked_t* m) {
  pthread_mutex_lock(&checks->lock);
  if (m->prev) m->prev->next = m->next;
  else __atomic_store_n(&checks->head, m->next, __ATOMIC_RELEASE);
  if (m->next) m->next->prev = m->prev;
  pthread_mutex_unlock(&checks->lock);
  free(m);
}

/* Synchronous copies on the calling thread's per-thread stream: the legacy NULL stream's would also wait for
 * every blocking stream's work. */
static CUresult read_device(const tsr_cuda_driver_t* cu, void* dst, CUdeviceptr src, size_t bytes) {
  CUresult r = cu->cuMemcpyDtoHAsync(dst, src, bytes, TSR_CU_STREAM_PER_THREAD);
  return r ? r : cu->cuStreamSynchronize(TSR_CU_STREAM_PER_THREAD);
}

static void describe(const tsr_cuda_driver_t* cu, const tsr_cuda_checked_t* m, uint32_t site,
                     tsr_cuda_failure_t* out) {
  char* table = malloc(m->sites_bytes);
  bool read = table && !read_device(cu, table, m->sites, m->sites_bytes);
  bool found = tsr_gpu_fault_site(read ? table : NULL, m->sites_bytes, site, out->kernel, sizeof out->kernel,
                                  out->report, sizeof out->report);
  free(table);
  out->function = NULL;
  if (found && cu->cuModuleGetFunction(&out->function, m->module, out->kernel)) out->function = NULL;
}

bool tsr_cuda_checks_poll(tsr_cuda_checks_t* checks, const tsr_cuda_driver_t* cu, tsr_cuda_failure_t* out) {
  if (!__atomic_load_n(&checks->head, __ATOMIC_ACQUIRE)) return false;
  bool failed = false;
  pthread_mutex_lock(&checks->lock);
  for (tsr_cuda_checked_t* m = checks->head; m && !failed; m = m->next) {
    uint32_t record[4];
    if (read_device(cu, record, m->record, sizeof record) || !record[0]) continue;
    static const uint32_t clear[4];
    cu->cuMemcpyHtoDAsync(m->record, clear, sizeof clear, TSR_CU_STREAM_PER_THREAD);
    cu->cuStreamSynchronize(TSR_CU_STREAM_PER_THREAD);
    memcpy(out->block, record + 1, sizeof out->block);
    describe(cu, m, record[0] - 1, out);
    failed = true;
  }
  pthread_mutex_unlock(&checks->lock);
  return failed;
}
