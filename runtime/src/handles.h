/* handles.h — the registry of live handles, so that NULL, stale and wrong-type handles are refused
 * without dereferencing freed memory, and the reference counts of the objects behind them.
 *
 * Every handle struct begins with a uint32_t magic naming its type; every reference-counted one begins with a
 * whole tsr_object_t. A handle is live when its address is in the registry and its magic matches; retiring it
 * removes it from the registry, then clears the magic. */
#ifndef TESSERA_SRC_HANDLES_H_
#define TESSERA_SRC_HANDLES_H_

#include <stdbool.h>
#include <stdint.h>

#include "tessera/tessera.h"

#define TSR_MAGIC_CONTEXT 0x58544354u     /* "TCTX" */
#define TSR_MAGIC_MODULE 0x444f4d54u      /* "TMOD" */
#define TSR_MAGIC_KERNEL 0x4e524b54u      /* "TKRN" */
#define TSR_MAGIC_STREAM 0x52545354u      /* "TSTR" */
#define TSR_MAGIC_EVENT 0x54564554u       /* "TEVT" */
#define TSR_MAGIC_GRAPH 0x46524754u       /* "TGRF" */
#define TSR_MAGIC_GRAPH_EXEC 0x58454754u  /* "TGEX" */
#define TSR_MAGIC_MEMORY 0x4d454d54u      /* "TMEM" */
#define TSR_MAGIC_FUNCTION 0x4e554654u    /* "TFUN" */
#define TSR_MAGIC_COMM 0x4d4f4354u        /* "TCOM" */

/* The header of a reference-counted handle. */
typedef struct tsr_object {
  uint32_t magic;                  /* TSR_MAGIC_* while live, 0 once retired */
  uint32_t type;                   /* TSR_MAGIC_* for good: what to destroy it as */
  uint32_t refs;                   /* guarded by the registry lock */
  struct tsr_context* context;     /* the owner; the context itself for a context */
  struct tsr_object *prev, *next;  /* in the owner's list of objects (guarded by the owner's lock) */
} tsr_object_t;

/* One global lock guards the registry and every reference count. Lock order: registry, then a context's
 * locks, then an object's own lock. */
void tsr_handles_lock(void);
void tsr_handles_unlock(void);

/* With the registry locked. */
bool tsr_handle_is_live_locked(const void* handle, uint32_t magic);
tsr_status_t tsr_handle_add_locked(const void* handle);  /* TSR_ERROR_OUT_OF_MEMORY */
void tsr_handle_remove_locked(const void* handle);

/* Locks, checks, unlocks: for objects whose lifetime the caller already guarantees against races. */
bool tsr_handle_is_live(const void* handle, uint32_t magic);

#endif  /* TESSERA_SRC_HANDLES_H_ */
