/* objects.h — the structs behind the opaque handles of tessera.h, and how they refer to each other. */
#ifndef TESSERA_SRC_OBJECTS_H_
#define TESSERA_SRC_OBJECTS_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu_code.h"
#include "cpu_pool.h"
#include "tessera/tessera.h"

/* One tsrAlloc allocation. */
typedef struct tsr_allocation {
  uintptr_t base;
  size_t bytes;  /* as requested */
} tsr_allocation_t;

struct tsr_context {
  uint32_t magic;                 /* TSR_MAGIC_CONTEXT while alive */
  pthread_mutex_t lock;           /* guards everything below */
  struct tsr_module* modules;     /* loaded modules, newest first */
  tsr_allocation_t* allocations;  /* sorted by base, for exact (free) and range (memcpy) lookups */
  size_t allocation_count, allocation_capacity;
  tsr_cpu_pool_t* pool;           /* started by the first launch */
};

struct tsr_kernel {
  uint32_t magic;  /* TSR_MAGIC_KERNEL while its module is loaded */
  struct tsr_module* module;
  const char* name;  /* into module->strtab */
  tsr_cpu_entry_t entry;
  uint32_t block[3];  /* compiled block shape; 0 = any */
  uint32_t warp_size, smem_bytes, regs, flags;
  size_t arg_count;
  const tsr_arg_info_t* args;  /* into module->args */
};

/* A kernel the image has for a target or arch this runtime does not run; kept for error messages. */
typedef struct tsr_foreign_kernel {
  const char *name, *target, *arch;  /* into module->strtab */
} tsr_foreign_kernel_t;

struct tsr_module {
  uint32_t magic;  /* TSR_MAGIC_MODULE while loaded */
  struct tsr_context* context;
  struct tsr_module* next;  /* in context->modules */
  char* strtab;             /* copy of .tessera.strtab: every string of the module points into it */
  tsr_arg_info_t* args;     /* argument descriptions of all runnable kernels */
  int64_t* dims;            /* copy of the dimension table */
  struct tsr_kernel* kernels;
  size_t kernel_count;
  tsr_foreign_kernel_t* foreign;
  size_t foreign_count;
  tsr_cpu_code_t** code;  /* one loaded object per distinct code section */
  size_t code_count;

  /* Launches in flight on kernels of this module; unloading waits for them. */
  pthread_mutex_t busy_lock;
  pthread_cond_t idle;
  unsigned busy;
};

/* Takes a live kernel for a launch (holding off its module's unload), or TSR_ERROR_INVALID_HANDLE. */
tsr_status_t tsr_kernel_acquire(tsr_kernel_t kernel);
void tsr_kernel_release(tsr_kernel_t kernel);

/* Module teardown in two steps, so that a context can retire all of its modules under the registry lock
 * and free them after releasing it. */
void tsr_module_retire_locked(struct tsr_module* module);  /* registry locked: handles of module and kernels */
void tsr_module_free(struct tsr_module* module);          /* waits for launches, then frees */

/* The context's worker pool, started on first use. */
tsr_status_t tsr_context_pool(struct tsr_context* context, tsr_cpu_pool_t** out);

/* Frees every allocation of a context being destroyed. */
void tsr_context_free_allocations(struct tsr_context* context);

#endif  /* TESSERA_SRC_OBJECTS_H_ */
