/* plan_tool.c — drives the launch-plan reader (runtime/src/plan.c) and extent expressions (extent.c) from
 * tests/c/test_plan_reader.py. Built from those sources directly: they are internal to libtessera.
 *
 *   plan_tool version          the plan format version the reader takes
 *   plan_tool dump FILE        FILE is a .tessera.plan section: its plans as JSON, or "ERR STATUS: message"
 *   plan_tool batch FILE       FILE holds sections, each as "<length>\n<bytes>": one line per section,
 *                              "OK <json>" or "ERR STATUS: message"
 *   plan_tool eval FILE        each line "expr\tname=value name=value ...": "OK value" or "ERR message"
 *
 * Every parsed plan is also evaluated in full (each expression with every name bound to 7), so that the
 * sanitizers see the evaluator run on whatever the reader accepted. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extent.h"
#include "plan.h"

static char* slurp(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  if (!f) return perror(path), NULL;
  size_t cap = 1 << 16, n = 0;
  char* buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) buf = realloc(buf, cap *= 2);
  }
  fclose(f);
  *size = n;
  return buf;
}

static void one_line(const char* message) {
  for (const char* p = message; *p; p++) putchar(*p == '\n' || *p == '\r' ? ' ' : *p);
  putchar('\n');
}

static void evaluate_all(const tsr_plan_t* plan) {
  uint32_t n = plan->symbols.count;
  int64_t* values = malloc((n + 1) * sizeof *values);
  uint8_t* bound = malloc(n + 1);
  for (uint32_t i = 0; i < n; i++) values[i] = 7, bound[i] = 1;
  tsr_extents_t env = {&plan->symbols, values, bound};
  int64_t v;
  for (uint32_t f = 0; f < plan->function_count; f++) {
    const tsr_plan_function_t* fn = &plan->functions[f];
    for (uint32_t i = 0; i < fn->value_count; i++)
      for (uint32_t d = 0; d < fn->values[i].rank; d++) tsr_expr_eval(&fn->values[i].dims[d], &env, &v);
    for (uint32_t s = 0; s < fn->step_count; s++) {
      const tsr_plan_step_t* st = &fn->steps[s];
      if (st->kind == TSR_PLAN_STEP_ALIAS) continue;
      for (int k = 0; k < 3; k++) tsr_expr_eval(&st->launch.grid[k], &env, &v);
      for (uint32_t i = 0; i < st->env_count; i++) tsr_expr_eval(&st->env[i].expr, &env, &v);
      for (uint32_t i = 0; i < st->arg_count; i++) {
        if (st->args[i].kind == TSR_PLAN_ARG_I64) tsr_expr_eval(&st->args[i].i64, &env, &v);
        for (uint32_t d = 0; d < st->args[i].rank; d++) tsr_expr_eval(&st->args[i].shape[d], &env, &v);
      }
      for (uint32_t i = 0; i < st->multiple_count; i++) tsr_expr_eval(&st->multiple_of[i].expr, &env, &v);
      for (uint32_t i = 0; i < st->prefer_count; i++) tsr_expr_eval(&st->prefer[i].when, &env, &v);
      if (st->kind == TSR_PLAN_STEP_VIEW) {
        tsr_expr_eval(&st->R, &env, &v);
        tsr_expr_eval(&st->C, &env, &v);
        tsr_expr_eval(&st->B, &env, &v);
        for (uint32_t i = 0; i < st->scalar_count; i++) tsr_expr_eval(&st->scalars[i], &env, &v);
      }
    }
  }
  free(values);
  free(bound);
}

/* Prints the plans of one section, or its error; returns whether it read. */
static int show(const char* data, size_t size, const char* ok_prefix) {
  tsr_plan_t* plan;
  tsr_status_t s = tsr_plan_read(data, size, &plan);
  if (s) {
    printf("ERR %s: ", tsrGetStatusName(s));
    one_line(tsrGetLastErrorMessage());
    return 0;
  }
  evaluate_all(plan);
  fputs(ok_prefix, stdout);
  tsr_plan_write_json(stdout, plan);
  tsr_plan_free(plan);
  return 1;
}

static void eval_line(char* line) {
  char* tab = strchr(line, '\t');
  if (!tab) {
    puts("ERR no tab");
    return;
  }
  *tab = '\0';
  tsr_arena_t arena = {0};
  tsr_symbols_t symbols;
  tsr_symbols_init(&symbols, &arena);
  tsr_expr_t e;
  char why[160];
  if (!tsr_expr_compile(line, &symbols, &e, why, sizeof why)) {
    printf("ERR parse: %s\n", why);
    tsr_arena_release(&arena);
    return;
  }
  int64_t* values = calloc(symbols.count + 1, sizeof *values);
  uint8_t* bound = calloc(symbols.count + 1, 1);
  for (char* tok = strtok(tab + 1, " \n"); tok; tok = strtok(NULL, " \n")) {
    char* eq = strchr(tok, '=');
    if (!eq) continue;
    *eq = '\0';
    int64_t sym = tsr_symbols_find(&symbols, tok);
    if (sym >= 0) values[sym] = strtoll(eq + 1, NULL, 10), bound[sym] = 1;
  }
  tsr_extents_t env = {&symbols, values, bound};
  int64_t v;
  tsr_status_t s = tsr_expr_eval(&e, &env, &v);
  if (s) {
    fputs("ERR eval: ", stdout);
    one_line(tsrGetLastErrorMessage());
  } else {
    printf("OK %" PRId64 "\n", v);
  }
  free(values);
  free(bound);
  tsr_arena_release(&arena);
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "version") == 0) return printf("%d\n", TSR_PLAN_VERSION), 0;
  if (argc != 3) return fputs("usage: plan_tool version | dump FILE | batch FILE | eval FILE\n", stderr), 2;
  size_t size;
  char* data = slurp(argv[2], &size);
  if (!data) return 2;
  int rc = 0;
  if (strcmp(argv[1], "dump") == 0) {
    rc = !show(data, size, "");
  } else if (strcmp(argv[1], "batch") == 0) {
    size_t at = 0;
    while (at < size) {
      char* end;
      size_t n = strtoull(data + at, &end, 10);
      if (*end != '\n' || n > size - (size_t)(end + 1 - data)) return fputs("bad batch file\n", stderr), 2;
      /* each section in its own allocation, so that ASan sees a read past its end */
      char* section = malloc(n ? n : 1);
      memcpy(section, end + 1, n);
      show(section, n, "OK ");
      free(section);
      at = (size_t)(end + 1 - data) + n;
    }
  } else if (strcmp(argv[1], "eval") == 0) {
    data = realloc(data, size + 1);
    data[size] = '\0';
    for (char *line = data, *nl; *line; line = nl + 1) {
      nl = strchr(line, '\n');
      if (nl) *nl = '\0';
      eval_line(line);
      if (!nl) break;
    }
  } else {
    rc = 2;
  }
  free(data);
  return rc;
}
