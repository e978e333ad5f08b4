/* fuzz_plan.c — libFuzzer target: the launch-plan reader (runtime/src/plan.c) and extent expressions.
 *
 * Each input is a `.tessera.plan` section. A plan that reads is written back as JSON, and that JSON must read
 * again and write the same bytes (the writer and the reader agree); every expression of it is evaluated with
 * all names bound to extents taken from the input, so that the checked arithmetic meets large, negative and
 * zero operands. A crash, a sanitizer report, a leak or a trap is a bug; refusals are the expected outcome. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

static char* written(const tsr_plan_t* plan, size_t* size) {
  char* text = NULL;
  FILE* f = open_memstream(&text, size);
  if (!f) __builtin_trap();
  tsr_plan_write_json(f, plan);
  fclose(f);
  return text;
}

static void evaluate(const tsr_expr_t* e, const tsr_extents_t* env) {
  int64_t v;
  tsr_expr_eval(e, env, &v);
}

static void evaluate_all(const tsr_plan_t* plan, const uint8_t* data, size_t size) {
  uint32_t n = plan->symbols.count;
  int64_t* values = malloc((n + 1) * sizeof *values);
  uint8_t* bound = malloc(n + 1);
  if (!values || !bound) __builtin_trap();
  static const int64_t pick[] = {0, 1, -1, 7, 128, INT64_MAX, INT64_MIN, 1 << 30};
  for (uint32_t i = 0; i < n; i++) {
    uint8_t b = size ? data[i % size] : 0;
    values[i] = pick[b & 7];
    bound[i] = (b >> 3) != 0;
  }
  tsr_extents_t env = {&plan->symbols, values, bound};
  for (uint32_t f = 0; f < plan->function_count; f++) {
    const tsr_plan_function_t* fn = &plan->functions[f];
    for (uint32_t i = 0; i < fn->value_count; i++)
      for (uint32_t d = 0; d < fn->values[i].rank; d++) evaluate(&fn->values[i].dims[d], &env);
    for (uint32_t i = 0; i < fn->same_count; i++) evaluate(&fn->same_extents[i][0], &env);
    for (uint32_t s = 0; s < fn->step_count; s++) {
      const tsr_plan_step_t* st = &fn->steps[s];
      if (st->kind == TSR_PLAN_STEP_ALIAS) {
        if (st->alias >= fn->value_count || st->of >= fn->value_count) __builtin_trap();
        continue;
      }
      for (int k = 0; k < 3; k++) evaluate(&st->launch.grid[k], &env);
      for (uint32_t i = 0; i < st->env_count; i++) evaluate(&st->env[i].expr, &env);
      for (uint32_t i = 0; i < st->arg_count; i++) {
        if (st->args[i].kind == TSR_PLAN_ARG_I64) evaluate(&st->args[i].i64, &env);
        for (uint32_t d = 0; d < st->args[i].rank; d++) evaluate(&st->args[i].shape[d], &env);
      }
      for (uint32_t i = 0; i < st->multiple_count; i++) evaluate(&st->multiple_of[i].expr, &env);
      for (uint32_t i = 0; i < st->prefer_count; i++) evaluate(&st->prefer[i].when, &env);
      if (st->kind == TSR_PLAN_STEP_VIEW) {
        evaluate(&st->R, &env);
        evaluate(&st->C, &env);
        evaluate(&st->B, &env);
        for (uint32_t i = 0; i < st->scalar_count; i++) evaluate(&st->scalars[i], &env);
      }
    }
  }
  free(values);
  free(bound);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tsr_plan_t* plan;
  if (tsr_plan_read(data, size, &plan)) {
    if (plan || !tsrGetLastErrorMessage()[0]) __builtin_trap();  /* a refusal says why and returns nothing */
    return 0;
  }
  evaluate_all(plan, data, size);
  size_t n1, n2;
  char* first = written(plan, &n1);
  tsr_plan_t* again;
  if (tsr_plan_read(first, n1, &again)) __builtin_trap();  /* what the writer writes, the reader reads */
  char* second = written(again, &n2);
  if (n1 != n2 || memcmp(first, second, n1) != 0) __builtin_trap();
  free(first);
  free(second);
  tsr_plan_free(again);
  tsr_plan_free(plan);
  return 0;
}
