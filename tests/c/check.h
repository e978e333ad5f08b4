/* check.h — what the test hosts share: checks that print one line each and count failures, and reading the
 * test image. A host prints "ok …" or "FAIL …" per check and ends with "N failed"; it exits with N. */
#ifndef TESSERA_TESTS_CHECK_H_
#define TESSERA_TESTS_CHECK_H_

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

static int failures;

/* A status check: `got` must be `want`. */
static inline void expect(const char* what, tsr_status_t got, tsr_status_t want) {
  bool ok = got == want;
  failures += !ok;
  printf("%-4s %-60s %s%s%s  %s\n", ok ? "ok" : "FAIL", what, tsrGetStatusName(got), ok ? "" : " want ",
         ok ? "" : tsrGetStatusName(want), got && got != TSR_ERROR_NOT_READY ? tsrGetLastErrorMessage() : "");
}

/* Also checks that the last error message mentions `needle`. */
static inline void expect_msg(const char* what, tsr_status_t got, tsr_status_t want, const char* needle) {
  expect(what, got, want);
  if (got == want && !strstr(tsrGetLastErrorMessage(), needle)) {
    failures++;
    printf("FAIL %-60s message lacks '%s'\n", what, needle);
  }
}

/* A condition check. */
static inline void check(const char* what, bool ok) {
  failures += !ok;
  printf("%-4s %s\n", ok ? "ok" : "FAIL", what);
}

/* Fails the whole host at once: for setup steps the checks depend on. */
#define MUST(call)                                                                                  \
  do {                                                                                              \
    tsr_status_t must_ = (call);                                                                    \
    if (must_ != TSR_SUCCESS) {                                                                     \
      printf("FAIL %s: %s: %s\n", #call, tsrGetStatusName(must_), tsrGetLastErrorMessage());        \
      exit(2);                                                                                      \
    }                                                                                               \
  } while (0)

static inline void* read_file(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  if (!f) {
    printf("FAIL cannot open %s\n", path);
    exit(2);
  }
  fseek(f, 0, SEEK_END);
  *size = (size_t)ftell(f);
  rewind(f);
  void* data = malloc(*size ? *size : 1);
  if (!data || fread(data, 1, *size, f) != *size) exit(2);
  fclose(f);
  return data;
}

/* The DLPack device type of a backend's memory. */
static inline DLDeviceType device_type_of(const char* backend) {
  if (strcmp(backend, "cuda") == 0) return kDLCUDA;
  if (strcmp(backend, "hip") == 0) return kDLROCM;
  if (strcmp(backend, "level_zero") == 0) return kDLOneAPI;
  if (strcmp(backend, "opencl") == 0) return kDLOpenCL;
  return kDLCPU;
}

/* The shapes file of a host's file protocol (tests/c/hostutil.py, run_host_function) in directory `dir`, or
 * NULL (the reason printed). */
static inline FILE* open_shapes(const char* dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/shapes.txt", dir);
  FILE* f = fopen(path, "r");
  if (!f) perror(path);
  return f;
}

/* One line of a host's shapes file, "ROLE NDIM D0 D1 ...": the extents into `shape` (8 at most) and their
 * product into `elems`; the rank, or -1 where the line is not one. */
static inline int read_shape(FILE* f, int64_t shape[8], size_t* elems) {
  char role[8];
  int ndim;
  if (fscanf(f, "%7s %d", role, &ndim) != 2 || ndim < 0 || ndim > 8) return -1;
  *elems = 1;
  for (int r = 0; r < ndim; r++) {
    long long d;
    if (fscanf(f, "%lld", &d) != 1) return -1;
    shape[r] = d;
    *elems *= (size_t)d;
  }
  return ndim;
}

/* Loads the image at `path` into `ctx` (the test image: argv[1]). */
static inline tsr_module_t load_test_image(tsr_context_t ctx, const char* path) {
  size_t size;
  void* image = read_file(path, &size);
  tsr_module_t m;
  MUST(tsrLoadModule(ctx, image, size, &m));
  free(image);
  return m;
}

/* The communicator of the MPI job this host runs in (host_comm.c, host_collective_steps.c under mpiexec), with a
 * timeout generous for a loaded machine; this process's rank and the job's size into *rank, *size. */
static inline tsr_comm_t mpi_comm_from_env(tsr_context_t ctx, int* rank, int* size) {
  tsr_comm_options_t o;
  MUST(tsrCommOptionsInitialize(&o));
  o.backend = TSR_COMM_BACKEND_MPI;
  o.timeout_ms = 60000;
  tsr_comm_t comm;
  MUST(tsrCommCreateFromEnv(ctx, &o, &comm));
  MUST(tsrCommGetRank(comm, rank));
  MUST(tsrCommGetSize(comm, size));
  return comm;
}

static inline tsr_kernel_t kernel(tsr_module_t m, const char* name) {
  tsr_kernel_t k;
  MUST(tsrGetKernel(m, name, &k));
  return k;
}

static inline int finish(void) {
  printf("%d failed\n", failures);
  return failures;
}

#endif  /* TESSERA_TESTS_CHECK_H_ */
