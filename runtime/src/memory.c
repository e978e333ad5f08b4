/* memory.c — tsrAlloc and friends over a context's table of known allocations (memory.h).
 *
 * The table is sorted by base address, so that free can refuse foreign pointers, copies can check that a
 * device range lies inside one allocation, and debug mode can find the allocation a tensor or a faulting
 * address lies in — each a bisection. Registered memory (the caller's host memory, or another library's
 * device memory) is in the table too, so that copies and launches check it like the runtime's own. Device
 * allocations come from the pool (mem_pool.h) or, in debug mode, are guarded mappings (guarded.h) whose frees
 * go to a bounded quarantine of revoked pages. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "errors.h"
#include "guarded.h"
#include "metrics.h"
#include "objects.h"
#include "trace.h"

/* Freed guarded allocations stay revoked until this many newer ones, or this much memory, push them out. */
enum { QUARANTINE_ENTRIES = 256 };
#define QUARANTINE_BYTES ((size_t)64 << 20)

typedef struct tsr_quarantined {
  tsr_guarded_t guarded;
  uint64_t serial;
} tsr_quarantined_t;

static size_t page_size(void) {
  long p = sysconf(_SC_PAGESIZE);
  return p > 0 ? (size_t)p : 4096;
}

/* ---- the table (memory lock held) ------------------------------------------------------------------- */

/* Index of the last allocation with base <= p, or count when there is none. */
static size_t find_at_or_below(const tsr_memory_state_t* m, uintptr_t p) {
  size_t lo = 0, hi = m->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (m->table[mid].base <= p) lo = mid + 1;
    else hi = mid;
  }
  return lo ? lo - 1 : m->count;
}

/* Bytes of [base, end) an allocation covers: a 0-byte allocation still owns its first byte's address. */
static size_t extent(const tsr_allocation_t* a) { return a->bytes ? a->bytes : 1; }

/* The allocation holding p, or NULL. */
static tsr_allocation_t* holding(const tsr_memory_state_t* m, uintptr_t p) {
  size_t i = find_at_or_below(m, p);
  if (i == m->count) return NULL;
  tsr_allocation_t* a = &m->table[i];
  return p - a->base < extent(a) ? a : NULL;
}

/* Debug mode: the allocation `p` belongs to, counting the guard pages, canaries and slack of guarded
 * allocations as theirs — a pointer just past an allocation's end is no pointer into "unknown" memory. */
static tsr_allocation_t* owning(const tsr_memory_state_t* m, uintptr_t p) {
  tsr_allocation_t* a = holding(m, p);
  if (a) return a;
  size_t i = find_at_or_below(m, p);
  size_t candidates[2] = {i, i == m->count ? 0 : i + 1};  /* the one below (p past its end), the one above */
  for (int c = 0; c < 2; c++) {
    if (candidates[c] >= m->count) continue;
    tsr_allocation_t* g = &m->table[candidates[c]];
    if (g->origin == TSR_ORIGIN_GUARDED && p - g->map < g->map_bytes) return g;
  }
  return NULL;
}

static bool overlaps(const tsr_memory_state_t* m, uintptr_t base, size_t bytes) {
  size_t i = find_at_or_below(m, base);
  if (i < m->count && base - m->table[i].base < extent(&m->table[i])) return true;
  size_t next = i == m->count ? 0 : i + 1;
  return next < m->count && m->table[next].base - base < bytes;
}

static tsr_status_t insert(tsr_memory_state_t* m, tsr_allocation_t a) {
  if (m->count == m->capacity) {
    size_t capacity = m->capacity ? m->capacity * 2 : 64;
    tsr_allocation_t* grown = realloc(m->table, capacity * sizeof *grown);
    if (!grown) return TSR_ERROR_OUT_OF_MEMORY;
    m->table = grown;
    m->capacity = capacity;
  }
  size_t below = find_at_or_below(m, a.base);
  size_t i = below == m->count ? 0 : below + 1;
  memmove(m->table + i + 1, m->table + i, (m->count - i) * sizeof *m->table);
  a.serial = ++m->serial;
  m->table[i] = a;
  m->count++;
  if (a.origin == TSR_ORIGIN_REGISTERED) {
    m->registered += a.bytes;
  } else {
    m->in_use += a.bytes;
    if (m->in_use > m->peak) m->peak = m->in_use;
  }
  if (a.origin == TSR_ORIGIN_POOL) m->held += a.block;
  if (a.origin == TSR_ORIGIN_GUARDED) m->held += a.map_bytes;
  return TSR_SUCCESS;
}

