/* function.c — the plan executor: a module's `@function`s (its `.tessera.plan` section, read by plan.c when the
 * module loads), their signatures, and tsrFunctionCall, which binds extents from the inputs' shapes, evaluates
 * each step's extents, allocates intermediates from the context's pool and launches the steps' kernels in
 * order through tsrLaunch, as tessera/executor.py does. */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm_backend.h"
#include "deferred.h"
#include "errors.h"
#include "handles.h"
#include "image.h"
#include "memory.h"
#include "objects.h"
#include "plan.h"
#include "stream.h"

/* ---- dtypes ------------------------------------------------------------------------------------------ */

typedef struct dtype_row {
  const char* name;
  DLDataType dl;
  size_t size;
  tsr_dtype_t comm;  /* what a communicator moves it as (collective steps) */
} dtype_row_t;

/* How a plan value of each dtype is stored (tessera.runtime._NUMPY): the DLTensor dtype a call takes. */
static const dtype_row_t dtypes[] = {
    {"f32", {kDLFloat, 32, 1}, 4, TSR_DTYPE_F32},       {"f64", {kDLFloat, 64, 1}, 8, TSR_DTYPE_F64},
    {"f16", {kDLFloat, 16, 1}, 2, TSR_DTYPE_F16},       {"bf16", {kDLBfloat, 16, 1}, 2, TSR_DTYPE_BF16},
    {"tf32", {kDLFloat, 32, 1}, 4, TSR_DTYPE_TF32},     {"fp8_e4m3", {kDLUInt, 8, 1}, 1, TSR_DTYPE_FP8_E4M3},
    {"fp8_e5m2", {kDLUInt, 8, 1}, 1, TSR_DTYPE_FP8_E5M2}, {"i8", {kDLInt, 8, 1}, 1, TSR_DTYPE_I8},
    {"i16", {kDLInt, 16, 1}, 2, TSR_DTYPE_I16},         {"i32", {kDLInt, 32, 1}, 4, TSR_DTYPE_I32},
    {"i64", {kDLInt, 64, 1}, 8, TSR_DTYPE_I64},         {"bool", {kDLBool, 8, 1}, 1, TSR_DTYPE_BOOL},
    {"index", {kDLInt, 64, 1}, 8, TSR_DTYPE_INDEX},     {"u8", {kDLUInt, 8, 1}, 1, TSR_DTYPE_U8},
    /* numpy's complex layout, real and imaginary part side by side (the compiler's complex results) */
    {"c64", {kDLComplex, 64, 1}, 8, TSR_DTYPE_C64},     {"c128", {kDLComplex, 128, 1}, 16, TSR_DTYPE_C128},
};

static const dtype_row_t* dtype_of(const char* name) {
  for (size_t i = 0; i < sizeof dtypes / sizeof *dtypes; i++)
    if (strcmp(dtypes[i].name, name) == 0) return &dtypes[i];
  return NULL;
}

static void dl_spelling(DLDataType t, char* buf, size_t size) {
  static const char* const codes[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  const char* code = t.code < sizeof codes / sizeof *codes ? codes[t.code] : "code";
  if (t.lanes == 1)
    snprintf(buf, size, "%s%u", code, (unsigned)t.bits);
  else
    snprintf(buf, size, "%s%ux%u", code, (unsigned)t.bits, (unsigned)t.lanes);
}

/* ---- building the functions of a module (at load) ------------------------------------------------------ */

static const tsr_image_section_t* plan_section(const tsr_image_t* img) {
  for (uint16_t i = 0; i < img->section_count; i++)
    if (img->sections[i].name && strcmp(img->sections[i].name, ".tessera.plan") == 0) return &img->sections[i];
  return NULL;
}

static tsr_status_t oom(void) { return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory loading a module's plans"); }

static tsr_status_t fill_spec(tsr_plan_t* plan, const tsr_plan_function_t* f, uint32_t vid, const char* name,
                              tsr_tensor_spec_t* spec) {
  const tsr_plan_value_t* v = &f->values[vid];
  const dtype_row_t* d = dtype_of(v->dtype);
  if (!d)
    return tsr_fail(TSR_ERROR_BAD_IMAGE, "bad image: launch plan: function '%s': '%s' has dtype '%s', which this "
                    "runtime cannot hold", f->name, name, v->dtype);
  int64_t* extents = tsr_arena_array(&plan->arena, v->rank + 1, sizeof *extents);
  const char** dims = tsr_arena_array(&plan->arena, v->rank + 1, sizeof *dims);
  if (!extents || !dims) return oom();
  for (uint32_t r = 0; r < v->rank; r++) {
    const tsr_expr_t* e = &v->dims[r];
    extents[r] = e->op_count == 1 && e->ops[0].op == TSR_EXPR_INT ? e->ops[0].value : -1;
    dims[r] = e->text;
  }
  *spec = (tsr_tensor_spec_t){name, v->dtype, d->dl, v->rank, extents, dims};
  return TSR_SUCCESS;
}

static struct tsr_kernel* kernel_named(struct tsr_module* m, const char* name) {
  for (size_t i = 0; i < m->kernel_count; i++)
    if (strcmp(m->kernels[i].name, name) == 0) return &m->kernels[i];
  return NULL;
}

/* What a call of `fn` would otherwise look up or count on every call: its steps' kernels, each buffer slot's
 * tenants (sizing a slot visits only them), each value's element size. */
static tsr_status_t resolve(tsr_plan_t* plan, struct tsr_module* m, struct tsr_function* fn) {
  const tsr_plan_function_t* f = fn->plan;
  size_t kernel_count = 0;
  for (uint32_t s = 0; s < f->step_count; s++) kernel_count += 1 + f->steps[s].prefer_count;
  fn->kernels = tsr_arena_array(&plan->arena, kernel_count + 1, sizeof *fn->kernels);
  fn->kernel_at = tsr_arena_array(&plan->arena, f->step_count + 1, sizeof *fn->kernel_at);
  fn->callees = tsr_arena_array(&plan->arena, f->step_count + 1, sizeof *fn->callees);
  fn->slot_first = tsr_arena_array(&plan->arena, (size_t)fn->slot_count + 2, sizeof *fn->slot_first);
  fn->slot_values = tsr_arena_array(&plan->arena, (size_t)f->value_count + 1, sizeof *fn->slot_values);
  fn->value_size = tsr_arena_array(&plan->arena, (size_t)f->value_count + 1, sizeof *fn->value_size);
  fn->value_root = tsr_arena_array(&plan->arena, (size_t)f->value_count + 1, sizeof *fn->value_root);
  if (!fn->kernels || !fn->kernel_at || !fn->callees || !fn->slot_first || !fn->slot_values || !fn->value_size ||
      !fn->value_root)
    return oom();
  /* Aliases followed to the value that holds the storage, at most value_count links (a hand-made plan's alias
   * cycle ends somewhere on it) */
  for (uint32_t v = 0; v < f->value_count; v++) fn->value_root[v] = v;
  for (uint32_t s = 0; s < f->step_count; s++)
    if (f->steps[s].kind == TSR_PLAN_STEP_ALIAS) fn->value_root[f->steps[s].alias] = f->steps[s].of;
  for (uint32_t v = 0; v < f->value_count; v++) {
    uint32_t r = v;
    for (uint32_t hops = 0; hops < f->value_count && fn->value_root[r] != r; hops++) r = fn->value_root[r];
    fn->value_root[v] = r;
  }
  size_t at = 0;
  for (uint32_t s = 0; s < f->step_count; s++) {
    const tsr_plan_step_t* step = &f->steps[s];
    fn->kernel_at[s] = (uint32_t)at;
    fn->kernels[at++] = step->kernel ? kernel_named(m, step->kernel) : NULL;
    for (uint32_t a = 0; a < step->prefer_count; a++) fn->kernels[at++] = kernel_named(m, step->prefer[a].kernel);
  }
  for (uint32_t v = 0; v < f->value_count; v++) {  /* counting sort of the values by slot */
    const dtype_row_t* d = dtype_of(f->values[v].dtype);
    if (!d)  /* an intermediate's: fill_spec checked the arguments' and results' */
      return tsr_fail(TSR_ERROR_BAD_IMAGE, "bad image: launch plan: function '%s': '%s' has dtype '%s', which this "
                      "runtime cannot hold", f->name, f->values[v].id, f->values[v].dtype);
    fn->value_size[v] = (uint8_t)d->size;
    if (f->values[v].has_buffer) fn->slot_first[f->values[v].buffer + 1]++;
  }
  for (uint32_t b = 0; b < fn->slot_count; b++) fn->slot_first[b + 1] += fn->slot_first[b];
  uint32_t* fill = tsr_arena_array(&plan->arena, (size_t)fn->slot_count + 1, sizeof *fill);
  if (!fill) return oom();
  for (uint32_t v = 0; v < f->value_count; v++)
    if (f->values[v].has_buffer) {
      uint32_t b = (uint32_t)f->values[v].buffer;
      fn->slot_values[fn->slot_first[b] + fill[b]++] = v;
    }
  return TSR_SUCCESS;
}

tsr_status_t tsr_module_load_functions(struct tsr_module* m, const tsr_image_t* img) {
  const tsr_image_section_t* s = plan_section(img);
  if (!s) return TSR_SUCCESS;
  /* Plans of another version are refused by the versioning rule (docs/image-format.md, "Versions"): the
   * module still loads for its kernels, and looking a function up says why there is none. */
  if (tsr_image_check_plan_version(img)) {
    m->plans_refused = strdup(tsrGetLastErrorMessage());
    return m->plans_refused ? TSR_SUCCESS : oom();
  }
  tsr_plan_t* plan;
  tsr_status_t st = tsr_plan_read(s->data ? (const void*)s->data : "", (size_t)s->size, &plan);
  if (st) {
    char message[1024];
    snprintf(message, sizeof message, "%s", tsrGetLastErrorMessage());
    return tsr_fail(st, "%s%s", st == TSR_ERROR_BAD_IMAGE ? "bad image: " : "", message);
  }
  m->plan = plan;
  m->functions = tsr_arena_array(&plan->arena, plan->function_count + 1, sizeof *m->functions);
  if (!m->functions) return oom();
  for (uint32_t i = 0; i < plan->function_count; i++) {
    const tsr_plan_function_t* f = &plan->functions[i];
    struct tsr_function* fn = &m->functions[i];
    tsr_tensor_spec_t* specs = tsr_arena_array(&plan->arena, (size_t)f->arg_count + f->result_count + 1, sizeof *specs);
    if (!specs) return oom();
    for (uint32_t a = 0; a < f->arg_count; a++)
      if ((st = fill_spec(plan, f, f->args[a], a < f->param_count ? f->params[a] : f->values[f->args[a]].id,
                          &specs[a])))
        return st;
    for (uint32_t r = 0; r < f->result_count; r++) {
      char name[32];
      snprintf(name, sizeof name, "result%u", r);
      char* copy = tsr_arena_strndup(&plan->arena, name, strlen(name));
      if (!copy) return oom();
      if ((st = fill_spec(plan, f, f->results[r], copy, &specs[f->arg_count + r]))) return st;
    }
    int64_t slots = 0;
    for (uint32_t v = 0; v < f->value_count; v++)
      if (f->values[v].has_buffer) {
        if (f->values[v].buffer < 0 || f->values[v].buffer >= (int64_t)f->value_count)
          return tsr_fail(TSR_ERROR_BAD_IMAGE, "bad image: launch plan: function '%s': value '%s' has buffer slot "
                          "%" PRId64 ", outside [0, %u)", f->name, f->values[v].id, f->values[v].buffer,
                          f->value_count);
        if (f->values[v].buffer + 1 > slots) slots = f->values[v].buffer + 1;
      }
    *fn = (struct tsr_function){.magic = TSR_MAGIC_FUNCTION, .module = m, .plan = f,
                                .signature = {f->name, f->arg_count, f->result_count, specs, specs + f->arg_count},
                                .slot_count = (uint32_t)slots};
    if ((st = resolve(plan, m, fn))) return st;
  }
  m->function_count = plan->function_count;
  for (uint32_t i = 0; i < plan->function_count; i++) {  /* callees, now that every function exists */
    const tsr_plan_function_t* f = &plan->functions[i];
    for (uint32_t s = 0; s < f->step_count; s++)
      for (uint32_t j = 0; f->steps[s].kind == TSR_PLAN_STEP_CALL && j < plan->function_count; j++)
        if (strcmp(plan->functions[j].name, f->steps[s].call) == 0) m->functions[i].callees[s] = &m->functions[j];
  }
  return TSR_SUCCESS;
}

void tsr_module_free_functions(struct tsr_module* m) {
  /* finishing their work; a dying context destroyed them already, with its other streams */
  for (uint32_t i = 0; i < m->function_count && !m->obj.context->dying; i++)
    if (m->functions[i].comm_stream) tsrReleaseStream(m->functions[i].comm_stream);
  if (m->plan) tsr_plan_free(m->plan);
  free(m->plans_refused);
  m->plans_refused = NULL;
  m->plan = NULL;
  m->functions = NULL;
  m->function_count = 0;
}

/* ---- lookup ------------------------------------------------------------------------------------------ */

tsr_status_t tsrModuleGetFunction(tsr_module_t m, const char* name, tsr_function_t* out_function) {
  if (!tsr_handle_is_live(m, TSR_MAGIC_MODULE)) return tsr_fail_handle(__func__, "module");
  if (!out_function) return tsr_fail_null_output(__func__);
  if (!name) return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrModuleGetFunction: the function name is NULL");
  char names[512];
  size_t len = 0;
  names[0] = 0;
  for (size_t i = 0; i < m->function_count; i++) {
    if (strcmp(m->functions[i].plan->name, name) == 0) {
      *out_function = &m->functions[i];
      return TSR_SUCCESS;
    }
    if (len < sizeof names) {
      int n = snprintf(names + len, sizeof names - len, "%s'%s'", i ? ", " : "", m->functions[i].plan->name);
      if (n > 0) len += (size_t)n;
    }
  }
  if (m->plans_refused)
    return tsr_fail(TSR_ERROR_BAD_IMAGE, "no function named '%s': the image's launch plans were refused: %s", name,
                    m->plans_refused);
  return tsr_fail(TSR_ERROR_NOT_FOUND, "no function named '%s' in the module (functions: %s)", name,
                  m->function_count ? names : "none: the image has no launch plans");
}

tsr_status_t tsrModuleGetFunctionCount(tsr_module_t m, size_t* out_count) {
  if (!tsr_handle_is_live(m, TSR_MAGIC_MODULE)) return tsr_fail_handle(__func__, "module");
  if (!out_count) return tsr_fail_null_output(__func__);
  *out_count = m->function_count;
  return TSR_SUCCESS;
}

tsr_status_t tsrModuleGetFunctionName(tsr_module_t m, size_t index, const char** out_name) {
  if (!tsr_handle_is_live(m, TSR_MAGIC_MODULE)) return tsr_fail_handle(__func__, "module");
  if (!out_name) return tsr_fail_null_output(__func__);
  if (index >= m->function_count)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrModuleGetFunctionName: index %zu, but the module has %zu functions",
                    index, m->function_count);
  *out_name = m->functions[index].plan->name;
  return TSR_SUCCESS;
}

tsr_status_t tsrFunctionGetSignature(tsr_function_t fn, tsr_function_signature_t* out_signature) {
  if (!tsr_handle_is_live(fn, TSR_MAGIC_FUNCTION)) return tsr_fail_handle(__func__, "function");
  if (!out_signature) return tsr_fail_null_output(__func__);
  *out_signature = fn->signature;
  return TSR_SUCCESS;
}

/* ---- a call ------------------------------------------------------------------------------------------ */

#define MAX_RANK 8

/* A DLTensor's layout: whether its strides are the compact row-major ones (or it has no element), and the
 * element offsets from element 0 that it reaches, [lo, hi] (lo <= 0 <= hi). */
typedef struct layout {
  bool compact, empty;
  int64_t lo, hi;
} layout_t;

static bool layout_of(const DLTensor* t, layout_t* l);
static bool overlaps(const DLTensor* t, const layout_t* l);

/* The DLPack device types of the memory each backend's kernels address (docs/c-api.md, "Functions"). */
typedef struct device_row {
  const char* backend;  /* tsr_backend_t.name */
  DLDeviceType types[3];
  size_t count;
  const char* names;
} device_row_t;

static const device_row_t device_rows[] = {
    {"cpu", {kDLCPU, kDLCUDAHost, kDLROCMHost}, 3, "kDLCPU, kDLCUDAHost or kDLROCMHost"},
    {"cuda", {kDLCUDA, kDLCUDAManaged}, 2, "kDLCUDA or kDLCUDAManaged"},
    {"hip", {kDLROCM}, 1, "kDLROCM"},
    {"level_zero", {kDLOneAPI}, 1, "kDLOneAPI"},
    {"opencl", {kDLOpenCL}, 1, "kDLOpenCL"},
};

typedef struct value_state {
  void* ptr;            /* NULL until bound or allocated */
  uint64_t elements;    /* what the storage holds */
} value_state_t;

typedef struct call {
  struct tsr_function* fn;
  const tsr_plan_function_t* f;
  const tsr_plan_t* plan;
  struct tsr_context* ctx;
  const device_row_t* devices;  /* what the context's backend addresses */
  tsr_stream_t stream;
  int64_t* env;         /* the function's extents, by symbol */
  uint8_t* bound;
  int64_t* local;       /* a step's extents */
  uint8_t* local_bound;
  int64_t* saved;       /* run_args: the scope a step's extents are evaluated over */
  uint8_t* saved_bound;
  value_state_t* values;
  void** slots;         /* buffer slot storage */
  void** owned;         /* allocations to free */
  size_t* owned_bytes;  /* their sizes, as allocated */
  size_t owned_count;
  int64_t device_units;
  bool shapes_only;     /* tsrFunctionGetResultShapes: the inputs' data may be NULL */
  bool reuse;           /* may take blocks released after earlier work of its stream (deferred.h) */
  bool capturing;       /* its stream captures a graph: work is recorded, not run, and the host may not wait */
  int depth;            /* how many call steps deep this call runs */
  tsr_comm_t comm;      /* what collective steps run on (tsrFunctionCallWithOptions), or NULL */
  /* The communicators of the mesh axes this call's collective steps ran over, split from `comm` once per call
   * and axis (released when the call ends): step `like` names the mesh and axis. */
  struct { const tsr_plan_step_t* like; tsr_comm_t comm; } groups[8];
  uint32_t group_count;
  /* Gradient buckets in flight on `comm_stream` (the function's second stream, comm_stream()), oldest first:
   * steps [first, end) of the plan, whose outputs (and the inputs of members of `below` bytes or more, reduced
   * directly) `stream` may touch once it waited for `done`. Room for 32: a step's buckets all stay in flight
   * until the steps reading them (bench/data_parallel_gpu.py's 416 MiB of gradients are 17 buckets of 25 MiB);
   * only past that does a new bucket make the call's stream wait, for the oldest. */
  tsr_stream_t comm_stream;
  struct { tsr_event_t done; uint32_t first, end; uint64_t below; } pending[32];
  uint32_t pending_count;
  struct timeline* timeline;  /* $TESSERA_STEP_TIMELINE: this call's events (timeline_begin), or NULL */
  uint32_t timeline_at;       /* with `timeline`: the step the call is at (a wait's line names it) */
  void* heap;           /* the arrays above when `scratch` is too small for them, else NULL */
  /* The arrays above, carved per call: on the caller's stack, so that a call allocates nothing for them
   * and calls of one function from several threads share nothing. 2 KiB hold a plan of ~60 values. */
  _Alignas(8) unsigned char scratch[2048];
} call_t;

static tsr_status_t eval(call_t* c, const tsr_expr_t* e, bool local, int64_t* out, const char* what) {
  tsr_extents_t x = {&c->plan->symbols, local ? c->local : c->env, local ? c->local_bound : c->bound};
  tsr_status_t st = tsr_expr_eval(e, &x, out);
  if (st) {
    char message[768];
    snprintf(message, sizeof message, "%s", tsrGetLastErrorMessage());
    return tsr_fail(st, "function '%s': %s: %s", c->f->name, what, message);
  }
  return TSR_SUCCESS;
}

static void set_symbol(const tsr_plan_t* plan, int64_t* values, uint8_t* bound, const char* name, int64_t v) {
  int64_t sym = tsr_symbols_find(&plan->symbols, name);
  if (sym < 0) return;
  values[sym] = v;
  bound[sym] = 1;
}

static uint64_t value_elements(call_t* c, uint32_t vid, int64_t* shape, tsr_status_t* st) {
  const tsr_plan_value_t* v = &c->f->values[vid];
  uint64_t n = 1;
  *st = TSR_SUCCESS;
  for (uint32_t r = 0; r < v->rank; r++) {
    /* the extent's name is formatted only for a message: this runs for every value on every call */
    tsr_extents_t x = {&c->plan->symbols, c->env, c->bound};
    int64_t d;
    tsr_status_t failed = tsr_expr_eval(&v->dims[r], &x, &d);
    if (failed || d < 0) {
      char what[160];
      snprintf(what, sizeof what, "extent %u of value '%s'", r, v->id);
      *st = failed ? eval(c, &v->dims[r], false, &d, what)
                   : tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': %s is %" PRId64 ", below 0", c->f->name,
                              what, d);
      return 0;
    }
    if (shape && r < MAX_RANK) shape[r] = d;
    if (__builtin_mul_overflow(n, (uint64_t)d, &n)) {
      *st = tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': value '%s' has more elements than memory holds",
                     c->f->name, v->id);
      return 0;
    }
  }
  return n;
}

