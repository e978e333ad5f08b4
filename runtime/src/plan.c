/* plan.c — the launch-plan reader and writer of plan.h. The JSON tree is read into a scratch arena; the plan
 * copies what it keeps into its own. Every check names where it failed: "function 'mlp': step 3 ('k_gemm'):
 * 'grid' must be 3 extent expressions". */
#include "plan.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "json.h"
#include "json_doc.h"

const char* const tsr_plan_view_names[6] = {"matrix", "cols", "rows", "scalar", "bmn", "bnm"};
const char* const tsr_plan_collective_names[4] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast"};
const char* const tsr_plan_reduce_names[5] = {"sum", "max", "min", "mean", "prod"};
const char* const tsr_plan_algo_names[4] = {"ring", "tree", "binary_tree", "auto"};

enum { WHERE = 256 };

typedef struct reader {
  tsr_plan_t* plan;
  tsr_arena_t* arena;  /* the plan's */
  const tsr_plan_function_t* fn;  /* the function being read, for value lookups */
  uint32_t* by_id;     /* fn's value indices sorted by id */
  int version;         /* the document's */
} reader_t;

static tsr_status_t bad(const char* where, const char* format, ...) __attribute__((format(printf, 2, 3)));

static tsr_status_t bad(const char* where, const char* format, ...) {
  char message[768];
  va_list ap;
  va_start(ap, format);
  vsnprintf(message, sizeof message, format, ap);
  va_end(ap);
  return tsr_fail(TSR_ERROR_BAD_IMAGE, "launch plan: %s%s%s", where, *where ? ": " : "", message);
}

/* Writes a place in the document ("function 'f': step 3") into `buf`. */
static void place(char* buf, const char* format, ...) __attribute__((format(printf, 2, 3)));

static void place(char* buf, const char* format, ...) {
  va_list ap;
  va_start(ap, format);
  vsnprintf(buf, WHERE, format, ap);
  va_end(ap);
}

static tsr_status_t oom(void) {
  return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "launch plan: out of host memory reading the plan");
}

#define TRY(x)                      \
  do {                              \
    tsr_status_t s_ = (x);          \
    if (s_) return s_;              \
  } while (0)

#define ALLOC(r, ptr, n)                                                \
  do {                                                                  \
    if (!((ptr) = tsr_arena_array((r)->arena, (n), sizeof *(ptr)))) return oom(); \
  } while (0)

/* ---- typed members ------------------------------------------------------------------------------------------ */

static tsr_status_t members_known(const tsr_json_t* obj, const char* where, const char* const* known) {
  for (const tsr_json_t* m = obj->first; m; m = m->next) {
    const char* const* k = known;
    while (*k && !(strlen(*k) == m->key_len && memcmp(*k, m->key, m->key_len) == 0)) k++;
    if (!*k) return bad(where, "has unknown member '%.80s'", m->key);
  }
  return TSR_SUCCESS;
}

static tsr_status_t object(const tsr_json_t* node, const char* where) {
  return node->kind == TSR_JSON_OBJECT ? TSR_SUCCESS
                                       : bad(where, "is %s, not a JSON object", tsr_json_kind_name(node->kind));
}

/* Member `key` of `kind`; NULL in *out when absent and not `required`. */
static tsr_status_t member(const tsr_json_t* obj, const char* key, tsr_json_kind_t kind, bool required, const char* where,
                           const tsr_json_t** out) {
  *out = tsr_json_member(obj, key);
  if (!*out) return required ? bad(where, "has no '%s'", key) : TSR_SUCCESS;
  if ((*out)->kind != kind)
    return bad(where, "'%s' is %s, not %s", key, tsr_json_kind_name((*out)->kind), tsr_json_kind_name(kind));
  return TSR_SUCCESS;
}

static tsr_status_t copy_string(reader_t* r, const tsr_json_t* node, const char* where, const char* what,
                                const char** out) {
  if (node->kind != TSR_JSON_STRING) return bad(where, "%s is %s, not a string", what, tsr_json_kind_name(node->kind));
  if (strlen(node->str) != node->len) return bad(where, "%s holds a NUL character", what);
  char* s = tsr_arena_strndup(r->arena, node->str, node->len);
  if (!s) return oom();
  *out = s;
  return TSR_SUCCESS;
}

static tsr_status_t string_member(reader_t* r, const tsr_json_t* obj, const char* key, bool required, const char* where,
                                  const char** out) {
  const tsr_json_t* node;
  *out = NULL;
  TRY(member(obj, key, TSR_JSON_STRING, required, where, &node));
  if (!node) return TSR_SUCCESS;
  char what[64];
  snprintf(what, sizeof what, "'%s'", key);
  return copy_string(r, node, where, what, out);
}

static tsr_status_t int_member(const tsr_json_t* obj, const char* key, bool required, int64_t fallback,
                               const char* where, int64_t* out) {
  const tsr_json_t* node;
  TRY(member(obj, key, TSR_JSON_INT, required, where, &node));
  *out = node ? node->i : fallback;
  return TSR_SUCCESS;
}

static tsr_status_t expr(reader_t* r, const tsr_json_t* node, const char* where, const char* what, tsr_expr_t* out) {
  const char* text;
  TRY(copy_string(r, node, where, what, &text));
  char why[160];
  if (!tsr_expr_compile(text, &r->plan->symbols, out, why, sizeof why)) {
    if (strcmp(why, "out of memory") == 0) return oom();
    return bad(where, "%s: extent expression '%.120s': %s", what, text, why);
  }
  return TSR_SUCCESS;
}

static tsr_status_t expr_member(reader_t* r, const tsr_json_t* obj, const char* key, const char* fallback,
                                const char* where, tsr_expr_t* out) {
  const tsr_json_t* node;
  TRY(member(obj, key, TSR_JSON_STRING, !fallback, where, &node));
  char what[64];
  snprintf(what, sizeof what, "'%s'", key);
  if (node) return expr(r, node, where, what, out);
  char why[160];
  if (!tsr_expr_compile(fallback, &r->plan->symbols, out, why, sizeof why)) return oom();
  return TSR_SUCCESS;
}

/* A list member of `n` items (any number when n is 0); absent and not `required`: none. */
static tsr_status_t list_member(const tsr_json_t* obj, const char* key, bool required, uint32_t n, const char* where,
                                const tsr_json_t** out) {
  TRY(member(obj, key, TSR_JSON_ARRAY, required, where, out));
  if (*out && n && (*out)->count != n) return bad(where, "'%s' must have %u items, not %u", key, n, (*out)->count);
  return TSR_SUCCESS;
}

static tsr_status_t expr_list(reader_t* r, const tsr_json_t* obj, const char* key, bool required, uint32_t n,
                              const char* where, uint32_t* count, tsr_expr_t** out) {
  const tsr_json_t* list;
  TRY(list_member(obj, key, required, n, where, &list));
  *count = list ? list->count : 0;
  ALLOC(r, *out, *count);
  uint32_t i = 0;
  for (const tsr_json_t* item = list ? list->first : NULL; item; item = item->next, i++) {
    char what[64];
    snprintf(what, sizeof what, "'%s' item %u", key, i);
    TRY(expr(r, item, where, what, &(*out)[i]));
  }
  return TSR_SUCCESS;
}

