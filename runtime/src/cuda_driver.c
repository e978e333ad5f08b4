/* cuda_driver.c — loads the CUDA driver (libcuda.so.1) once per process and initializes it (cuda_driver.h). */
#define _GNU_SOURCE /* RTLD_LOCAL with dlfcn under strict C11 */
#include "cuda_driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static tsr_cuda_driver_t driver;
static const tsr_cuda_driver_t* loaded;  /* &driver once usable */
static char why_not[512];
static int device0_cc;

void tsr_cuda_describe(CUresult r, char* out, size_t size) {
  const char *name = NULL, *text = NULL;
  if (loaded) {
    loaded->cuGetErrorName(r, &name);
    loaded->cuGetErrorString(r, &text);
  }
  if (name && text) snprintf(out, size, "%s (%s)", name, text);
  else snprintf(out, size, "CUDA error %d", r);
}

/* Resolves `name` into `*slot`; false (with why_not set) when the driver lacks it. */
static int resolve(void* lib, const char* name, void* slot) {
  void* f = dlsym(lib, name);
  if (!f) {
    snprintf(why_not, sizeof why_not, "libcuda.so.1 has no %s (a driver older than CUDA 12?)", name);
    return 0;
  }
  memcpy(slot, &f, sizeof f);  /* object pointer to function pointer, as POSIX dlsym allows */
  return 1;
}

/* The first of `names` (NULL-terminated) that the driver has; NULL when it has none. */
static void* lookup_any(void* lib, const char* const* names) {
  for (; *names; names++) {
    void* f = dlsym(lib, *names);
    if (f) return f;
  }
  return NULL;
}

/* Resolves an entry point the backend can do without: NULL when missing, with the name kept for the message
 * of the one function that needs it. */
static void resolve_optional(void* lib, const char* name, void* slot, const char** missing) {
  void* f = dlsym(lib, name);
  memcpy(slot, &f, sizeof f);
  if (!f && !*missing) *missing = name;
}

static void load(void) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = dlerror();
    snprintf(why_not, sizeof why_not, "the NVIDIA driver library could not be loaded (%s)",
             err ? err : "libcuda.so.1 not found");
    return;
  }
  tsr_cuda_driver_t d;