static tsr_status_t alloc(call_t* c, uint64_t bytes, void** out) {
  if (bytes > SIZE_MAX) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "function '%s': an intermediate of %" PRIu64
                                        " bytes", c->f->name, bytes);
  if (!c->reuse || !tsr_deferred_take(c->ctx, c->stream, (size_t)bytes, out)) {
    tsr_status_t st = tsrAlloc(c->ctx, (size_t)bytes, TSR_ALLOC_DEFAULT, out);
    if (st) {  /* the allocator's message names no function */
      char message[768];
      snprintf(message, sizeof message, "%s", tsrGetLastErrorMessage());
      return tsr_fail(st, "function '%s': an intermediate of %" PRIu64 " bytes: %s", c->f->name, bytes, message);
    }
  }
  c->owned[c->owned_count] = *out;
  c->owned_bytes[c->owned_count++] = (size_t)bytes;
  return TSR_SUCCESS;
}

/* The storage of value `vid`, allocating an intermediate in its buffer slot (sized for its largest tenant)
 * or on its own. */
static tsr_status_t tensor(call_t* c, uint32_t vid, value_state_t** out) {
  value_state_t* s = &c->values[vid];
  if (!s->ptr) {
    const tsr_plan_value_t* v = &c->f->values[vid];
    tsr_status_t st;
    uint64_t n = value_elements(c, vid, NULL, &st);
    if (st) return st;
    uint64_t bytes;  /* a size past uint64 (extents near int64's limit) cannot be allocated: tsrAlloc says so */
    if (__builtin_mul_overflow(n, (uint64_t)c->fn->value_size[vid], &bytes)) bytes = UINT64_MAX;
    if (!v->has_buffer) {
      if ((st = alloc(c, bytes, &s->ptr))) return st;
    } else {
      if (!c->slots[v->buffer]) {
        uint64_t most = 64;  /* the largest tenant of the slot */
        const struct tsr_function* fn = c->fn;
        for (uint32_t t = fn->slot_first[v->buffer]; t < fn->slot_first[v->buffer + 1]; t++) {
          uint32_t o = fn->slot_values[t];
          uint64_t wn = value_elements(c, o, NULL, &st);
          if (st) return st;
          uint64_t wb;
          if (__builtin_mul_overflow(wn, (uint64_t)fn->value_size[o], &wb)) wb = UINT64_MAX;
          if (wb > most) most = wb;
        }
        if ((st = alloc(c, most, &c->slots[v->buffer]))) return st;
      }
      s->ptr = c->slots[v->buffer];
    }
    s->elements = n;
  }
  *out = s;
  return TSR_SUCCESS;
}

/* Kernel `which` of step `step` (0: the step's own, 1 + a: its prefer a's), resolved at load; `name` for the
 * message when the module has none of that name. */
static struct tsr_kernel* find_kernel(call_t* c, const char* name, size_t step, uint32_t which) {
  struct tsr_kernel* resolved = c->fn->kernels[c->fn->kernel_at[step] + which];
  if (resolved) return resolved;
  tsr_kernel_t k;
  if (tsrGetKernel(c->fn->module, name, &k) == TSR_SUCCESS) return k;
  char message[768];
  snprintf(message, sizeof message, "%s", tsrGetLastErrorMessage());
  tsr_fail(TSR_ERROR_NOT_FOUND, "function '%s': step %zu: %s", c->f->name, step, message);
  return NULL;
}

/* The packed arguments of one launch. */
typedef struct packing {
  struct tsr_kernel* kernel;
  size_t next;          /* the next non-dimension argument */
  uint64_t values[64];
  void* args[64];
  void* pointers[64];
  uint8_t dim_set[64];
} packing_t;

static tsr_status_t pack_begin(call_t* c, packing_t* p, struct tsr_kernel* k, size_t step) {
  memset(p, 0, sizeof *p);
  p->kernel = k;
  if (k->arg_count > 64)
    return tsr_fail(TSR_ERROR_UNSUPPORTED, "function '%s': step %zu: kernel '%s' takes %zu arguments, more than the "
                    "executor packs (64)", c->f->name, step, k->name, k->arg_count);
  for (size_t i = 0; i < k->arg_count; i++) p->args[i] = &p->values[i];
  return TSR_SUCCESS;
}

/* The next parameter (not a dimension argument) of the kernel, or a refusal. */
static tsr_status_t pack_next(call_t* c, packing_t* p, size_t step, size_t* index) {
  struct tsr_kernel* k = p->kernel;
  while (p->next < k->arg_count && k->args[p->next].kind == TSR_ARG_DIMENSION) p->next++;
  if (p->next >= k->arg_count)
    return tsr_fail(TSR_ERROR_BAD_IMAGE, "function '%s': step %zu passes kernel '%s' more arguments than it takes",
                    c->f->name, step, k->name);
  *index = p->next++;
  return TSR_SUCCESS;
}

static tsr_status_t pack_tensor(call_t* c, packing_t* p, size_t step, void* ptr, const int64_t* shape, uint32_t rank) {
  size_t i;
  tsr_status_t st = pack_next(c, p, step, &i);
  if (st) return st;
  const tsr_arg_info_t* a = &p->kernel->args[i];
  if (a->kind != TSR_ARG_TENSOR || a->rank != rank)
    return tsr_fail(TSR_ERROR_BAD_IMAGE, "function '%s': step %zu passes a rank-%u tensor as argument '%s' of "
                    "kernel '%s', which takes %s%u", c->f->name, step, rank, a->name, p->kernel->name,
                    a->kind == TSR_ARG_TENSOR ? "rank " : "a scalar; rank ", a->rank);
  for (uint32_t r = 0; r < rank; r++) {
    int64_t d = a->dims[r];
    if (d >= 0) {
      if (d != shape[r])
        return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': step %zu: argument '%s' of kernel '%s' must have "
                        "extent %" PRId64 " on axis %u, got %" PRId64, c->f->name, step, a->name, p->kernel->name,
                        d, r, shape[r]);
      continue;
    }
    size_t slot = (size_t)(-d - 1);
    if (p->dim_set[slot] && (int64_t)p->values[slot] != shape[r])
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': step %zu: argument '%s' of kernel '%s' has %s = %"
                      PRId64 " on axis %u, but an earlier argument has %s = %" PRId64, c->f->name, step, a->name,
                      p->kernel->name, p->kernel->args[slot].name, shape[r], r, p->kernel->args[slot].name,
                      (int64_t)p->values[slot]);
    p->values[slot] = (uint64_t)shape[r];
    p->dim_set[slot] = 1;
  }
  p->pointers[i] = ptr;
  p->args[i] = &p->pointers[i];
  return TSR_SUCCESS;
}

static tsr_status_t pack_scalar(call_t* c, packing_t* p, size_t step, bool is_float, double f, int64_t n) {
  size_t i;
  tsr_status_t st = pack_next(c, p, step, &i);
  if (st) return st;
  const tsr_arg_info_t* a = &p->kernel->args[i];
  const char* name = a->name;
  if (a->kind != TSR_ARG_SCALAR)
    return tsr_fail(TSR_ERROR_BAD_IMAGE, "function '%s': step %zu passes a scalar as argument '%s' of kernel '%s', "
                    "a tensor", c->f->name, step, name, p->kernel->name);
  void* slot = &p->values[i];
  int64_t lo = 0, hi = 0;
  switch (a->dtype) {
    case 1: case 16: {  /* f32, tf32 */
      float x = is_float ? (float)f : (float)n;
      memcpy(slot, &x, sizeof x);
      return TSR_SUCCESS;
    }
    case 2: {
      double x = is_float ? f : (double)n;
      memcpy(slot, &x, sizeof x);
      return TSR_SUCCESS;
    }
    case 5: lo = INT8_MIN, hi = INT8_MAX; break;
    case 6: lo = INT16_MIN, hi = INT16_MAX; break;
    case 7: lo = INT32_MIN, hi = INT32_MAX; break;
    case 8: case 17: lo = INT64_MIN, hi = INT64_MAX; break;
    default:
      return tsr_fail(TSR_ERROR_UNSUPPORTED, "function '%s': step %zu: argument '%s' of kernel '%s' is a scalar of "
                      "dtype code %u, which the executor cannot pass", c->f->name, step, name, p->kernel->name,
                      (unsigned)a->dtype);
  }
  if (is_float)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': step %zu: argument '%s' of kernel '%s' is an integer "
                    "scalar, and the plan passes the float %g", c->f->name, step, name, p->kernel->name, f);
  if (n < lo || n > hi)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': step %zu: argument '%s' of kernel '%s' is a %zu-byte "
                    "integer, and %" PRId64 " is outside [%" PRId64 ", %" PRId64 "]", c->f->name, step, name,
                    p->kernel->name, tsr_dtype_size(a->dtype), n, lo, hi);
  switch (a->dtype) {
    case 5: { int8_t x = (int8_t)n; memcpy(slot, &x, 1); break; }
    case 6: { int16_t x = (int16_t)n; memcpy(slot, &x, 2); break; }
    case 7: { int32_t x = (int32_t)n; memcpy(slot, &x, 4); break; }
    default: memcpy(slot, &n, 8); break;
  }
  return TSR_SUCCESS;
}

static tsr_status_t launch(call_t* c, packing_t* p, size_t step, const int64_t grid[3], const int64_t block[3],
                           int64_t smem) {
  struct tsr_kernel* k = p->kernel;
  size_t i;
  for (i = p->next; i < k->arg_count && k->args[i].kind == TSR_ARG_DIMENSION; i++) {}
  if (i < k->arg_count)
    return tsr_fail(TSR_ERROR_BAD_IMAGE, "function '%s': step %zu passes kernel '%s' %zu arguments; it takes more "
                    "('%s' is missing)", c->f->name, step, k->name, p->next, k->args[i].name);
  for (i = 0; i < k->arg_count; i++)
    if (k->args[i].kind == TSR_ARG_DIMENSION && !p->dim_set[i])
      return tsr_fail(TSR_ERROR_BAD_IMAGE, "function '%s': step %zu: no tensor of kernel '%s' gives its extent '%s'",
                      c->f->name, step, k->name, k->args[i].name);
  tsr_launch_t l;
  uint32_t* g[3] = {&l.grid_x, &l.grid_y, &l.grid_z};
  uint32_t* b[3] = {&l.block_x, &l.block_y, &l.block_z};
  for (int d = 0; d < 3; d++) {
    if (grid[d] < 0 || grid[d] > UINT32_MAX || block[d] < 0 || block[d] > UINT32_MAX)
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': step %zu (kernel '%s'): grid (%" PRId64 ", %" PRId64
                      ", %" PRId64 ") or block is outside [0, 2^32)", c->f->name, step, k->name, grid[0], grid[1],
                      grid[2]);
    *g[d] = (uint32_t)grid[d];
    *b[d] = (uint32_t)block[d];
  }
  if (smem < 0 || smem > UINT32_MAX)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': step %zu: shared memory %" PRId64 " is outside [0, 2^32)",
                    c->f->name, step, smem);
  l.smem_bytes = (uint32_t)smem;
  if (!l.grid_x || !l.grid_y || !l.grid_z) return TSR_SUCCESS;  /* no block: a chunk of zero rows */
  tsr_status_t st = tsrLaunch(k, c->stream, l, p->args, k->arg_count);
  if (st) {
    char message[768];
    snprintf(message, sizeof message, "%s", tsrGetLastErrorMessage());
    return tsr_fail(st, "function '%s': step %zu (kernel '%s'): %s", c->f->name, step, k->name, message);
  }
  return TSR_SUCCESS;
}

