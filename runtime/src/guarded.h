/* guarded.h — debug-mode device allocations. Each gets a mapping of its own: an inaccessible guard page on
 * either side, the user's bytes ending as close to the upper guard page as the 64-byte alignment allows, and
 * canary bytes filling the slack on both sides. An overrun past the slack faults on a guard page; one inside
 * it is found by checking the canaries. Freed allocations are revoked (made inaccessible) rather than
 * unmapped, so a late access faults too. */
#ifndef TESSERA_SRC_GUARDED_H_
#define TESSERA_SRC_GUARDED_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/tessera.h"

typedef struct tsr_guarded {
  uintptr_t map;     /* the mapping, guard pages included */
  size_t map_bytes;
  uintptr_t user;    /* what tsrAlloc returns */
  size_t bytes;      /* as requested */
} tsr_guarded_t;

/* TSR_ERROR_OUT_OF_MEMORY (with a message) when the mapping cannot be made. */
tsr_status_t tsr_guarded_alloc(size_t bytes, tsr_guarded_t* out);

/* Whether a canary byte was overwritten; `*where` is then the first such byte's offset from `user` (negative:
 * before the start). */
bool tsr_guarded_damaged(const tsr_guarded_t* g, ptrdiff_t* where);

void tsr_guarded_revoke(const tsr_guarded_t* g);  /* every page inaccessible */
void tsr_guarded_unmap(const tsr_guarded_t* g);

#endif  /* TESSERA_SRC_GUARDED_H_ */
