/* memory.c — tsrAlloc/tsrFree/tsrMemcpy. On the CPU backend device memory is aligned host memory; the
 * context keeps a sorted table of its allocations so that free can refuse foreign pointers and memcpy can
 * check that a device range lies inside one allocation. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "handles.h"
#include "objects.h"

/* Index of the last allocation with base <= p, or allocation_count when there is none. */
static size_t find_at_or_below(const struct tsr_context* ctx, uintptr_t p) {
  size_t lo = 0, hi = ctx->allocation_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (ctx->allocations[mid].base <= p) lo = mid + 1;
    else hi = mid;
  }
  return lo ? lo - 1 : ctx->allocation_count;
}

static tsr_status_t track(struct tsr_context* ctx, uintptr_t base, size_t bytes) {
  if (ctx->allocation_count == ctx->allocation_capacity) {
    size_t capacity = ctx->allocation_capacity ? ctx->allocation_capacity * 2 : 64;
    tsr_allocation_t* grown = realloc(ctx->allocations, capacity * sizeof *grown);
    if (!grown) return TSR_ERROR_OUT_OF_MEMORY;
    ctx->allocations = grown;
    ctx->allocation_capacity = capacity;
  }
  size_t below = find_at_or_below(ctx, base);
  size_t i = below == ctx->allocation_count ? 0 : below + 1;
  memmove(ctx->allocations + i + 1, ctx->allocations + i, (ctx->allocation_count - i) * sizeof *ctx->allocations);
  ctx->allocations[i] = (tsr_allocation_t){base, bytes};
  ctx->allocation_count++;
  return TSR_SUCCESS;
}

tsr_status_t tsrAlloc(tsr_context_t ctx, size_t bytes, uint32_t flags, void** out_ptr) {
  if (!tsr_handle_is_live(ctx, TSR_MAGIC_CONTEXT)) return tsr_fail_handle(__func__, "context");
  if (!out_ptr) return tsr_fail_null_output(__func__);
  if (flags != TSR_ALLOC_DEFAULT) return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrAlloc: unknown flags 0x%x", flags);
  /* aligned_alloc wants a multiple of the alignment; a 0-byte request still gets a distinct pointer. */
  size_t rounded = bytes ? (bytes + TSR_ALLOC_ALIGNMENT - 1) & ~(size_t)(TSR_ALLOC_ALIGNMENT - 1) : TSR_ALLOC_ALIGNMENT;
  void* p = rounded >= bytes ? aligned_alloc(TSR_ALLOC_ALIGNMENT, rounded) : NULL;
  if (!p) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "tsrAlloc: cannot allocate %zu bytes", bytes);
  pthread_mutex_lock(&ctx->lock);
  tsr_status_t st = track(ctx, (uintptr_t)p, bytes);
  pthread_mutex_unlock(&ctx->lock);
  if (st) {
    free(p);
    return tsr_fail(st, "tsrAlloc: out of memory tracking the allocation");
  }
  *out_ptr = p;
  return TSR_SUCCESS;
}

tsr_status_t tsrFree(tsr_context_t ctx, void* ptr) {
  if (!tsr_handle_is_live(ctx, TSR_MAGIC_CONTEXT)) return tsr_fail_handle(__func__, "context");
  pthread_mutex_lock(&ctx->lock);
  size_t i = find_at_or_below(ctx, (uintptr_t)ptr);
  bool found = ptr && i < ctx->allocation_count && ctx->allocations[i].base == (uintptr_t)ptr;
  if (found) {
    memmove(ctx->allocations + i, ctx->allocations + i + 1,
            (ctx->allocation_count - i - 1) * sizeof *ctx->allocations);
    ctx->allocation_count--;
  }
  pthread_mutex_unlock(&ctx->lock);
  if (!found) return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrFree: %p was not allocated by tsrAlloc on this context "
                              "(or was already freed)", ptr);
  free(ptr);
  return TSR_SUCCESS;
}

/* Whether [p, p + bytes) lies inside one allocation. Context locked. */
static bool is_device_range(const struct tsr_context* ctx, const void* p, size_t bytes) {
  size_t i = find_at_or_below(ctx, (uintptr_t)p);
  if (i == ctx->allocation_count) return false;
  const tsr_allocation_t* a = &ctx->allocations[i];
  size_t offset = (uintptr_t)p - a->base;
  return offset <= a->bytes && bytes <= a->bytes - offset;
}

tsr_status_t tsrMemcpy(tsr_context_t ctx, void* dst, const void* src, size_t bytes, tsr_memcpy_kind_t kind) {
  if (!tsr_handle_is_live(ctx, TSR_MAGIC_CONTEXT)) return tsr_fail_handle(__func__, "context");
  if ((unsigned)kind > TSR_MEMCPY_DEFAULT)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrMemcpy: unknown kind %d", (int)kind);
  if (bytes == 0) return TSR_SUCCESS;
  if (!dst || !src) return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrMemcpy: NULL %s", dst ? "source" : "destination");
  bool dst_device = kind == TSR_MEMCPY_HOST_TO_DEVICE || kind == TSR_MEMCPY_DEVICE_TO_DEVICE;
  bool src_device = kind == TSR_MEMCPY_DEVICE_TO_HOST || kind == TSR_MEMCPY_DEVICE_TO_DEVICE;
  pthread_mutex_lock(&ctx->lock);
  const char* outside = dst_device && !is_device_range(ctx, dst, bytes)   ? "destination"
                        : src_device && !is_device_range(ctx, src, bytes) ? "source"
                                                                          : NULL;
  pthread_mutex_unlock(&ctx->lock);
  if (outside)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrMemcpy: the %s range of %zu bytes is not inside one allocation of "
                    "this context", outside, bytes);
  memmove(dst, src, bytes);
  return TSR_SUCCESS;
}

void tsr_context_free_allocations(struct tsr_context* ctx) {
  for (size_t i = 0; i < ctx->allocation_count; i++) free((void*)ctx->allocations[i].base);
  free(ctx->allocations);
  ctx->allocations = NULL;
  ctx->allocation_count = ctx->allocation_capacity = 0;
}
