/* backend.h — the table through which the generic runtime (contexts, modules, memory, streams, graphs,
 * telemetry) drives a device: the CPU backend (cpu_backend.c) and the CUDA backend (cuda_backend.c); another
 * GPU backend adds another table (docs/runtime.md, "Backends") and nothing above this line changes.
 *
 * The generic layer validates every request before it reaches a backend: entries below get checked values
 * and report only what the device itself refuses. */
#ifndef TESSERA_SRC_BACKEND_H_
#define TESSERA_SRC_BACKEND_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/tessera.h"

/* A validated launch, in the backend's terms. */
typedef struct tsr_backend_launch {
  const void* entry;  /* from code_entry */
  uint32_t grid[3], block[3], smem_bytes;
  int32_t priority;   /* scheduling hints */
  uint64_t affinity;
  void** args;        /* one pointer per argument (docs/image-format.md, "Launch arguments") */
  size_t nargs;       /* and their descriptions: backends that set arguments one by one by size */
  const tsr_arg_info_t* arg_info;  /* (Level Zero, OpenCL) size them with tsr_arg_value_size (launch.h) */
  const char* tensor_maps;  /* the kernel's `ptx.tensor_maps` property, or NULL (CUDA: cuda_tensor_map.h) */
  bool guarded;       /* debug mode: catch faults of the kernel instead of crashing */
} tsr_backend_launch_t;

/* A fault caught in a guarded launch, or a failed bounds check of generated code. */
typedef struct tsr_fault {
  uintptr_t address;   /* the address accessed */
  uint32_t block[3];   /* the block that faulted */
  int signal;          /* SIGSEGV, SIGBUS; 0 for a bounds check */
  const char* report;  /* a bounds check's text (tsr_cpu_block_ctx_t.fault), in the kernel's image; else NULL */
} tsr_fault_t;

typedef struct tsr_backend {
  const char* name;    /* what tsr_context_options_t.backend names */
  const char* target;  /* the image `target` of the kernels it runs */

  /* NULL when this machine can run the backend, else a sentence why not. */
  const char* (*unavailable)(void);
  /* Whether kernels compiled for `arch` (of its target) run here; the arch it runs, for properties. */
  bool (*runs_arch)(const char* arch);

  tsr_status_t (*create)(const tsr_context_options_t* options, void** out_state);
  void (*destroy)(void* state);  /* no launch may be in progress */
  tsr_status_t (*properties)(void* state, tsr_device_properties_t* out);
  tsr_status_t (*limit)(void* state, tsr_limit_t limit, int64_t* out);  /* TSR_ERROR_INVALID_VALUE if unknown */

  /* Code of one image section. Unloading waits for queued work that may still run its kernels. */
  tsr_status_t (*code_load)(void* state, const uint8_t* bytes, size_t size, const char* section, void** out_code);
  bool (*code_entry)(void* code, const char* symbol, const void** out_entry);
  void (*code_unload)(void* code);

  /* Device memory, TSR_ALLOC_ALIGNMENT-aligned. `host_memory`: device memory is host memory, so host
   * pointers work in kernels and debug mode may lay allocations out between guard pages itself. */
  bool host_memory;
  tsr_status_t (*mem_alloc)(void* state, size_t bytes, void** out);
  void (*mem_free)(void* state, void* ptr);
  /* Copies between validated ranges (memmove semantics) and returns when done; fails (with a message) only
   * where the device itself does. */
  tsr_status_t (*copy)(void* state, void* dst, const void* src, size_t bytes, tsr_memcpy_kind_t kind);

  /* Runs a validated launch to completion. TSR_ERROR_MEMORY_FAULT with `fault` filled when a guarded launch
   * faulted; other failures set a message. */
  tsr_status_t (*launch)(void* state, const tsr_backend_launch_t* launch, tsr_fault_t* fault);

  /* ---- Device queues (optional: all of the entries below are set, or none) ----------------------------
   * A device that runs work asynchronously offers queues. A stream of such a context is one of its queues:
   * the calling thread hands work straight to the device, and the generic layer keeps no executor thread
   * for it (streams of a backend without queues are executor threads calling `launch` and `copy`). A NULL
   * `queue` is the calling thread's synchronous queue (the NULL stream), where an entry allows it. */
  tsr_status_t (*queue_create)(void* state, int32_t priority, void** out_queue);
  void (*queue_destroy)(void* state, void* queue);  /* the generic layer has waited for its work */
  /* Hand a validated launch or copy to the device and return: argument values are taken now; failures
   * returned here are the device refusing the work, failures while it runs come from queue_wait and
   * queue_query. */
  tsr_status_t (*queue_launch)(void* state, void* queue, const tsr_backend_launch_t* launch);
  tsr_status_t (*queue_copy)(void* state, void* queue, void* dst, const void* src, size_t bytes,
                             tsr_memcpy_kind_t kind);
  /* Waits for the queue's work: TSR_SUCCESS, or a failure of that work with a message. */
  tsr_status_t (*queue_wait)(void* state, void* queue);
  /* TSR_SUCCESS when the queue's work is done, TSR_ERROR_NOT_READY while some is pending, or its failure. */
  tsr_status_t (*queue_query)(void* state, void* queue);

  /* Device events: markers recorded into queues, with completion times. */
  tsr_status_t (*event_create)(void* state, void** out_event);
  void (*event_destroy)(void* state, void* event);
  tsr_status_t (*event_record)(void* state, void* event, void* queue);  /* NULL queue: completes at once */
  tsr_status_t (*event_wait)(void* state, void* queue, void* event);    /* NULL queue: the host waits */
  tsr_status_t (*event_query)(void* state, void* event);  /* TSR_SUCCESS, TSR_ERROR_NOT_READY or a failure */
  tsr_status_t (*event_synchronize)(void* state, void* event);
  tsr_status_t (*event_elapsed)(void* state, void* start, void* end, float* out_ms);  /* both recorded */

  /* Device graphs: a recorded sequence of work, built once, replayed by one call. graph_begin returns a
   * queue that records instead of running; the generic layer gives it the graph's launches, copies, event
   * records and waits through the entries above, then graph_end turns them into an executable graph
   * (`out_exec` NULL: abandons them). */
  tsr_status_t (*graph_begin)(void* state, void** out_recorder);
  tsr_status_t (*graph_end)(void* state, void* recorder, void** out_exec);
  tsr_status_t (*graph_launch)(void* state, void* exec, void* queue);  /* NULL queue: returns when done */
  void (*graph_destroy)(void* state, void* exec);

  /* ---- Page-locked host memory (optional: all set, or none) -------------------------------------------
   * Host memory the device reads and writes directly, so that copies from and to it need no staging and
   * run asynchronously. Without these entries, pinned host memory is mlock()ed by the generic layer. */
  tsr_status_t (*host_alloc)(void* state, size_t bytes, void** out);
  void (*host_free)(void* state, void* ptr);
  tsr_status_t (*host_register)(void* state, void* ptr, size_t bytes);
  void (*host_unregister)(void* state, void* ptr);
  /* The device's address of memory from host_alloc or host_register. */
  tsr_status_t (*host_device_pointer)(void* state, void* host, void** out_device);
} tsr_backend_t;

/* The backend named `name` (NULL: $TESSERA_BACKEND, else "cpu"), or TSR_ERROR_UNSUPPORTED with a message
 * naming what is available. */
tsr_status_t tsr_backend_find(const char* name, const tsr_backend_t** out);

#endif  /* TESSERA_SRC_BACKEND_H_ */
