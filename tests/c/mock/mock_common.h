/* mock_common.h — what the mock GPU drivers share (mock_hip.c, mock_level_zero.c): a call log and injected
 * failures, both set through the environment so that a test drives the real libtessera loader against the
 * mock without any hook in the library:
 *
 *   MOCK_LOG=path          each driver call appends one line: the function's name, then its arguments
 *   MOCK_FAIL=f=code,...   function f returns `code` (decimal or 0x hex) instead of succeeding
 *
 * Each mock also runs the one kernel the tests launch (saxpy, out = a * x + y over n elements) on the host,
 * from the arguments exactly as the loader packed them, so that a wrongly packed argument shows up as a
 * wrong result; device memory is host memory. */
#ifndef TESSERA_TESTS_MOCK_COMMON_H_
#define TESSERA_TESTS_MOCK_COMMON_H_

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t mock_log_lock = PTHREAD_MUTEX_INITIALIZER;

static void mock_log(const char* fmt, ...) {
  const char* path = getenv("MOCK_LOG");
  if (!path || !*path) return;
  pthread_mutex_lock(&mock_log_lock);
  FILE* f = fopen(path, "a");
  if (f) {
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
  }
  pthread_mutex_unlock(&mock_log_lock);
}

/* The code MOCK_FAIL gives `function`, or 0. */
static long mock_fail(const char* function) {
  const char* spec = getenv("MOCK_FAIL");
  size_t n = strlen(function);
  for (const char* p = spec; p && *p;) {
    if (strncmp(p, function, n) == 0 && p[n] == '=') return strtol(p + n + 1, NULL, 0);
    p = strchr(p, ',');
    if (p) p++;
  }
  return 0;
}

/* saxpy over the launch's threads, as the compiled kernel computes it. */
static void mock_saxpy(uint32_t grid, uint32_t block, float a, const float* x, const float* y, float* out,
                       int64_t n) {
  for (uint64_t i = 0; i < (uint64_t)grid * block; i++)
    if ((int64_t)i < n) out[i] = a * x[i] + y[i];
}

#endif  /* TESSERA_TESTS_MOCK_COMMON_H_ */