static tsr_status_t string_list(reader_t* r, const tsr_json_t* obj, const char* key, const char* where,
                                uint32_t* count, const char*** out) {
  const tsr_json_t* list;
  TRY(list_member(obj, key, true, 0, where, &list));
  *count = list->count;
  ALLOC(r, *out, *count);
  uint32_t i = 0;
  for (const tsr_json_t* item = list->first; item; item = item->next, i++) {
    char what[64];
    snprintf(what, sizeof what, "'%s' item %u", key, i);
    TRY(copy_string(r, item, where, what, &(*out)[i]));
  }
  return TSR_SUCCESS;
}

static tsr_status_t block_member(const tsr_json_t* obj, const char* where, int64_t block[3]) {
  const tsr_json_t* list;
  TRY(list_member(obj, "block", true, 3, where, &list));
  int i = 0;
  for (const tsr_json_t* item = list->first; item; item = item->next, i++) {
    if (item->kind != TSR_JSON_INT) return bad(where, "'block' must be 3 integers, item %d is %s", i,
                                               tsr_json_kind_name(item->kind));
    block[i] = item->i;
  }
  return TSR_SUCCESS;
}

static tsr_status_t launch(reader_t* r, const tsr_json_t* obj, const char* where, tsr_plan_launch_t* out) {
  TRY(block_member(obj, where, out->block));
  uint32_t n;
  tsr_expr_t* grid;
  TRY(expr_list(r, obj, "grid", true, 3, where, &n, &grid));
  memcpy(out->grid, grid, sizeof out->grid);
  return TSR_SUCCESS;
}

/* ---- values ------------------------------------------------------------------------------------------------- */

static int by_id(const void* a, const void* b, void* values) {
  const tsr_plan_value_t* v = values;
  return strcmp(v[*(const uint32_t*)a].id, v[*(const uint32_t*)b].id);
}

/* C11's qsort passes no context to its comparison: a merge sort of indices by their values' ids. */
static void sort_ids(uint32_t* idx, uint32_t* tmp, uint32_t n, const tsr_plan_value_t* values) {
  if (n < 2) return;
  uint32_t h = n / 2;
  sort_ids(idx, tmp, h, values);
  sort_ids(idx + h, tmp, n - h, values);
  uint32_t i = 0, j = h, k = 0;
  while (i < h && j < n) tmp[k++] = by_id(&idx[j], &idx[i], (void*)values) < 0 ? idx[j++] : idx[i++];
  while (i < h) tmp[k++] = idx[i++];
  while (j < n) tmp[k++] = idx[j++];
  memcpy(idx, tmp, n * sizeof *idx);
}

static tsr_status_t value_index(reader_t* r, const char* id, const char* where, uint32_t* out) {
  uint32_t lo = 0, hi = r->fn->value_count;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    int c = strcmp(r->fn->values[r->by_id[mid]].id, id);
    if (c == 0) {
      *out = r->by_id[mid];
      return TSR_SUCCESS;
    }
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return bad(where, "uses value '%.80s', which the function's 'values' do not list", id);
}

static tsr_status_t value_ref(reader_t* r, const tsr_json_t* obj, const char* key, const char* where, uint32_t* out) {
  const char* id;
  TRY(string_member(r, obj, key, true, where, &id));
  return value_index(r, id, where, out);
}

static tsr_status_t value_refs(reader_t* r, const tsr_json_t* obj, const char* key, const char* where,
                               uint32_t* count, uint32_t** out) {
  const char** ids;
  TRY(string_list(r, obj, key, where, count, &ids));
  ALLOC(r, *out, *count);
  for (uint32_t i = 0; i < *count; i++) TRY(value_index(r, ids[i], where, &(*out)[i]));
  return TSR_SUCCESS;
}

static tsr_status_t read_value(reader_t* r, const tsr_json_t* doc, const char* where, tsr_plan_value_t* v) {
  static const char* const known[] = {"dtype", "dims", "buffer", "declared", NULL};
  TRY(object(doc, where));
  TRY(members_known(doc, where, known));
  TRY(string_member(r, doc, "dtype", true, where, &v->dtype));
  TRY(string_member(r, doc, "declared", false, where, &v->declared));
  TRY(expr_list(r, doc, "dims", true, 0, where, &v->rank, &v->dims));
  v->has_buffer = tsr_json_member(doc, "buffer") != NULL;
  return int_member(doc, "buffer", false, 0, where, &v->buffer);
}

/* ---- steps -------------------------------------------------------------------------------------------------- */

static tsr_status_t read_tensor(reader_t* r, const tsr_json_t* doc, const char* where, tsr_plan_tensor_t* t) {
  static const char* const known[] = {"value", "view", NULL};
  TRY(object(doc, where));
  TRY(members_known(doc, where, known));
  TRY(value_ref(r, doc, "value", where, &t->value));
  const char* view;
  TRY(string_member(r, doc, "view", true, where, &view));
  for (int i = 0; i < 6; i++)
    if (strcmp(view, tsr_plan_view_names[i]) == 0) return t->view = (tsr_plan_view_t)i, TSR_SUCCESS;
  return bad(where, "view '%.40s' is not one of matrix, cols, rows, scalar, bmn, bnm", view);
}

static tsr_status_t read_view_step(reader_t* r, const tsr_json_t* doc, const char* where, tsr_plan_step_t* s) {
  static const char* const known[] = {"kernel", "source", "block", "grid", "tensors", "R", "C", "B", "scalars", NULL};
  TRY(members_known(doc, where, known));
  s->kind = TSR_PLAN_STEP_VIEW;
  const tsr_json_t* tensors;
  TRY(list_member(doc, "tensors", true, 0, where, &tensors));
  s->tensor_count = tensors->count;
  ALLOC(r, s->tensors, s->tensor_count);
  uint32_t i = 0;
  for (const tsr_json_t* t = tensors->first; t; t = t->next, i++) {
    char at[WHERE];
    place(at, "%s: tensor %u", where, i);
    TRY(read_tensor(r, t, at, &s->tensors[i]));
  }
  TRY(expr_member(r, doc, "R", NULL, where, &s->R));
  TRY(expr_member(r, doc, "C", NULL, where, &s->C));
  TRY(expr_member(r, doc, "B", "1", where, &s->B));
  return expr_list(r, doc, "scalars", false, 0, where, &s->scalar_count, &s->scalars);
}

