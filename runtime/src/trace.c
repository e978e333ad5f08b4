/* trace.c — NVTX ranges through a dlopen()ed libnvToolsExt (trace.h, <tessera/telemetry.h>).
 *
 * The library is looked for once, at the first trace call: $TESSERA_NVTX_LIBRARY if set, else
 * libnvToolsExt.so.1. Only NVTX's stable C entry points are used (nvtxRangePushEx, nvtxRangePop,
 * nvtxNameCategoryA), with the v2 event-attributes layout declared here, so no CUDA header is needed. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "errors.h"
#include "trace.h"

/* nvtxEventAttributes_v2 of nvToolsExt.h. */
typedef struct nvtx_attributes {
  uint16_t version;  /* 2 */
  uint16_t size;     /* sizeof this struct */
  uint32_t category;
  int32_t color_type;  /* 1: ARGB */
  uint32_t color;
  int32_t payload_type;
  int32_t reserved0;
  uint64_t payload;
  int32_t message_type;  /* 1: ASCII */
  const char* message;
} nvtx_attributes_t;

typedef int (*push_fn)(const nvtx_attributes_t*);
typedef int (*pop_fn)(void);
typedef void (*name_category_fn)(uint32_t, const char*);

static pthread_once_t once = PTHREAD_ONCE_INIT;
static push_fn push;
static pop_fn pop;

/* The standard phase names (architecture spec §3.6), their categories (phase + 1: NVTX reserves 0) and
 * colors, fixed so that every tool shows a phase the same way. */
static const struct {
  const char* name;
  uint32_t color;
} phases[] = {
    [TSR_TRACE_COPY] = {"copy", 0xff4e79a7u},   [TSR_TRACE_MMA] = {"mma", 0xffe15759u},
    [TSR_TRACE_REDUCE] = {"reduce", 0xff59a14fu}, [TSR_TRACE_COMM] = {"comm", 0xfff28e2bu},
    [TSR_TRACE_HOST] = {"host", 0xff9c755fu},
};
enum { PHASE_COUNT = sizeof phases / sizeof phases[0] };

static void load(void) {
  const char* path = getenv("TESSERA_NVTX_LIBRARY");
  void* lib = dlopen(path && *path ? path : "libnvToolsExt.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return;
  push_fn p = (push_fn)(uintptr_t)dlsym(lib, "nvtxRangePushEx");
  pop_fn q = (pop_fn)(uintptr_t)dlsym(lib, "nvtxRangePop");
  name_category_fn name = (name_category_fn)(uintptr_t)dlsym(lib, "nvtxNameCategoryA");
  if (!p || !q) {  /* not an NVTX library after all */
    dlclose(lib);
    return;
  }
  if (name)
    for (uint32_t i = 0; i < PHASE_COUNT; i++) name(i + 1, phases[i].name);
  push = p;
  pop = q;  /* the library stays loaded for the life of the process */
}

static bool active(void) {
  pthread_once(&once, load);
  return push != NULL;
}

bool tsr_trace_push(tsr_trace_phase_t phase, const char* detail) {
  if (!active() || (unsigned)phase >= PHASE_COUNT) return false;
  char message[256];
  if (detail && *detail) snprintf(message, sizeof message, "%s:%s", phases[phase].name, detail);
  else snprintf(message, sizeof message, "%s", phases[phase].name);
  nvtx_attributes_t a = {.version = 2, .size = sizeof a, .category = (uint32_t)phase + 1, .color_type = 1,
                         .color = phases[phase].color, .message_type = 1, .message = message};
  push(&a);  /* NVTX copies the message */
  return true;
}

void tsr_trace_pop(void) {
  if (active()) pop();
}

tsr_status_t tsrTraceIsActive(int* out_active) {
  if (!out_active) return tsr_fail_null_output(__func__);
  *out_active = active();
  return TSR_SUCCESS;
}

tsr_status_t tsrTraceRangePush(tsr_trace_phase_t phase, const char* detail) {
  if ((unsigned)phase >= PHASE_COUNT) return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrTraceRangePush: unknown phase %d",
                                                      (int)phase);
  tsr_trace_push(phase, detail);
  return TSR_SUCCESS;
}

tsr_status_t tsrTraceRangePop(void) {
  tsr_trace_pop();
  return TSR_SUCCESS;
}
