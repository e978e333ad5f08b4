/* metrics.c — the metrics log (metrics.h, <tessera/telemetry.h>).
 *
 * One process-wide file behind one mutex; each record is one line, flushed at once so that a crash loses
 * nothing already measured. The p95 of a name is the nearest-rank 95th percentile of its last `window`
 * durations, kept in a ring per name. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "errors.h"
#include "json.h"
#include "metrics.h"

enum { DEFAULT_WINDOW = 100 };

typedef enum { FORMAT_JSONL, FORMAT_CSV } format_t;

/* The last durations of one name. */
typedef struct series {
  char* name;
  double* samples;  /* ring of `window` entries */
  uint32_t count, next;
} series_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool enabled;
static FILE* out;             /* guarded by lock */
static format_t format;
static uint32_t window;
static series_t* series;
static size_t series_count, series_capacity;
static bool env_opened;       /* $TESSERA_METRICS was opened once already */

double tsr_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  double s = (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
  return s > 0 ? s : 1e-9;
}

bool tsr_metrics_on(void) { return atomic_load_explicit(&enabled, memory_order_relaxed); }

static void forget_series(void) {
  for (size_t i = 0; i < series_count; i++) {
    free(series[i].name);
    free(series[i].samples);
  }
  free(series);
  series = NULL;
  series_count = series_capacity = 0;
}

/* With the lock held. */
static void close_log(void) {
  atomic_store(&enabled, false);
  if (out) fclose(out);
  out = NULL;
  forget_series();
}

static bool ends_with(const char* s, const char* suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcasecmp(s + n - k, suffix) == 0;
}

tsr_status_t tsrMetricsOpen(const char* path, uint32_t window_size) {
  if (!path || !*path) return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrMetricsOpen: the path is NULL or empty");
  format_t f;
  if (ends_with(path, ".jsonl") || ends_with(path, ".json")) f = FORMAT_JSONL;
  else if (ends_with(path, ".csv")) f = FORMAT_CSV;
  else
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrMetricsOpen: '%s' ends neither in .jsonl nor in .csv, so the "
                    "format is unknown", path);
  FILE* file = fopen(path, "w");
  if (!file) return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrMetricsOpen: cannot open '%s': %s", path, strerror(errno));
  if (f == FORMAT_CSV) fputs("ts,kind,name,stream,grid,block,time_ms,gflops,gbps,p95_ms,samples,status\n", file);
  fflush(file);
  pthread_mutex_lock(&lock);
  close_log();
  out = file;
  format = f;
  window = window_size ? window_size : DEFAULT_WINDOW;
  atomic_store(&enabled, true);
  pthread_mutex_unlock(&lock);
  return TSR_SUCCESS;
}

tsr_status_t tsrMetricsClose(void) {
  pthread_mutex_lock(&lock);
  close_log();
  pthread_mutex_unlock(&lock);
  return TSR_SUCCESS;
}

tsr_status_t tsr_metrics_open_from_env(void) {
  const char* path = getenv("TESSERA_METRICS");
  if (!path || !*path) return TSR_SUCCESS;
  pthread_mutex_lock(&lock);
  bool already = env_opened || out;
  pthread_mutex_unlock(&lock);
  if (already) return TSR_SUCCESS;
  uint32_t w = 0;
  const char* env_window = getenv("TESSERA_METRICS_WINDOW");
  if (env_window && *env_window) {
    char* end;
    unsigned long v = strtoul(env_window, &end, 10);
    if (*end || v == 0 || v > 1000000)
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "TESSERA_METRICS_WINDOW='%s' is not an integer in [1, 1000000]",
                      env_window);
    w = (uint32_t)v;
  }
  tsr_status_t st = tsrMetricsOpen(path, w);
  if (st) return tsr_fail(st, "TESSERA_METRICS: %s", tsrGetLastErrorMessage());
  pthread_mutex_lock(&lock);
  env_opened = true;
  pthread_mutex_unlock(&lock);
  return TSR_SUCCESS;
}

/* The series of `name`, created on first use; NULL when out of memory (the record then has no p95). */
static series_t* series_of(const char* name) {
  for (size_t i = 0; i < series_count; i++)
    if (strcmp(series[i].name, name) == 0) return &series[i];
  if (series_count == series_capacity) {
    size_t capacity = series_capacity ? series_capacity * 2 : 16;
    series_t* grown = realloc(series, capacity * sizeof *grown);
    if (!grown) return NULL;
    series = grown;
    series_capacity = capacity;
  }
  series_t s = {strdup(name), calloc(window, sizeof(double)), 0, 0};
  if (!s.name || !s.samples) {
    free(s.name);
    free(s.samples);
    return NULL;
  }
  series[series_count] = s;
  return &series[series_count++];
}