static tsr_status_t run_view(call_t* c, const tsr_plan_step_t* s, size_t step) {
  int64_t R, C, B;
  tsr_status_t st;
  if ((st = eval(c, &s->R, false, &R, "R")) || (st = eval(c, &s->C, false, &C, "C")) ||
      (st = eval(c, &s->B, false, &B, "B")))
    return st;
  const tsr_plan_t* plan = c->plan;
  memcpy(c->local, c->env, plan->symbols.count * sizeof *c->local);
  memcpy(c->local_bound, c->bound, plan->symbols.count);
  set_symbol(plan, c->local, c->local_bound, "R", R);
  set_symbol(plan, c->local, c->local_bound, "C", C);
  set_symbol(plan, c->local, c->local_bound, "B", B);
  struct tsr_kernel* k = find_kernel(c, s->kernel, step, 0);
  if (!k) return TSR_ERROR_NOT_FOUND;
  packing_t p;
  if ((st = pack_begin(c, &p, k, step))) return st;
  for (uint32_t t = 0; t < s->tensor_count; t++) {
    value_state_t* v;
    if ((st = tensor(c, s->tensors[t].value, &v))) return st;
    int64_t shape[3];
    uint32_t rank;
    switch (s->tensors[t].view) {
      case TSR_PLAN_VIEW_MATRIX: shape[0] = R, shape[1] = C, rank = 2; break;
      case TSR_PLAN_VIEW_COLS: shape[0] = C, rank = 1; break;
      case TSR_PLAN_VIEW_ROWS: shape[0] = R, rank = 1; break;
      case TSR_PLAN_VIEW_SCALAR: shape[0] = (int64_t)v->elements, rank = 1; break;
      case TSR_PLAN_VIEW_BMN: shape[0] = B, shape[1] = R, shape[2] = C, rank = 3; break;
      default: shape[0] = B, shape[1] = C, shape[2] = R, rank = 3; break;
    }
    uint64_t n = 1;
    for (uint32_t r = 0; r < rank; r++) n = shape[r] < 0 ? UINT64_MAX : n * (uint64_t)shape[r];
    if (n != v->elements)
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': step %zu (kernel '%s'): value '%s' has %" PRIu64
                      " elements and cannot be viewed as %s of %" PRIu64, c->f->name, step, k->name,
                      c->f->values[s->tensors[t].value].id, v->elements, tsr_plan_view_names[s->tensors[t].view], n);
    if ((st = pack_tensor(c, &p, step, v->ptr, shape, rank))) return st;
  }
  int64_t grid[3];
  for (int d = 0; d < 3; d++)
    if ((st = eval(c, &s->launch.grid[d], true, &grid[d], "grid"))) return st;
  if (R == 0 || C == 0) return TSR_SUCCESS;
  for (uint32_t i = 0; i < s->scalar_count; i++) {
    int64_t x;
    if ((st = eval(c, &s->scalars[i], false, &x, "a scalar")) || (st = pack_scalar(c, &p, step, false, 0, x)))
      return st;
  }
  return launch(c, &p, step, grid, s->launch.block, 0);
}

/* $TESSERA_GEMM_GRID (read once per process): how a device's persistent kernels launch, those whose grid is capped by
 * DEVICE_UNITS and whose CTAs stride over the tiles (the sm_90a GEMMs: min(tiles, DEVICE_UNITS), CTA p computes tiles
 * p, p + grid, ..., so any grid of at least one CTA is as correct). "persistent" (the default): the cap holds, one
 * CTA per unit, each holding its SM to the kernel's end. "tiles": the cap is lifted, one CTA per tile; CTAs retire
 * as their tiles end and the block scheduler hands the freed SMs to other streams' pending work (NCCL's kernels on
 * the higher-priority communication stream), as with cuBLAS's grids. "comm": one per tile only while the call's
 * collectives are in flight on the communication stream, persistent otherwise. */
enum { GRID_PERSISTENT, GRID_TILES, GRID_COMM, GRID_INVALID };
static int gemm_grid_mode;
static const char* gemm_grid_text;
static void gemm_grid_read_env(void) {
  const char* v = getenv("TESSERA_GEMM_GRID");
  gemm_grid_text = v;
  if (!v || !*v || strcmp(v, "persistent") == 0) gemm_grid_mode = GRID_PERSISTENT;
  else if (strcmp(v, "tiles") == 0) gemm_grid_mode = GRID_TILES;
  else if (strcmp(v, "comm") == 0) gemm_grid_mode = GRID_COMM;
  else gemm_grid_mode = GRID_INVALID;
}
static int gemm_grid(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, gemm_grid_read_env);
  return gemm_grid_mode;
}

/* `grid`, evaluated from `e` over the step's extents, with DEVICE_UNITS's cap lifted where $TESSERA_GEMM_GRID asks
 * for it (above): the same expressions over a DEVICE_UNITS no grid reaches, kept where that gives more CTAs. */
static tsr_status_t uncap_grid(call_t* c, const tsr_expr_t* e, int64_t grid[3]) {
  int mode = gemm_grid();
  if (mode == GRID_PERSISTENT) return TSR_SUCCESS;
  if (mode == GRID_INVALID)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': TESSERA_GEMM_GRID=%s is not persistent, tiles or comm",
                    c->f->name, gemm_grid_text);
  if (mode == GRID_COMM && !(c->pending_count && c->comm)) return TSR_SUCCESS;
  if (strcmp(c->ctx->backend->name, "cpu") == 0) return TSR_SUCCESS;  /* a CPU's grid is its pool's tasks */
  int64_t sym = tsr_symbols_find(&c->plan->symbols, "DEVICE_UNITS");
  if (sym < 0) return TSR_SUCCESS;
  int64_t units = c->local[sym];
  uint8_t bound = c->local_bound[sym];
  c->local[sym] = INT32_MAX, c->local_bound[sym] = 1;
  static const int64_t most[3] = {INT32_MAX, 65535, 65535};
  tsr_extents_t x = {&c->plan->symbols, c->local, c->local_bound};
  for (int d = 0; d < 3; d++) {
    int64_t g;
    if (tsr_expr_eval(&e[d], &x, &g) == TSR_SUCCESS && g > grid[d] && g <= most[d]) grid[d] = g;
  }
  c->local[sym] = units, c->local_bound[sym] = bound;
  return TSR_SUCCESS;
}

/* The step's extents (c->local): the function's, DEVICE_UNITS = `units`, then the step's own, each evaluated over
 * that scope before any of them lands in `local`. */
static tsr_status_t step_scope(call_t* c, const tsr_plan_step_t* s, size_t step, int64_t units) {
  const tsr_plan_t* plan = c->plan;
  uint32_t n = plan->symbols.count;
  memcpy(c->local, c->env, n * sizeof *c->local);
  memcpy(c->local_bound, c->bound, n);
  set_symbol(plan, c->local, c->local_bound, "DEVICE_UNITS", units);
  int64_t* saved = c->saved;
  uint8_t* saved_bound = c->saved_bound;
  memcpy(saved, c->local, n * sizeof *saved);
  memcpy(saved_bound, c->local_bound, n);
  for (uint32_t i = 0; i < s->env_count; i++) {
    tsr_extents_t x = {&plan->symbols, saved, saved_bound};
    int64_t v;
    tsr_status_t st = tsr_expr_eval(&s->env[i].expr, &x, &v);
    if (st) {
      char message[768];
      snprintf(message, sizeof message, "%s", tsrGetLastErrorMessage());
      return tsr_fail(st, "function '%s': step %zu: extent '%s': %s", c->f->name, step, s->env[i].name, message);
    }
    c->local[s->env[i].symbol] = v;
    c->local_bound[s->env[i].symbol] = 1;
  }
  return TSR_SUCCESS;
}

/* What a kernel step launches over its scope (step_scope): its first "prefer" alternative whose condition
 * holds, else its own kernel. */
typedef struct step_launch {
  const char* kernel;
  uint32_t which;  /* 0: the step's own kernel, 1 + a: alternative a */
  const int64_t* block;
  const tsr_expr_t* grid;
  int64_t smem;
} step_launch_t;

static tsr_status_t choose(call_t* c, const tsr_plan_step_t* s, step_launch_t* out) {
  *out = (step_launch_t){s->kernel, 0, s->launch.block, s->launch.grid, s->smem};
  for (uint32_t a = 0; a < s->prefer_count; a++) {
    int64_t when;
    tsr_status_t st = eval(c, &s->prefer[a].when, true, &when, "a 'prefer' condition");
    if (st) return st;
    if (when > 0) {
      *out = (step_launch_t){s->prefer[a].kernel, 1 + a, s->prefer[a].launch.block, s->prefer[a].launch.grid,
                             s->prefer[a].smem};
      break;
    }
  }
  return TSR_SUCCESS;
}

/* The CTAs of grid `e` over the step's scope with DEVICE_UNITS (symbol `sym`) = `units`; -1 where it cannot be
 * evaluated. */
static int64_t ctas_with(call_t* c, const tsr_expr_t* e, int64_t sym, int64_t units) {
  c->local[sym] = units, c->local_bound[sym] = 1;
  tsr_extents_t x = {&c->plan->symbols, c->local, c->local_bound};
  int64_t total = 1;
  for (int d = 0; d < 3; d++) {
    int64_t g;
    if (tsr_expr_eval(&e[d], &x, &g) != TSR_SUCCESS || g < 0 || __builtin_mul_overflow(total, g, &total)) return -1;
  }
  return total;
}

/* How many of the communicator's `units` a kernel of grid `e` leaves free while the call's collectives are in
 * flight (the step's scope evaluated over the whole device, c->device_units): as many as it can without a
 * round more. Its tiles are its grid with DEVICE_UNITS unbounded (a persistent kernel's CTAs stride over them);
 * over the whole device they take rounds = ceil(tiles / CTAs) waves, which ceil(tiles / rounds) CTAs still
 * do, so the rest of the device is slack: min(units, slack) are left free, checked against the grid itself
 * (a cluster's grid takes units in pairs). 512 tiles on 132 units: 4 rounds on 128, 4 free; 264: none. */
static int64_t spare_units(call_t* c, const tsr_expr_t* e, int64_t units) {
  int64_t sym = tsr_symbols_find(&c->plan->symbols, "DEVICE_UNITS");
  if (sym < 0) return 0;  /* nothing depends on it */
  int64_t was = c->local[sym];
  uint8_t was_bound = c->local_bound[sym];
  int64_t whole = c->device_units, spare = 0;
  int64_t full = ctas_with(c, e, sym, whole), tiles = ctas_with(c, e, sym, INT32_MAX);
  if (full > 0 && tiles >= full) {
    int64_t rounds = (tiles + full - 1) / full;
    spare = whole - (tiles + rounds - 1) / rounds;
    if (spare > units) spare = units;
    for (; spare > 0; spare--) {
      int64_t g = ctas_with(c, e, sym, whole - spare);
      if (g > 0 && (tiles + g - 1) / g <= rounds) break;
    }
  }
  c->local[sym] = was, c->local_bound[sym] = was_bound;
  return spare > 0 ? spare : 0;
}

static tsr_status_t run_args(call_t* c, const tsr_plan_step_t* s, size_t step) {
  /* While collectives are in flight on the communication stream, a persistent kernel (a grid over
   * DEVICE_UNITS) leaves units free for the transport's (the communicator's, clamped to what costs the kernel
   * no round: spare_units): else it takes every unit and the transport's kernels, though queued first, wait
   * for its end, and nothing overlaps (comm.h, units). The kernel is the one the whole device would take; only
   * its grid's scope is evaluated again over the units left. */
  int64_t want = c->pending_count && c->comm ? (int64_t)tsr_comm_units(c->comm) : 0;
  step_launch_t run;
  tsr_status_t st;
  if ((st = step_scope(c, s, step, c->device_units)) || (st = choose(c, s, &run))) return st;
  int64_t spare = want > 0 ? spare_units(c, run.grid, want) : 0;
  if (spare && (st = step_scope(c, s, step, c->device_units - spare))) return st;
  const char* kname = run.kernel;
  uint32_t which = run.which;
  const int64_t* block = run.block;
  const tsr_expr_t* grid_e = run.grid;
  int64_t smem = run.smem;
  struct tsr_kernel* k = find_kernel(c, kname, step, which);
  if (!k) return TSR_ERROR_NOT_FOUND;

  /* the arguments: tensors with their shapes, scalars */
  typedef struct { void* ptr; int64_t shape[MAX_RANK]; uint32_t rank; bool batched; uint64_t row_bytes; } targ_t;
  targ_t few[16];  /* most steps pass fewer arguments: no allocation then */
  targ_t* targs = s->arg_count <= 16 ? few : malloc(s->arg_count * sizeof *targs);
  if (!targs) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "function '%s': out of memory", c->f->name);
  memset(targs, 0, s->arg_count * sizeof *targs);
  const char* batch_name = s->batch >= 0 ? s->env[s->batch].name : NULL;
  for (uint32_t i = 0; i < s->arg_count && !st; i++) {
    const tsr_plan_arg_t* a = &s->args[i];
    if (a->kind != TSR_PLAN_ARG_TENSOR) continue;
    if (a->rank > MAX_RANK) {
      st = tsr_fail(TSR_ERROR_UNSUPPORTED, "function '%s': step %zu: a tensor of rank %u (at most %d)", c->f->name,
                    step, a->rank, MAX_RANK);
      break;
    }
    value_state_t* v;
    if ((st = tensor(c, a->value, &v))) break;
    uint64_t elems = 1;
    for (uint32_t r = 0; r < a->rank && !st; r++) {
      st = eval(c, &a->shape[r], true, &targs[i].shape[r], "a tensor's shape");
      if (!st) elems = targs[i].shape[r] < 0 ? UINT64_MAX : elems * (uint64_t)targs[i].shape[r];
    }
    if (st) break;
    if (elems != v->elements) {
      st = tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': step %zu (kernel '%s'): value '%s' has %" PRIu64
                    " elements and cannot be viewed with %" PRIu64, c->f->name, step, k->name,
                    c->f->values[a->value].id, v->elements, elems);
      break;
    }
    targs[i].ptr = v->ptr;
    targs[i].rank = a->rank;
    targs[i].batched = batch_name && a->rank >= 1 && strcmp(a->shape[0].text, batch_name) == 0;
    targs[i].row_bytes = (targs[i].shape[0] ? elems / (uint64_t)targs[i].shape[0] : 0) *
                         dtype_of(c->f->values[a->value].dtype)->size;
  }
  for (uint32_t m = 0; m < s->multiple_count && !st; m++) {
    int64_t x;
    if ((st = eval(c, &s->multiple_of[m].expr, true, &x, "a multiple_of check"))) break;
    if (x % s->multiple_of[m].m)
      st = tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': %s = %" PRId64 " is not a multiple of %" PRId64
                    ", which kernel '%s' needs (%s)", c->f->name, s->multiple_of[m].expr.text, x, s->multiple_of[m].m,
                    kname, s->multiple_of[m].reason ? s->multiple_of[m].reason : "");
  }
  int64_t grid[3];
  for (int d = 0; d < 3 && !st; d++) st = eval(c, &grid_e[d], true, &grid[d], "grid");
  if (!st) st = uncap_grid(c, grid_e, grid);
  int64_t count = 1;
  if (!st && batch_name) {
    count = c->local[s->env[s->batch].symbol];
    for (uint32_t i = 0; i < s->arg_count && !st; i++)
      if (targs[i].batched && targs[i].shape[0] != count)
        st = tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': a batched matmul's operands have %" PRId64 " and %"
                      PRId64 " batch entries", c->f->name, targs[i].shape[0], count);
  }
  for (int64_t b = 0; b < count && !st; b++) {
    packing_t p;
    if ((st = pack_begin(c, &p, k, step))) break;
    for (uint32_t i = 0; i < s->arg_count && !st; i++) {
      const tsr_plan_arg_t* a = &s->args[i];
      if (a->kind == TSR_PLAN_ARG_TENSOR) {
        bool sliced = batch_name && targs[i].batched;
        char* ptr = (char*)targs[i].ptr + (sliced ? (uint64_t)b * targs[i].row_bytes : 0);
        st = pack_tensor(c, &p, step, ptr, targs[i].shape + (sliced ? 1 : 0), targs[i].rank - (sliced ? 1 : 0));
      } else if (a->kind == TSR_PLAN_ARG_F32) {
        st = pack_scalar(c, &p, step, true, a->f32, 0);
      } else {
        int64_t x;
        if (!(st = eval(c, &a->i64, true, &x, "a scalar argument"))) st = pack_scalar(c, &p, step, false, 0, x);
      }
    }
    if (!st) st = launch(c, &p, step, grid, block, smem);
  }
  if (targs != few) free(targs);
  return st;
}

