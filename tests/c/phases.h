/* phases.h — for hosts run on the fake CUDA driver (fake_cuda.c): phase() marks where a phase begins, on stdout
 * and in $FAKE_CUDA_LOG, so that a test reads the driver calls of each phase; seconds() times waits. Include
 * after check.h, with _POSIX_C_SOURCE 200809L defined first (clock_gettime). */
#ifndef TESSERA_TESTS_PHASES_H_
#define TESSERA_TESTS_PHASES_H_

#include <time.h>

#include "check.h"

static void phase(const char* name) {
  printf("## %s\n", name);
  const char* path = getenv("FAKE_CUDA_LOG");
  FILE* f = path ? fopen(path, "a") : NULL;
  if (f) {
    fprintf(f, "## %s\n", name);
    fclose(f);
  }
}

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#endif  /* TESSERA_TESTS_PHASES_H_ */