static int by_value(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Adds a duration and returns the p95 over the window (NAN when unknown); *n = samples in the window. */
static double add_sample(const char* name, double seconds, uint32_t* n) {
  series_t* s = series_of(name);
  *n = 0;
  if (!s) return NAN;
  s->samples[s->next] = seconds;
  s->next = (s->next + 1) % window;
  if (s->count < window) s->count++;
  double* sorted = malloc(s->count * sizeof *sorted);
  if (!sorted) return NAN;
  memcpy(sorted, s->samples, s->count * sizeof *sorted);
  qsort(sorted, s->count, sizeof *sorted, by_value);
  size_t rank = (size_t)ceil(0.95 * s->count);
  double p95 = sorted[rank ? rank - 1 : 0];
  free(sorted);
  *n = s->count;
  return p95;
}

static double rate(double amount, double seconds, double unit) {
  return amount > 0 && seconds > 0 ? amount / seconds / unit : NAN;
}

static void csv_number(double v) {
  if (isfinite(v)) fprintf(out, "%.9g", v);
}

static void csv_name(const char* s) {
  if (!strpbrk(s, ",\"\n\r")) {
    fputs(s, out);
    return;
  }
  fputc('"', out);
  for (; *s; s++) {
    if (*s == '"') fputc('"', out);
    fputc(*s, out);
  }
  fputc('"', out);
}

void tsr_metrics_write(const tsr_metrics_entry_t* e) {
  if (!tsr_metrics_on()) return;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  double ts = (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
  const char* kind = e->kind ? e->kind : e->grid ? "kernel" : "copy";
  double gflops = rate(e->flops, e->seconds, 1e9), gbps = rate(e->bytes, e->seconds, 1e9);
  pthread_mutex_lock(&lock);
  if (!out) {
    pthread_mutex_unlock(&lock);
    return;
  }
  uint32_t n;
  double p95 = add_sample(e->name, e->seconds, &n);
  if (format == FORMAT_JSONL) {
    fprintf(out, "{\"ts\": %.6f, \"kind\": \"%s\", \"name\": ", ts, kind);
    tsr_json_string(out, e->name);
    fprintf(out, ", \"stream\": %llu", (unsigned long long)e->stream);
    if (e->grid)
      fprintf(out, ", \"grid\": [%u, %u, %u], \"block\": [%u, %u, %u]", e->grid[0], e->grid[1], e->grid[2],
              e->block[0], e->block[1], e->block[2]);
    fputs(", \"time_ms\": ", out);
    tsr_json_number(out, e->seconds * 1e3);
    fputs(", \"gflops\": ", out);
    tsr_json_number(out, gflops);
    fputs(", \"gbps\": ", out);
    tsr_json_number(out, gbps);
    fputs(", \"p95_ms\": ", out);
    tsr_json_number(out, p95 * 1e3);
    fprintf(out, ", \"samples\": %u, \"status\": \"%s\"}\n", n, tsrGetStatusName(e->status));
  } else {
    fprintf(out, "%.6f,%s,", ts, kind);
    csv_name(e->name);
    fprintf(out, ",%llu,", (unsigned long long)e->stream);
    if (e->grid)
      fprintf(out, "%ux%ux%u,%ux%ux%u", e->grid[0], e->grid[1], e->grid[2], e->block[0], e->block[1], e->block[2]);
    else
      fputc(',', out);
    fputc(',', out);
    csv_number(e->seconds * 1e3);
    fputc(',', out);
    csv_number(gflops);
    fputc(',', out);
    csv_number(gbps);
    fputc(',', out);
    csv_number(p95 * 1e3);
    fprintf(out, ",%u,%s\n", n, tsrGetStatusName(e->status));
  }
  fflush(out);
  pthread_mutex_unlock(&lock);
}

tsr_status_t tsrMetricsRecord(const char* name, double seconds, double flops, double bytes) {
  if (!name) return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrMetricsRecord: the name is NULL");
  if (!isfinite(seconds) || seconds < 0)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrMetricsRecord: '%s' lasted %g seconds", name, seconds);
  if (!(flops >= 0) || !(bytes >= 0))
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrMetricsRecord: '%s': flop and byte counts must be >= 0", name);
  tsr_metrics_write(&(tsr_metrics_entry_t){.kind = "host", .name = name, .seconds = seconds, .flops = flops,
                                           .bytes = bytes, .status = TSR_SUCCESS});
  return TSR_SUCCESS;
}