/* Call steps nest at most this deep: a plan's calls form no cycle when the compiler writes them, but a linked
 * or hand-made one may, and each level holds its own extents and values. */
#define MAX_CALL_DEPTH 64

static tsr_status_t call_open(call_t* c, struct tsr_function* fn, size_t n_in, const DLTensor* const* inputs);
static void call_close(call_t* c);
static tsr_status_t call(call_t* c, const DLTensor* const* inputs, const DLTensor* const* outputs);
static tsr_status_t release_owned(call_t* c, tsr_status_t st);
static tsr_status_t release_groups(call_t* c, tsr_status_t st);

/* A call step: function `s->call` of the same module runs on the caller's values as a nested call, its
 * results written into values the caller allocates. */
static tsr_status_t run_call(call_t* c, const tsr_plan_step_t* s, size_t step) {
  struct tsr_function* callee = c->fn->callees[step];
  if (!callee)
    return tsr_fail(TSR_ERROR_NOT_FOUND, "function '%s': step %zu calls '%s', an imported function this image does "
                    "not define: link it with tessera-link against the image that exports it (tessera-link "
                    "this.tessera that.tessera -o linked.tessera)", c->f->name, step, s->call);
  if (c->depth + 1 >= MAX_CALL_DEPTH)
    return tsr_fail(TSR_ERROR_UNSUPPORTED, "function '%s': step %zu calls '%s' %d calls deep, more than the %d this "
                    "runtime nests (do the plan's calls form a cycle?)", c->f->name, step, s->call, c->depth + 1,
                    MAX_CALL_DEPTH);
  uint32_t n = s->call_arg_count + s->call_result_count;
  enum { FEW = 8 };  /* most calls pass fewer tensors: no allocation then */
  DLTensor few_t[FEW];
  const DLTensor* few_ptrs[FEW];
  int64_t few_shapes[FEW * MAX_RANK];
  bool few = n <= FEW;
  DLTensor* t = few ? few_t : malloc(n * sizeof *t);
  const DLTensor** ptrs = few ? few_ptrs : malloc(n * sizeof *ptrs);
  int64_t* shapes = few ? few_shapes : malloc((size_t)n * MAX_RANK * sizeof *shapes);
  tsr_status_t st = t && ptrs && shapes ? TSR_SUCCESS
                                        : tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "function '%s': out of memory", c->f->name);
  for (uint32_t i = 0; i < n && !st; i++) {
    uint32_t vid = i < s->call_arg_count ? s->call_args[i] : s->call_results[i - s->call_arg_count];
    const tsr_plan_value_t* v = &c->f->values[vid];
    value_state_t* state;
    if (v->rank > MAX_RANK) {
      st = tsr_fail(TSR_ERROR_UNSUPPORTED, "function '%s': step %zu: a tensor of rank %u (at most %d)", c->f->name,
                    step, v->rank, MAX_RANK);
      break;
    }
    if ((st = tensor(c, vid, &state))) break;
    value_elements(c, vid, shapes + (size_t)i * MAX_RANK, &st);
    if (st) break;
    t[i] = (DLTensor){.data = state->ptr, .device = {c->devices->types[0], 0}, .ndim = (int32_t)v->rank,
                      .dtype = dtype_of(v->dtype)->dl, .shape = shapes + (size_t)i * MAX_RANK};
    ptrs[i] = &t[i];
  }
  if (!st) {
    call_t inner;
    st = call_open(&inner, callee, s->call_arg_count, ptrs);
    inner.stream = c->stream;
    inner.reuse = c->reuse;
    inner.capturing = c->capturing;
    inner.device_units = c->device_units;
    inner.depth = c->depth + 1;
    inner.comm = c->comm;
    if (!st) st = call(&inner, ptrs, ptrs + s->call_arg_count);
    st = release_groups(&inner, st);
    st = release_owned(&inner, st);
    call_close(&inner);
    if (st && c->depth == 0) {  /* the outermost call names its step; nested ones keep the innermost message */
      char message[1024];
      snprintf(message, sizeof message, "%s", tsrGetLastErrorMessage());
      st = tsr_fail(st, "function '%s': step %zu (call of '%s'): %s", c->f->name, step, s->call, message);
    }
  }
  if (!few) {
    free(t);
    free(ptrs);
    free(shapes);
  }
  return st;
}

/* Whether alias step `s` views value `of` of `elements` elements as one of as many bytes (a complex value
 * viewed as its parts has twice the elements of half the size). */
static tsr_status_t check_alias(call_t* c, const tsr_plan_step_t* s, uint64_t elements) {
  tsr_status_t st;
  uint64_t n = value_elements(c, s->alias, NULL, &st);
  if (st) return st;
  if (n * c->fn->value_size[s->alias] != elements * c->fn->value_size[s->of])
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': value '%s' of %" PRIu64 " elements cannot be viewed as "
                    "value '%s' of %" PRIu64 " (a tile.range step must divide the extent its unmasked loads and "
                    "stores cover; mask them for partial tiles)", c->f->name, c->f->values[s->of].id,
                    elements, c->f->values[s->alias].id, n);
  return TSR_SUCCESS;
}

static tsr_status_t host_wait(call_t* c);
static tsr_memcpy_kind_t device_kind(const call_t* c);
static tsr_status_t device_copy(call_t* c, void* dst, const void* src, size_t bytes, tsr_memcpy_kind_t kind);

/* ---- collective steps ----------------------------------------------------------------------------------
 * A tdist op, run by the communicator the call was given (docs/image-format.md, "Collective step"): rank r of
 * it is the mesh's device r (row-major coordinates), and a step runs among the ranks whose coordinates differ
 * only along its axis. */

static bool same_axis(const tsr_plan_step_t* a, const tsr_plan_step_t* b) {
  if (a->mesh_rank != b->mesh_rank || a->axis != b->axis) return false;
  for (uint32_t i = 0; i < a->mesh_rank; i++)
    if (a->mesh_shape[i] != b->mesh_shape[i]) return false;
  return true;
}

/* Whether collective step `s` combines in the interpreter's tree order (deterministic, or algo tree /
 * binary_tree as the interpreter reads them): tree_reduce's gather, host combine and copy back. */
static bool tree_order(const tsr_plan_step_t* s) {
  return (s->collective == TSR_PLAN_ALL_REDUCE || s->collective == TSR_PLAN_REDUCE_SCATTER) &&
         (s->deterministic || strcmp(tsr_plan_algo_names[s->algo], "tree") == 0 ||
          strcmp(tsr_plan_algo_names[s->algo], "binary_tree") == 0);
}

static tsr_status_t step_fail(call_t* c, const tsr_plan_step_t* s, size_t step, tsr_status_t st) {
  char message[768];
  snprintf(message, sizeof message, "%s", tsrGetLastErrorMessage());
  return tsr_fail(st, "function '%s': step %zu (%s over mesh axis '%s'): %s", c->f->name, step,
                  tsr_plan_collective_names[s->collective], s->mesh_axes[s->axis], message);
}

/* The communicator of step `s`'s ranks and this rank's index among them: the call's own where the axis spans
 * the mesh, NULL where it has one device (the step is a copy), else split from the call's (MPI_Comm_split's
 * rule: color the coordinates off the axis, key the coordinate on it). */
static tsr_status_t group(call_t* c, const tsr_plan_step_t* s, size_t step, tsr_comm_t* out, int* index) {
  int rank, size;
  tsr_status_t st;
  if ((st = tsrCommGetRank(c->comm, &rank)) || (st = tsrCommGetSize(c->comm, &size))) return step_fail(c, s, step, st);
  int64_t devices = 1, color = 0, key = 0, rest = rank;
  for (uint32_t i = 0; i < s->mesh_rank; i++) devices *= s->mesh_shape[i];
  if (devices != size)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': step %zu (%s over mesh axis '%s'): the mesh has %" PRId64
                    " devices, the communicator %d ranks: they must be equal", c->f->name, step,
                    tsr_plan_collective_names[s->collective], s->mesh_axes[s->axis], devices, size);
  for (uint32_t i = s->mesh_rank; i-- > 0;) {  /* row-major: the last axis varies fastest */
    int64_t coord = rest % s->mesh_shape[i], stride = 1;
    rest /= s->mesh_shape[i];
    if (i == s->axis) {
      key = coord;
      continue;
    }
    for (uint32_t j = i + 1; j < s->mesh_rank; j++) stride *= j == s->axis ? 1 : s->mesh_shape[j];
    color += coord * stride;
  }
  *index = (int)key;
  int64_t n = s->mesh_shape[s->axis];
  *out = n == size ? c->comm : NULL;
  if (n == 1 || n == size) return TSR_SUCCESS;
  for (uint32_t g = 0; g < c->group_count; g++)
    if (same_axis(c->groups[g].like, s)) return *out = c->groups[g].comm, TSR_SUCCESS;
  if (c->group_count == sizeof c->groups / sizeof *c->groups)
    return tsr_fail(TSR_ERROR_UNSUPPORTED, "function '%s': step %zu: collectives over more than %zu different mesh "
                    "axes in one call", c->f->name, step, sizeof c->groups / sizeof *c->groups);
  if ((st = tsrCommSplit(c->comm, (int)color, (int)key, out))) return step_fail(c, s, step, st);
  c->groups[c->group_count].like = s;
  c->groups[c->group_count++].comm = *out;
  return TSR_SUCCESS;
}

static tsr_status_t settle(call_t* c, uint32_t which);

/* The end of a call's collectives: its stream waits for the buckets still in flight (its intermediates go
 * back to the pool in its order, and the function's communication stream is free for the next call), the
 * split communicators are released.
 * Returns `st`, or the first failure of these where `st` is success. */
static tsr_status_t release_groups(call_t* c, tsr_status_t st) {
  while (c->pending_count) {
    tsr_status_t settled = settle(c, 0);
    if (!st) st = settled;
  }
  c->comm_stream = NULL;  /* the function's: kept for its next call */
  for (uint32_t g = 0; g < c->group_count; g++) tsrReleaseComm(c->groups[g].comm);
  c->group_count = 0;
  return st;
}

/* A temporary of a collective step: freed by the step, after its stream has done the work on it (scratch_done).
 * While a graph is captured it is an intermediate of the call instead, which goes to the graph with the others
 * (release_owned): its recorded copies and communicator nodes read and write it at every replay. */
static tsr_status_t scratch(call_t* c, size_t bytes, void** out) {
  if (c->capturing) return alloc(c, bytes ? bytes : 1, out);
  tsr_status_t st = tsrAlloc(c->ctx, bytes ? bytes : 1, TSR_ALLOC_DEFAULT, out);
  if (st) {
    char message[768];
    snprintf(message, sizeof message, "%s", tsrGetLastErrorMessage());
    return tsr_fail(st, "function '%s': a collective's temporary of %zu bytes: %s", c->f->name, bytes, message);
  }
  return TSR_SUCCESS;
}

/* The end of a step's temporaries `a` and `b` (scratch(), either NULL): the host waits for the stream's work on
 * them and frees them. Under capture nothing ran, the stream refuses a host wait, and the graph keeps them.
 * Returns `st`, or the wait's failure where `st` is success. */
static tsr_status_t scratch_done(call_t* c, tsr_status_t st, void* a, void* b) {
  if (c->capturing || (!a && !b)) return st;
  tsr_status_t waited = host_wait(c);
  if (a) tsrFree(c->ctx, a);
  if (b) tsrFree(c->ctx, b);
  return st ? st : waited;
}

/* A communicator's failure, with the function and step named before its message. */
static tsr_status_t comm_status(call_t* c, const tsr_plan_step_t* s, size_t step, tsr_status_t st) {
  return st ? step_fail(c, s, step, st) : TSR_SUCCESS;
}

/* `count` elements of `src` combined over the `n` ranks of `g` into `dst` in the interpreter's tree order
 * (tessera/interpret/dist_ops.py), whatever the communicator's own order: all ranks' buffers gathered, then
 * combined on the host (device memory staged through it). */
static tsr_status_t tree_reduce(call_t* c, const tsr_plan_step_t* s, size_t step, tsr_comm_t g, int n,
                                const void* src, void* dst, size_t count, tsr_dtype_t dt, tsr_reduce_op_t op,
                                size_t esize, void** temp) {
  if (!tsr_comm_host_reducible(dt, op))
    return tsr_fail(TSR_ERROR_UNSUPPORTED, "function '%s': step %zu: a deterministic %s of %s, which the host "
                    "cannot combine in tree order", c->f->name, step, tsr_plan_reduce_names[s->reduce],
                    c->f->values[s->input].dtype);
  size_t bytes = count * esize * (size_t)n;
  tsr_status_t st = scratch(c, bytes, temp);
  if (st || (st = comm_status(c, s, step, tsrCommAllGather(g, src, *temp, count, dt, c->stream))) ||
      (st = host_wait(c)))
    return st;
  if (c->ctx->backend->host_memory) {
    tsr_comm_tree_reduce(dt, op, *temp, n, count, dst);
    return TSR_SUCCESS;
  }
  unsigned char* host = malloc(bytes + count * esize);
  if (!host) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of host memory staging a deterministic reduction");
  if (!(st = device_copy(c, host, *temp, bytes, TSR_MEMCPY_DEVICE_TO_HOST)) && !(st = host_wait(c))) {
    tsr_comm_tree_reduce(dt, op, host, n, count, host + bytes);
    if (!(st = device_copy(c, dst, host + bytes, count * esize, TSR_MEMCPY_HOST_TO_DEVICE))) st = host_wait(c);
  }
  free(host);
  return st;
}

/* Copies `blocks` blocks of `inner` elements between [outer, n, inner] and [n, outer, inner] layouts: the
 * ranks' parts of a gather or scatter along a dim with extents before it. */
static tsr_status_t regroup(call_t* c, char* dst, const char* src, int64_t outer, int n, size_t inner_bytes,
                            bool to_ranks_first) {
  tsr_status_t st = TSR_SUCCESS;
  for (int64_t o = 0; o < outer && !st; o++)
    for (int r = 0; r < n && !st; r++) {
      size_t ranks_first = ((size_t)r * (size_t)outer + (size_t)o) * inner_bytes;
      size_t outer_first = ((size_t)o * (size_t)n + (size_t)r) * inner_bytes;
      st = to_ranks_first ? device_copy(c, dst + ranks_first, src + outer_first, inner_bytes, device_kind(c))
                          : device_copy(c, dst + outer_first, src + ranks_first, inner_bytes, device_kind(c));
    }
  return st;
}