static void erase(tsr_memory_state_t* m, tsr_allocation_t* a) {
  if (a->origin == TSR_ORIGIN_REGISTERED) m->registered -= a->bytes;
  else m->in_use -= a->bytes;
  if (a->origin == TSR_ORIGIN_POOL) m->held -= a->block;
  if (a->origin == TSR_ORIGIN_GUARDED) m->held -= a->map_bytes;
  size_t i = (size_t)(a - m->table);
  memmove(m->table + i, m->table + i + 1, (m->count - i - 1) * sizeof *m->table);
  m->count--;
}

static tsr_guarded_t guarded_of(const tsr_allocation_t* a) {
  return (tsr_guarded_t){a->map, a->map_bytes, a->base, a->bytes};
}

/* ---- the quarantine (memory lock held) -------------------------------------------------------------- */

static const tsr_quarantined_t* quarantined(const tsr_memory_state_t* m, uintptr_t p) {
  for (size_t i = 0; i < m->freed_count; i++) {
    const tsr_quarantined_t* q = &m->freed[(m->freed_first + i) % QUARANTINE_ENTRIES];
    if (p >= q->guarded.map && p - q->guarded.map < q->guarded.map_bytes) return q;
  }
  return NULL;
}

static void evict_oldest(tsr_memory_state_t* m) {
  tsr_quarantined_t* q = &m->freed[m->freed_first];
  tsr_guarded_unmap(&q->guarded);
  m->freed_bytes -= q->guarded.map_bytes;
  m->freed_first = (m->freed_first + 1) % QUARANTINE_ENTRIES;
  m->freed_count--;
}

static void quarantine(tsr_memory_state_t* m, const tsr_allocation_t* a) {
  tsr_guarded_t g = guarded_of(a);
  if (!m->freed) m->freed = calloc(QUARANTINE_ENTRIES, sizeof *m->freed);
  if (!m->freed) {  /* no room to remember it: unmap at once, losing only the use-after-free check */
    tsr_guarded_unmap(&g);
    return;
  }
  tsr_guarded_revoke(&g);
  while (m->freed_count && (m->freed_count == QUARANTINE_ENTRIES || m->freed_bytes + g.map_bytes > QUARANTINE_BYTES))
    evict_oldest(m);
  m->freed[(m->freed_first + m->freed_count++) % QUARANTINE_ENTRIES] = (tsr_quarantined_t){g, a->serial};
  m->freed_bytes += g.map_bytes;
}

/* ---- allocation ------------------------------------------------------------------------------------- */

static void backend_free(void* context, void* p) {
  struct tsr_context* ctx = context;
  ctx->backend->mem_free(ctx->backend_state, p);
}

/* A pool block of `block` bytes: cached, else new from the backend, retrying once after trimming. */
static tsr_status_t pool_block(struct tsr_context* ctx, size_t block, void** out) {
  tsr_memory_state_t* m = &ctx->memory;
  pthread_mutex_lock(&m->lock);
  bool cached = tsr_pool_take(&m->pool, block, out);
  pthread_mutex_unlock(&m->lock);
  if (cached) return TSR_SUCCESS;
  /* blocks released after stream work that has finished since: cheaper than the backend's allocation */
  if (atomic_load_explicit(&ctx->deferred.count, memory_order_relaxed)) {
    tsr_deferred_poll(ctx);
    pthread_mutex_lock(&m->lock);
    cached = tsr_pool_take(&m->pool, block, out);
    pthread_mutex_unlock(&m->lock);
    if (cached) return TSR_SUCCESS;
  }
  if (ctx->backend->mem_alloc(ctx->backend_state, block, out) == TSR_SUCCESS) return TSR_SUCCESS;
  tsrTrimMemory(ctx);
  return ctx->backend->mem_alloc(ctx->backend_state, block, out);
}

static tsr_status_t alloc_pinned(struct tsr_context* ctx, size_t bytes, tsr_allocation_t* a) {
  if (ctx->backend->host_alloc) {  /* page-locked by the device's driver, which then copies from it directly */
    void* p;
    tsr_status_t st = ctx->backend->host_alloc(ctx->backend_state, bytes, &p);
    if (st) return st;
    *a = (tsr_allocation_t){.base = (uintptr_t)p, .bytes = bytes, .kind = TSR_MEMORY_HOST_PINNED,
                            .origin = TSR_ORIGIN_PINNED, .device_pinned = true};
    return TSR_SUCCESS;
  }
  size_t page = page_size();
  size_t map_bytes = bytes ? (bytes + page - 1) / page * page : page;
  if (map_bytes < bytes) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "tsrAlloc: cannot allocate %zu bytes", bytes);
  void* map = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED)
    return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "tsrAlloc: cannot map %zu bytes of pinned host memory", bytes);
  if (mlock(map, map_bytes) != 0) {
    int err = errno;
    struct rlimit limit = {0, 0};
    getrlimit(RLIMIT_MEMLOCK, &limit);
    munmap(map, map_bytes);
    return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "tsrAlloc: cannot pin %zu bytes of host memory (mlock: %s; "
                    "RLIMIT_MEMLOCK is %llu bytes)", map_bytes, strerror(err), (unsigned long long)limit.rlim_cur);
  }
  *a = (tsr_allocation_t){.base = (uintptr_t)map, .bytes = bytes, .kind = TSR_MEMORY_HOST_PINNED,
                          .origin = TSR_ORIGIN_PINNED, .locked = true, .map = (uintptr_t)map, .map_bytes = map_bytes};
  return TSR_SUCCESS;
}

