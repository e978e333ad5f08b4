/* arena.h — a region allocator: many small allocations freed together. A parsed launch plan (plan.h) lives
 * in one, so a reader that fails halfway releases everything with one call and no error path leaks. */
#ifndef TESSERA_SRC_ARENA_H_
#define TESSERA_SRC_ARENA_H_

#include <stddef.h>

typedef struct tsr_arena_block tsr_arena_block_t;

typedef struct tsr_arena {
  tsr_arena_block_t* head;  /* newest block first */
  size_t used;              /* bytes taken in head */
} tsr_arena_t;

/* `bytes` of zeroed memory aligned for any object, or NULL when the host is out of memory (or the size
 * overflows). Lives until tsr_arena_release. */
void* tsr_arena_alloc(tsr_arena_t* arena, size_t bytes);

/* `count` zeroed objects of `size` bytes each (NULL on overflow or out of memory; a valid pointer for 0). */
void* tsr_arena_array(tsr_arena_t* arena, size_t count, size_t size);

/* A NUL-terminated copy of `n` bytes of `s`, or NULL. */
char* tsr_arena_strndup(tsr_arena_t* arena, const char* s, size_t n);

/* Frees every allocation; the arena is empty (and reusable) afterwards. */
void tsr_arena_release(tsr_arena_t* arena);

#endif  /* TESSERA_SRC_ARENA_H_ */