static tsr_status_t read_arg(reader_t* r, const tsr_json_t* doc, const char* where, tsr_plan_arg_t* a) {
  TRY(object(doc, where));
  if (tsr_json_member(doc, "value")) {
    static const char* const known[] = {"value", "shape", NULL};
    TRY(members_known(doc, where, known));
    a->kind = TSR_PLAN_ARG_TENSOR;
    TRY(value_ref(r, doc, "value", where, &a->value));
    return expr_list(r, doc, "shape", true, 0, where, &a->rank, &a->shape);
  }
  if (tsr_json_member(doc, "f32")) {
    static const char* const known[] = {"f32", NULL};
    TRY(members_known(doc, where, known));
    const tsr_json_t* f = tsr_json_member(doc, "f32");
    if (f->kind != TSR_JSON_INT && f->kind != TSR_JSON_REAL)
      return bad(where, "'f32' is %s, not a number", tsr_json_kind_name(f->kind));
    a->kind = TSR_PLAN_ARG_F32;
    a->f32 = f->kind == TSR_JSON_INT ? (double)f->i : f->real;
    return TSR_SUCCESS;
  }
  static const char* const known[] = {"i64", NULL};
  TRY(members_known(doc, where, known));
  a->kind = TSR_PLAN_ARG_I64;
  return expr_member(r, doc, "i64", NULL, where, &a->i64);
}

static tsr_status_t read_multiple(reader_t* r, const tsr_json_t* doc, const char* where, tsr_plan_multiple_t* m) {
  if (doc->kind != TSR_JSON_ARRAY || doc->count != 3 || doc->first->kind != TSR_JSON_STRING ||
      doc->first->next->kind != TSR_JSON_INT || doc->first->next->next->kind != TSR_JSON_STRING)
    return bad(where, "must be [expression, integer, reason]");
  TRY(expr(r, doc->first, where, "the expression", &m->expr));
  m->m = doc->first->next->i;
  return copy_string(r, doc->first->next->next, where, "the reason", &m->reason);
}

static tsr_status_t read_alternative(reader_t* r, const tsr_json_t* doc, const char* where, tsr_plan_alternative_t* a) {
  static const char* const known[] = {"when", "kernel", "grid", "block", "smem", NULL};
  TRY(object(doc, where));
  TRY(members_known(doc, where, known));
  TRY(expr_member(r, doc, "when", NULL, where, &a->when));
  TRY(string_member(r, doc, "kernel", true, where, &a->kernel));
  TRY(launch(r, doc, where, &a->launch));
  return int_member(doc, "smem", false, 0, where, &a->smem);
}

static tsr_status_t read_args_step(reader_t* r, const tsr_json_t* doc, const char* where, tsr_plan_step_t* s) {
  static const char* const known[] = {"kernel", "source", "block", "grid", "env", "args", "batch", "smem",
                                      "multiple_of", "prefer", NULL};
  TRY(members_known(doc, where, known));
  s->kind = TSR_PLAN_STEP_ARGS;
  const tsr_json_t *env, *list;
  TRY(member(doc, "env", TSR_JSON_OBJECT, true, where, &env));
  s->env_count = env->count;
  ALLOC(r, s->env, s->env_count);
  uint32_t i = 0;
  for (const tsr_json_t* e = env->first; e; e = e->next, i++) {
    tsr_plan_env_t* entry = &s->env[i];
    if (strlen(e->key) != e->key_len) return bad(where, "an 'env' name holds a NUL character");
    if (!(entry->name = tsr_arena_strndup(r->arena, e->key, e->key_len))) return oom();
    int64_t sym = tsr_symbols_intern(&r->plan->symbols, e->key, e->key_len);
    if (sym < 0) return oom();
    entry->symbol = (uint32_t)sym;
    char what[128];
    snprintf(what, sizeof what, "env '%.80s'", e->key);
    TRY(expr(r, e, where, what, &entry->expr));
  }
  TRY(list_member(doc, "args", true, 0, where, &list));
  s->arg_count = list->count;
  ALLOC(r, s->args, s->arg_count);
  i = 0;
  for (const tsr_json_t* a = list->first; a; a = a->next, i++) {
    char at[WHERE];
    place(at, "%s: argument %u", where, i);
    TRY(read_arg(r, a, at, &s->args[i]));
  }
  const char* batch;
  TRY(string_member(r, doc, "batch", false, where, &batch));
  s->batch = -1;
  if (batch) {
    for (i = 0; i < s->env_count && s->batch < 0; i++)
      if (strcmp(s->env[i].name, batch) == 0) s->batch = (int32_t)i;
    if (s->batch < 0) return bad(where, "runs per entry of '%.80s', which its env does not define", batch);
  }
  TRY(int_member(doc, "smem", false, 0, where, &s->smem));
  TRY(list_member(doc, "multiple_of", false, 0, where, &list));
  s->multiple_count = list ? list->count : 0;
  ALLOC(r, s->multiple_of, s->multiple_count);
  i = 0;
  for (const tsr_json_t* m = list ? list->first : NULL; m; m = m->next, i++) {
    char at[WHERE];
    place(at, "%s: 'multiple_of' entry %u", where, i);
    TRY(read_multiple(r, m, at, &s->multiple_of[i]));
  }
  TRY(list_member(doc, "prefer", false, 0, where, &list));
  s->prefer_count = list ? list->count : 0;
  ALLOC(r, s->prefer, s->prefer_count);
  i = 0;
  for (const tsr_json_t* a = list ? list->first : NULL; a; a = a->next, i++) {
    char at[WHERE];
    place(at, "%s: 'prefer' alternative %u", where, i);
    TRY(read_alternative(r, a, at, &s->prefer[i]));
  }
  return TSR_SUCCESS;
}

/* The index of `name` among `n` names; -1 if none. */
static int name_index(const char* name, const char* const* names, int n) {
  for (int i = 0; i < n; i++)
    if (strcmp(name, names[i]) == 0) return i;
  return -1;
}

static tsr_status_t named_member(reader_t* r, const tsr_json_t* doc, const char* key, const char* const* names, int n,
                                 const char* where, int* out) {
  const char* name;
  TRY(string_member(r, doc, key, true, where, &name));
  if ((*out = name_index(name, names, n)) >= 0) return TSR_SUCCESS;
  char list[160] = "";
  for (int i = 0; i < n; i++) snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
  return bad(where, "%s '%.80s' is not one of %s", key, name, list);
}

