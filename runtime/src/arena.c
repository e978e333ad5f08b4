/* arena.c — the region allocator of arena.h: blocks of at least 16 KiB, a large allocation in a block of its
 * own. */
#include "arena.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { BLOCK_BYTES = 16 << 10, ALIGN = alignof(max_align_t) };

struct tsr_arena_block {
  tsr_arena_block_t* next;
  size_t size;
  alignas(max_align_t) unsigned char data[];
};

void* tsr_arena_alloc(tsr_arena_t* arena, size_t bytes) {
  if (bytes > SIZE_MAX / 2) return NULL;
  size_t need = (bytes + ALIGN - 1) / ALIGN * ALIGN;
  if (need == 0) need = ALIGN;
  if (!arena->head || arena->head->size - arena->used < need) {
    size_t size = need > BLOCK_BYTES ? need : BLOCK_BYTES;
    tsr_arena_block_t* b = malloc(sizeof *b + size);
    if (!b) return NULL;
    b->size = size;
    if (arena->head && size == need && arena->head->size - arena->used >= ALIGN) {
      /* a large allocation goes behind the current block, which keeps serving small ones */
      b->next = arena->head->next;
      arena->head->next = b;
      memset(b->data, 0, need);
      return b->data;
    }
    b->next = arena->head;
    arena->head = b;
    arena->used = 0;
  }
  void* p = arena->head->data + arena->used;
  arena->used += need;
  memset(p, 0, need);
  return p;
}

void* tsr_arena_array(tsr_arena_t* arena, size_t count, size_t size) {
  if (size && count > SIZE_MAX / 2 / size) return NULL;
  return tsr_arena_alloc(arena, count * size);
}

char* tsr_arena_strndup(tsr_arena_t* arena, const char* s, size_t n) {
  char* p = tsr_arena_alloc(arena, n + 1);
  if (p) memcpy(p, s, n);
  return p;
}

void tsr_arena_release(tsr_arena_t* arena) {
  while (arena->head) {
    tsr_arena_block_t* next = arena->head->next;
    free(arena->head);
    arena->head = next;
  }
  arena->used = 0;
}