static tsr_status_t run_collective(call_t* c, const tsr_plan_step_t* s, size_t step) {
  if (!c->comm)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': step %zu is a collective (%s over mesh axis '%s'), which "
                    "runs only with a communicator, and the call has none (tsrFunctionCallWithOptions, or comm= "
                    "in Python)", c->f->name, step, tsr_plan_collective_names[s->collective], s->mesh_axes[s->axis]);
  tsr_comm_t g;
  int index;
  tsr_status_t st = group(c, s, step, &g, &index);
  if (st) return st;
  int n = (int)s->mesh_shape[s->axis];
  value_state_t *x, *y;
  int64_t shape[MAX_RANK];
  const tsr_plan_value_t* xv = &c->f->values[s->input];
  if (xv->rank > MAX_RANK)
    return tsr_fail(TSR_ERROR_UNSUPPORTED, "function '%s': step %zu: a tensor of rank %u (at most %d)", c->f->name,
                    step, xv->rank, MAX_RANK);
  if ((st = tensor(c, s->input, &x)) || (st = tensor(c, s->output, &y))) return st;
  value_elements(c, s->input, shape, &st);
  if (st) return st;
  const dtype_row_t* d = dtype_of(xv->dtype);
  size_t esize = d->size;
  uint64_t ex = x->elements, ey = y->elements;
  int64_t outer = 1;  /* the input's extents before `dim` */
  for (int64_t i = 0; i < s->dim && (s->collective == TSR_PLAN_ALL_GATHER || s->collective == TSR_PLAN_REDUCE_SCATTER);
       i++)
    outer *= shape[i];
  bool gathers = s->collective == TSR_PLAN_ALL_GATHER, scatters = s->collective == TSR_PLAN_REDUCE_SCATTER;
  uint64_t want = gathers ? ex * (uint64_t)n : scatters ? ex / (uint64_t)n : ex;
  if (want != ey || (scatters && ex % (uint64_t)n))
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': step %zu (%s over %d ranks): value '%s' has %" PRIu64
                    " elements and value '%s' %" PRIu64 ", which the collective cannot map", c->f->name, step,
                    tsr_plan_collective_names[s->collective], n, xv->id, ex, c->f->values[s->output].id, ey);
  static const tsr_reduce_op_t ops[] = {TSR_REDUCE_SUM, TSR_REDUCE_MAX, TSR_REDUCE_MIN, TSR_REDUCE_AVG,
                                        TSR_REDUCE_PROD};
  tsr_reduce_op_t op = ops[s->reduce];
  /* one device: every collective is the identity (a mean of one value is exact); in place, nothing to do */
  if (n == 1 || ex == 0)
    return ex && x->ptr != y->ptr ? device_copy(c, y->ptr, x->ptr, ex * esize, device_kind(c)) : TSR_SUCCESS;
  /* the interpreter's tree order: deterministic, or asked for by algo tree / binary_tree (as the interpreter
   * reads them) */
  bool tree = tree_order(s);
  void *temp = NULL, *whole = NULL;
  switch (s->collective) {
    case TSR_PLAN_ALL_REDUCE:
      st = tree ? tree_reduce(c, s, step, g, n, x->ptr, y->ptr, ex, d->comm, op, esize, &temp)
                            : comm_status(c, s, step, tsrCommAllReduce(g, x->ptr, y->ptr, ex, d->comm, op, c->stream));
      break;
    case TSR_PLAN_BROADCAST:
      st = comm_status(c, s, step, tsrCommBroadcast(g, x->ptr, y->ptr, ex, d->comm, (int)s->root, c->stream));
      break;
    case TSR_PLAN_ALL_GATHER:
      if (outer == 1) {
        st = comm_status(c, s, step, tsrCommAllGather(g, x->ptr, y->ptr, ex, d->comm, c->stream));
      } else if (!(st = scratch(c, ey * esize, &temp)) &&
                 !(st = comm_status(c, s, step, tsrCommAllGather(g, x->ptr, temp, ex, d->comm, c->stream)))) {
        st = regroup(c, y->ptr, temp, outer, n, ex / (uint64_t)outer * esize, false);
      }
      break;
    case TSR_PLAN_REDUCE_SCATTER: {
      const void* src = x->ptr;
      if (outer > 1) {
        if (!(st = scratch(c, ex * esize, &whole)))
          st = regroup(c, whole, x->ptr, outer, n, ey / (uint64_t)outer * esize, true);
        src = whole;
      }
      if (st) break;
      if (!tree) {
        st = comm_status(c, s, step, tsrCommReduceScatter(g, src, y->ptr, ex, d->comm, op, c->stream));
        break;
      }
      void* reduced;  /* the whole reduction in tree order, of which this rank keeps part `index` */
      if (!(st = scratch(c, ex * esize, &reduced))) {
        st = tree_reduce(c, s, step, g, n, src, reduced, ex, d->comm, op, esize, &temp);
        if (!st) st = device_copy(c, y->ptr, (char*)reduced + (size_t)index * ey * esize, ey * esize, device_kind(c));
        st = scratch_done(c, st, reduced, NULL);  /* freed once the copy out of it is done */
      }
      break;
    }
  }
  return scratch_done(c, st, temp, whole);
}

/* ---- the step timeline ---------------------------------------------------------------------------------
 * $TESSERA_STEP_TIMELINE=PATH (a diagnostic, docs/c-api.md "Environment"): each call of a function on a stream
 * that does not capture records an event on its stream before its first step and after each step, and on the
 * communication stream before and after each overlapped bucket (the start event completes once the bucket's
 * inputs are ready and the collectives before it are done; the end event once its all_reduces are); at the call's
 * end the host waits for its stream and appends one JSON line per step and bucket to PATH: device milliseconds
 * from the call's first event (cuEventElapsedTime across streams on CUDA). The wait makes calls run one at a
 * time; what happens inside a call is what it shows (bench/data_parallel_gpu.py: whether the buckets run beside
 * the backward's kernels). Each line also has host_ms: host milliseconds from the origin event's record to the record of
 * the line's end event (the step or bucket issued; for a bucket, host_start_ms at its start event), so that a
 * step the device ran late because the host issued it late (host_ms beyond the previous step's end_ms: the
 * previous call was waited for, so the device starts idle and its clock follows the host's within microseconds)
 * tells itself from one that waited on the device. A "wait" line is the call's stream waiting for a bucket
 * (settle): its end_ms is when the call's stream got past the wait, before step `before_step`. Events that
 * cannot be had leave their lines out. */

typedef enum { TIMELINE_STEP, TIMELINE_BUCKET, TIMELINE_WAIT } timeline_kind_t;

typedef struct timeline_mark {
  tsr_event_t start, end;  /* start: buckets only */
  uint32_t first, end_step, at;
  timeline_kind_t kind;
  double host_start, host_end;  /* ms from timeline_t.host_origin */
} timeline_mark_t;

typedef struct timeline {
  tsr_event_t origin;
  double host_origin;
  timeline_mark_t* marks;
  size_t count, capacity;
} timeline_t;

static double timeline_clock(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Host ms since the call's origin event (0 without a timeline). */
static double timeline_host(const call_t* c) {
  return c->timeline ? timeline_clock() - c->timeline->host_origin : 0;
}

static const char* timeline_file;
static void timeline_read_env(void) {
  const char* p = getenv("TESSERA_STEP_TIMELINE");
  timeline_file = p && *p ? p : NULL;
}

/* Read once per process (a call's cost stays what it was without it). */
static const char* timeline_path(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, timeline_read_env);
  return timeline_file;
}

static void timeline_free(call_t* c) {
  timeline_t* t = c->timeline;
  if (!t) return;
  for (size_t i = 0; i < t->count; i++) {
    if (t->marks[i].start) tsrReleaseEvent(t->marks[i].start);
    if (t->marks[i].end) tsrReleaseEvent(t->marks[i].end);
  }
  if (t->origin) tsrReleaseEvent(t->origin);
  free(t->marks);
  free(t);
  c->timeline = NULL;
}

/* Before the first step (a call on a stream that does not capture, not nested). */
static void timeline_begin(call_t* c) {
  if (!timeline_path() || !c->stream || c->capturing || c->depth) return;
  timeline_t* t = calloc(1, sizeof *t);
  if (!t) return;
  c->timeline = t;
  t->host_origin = timeline_clock();
  if (tsrCreateEvent(c->ctx, &t->origin) || tsrEventRecord(t->origin, c->stream)) timeline_free(c);
}

/* An event recorded on `on` now, or NULL. */
static tsr_event_t timeline_event(call_t* c, tsr_stream_t on) {
  tsr_event_t e = NULL;
  if (tsrCreateEvent(c->ctx, &e)) return NULL;
  if (tsrEventRecord(e, on)) {
    tsrReleaseEvent(e);
    return NULL;
  }
  return e;
}

static void timeline_mark(call_t* c, uint32_t first, uint32_t end, timeline_kind_t kind, tsr_event_t start,
                          double host_start, tsr_event_t e) {
  timeline_t* t = c->timeline;
  double host_end = timeline_host(c);
  if (t && t->count == t->capacity) {
    size_t capacity = t->capacity ? 2 * t->capacity : 128;
    timeline_mark_t* grown = realloc(t->marks, capacity * sizeof *grown);
    if (grown) t->marks = grown, t->capacity = capacity;
  }
  if (!t || t->count == t->capacity || !e) {
    if (start) tsrReleaseEvent(start);
    if (e) tsrReleaseEvent(e);
    return;
  }
  t->marks[t->count++] = (timeline_mark_t){start, e, first, end, c->timeline_at, kind, host_start, host_end};
}

/* After the call's last step: waits for the call's stream and appends the lines. */
static void timeline_write(call_t* c, tsr_status_t st) {
  timeline_t* t = c->timeline;
  if (!t) return;
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static uint64_t calls;
  FILE* out = NULL;
  if (!st && !tsrStreamSynchronize(c->stream)) {
    pthread_mutex_lock(&lock);
    out = fopen(timeline_path(), "a");
    uint64_t n = calls++;
    for (size_t i = 0; out && i < t->count; i++) {
      const timeline_mark_t* m = &t->marks[i];
      float end = 0, start = 0;
      if (tsrEventElapsedTime(t->origin, m->end, &end) ||
          (m->start && tsrEventElapsedTime(t->origin, m->start, &start)))
        continue;
      const tsr_plan_step_t* s = &c->f->steps[m->first];
      if (m->kind == TIMELINE_BUCKET)
        fprintf(out, "{\"function\": \"%s\", \"call\": %" PRIu64 ", \"bucket\": [%u, %u], \"start_ms\": %.4f, "
                "\"end_ms\": %.4f, \"host_start_ms\": %.4f, \"host_ms\": %.4f}\n", c->f->name, n, m->first,
                m->end_step, start, end, m->host_start, m->host_end);
      else if (m->kind == TIMELINE_WAIT)
        fprintf(out, "{\"function\": \"%s\", \"call\": %" PRIu64 ", \"wait\": [%u, %u], \"before_step\": %u, "
                "\"end_ms\": %.4f, \"host_ms\": %.4f}\n", c->f->name, n, m->first, m->end_step, m->at, end,
                m->host_end);
      else
        fprintf(out, "{\"function\": \"%s\", \"call\": %" PRIu64 ", \"step\": %u, \"kernel\": \"%s\", "
                "\"end_ms\": %.4f, \"host_ms\": %.4f}\n", c->f->name, n, m->first,
                s->kind == TSR_PLAN_STEP_ARGS || s->kind == TSR_PLAN_STEP_VIEW ? s->kernel
                : s->kind == TSR_PLAN_STEP_COLLECTIVE ? "(collective)" : "(call)", end, m->host_end);
    }
    if (out) fclose(out);
    pthread_mutex_unlock(&lock);
  }
  timeline_free(c);
}

/* ---- gradient buckets ------------------------------------------------------------------------------------
 * tessera-bucketize (passes/bucketize.py) places each bucket's all_reduces one after another, right after the
 * kernel producing the bucket's last tensor. A run of consecutive all_reduce steps that agree in mesh, axis,
 * reduction, order (deterministic, algo) and dtype, none reading another's result, is one collective: the
 * small inputs packed into one temporary, one all_reduce over it in place, the results unpacked — one message
 * per bucket instead of one per tensor — and each large one reduced from its input into its output
 * (DIRECT_BYTES). The tree order packs every member. Every element is combined with the same elements in the
 * same order as by the steps one by one, so the result is the same to the bit. */

static bool bucket_mate(const call_t* c, const tsr_plan_step_t* first, uint32_t from, uint32_t to) {
  const tsr_plan_step_t* b = &c->f->steps[to];
  if (b->kind != TSR_PLAN_STEP_COLLECTIVE || b->collective != TSR_PLAN_ALL_REDUCE || !same_axis(first, b) ||
      b->reduce != first->reduce || b->deterministic != first->deterministic || b->algo != first->algo ||
      strcmp(c->f->values[b->input].dtype, c->f->values[first->input].dtype) != 0)
    return false;
  for (uint32_t k = from; k < to; k++)
    if (c->f->steps[k].output == b->input) return false;
  return true;
}

/* The end of the run of all_reduce steps starting at step `i` (an all_reduce): its last step + 1. */
static uint32_t bucket_end(const call_t* c, uint32_t i) {
  uint32_t k = i + 1;
  while (k < c->f->step_count && bucket_mate(c, &c->f->steps[i], i, k)) k++;
  return k;
}

/* The bytes value `v` is bound to now, [*lo, *hi); false where it is not bound yet. */
static bool bound_bytes(const call_t* c, uint32_t v, uintptr_t* lo, uintptr_t* hi) {
  const value_state_t* s = &c->values[v];
  *lo = (uintptr_t)s->ptr;
  *hi = *lo + s->elements * c->fn->value_size[v];
  return s->ptr != NULL;
}

/* Whether values `a` and `b` share storage: one value, aliases of one (resolved to their root value), or
 * tenants of one buffer slot (a slot's next tenant may be written while the communication stream still writes
 * a result nobody reads, or reads an input). Two different aliases of one root whose bytes are both bound (as
 * they are once their alias steps ran) share it only where their ranges meet: a pipelined collective's row
 * chunks of one result are disjoint, so the next chunk's GEMM runs while the last chunk is reduced. */
static bool shares(const call_t* c, uint32_t a, uint32_t b) {
  uint32_t ra = c->fn->value_root[a], rb = c->fn->value_root[b];
  const tsr_plan_value_t *va = &c->f->values[ra], *vb = &c->f->values[rb];
  if (ra != rb) return va->has_buffer && vb->has_buffer && va->buffer == vb->buffer;
  uintptr_t alo, ahi, blo, bhi;
  if (a == b || !bound_bytes(c, a, &alo, &ahi) || !bound_bytes(c, b, &blo, &bhi)) return true;
  return alo < bhi && blo < ahi;
}

/* Whether step `s` reads or writes storage of value `vid`. */
static bool touches(const call_t* c, const tsr_plan_step_t* s, uint32_t vid) {
  switch (s->kind) {
    case TSR_PLAN_STEP_VIEW:
      for (uint32_t k = 0; k < s->tensor_count; k++)
        if (shares(c, s->tensors[k].value, vid)) return true;
      return false;
    case TSR_PLAN_STEP_ARGS:
      for (uint32_t k = 0; k < s->arg_count; k++)
        if (s->args[k].kind == TSR_PLAN_ARG_TENSOR && shares(c, s->args[k].value, vid)) return true;
      return false;
    case TSR_PLAN_STEP_CALL:
      for (uint32_t k = 0; k < s->call_arg_count; k++)
        if (shares(c, s->call_args[k], vid)) return true;
      for (uint32_t k = 0; k < s->call_result_count; k++)
        if (shares(c, s->call_results[k], vid)) return true;
      return false;
    case TSR_PLAN_STEP_ALIAS:  /* binds a value to storage, reading and writing none of it */
      return false;
    default:
      return shares(c, s->input, vid) || shares(c, s->output, vid);
  }
}

/* The call's stream waits for pending bucket `which` (its results are then ordered before what follows). The
 * others keep their order: a full ring settles its oldest (run_reduced), and a swap with the last once made
 * that the newest but one, so that each further bucket held the backward's next kernels until the collectives
 * queued before it were done (tests/c/test_comm_nccl_fake.py, test_buckets_in_flight_never_block_the_backward). */
static tsr_status_t settle(call_t* c, uint32_t which) {
  tsr_event_t done = c->pending[which].done;
  tsr_status_t st = tsrStreamWaitEvent(c->stream, done);
  tsrReleaseEvent(done);
  if (!st && c->timeline)
    timeline_mark(c, c->pending[which].first, c->pending[which].end, TIMELINE_WAIT, NULL, 0,
                  timeline_event(c, c->stream));
  memmove(&c->pending[which], &c->pending[which + 1], (--c->pending_count - which) * sizeof *c->pending);
  return st;
}

/* A bucket member of at least this many bytes is all-reduced directly from its input into its output: packing
 * and unpacking would move it through memory twice more, bandwidth the backward's kernels compete for, and a
 * message of 1 MiB already has most of NCCL's bus bandwidth (bench/allreduce_gpu.py: the fixed cost per call,
 * ~100 us, weighs on smaller ones), so packing saves nothing there. Smaller members are packed into one
 * message, which pays that cost once. */
#define DIRECT_BYTES ((uint64_t)1 << 20)

static uint64_t member_bytes(const call_t* c, uint32_t k) {
  uint32_t v = c->f->steps[k].input;
  return c->values[v].elements * c->fn->value_size[v];
}

/* The size below which a member of bucket [first, end) is packed: DIRECT_BYTES in a bucket of several, even for
 * one small member (its copy frees its input at once: the memory plan may give the input's buffer slot to the
 * next kernel, which would otherwise wait for the whole bucket, e.g. a bias gradient's slot taken by the next
 * layer's weight gradient); 0 for one all_reduce alone, which goes directly. */
static uint64_t packed_below(uint32_t first, uint32_t end) { return end - first > 1 ? DIRECT_BYTES : 0; }

/* Before step `step`: the call's stream waits for the buckets whose storage it touches: any member's output,
 * and a directly reduced member's input (the communication stream reads it; a packed one's was copied on the
 * call's stream). A value that shares storage with one (a buffer slot's other tenant, an alias) counts. */