/* A collective step (version 5), checked as tessera.plan._check_collective and _check_names check it. */
static tsr_status_t read_collective(reader_t* r, const tsr_json_t* doc, const char* at, tsr_plan_step_t* s) {
  s->kind = TSR_PLAN_STEP_COLLECTIVE;
  int kind;
  TRY(named_member(r, doc, "collective", tsr_plan_collective_names, 4, at, &kind));
  s->collective = (tsr_plan_collective_t)kind;
  char where[WHERE];
  place(where, "%s (%s)", at, tsr_plan_collective_names[kind]);
  if (r->version < 5) return bad(where, "a collective step, which version 5 introduced, in a plan of version %d",
                                 r->version);
  bool reduces = s->collective == TSR_PLAN_ALL_REDUCE || s->collective == TSR_PLAN_REDUCE_SCATTER;
  bool has_dim = s->collective == TSR_PLAN_REDUCE_SCATTER || s->collective == TSR_PLAN_ALL_GATHER;
  bool has_root = s->collective == TSR_PLAN_BROADCAST;
  static const char* const known[] = {"collective", "input", "output", "mesh_axes", "mesh_shape", "axis", NULL};
  static const char* const known_reducing[] = {"collective", "input", "output", "mesh_axes", "mesh_shape", "axis",
                                               "reduce", "dim", "deterministic", "algo", NULL};
  static const char* const known_gather[] = {"collective", "input", "output", "mesh_axes", "mesh_shape", "axis",
                                             "dim", NULL};
  static const char* const known_broadcast[] = {"collective", "input", "output", "mesh_axes", "mesh_shape", "axis",
                                                "root", NULL};
  const char* const* k = reduces ? known_reducing : has_dim ? known_gather : has_root ? known_broadcast : known;
  TRY(members_known(doc, where, k));
  if (s->collective == TSR_PLAN_ALL_REDUCE && tsr_json_member(doc, "dim"))
    return bad(where, "has unknown member 'dim'");
  TRY(value_ref(r, doc, "input", where, &s->input));
  TRY(value_ref(r, doc, "output", where, &s->output));
  TRY(string_list(r, doc, "mesh_axes", where, &s->mesh_rank, &s->mesh_axes));
  const tsr_json_t* shape;
  TRY(list_member(doc, "mesh_shape", true, 0, where, &shape));
  if (!s->mesh_rank || shape->count != s->mesh_rank)
    return bad(where, "mesh_axes and mesh_shape must name the same number of axes, at least one (%u and %u)",
               s->mesh_rank, shape->count);
  ALLOC(r, s->mesh_shape, s->mesh_rank);
  uint32_t i = 0;
  for (const tsr_json_t* n = shape->first; n; n = n->next, i++) {
    if (n->kind != TSR_JSON_INT || n->i < 1) return bad(where, "mesh_shape must hold positive sizes, item %u is not one", i);
    s->mesh_shape[i] = n->i;
    for (uint32_t j = 0; j < i; j++)
      if (strcmp(s->mesh_axes[i], s->mesh_axes[j]) == 0)
        return bad(where, "mesh axis '%.80s' is named twice", s->mesh_axes[i]);
  }
  const char* axis;
  TRY(string_member(r, doc, "axis", true, where, &axis));
  int a = name_index(axis, s->mesh_axes, (int)s->mesh_rank);
  if (a < 0) return bad(where, "axis '%.80s' is not an axis of the mesh", axis);
  s->axis = (uint32_t)a;
  if (reduces) {
    int reduce, algo;
    TRY(named_member(r, doc, "reduce", tsr_plan_reduce_names, 5, where, &reduce));
    TRY(named_member(r, doc, "algo", tsr_plan_algo_names, 4, where, &algo));
    s->reduce = (tsr_plan_reduce_t)reduce;
    s->algo = (uint32_t)algo;
    const tsr_json_t* det = tsr_json_member(doc, "deterministic");
    if (!det || (det->kind != TSR_JSON_TRUE && det->kind != TSR_JSON_FALSE))
      return bad(where, "'deterministic' must be true or false");
    s->deterministic = det->kind == TSR_JSON_TRUE;
  }
  TRY(int_member(doc, "dim", has_dim, 0, where, &s->dim));
  TRY(int_member(doc, "root", has_root, 0, where, &s->root));
  const tsr_plan_value_t *x = &r->fn->values[s->input], *y = &r->fn->values[s->output];
  if (strcmp(x->dtype, y->dtype) != 0 || x->rank != y->rank)
    return bad(where, "from '%.80s' to '%.80s': the dtype and rank must be kept", x->id, y->id);
  if (has_dim && (s->dim < 0 || s->dim >= x->rank))
    return bad(where, "dim %lld is not an axis of the rank-%u tensor '%.80s'", (long long)s->dim, x->rank, x->id);
  if (has_root && (s->root < 0 || s->root >= s->mesh_shape[s->axis]))
    return bad(where, "root %lld is not an index along axis '%.80s' (0..%lld)", (long long)s->root, axis,
               (long long)s->mesh_shape[s->axis] - 1);
  return TSR_SUCCESS;
}

/* Whether dtypes `a` and `b` are a complex one and its part (c64 and f32, c128 and f64): numpy's complex
 * layout, so an alias may view either as the other (passes/fourier.py). */
static bool complex_view(const char* a, const char* b) {
  static const char* const pairs[][2] = {{"c64", "f32"}, {"c128", "f64"}};
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
    if ((strcmp(a, pairs[i][0]) == 0 && strcmp(b, pairs[i][1]) == 0) ||
        (strcmp(b, pairs[i][0]) == 0 && strcmp(a, pairs[i][1]) == 0))
      return true;
  return false;
}

static tsr_status_t read_step(reader_t* r, const tsr_json_t* doc, const char* at, tsr_plan_step_t* s) {
  TRY(object(doc, at));
  if (tsr_json_member(doc, "alias")) {
    static const char* const known[] = {"alias", "of", "offset", NULL};
    TRY(members_known(doc, at, known));
    s->kind = TSR_PLAN_STEP_ALIAS;
    TRY(value_ref(r, doc, "alias", at, &s->alias));
    TRY(value_ref(r, doc, "of", at, &s->of));
    s->has_offset = tsr_json_member(doc, "offset") != NULL;  /* its presence makes a window, even "0" */
    TRY(expr_member(r, doc, "offset", "0", at, &s->offset));
    if (s->has_offset && r->version < 6)
      return bad(at, "an alias step with an offset, which version 6 introduced, in a plan of version %d", r->version);
    const tsr_plan_value_t *a = &r->fn->values[s->alias], *o = &r->fn->values[s->of];
    if (strcmp(a->dtype, o->dtype) != 0 && (s->has_offset || !complex_view(a->dtype, o->dtype)))
      /* an offset counts elements of `of`'s dtype; a view keeps it, or sees a complex value as its parts */
      return bad(at, "alias '%.80s' of '%.80s': an alias has its storage's dtype (%s is not %s)", a->id, o->id,
                 a->dtype, o->dtype);
    return TSR_SUCCESS;
  }
  if (tsr_json_member(doc, "call")) {
    static const char* const known[] = {"call", "args", "results", NULL};
    TRY(members_known(doc, at, known));
    s->kind = TSR_PLAN_STEP_CALL;
    TRY(string_member(r, doc, "call", true, at, &s->call));
    if (r->version < 4) return bad(at, "a call step, which version 4 introduced, in a plan of version %d", r->version);
    char where[WHERE];
    place(where, "%s (call of '%.80s')", at, s->call);
    TRY(value_refs(r, doc, "args", where, &s->call_arg_count, &s->call_args));
    return value_refs(r, doc, "results", where, &s->call_result_count, &s->call_results);
  }
  if (tsr_json_member(doc, "collective")) return read_collective(r, doc, at, s);
  TRY(string_member(r, doc, "kernel", true, at, &s->kernel));
  char where[WHERE];
  place(where, "%s ('%.80s')", at, s->kernel);
  TRY(launch(r, doc, where, &s->launch));
  TRY(string_member(r, doc, "source", false, where, &s->source));
  return tsr_json_member(doc, "args") ? read_args_step(r, doc, where, s) : read_view_step(r, doc, where, s);
}