#define RESOLVE(field, symbol) \
  if (!resolve(lib, symbol, &d.field)) return
  RESOLVE(cuInit, "cuInit");
  RESOLVE(cuDriverGetVersion, "cuDriverGetVersion");
  RESOLVE(cuGetErrorName, "cuGetErrorName");
  RESOLVE(cuGetErrorString, "cuGetErrorString");
  RESOLVE(cuDeviceGetCount, "cuDeviceGetCount");
  RESOLVE(cuDeviceGet, "cuDeviceGet");
  RESOLVE(cuDeviceGetName, "cuDeviceGetName");
  RESOLVE(cuDeviceGetAttribute, "cuDeviceGetAttribute");
  RESOLVE(cuDeviceTotalMem, "cuDeviceTotalMem_v2");
  RESOLVE(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  RESOLVE(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
  RESOLVE(cuCtxPushCurrent, "cuCtxPushCurrent_v2");
  RESOLVE(cuCtxPopCurrent, "cuCtxPopCurrent_v2");
  RESOLVE(cuModuleLoadDataEx, "cuModuleLoadDataEx");
  RESOLVE(cuModuleUnload, "cuModuleUnload");
  RESOLVE(cuModuleGetFunction, "cuModuleGetFunction");
  RESOLVE(cuModuleGetGlobal, "cuModuleGetGlobal_v2");
  RESOLVE(cuFuncSetAttribute, "cuFuncSetAttribute");
  RESOLVE(cuLaunchKernel, "cuLaunchKernel");
  RESOLVE(cuStreamSynchronize, "cuStreamSynchronize");
  RESOLVE(cuMemAlloc, "cuMemAlloc_v2");
  RESOLVE(cuMemFree, "cuMemFree_v2");
  RESOLVE(cuMemcpy, "cuMemcpy");
  RESOLVE(cuMemcpyHtoD, "cuMemcpyHtoD_v2");
  RESOLVE(cuMemcpyDtoH, "cuMemcpyDtoH_v2");
  RESOLVE(cuMemcpyDtoD, "cuMemcpyDtoD_v2");
  RESOLVE(cuCtxSynchronize, "cuCtxSynchronize");
  RESOLVE(cuCtxGetStreamPriorityRange, "cuCtxGetStreamPriorityRange");
  RESOLVE(cuStreamCreateWithPriority, "cuStreamCreateWithPriority");
  RESOLVE(cuStreamDestroy, "cuStreamDestroy_v2");
  RESOLVE(cuStreamQuery, "cuStreamQuery");
  RESOLVE(cuStreamWaitEvent, "cuStreamWaitEvent");
  RESOLVE(cuEventCreate, "cuEventCreate");
  RESOLVE(cuEventDestroy, "cuEventDestroy_v2");
  RESOLVE(cuEventRecord, "cuEventRecord");
  RESOLVE(cuEventQuery, "cuEventQuery");
  RESOLVE(cuEventSynchronize, "cuEventSynchronize");
  RESOLVE(cuMemcpyAsync, "cuMemcpyAsync");
  RESOLVE(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
  RESOLVE(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
  RESOLVE(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
  RESOLVE(cuMemHostAlloc, "cuMemHostAlloc");
  RESOLVE(cuMemFreeHost, "cuMemFreeHost");
  RESOLVE(cuMemHostRegister, "cuMemHostRegister_v2");
  RESOLVE(cuMemHostUnregister, "cuMemHostUnregister");
  RESOLVE(cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2");
#undef RESOLVE
  /* cuda.h maps cuEventElapsedTime to the _v2 symbol (same signature); drivers before it have only the first. */
  static const char* const elapsed[] = {"cuEventElapsedTime_v2", "cuEventElapsedTime", NULL};
  void* f = lookup_any(lib, elapsed);
  if (!f) {
    snprintf(why_not, sizeof why_not, "libcuda.so.1 has no cuEventElapsedTime");
    return;
  }
  memcpy(&d.cuEventElapsedTime, &f, sizeof f);
  d.missing_graph_entry = NULL;
  resolve_optional(lib, "cuEventRecordWithFlags", &d.cuEventRecordWithFlags, &d.missing_graph_entry);
  resolve_optional(lib, "cuStreamBeginCapture_v2", &d.cuStreamBeginCapture, &d.missing_graph_entry);
  resolve_optional(lib, "cuStreamEndCapture", &d.cuStreamEndCapture, &d.missing_graph_entry);
  resolve_optional(lib, "cuGraphInstantiateWithFlags", &d.cuGraphInstantiateWithFlags, &d.missing_graph_entry);
  resolve_optional(lib, "cuGraphLaunch", &d.cuGraphLaunch, &d.missing_graph_entry);
  resolve_optional(lib, "cuGraphExecDestroy", &d.cuGraphExecDestroy, &d.missing_graph_entry);
  resolve_optional(lib, "cuGraphDestroy", &d.cuGraphDestroy, &d.missing_graph_entry);
  d.missing_pool_entry = NULL;
  resolve_optional(lib, "cuMemPoolCreate", &d.cuMemPoolCreate, &d.missing_pool_entry);
  resolve_optional(lib, "cuMemPoolDestroy", &d.cuMemPoolDestroy, &d.missing_pool_entry);
  resolve_optional(lib, "cuMemPoolSetAttribute", &d.cuMemPoolSetAttribute, &d.missing_pool_entry);
  resolve_optional(lib, "cuMemPoolTrimTo", &d.cuMemPoolTrimTo, &d.missing_pool_entry);
  resolve_optional(lib, "cuMemAllocFromPoolAsync", &d.cuMemAllocFromPoolAsync, &d.missing_pool_entry);
  resolve_optional(lib, "cuMemFreeAsync", &d.cuMemFreeAsync, &d.missing_pool_entry);
  const char* no_tma = NULL;
  resolve_optional(lib, "cuTensorMapEncodeTiled", &d.cuTensorMapEncodeTiled, &no_tma);
  driver = d;
  loaded = &driver;  /* for tsr_cuda_describe below */
  char what[256];
  CUresult r = d.cuInit(0);
  int count = 0;
  if (r == CUDA_SUCCESS) r = d.cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS) {
    tsr_cuda_describe(r, what, sizeof what);
    snprintf(why_not, sizeof why_not, "the CUDA driver did not start: %s", what);
    loaded = NULL;
    return;
  }
  if (count == 0) {
    snprintf(why_not, sizeof why_not, "the CUDA driver sees no GPU");
    loaded = NULL;
    return;
  }
  CUdevice dev;
  int major = 0, minor = 0;
  if ((r = d.cuDeviceGet(&dev, 0)) ||
      (r = d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)) ||
      (r = d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))) {
    tsr_cuda_describe(r, what, sizeof what);
    snprintf(why_not, sizeof why_not, "the CUDA driver cannot query GPU 0: %s", what);
    loaded = NULL;
    return;
  }
  device0_cc = major * 10 + minor;
  /* The library stays loaded for the life of the process: contexts, modules and CUDA's own threads live in it. */
}

int tsr_cuda_device0_cc(void) {
  pthread_once(&once, load);
  return device0_cc;
}

const tsr_cuda_driver_t* tsr_cuda_driver(const char** why) {
  pthread_once(&once, load);
  if (why) *why = loaded ? NULL : why_not;
  return loaded;
}
