/* memory.h — a context's memory: the table of allocations it knows (device, pinned host, registered host and
 * device), the device pool, and debug mode's guarded allocations and quarantine of freed ones. */
#ifndef TESSERA_SRC_MEMORY_H_
#define TESSERA_SRC_MEMORY_H_

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mem_pool.h"
#include "tessera/tessera.h"

typedef enum tsr_origin {
  TSR_ORIGIN_POOL = 0,        /* a pool block from the backend */
  TSR_ORIGIN_GUARDED = 1,     /* debug mode: a mapping with guard pages (guarded.h) */
  TSR_ORIGIN_PINNED = 2,      /* an mlock()ed mapping */
  TSR_ORIGIN_REGISTERED = 3   /* the caller's memory (kind: host or device registered) */
} tsr_origin_t;

typedef struct tsr_allocation {
  uintptr_t base;
  size_t bytes;        /* as requested */
  uint8_t kind;        /* tsr_memory_kind_t */
  uint8_t origin;      /* tsr_origin_t */
  bool locked;         /* mlock()ed: munlock before release */
  bool device_pinned;  /* pinned or registered through the backend's host entries (backend.h) */
  size_t block;        /* TSR_ORIGIN_POOL: the block size */
  uintptr_t map;       /* TSR_ORIGIN_GUARDED, TSR_ORIGIN_PINNED: the mapping */
  size_t map_bytes;
  uint64_t serial;     /* n-th allocation of the context, for messages */
} tsr_allocation_t;

typedef struct tsr_memory_state {
  pthread_mutex_t lock;
  tsr_allocation_t* table;  /* sorted by base; ranges never overlap */
  size_t count, capacity;
  struct tsr_quarantined* freed;  /* debug mode: ring of revoked allocations, oldest unmapped first */
  size_t freed_count, freed_first, freed_bytes;
  tsr_mem_pool_t pool;
  uint64_t serial;
  size_t in_use, peak;  /* bytes of tsrAlloc allocations, as requested */
  size_t held;          /* memory behind live device allocations: pool blocks, guarded mappings */
  size_t registered;
} tsr_memory_state_t;

struct tsr_context;

void tsr_memory_init(struct tsr_context* context);
/* Releases every allocation and the pool (registered memory is only forgotten). */
void tsr_memory_teardown(struct tsr_context* context);

/* tsrFree's work, for a live context; `function` names the caller in messages. */
tsr_status_t tsr_memory_free(struct tsr_context* context, void* ptr, const char* function);

/* The allocation holding `p`, if any. */
bool tsr_memory_lookup(struct tsr_context* context, const void* p, tsr_allocation_t* out);

/* Checks a copy (as tsrMemcpy documents); `function` names the API call in messages. */
tsr_status_t tsr_memory_check_copy(struct tsr_context* context, void* dst, const void* src, size_t bytes,
                                   tsr_memcpy_kind_t kind, const char* function);

/* Performs a checked copy: trace range, backend copy, metrics record. In debug mode the ranges are checked
 * again and copied under the memory lock, so that a tsrFree meanwhile is reported rather than faulted on.
 * Fails only where that check or the device does; `function` names the API call in messages. */
tsr_status_t tsr_memory_copy(struct tsr_context* context, void* dst, const void* src, size_t bytes,
                             tsr_memcpy_kind_t kind, const char* function);

/* Hands a checked copy to a device queue (backend.h), in a trace range; `queue` NULL is not allowed here. */
tsr_status_t tsr_memory_enqueue_copy(struct tsr_context* context, void* queue, void* dst, const void* src,
                                     size_t bytes, tsr_memcpy_kind_t kind);

/* "memcpy HtoD": a copy's name in trace ranges and metrics records. */
const char* tsr_memcpy_name(tsr_memcpy_kind_t kind);

/* One tensor argument of a launch: where it starts, the bytes its extents span, and its name for messages. */
typedef struct tsr_tensor_span {
  const void* p;
  uint64_t bytes;
  size_t index;
  const char* name;
} tsr_tensor_span_t;

/* TSR_ERROR_MEMORY_FAULT for the first span that starts in a known allocation and runs past it (every mode), or
 * lies in freed memory (debug mode), naming it and kernel `kernel`. Every launch checks its tensors here: one
 * lock for all of them, and a message formatted only on failure. */
tsr_status_t tsr_memory_check_tensors(struct tsr_context* context, const tsr_tensor_span_t* spans, size_t count,
                                      const char* kernel);
/* Debug mode. `what` names the tensor in messages ("kernel 'saxpy' (tensor argument 1, 'x')"). */
/* TSR_ERROR_MEMORY_FAULT when `p` lies in a guarded allocation whose canaries were overwritten. */
tsr_status_t tsr_memory_check_canaries(struct tsr_context* context, const void* p, const char* what);
/* Where `address` is, for a fault message: "12 bytes past the end of the 400-byte allocation #3 at 0x…". */
void tsr_memory_describe(struct tsr_context* context, uintptr_t address, char* out, size_t size);

#endif  /* TESSERA_SRC_MEMORY_H_ */