/* ---- functions ---------------------------------------------------------------------------------------------- */

/* An optional member of pairs of extent expressions (`what` says what its entries are, for messages). */
static tsr_status_t read_pairs(reader_t* r, const tsr_json_t* doc, const char* where, const char* member,
                               const char* what, tsr_expr_t (**out)[2], uint32_t* count) {
  const tsr_json_t* list;
  TRY(list_member(doc, member, false, 0, where, &list));
  *count = list ? list->count : 0;
  ALLOC(r, *out, *count);
  char label[40];
  snprintf(label, sizeof label, "'%s'", member);
  uint32_t i = 0;
  for (const tsr_json_t* p = list ? list->first : NULL; p; p = p->next, i++) {
    if (p->kind != TSR_JSON_ARRAY || p->count != 2 || p->first->kind != TSR_JSON_STRING ||
        p->first->next->kind != TSR_JSON_STRING)
      return bad(where, "'%s' entry %u must be two extent %s", member, i, what);
    TRY(expr(r, p->first, where, label, &(*out)[i][0]));
    TRY(expr(r, p->first->next, where, label, &(*out)[i][1]));
  }
  return TSR_SUCCESS;
}

/* ---- operator records (version 8; tessera.plan.check_operator's rules) ----------------------------------- */

static const char* const op_reprs[] = {"dense", "factor", "implicit", "blocksparse"};  /* = tess_op_repr_t */
static const uint32_t op_payloads[] = {1, 3, 1, 3};
static const char* const op_flags[] = {"unitary", "self_adjoint", "normal", "adjoint", "recursion"};  /* bit i */
static const char* const op_decompositions[] = {"none", "svd", "eig", "eigh"};  /* = TESS_OP_DECOMP_* */
static const char* const op_tags[] = {"none", "diag", "conv1d"};                /* = TESS_OP_TAG_* */

static tsr_status_t read_operator(reader_t* r, const tsr_json_t* doc, const char* at, const tsr_plan_function_t* f,
                                  tsr_operator_spec_t* o) {
  static const char* const known[] = {"name", "role", "repr", "tag", "flags", "payload", "decomposition",
                                      "frame_bytes", "depth", NULL};
  TRY(object(doc, at));
  TRY(members_known(doc, at, known));
  const char *role, *repr, *tag, *decomposition;
  TRY(string_member(r, doc, "name", true, at, &o->name));
  TRY(string_member(r, doc, "role", true, at, &role));
  TRY(string_member(r, doc, "repr", true, at, &repr));
  TRY(string_member(r, doc, "tag", true, at, &tag));
  TRY(string_member(r, doc, "decomposition", false, at, &decomposition));
  if (strcmp(role, "param") && strcmp(role, "result")) return bad(at, "role '%.80s' is not 'param' or 'result'", role);
  o->is_result = strcmp(role, "result") == 0;
  int k = name_index(repr, op_reprs, 4);
  if (k < 0) return bad(at, "repr '%.80s' is not one of dense, factor, implicit, blocksparse", repr);
  o->repr = (tess_op_repr_t)k;
  int t = name_index(tag, op_tags, 3);
  if (t < 0 || (o->repr == TESS_OP_IMPLICIT) != (t != 0))
    return bad(at, "tag '%.80s' is not one of %s (a %s operator)", tag,
               o->repr == TESS_OP_IMPLICIT ? "diag, conv1d" : "none", repr);
  o->tag = (uint32_t)t;
  if ((o->repr == TESS_OP_FACTOR) != (decomposition != NULL))
    return bad(at, o->repr == TESS_OP_FACTOR
                       ? "a factor (spectral) operator, and only one, declares its decomposition (ABI spec §5.3)"
                       : "only a factor operator declares a decomposition, not a %s one", repr);
  if (decomposition) {
    int d = name_index(decomposition, op_decompositions, 4);
    if (d < 1) return bad(at, "decomposition '%.80s' is not one of svd, eig, eigh", decomposition);
    o->tag = (uint32_t)d;
  }
  const tsr_json_t *list, *item;
  TRY(member(doc, "flags", TSR_JSON_ARRAY, true, at, &list));
  o->flags = 0;
  for (item = list->first; item; item = item->next) {
    const char* flag;
    TRY(copy_string(r, item, at, "a flag", &flag));
    int b = name_index(flag, op_flags, 5);
    if (b < 0) return bad(at, "flag '%.80s' is not one of unitary, self_adjoint, normal, adjoint, recursion", flag);
    if (o->flags >> b) return bad(at, "flag '%s' repeats or comes out of the order unitary, self_adjoint, normal, "
                                      "adjoint, recursion", flag);
    o->flags |= 1u << b;
  }
  TRY(member(doc, "payload", TSR_JSON_ARRAY, true, at, &list));
  if (list->count != op_payloads[k])
    return bad(at, "a %s operator carries %u payload tensor(s), not %u", repr, op_payloads[k], (unsigned)list->count);
  o->payload_count = op_payloads[k];
  uint32_t count = o->is_result ? f->result_count : f->arg_count, i = 0;
  for (item = list->first; item; item = item->next, i++) {
    if (item->kind != TSR_JSON_INT || item->i < 0 || item->i >= (int64_t)count)
      return bad(at, "payload index %u is not one of the function's %u %s", i, count,
                 o->is_result ? "results" : "parameters");
    o->payload[i] = (uint32_t)item->i;
  }
  int64_t frame, depth;
  bool recursion = (o->flags & TESS_OP_FLAG_RECURSION) != 0;
  TRY(int_member(doc, "frame_bytes", false, -1, at, &frame));
  TRY(int_member(doc, "depth", false, -1, at, &depth));
  if (recursion != (frame != -1) || recursion != (depth != -1))
    return bad(at, "a recursion operator, and only one, declares frame_bytes and depth (ABI spec §5.3)");
  if (recursion && (frame < 1 || depth < 1 || depth > UINT32_MAX))
    return bad(at, "frame_bytes %lld and depth %lld must be positive", (long long)frame, (long long)depth);
  o->frame_bytes = recursion ? (uint64_t)frame : 0;
  o->depth = recursion ? (uint32_t)depth : 0;
  return TSR_SUCCESS;
}

