/* guarded.c — the guarded allocation layout of guarded.h:
 *
 *   map: [ guard page | head canary ... | user bytes | tail canary | guard page ]
 *                                       ^ user (64-aligned)        ^ user + round_up(bytes, 64)
 *
 * The head canary is at least 64 bytes. Canary bytes depend on their address, so that a kernel copying one
 * region's bytes over another's is still caught. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "guarded.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "errors.h"

static size_t page_size(void) {
  long p = sysconf(_SC_PAGESIZE);
  return p > 0 ? (size_t)p : 4096;
}

static uint8_t canary(uintptr_t address) { return (uint8_t)(0xA5u ^ (address * 0x9Du >> 3)); }

static void fill(uintptr_t begin, uintptr_t end) {
  for (uintptr_t a = begin; a < end; a++) *(uint8_t*)a = canary(a);
}

/* First damaged byte in [begin, end), or end. */
static uintptr_t first_damaged(uintptr_t begin, uintptr_t end) {
  for (uintptr_t a = begin; a < end; a++)
    if (*(const uint8_t*)a != canary(a)) return a;
  return end;
}

static size_t span_of(size_t bytes) { return bytes ? (bytes + 63) & ~(size_t)63 : 64; }

tsr_status_t tsr_guarded_alloc(size_t bytes, tsr_guarded_t* out) {
  size_t page = page_size(), span = span_of(bytes);
  if (bytes > SIZE_MAX / 2 || span < bytes)
    return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "tsrAlloc: cannot allocate %zu bytes", bytes);
  size_t body = (span + 64 + page - 1) / page * page;
  size_t map_bytes = body + 2 * page;
  void* map = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED)
    return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "tsrAlloc: cannot map %zu bytes for a guarded allocation", map_bytes);
  uintptr_t base = (uintptr_t)map;
  if (mprotect(map, page, PROT_NONE) || mprotect((void*)(base + page + body), page, PROT_NONE)) {
    munmap(map, map_bytes);
    return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "tsrAlloc: cannot protect the guard pages of an allocation");
  }
  *out = (tsr_guarded_t){base, map_bytes, base + page + body - span, bytes};
  fill(base + page, out->user);
  fill(out->user + bytes, out->user + span);
  return TSR_SUCCESS;
}

bool tsr_guarded_damaged(const tsr_guarded_t* g, ptrdiff_t* where) {
  uintptr_t head = g->map + page_size();
  uintptr_t bad = first_damaged(head, g->user);
  if (bad == g->user) {
    uintptr_t end = g->user + span_of(g->bytes);
    bad = first_damaged(g->user + g->bytes, end);
    if (bad == end) return false;
  }
  *where = (ptrdiff_t)(bad - g->user);
  return true;
}

void tsr_guarded_revoke(const tsr_guarded_t* g) {
  mprotect((void*)g->map, g->map_bytes, PROT_NONE);
}

void tsr_guarded_unmap(const tsr_guarded_t* g) { munmap((void*)g->map, g->map_bytes); }
