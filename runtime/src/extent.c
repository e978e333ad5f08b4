/* extent.c — extent expressions (extent.h): a recursive-descent compiler over the grammar of
 * docs/image-format.md, emitting postfix code, and its checked evaluator. */
#include "extent.h"

#include <string.h>

#include "errors.h"

/* ---- interned names ---------------------------------------------------------------------------------------- */

static uint32_t hash(const char* s, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
  return h;
}

void tsr_symbols_init(tsr_symbols_t* symbols, tsr_arena_t* arena) {
  memset(symbols, 0, sizeof *symbols);
  symbols->arena = arena;
}

static int64_t lookup(const tsr_symbols_t* t, const char* name, size_t len, uint32_t* slot) {
  if (!t->capacity) return -1;
  for (uint32_t i = hash(name, len) & (t->capacity - 1);; i = (i + 1) & (t->capacity - 1)) {
    *slot = i;
    if (!t->slots[i]) return -1;
    const char* s = t->names[t->slots[i] - 1];
    if (strncmp(s, name, len) == 0 && s[len] == '\0') return t->slots[i] - 1;
  }
}

/* Tables live in the arena: a grown table abandons the old one there, at most doubling what they take. */
static bool grow(tsr_symbols_t* t) {
  uint32_t capacity = t->capacity ? t->capacity * 2 : 64;
  if (capacity > (1u << 30)) return false;
  uint32_t* slots = tsr_arena_array(t->arena, capacity, sizeof *slots);
  const char** names = tsr_arena_array(t->arena, capacity / 2, sizeof *names);
  if (!slots || !names) return false;
  if (t->count) memcpy(names, t->names, t->count * sizeof *names);
  for (uint32_t k = 0; k < t->count; k++) {
    uint32_t i = hash(names[k], strlen(names[k])) & (capacity - 1);
    while (slots[i]) i = (i + 1) & (capacity - 1);
    slots[i] = k + 1;
  }
  t->slots = slots;
  t->names = names;
  t->capacity = capacity;
  return true;
}

int64_t tsr_symbols_intern(tsr_symbols_t* t, const char* name, size_t len) {
  uint32_t slot = 0;
  int64_t found = lookup(t, name, len, &slot);
  if (found >= 0) return found;
  if (t->count + 1 > t->capacity / 2) {  /* at most half full */
    if (!grow(t)) return -1;
    lookup(t, name, len, &slot);
  }
  char* copy = tsr_arena_strndup(t->arena, name, len);
  if (!copy) return -1;
  t->names[t->count] = copy;
  t->slots[slot] = ++t->count;
  return t->count - 1;
}

int64_t tsr_symbols_find(const tsr_symbols_t* t, const char* name) {
  uint32_t slot;
  return lookup(t, name, strlen(name), &slot);
}

/* ---- the compiler -------------------------------------------------------------------------------------------- */

typedef enum { TOK_END, TOK_INT, TOK_NAME, TOK_PUNCT, TOK_BAD } token_kind_t;

typedef struct compiler {
  const char* text;
  const char* p;          /* after the current token */
  token_kind_t tok;
  const char* tok_start;  /* the current token's text */
  size_t tok_len;
  tsr_symbols_t* symbols;
  tsr_expr_op_t* ops;
  uint32_t op_count, op_capacity;
  int depth, stack, max_stack;
  char* why;
  size_t why_size;
  bool failed;
} compiler_t;