static tsr_status_t read_operators(reader_t* r, const tsr_json_t* doc, const char* where, tsr_plan_function_t* f) {
  const tsr_json_t* list;
  TRY(list_member(doc, "operators", false, 0, where, &list));
  if (!list) return TSR_SUCCESS;
  f->operator_count = list->count;
  ALLOC(r, f->operators, f->operator_count + 1);
  uint32_t i = 0;
  for (const tsr_json_t* o = list->first; o; o = o->next, i++) {
    char at[WHERE];
    place(at, "%s: operator %u", where, i);
    TRY(read_operator(r, o, at, f, &f->operators[i]));
    for (uint32_t j = 0; j < i; j++)  /* a tensor is the payload of one operator */
      for (uint32_t a = 0; a < f->operators[i].payload_count; a++)
        for (uint32_t b = 0; b < f->operators[j].payload_count; b++)
          if (f->operators[i].is_result == f->operators[j].is_result &&
              f->operators[i].payload[a] == f->operators[j].payload[b])
            return bad(at, "%s %u is the payload of another operator too",
                       f->operators[i].is_result ? "result" : "param", f->operators[i].payload[a]);
  }
  return TSR_SUCCESS;
}

static tsr_status_t read_function(reader_t* r, const tsr_json_t* doc, tsr_plan_function_t* f) {
  static const char* const known[] = {"params", "args", "results", "values", "steps", "fallbacks", "outputs",
                                      "same_extents", "broadcasts", "operators", NULL};
  char where[WHERE];
  place(where, "function '%.80s'", f->name);
  TRY(object(doc, where));
  TRY(members_known(doc, where, known));
  const tsr_json_t *values, *list;
  TRY(member(doc, "values", TSR_JSON_OBJECT, true, where, &values));
  f->value_count = values->count;
  ALLOC(r, f->values, f->value_count);
  uint32_t i = 0;
  for (const tsr_json_t* v = values->first; v; v = v->next, i++) {
    char at[WHERE];
    place(at, "%s: value '%.80s'", where, v->key);
    if (strlen(v->key) != v->key_len) return bad(at, "the id holds a NUL character");
    if (!(f->values[i].id = tsr_arena_strndup(r->arena, v->key, v->key_len))) return oom();
    TRY(read_value(r, v, at, &f->values[i]));
  }
  uint32_t* tmp;
  ALLOC(r, r->by_id, f->value_count);
  ALLOC(r, tmp, f->value_count);
  for (i = 0; i < f->value_count; i++) r->by_id[i] = i;
  sort_ids(r->by_id, tmp, f->value_count, f->values);
  r->fn = f;

  TRY(string_list(r, doc, "params", where, &f->param_count, &f->params));
  TRY(value_refs(r, doc, "args", where, &f->arg_count, &f->args));
  TRY(value_refs(r, doc, "results", where, &f->result_count, &f->results));
  bool* may_declare;  /* only an argument or a result (an i4 one, returned as its bytes) has a declared dtype */
  ALLOC(r, may_declare, f->value_count);
  for (i = 0; i < f->arg_count; i++) may_declare[f->args[i]] = true;
  for (i = 0; i < f->result_count; i++) may_declare[f->results[i]] = true;
  for (i = 0; i < f->value_count; i++)
    if (f->values[i].declared && !may_declare[i])
      return bad(where, "value '%.80s' has a 'declared' dtype, which only an argument or a result has",
                 f->values[i].id);
  TRY(list_member(doc, "steps", true, 0, where, &list));
  f->step_count = list->count;
  ALLOC(r, f->steps, f->step_count);
  i = 0;
  for (const tsr_json_t* s = list->first; s; s = s->next, i++) {
    char at[WHERE];
    place(at, "%s: step %u", where, i);
    TRY(read_step(r, s, at, &f->steps[i]));
  }
  TRY(string_list(r, doc, "fallbacks", where, &f->fallback_count, &f->fallbacks));
  TRY(list_member(doc, "outputs", true, 0, where, &list));
  f->output_count = list->count;
  ALLOC(r, f->outputs, f->output_count);
  i = 0;
  for (const tsr_json_t* o = list->first; o; o = o->next, i++) {
    if (o->kind != TSR_JSON_INT) return bad(where, "'outputs' must hold integers, item %u is %s", i,
                                            tsr_json_kind_name(o->kind));
    f->outputs[i] = o->i;
  }
  TRY(read_pairs(r, doc, where, "same_extents", "names", &f->same_extents, &f->same_count));
  for (i = 0; i < f->same_count; i++)
    for (int k = 0; k < 2; k++) {  /* each must be an extent some argument binds */
      const char* name = f->same_extents[i][k].text;
      bool bound = false;
      for (uint32_t a = 0; a < f->arg_count && !bound; a++)
        for (uint32_t d = 0; d < f->values[f->args[a]].rank && !bound; d++)
          bound = strcmp(f->values[f->args[a]].dims[d].text, name) == 0;
      if (!bound) return bad(where, "same_extents names '%.80s', which no argument's extents bind", name);
    }
  if (tsr_json_member(doc, "broadcasts") && r->version < 7)
    return bad(where, "'broadcasts', which version 7 introduced, in a plan of version %d", r->version);
  TRY(read_pairs(r, doc, where, "broadcasts", "expressions", &f->broadcasts, &f->broadcast_count));
  if (tsr_json_member(doc, "operators") && r->version < 8)
    return bad(where, "'operators', which version 8 introduced, in a plan of version %d", r->version);
  return read_operators(r, doc, where, f);
}

tsr_status_t tsr_plan_read(const void* data, size_t size, tsr_plan_t** out) {
  if (!out) return tsr_fail_null_output(__func__);
  *out = NULL;
  tsr_arena_t scratch = {0};
  tsr_json_t* doc;
  tsr_status_t s = tsr_json_parse(data, size, &scratch, "launch plan: not valid JSON", &doc);
  if (s) {
    tsr_arena_release(&scratch);
    return s;
  }
  static const char* const known[] = {"version", "functions", NULL};
  const tsr_json_t* version = doc->kind == TSR_JSON_OBJECT ? tsr_json_member(doc, "version") : NULL;
  const tsr_json_t* functions;
  if (doc->kind != TSR_JSON_OBJECT) s = bad("", "the document is %s, not a JSON object", tsr_json_kind_name(doc->kind));
  else if (!version || version->kind != TSR_JSON_INT || version->i < TSR_PLAN_VERSION_MIN ||
           version->i > TSR_PLAN_VERSION) {
    char found[32] = "none";
    if (version && version->kind == TSR_JSON_INT) snprintf(found, sizeof found, "%lld", (long long)version->i);
    else if (version) snprintf(found, sizeof found, "%s", tsr_json_kind_name(version->kind));
    s = bad("", "version %s is not one of %d to %d, the versions this runtime reads", found, TSR_PLAN_VERSION_MIN,
            TSR_PLAN_VERSION);
  } else if (!(s = members_known(doc, "the document", known))) {
    s = member(doc, "functions", TSR_JSON_OBJECT, true, "the document", &functions);
  }
  tsr_plan_t* plan = s ? NULL : calloc(1, sizeof *plan);
  if (!s && !plan) s = oom();
  if (!s) {
    tsr_symbols_init(&plan->symbols, &plan->arena);
    reader_t r = {plan, &plan->arena, NULL, NULL, (int)version->i};
    plan->function_count = functions->count;
    plan->functions = tsr_arena_array(&plan->arena, plan->function_count, sizeof *plan->functions);
    if (!plan->functions) s = oom();
    uint32_t i = 0;
    for (const tsr_json_t* f = functions->first; f && !s; f = f->next, i++) {
      if (strlen(f->key) != f->key_len) s = bad("", "a function's name holds a NUL character");
      else if (!(plan->functions[i].name = tsr_arena_strndup(&plan->arena, f->key, f->key_len))) s = oom();
      else s = read_function(&r, f, &plan->functions[i]);
    }
  }
  tsr_arena_release(&scratch);
  if (s) {
    tsr_plan_free(plan);
    return s;
  }
  *out = plan;
  return TSR_SUCCESS;
}