static tsr_status_t settle_for(call_t* c, uint32_t step) {
  tsr_status_t st = TSR_SUCCESS;
  const tsr_plan_step_t* s = &c->f->steps[step];
  for (uint32_t p = c->pending_count; p-- > 0 && !st;) {
    bool needed = false;
    for (uint32_t k = c->pending[p].first; k < c->pending[p].end && !needed; k++)
      needed = touches(c, s, c->f->steps[k].output) ||
               (member_bytes(c, k) >= c->pending[p].below && touches(c, s, c->f->steps[k].input));
    if (needed) st = settle(c, p);
  }
  return st;
}

/* The function's communication stream: created by the first call that overlaps a collective, kept for the later
 * ones (a stream per call cost a CUstream, or on the CPU a thread, each time); calls racing to create it keep
 * the one published first. Concurrent calls share it: their collectives queue on it in the order they come,
 * each call's stream waiting only for its own. Where the backend's queues honour priorities (CUDA's), it has
 * the highest, so that the GPU schedules the collectives' kernels ahead of the next blocks of the kernels they
 * overlap (NCCL's few blocks would otherwise wait behind a GEMM's whole grid); the CPU's streams are as before. */
static tsr_status_t comm_stream(call_t* c) {
  if (c->comm_stream) return TSR_SUCCESS;
  tsr_stream_t s = __atomic_load_n(&c->fn->comm_stream, __ATOMIC_ACQUIRE);
  if (!s) {
    tsr_stream_options_t o;
    tsrStreamOptionsInitialize(&o);
    if (c->ctx->backend->queue_create) o.priority = INT32_MAX;  /* the backend clamps it to its highest */
    tsr_status_t st = tsrCreateStream(c->ctx, &o, &s);
    if (st) return st;
    tsr_stream_t none = NULL;
    if (!__atomic_compare_exchange_n(&c->fn->comm_stream, &none, s, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      tsrReleaseStream(s);
      s = none;
    }
  }
  c->comm_stream = s;
  return TSR_SUCCESS;
}

/* Steps [first, end), a bucket the communicator reduces in its own order (not the tree's): members of
 * packed_below bytes or more directly from input to output (in place where both are one storage), the others
 * packed into one temporary on the call's stream, reduced in place and unpacked. With `overlap` this runs on
 * the communication stream after an event of the call's stream (the packing copies and the inputs' producers
 * are queued there), its completion an event the call's stream waits for before the first step touching its
 * storage (settle_for) or at the call's end; the temporary is an intermediate of the call, released in the
 * call's stream order after that wait. Else it runs on the call's stream. */
static tsr_status_t run_reduced(call_t* c, uint32_t first, uint32_t end, tsr_comm_t g, const dtype_row_t* d,
                                tsr_reduce_op_t op, bool overlap) {
  const tsr_plan_step_t* s = &c->f->steps[first];
  uint64_t below = packed_below(first, end), count = 0;
  for (uint32_t k = first; k < end; k++)
    if (member_bytes(c, k) < below) count += c->values[c->f->steps[k].input].elements;
  tsr_status_t st = TSR_SUCCESS;
  if (overlap && c->pending_count == sizeof c->pending / sizeof *c->pending && (st = settle(c, 0))) return st;
  if (overlap && (st = comm_stream(c))) return step_fail(c, s, first, st);
  tsr_stream_t on = overlap ? c->comm_stream : c->stream;
  void* packed = NULL;
  if (count && (st = overlap ? alloc(c, count * d->size, &packed) : scratch(c, count * d->size, &packed))) return st;
  uint64_t at = 0;
  for (uint32_t k = first; k < end && !st; k++) {
    value_state_t* x = &c->values[c->f->steps[k].input];
    if (member_bytes(c, k) >= below) continue;
    st = device_copy(c, (char*)packed + at * d->size, x->ptr, x->elements * d->size, device_kind(c));
    at += x->elements;
  }
  tsr_event_t ready = NULL, done = NULL;
  if (!st && overlap &&
      ((st = tsrCreateEvent(c->ctx, &ready)) || (st = tsrEventRecord(ready, c->stream)) ||
       (st = tsrStreamWaitEvent(c->comm_stream, ready))))
    st = step_fail(c, s, first, st);
  if (ready) tsrReleaseEvent(ready);  /* the queued wait holds it */
  tsr_event_t began = !st && overlap && c->timeline ? timeline_event(c, c->comm_stream) : NULL;
  double host_began = timeline_host(c);
  /* No kernel step of the call after the bucket (the last chunk's all_reduce): nothing computes beside it, so
   * a communicator whose operations are capped at its units runs it uncapped (comm.h, units). Every rank
   * decides alike: it is the plan's. */
  bool alone = true;
  for (uint32_t k = end; k < c->f->step_count && alone; k++) {
    int kind = c->f->steps[k].kind;
    alone = kind != TSR_PLAN_STEP_ARGS && kind != TSR_PLAN_STEP_VIEW && kind != TSR_PLAN_STEP_CALL;
  }
  for (uint32_t k = first; k < end && !st; k++) {
    value_state_t *x = &c->values[c->f->steps[k].input], *y = &c->values[c->f->steps[k].output];
    if (member_bytes(c, k) >= below && x->elements)
      st = comm_status(c, &c->f->steps[k], k, tsr_comm_all_reduce(g, x->ptr, y->ptr, x->elements, d->comm, op, on,
                                                                  alone));
  }
  if (!st && count)
    st = comm_status(c, s, first, tsr_comm_all_reduce(g, packed, packed, count, d->comm, op, on, alone));
  at = 0;
  for (uint32_t k = first; k < end && !st; k++) {
    value_state_t* y = &c->values[c->f->steps[k].output];
    if (member_bytes(c, k) >= below) continue;
    void* from = (char*)packed + at * d->size;
    st = overlap ? tsrMemcpyAsync(c->ctx, y->ptr, from, y->elements * d->size, device_kind(c), on)
                 : device_copy(c, y->ptr, from, y->elements * d->size, device_kind(c));
    if (st && overlap) st = step_fail(c, s, first, st);
    at += y->elements;
  }
  if (!overlap) return scratch_done(c, st, packed, NULL);
  if (began)
    timeline_mark(c, first, end, TIMELINE_BUCKET, began, host_began, st ? NULL : timeline_event(c, c->comm_stream));
  if (!st && ((st = tsrCreateEvent(c->ctx, &done)) || (st = tsrEventRecord(done, c->comm_stream)))) {
    if (done) tsrReleaseEvent(done);
    st = step_fail(c, s, first, st);
  }
  if (st) {  /* the call's stream must not run ahead of the queued work before its intermediates go back */
    tsrStreamSynchronize(c->comm_stream);
    return st;
  }
  c->pending[c->pending_count].done = done;
  c->pending[c->pending_count].first = first;
  c->pending[c->pending_count].end = end;
  c->pending[c->pending_count++].below = below;
  return TSR_SUCCESS;
}

/* Steps [first, end) as one collective (the section's comment). */
static tsr_status_t run_bucket(call_t* c, uint32_t first, uint32_t end) {
  const tsr_plan_step_t* s = &c->f->steps[first];
  bool tree = tree_order(s);
  /* On a stream (not capturing) a bucket the communicator reduces runs on the communication stream, so that
   * the kernels after it overlap it; the tree order combines on the host, waiting for the call's stream, and
   * stays on it. */
  bool overlap = c->comm && c->stream && c->reuse && !tree;
  if (!c->comm || (end - first == 1 && !overlap)) return run_collective(c, s, first);
  tsr_comm_t g;
  int index;
  tsr_status_t st = group(c, s, first, &g, &index);
  if (st) return st;
  int n = (int)s->mesh_shape[s->axis];
  const dtype_row_t* d = dtype_of(c->f->values[s->input].dtype);
  uint64_t total = 0;
  for (uint32_t k = first; k < end; k++) {
    value_state_t *x, *y;
    if ((st = tensor(c, c->f->steps[k].input, &x)) || (st = tensor(c, c->f->steps[k].output, &y))) return st;
    if (x->elements != y->elements)
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': step %u (all_reduce over %d ranks): value '%s' has "
                      "%" PRIu64 " elements and value '%s' %" PRIu64 ", which the collective cannot map",
                      c->f->name, k, n, c->f->values[c->f->steps[k].input].id, x->elements,
                      c->f->values[c->f->steps[k].output].id, y->elements);
    total += x->elements;
  }
  if (n == 1 || total == 0) {  /* one device: each all_reduce is a copy */
    for (uint32_t k = first; k < end && !st; k++) st = run_collective(c, &c->f->steps[k], k);
    return st;
  }
  static const tsr_reduce_op_t ops[] = {TSR_REDUCE_SUM, TSR_REDUCE_MAX, TSR_REDUCE_MIN, TSR_REDUCE_AVG,
                                        TSR_REDUCE_PROD};
  if (!tree) return run_reduced(c, first, end, g, d, ops[s->reduce], overlap);
  void *packed = NULL, *temp = NULL;
  if ((st = scratch(c, total * d->size, &packed))) return st;
  uint64_t at = 0;
  for (uint32_t k = first; k < end && !st; k++) {
    value_state_t* x = &c->values[c->f->steps[k].input];
    st = device_copy(c, (char*)packed + at * d->size, x->ptr, x->elements * d->size, device_kind(c));
    at += x->elements;
  }
  if (!st) st = tree_reduce(c, s, first, g, n, packed, packed, total, d->comm, ops[s->reduce], d->size, &temp);
  at = 0;
  for (uint32_t k = first; k < end && !st; k++) {
    value_state_t* y = &c->values[c->f->steps[k].output];
    st = device_copy(c, y->ptr, (char*)packed + at * d->size, y->elements * d->size, device_kind(c));
    at += y->elements;
  }
  return scratch_done(c, st, packed, temp);
}


static tsr_status_t run_alias(call_t* c, const tsr_plan_step_t* s, size_t step) {
  value_state_t* source;
  tsr_status_t st = tensor(c, s->of, &source);
  if (st) return st;
  if (!s->has_offset) {  /* a reshape: sees every element */
    if ((st = check_alias(c, s, source->elements))) return st;
    c->values[s->alias] = *source;
    c->values[s->alias].elements = source->elements * c->fn->value_size[s->of] / c->fn->value_size[s->alias];
    return TSR_SUCCESS;
  }
  int64_t offset;
  uint64_t n = value_elements(c, s->alias, NULL, &st);
  if (st || (st = eval(c, &s->offset, false, &offset, "an alias's offset"))) return st;
  if (offset < 0 || (uint64_t)offset > source->elements || n > source->elements - (uint64_t)offset)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': step %zu: alias '%s' of %" PRIu64 " elements at offset "
                    "%" PRId64 " (%s) is not within value '%s' of %" PRIu64 " elements", c->f->name, step,
                    c->f->values[s->alias].id, n, offset, s->offset.text, c->f->values[s->of].id, source->elements);
  c->values[s->alias] = (value_state_t){(char*)source->ptr + (uint64_t)offset * c->fn->value_size[s->of], n};
  return TSR_SUCCESS;
}

/* Before a call on a capturing stream records anything: TSR_ERROR_UNSUPPORTED where function `fn` (called by
 * `top`) or a function it calls has a step that a graph cannot hold. A reduction in tree order over more than
 * one device combines on the host between two waits of the stream (tree_reduce): the host work would run at
 * capture, on data not yet there, not at the replays, and the capturing stream refuses the wait. (On a CPU
 * context too: a graph has no node that runs host code, and comm.c's deterministic reduction, which is one,
 * follows the communicator's flag, not the step's.) */
static tsr_status_t refuse_uncapturable(const struct tsr_function* top, const struct tsr_function* fn, int depth) {
  const tsr_plan_function_t* f = fn->plan;
  for (uint32_t i = 0; i < f->step_count; i++) {
    const tsr_plan_step_t* s = &f->steps[i];
    if (s->kind == TSR_PLAN_STEP_CALL && fn->callees[i] && depth + 1 < MAX_CALL_DEPTH) {
      tsr_status_t st = refuse_uncapturable(top, fn->callees[i], depth + 1);
      if (st) return st;
    }
    if (s->kind == TSR_PLAN_STEP_COLLECTIVE && tree_order(s) && s->mesh_shape[s->axis] > 1)
      return tsr_fail(TSR_ERROR_UNSUPPORTED, "function '%s': %s%s%sstep %u (%s over mesh axis '%s', %s) reduces "
                      "in the interpreter's tree order, which combines on the host between waits of the stream: a "
                      "graph capture cannot record it (call the function outside the capture, or reduce in the "
                      "communicator's order)", top->plan->name, fn == top ? "" : "called function '",
                      fn == top ? "" : f->name, fn == top ? "" : "': ", i, tsr_plan_collective_names[s->collective],
                      s->mesh_axes[s->axis], s->deterministic ? "deterministic" : tsr_plan_algo_names[s->algo]);
  }
  return TSR_SUCCESS;
}

/* Checks one DLTensor against its signature entry, binding symbolic extents. */
static tsr_status_t check_tensor(call_t* c, const DLTensor* t, const tsr_tensor_spec_t* spec, uint32_t vid,
                                 const char* role, bool bind) {
  const char* fname = c->f->name;
  if (!t) return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': %s '%s' is NULL", fname, role, spec->name);
  if (!t->data && !c->shapes_only)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': %s '%s' has NULL data", fname, role, spec->name);
  bool addressed = false;
  for (size_t i = 0; i < c->devices->count; i++) addressed = addressed || t->device.device_type == c->devices->types[i];
  if (!addressed)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': %s '%s' is on DLPack device type %d, but the context's "
                    "backend (%s) takes %s", fname, role, spec->name, (int)t->device.device_type,
                    c->devices->backend, c->devices->names);
  if (t->device.device_id != 0)  /* a context drives its backend's device 0 */
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': %s '%s' is on device %d, but the context's device is 0",
                    fname, role, spec->name, (int)t->device.device_id);
  if (t->dtype.code != spec->dtype.code || t->dtype.bits != spec->dtype.bits || t->dtype.lanes != 1) {
    char got[32], want[32];
    dl_spelling(t->dtype, got, sizeof got);
    dl_spelling(spec->dtype, want, sizeof want);
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': %s '%s' must have dtype %s (DLPack %s), got %s; no "
                    "dtype is converted implicitly", fname, role, spec->name, spec->dtype_name, want, got);
  }
  if (t->ndim < 0 || (uint32_t)t->ndim != spec->rank)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': %s '%s' must have rank %u, got %d", fname, role,
                    spec->name, spec->rank, (int)t->ndim);
  if (spec->rank && !t->shape)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': %s '%s' has a NULL shape", fname, role, spec->name);
  for (uint32_t r = 0; r < spec->rank; r++)
    if (t->shape[r] < 0)
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': %s '%s' has extent %" PRId64 " on axis %u", fname,
                      role, spec->name, t->shape[r], r);
  layout_t l;
  if (!layout_of(t, &l))
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': %s '%s' has extents and strides that span more than "
                    "int64 elements", fname, role, spec->name);
  if (!l.compact && t->ndim > MAX_RANK)
    return tsr_fail(TSR_ERROR_UNSUPPORTED, "function '%s': %s '%s' is strided and of rank %d: strided tensors of "
                    "rank at most %d are copied", fname, role, spec->name, (int)t->ndim, MAX_RANK);
  if (!bind && overlaps(t, &l))
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': %s '%s' has strides under which elements share memory "
                    "(a zero stride broadcasts): only inputs may, an output is written", fname, role, spec->name);
  const tsr_plan_value_t* v = &c->f->values[vid];
  for (uint32_t r = 0; r < spec->rank; r++) {
    int64_t n = t->shape[r];
    const tsr_expr_t* e = &v->dims[r];
    if (e->op_count == 1 && e->ops[0].op == TSR_EXPR_INT) {
      if (e->ops[0].value != n)
        return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': %s '%s' must have extent %" PRId64 " on axis %u, "
                        "got %" PRId64, fname, role, spec->name, e->ops[0].value, r, n);
    } else if (e->op_count == 1 && e->ops[0].op == TSR_EXPR_NAME) {
      int64_t sym = e->ops[0].value;
      if (!c->bound[sym] && bind) {
        c->env[sym] = n;
        c->bound[sym] = 1;
      } else if (c->bound[sym] && c->env[sym] != n) {
        return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': %s '%s' has %s = %" PRId64 " on axis %u, "
                        "but an earlier argument has %s = %" PRId64, fname, role, spec->name, e->text, n, r, e->text,
                        c->env[sym]);
      }
    }
    if (!bind) {  /* an output: its extents are those the plan computes */
      int64_t want;
      tsr_extents_t x = {&c->plan->symbols, c->env, c->bound};
      if (tsr_expr_eval(e, &x, &want)) {  /* the extent's name is formatted only for the message */
        char what[96];
        snprintf(what, sizeof what, "extent %u of %s '%s'", r, role, spec->name);
        return eval(c, e, false, &want, what);
      }
      if (want != n)
        return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': %s '%s' must have extent %" PRId64 " (%s) on axis "
                        "%u, got %" PRId64, fname, role, spec->name, want, e->text, r, n);
    }
  }
  return TSR_SUCCESS;
}

