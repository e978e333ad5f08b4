/* backend.c — the backends of this build, and their selection by name (backend.h, <tessera/device.h>). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "errors.h"

extern const tsr_backend_t tsr_cpu_backend;
extern const tsr_backend_t tsr_cuda_backend;
extern const tsr_backend_t tsr_hip_backend;
extern const tsr_backend_t tsr_level_zero_backend;
extern const tsr_backend_t tsr_opencl_backend;

/* The GPU backends are always built: each loads its driver at run time and is unavailable where there is none. */
static const tsr_backend_t* const built[] = {&tsr_cpu_backend, &tsr_cuda_backend, &tsr_opencl_backend,
                                             &tsr_hip_backend, &tsr_level_zero_backend};
enum { BUILT_COUNT = sizeof built / sizeof built[0] };

/* Other names a backend is asked for by: the spec names backends by their code ("ptx"); people by their
 * platform ("cuda"). */
static const char* const aliases[][2] = {{"ptx", "cuda"}, {"rocm", "hip"}, {"levelzero", "level_zero"},
                                         {"spirv", "opencl"}};

static bool available(const tsr_backend_t* b) { return b->unavailable() == NULL; }

tsr_status_t tsrGetBackendCount(size_t* out_count) {
  if (!out_count) return tsr_fail_null_output(__func__);
  size_t n = 0;
  for (size_t i = 0; i < BUILT_COUNT; i++) n += available(built[i]);
  *out_count = n;
  return TSR_SUCCESS;
}

tsr_status_t tsrGetBackendName(size_t index, const char** out_name) {
  if (!out_name) return tsr_fail_null_output(__func__);
  for (size_t i = 0; i < BUILT_COUNT; i++) {
    if (!available(built[i])) continue;
    if (index-- == 0) {
      *out_name = built[i]->name;
      return TSR_SUCCESS;
    }
  }
  return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrGetBackendName: there is no available backend #%zu", index);
}

/* "cpu" or "cpu, …": the available backends, for messages. */
static void list_available(char* out, size_t size) {
  size_t len = 0;
  out[0] = 0;
  for (size_t i = 0; i < BUILT_COUNT && len < size; i++)
    if (available(built[i])) {
      int n = snprintf(out + len, size - len, "%s%s", len ? ", " : "", built[i]->name);
      if (n > 0) len += (size_t)n;
    }
  if (!out[0]) snprintf(out, size, "none");
}

tsr_status_t tsr_backend_find(const char* name, const tsr_backend_t** out) {
  const char* source = "the context options";
  if (!name) {
    name = getenv("TESSERA_BACKEND");
    source = "TESSERA_BACKEND";
    if (!name || !*name) name = "cpu";
  }
  char names[128];
  list_available(names, sizeof names);
  const char* asked = name;
  for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
    if (strcmp(aliases[i][0], name) == 0) name = aliases[i][1];
  for (size_t i = 0; i < BUILT_COUNT; i++) {
    if (strcmp(built[i]->name, name) != 0) continue;
    const char* why = built[i]->unavailable();
    if (why) return tsr_fail(TSR_ERROR_UNSUPPORTED, "backend '%s' (from %s) is not available: %s (available: %s)",
                             asked, source, why, names);
    *out = built[i];
    return TSR_SUCCESS;
  }
  return tsr_fail(TSR_ERROR_UNSUPPORTED, "unknown backend '%s' (from %s); available: %s", asked, source, names);
}