void tsr_plan_free(tsr_plan_t* plan) {
  if (!plan) return;
  tsr_arena_release(&plan->arena);
  free(plan);
}

const tsr_plan_function_t* tsr_plan_find(const tsr_plan_t* plan, const char* name) {
  for (uint32_t i = 0; plan && name && i < plan->function_count; i++)
    if (strcmp(plan->functions[i].name, name) == 0) return &plan->functions[i];
  return NULL;
}

/* ---- the JSON form ------------------------------------------------------------------------------------------ */

static void write_exprs(FILE* out, const tsr_expr_t* e, uint32_t n) {
  fputc('[', out);
  for (uint32_t i = 0; i < n; i++) {
    if (i) fputs(", ", out);
    tsr_json_string(out, e[i].text);
  }
  fputc(']', out);
}

static void write_launch(FILE* out, const tsr_plan_launch_t* l) {
  fprintf(out, "\"block\": [%lld, %lld, %lld], \"grid\": ", (long long)l->block[0], (long long)l->block[1],
          (long long)l->block[2]);
  write_exprs(out, l->grid, 3);
}

/* A double as Python's json.dumps writes a float: shortest text that reads back the same, always with a point
 * or an exponent, NaN and Infinity spelled Python's way. */
static void write_float(FILE* out, double v) {
  if (isnan(v) || isinf(v)) {
    fputs(isnan(v) ? "NaN" : v < 0 ? "-Infinity" : "Infinity", out);
    return;
  }
  char text[40];
  for (int digits = 1; digits <= 17; digits++) {
    snprintf(text, sizeof text, "%.*g", digits, v);
    if (strtod(text, NULL) == v) break;
  }
  fputs(text, out);
  if (!strpbrk(text, ".e")) fputs(".0", out);
}

static void write_ids(FILE* out, const tsr_plan_function_t* f, const uint32_t* ids, uint32_t n) {
  fputc('[', out);
  for (uint32_t i = 0; i < n; i++) {
    if (i) fputs(", ", out);
    tsr_json_string(out, f->values[ids[i]].id);
  }
  fputc(']', out);
}

static void write_collective(FILE* out, const tsr_plan_function_t* f, const tsr_plan_step_t* s) {
  fprintf(out, "{\"collective\": \"%s\", \"input\": ", tsr_plan_collective_names[s->collective]);
  tsr_json_string(out, f->values[s->input].id);
  fputs(", \"output\": ", out);
  tsr_json_string(out, f->values[s->output].id);
  fputs(", \"mesh_axes\": [", out);
  for (uint32_t i = 0; i < s->mesh_rank; i++) {
    if (i) fputs(", ", out);
    tsr_json_string(out, s->mesh_axes[i]);
  }
  fputs("], \"mesh_shape\": [", out);
  for (uint32_t i = 0; i < s->mesh_rank; i++) fprintf(out, "%s%lld", i ? ", " : "", (long long)s->mesh_shape[i]);
  fputs("], \"axis\": ", out);
  tsr_json_string(out, s->mesh_axes[s->axis]);
  bool reduces = s->collective == TSR_PLAN_ALL_REDUCE || s->collective == TSR_PLAN_REDUCE_SCATTER;
  if (reduces) fprintf(out, ", \"reduce\": \"%s\"", tsr_plan_reduce_names[s->reduce]);
  if (s->collective == TSR_PLAN_REDUCE_SCATTER || s->collective == TSR_PLAN_ALL_GATHER)
    fprintf(out, ", \"dim\": %lld", (long long)s->dim);
  if (s->collective == TSR_PLAN_BROADCAST) fprintf(out, ", \"root\": %lld", (long long)s->root);
  if (reduces)
    fprintf(out, ", \"deterministic\": %s, \"algo\": \"%s\"", s->deterministic ? "true" : "false",
            tsr_plan_algo_names[s->algo]);
  fputc('}', out);
}

static void write_step(FILE* out, const tsr_plan_function_t* f, const tsr_plan_step_t* s) {
  if (s->kind == TSR_PLAN_STEP_COLLECTIVE) {
    write_collective(out, f, s);
    return;
  }
  if (s->kind == TSR_PLAN_STEP_CALL) {
    fputs("{\"call\": ", out);
    tsr_json_string(out, s->call);
    fputs(", \"args\": ", out);
    write_ids(out, f, s->call_args, s->call_arg_count);
    fputs(", \"results\": ", out);
    write_ids(out, f, s->call_results, s->call_result_count);
    fputc('}', out);
    return;
  }
  if (s->kind == TSR_PLAN_STEP_ALIAS) {
    fputs("{\"alias\": ", out);
    tsr_json_string(out, f->values[s->alias].id);
    fputs(", \"of\": ", out);
    tsr_json_string(out, f->values[s->of].id);
    if (s->has_offset) {  /* as read: "offset": "0" is a window of the first elements, its absence a reshape */
      fputs(", \"offset\": ", out);
      tsr_json_string(out, s->offset.text);
    }
    fputc('}', out);
    return;
  }
  fputs("{\"kernel\": ", out);
  tsr_json_string(out, s->kernel);
  if (s->source) {
    fputs(", \"source\": ", out);
    tsr_json_string(out, s->source);
  }
  if (s->kind == TSR_PLAN_STEP_VIEW) {
    fputs(", \"tensors\": [", out);
    for (uint32_t i = 0; i < s->tensor_count; i++) {
      fputs(i ? ", {\"value\": " : "{\"value\": ", out);
      tsr_json_string(out, f->values[s->tensors[i].value].id);
      fprintf(out, ", \"view\": \"%s\"}", tsr_plan_view_names[s->tensors[i].view]);
    }
    fputs("], \"R\": ", out);
    tsr_json_string(out, s->R.text);
    fputs(", \"C\": ", out);
    tsr_json_string(out, s->C.text);
    fputs(", ", out);
    write_launch(out, &s->launch);
    if (strcmp(s->B.text, "1") != 0) {
      fputs(", \"B\": ", out);
      tsr_json_string(out, s->B.text);
    }
    if (s->scalar_count) {
      fputs(", \"scalars\": ", out);
      write_exprs(out, s->scalars, s->scalar_count);
    }
    fputc('}', out);
    return;
  }
  fputs(", \"env\": {", out);
  for (uint32_t i = 0; i < s->env_count; i++) {
    if (i) fputs(", ", out);
    tsr_json_string(out, s->env[i].name);
    fputs(": ", out);
    tsr_json_string(out, s->env[i].expr.text);
  }
  fputs("}, \"args\": [", out);
  for (uint32_t i = 0; i < s->arg_count; i++) {
    const tsr_plan_arg_t* a = &s->args[i];
    if (i) fputs(", ", out);
    if (a->kind == TSR_PLAN_ARG_TENSOR) {
      fputs("{\"value\": ", out);
      tsr_json_string(out, f->values[a->value].id);
      fputs(", \"shape\": ", out);
      write_exprs(out, a->shape, a->rank);
    } else if (a->kind == TSR_PLAN_ARG_F32) {
      fputs("{\"f32\": ", out);
      write_float(out, a->f32);
    } else {
      fputs("{\"i64\": ", out);
      tsr_json_string(out, a->i64.text);
    }
    fputc('}', out);
  }
  fputs("], ", out);
  write_launch(out, &s->launch);
  if (s->batch >= 0) {
    fputs(", \"batch\": ", out);
    tsr_json_string(out, s->env[s->batch].name);
  }
  if (s->smem) fprintf(out, ", \"smem\": %lld", (long long)s->smem);
  if (s->multiple_count) {
    fputs(", \"multiple_of\": [", out);
    for (uint32_t i = 0; i < s->multiple_count; i++) {
      fputs(i ? ", [" : "[", out);
      tsr_json_string(out, s->multiple_of[i].expr.text);
      fprintf(out, ", %lld, ", (long long)s->multiple_of[i].m);
      tsr_json_string(out, s->multiple_of[i].reason);
      fputc(']', out);
    }
    fputc(']', out);
  }
  if (s->prefer_count) {
    fputs(", \"prefer\": [", out);
    for (uint32_t i = 0; i < s->prefer_count; i++) {
      const tsr_plan_alternative_t* a = &s->prefer[i];
      fputs(i ? ", {\"when\": " : "{\"when\": ", out);
      tsr_json_string(out, a->when.text);
      fputs(", \"kernel\": ", out);
      tsr_json_string(out, a->kernel);
      fputs(", ", out);
      write_launch(out, &a->launch);
      if (a->smem) fprintf(out, ", \"smem\": %lld", (long long)a->smem);
      fputc('}', out);
    }
    fputc(']', out);
  }
  fputc('}', out);
}