/* Gives an allocation's memory back (table entry already erased; memory lock held for the pool). */
static void release(struct tsr_context* ctx, const tsr_allocation_t* a) {
  tsr_memory_state_t* m = &ctx->memory;
  switch ((tsr_origin_t)a->origin) {
    case TSR_ORIGIN_POOL:
      if (!tsr_pool_put(&m->pool, (void*)a->base, a->block)) backend_free(ctx, (void*)a->base);
      break;
    case TSR_ORIGIN_GUARDED: quarantine(m, a); break;
    case TSR_ORIGIN_PINNED:
      if (a->device_pinned) {
        ctx->backend->host_free(ctx->backend_state, (void*)a->base);
        break;
      }
      munlock((void*)a->map, a->map_bytes);
      munmap((void*)a->map, a->map_bytes);
      break;
    case TSR_ORIGIN_REGISTERED:
      if (a->device_pinned) ctx->backend->host_unregister(ctx->backend_state, (void*)a->base);
      else if (a->locked) munlock((void*)a->base, a->bytes);
      break;
  }
}

/* Gives back the memory of an allocation that never made it into the table. */
static void discard(struct tsr_context* ctx, const tsr_allocation_t* a) {
  if (a->origin == TSR_ORIGIN_POOL) backend_free(ctx, (void*)a->base);
  else if (a->origin == TSR_ORIGIN_GUARDED) tsr_guarded_unmap(&(tsr_guarded_t){a->map, a->map_bytes, a->base, 0});
  else if (a->origin == TSR_ORIGIN_PINNED) release(ctx, a);
}

tsr_status_t tsrAlloc(tsr_context_t ctx, size_t bytes, uint32_t flags, void** out_ptr) {
  tsr_status_t st = tsr_check_context(ctx, __func__);
  if (st) return st;
  if (!out_ptr) return tsr_fail_null_output(__func__);
  if (flags & ~TSR_ALLOC_HOST_PINNED) return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrAlloc: unknown flags 0x%x", flags);

  tsr_allocation_t a;
  if (flags & TSR_ALLOC_HOST_PINNED) {
    if ((st = alloc_pinned(ctx, bytes, &a))) return st;
  } else if (ctx->debug && ctx->backend->host_memory) {
    tsr_guarded_t g;
    if ((st = tsr_guarded_alloc(bytes, &g))) return st;
    a = (tsr_allocation_t){.base = g.user, .bytes = bytes, .kind = TSR_MEMORY_DEVICE, .origin = TSR_ORIGIN_GUARDED,
                           .map = g.map, .map_bytes = g.map_bytes};
  } else {
    size_t block = tsr_pool_block_size(bytes);
    void* p;
    if (!block) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "tsrAlloc: cannot allocate %zu bytes", bytes);
    if ((st = pool_block(ctx, block, &p))) return st;  /* with the backend's message: the device's own words */
    a = (tsr_allocation_t){.base = (uintptr_t)p, .bytes = bytes, .kind = TSR_MEMORY_DEVICE,
                           .origin = TSR_ORIGIN_POOL, .block = block};
  }
  tsr_memory_state_t* m = &ctx->memory;
  pthread_mutex_lock(&m->lock);
  st = insert(m, a);
  pthread_mutex_unlock(&m->lock);
  if (st) {
    discard(ctx, &a);
    return tsr_fail(st, "tsrAlloc: out of memory tracking the allocation");
  }
  *out_ptr = (void*)a.base;
  return TSR_SUCCESS;
}

tsr_status_t tsrFree(tsr_context_t ctx, void* ptr) {
  tsr_status_t st = tsr_check_context(ctx, __func__);
  return st ? st : tsr_memory_free(ctx, ptr, __func__);
}