/* A buffer the context knows (tsrAlloc, tsrHostRegister) must hold every element a checked tensor's descriptor
 * reaches. Run after the extents of every tensor are checked: their refusal says more than the overrun a wrong
 * extent causes. */
static tsr_status_t check_reach(call_t* c, const DLTensor* t, const tsr_tensor_spec_t* spec, const char* role) {
  const char* fname = c->f->name;
  layout_t l;
  layout_of(t, &l);
  uint64_t size = dtype_of(spec->dtype_name)->size, bytes;
  tsr_pointer_info_t info;
  /* no arithmetic on a NULL data pointer (tsrFunctionGetResultShapes takes one): undefined behaviour in C */
  uintptr_t start = t->data ? (uintptr_t)t->data + t->byte_offset : 0;
  uintptr_t first = start - (uintptr_t)(-l.lo) * size;  /* the lowest element's address */
  /* looked up by `data`, the allocation's pointer: `start` may lie past its end (byte_offset), where debug mode's
   * slack and guard pages belong to no allocation */
  if (start && !l.empty && tsrPointerGetInfo(c->ctx, t->data, &info) == TSR_SUCCESS &&
      info.kind != TSR_MEMORY_UNKNOWN) {
    /* a span of more bytes than uint64 holds reaches past every allocation: refused too, not left unchecked */
    if (__builtin_mul_overflow((uint64_t)(l.hi - l.lo) + 1, size, &bytes)) bytes = UINT64_MAX;
    uintptr_t base = (uintptr_t)info.base;
    if (first < base || first - base > info.bytes || bytes > info.bytes - (first - base))
      return tsr_fail(TSR_ERROR_MEMORY_FAULT, "function '%s': %s '%s' reaches %" PRIu64 " bytes from %" PRIdPTR
                      " bytes after the start of its allocation of %zu bytes, past its %s", fname, role, spec->name,
                      bytes, (intptr_t)(first - base), info.bytes, first < base ? "start" : "end");
  }
  return TSR_SUCCESS;
}

static void* data_of(const DLTensor* t) { return (char*)t->data + t->byte_offset; }

/* The bytes [*lo, *hi) that tensor `t` of `size`-byte elements spans; false where it holds no element, has
 * strides whose span overflows, or (`compact_only`) is not compact. */
static bool span_of(const DLTensor* t, uint64_t size, bool compact_only, uintptr_t* lo, uintptr_t* hi) {
  layout_t l;
  if (!t->data || !size || !layout_of(t, &l) || l.empty || (compact_only && !l.compact)) return false;
  uintptr_t start = (uintptr_t)data_of(t);
  *lo = start - (uintptr_t)(-l.lo) * size;
  *hi = start + ((uintptr_t)l.hi + 1) * size;
  return true;
}

/* Whether compact output `t` of a device backend's call may hold its result while the steps compute it: its
 * first byte is TSR_ALLOC_ALIGNMENT-aligned, the alignment of every intermediate (tsrAlloc), which the kernels
 * may assume of the buffers they write (sm_90a's TMA stores need 16 bytes, vector stores up to 32), and it is
 * not host memory of the context (tsrAlloc(TSR_ALLOC_HOST_PINNED), tsrHostRegister), which the copy reaches
 * but a kernel of every backend may not. Memory the context does not know (another library's, by DLPack) is
 * the device's, as its DLPack device type, checked with the tensor, says: the inputs are used in place too. */
static bool device_direct(call_t* c, const DLTensor* t) {
  /* TESSERA_DEVICE_DIRECT_RESULTS=0 keeps the copy on devices, to compare: read once (racing first calls
   * store the same value) */
  static int enabled = -1;
  int on = __atomic_load_n(&enabled, __ATOMIC_RELAXED);
  if (on < 0) {
    const char* v = getenv("TESSERA_DEVICE_DIRECT_RESULTS");
    on = !(v && strcmp(v, "0") == 0);
    __atomic_store_n(&enabled, on, __ATOMIC_RELAXED);
  }
  if (!on || (uintptr_t)data_of(t) % TSR_ALLOC_ALIGNMENT) return false;
  tsr_pointer_info_t info;
  if (tsrPointerGetInfo(c->ctx, t->data, &info) != TSR_SUCCESS) return false;
  return info.kind != TSR_MEMORY_HOST_PINNED && info.kind != TSR_MEMORY_HOST_REGISTERED;
}

/* How a copy between two buffers of the context's device is named: device memory is host memory on the CPU. */
static tsr_memcpy_kind_t device_kind(const call_t* c) {
  return c->ctx->backend->host_memory ? TSR_MEMCPY_HOST_TO_HOST : TSR_MEMCPY_DEVICE_TO_DEVICE;
}

/* A copy ordered after the call's launches: queued on its stream (recorded while it captures), else done at
 * once. Through the runtime's copy operations but not tsrMemcpyAsync's checks, which refuse device memory
 * the context did not allocate (another library's, passed by DLPack): the tensors' ranges were checked
 * against the allocations the context knows already. */
static tsr_status_t device_copy(call_t* c, void* dst, const void* src, size_t bytes, tsr_memcpy_kind_t kind);

/* ---- strided tensors ----------------------------------------------------------------------------------
 * No kernel takes strides in this version: a strided input is gathered into a compact intermediate before the
 * first step, a result scattered into a strided output (or into a strided input a tile program writes) after
 * the last. Host memory is copied directly; device memory through host staging copies of the tensor's span
 * with the runtime's synchronous copies (a generic path: no backend has a strided copy). Either way the host
 * reads or writes the memory, so a call on a stream first waits for it. */

static int64_t stride_of(const DLTensor* t, int r, int64_t compact) { return t->strides ? t->strides[r] : compact; }

static bool layout_of(const DLTensor* t, layout_t* l) {
  *l = (layout_t){.compact = true};
  int64_t expect = 1;
  for (int r = t->ndim - 1; r >= 0; r--) {
    int64_t n = t->shape[r], stride = stride_of(t, r, expect), reach;
    if (n == 0) l->empty = true;
    if (n != 1 && stride != expect) l->compact = false;
    if (n > 0 && (__builtin_mul_overflow(n - 1, stride, &reach) ||
                  __builtin_add_overflow(reach < 0 ? l->lo : l->hi, reach, reach < 0 ? &l->lo : &l->hi)))
      return false;
    if (__builtin_mul_overflow(expect, n, &expect)) return false;
  }
  if (l->empty) l->compact = true;  /* no element: nothing to copy */
  return true;
}

/* Whether two elements of `t` may share memory: axes sorted by stride, each must step over all the elements
 * of the smaller ones (sufficient, as numpy's check; some exotic interleavings are refused too). */
static bool overlaps(const DLTensor* t, const layout_t* l) {
  if (l->compact) return false;
  int order[MAX_RANK], count = 0;
  for (int r = 0; r < t->ndim; r++)
    if (t->shape[r] > 1) order[count++] = r;
  for (int i = 1; i < count; i++)  /* insertion sort by |stride| */
    for (int j = i; j > 0 && llabs(t->strides[order[j]]) < llabs(t->strides[order[j - 1]]); j--) {
      int x = order[j];
      order[j] = order[j - 1];
      order[j - 1] = x;
    }
  int64_t need = 1;
  for (int i = 0; i < count; i++) {
    int64_t stride = llabs(t->strides[order[i]]);
    if (stride < need) return true;
    need = stride * t->shape[order[i]];  /* within the span layout_of checked */
  }
  return false;
}

/* Copies between strided tensor `t` (its element 0 at host address `origin`) and compact row-major `packed`:
 * the innermost axes that are compact in both go as one run. */
static void strided_copy(const DLTensor* t, char* origin, char* packed, size_t size, bool gather) {
  int inner = t->ndim;
  int64_t run = 1, outer = 1, index[MAX_RANK] = {0};
  while (inner > 0 && (t->shape[inner - 1] == 1 || t->strides[inner - 1] == run)) run *= t->shape[--inner];
  for (int r = 0; r < inner; r++) outer *= t->shape[r];
  size_t run_bytes = (size_t)run * size;
  for (int64_t k = 0; k < outer; k++, packed += run_bytes) {
    int64_t offset = 0;
    for (int r = 0; r < inner; r++) offset += index[r] * t->strides[r];
    char* p = origin + offset * (int64_t)size;
    if (gather) memcpy(packed, p, run_bytes);
    else memcpy(p, packed, run_bytes);
    for (int r = inner - 1; r >= 0 && ++index[r] == t->shape[r]; r--) index[r] = 0;
  }
}

/* Waits for the call's stream: the host is about to read or write memory its queued work may use. */
static tsr_status_t host_wait(call_t* c) { return c->stream ? tsrStreamSynchronize(c->stream) : TSR_SUCCESS; }

/* Gathers (`gather`) strided `t` into compact `packed` (an intermediate of `bytes`), or scatters it back. */
static tsr_status_t strided_transfer(call_t* c, const DLTensor* t, void* packed, uint64_t bytes, bool gather) {
  layout_t l;
  layout_of(t, &l);  /* checked with the tensor */
  size_t size = (t->dtype.bits + 7) / 8;
  tsr_status_t st = host_wait(c);
  if (st) return st;
  if (c->ctx->backend->host_memory) {
    strided_copy(t, data_of(t), packed, size, gather);
    return TSR_SUCCESS;
  }
  size_t span = (size_t)(l.hi - l.lo + 1) * size;
  void* first = (void*)((uintptr_t)data_of(t) - (uintptr_t)(-l.lo) * size);
  char* stage = malloc(span);
  char* compact = malloc(bytes ? bytes : 1);
  if (!stage || !compact) {
    st = tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "function '%s': out of memory staging a strided tensor", c->f->name);
  } else if (gather) {
    if (!(st = tsr_memory_copy(c->ctx, stage, first, span, TSR_MEMCPY_DEVICE_TO_HOST, "tsrFunctionCall"))) {
      strided_copy(t, stage + (size_t)(-l.lo) * size, compact, size, true);
      st = tsr_memory_copy(c->ctx, packed, compact, bytes, TSR_MEMCPY_HOST_TO_DEVICE, "tsrFunctionCall");
    }
  } else {  /* the span is read whole so that the elements between the tensor's keep their values */
    if (!(st = tsr_memory_copy(c->ctx, compact, packed, bytes, TSR_MEMCPY_DEVICE_TO_HOST, "tsrFunctionCall")) &&
        !(st = tsr_memory_copy(c->ctx, stage, first, span, TSR_MEMCPY_DEVICE_TO_HOST, "tsrFunctionCall"))) {
      strided_copy(t, stage + (size_t)(-l.lo) * size, compact, size, false);
      st = tsr_memory_copy(c->ctx, first, stage, span, TSR_MEMCPY_HOST_TO_DEVICE, "tsrFunctionCall");
    }
  }
  free(stage);
  free(compact);
  return st;
}

static tsr_status_t device_copy(call_t* c, void* dst, const void* src, size_t bytes, tsr_memcpy_kind_t kind) {
  tsr_status_t st = c->stream ? tsr_stream_submit_copy(c->stream, c->ctx, dst, src, bytes, kind)
                              : tsr_memory_copy(c->ctx, dst, src, bytes, kind, "tsrFunctionCall");
  if (st) {
    char message[768];
    snprintf(message, sizeof message, "%s", tsrGetLastErrorMessage());
    return tsr_fail(st, "function '%s': copying %zu bytes: %s", c->f->name, bytes, message);
  }
  return TSR_SUCCESS;
}

/* Where an extent of the function comes from, for messages: "K.shape[0]", the first argument axis that has it
 * (as tessera.executor said it), else the plan's spelling. */
static void extent_source(const call_t* c, const tsr_expr_t* e, char* buf, size_t size) {
  const tsr_function_signature_t* sig = &c->fn->signature;
  for (size_t a = 0; a < sig->input_count; a++)
    for (uint32_t r = 0; r < sig->inputs[a].rank; r++)
      if (strcmp(sig->inputs[a].dims[r], e->text) == 0) {
        snprintf(buf, size, "%s.shape[%u]", sig->inputs[a].name, r);
        return;
      }
  snprintf(buf, size, "%s", e->text);
}

/* Checks the inputs against the signature, binding the function's extents from their shapes, and the plan's
 * same_extents over them: what tsrFunctionCall and tsrFunctionGetResultShapes both check first. */
static tsr_status_t bind_inputs(call_t* c, const DLTensor* const* inputs) {
  const tsr_plan_function_t* f = c->f;
  const tsr_function_signature_t* sig = &c->fn->signature;
  tsr_status_t st;
  for (uint32_t a = 0; a < f->arg_count; a++)
    if ((st = check_tensor(c, inputs[a], &sig->inputs[a], f->args[a], "argument", true))) return st;
  /* An argument's extent given by an expression of the others' (a vjp's cotangent of a reshaped result,
   * (M*N*3)//(1)) binds nothing: it is checked once every name is bound. */
  for (uint32_t a = 0; a < f->arg_count; a++) {
    const tsr_plan_value_t* v = &f->values[f->args[a]];
    for (uint32_t r = 0; r < v->rank; r++) {
      const tsr_expr_t* e = &v->dims[r];
      int64_t want;
      if (e->op_count == 1) continue;  /* an integer or a name: checked above */
      if ((st = eval(c, e, false, &want, "an argument's extent"))) return st;
      if (want != inputs[a]->shape[r])
        return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': argument '%s' must have extent %" PRId64 " (%s) on "
                        "axis %u, got %" PRId64, f->name, sig->inputs[a].name, want, e->text, r, inputs[a]->shape[r]);
    }
  }
  for (uint32_t i = 0; i < f->same_count; i++) {
    int64_t x, y;
    if ((st = eval(c, &f->same_extents[i][0], false, &x, "same_extents")) ||
        (st = eval(c, &f->same_extents[i][1], false, &y, "same_extents")))
      return st;
    if (x != y) {
      char a[128], b[128];
      extent_source(c, &f->same_extents[i][0], a, sizeof a);
      extent_source(c, &f->same_extents[i][1], b, sizeof b);
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': %s = %" PRId64 " and %s = %" PRId64 " must be equal "
                      "(rows of the same tile.range blocks)", f->name, a, x, b, y);
    }
  }
  /* A broadcast's extent is max(x, y) in the plan: that is numpy's broadcast only where x and y are equal, or one
   * is 1 and the other not 0. Else the kernels would index an input by an extent it does not have (or divide by
   * its 0 extent). */
  for (uint32_t i = 0; i < f->broadcast_count; i++) {
    int64_t x, y;
    if ((st = eval(c, &f->broadcasts[i][0], false, &x, "broadcasts")) ||
        (st = eval(c, &f->broadcasts[i][1], false, &y, "broadcasts")))
      return st;
    if (x != y && ((x != 1 && y != 1) || x == 0 || y == 0)) {
      char a[128], b[128];
      extent_source(c, &f->broadcasts[i][0], a, sizeof a);
      extent_source(c, &f->broadcasts[i][1], b, sizeof b);
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': %s = %" PRId64 " and %s = %" PRId64 " do not "
                      "broadcast: they must be equal, or one of them 1 %s", f->name, a, x, b, y,
                      (x == 1 || y == 1) ? "(an extent of 1 against 0, which numpy allows, compiled functions do "
                                           "not)" : "(numpy's rule)");
    }
  }
  /* An alias of an argument that does not cover it (an unmasked tile.range step that does not divide the
   * extent) would fail at run time: said first, as it is the cause of the size mismatch checked below too. */
  for (uint32_t i = 0; i < f->step_count; i++) {
    const tsr_plan_step_t* s = &f->steps[i];
    for (uint32_t a = 0; s->kind == TSR_PLAN_STEP_ALIAS && !s->has_offset && a < f->arg_count; a++) {
      if (f->args[a] != s->of) continue;
      uint64_t have = 1;
      for (int32_t d = 0; d < inputs[a]->ndim; d++) have *= (uint64_t)inputs[a]->shape[d];
      if ((st = check_alias(c, s, have))) return st;
    }
  }
  /* A tile program's result is also written into the argument passed for it (call()): that argument must have
   * the result's size, which the plan's extents alone do not ensure (a broadcast result, max(A_0, C_0), is
   * larger than an argument C that broadcasts). Copying a larger result into it would overrun its buffer. */
  for (uint32_t r = 0; r < f->result_count && r < f->output_count; r++) {
    if (f->outputs[r] < 0 || (uint64_t)f->outputs[r] >= f->arg_count) continue;
    uint32_t a = (uint32_t)f->outputs[r];
    uint64_t want = value_elements(c, f->results[r], NULL, &st), have = 1;
    if (st) return st;
    for (int32_t d = 0; d < inputs[a]->ndim; d++) have *= (uint64_t)inputs[a]->shape[d];
    if (have != want)
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': argument '%s' has %" PRIu64 " elements, but result %u, "
                      "which the tile program also writes into it, has %" PRIu64 ": their extents must agree",
                      f->name, sig->inputs[a].name, have, r, want);
  }
  for (uint32_t a = 0; a < f->arg_count; a++)
    if ((st = check_reach(c, inputs[a], &sig->inputs[a], "argument"))) return st;
  return TSR_SUCCESS;
}