static void write_strings(FILE* out, const char* const* s, uint32_t n) {
  fputc('[', out);
  for (uint32_t i = 0; i < n; i++) {
    if (i) fputs(", ", out);
    tsr_json_string(out, s[i]);
  }
  fputc(']', out);
}

/* An optional member of extent pairs, written only where there are some (as Python's to_json does). */
static void write_pairs(FILE* out, const char* member, const tsr_expr_t (*pairs)[2], uint32_t count) {
  if (!count) return;
  fprintf(out, ", \"%s\": [", member);
  for (uint32_t i = 0; i < count; i++) {
    fputs(i ? ", [" : "[", out);
    tsr_json_string(out, pairs[i][0].text);
    fputs(", ", out);
    tsr_json_string(out, pairs[i][1].text);
    fputc(']', out);
  }
  fputc(']', out);
}

/* The function's operator records, written only where there are some (as Python's to_json does). */
static void write_operators(FILE* out, const tsr_plan_function_t* f) {
  if (!f->operator_count) return;
  fputs(", \"operators\": [", out);
  for (uint32_t i = 0; i < f->operator_count; i++) {
    const tsr_operator_spec_t* o = &f->operators[i];
    fputs(i ? ", {\"name\": " : "{\"name\": ", out);
    tsr_json_string(out, o->name);
    fprintf(out, ", \"role\": \"%s\", \"repr\": \"%s\", \"tag\": \"%s\", \"flags\": [",
            o->is_result ? "result" : "param", op_reprs[o->repr], o->repr == TESS_OP_IMPLICIT ? op_tags[o->tag] : "none");
    for (uint32_t b = 0, n = 0; b < 5; b++)
      if (o->flags & (1u << b)) fprintf(out, "%s\"%s\"", n++ ? ", " : "", op_flags[b]);
    fputs("], \"payload\": [", out);
    for (uint32_t p = 0; p < o->payload_count; p++) fprintf(out, "%s%u", p ? ", " : "", o->payload[p]);
    fputc(']', out);
    if (o->repr == TESS_OP_FACTOR) fprintf(out, ", \"decomposition\": \"%s\"", op_decompositions[o->tag]);
    if (o->flags & TESS_OP_FLAG_RECURSION)
      fprintf(out, ", \"frame_bytes\": %llu, \"depth\": %u", (unsigned long long)o->frame_bytes, o->depth);
    fputc('}', out);
  }
  fputc(']', out);
}

static void write_function(FILE* out, const tsr_plan_function_t* f) {
  fputs("{\"params\": ", out);
  write_strings(out, f->params, f->param_count);
  fputs(", \"args\": ", out);
  write_ids(out, f, f->args, f->arg_count);
  fputs(", \"results\": ", out);
  write_ids(out, f, f->results, f->result_count);
  fputs(", \"values\": {", out);
  for (uint32_t i = 0; i < f->value_count; i++) {
    const tsr_plan_value_t* v = &f->values[i];
    if (i) fputs(", ", out);
    tsr_json_string(out, v->id);
    fputs(": {\"dtype\": ", out);
    tsr_json_string(out, v->dtype);
    fputs(", \"dims\": ", out);
    write_exprs(out, v->dims, v->rank);
    if (v->has_buffer) fprintf(out, ", \"buffer\": %lld", (long long)v->buffer);
    if (v->declared) {
      fputs(", \"declared\": ", out);
      tsr_json_string(out, v->declared);
    }
    fputc('}', out);
  }
  fputs("}, \"steps\": [", out);
  for (uint32_t i = 0; i < f->step_count; i++) {
    if (i) fputs(", ", out);
    write_step(out, f, &f->steps[i]);
  }
  fputs("], \"fallbacks\": ", out);
  write_strings(out, f->fallbacks, f->fallback_count);
  fputs(", \"outputs\": [", out);
  for (uint32_t i = 0; i < f->output_count; i++) fprintf(out, "%s%lld", i ? ", " : "", (long long)f->outputs[i]);
  fputc(']', out);
  write_pairs(out, "same_extents", f->same_extents, f->same_count);
  write_pairs(out, "broadcasts", f->broadcasts, f->broadcast_count);
  write_operators(out, f);
  fputc('}', out);
}

void tsr_plan_write_json(FILE* out, const tsr_plan_t* plan) {
  fprintf(out, "{\"version\": %d, \"functions\": {", TSR_PLAN_VERSION);
  for (uint32_t i = 0; i < plan->function_count; i++) {
    if (i) fputs(", ", out);
    tsr_json_string(out, plan->functions[i].name);
    fputs(": ", out);
    write_function(out, &plan->functions[i]);
  }
  fputs("}}\n", out);
}