tsr_status_t tsr_memory_free(struct tsr_context* ctx, void* ptr, const char* function) {
  tsr_memory_state_t* m = &ctx->memory;
  pthread_mutex_lock(&m->lock);
  tsr_allocation_t* a = ptr ? holding(m, (uintptr_t)ptr) : NULL;
  if (!a || a->base != (uintptr_t)ptr || a->origin == TSR_ORIGIN_REGISTERED) {
    const tsr_quarantined_t* q = ptr && !a ? quarantined(m, (uintptr_t)ptr) : NULL;
    uint64_t serial = q ? q->serial : 0;
    bool registered = a && a->origin == TSR_ORIGIN_REGISTERED;
    bool device = registered && a->kind == TSR_MEMORY_DEVICE_REGISTERED;
    pthread_mutex_unlock(&m->lock);
    if (serial)
      return tsr_fail(TSR_ERROR_MEMORY_FAULT, "%s: %p lies in allocation #%" PRIu64 ", which was already freed "
                      "(double free)", function, ptr, serial);
    if (registered)
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: %p is registered %s memory: use %s", function, ptr,
                      device ? "device" : "host", device ? "tsrDeviceUnregister" : "tsrHostUnregister");
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: %p was not allocated by tsrAlloc on this context (or was "
                    "already freed)", function, ptr);
  }
  tsr_allocation_t freed = *a;
  ptrdiff_t damaged = 0;
  tsr_guarded_t g = guarded_of(&freed);
  bool corrupt = freed.origin == TSR_ORIGIN_GUARDED && tsr_guarded_damaged(&g, &damaged);
  erase(m, a);
  release(ctx, &freed);
  pthread_mutex_unlock(&m->lock);
  if (corrupt)
    return tsr_fail(TSR_ERROR_MEMORY_FAULT, "%s: the canary at offset %td of the %zu-byte allocation #%" PRIu64
                    " at %p was overwritten (%s); the allocation was freed", function, damaged, freed.bytes,
                    freed.serial, ptr, damaged < 0 ? "an underrun" : "an overrun");
  return TSR_SUCCESS;
}

/* ---- host memory ------------------------------------------------------------------------------------ */

tsr_status_t tsrHostRegister(tsr_context_t ctx, void* ptr, size_t bytes, uint32_t flags) {
  tsr_status_t st = tsr_check_context(ctx, __func__);
  if (st) return st;
  if (flags & ~TSR_HOST_REGISTER_PINNED)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrHostRegister: unknown flags 0x%x", flags);
  if (!ptr || !bytes || (uintptr_t)ptr > UINTPTR_MAX - bytes)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrHostRegister: [%p, +%zu) is not a memory range", ptr, bytes);
  bool pin = flags & TSR_HOST_REGISTER_PINNED;
  bool by_device = pin && ctx->backend->host_register;  /* the device's driver pins it, and maps it */
  bool lock = pin && !by_device;
  tsr_memory_state_t* m = &ctx->memory;
  pthread_mutex_lock(&m->lock);
  bool clash = overlaps(m, (uintptr_t)ptr, bytes);
  pthread_mutex_unlock(&m->lock);
  if (clash)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrHostRegister: [%p, +%zu) overlaps memory the context already knows",
                    ptr, bytes);
  if (by_device && (st = ctx->backend->host_register(ctx->backend_state, ptr, bytes))) return st;
  if (lock && mlock(ptr, bytes) != 0)
    return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "tsrHostRegister: cannot pin %zu bytes at %p (mlock: %s)", bytes, ptr,
                    strerror(errno));
  pthread_mutex_lock(&m->lock);
  clash = overlaps(m, (uintptr_t)ptr, bytes);  /* again: another thread may have registered it meanwhile */
  if (!clash)
    st = insert(m, (tsr_allocation_t){.base = (uintptr_t)ptr, .bytes = bytes, .kind = TSR_MEMORY_HOST_REGISTERED,
                                      .origin = TSR_ORIGIN_REGISTERED, .locked = lock, .device_pinned = by_device});
  pthread_mutex_unlock(&m->lock);
  if (clash || st) {
    if (by_device) ctx->backend->host_unregister(ctx->backend_state, ptr);
    if (lock) munlock(ptr, bytes);
    return clash ? tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrHostRegister: [%p, +%zu) overlaps memory the context "
                            "already knows", ptr, bytes)
                 : tsr_fail(st, "tsrHostRegister: out of memory");
  }
  return TSR_SUCCESS;
}

tsr_status_t tsrHostUnregister(tsr_context_t ctx, void* ptr) {
  tsr_status_t st = tsr_check_context(ctx, __func__);
  if (st) return st;
  tsr_memory_state_t* m = &ctx->memory;
  pthread_mutex_lock(&m->lock);
  tsr_allocation_t* a = ptr ? holding(m, (uintptr_t)ptr) : NULL;
  bool found = a && a->base == (uintptr_t)ptr && a->kind == TSR_MEMORY_HOST_REGISTERED;
  if (found) {
    tsr_allocation_t gone = *a;
    erase(m, a);
    release(ctx, &gone);
  }
  pthread_mutex_unlock(&m->lock);
  if (!found)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrHostUnregister: %p is not the start of memory registered with "
                    "tsrHostRegister on this context", ptr);
  return TSR_SUCCESS;
}

