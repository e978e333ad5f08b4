/* level_zero_driver.c — loads the Level Zero loader (libze_loader.so.1) once per process, initializes it for
 * GPUs and finds the first GPU (level_zero_driver.h). */
#include "level_zero_driver.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver_loader.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static tsr_ze_driver_api_t api;
static const tsr_ze_driver_api_t* loaded;
static tsr_ze_gpu_t gpu;
static char why_not[768];

static const struct {
  tsr_ze_result_t code;
  const char *name, *text;
} results[] = {
    {0x1, "ZE_RESULT_NOT_READY", "synchronization primitive not signaled"},
    {0x70000001, "ZE_RESULT_ERROR_DEVICE_LOST", "device hung, reset, was removed, or driver update occurred"},
    {0x70000002, "ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY", "insufficient host memory to satisfy call"},
    {0x70000003, "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY", "insufficient device memory to satisfy call"},
    {0x70000004, "ZE_RESULT_ERROR_MODULE_BUILD_FAILURE", "error occurred when building module"},
    {0x70000005, "ZE_RESULT_ERROR_MODULE_LINK_FAILURE", "error occurred when linking modules"},
    {0x70000006, "ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET", "device requires a reset"},
    {0x70000007, "ZE_RESULT_ERROR_DEVICE_IN_LOW_POWER_STATE", "device currently in low power state"},
    {0x70010000, "ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS", "access denied due to permission level"},
    {0x70010001, "ZE_RESULT_ERROR_NOT_AVAILABLE", "resource already in use or removed"},
    {0x70020000, "ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE", "external required dependency is unavailable or missing"},
    {0x78000001, "ZE_RESULT_ERROR_UNINITIALIZED", "driver is not initialized"},
    {0x78000002, "ZE_RESULT_ERROR_UNSUPPORTED_VERSION", "unsupported version"},
    {0x78000003, "ZE_RESULT_ERROR_UNSUPPORTED_FEATURE", "unsupported feature"},
    {0x78000004, "ZE_RESULT_ERROR_INVALID_ARGUMENT", "invalid argument"},
    {0x78000005, "ZE_RESULT_ERROR_INVALID_NULL_HANDLE", "handle argument is not valid"},
    {0x78000006, "ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE", "object pointed to by handle still in use by device"},
    {0x78000007, "ZE_RESULT_ERROR_INVALID_NULL_POINTER", "pointer argument may not be null"},
    {0x78000008, "ZE_RESULT_ERROR_INVALID_SIZE", "size argument is invalid"},
    {0x78000009, "ZE_RESULT_ERROR_UNSUPPORTED_SIZE", "size argument is not supported by the device"},
    {0x7800000a, "ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT", "alignment argument is not supported by the device"},
    {0x7800000b, "ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT", "synchronization object in invalid state"},
    {0x7800000c, "ZE_RESULT_ERROR_INVALID_ENUMERATION", "enumerator argument is not valid"},
    {0x7800000d, "ZE_RESULT_ERROR_UNSUPPORTED_ENUMERATION", "enumerator argument is not supported by the device"},
    {0x7800000e, "ZE_RESULT_ERROR_UNSUPPORTED_IMAGE_FORMAT", "image format is not supported by the device"},
    {0x7800000f, "ZE_RESULT_ERROR_INVALID_NATIVE_BINARY", "native binary is not supported by the device"},
    {0x78000010, "ZE_RESULT_ERROR_INVALID_GLOBAL_NAME", "global variable is not found in the module"},
    {0x78000011, "ZE_RESULT_ERROR_INVALID_KERNEL_NAME", "kernel name is not found in the module"},
    {0x78000012, "ZE_RESULT_ERROR_INVALID_FUNCTION_NAME", "function name is not found in the module"},
    {0x78000013, "ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION", "group size dimension is not valid"},
    {0x78000014, "ZE_RESULT_ERROR_INVALID_GLOBAL_WIDTH_DIMENSION", "global width dimension is not valid"},
    {0x78000015, "ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX", "kernel argument index is not valid for kernel"},
    {0x78000016, "ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE", "kernel argument size does not match kernel"},
    {0x78000017, "ZE_RESULT_ERROR_INVALID_KERNEL_ATTRIBUTE_VALUE", "value of kernel attribute is not valid"},
    {0x78000018, "ZE_RESULT_ERROR_INVALID_MODULE_UNLINKED", "module with imports needs to be linked"},
    {0x78000019, "ZE_RESULT_ERROR_INVALID_COMMAND_LIST_TYPE", "command list type does not match command queue type"},
    {0x7800001a, "ZE_RESULT_ERROR_OVERLAPPING_REGIONS", "copy operations do not support overlapping regions"},
    {0x7ffffffe, "ZE_RESULT_ERROR_UNKNOWN", "unknown or internal error"},
};

void tsr_ze_describe(tsr_ze_result_t r, char* out, size_t size) {
  for (size_t i = 0; i < sizeof results / sizeof results[0]; i++)
    if (results[i].code == r) {
      snprintf(out, size, "%s (%s)", results[i].name, results[i].text);
      return;
    }
  snprintf(out, size, "Level Zero result 0x%x", (unsigned)r);
}

static const char* const candidates[] = {"libze_loader.so.1", "libze_loader.so", NULL};

static void fail(const char* what, tsr_ze_result_t r) {
  char text[256];
  tsr_ze_describe(r, text, sizeof text);
  snprintf(why_not, sizeof why_not, "%s: %s", what, text);
  loaded = NULL;
}