static bool is_name_start(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static void next(compiler_t* c) {
  while (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r' || *c->p == '\f' || *c->p == '\v') c->p++;
  c->tok_start = c->p;
  if (!*c->p) c->tok = TOK_END;
  else if (is_digit(*c->p)) {
    while (is_digit(*c->p)) c->p++;
    c->tok = TOK_INT;
  } else if (is_name_start(*c->p)) {
    while (is_name_start(*c->p) || is_digit(*c->p)) c->p++;
    c->tok = TOK_NAME;
  } else if (c->p[0] == '/' && c->p[1] == '/') {
    c->p += 2;
    c->tok = TOK_PUNCT;
  } else {
    c->tok = strchr("+-*/(),", *c->p) ? TOK_PUNCT : TOK_BAD;
    c->p++;
  }
  c->tok_len = (size_t)(c->p - c->tok_start);
}

static bool is(const compiler_t* c, const char* punct) {
  return c->tok == TOK_PUNCT && c->tok_len == strlen(punct) && memcmp(c->tok_start, punct, c->tok_len) == 0;
}

static bool word(const compiler_t* c, const char* w) {
  return c->tok == TOK_NAME && c->tok_len == strlen(w) && memcmp(c->tok_start, w, c->tok_len) == 0;
}

static void fail(compiler_t* c, const char* expected) {
  if (c->failed) return;
  c->failed = true;
  if (c->tok == TOK_BAD) snprintf(c->why, c->why_size, "unexpected '%c'", *c->tok_start);
  else if (c->tok == TOK_END) snprintf(c->why, c->why_size, "expected %s at the end", expected);
  else snprintf(c->why, c->why_size, "expected %s, found '%.*s'", expected, (int)(c->tok_len > 40 ? 40 : c->tok_len),
                c->tok_start);
}

static void emit(compiler_t* c, tsr_expr_opcode_t op, int64_t value) {
  if (c->failed) return;
  if (c->op_count == c->op_capacity) {
    uint32_t capacity = c->op_capacity ? c->op_capacity * 2 : 16;
    tsr_expr_op_t* ops = tsr_arena_array(c->symbols->arena, capacity, sizeof *ops);
    if (!ops) {
      c->failed = true;
      snprintf(c->why, c->why_size, "out of memory");
      return;
    }
    if (c->op_count) memcpy(ops, c->ops, c->op_count * sizeof *ops);
    c->ops = ops;
    c->op_capacity = capacity;
  }
  c->ops[c->op_count++] = (tsr_expr_op_t){op, value};
  c->stack += op <= TSR_EXPR_NAME ? 1 : -1;
  if (c->stack > c->max_stack) c->max_stack = c->stack;
}

static void take(compiler_t* c, const char* punct) {
  if (c->failed) return;
  if (!is(c, punct)) {
    char expected[8];
    snprintf(expected, sizeof expected, "'%s'", punct);
    fail(c, expected);
    return;
  }
  next(c);
}

static void sum(compiler_t* c);

static void atom(compiler_t* c) {
  if (c->failed) return;
  if (++c->depth > TSR_EXPR_MAX_DEPTH) {
    c->failed = true;
    snprintf(c->why, c->why_size, "nested deeper than %d levels", TSR_EXPR_MAX_DEPTH);
    return;
  }
  if (c->tok == TOK_INT) {
    int64_t v = 0;
    for (size_t i = 0; i < c->tok_len; i++) {
      int d = c->tok_start[i] - '0';
      if (v > (INT64_MAX - d) / 10) {
        c->failed = true;
        snprintf(c->why, c->why_size, "integer %.*s is outside int64", (int)(c->tok_len > 40 ? 40 : c->tok_len),
                 c->tok_start);
        return;
      }
      v = v * 10 + d;
    }
    next(c);
    emit(c, TSR_EXPR_INT, v);
  } else if (is(c, "(")) {
    next(c);
    sum(c);
    take(c, ")");
  } else if (word(c, "ceil")) {  /* ceiling division, the one place '/' may stand: ceil(atom / atom) */
    next(c);
    take(c, "(");
    atom(c);
    take(c, "/");
    atom(c);
    take(c, ")");
    emit(c, TSR_EXPR_CEILDIV, 0);
  } else if (word(c, "min") || word(c, "max")) {
    tsr_expr_opcode_t op = word(c, "min") ? TSR_EXPR_MIN : TSR_EXPR_MAX;
    next(c);
    take(c, "(");
    sum(c);
    take(c, ",");
    sum(c);
    take(c, ")");
    emit(c, op, 0);
  } else if (c->tok == TOK_NAME) {
    int64_t sym = tsr_symbols_intern(c->symbols, c->tok_start, c->tok_len);
    if (sym < 0) {
      c->failed = true;
      snprintf(c->why, c->why_size, "out of memory");
      return;
    }
    next(c);
    emit(c, TSR_EXPR_NAME, sym);
  } else {
    fail(c, "an extent");
  }
  c->depth--;
}

static void product(compiler_t* c) {
  atom(c);
  while (!c->failed && (is(c, "*") || is(c, "//"))) {
    tsr_expr_opcode_t op = is(c, "*") ? TSR_EXPR_MUL : TSR_EXPR_FLOORDIV;
    next(c);
    atom(c);
    emit(c, op, 0);
  }
}

static void sum(compiler_t* c) {
  product(c);
  while (!c->failed && (is(c, "+") || is(c, "-"))) {
    tsr_expr_opcode_t op = is(c, "+") ? TSR_EXPR_ADD : TSR_EXPR_SUB;
    next(c);
    product(c);
    emit(c, op, 0);
  }
}

bool tsr_expr_compile(const char* text, tsr_symbols_t* symbols, tsr_expr_t* out, char* why, size_t why_size) {
  compiler_t c = {.text = text, .p = text, .symbols = symbols, .why = why, .why_size = why_size};
  next(&c);
  sum(&c);
  if (!c.failed && c.tok != TOK_END) fail(&c, "an operator");
  if (!c.failed && c.max_stack > TSR_EXPR_MAX_STACK) {
    c.failed = true;
    snprintf(why, why_size, "needs more than %d stack entries", TSR_EXPR_MAX_STACK);
  }
  if (c.failed) return false;
  out->text = text;
  out->ops = c.ops;
  out->op_count = c.op_count;
  return true;
}

/* ---- the evaluator ------------------------------------------------------------------------------------------- */

static tsr_status_t unknown(const tsr_expr_t* e, const tsr_extents_t* env, int64_t sym) {
  char known[512] = "";
  size_t n = 0;
  for (uint32_t i = 0; i < env->symbols->count && n < sizeof known - 8; i++) {
    if (!env->bound[i]) continue;
    int w = snprintf(known + n, sizeof known - n, "%s%s", n ? ", " : "", env->symbols->names[i]);
    if (w < 0 || (size_t)w >= sizeof known - n) {
      strcpy(known + sizeof known - 6, ", ...");
      break;
    }
    n += (size_t)w;
  }
  return tsr_fail(TSR_ERROR_INVALID_VALUE, "extent expression '%.200s': extent '%.80s' is unknown (known: %s)", e->text,
                  env->symbols->names[sym], n ? known : "none");
}

tsr_status_t tsr_expr_eval(const tsr_expr_t* e, const tsr_extents_t* env, int64_t* out) {
  int64_t stack[TSR_EXPR_MAX_STACK];
  int top = 0;
  for (uint32_t i = 0; i < e->op_count; i++) {
    const tsr_expr_op_t* op = &e->ops[i];
    if (op->op == TSR_EXPR_INT) {
      stack[top++] = op->value;
      continue;
    }
    if (op->op == TSR_EXPR_NAME) {
      if ((uint64_t)op->value >= env->symbols->count || !env->bound[op->value])
        return (uint64_t)op->value < env->symbols->count
                   ? unknown(e, env, op->value)
                   : tsr_fail(TSR_ERROR_INVALID_VALUE, "extent expression '%.200s' names an extent of another plan",
                              e->text);
      stack[top++] = env->values[op->value];
      continue;
    }
    int64_t b = stack[--top], a = stack[top - 1], r;
    bool overflow = false;
    switch (op->op) {
      case TSR_EXPR_ADD: overflow = __builtin_add_overflow(a, b, &r); break;
      case TSR_EXPR_SUB: overflow = __builtin_sub_overflow(a, b, &r); break;
      case TSR_EXPR_MUL: overflow = __builtin_mul_overflow(a, b, &r); break;
      case TSR_EXPR_MIN: r = a < b ? a : b; break;
      case TSR_EXPR_MAX: r = a > b ? a : b; break;
      default:  /* the divisions */
        if (b == 0) return tsr_fail(TSR_ERROR_INVALID_VALUE, "extent expression '%.200s': division by zero", e->text);
        if (a == INT64_MIN && b == -1) {
          overflow = true;
          break;
        }
        r = a / b;  /* truncated; adjust toward the rounding direction when inexact */
        if (a % b != 0) {
          bool negative = (a < 0) != (b < 0);
          if (op->op == TSR_EXPR_FLOORDIV && negative) r--;
          if (op->op == TSR_EXPR_CEILDIV && !negative) r++;
        }
    }
    if (overflow)
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "extent expression '%.200s': the value overflows int64", e->text);
    stack[top - 1] = r;
  }
  *out = stack[0];
  return TSR_SUCCESS;
}
