/* mem_pool.h — the caching pool behind device allocations: freed blocks are kept in size classes and handed
 * out again, so that the steady state of a program allocating and freeing the same sizes makes no system
 * calls. Classes are multiples of 64 bytes up to 512, then four per power of two (waste under 25%), up to
 * 1 GiB; larger blocks are not pooled. Not thread-safe: the owner locks. */
#ifndef TESSERA_SRC_MEM_POOL_H_
#define TESSERA_SRC_MEM_POOL_H_

#include <stdbool.h>
#include <stddef.h>

enum { TSR_POOL_CLASSES = 8 + 21 * 4 };

typedef struct tsr_pool_class {
  void** blocks;
  size_t count, capacity;
} tsr_pool_class_t;

typedef struct tsr_mem_pool {
  tsr_pool_class_t classes[TSR_POOL_CLASSES];
  size_t cached_bytes;
} tsr_mem_pool_t;

/* The block size a request of `bytes` gets: its class's size, or `bytes` rounded up to 64 when it is too
 * large to pool. 0 on overflow. */
size_t tsr_pool_block_size(size_t bytes);

/* A cached block of exactly `block` bytes, or false. */
bool tsr_pool_take(tsr_mem_pool_t* pool, size_t block, void** out);

/* Keeps a freed block; false when it is not poolable (or bookkeeping memory ran out): free it instead. */
bool tsr_pool_put(tsr_mem_pool_t* pool, void* ptr, size_t block);

/* Hands every cached block to `release` and forgets it; frees the bookkeeping too. */
void tsr_pool_drain(tsr_mem_pool_t* pool, void (*release)(void* state, void* ptr), void* state);

#endif  /* TESSERA_SRC_MEM_POOL_H_ */
