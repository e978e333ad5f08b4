/* handles.h — the registry of live handles, so that NULL, stale and wrong-type handles are refused
 * without dereferencing freed memory.
 *
 * Every handle struct begins with a uint32_t magic naming its type. A handle is live when its address is in
 * the registry and its magic matches; destroy removes it from the registry, then clears the magic. */
#ifndef TESSERA_SRC_HANDLES_H_
#define TESSERA_SRC_HANDLES_H_

#include <stdbool.h>
#include <stdint.h>

#include "tessera/tessera.h"

#define TSR_MAGIC_CONTEXT 0x58544354u  /* "TCTX" */
#define TSR_MAGIC_MODULE 0x444f4d54u   /* "TMOD" */
#define TSR_MAGIC_KERNEL 0x4e524b54u   /* "TKRN" */

/* One global lock guards the registry. Lock order: registry, then a context's lock. */
void tsr_handles_lock(void);
void tsr_handles_unlock(void);

/* With the registry locked. */
bool tsr_handle_is_live_locked(const void* handle, uint32_t magic);
tsr_status_t tsr_handle_add_locked(const void* handle);  /* TSR_ERROR_OUT_OF_MEMORY */
void tsr_handle_remove_locked(const void* handle);

/* Locks, checks, unlocks: for objects whose lifetime the caller already guarantees against races. */
bool tsr_handle_is_live(const void* handle, uint32_t magic);

#endif  /* TESSERA_SRC_HANDLES_H_ */
