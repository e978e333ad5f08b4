/* objects.h — the structs behind the opaque context, module, kernel and memory handles, and the internal
 * functions that cross files. Streams, events and graphs are in stream.h, event.h and graph.h. */
#ifndef TESSERA_SRC_OBJECTS_H_
#define TESSERA_SRC_OBJECTS_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "deferred.h"
#include "handles.h"
#include "memory.h"
#include "object.h"
#include "tessera/tessera.h"

struct tsr_context {
  tsr_object_t obj;
  pthread_mutex_t lock;    /* guards `objects` */
  tsr_object_t objects;    /* sentinel of the circular list of everything the context owns */
  const tsr_backend_t* backend;
  void* backend_state;
  bool debug;              /* TSR_CONTEXT_DEBUG */
  bool dying;              /* tsr_context_free is destroying what the context owns */
  char* crash_dir;         /* $TESSERA_CRASH_DIR when the context was created (crash.h), or NULL */
  uint32_t max_block_threads, max_smem_bytes;  /* the backend's limits, read once */
  tsr_memory_state_t memory;
  tsr_deferred_state_t deferred;  /* memory released after work queued on a stream (deferred.h) */
  _Atomic uint64_t next_stream_id;  /* stream ids start at 1; 0 is the NULL stream */
  uint32_t wait_timeout_ms;  /* the watchdog: the limit of waits that name none; 0: none (wait.h) */
};

/* A metadata property of a kernel; strings point into its module's strtab. */
typedef struct tsr_property {
  const char *key, *value;
} tsr_property_t;

struct tsr_kernel {
  uint32_t magic;  /* TSR_MAGIC_KERNEL while its module is loaded */
  struct tsr_module* module;
  const char *name, *entry_symbol, *target, *arch, *section;  /* into module->strtab */
  const void* entry;  /* the backend's handle of the entry */
  uint32_t block[3];  /* compiled block shape; 0 = any */
  uint32_t warp_size, smem_bytes, regs, flags;
  size_t arg_count;
  const tsr_arg_info_t* args;  /* into module->args */
  size_t prop_count;
  const tsr_property_t* props;  /* into module->props */
};

/* A kernel the image has for a target or arch this runtime does not run; kept for error messages. */
typedef struct tsr_foreign_kernel {
  const char *name, *target, *arch;  /* into module->strtab */
} tsr_foreign_kernel_t;

struct tsr_module {
  tsr_object_t obj;
  uint64_t serial;  /* unique in the process: tells a module from a later one at the same address */
  uint8_t* image;  /* a copy of the whole image: the crash capture's IR snapshot and repro bundle come from it */
  size_t image_size;
  char* strtab;    /* copy of .tessera.strtab: every string of the module points into it */
  tsr_arg_info_t* args;  /* argument descriptions of all runnable kernels */
  int64_t* dims;         /* copy of the dimension table */
  tsr_property_t* props;
  struct tsr_kernel* kernels;
  size_t kernel_count;
  tsr_foreign_kernel_t* foreign;
  size_t foreign_count;
  void** code;  /* one loaded object per distinct code section (the backend's) */
  size_t code_count;
  struct tsr_plan* plan;              /* the parsed `.tessera.plan` section, or NULL when the image has none */
  struct tsr_function* functions;     /* one per plan function, in the plan's arena */
  size_t function_count;
  char* plans_refused;  /* why the image's plans were not read (an older or newer plan version), else NULL */

  /* Launches running or queued on kernels of this module; unloading waits for them. */
  pthread_mutex_t busy_lock;
  pthread_cond_t idle;
  unsigned busy;
};

/* An `@function` of a module (function.c): its plan and signature. Lives in the module's plan arena. */
struct tsr_function {
  uint32_t magic;  /* TSR_MAGIC_FUNCTION while its module is loaded */
  struct tsr_module* module;
  const struct tsr_plan_function* plan;
  tsr_function_signature_t signature;
  uint32_t slot_count;  /* buffer slots its intermediates share */
  int64_t device_units; /* the device's compute units (a plan's DEVICE_UNITS); 0 until the first call */
  /* Resolved at load, so that a call looks nothing up by name (NULL where the name is not found: the call
   * then fails with tsrGetKernel's or the unresolved import's message) */
  struct tsr_kernel** kernels;       /* step i's kernel at kernels[kernel_at[i]], its prefer a's at + 1 + a */
  uint32_t* kernel_at;
  struct tsr_function** callees;     /* a call step's callee */
  uint32_t *slot_first, *slot_values;  /* slot b's tenants: slot_values[slot_first[b] .. slot_first[b + 1]) */
  uint8_t* value_size;               /* bytes of an element of each value */
  uint32_t* value_root;              /* the value whose storage each value is: itself, or an alias's `of`'s root */
  /* Where its collective steps overlap the calls' kernels: created by the first call that overlaps one, kept
   * for the later calls (function.c, comm_stream), released with the module. */
  tsr_stream_t comm_stream;
};

/* Reads the image's `.tessera.plan` section, if any, into m->plan and m->functions (TSR_ERROR_BAD_IMAGE naming
 * the function and member of a malformed one); tsr_module_free_functions releases them. */
struct tsr_image;
tsr_status_t tsr_module_load_functions(struct tsr_module* m, const struct tsr_image* img);
void tsr_module_free_functions(struct tsr_module* m);

/* The ABI draft's memory handle: owns one device allocation. */
struct tsr_memory {
  tsr_object_t obj;
  void* ptr;
  size_t bytes;
};

/* Takes a live kernel for a launch (holding off its module's unload): TSR_ERROR_INVALID_HANDLE otherwise,
 * with `function` in the message. With the registry already locked: tsr_kernel_acquire_locked. */
tsr_status_t tsr_kernel_acquire(tsr_kernel_t kernel, const char* function);
bool tsr_kernel_acquire_locked(tsr_kernel_t kernel, uint64_t module_serial);  /* serial 0: any */
void tsr_kernel_hold(tsr_kernel_t kernel);  /* one more hold of a kernel the caller holds already */
void tsr_kernel_release(tsr_kernel_t kernel);

/* Destruction by type (object.c dispatches here); each frees what its create made. */
void tsr_context_free(struct tsr_context* context);
void tsr_module_free(struct tsr_module* module);  /* waits for its launches first */
void tsr_module_retire_kernels_locked(struct tsr_module* module);
void tsr_memory_handle_free(struct tsr_memory* memory);

/* Checks that `handle` is a live context, for functions taking one; message names `function`. */
tsr_status_t tsr_check_context(tsr_context_t context, const char* function);

#endif  /* TESSERA_SRC_OBJECTS_H_ */