/* ---- foreign device memory ---------------------------------------------------------------------------- */

tsr_status_t tsrDeviceRegister(tsr_context_t ctx, void* ptr, size_t bytes, uint32_t flags) {
  tsr_status_t st = tsr_check_context(ctx, __func__);
  if (st) return st;
  if (flags != TSR_DEVICE_REGISTER_DEFAULT)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrDeviceRegister: unknown flags 0x%x", flags);
  if (!ptr || !bytes || (uintptr_t)ptr > UINTPTR_MAX - bytes)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrDeviceRegister: [%p, +%zu) is not a memory range", ptr, bytes);
  /* Bookkeeping only (the memory is the caller's, and already the device's): the check and the insert under one
   * lock, so that of two threads registering overlapping ranges one fails. */
  tsr_memory_state_t* m = &ctx->memory;
  pthread_mutex_lock(&m->lock);
  bool clash = overlaps(m, (uintptr_t)ptr, bytes);
  if (!clash)
    st = insert(m, (tsr_allocation_t){.base = (uintptr_t)ptr, .bytes = bytes, .kind = TSR_MEMORY_DEVICE_REGISTERED,
                                      .origin = TSR_ORIGIN_REGISTERED});
  pthread_mutex_unlock(&m->lock);
  if (clash)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrDeviceRegister: [%p, +%zu) overlaps memory the context already "
                    "knows", ptr, bytes);
  return st ? tsr_fail(st, "tsrDeviceRegister: out of memory") : TSR_SUCCESS;
}

tsr_status_t tsrDeviceUnregister(tsr_context_t ctx, void* ptr) {
  tsr_status_t st = tsr_check_context(ctx, __func__);
  if (st) return st;
  tsr_memory_state_t* m = &ctx->memory;
  pthread_mutex_lock(&m->lock);
  tsr_allocation_t* a = ptr ? holding(m, (uintptr_t)ptr) : NULL;
  bool found = a && a->base == (uintptr_t)ptr && a->kind == TSR_MEMORY_DEVICE_REGISTERED;
  if (found) erase(m, a);  /* nothing to release: the runtime neither pinned nor mapped it */
  pthread_mutex_unlock(&m->lock);
  if (!found)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrDeviceUnregister: %p is not the start of memory registered with "
                    "tsrDeviceRegister on this context", ptr);
  return TSR_SUCCESS;
}

tsr_status_t tsrHostGetDevicePointer(tsr_context_t ctx, void* host_ptr, void** out_device_ptr) {
  tsr_status_t st = tsr_check_context(ctx, __func__);
  if (st) return st;
  if (!out_device_ptr) return tsr_fail_null_output(__func__);
  if (!ctx->backend->host_memory && !ctx->backend->host_device_pointer)
    return tsr_fail(TSR_ERROR_UNSUPPORTED, "tsrHostGetDevicePointer: the %s backend cannot map host memory into the "
                    "device's address space", ctx->backend->name);
  tsr_allocation_t a;
  bool host = tsr_memory_lookup(ctx, host_ptr, &a) &&
              (a.kind == TSR_MEMORY_HOST_PINNED || a.kind == TSR_MEMORY_HOST_REGISTERED);
  if (!host)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrHostGetDevicePointer: %p is not pinned or registered host memory "
                    "of this context", host_ptr);
  if (ctx->backend->host_memory) {
    *out_device_ptr = host_ptr;  /* the device's address space is the host's */
    return TSR_SUCCESS;
  }
  if (!a.device_pinned)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrHostGetDevicePointer: %p was registered without "
                    "TSR_HOST_REGISTER_PINNED, so the %s device cannot reach it", host_ptr, ctx->backend->name);
  return ctx->backend->host_device_pointer(ctx->backend_state, host_ptr, out_device_ptr);
}

tsr_status_t tsrPointerGetInfo(tsr_context_t ctx, const void* ptr, tsr_pointer_info_t* out_info) {
  tsr_status_t st = tsr_check_context(ctx, __func__);
  if (st) return st;
  if (!out_info) return tsr_fail_null_output(__func__);
  tsr_allocation_t a;
  if (tsr_memory_lookup(ctx, ptr, &a)) *out_info = (tsr_pointer_info_t){a.kind, (void*)a.base, a.bytes};
  else *out_info = (tsr_pointer_info_t){TSR_MEMORY_UNKNOWN, NULL, 0};
  return TSR_SUCCESS;
}