static tsr_status_t call(call_t* c, const DLTensor* const* inputs, const DLTensor* const* outputs) {
  const tsr_plan_function_t* f = c->f;
  const tsr_function_signature_t* sig = &c->fn->signature;
  tsr_status_t st = bind_inputs(c, inputs);
  if (st) return st;
  for (uint32_t r = 0; r < f->result_count; r++)
    if ((st = check_tensor(c, outputs[r], &sig->outputs[r], f->results[r], "output", false))) return st;
  for (uint32_t r = 0; r < f->result_count; r++)
    if ((st = check_reach(c, outputs[r], &sig->outputs[r], "output"))) return st;
  /* strided tensors: an input a tile program writes must not share memory between its elements either; none
   * is copied while a graph is captured (the host copies would run now, not in the replays) */
  bool strided = false;
  for (uint32_t k = 0; k < f->arg_count + f->result_count; k++) {
    const DLTensor* t = k < f->arg_count ? inputs[k] : outputs[k - f->arg_count];
    layout_t l;
    layout_of(t, &l);
    strided = strided || !l.compact;
    for (uint32_t r = 0; k < f->arg_count && r < f->output_count; r++)
      if (f->outputs[r] == (int64_t)k && overlaps(t, &l))
        return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': argument '%s' has strides under which elements "
                        "share memory (a zero stride broadcasts), but the tile program writes result %u into it",
                        f->name, sig->inputs[k].name, r);
  }
  if (strided && c->stream) {
    pthread_mutex_lock(&c->stream->lock);
    bool capturing = c->stream->capture != NULL;
    pthread_mutex_unlock(&c->stream->lock);
    if (capturing)
      return tsr_fail(TSR_ERROR_UNSUPPORTED, "function '%s': a strided tensor is copied by the host, which a graph "
                      "capture cannot record: pass compact tensors to a captured call", f->name);
  }
  if (c->capturing && c->depth == 0 && (st = refuse_uncapturable(c->fn, c->fn, 0))) return st;
  for (uint32_t a = 0; a < f->arg_count; a++) {
    value_state_t* v = &c->values[f->args[a]];
    v->ptr = data_of(inputs[a]);
    v->elements = 1;
    for (int32_t r = 0; r < inputs[a]->ndim; r++) v->elements *= (uint64_t)inputs[a]->shape[r];
    layout_t l;
    layout_of(inputs[a], &l);
    if (l.compact) continue;
    uint64_t bytes = v->elements * dtype_of(f->values[f->args[a]].dtype)->size;
    if ((st = alloc(c, bytes, &v->ptr)) || (st = strided_transfer(c, inputs[a], v->ptr, bytes, true))) return st;
  }
  /* A result is computed in its output's memory where that is compact and shares no byte with an argument
   * or another output, instead of in an intermediate copied out after the last step (on the CPU the host's
   * 4 MiB copy took a tenth of an int8 GEMM call at 1024^3; on CUDA the 32 MiB device-to-device copy took 16 of
   * the 128 us of a 4096^3 fp8 GEMM call). Not where it overlaps one: the steps read the arguments until the
   * last (a called function's output may even reuse its input's buffer slot). A result the steps alias to
   * another value (run_alias) or that is an argument keeps the copy, as does one the plan puts in a buffer
   * slot with other tenants (compiled plans give results no slot; a hand-made one's later tenant would then
   * get the slot to itself, where it shared the result's bytes before) and every result of a captured call
   * (a graph holds its intermediates and replays the copies into the outputs it was recorded with). On a
   * device backend (device_direct) the output must also be device memory (not host memory the context knows)
   * starting TSR_ALLOC_ALIGNMENT-aligned, as the intermediates the kernels otherwise write do. */
  bool direct = !c->capturing;
  for (uint32_t r = 0; r < f->result_count && direct; r++) {
    value_state_t* v = &c->values[f->results[r]];
    const tsr_plan_value_t* rv = &f->values[f->results[r]];
    uintptr_t lo, hi;
    if (v->ptr || !span_of(outputs[r], dtype_of(rv->dtype)->size, true, &lo, &hi)) continue;
    if (rv->has_buffer && c->fn->slot_first[rv->buffer + 1] - c->fn->slot_first[rv->buffer] > 1) continue;
    if (!c->ctx->backend->host_memory && !device_direct(c, outputs[r])) continue;
    bool apart = true;
    for (uint32_t k = 0; k < f->arg_count + f->result_count && apart; k++) {
      const DLTensor* t = k < f->arg_count ? inputs[k] : outputs[k - f->arg_count];
      uint32_t vid = k < f->arg_count ? f->args[k] : f->results[k - f->arg_count];
      uintptr_t tlo, thi;
      if (k != f->arg_count + r && span_of(t, dtype_of(f->values[vid].dtype)->size, false, &tlo, &thi))
        apart = thi <= lo || hi <= tlo;
    }
    if (!apart) continue;
    v->elements = value_elements(c, f->results[r], NULL, &st);
    if (st) return st;
    v->ptr = data_of(outputs[r]);
  }
  for (uint32_t i = 0, next; i < f->step_count; i = next) {
    const tsr_plan_step_t* s = &f->steps[i];
    bool reduces = s->kind == TSR_PLAN_STEP_COLLECTIVE && s->collective == TSR_PLAN_ALL_REDUCE;
    next = reduces ? bucket_end(c, i) : i + 1;
    c->timeline_at = i;
    for (uint32_t k = i; k < next && c->pending_count; k++)  /* each member of a bucket reads and writes */
      if ((st = settle_for(c, k))) return st;
    st = reduces ? run_bucket(c, i, next)
         : s->kind == TSR_PLAN_STEP_ALIAS ? run_alias(c, s, i)
         : s->kind == TSR_PLAN_STEP_CALL ? run_call(c, s, i)
         : s->kind == TSR_PLAN_STEP_COLLECTIVE ? run_collective(c, s, i)
         : s->kind == TSR_PLAN_STEP_ARGS ? run_args(c, s, i)
                                         : run_view(c, s, i);
    if (st) return st;
    if (c->timeline && s->kind != TSR_PLAN_STEP_ALIAS && !(reduces && c->pending_count &&
                                                          c->pending[c->pending_count - 1].first == i))
      timeline_mark(c, i, next, TIMELINE_STEP, NULL, 0, timeline_event(c, c->stream));
  }
  c->timeline_at = f->step_count;
  while (c->pending_count)  /* the results are copied out on the call's stream */
    if ((st = settle(c, 0))) return st;
  /* the results into the outputs; a tile program's outputs also into the inputs passed for them */
  for (uint32_t r = 0; r < f->result_count; r++) {
    value_state_t* v;
    if ((st = tensor(c, f->results[r], &v))) return st;
    size_t bytes = (size_t)v->elements * dtype_of(f->values[f->results[r]].dtype)->size;
    const DLTensor* targets[2] = {outputs[r], r < f->output_count && f->outputs[r] >= 0 &&
                                              (uint64_t)f->outputs[r] < f->arg_count ? inputs[f->outputs[r]] : NULL};
    for (int t = 0; t < 2; t++) {
      if (!targets[t] || data_of(targets[t]) == v->ptr || !bytes) continue;
      layout_t l;
      layout_of(targets[t], &l);
      st = l.compact ? device_copy(c, data_of(targets[t]), v->ptr, bytes, device_kind(c))
                     : strided_transfer(c, targets[t], v->ptr, bytes, false);
      if (st) return st;
    }
  }
  return TSR_SUCCESS;
}

/* The state of one call of `fn` on the context's backend: its extents and values, nothing bound yet. */
static tsr_status_t call_open(call_t* c, struct tsr_function* fn, size_t n_in, const DLTensor* const* inputs) {
  const tsr_plan_function_t* f = fn->plan;
  struct tsr_module* m = fn->module;
  memset(c, 0, offsetof(call_t, scratch));  /* not the scratch: 2 KiB cleared per call for nothing */
  c->fn = fn;
  c->f = f;
  c->plan = m->plan;
  c->ctx = m->obj.context;
  for (size_t i = 0; i < sizeof device_rows / sizeof *device_rows; i++)
    if (strcmp(device_rows[i].backend, c->ctx->backend->name) == 0) c->devices = &device_rows[i];
  if (!c->devices)
    return tsr_fail(TSR_ERROR_UNSUPPORTED, "function '%s': the context's backend '%s' has no DLPack device type "
                    "this version knows", f->name, c->ctx->backend->name);
  if (n_in != f->arg_count)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s' takes %u arguments, got %zu", f->name, f->arg_count, n_in);
  if (n_in && !inputs)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': the inputs array is NULL", f->name);
  /* every array rounded up to 8 bytes, so that the next one is aligned */
  /* the intermediates: values, slots, and a collective step's temporary per step at most (a gradient bucket's
   * packed one; under capture scratch()'s, of which a step that a capture records has one at most) */
  size_t nsym = c->plan->symbols.count + 1, owned = (size_t)f->value_count + fn->slot_count + f->step_count + 1;
  size_t words = nsym, bytes8 = (nsym + 7) / 8 * 8;
  size_t sizes[] = {words * 8, bytes8, words * 8, bytes8, words * 8, bytes8,
                    ((size_t)f->value_count + 1) * sizeof *c->values, ((size_t)fn->slot_count + 1) * sizeof *c->slots,
                    owned * sizeof *c->owned, owned * sizeof *c->owned_bytes};
  size_t total = 0;
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) total += sizes[i];
  unsigned char* p = c->scratch;
  if (total > sizeof c->scratch && !(p = c->heap = malloc(total)))
    return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "function '%s': out of memory", f->name);
  void** arrays[] = {(void**)&c->env, (void**)&c->bound, (void**)&c->local, (void**)&c->local_bound,
                     (void**)&c->saved, (void**)&c->saved_bound, (void**)&c->values, (void**)&c->slots,
                     (void**)&c->owned, (void**)&c->owned_bytes};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    *arrays[i] = p;
    p += sizes[i];
  }
  /* unbound extents, no value's storage yet, empty slots; the rest is written before it is read */
  memset(c->env, 0, sizes[0] + sizes[1]);
  memset(c->values, 0, sizes[6] + sizes[7]);
  return TSR_SUCCESS;
}

/* Releases a call's intermediates; returns `st`, or the release's failure where `st` is success. On the NULL
 * stream the work is done: freed now. On a stream they go back to the pool once the work queued so far has
 * finished, without waiting for it (deferred.h; after a failure too: some of the call's work may be queued).
 * On a stream capturing a graph the launches and copies were recorded, not run: the intermediates go to the
 * graph, which frees them with the last of it and its executable instances. */
static tsr_status_t release_owned(call_t* c, tsr_status_t st) {
  if (!c->owned_count) return st;
  tsr_status_t released = TSR_SUCCESS;
  if (c->stream)
    released = tsr_deferred_release(c->ctx, c->stream, c->owned, c->owned_bytes, c->owned_count);
  else
    for (size_t i = 0; i < c->owned_count; i++) tsrFree(c->ctx, c->owned[i]);
  c->owned_count = 0;
  if (!st && released) {  /* e.g. a queued launch or copy failed, found waiting without a marker: the stream's
                           * message names no function */
    char message[768];
    snprintf(message, sizeof message, "%s", tsrGetLastErrorMessage());
    st = tsr_fail(released, "function '%s': %s", c->f->name, message);
  }
  return st;
}

static void call_close(call_t* c) { free(c->heap); }

tsr_status_t tsrFunctionGetResultShapes(tsr_function_t fn, const DLTensor* const* inputs, size_t n_in,
                                        int64_t* out_dims, size_t n_dims) {
  if (!tsr_handle_is_live(fn, TSR_MAGIC_FUNCTION)) return tsr_fail_handle(__func__, "function");
  const tsr_plan_function_t* f = fn->plan;
  size_t total = 0;
  for (uint32_t r = 0; r < f->result_count; r++) total += f->values[f->results[r]].rank;
  if (n_dims != total)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrFunctionGetResultShapes: function '%s': its results have %zu "
                    "extents in all, got room for %zu", f->name, total, n_dims);
  if (n_dims && !out_dims) return tsr_fail_null_output(__func__);
  call_t c;
  tsr_status_t st = call_open(&c, fn, n_in, inputs);
  c.shapes_only = true;
  if (!st) st = bind_inputs(&c, inputs);
  size_t at = 0;
  for (uint32_t r = 0; r < f->result_count && !st; r++) {
    const tsr_plan_value_t* v = &f->values[f->results[r]];
    for (uint32_t d = 0; d < v->rank && !st; d++) {
      char what[64];
      snprintf(what, sizeof what, "extent %u of result%u", d, r);
      int64_t x;
      if ((st = eval(&c, &v->dims[d], false, &x, what))) break;
      if (x < 0)
        st = tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': %s is %" PRId64 ", below 0", f->name, what, x);
      else
        out_dims[at++] = x;
    }
  }
  call_close(&c);
  return st;
}

tsr_status_t tsrFunctionCallOptionsInitialize(tsr_function_call_options_t* options) {
  if (!options) return tsr_fail_null_output(__func__);
  *options = (tsr_function_call_options_t){0};
  return TSR_SUCCESS;
}

tsr_status_t tsrFunctionCall(tsr_function_t fn, tsr_stream_t stream, const DLTensor* const* inputs, size_t n_in,
                             const DLTensor* const* outputs, size_t n_out) {
  return tsrFunctionCallWithOptions(fn, stream, inputs, n_in, outputs, n_out, NULL);
}

tsr_status_t tsrFunctionCallWithOptions(tsr_function_t fn, tsr_stream_t stream, const DLTensor* const* inputs,
                                        size_t n_in, const DLTensor* const* outputs, size_t n_out,
                                        const tsr_function_call_options_t* options) {
  if (!tsr_handle_is_live(fn, TSR_MAGIC_FUNCTION)) return tsr_fail_handle(__func__, "function");
  const tsr_plan_function_t* f = fn->plan;
  if (n_out != f->result_count)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s' has %u results, got %zu outputs", f->name,
                    f->result_count, n_out);
  if (n_out && !outputs)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "function '%s': the outputs array is NULL", f->name);
  struct tsr_context* ctx = fn->module->obj.context;
  /* the stream is held for the call: its copies are submitted to it directly */
  if (stream) {
    tsr_status_t st = tsr_stream_acquire(stream, ctx, __func__);
    if (st) return st;
  }
  tsr_deferred_poll(ctx);  /* intermediates of earlier calls whose work finished go back to the pool */
  call_t c;
  tsr_status_t st = call_open(&c, fn, n_in, inputs);
  c.stream = stream;
  c.comm = options ? options->comm : NULL;
  if (!st && stream) {
    /* Read once: a capture that begins on the stream while a call on it runs is a race of the caller's. */
    pthread_mutex_lock(&stream->lock);
    c.reuse = stream->capture == NULL;
    c.capturing = !c.reuse;
    pthread_mutex_unlock(&stream->lock);
  }
  if (!st) {
    /* Read on the first call only: the device does not change, and a CPU's properties come from /proc/cpuinfo,
     * which cost every call ~10 us. Calls racing to read it store the same value. */
    c.device_units = __atomic_load_n(&fn->device_units, __ATOMIC_RELAXED);
    if (!c.device_units) {
      tsr_device_properties_t props;
      c.device_units = ctx->backend->properties(ctx->backend_state, &props) ? 1 : props.compute_units;
      __atomic_store_n(&fn->device_units, c.device_units, __ATOMIC_RELAXED);
    }
    timeline_begin(&c);
    st = call(&c, inputs, outputs);
    timeline_write(&c, st);
  }
  st = release_groups(&c, st);
  st = release_owned(&c, st);
  call_close(&c);
  if (stream) tsr_object_unref(&stream->obj);
  return st;
}
