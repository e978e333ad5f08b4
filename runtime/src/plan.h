/* plan.h — launch plans read by C: the `.tessera.plan` section of an image (docs/image-format.md, "Launch
 * plans") parsed into structs that mirror tessera/plan.py's typed plans (Plan, Value, ViewStep, ArgsStep,
 * AliasStep), every extent expression compiled once (extent.h).
 *
 * The reader accepts what `tessera.plan.decode` accepts, minus what a 64-bit runtime cannot hold (integers
 * outside int64, NUL bytes in names, nesting deeper than json_doc.h allows): a document it reads decodes in
 * Python to the same plans, and tsr_plan_write_json writes them as `Plan.to_json` does. Value ids are resolved
 * to indices into their function's `values`; every name the expressions use is interned in the plan's
 * `symbols`. The whole parse lives in one arena: tsr_plan_free releases it. */
#ifndef TESSERA_SRC_PLAN_H_
#define TESSERA_SRC_PLAN_H_

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "arena.h"
#include "extent.h"
#include "tessera/tessera.h"

/* The format version tessera.plan.VERSION writes; this runtime reads TSR_PLAN_VERSION_MIN to TSR_PLAN_VERSION
 * (tessera.plan.READS): version 3 is version 4 without call steps, 4 is 5 without collective steps, 5 is 6 without
 * alias offsets, 6 is 7 without a function's broadcasts, 7 is 8 without a function's operators. */
#define TSR_PLAN_VERSION 8
#define TSR_PLAN_VERSION_MIN 3

typedef enum tsr_plan_view {
  TSR_PLAN_VIEW_MATRIX,  /* [R, C] */
  TSR_PLAN_VIEW_COLS,    /* [C] */
  TSR_PLAN_VIEW_ROWS,    /* [R] */
  TSR_PLAN_VIEW_SCALAR,  /* all its elements */
  TSR_PLAN_VIEW_BMN,     /* [B, R, C] */
  TSR_PLAN_VIEW_BNM,     /* [B, C, R] */
} tsr_plan_view_t;

/* "matrix", "cols", ...; the names of tessera.plan.VIEWS. */
extern const char* const tsr_plan_view_names[6];

typedef struct tsr_plan_value {
  const char* id;
  const char* dtype;   /* a dtype name as the plan writes it ("f32", "bf16") */
  uint32_t rank;
  tsr_expr_t* dims;    /* [rank] */
  bool has_buffer;
  int64_t buffer;      /* the storage slot an intermediate shares */
  const char* declared; /* an argument stored as another dtype: the one its parameter declares; else NULL */
} tsr_plan_value_t;

typedef struct tsr_plan_launch {
  int64_t block[3];
  tsr_expr_t grid[3];
} tsr_plan_launch_t;

typedef struct tsr_plan_tensor {
  uint32_t value;  /* index into the function's values */
  tsr_plan_view_t view;
} tsr_plan_tensor_t;

typedef enum tsr_plan_arg_kind { TSR_PLAN_ARG_TENSOR, TSR_PLAN_ARG_F32, TSR_PLAN_ARG_I64 } tsr_plan_arg_kind_t;

typedef struct tsr_plan_arg {
  tsr_plan_arg_kind_t kind;
  uint32_t value;      /* TENSOR: index into the function's values */
  uint32_t rank;       /* TENSOR: the shape it is seen with */
  tsr_expr_t* shape;
  double f32;          /* F32 */
  tsr_expr_t i64;      /* I64 */
} tsr_plan_arg_t;

/* An env entry of an argument step: the step's extent `symbol` (its `name`) is `expr` over the function's. */
typedef struct tsr_plan_env {
  const char* name;
  uint32_t symbol;
  tsr_expr_t expr;
} tsr_plan_env_t;

typedef struct tsr_plan_multiple {
  tsr_expr_t expr;
  int64_t m;
  const char* reason;
} tsr_plan_multiple_t;

typedef struct tsr_plan_alternative {
  tsr_expr_t when;
  const char* kernel;
  tsr_plan_launch_t launch;
  int64_t smem;
} tsr_plan_alternative_t;

typedef enum tsr_plan_step_kind {
  TSR_PLAN_STEP_VIEW,
  TSR_PLAN_STEP_ARGS,
  TSR_PLAN_STEP_ALIAS,
  TSR_PLAN_STEP_CALL,
  TSR_PLAN_STEP_COLLECTIVE,
} tsr_plan_step_kind_t;

/* A collective step's operation and reduction, in the order of their names below (tessera.plan.COLLECTIVES,
 * REDUCTIONS, ALGOS). */
typedef enum tsr_plan_collective {
  TSR_PLAN_ALL_REDUCE,
  TSR_PLAN_REDUCE_SCATTER,
  TSR_PLAN_ALL_GATHER,
  TSR_PLAN_BROADCAST,
} tsr_plan_collective_t;
extern const char* const tsr_plan_collective_names[4];