tsr_status_t tsrGetMemoryStats(tsr_context_t ctx, tsr_memory_stats_t* out) {
  tsr_status_t st = tsr_check_context(ctx, __func__);
  if (st) return st;
  if (!out) return tsr_fail_null_output(__func__);
  tsr_memory_state_t* m = &ctx->memory;
  pthread_mutex_lock(&m->lock);
  size_t registered_count = 0;
  for (size_t i = 0; i < m->count; i++) registered_count += m->table[i].origin == TSR_ORIGIN_REGISTERED;
  *out = (tsr_memory_stats_t){.allocations = m->count - registered_count, .bytes_in_use = m->in_use,
                              .bytes_reserved = m->held + m->pool.cached_bytes,
                              .bytes_cached = m->pool.cached_bytes,
                              .peak_bytes_in_use = m->peak, .registered_bytes = m->registered};
  pthread_mutex_unlock(&m->lock);
  return TSR_SUCCESS;
}

tsr_status_t tsrTrimMemory(tsr_context_t ctx) {
  tsr_status_t st = tsr_check_context(ctx, __func__);
  if (st) return st;
  tsr_deferred_poll(ctx);  /* finished work's released memory is cached memory too */
  tsr_memory_state_t* m = &ctx->memory;
  pthread_mutex_lock(&m->lock);
  tsr_pool_drain(&m->pool, backend_free, ctx);
  pthread_mutex_unlock(&m->lock);
  return TSR_SUCCESS;
}

/* ---- copies ----------------------------------------------------------------------------------------- */

/* The checks of a copy's ranges against the table (memory lock held). A side the kind leaves unchecked must
 * still fit in the allocation it starts in, if any (in debug mode: counting its guard pages and slack). */
static tsr_status_t check_ranges_locked(const tsr_memory_state_t* m, bool debug, void* dst, const void* src,
                                        size_t bytes, tsr_memcpy_kind_t kind, const char* function) {
  bool dst_device = kind == TSR_MEMCPY_HOST_TO_DEVICE || kind == TSR_MEMCPY_DEVICE_TO_DEVICE;
  bool src_device = kind == TSR_MEMCPY_DEVICE_TO_HOST || kind == TSR_MEMCPY_DEVICE_TO_DEVICE;
  const struct { bool device; uintptr_t p; const char* side; } sides[] = {
      {dst_device, (uintptr_t)dst, "destination"}, {src_device, (uintptr_t)src, "source"}};
  for (int i = 0; i < 2; i++) {
    const tsr_allocation_t* a = debug ? owning(m, sides[i].p) : holding(m, sides[i].p);
    bool within = a && sides[i].p >= a->base && sides[i].p - a->base <= a->bytes &&
                  bytes <= a->bytes - (sides[i].p - a->base);
    bool inside = within && (a->kind == TSR_MEMORY_DEVICE || a->kind == TSR_MEMORY_DEVICE_REGISTERED);
    /* Debug mode: either side touching freed memory, at either end, is a use after free. */
    const tsr_quarantined_t* q = quarantined(m, sides[i].p);
    if (!q) q = quarantined(m, sides[i].p + bytes - 1);
    if (q)
      return tsr_fail(TSR_ERROR_MEMORY_FAULT, "%s: the %s range at %p runs into allocation #%" PRIu64 ", which was "
                      "freed (use after free)", function, sides[i].side, (void*)sides[i].p, q->serial);
    if (sides[i].device && !inside)
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: the %s range of %zu bytes is not inside one device allocation "
                      "of this context (tsrAlloc; another library's device memory needs tsrDeviceRegister)", function,
                      sides[i].side, bytes);
    if (a && !within)
      return tsr_fail(TSR_ERROR_MEMORY_FAULT, "%s: the %s range of %zu bytes at offset %" PRIdPTR " leaves the %zu-byte "
                      "allocation #%" PRIu64 " at %p", function, sides[i].side, bytes,
                      (intptr_t)(sides[i].p - a->base), a->bytes, a->serial, (void*)a->base);
  }
  return TSR_SUCCESS;
}

tsr_status_t tsr_memory_check_copy(struct tsr_context* ctx, void* dst, const void* src, size_t bytes,
                                   tsr_memcpy_kind_t kind, const char* function) {
  if ((unsigned)kind > TSR_MEMCPY_DEFAULT)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: unknown kind %d", function, (int)kind);
  if (bytes == 0) return TSR_SUCCESS;
  if (!dst || !src) return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: NULL %s", function, dst ? "source" : "destination");
  if ((uintptr_t)dst > UINTPTR_MAX - bytes || (uintptr_t)src > UINTPTR_MAX - bytes)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: a range of %zu bytes wraps around the address space", function,
                    bytes);
  tsr_memory_state_t* m = &ctx->memory;
  pthread_mutex_lock(&m->lock);
  tsr_status_t st = check_ranges_locked(m, ctx->debug, dst, src, bytes, kind, function);
  pthread_mutex_unlock(&m->lock);
  return st;
}