/* The first GPU of `driver` into `gpu`; false when it has none. */
static bool first_gpu(tsr_ze_driver_t driver, tsr_ze_result_t* r) {
  uint32_t count = 0;
  if ((*r = api.zeDeviceGet(driver, &count, NULL)) || count == 0) return false;
  tsr_ze_device_t* devices = calloc(count, sizeof *devices);
  if (!devices) return false;
  bool found = false;
  if (!(*r = api.zeDeviceGet(driver, &count, devices)))
    for (uint32_t i = 0; i < count && !found; i++) {
      tsr_ze_device_properties_t p = {.stype = TSR_ZE_STYPE_DEVICE_PROPERTIES};
      if ((*r = api.zeDeviceGetProperties(devices[i], &p))) break;
      if (p.type != TSR_ZE_DEVICE_TYPE_GPU) continue;
      gpu.driver = driver;
      gpu.device = devices[i];
      gpu.props = p;
      found = true;
    }
  free(devices);
  return found;
}

static void load(void) {
  tsr_driver_library_t lib;
  if (!tsr_driver_open(&lib, "TESSERA_LEVEL_ZERO_LIBRARY", candidates, "the Level Zero loader", why_not,
                       sizeof why_not))
    return;
  tsr_ze_driver_api_t d;
#define RESOLVE(name) \
  if (!tsr_driver_resolve(&lib, #name, &d.name, "(a Level Zero loader older than 1.0?)", why_not, sizeof why_not)) return
  RESOLVE(zeInit);
  RESOLVE(zeDriverGet);
  RESOLVE(zeDeviceGet);
  RESOLVE(zeDeviceGetProperties);
  RESOLVE(zeDeviceGetComputeProperties);
  RESOLVE(zeDeviceGetModuleProperties);
  RESOLVE(zeDeviceGetMemoryProperties);
  RESOLVE(zeDeviceGetCommandQueueGroupProperties);
  RESOLVE(zeContextCreate);
  RESOLVE(zeContextDestroy);
  RESOLVE(zeCommandQueueCreate);
  RESOLVE(zeCommandQueueDestroy);
  RESOLVE(zeCommandQueueExecuteCommandLists);
  RESOLVE(zeCommandListCreate);
  RESOLVE(zeCommandListDestroy);
  RESOLVE(zeCommandListClose);
  RESOLVE(zeCommandListReset);
  RESOLVE(zeCommandListAppendLaunchKernel);
  RESOLVE(zeCommandListAppendMemoryCopy);
  RESOLVE(zeEventPoolCreate);
  RESOLVE(zeEventPoolDestroy);
  RESOLVE(zeEventCreate);
  RESOLVE(zeEventDestroy);
  RESOLVE(zeEventHostSynchronize);
  RESOLVE(zeEventHostReset);
  RESOLVE(zeModuleCreate);
  RESOLVE(zeModuleDestroy);
  RESOLVE(zeModuleBuildLogGetString);
  RESOLVE(zeModuleBuildLogDestroy);
  RESOLVE(zeKernelCreate);
  RESOLVE(zeKernelDestroy);
  RESOLVE(zeKernelSetGroupSize);
  RESOLVE(zeKernelSetArgumentValue);
  RESOLVE(zeMemAllocDevice);
  RESOLVE(zeMemFree);
#undef RESOLVE
  api = d;
  tsr_ze_result_t r = d.zeInit(TSR_ZE_INIT_FLAG_GPU_ONLY);
  if (r) {
    /* What the loader says when it found no driver for any GPU. */
    fail(r == TSR_ZE_RESULT_ERROR_UNINITIALIZED ? "the Level Zero loader found no GPU driver (zeInit)"
                                                : "the Level Zero loader did not start (zeInit)", r);
    return;
  }
  uint32_t count = 0;
  if ((r = d.zeDriverGet(&count, NULL))) {
    fail("the Level Zero loader cannot list its drivers", r);
    return;
  }
  tsr_ze_driver_t* drivers = count ? calloc(count, sizeof *drivers) : NULL;
  if (count && !drivers) {
    snprintf(why_not, sizeof why_not, "out of memory loading Level Zero");
    return;
  }
  bool found = false;
  r = count ? d.zeDriverGet(&count, drivers) : 0;
  for (uint32_t i = 0; !r && i < count && !found; i++) found = first_gpu(drivers[i], &r);
  free(drivers);
  if (r) {
    fail("the Level Zero loader cannot list its GPUs", r);
    return;
  }
  if (!found) {
    snprintf(why_not, sizeof why_not, "Level Zero sees no GPU (%u driver%s)", count, count == 1 ? "" : "s");
    return;
  }
  gpu.compute = (tsr_ze_compute_properties_t){.stype = TSR_ZE_STYPE_COMPUTE_PROPERTIES};
  gpu.module = (tsr_ze_module_properties_t){.stype = TSR_ZE_STYPE_DEVICE_MODULE_PROPERTIES};
  if ((r = d.zeDeviceGetComputeProperties(gpu.device, &gpu.compute)) ||
      (r = d.zeDeviceGetModuleProperties(gpu.device, &gpu.module)))
    {
    fail("Level Zero cannot query the GPU", r);
    return;
  }
  if (gpu.compute.numSubGroupSizes > TSR_ZE_SUBGROUPSIZE_COUNT) gpu.compute.numSubGroupSizes = TSR_ZE_SUBGROUPSIZE_COUNT;
  loaded = &api;
}

const tsr_ze_gpu_t* tsr_ze_gpu(void) {
  pthread_once(&once, load);
  return loaded ? &gpu : NULL;
}

const tsr_ze_driver_api_t* tsr_ze_driver(const char** why) {
  pthread_once(&once, load);
  if (why) *why = loaded ? NULL : why_not;
  return loaded;
}
