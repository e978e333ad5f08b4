/* hip_driver.c — loads the HIP runtime (libamdhip64) once per process and initializes it (hip_driver.h). */
#define _GNU_SOURCE /* RTLD_LOCAL with dlfcn under strict C11 */
#include "hip_driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver_loader.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static tsr_hip_driver_t driver;
static const tsr_hip_driver_t* loaded;  /* &driver once usable */
static tsr_hip_device0_t device0;
static char why_not[768];

void tsr_hip_describe(hipError_t r, char* out, size_t size) {
  const char *name = loaded ? loaded->hipGetErrorName(r) : NULL, *text = loaded ? loaded->hipGetErrorString(r) : NULL;
  if (name && text) snprintf(out, size, "%s (%s)", name, text);
  else snprintf(out, size, "HIP error %d", r);
}

static const char* const candidates[] = {"libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6",
                                         "/opt/rocm/lib/libamdhip64.so", NULL};

static void fail(const char* what, hipError_t r) {
  char text[256];
  tsr_hip_describe(r, text, sizeof text);
  snprintf(why_not, sizeof why_not, "%s: %s", what, text);
  loaded = NULL;
}

static void load(void) {
  tsr_driver_library_t lib;
  if (!tsr_driver_open(&lib, "TESSERA_HIP_LIBRARY", candidates, "the HIP runtime (ROCm)", why_not, sizeof why_not))
    return;
  tsr_hip_driver_t d;
#define RESOLVE(field, symbol) \
  if (!tsr_driver_resolve(&lib, symbol, &d.field, "(a HIP older than ROCm 6?)", why_not, sizeof why_not)) return
  RESOLVE(hipInit, "hipInit");
  RESOLVE(hipDriverGetVersion, "hipDriverGetVersion");
  RESOLVE(hipGetErrorName, "hipGetErrorName");
  RESOLVE(hipGetErrorString, "hipGetErrorString");
  RESOLVE(hipGetDeviceCount, "hipGetDeviceCount");
  RESOLVE(hipGetDevice, "hipGetDevice");
  RESOLVE(hipSetDevice, "hipSetDevice");
  RESOLVE(hipDeviceGetAttribute, "hipDeviceGetAttribute");
  RESOLVE(hipGetDeviceProperties, "hipGetDevicePropertiesR0600");
  RESOLVE(hipDeviceTotalMem, "hipDeviceTotalMem");
  RESOLVE(hipModuleLoadData, "hipModuleLoadData");
  RESOLVE(hipModuleUnload, "hipModuleUnload");
  RESOLVE(hipModuleGetFunction, "hipModuleGetFunction");
  RESOLVE(hipModuleLaunchKernel, "hipModuleLaunchKernel");
  RESOLVE(hipStreamCreateWithFlags, "hipStreamCreateWithFlags");
  RESOLVE(hipStreamDestroy, "hipStreamDestroy");
  RESOLVE(hipEventCreateWithFlags, "hipEventCreateWithFlags");
  RESOLVE(hipEventRecord, "hipEventRecord");
  RESOLVE(hipEventSynchronize, "hipEventSynchronize");
  RESOLVE(hipEventDestroy, "hipEventDestroy");
  RESOLVE(hipMalloc, "hipMalloc");
  RESOLVE(hipFree, "hipFree");
  RESOLVE(hipMemcpy, "hipMemcpy");
  RESOLVE(hipModuleGetGlobal, "hipModuleGetGlobal");
#undef RESOLVE
  driver = d;
  loaded = &driver;  /* for tsr_hip_describe below */
  hipError_t r = d.hipInit(0);
  if (r) {
    fail("the HIP runtime did not start (hipInit)", r);
    return;
  }
  int count = 0;
  if ((r = d.hipGetDeviceCount(&count))) {
    if (r == hipErrorNoDevice) {
      snprintf(why_not, sizeof why_not, "the HIP runtime sees no GPU");
      loaded = NULL;
      return;
    }
    {
    fail("the HIP runtime cannot count its GPUs", r);
    return;
  }
  }
  if (count == 0) {
    snprintf(why_not, sizeof why_not, "the HIP runtime sees no GPU");
    loaded = NULL;
    return;
  }
  char* props = calloc(1, TSR_HIP_PROPS_BUFFER);
  if (!props) {
    snprintf(why_not, sizeof why_not, "out of memory loading the HIP runtime");
    loaded = NULL;
    return;
  }
  r = d.hipGetDeviceProperties(props, 0);
  if (!r) r = d.hipDriverGetVersion(&device0.driver_version);
  if (r) {
    free(props);
    {
    fail("the HIP runtime cannot query GPU 0", r);
    return;
  }
  }
  snprintf(device0.name, sizeof device0.name, "%.127s", props + TSR_HIP_PROPS_NAME);
  snprintf(device0.arch, sizeof device0.arch, "%.63s", props + TSR_HIP_PROPS_GCN_ARCH_NAME);
  free(props);
  if (strncmp(device0.arch, "gfx", 3) != 0) {
    snprintf(why_not, sizeof why_not, "the HIP runtime reports GPU 0's architecture as '%s', not a gfx name",
             device0.arch);
    loaded = NULL;
  }
  /* The library stays loaded for the life of the process, as HIP's own threads live in it. */
}

const tsr_hip_device0_t* tsr_hip_device0(void) {
  pthread_once(&once, load);
  return loaded ? &device0 : NULL;
}

const tsr_hip_driver_t* tsr_hip_driver(const char** why) {
  pthread_once(&once, load);
  if (why) *why = loaded ? NULL : why_not;
  return loaded;
}