const char* tsr_memcpy_name(tsr_memcpy_kind_t kind) {
  static const char* const names[] = {"memcpy HtoH", "memcpy HtoD", "memcpy DtoH", "memcpy DtoD", "memcpy"};
  return (unsigned)kind <= TSR_MEMCPY_DEFAULT ? names[kind] : "memcpy";
}

tsr_status_t tsr_memory_copy(struct tsr_context* ctx, void* dst, const void* src, size_t bytes,
                             tsr_memcpy_kind_t kind, const char* function) {
  if (bytes == 0) return TSR_SUCCESS;
  bool traced = tsr_trace_push(TSR_TRACE_COPY, tsr_memcpy_name(kind));
  double t0 = tsr_metrics_on() ? tsr_seconds() : 0;
  tsr_status_t st;
  if (ctx->debug) {
    /* The host may free the memory of a queued copy (its bug, which debug mode reports): the ranges are
     * checked again, and copied while no tsrFree can revoke them. */
    tsr_memory_state_t* m = &ctx->memory;
    pthread_mutex_lock(&m->lock);
    st = check_ranges_locked(m, true, dst, src, bytes, kind, function);
    if (!st) st = ctx->backend->copy(ctx->backend_state, dst, src, bytes, kind);
    pthread_mutex_unlock(&m->lock);
  } else {
    st = ctx->backend->copy(ctx->backend_state, dst, src, bytes, kind);
  }
  if (t0) tsr_metrics_write(&(tsr_metrics_entry_t){.name = tsr_memcpy_name(kind), .seconds = tsr_seconds() - t0,
                                                   .bytes = (double)bytes, .status = st});
  if (traced) tsr_trace_pop();
  return st;
}

tsr_status_t tsr_memory_enqueue_copy(struct tsr_context* ctx, void* queue, void* dst, const void* src, size_t bytes,
                                     tsr_memcpy_kind_t kind) {
  if (bytes == 0) return TSR_SUCCESS;
  bool traced = tsr_trace_push(TSR_TRACE_COPY, tsr_memcpy_name(kind));
  tsr_status_t st = ctx->backend->queue_copy(ctx->backend_state, queue, dst, src, bytes, kind);
  if (traced) tsr_trace_pop();
  return st;
}

tsr_status_t tsrMemcpy(tsr_context_t ctx, void* dst, const void* src, size_t bytes, tsr_memcpy_kind_t kind) {
  tsr_status_t st = tsr_check_context(ctx, __func__);
  if (st || (st = tsr_memory_check_copy(ctx, dst, src, bytes, kind, __func__))) return st;
  return tsr_memory_copy(ctx, dst, src, bytes, kind, __func__);
}

/* ---- lookups for launches and faults ---------------------------------------------------------------- */

bool tsr_memory_lookup(struct tsr_context* ctx, const void* p, tsr_allocation_t* out) {
  tsr_memory_state_t* m = &ctx->memory;
  pthread_mutex_lock(&m->lock);
  const tsr_allocation_t* a = holding(m, (uintptr_t)p);
  if (a) *out = *a;
  pthread_mutex_unlock(&m->lock);
  return a != NULL;
}

/* Whether a span is refused (memory lock held); `found` and `freed` say why. */
static bool span_refused(const tsr_memory_state_t* m, const tsr_tensor_span_t* s, tsr_allocation_t* found,
                         uint64_t* freed) {
  const tsr_allocation_t* a = owning(m, (uintptr_t)s->p);
  const tsr_quarantined_t* q = a || !m->freed_count ? NULL : quarantined(m, (uintptr_t)s->p);
  *freed = q ? q->serial : 0;
  if (*freed) return true;
  if (!a || s->bytes == 0) return false;  /* memory the context does not know, or nothing accessed */
  uint64_t offset = (uintptr_t)s->p - a->base;  /* "negative" (huge) before a guarded allocation's data */
  if ((uintptr_t)s->p >= a->base && offset <= a->bytes && s->bytes <= a->bytes - offset) return false;
  *found = *a;
  return true;
}