typedef enum tsr_plan_reduce {
  TSR_PLAN_REDUCE_SUM,
  TSR_PLAN_REDUCE_MAX,
  TSR_PLAN_REDUCE_MIN,
  TSR_PLAN_REDUCE_MEAN,
  TSR_PLAN_REDUCE_PROD,
} tsr_plan_reduce_t;
extern const char* const tsr_plan_reduce_names[5];
extern const char* const tsr_plan_algo_names[4];  /* ring, tree, binary_tree, auto */

typedef struct tsr_plan_step {
  tsr_plan_step_kind_t kind;
  /* VIEW and ARGS */
  const char* kernel;
  const char* source;          /* or NULL */
  tsr_plan_launch_t launch;
  /* VIEW */
  uint32_t tensor_count;
  tsr_plan_tensor_t* tensors;
  tsr_expr_t R, C, B;          /* B is "1" when the document has none */
  uint32_t scalar_count;
  tsr_expr_t* scalars;
  /* ARGS */
  uint32_t env_count;
  tsr_plan_env_t* env;         /* in the document's order */
  uint32_t arg_count;
  tsr_plan_arg_t* args;
  int32_t batch;               /* index into env, or -1 */
  int64_t smem;
  uint32_t multiple_count;
  tsr_plan_multiple_t* multiple_of;
  uint32_t prefer_count;
  tsr_plan_alternative_t* prefer;
  /* ALIAS: value `alias` is the storage of value `of`: with an "offset" (has_offset, version 6) a window of it from
   * element `offset` on with its own dims, which may see fewer elements; without one all of it, a reshape, which
   * must see every element. Both have one dtype. */
  uint32_t alias, of;
  bool has_offset;
  tsr_expr_t offset;
  /* CALL: function `call` of the same document (or, where the document has none, an unresolved import) runs
   * with values `call_args` as its arguments and `call_results` as its results */
  const char* call;
  uint32_t call_arg_count, call_result_count;
  uint32_t *call_args, *call_results;
  /* COLLECTIVE: `collective` from value `input` to value `output` among the ranks whose coordinates over the
   * mesh (rank r unravelled row-major over `mesh_shape`) differ only along mesh axis `axis` (an index into
   * `mesh_axes`); `reduce` for all_reduce and reduce_scatter, `dim` (a tensor axis, below both values' rank)
   * for reduce_scatter and all_gather, `root` (an index along the axis) for broadcast, else 0; `deterministic`
   * and `algo` (an index into tsr_plan_algo_names) for the reductions. */
  tsr_plan_collective_t collective;
  uint32_t input, output;
  uint32_t mesh_rank;
  const char** mesh_axes;
  int64_t* mesh_shape;
  uint32_t axis;
  tsr_plan_reduce_t reduce;
  int64_t dim, root;
  bool deterministic;
  uint32_t algo;
} tsr_plan_step_t;

typedef struct tsr_plan_function {
  const char* name;
  uint32_t param_count, arg_count, result_count, value_count, step_count, fallback_count, output_count,
      same_count, broadcast_count;
  const char** params;
  uint32_t* args;              /* indices into values, in parameter order */
  uint32_t* results;
  tsr_plan_value_t* values;    /* in the document's order */
  tsr_plan_step_t* steps;
  const char** fallbacks;
  int64_t* outputs;
  tsr_expr_t (*same_extents)[2];
  tsr_expr_t (*broadcasts)[2];  /* extents broadcast against each other: equal, or one 1 and the other not 0 */
  uint32_t operator_count;
  tsr_operator_spec_t* operators;  /* operator parameters and results (version 8), checked as tessera.plan does */
} tsr_plan_function_t;

typedef struct tsr_plan {
  uint32_t function_count;
  tsr_plan_function_t* functions;  /* in the document's order */
  tsr_symbols_t symbols;           /* every name of every expression and env entry */
  tsr_arena_t arena;
} tsr_plan_t;

/* Reads a `.tessera.plan` section of `size` bytes. TSR_ERROR_BAD_IMAGE with a message naming the function,
 * the step and the member where the document is malformed, truncated or of another version (the message
 * names both versions); TSR_ERROR_OUT_OF_MEMORY. On failure *out is NULL and nothing needs releasing. */
tsr_status_t tsr_plan_read(const void* data, size_t size, tsr_plan_t** out);

void tsr_plan_free(tsr_plan_t* plan);

/* The function of that name, or NULL. */
const tsr_plan_function_t* tsr_plan_find(const tsr_plan_t* plan, const char* name);

/* Writes `plan` as one JSON document, members in the order and with the defaults left out as
 * tessera.plan.encode writes them (so json.loads of it equals json.loads of encode(decode(section))). */
void tsr_plan_write_json(FILE* out, const tsr_plan_t* plan);

#endif  /* TESSERA_SRC_PLAN_H_ */
