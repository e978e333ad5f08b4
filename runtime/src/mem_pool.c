/* mem_pool.c — size classes and per-class stacks of cached blocks (mem_pool.h). Under AddressSanitizer a
 * cached block is poisoned, so that a use after tsrFree is still reported although the memory stays mapped. */
#include "mem_pool.h"

#include <stdint.h>
#include <stdlib.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TSR_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TSR_ASAN 1
#endif
#ifdef TSR_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

enum { SMALL_LIMIT = 512, LARGEST_LOG2 = 30 };

static unsigned floor_log2(size_t n) { return (unsigned)(sizeof(size_t) * 8 - 1 - (unsigned)__builtin_clzl(n)); }

/* Class index of a block size, or -1 when it is not a class size. */
static int class_of(size_t block) {
  if (block == 0 || block % 64) return -1;
  if (block <= SMALL_LIMIT) return (int)(block / 64) - 1;
  unsigned k = floor_log2(block - 1);  /* 2^k < block <= 2^(k+1) */
  if (k >= LARGEST_LOG2) return -1;
  size_t step = (size_t)1 << (k - 2);
  if (block % step) return -1;
  return 8 + (int)(k - 9) * 4 + (int)(block / step - 5);
}

/* The block size of class `c` (inverse of class_of). */
static size_t class_size(int c) {
  if (c < 8) return (size_t)(c + 1) * 64;
  unsigned k = 9 + (unsigned)(c - 8) / 4;
  return ((size_t)5 + (size_t)(c - 8) % 4) << (k - 2);
}

size_t tsr_pool_block_size(size_t bytes) {
  if (bytes > SIZE_MAX - 63) return 0;
  if (bytes <= SMALL_LIMIT) return bytes ? (bytes + 63) & ~(size_t)63 : 64;
  unsigned k = floor_log2(bytes - 1);
  if (k >= LARGEST_LOG2) return (bytes + 63) & ~(size_t)63;
  size_t step = (size_t)1 << (k - 2);
  return (bytes + step - 1) & ~(step - 1);
}

bool tsr_pool_take(tsr_mem_pool_t* pool, size_t block, void** out) {
  int c = class_of(block);
  if (c < 0 || pool->classes[c].count == 0) return false;
  *out = pool->classes[c].blocks[--pool->classes[c].count];
  pool->cached_bytes -= block;
  UNPOISON(*out, block);
  return true;
}

bool tsr_pool_put(tsr_mem_pool_t* pool, void* ptr, size_t block) {
  int c = class_of(block);
  if (c < 0) return false;
  tsr_pool_class_t* cls = &pool->classes[c];
  if (cls->count == cls->capacity) {
    size_t capacity = cls->capacity ? cls->capacity * 2 : 8;
    void** grown = realloc(cls->blocks, capacity * sizeof *grown);
    if (!grown) return false;
    cls->blocks = grown;
    cls->capacity = capacity;
  }
  cls->blocks[cls->count++] = ptr;
  pool->cached_bytes += block;
  POISON(ptr, block);
  return true;
}

void tsr_pool_drain(tsr_mem_pool_t* pool, void (*release)(void* state, void* ptr), void* state) {
  for (int c = 0; c < TSR_POOL_CLASSES; c++) {
    tsr_pool_class_t* cls = &pool->classes[c];
    for (size_t i = 0; i < cls->count; i++) {
      UNPOISON(cls->blocks[i], class_size(c));
      release(state, cls->blocks[i]);
    }
    free(cls->blocks);
    *cls = (tsr_pool_class_t){0};
  }
  pool->cached_bytes = 0;
}