tsr_status_t tsr_memory_check_tensors(struct tsr_context* ctx, const tsr_tensor_span_t* spans, size_t count,
                                      const char* kernel) {
  tsr_memory_state_t* m = &ctx->memory;
  tsr_allocation_t found = {0};
  uint64_t freed = 0;
  const tsr_tensor_span_t* s = NULL;
  pthread_mutex_lock(&m->lock);
  for (size_t i = 0; i < count && !s; i++)
    if (span_refused(m, &spans[i], &found, &freed)) s = &spans[i];
  pthread_mutex_unlock(&m->lock);
  if (!s) return TSR_SUCCESS;
  const void* p = s->p;
  uint64_t bytes = s->bytes;
  int64_t offset = (int64_t)((uintptr_t)p - found.base);
  char what[256];
  snprintf(what, sizeof what, "tensor argument %zu ('%s') of kernel '%s'", s->index, s->name, kernel);
  if (freed)
    return tsr_fail(TSR_ERROR_MEMORY_FAULT, "%s at %p lies in allocation #%" PRIu64 ", which was freed (use after "
                    "free)", what, p, freed);
  if (offset < 0)
    return tsr_fail(TSR_ERROR_MEMORY_FAULT, "%s at %p starts %" PRId64 " bytes before the %zu-byte allocation #%" PRIu64
                    " at %p", what, p, -offset, found.bytes, found.serial, (void*)found.base);
  return tsr_fail(TSR_ERROR_MEMORY_FAULT, "%s needs %" PRIu64 " bytes at offset %" PRId64 " of the %zu-byte "
                  "allocation #%" PRIu64 " at %p: %" PRIu64 " bytes past its end", what, bytes, offset, found.bytes,
                  found.serial, (void*)found.base, (uint64_t)offset + bytes - found.bytes);
}

tsr_status_t tsr_memory_check_canaries(struct tsr_context* ctx, const void* p, const char* what) {
  /* Under the lock: a concurrent tsrFree (the host's bug) must not revoke the pages being read. */
  tsr_memory_state_t* m = &ctx->memory;
  pthread_mutex_lock(&m->lock);
  const tsr_allocation_t* found = holding(m, (uintptr_t)p);
  tsr_allocation_t a = found ? *found : (tsr_allocation_t){0};
  ptrdiff_t where = 0;
  tsr_guarded_t g = guarded_of(&a);
  bool damaged = found && a.origin == TSR_ORIGIN_GUARDED && tsr_guarded_damaged(&g, &where);
  pthread_mutex_unlock(&m->lock);
  if (!damaged) return TSR_SUCCESS;
  return tsr_fail(TSR_ERROR_MEMORY_FAULT, "%s: the canary at offset %td of the %zu-byte allocation #%" PRIu64 " at %p "
                  "was overwritten (an %s)", what, where, a.bytes, a.serial, (void*)a.base,
                  where < 0 ? "underrun" : "overrun");
}

void tsr_memory_describe(struct tsr_context* ctx, uintptr_t address, char* out, size_t size) {
  tsr_memory_state_t* m = &ctx->memory;
  pthread_mutex_lock(&m->lock);
  const tsr_quarantined_t* q = quarantined(m, address);
  const tsr_allocation_t* a = NULL;
  for (size_t i = 0; i < m->count && !q && !a; i++)  /* guard pages lie outside [base, base + bytes) */
    if (m->table[i].origin == TSR_ORIGIN_GUARDED && address - m->table[i].map < m->table[i].map_bytes)
      a = &m->table[i];
  if (q)
    snprintf(out, size, "inside allocation #%" PRIu64 " (%zu bytes at %p), which was freed (use after free)",
             q->serial, q->guarded.bytes, (void*)q->guarded.user);
  else if (a && address >= a->base + a->bytes)
    snprintf(out, size, "%" PRIuPTR " bytes past the end of the %zu-byte allocation #%" PRIu64 " at %p (guard page)",
             address - (a->base + a->bytes), a->bytes, a->serial, (void*)a->base);
  else if (a && address < a->base)
    snprintf(out, size, "%" PRIuPTR " bytes before the %zu-byte allocation #%" PRIu64 " at %p (guard page)",
             a->base - address, a->bytes, a->serial, (void*)a->base);
  else
    snprintf(out, size, "not inside any allocation of this context");
  pthread_mutex_unlock(&m->lock);
}

/* ---- context lifetime ------------------------------------------------------------------------------- */

void tsr_memory_init(struct tsr_context* ctx) {
  ctx->memory = (tsr_memory_state_t){0};
  pthread_mutex_init(&ctx->memory.lock, NULL);
}

void tsr_memory_teardown(struct tsr_context* ctx) {
  tsr_memory_state_t* m = &ctx->memory;
  for (size_t i = 0; i < m->count; i++) {
    tsr_allocation_t a = m->table[i];
    if (a.origin == TSR_ORIGIN_GUARDED) tsr_guarded_unmap(&(tsr_guarded_t){a.map, a.map_bytes, a.base, a.bytes});
    else if (a.origin == TSR_ORIGIN_POOL) backend_free(ctx, (void*)a.base);
    else release(ctx, &a);
  }
  while (m->freed_count) evict_oldest(m);
  free(m->freed);
  tsr_pool_drain(&m->pool, backend_free, ctx);
  free(m->table);
  pthread_mutex_destroy(&m->lock);
  *m = (tsr_memory_state_t){0};
}
