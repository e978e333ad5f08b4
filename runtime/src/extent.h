/* extent.h — extent expressions of launch plans (docs/image-format.md, "Extent expressions"): compiled once
 * into postfix code over interned names, evaluated many times with checked int64 arithmetic.
 *
 * The grammar and the meaning are those of tessera/plan.py (`parse`, `evaluate`), with one difference a
 * 64-bit runtime must make: where Python's integers grow, a literal outside int64 is refused when compiled
 * and a result outside int64 (a sum, product or quotient) fails the evaluation. */
#ifndef TESSERA_SRC_EXTENT_H_
#define TESSERA_SRC_EXTENT_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "tessera/tessera.h"

/* Nesting of parentheses and calls an expression may have. Each level holds at most three pending values
 * (a sum's, a product's and a call's first argument), which bounds the evaluation stack. */
#define TSR_EXPR_MAX_DEPTH 32
#define TSR_EXPR_MAX_STACK (3 * TSR_EXPR_MAX_DEPTH + 2)

/* Interned names: each distinct name gets an index, 0, 1, ..., in the order first seen. */
typedef struct tsr_symbols {
  const char** names;  /* [count] */
  uint32_t count;
  uint32_t* slots;     /* open-addressed hash table of index + 1 (0: empty), `capacity` a power of two */
  uint32_t capacity;
  tsr_arena_t* arena;  /* where names and tables live */
} tsr_symbols_t;

/* `symbols` empty, allocating in `arena`. */
void tsr_symbols_init(tsr_symbols_t* symbols, tsr_arena_t* arena);

/* The index of `name` (`len` bytes), interning a copy when new; -1 when out of memory. */
int64_t tsr_symbols_intern(tsr_symbols_t* symbols, const char* name, size_t len);

/* The index of `name`, or -1 when it was never interned. */
int64_t tsr_symbols_find(const tsr_symbols_t* symbols, const char* name);

typedef enum tsr_expr_opcode {
  TSR_EXPR_INT,    /* push `value` */
  TSR_EXPR_NAME,   /* push the extent of symbol `value` */
  TSR_EXPR_ADD,    /* pop b, pop a, push a op b */
  TSR_EXPR_SUB,
  TSR_EXPR_MUL,
  TSR_EXPR_FLOORDIV,  /* a // b, rounding toward negative infinity */
  TSR_EXPR_CEILDIV,   /* ceil(a / b), rounding toward positive infinity */
  TSR_EXPR_MIN,
  TSR_EXPR_MAX,
} tsr_expr_opcode_t;

typedef struct tsr_expr_op {
  tsr_expr_opcode_t op;
  int64_t value;
} tsr_expr_op_t;

typedef struct tsr_expr {
  const char* text;  /* the expression as written (for messages and the plan's JSON form) */
  const tsr_expr_op_t* ops;
  uint32_t op_count;
} tsr_expr_t;

/* Compiles `text` (NUL-terminated) into `out`, interning its names. On failure returns false and writes why
 * into `why` ("expected ')', found ','", "integer 99999999999999999999 is outside int64", "out of memory"). */
bool tsr_expr_compile(const char* text, tsr_symbols_t* symbols, tsr_expr_t* out, char* why, size_t why_size);

/* The extents an expression is evaluated with: values[i] is symbol i's extent where bound[i] is nonzero. */
typedef struct tsr_extents {
  const tsr_symbols_t* symbols;
  const int64_t* values;
  const uint8_t* bound;
} tsr_extents_t;

/* The value of `e`. TSR_ERROR_INVALID_VALUE with a message naming the expression for an unknown (unbound)
 * name (the message lists the bound ones), a division by zero, or a result outside int64. */
tsr_status_t tsr_expr_eval(const tsr_expr_t* e, const tsr_extents_t* env, int64_t* out);

#endif  /* TESSERA_SRC_EXTENT_H_ */
