/* opencl_driver.c — loads OpenCL's ICD loader once per process and picks the device (opencl_driver.h). */
#include "opencl_driver.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver_loader.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static tsr_opencl_driver_t driver;
static tsr_opencl_device_t chosen;
static const tsr_opencl_driver_t* loaded;  /* &driver once a device is chosen */
static char why_not[1024];

const char* tsr_opencl_error_name(cl_int error, char* buffer, size_t size) {
  /* CL/cl.h's codes from -1 to -72, in order. */
  static const char* const names[] = {
      "CL_DEVICE_NOT_FOUND", "CL_DEVICE_NOT_AVAILABLE", "CL_COMPILER_NOT_AVAILABLE",
      "CL_MEM_OBJECT_ALLOCATION_FAILURE", "CL_OUT_OF_RESOURCES", "CL_OUT_OF_HOST_MEMORY",
      "CL_PROFILING_INFO_NOT_AVAILABLE", "CL_MEM_COPY_OVERLAP", "CL_IMAGE_FORMAT_MISMATCH",
      "CL_IMAGE_FORMAT_NOT_SUPPORTED", "CL_BUILD_PROGRAM_FAILURE", "CL_MAP_FAILURE", "CL_MISALIGNED_SUB_BUFFER_OFFSET",
      "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST", "CL_COMPILE_PROGRAM_FAILURE", "CL_LINKER_NOT_AVAILABLE",
      "CL_LINK_PROGRAM_FAILURE", "CL_DEVICE_PARTITION_FAILED", "CL_KERNEL_ARG_INFO_NOT_AVAILABLE", NULL, NULL, NULL,
      NULL, NULL, NULL, NULL, NULL, NULL, NULL, "CL_INVALID_VALUE", "CL_INVALID_DEVICE_TYPE", "CL_INVALID_PLATFORM",
      "CL_INVALID_DEVICE", "CL_INVALID_CONTEXT", "CL_INVALID_QUEUE_PROPERTIES", "CL_INVALID_COMMAND_QUEUE",
      "CL_INVALID_HOST_PTR", "CL_INVALID_MEM_OBJECT", "CL_INVALID_IMAGE_FORMAT_DESCRIPTOR", "CL_INVALID_IMAGE_SIZE",
      "CL_INVALID_SAMPLER", "CL_INVALID_BINARY", "CL_INVALID_BUILD_OPTIONS", "CL_INVALID_PROGRAM",
      "CL_INVALID_PROGRAM_EXECUTABLE", "CL_INVALID_KERNEL_NAME", "CL_INVALID_KERNEL_DEFINITION", "CL_INVALID_KERNEL",
      "CL_INVALID_ARG_INDEX", "CL_INVALID_ARG_VALUE", "CL_INVALID_ARG_SIZE", "CL_INVALID_KERNEL_ARGS",
      "CL_INVALID_WORK_DIMENSION", "CL_INVALID_WORK_GROUP_SIZE", "CL_INVALID_WORK_ITEM_SIZE",
      "CL_INVALID_GLOBAL_OFFSET", "CL_INVALID_EVENT_WAIT_LIST", "CL_INVALID_EVENT", "CL_INVALID_OPERATION",
      "CL_INVALID_GL_OBJECT", "CL_INVALID_BUFFER_SIZE", "CL_INVALID_MIP_LEVEL", "CL_INVALID_GLOBAL_WORK_SIZE",
      "CL_INVALID_PROPERTY", "CL_INVALID_IMAGE_DESCRIPTOR", "CL_INVALID_COMPILER_OPTIONS",
      "CL_INVALID_LINKER_OPTIONS", "CL_INVALID_DEVICE_PARTITION_COUNT", "CL_INVALID_PIPE_SIZE",
      "CL_INVALID_DEVICE_QUEUE", "CL_INVALID_SPEC_ID", "CL_MAX_SIZE_RESTRICTION_EXCEEDED"};
  const char* name = NULL;
  if (error < 0 && -error <= (cl_int)(sizeof names / sizeof names[0])) name = names[-error - 1];
  if (error == CL_PLATFORM_NOT_FOUND_KHR) name = "CL_PLATFORM_NOT_FOUND_KHR";
  snprintf(buffer, size, "%s (%d)", name ? name : "OpenCL error", (int)error);
  return buffer;
}

static bool load_symbols(const tsr_driver_library_t* lib) {
  static const char hint[] = "(an OpenCL ICD loader older than OpenCL 2.1?)";
#define RESOLVE(field) \
  if (!tsr_driver_resolve(lib, #field, &driver.field, hint, why_not, sizeof why_not)) return false
  RESOLVE(clGetPlatformIDs);
  RESOLVE(clGetPlatformInfo);
  RESOLVE(clGetDeviceIDs);
  RESOLVE(clGetDeviceInfo);
  RESOLVE(clCreateContext);
  RESOLVE(clReleaseContext);
  RESOLVE(clCreateCommandQueueWithProperties);
  RESOLVE(clReleaseCommandQueue);
  RESOLVE(clFinish);
  RESOLVE(clCreateProgramWithIL);
  RESOLVE(clBuildProgram);
  RESOLVE(clGetProgramBuildInfo);
  RESOLVE(clReleaseProgram);
  RESOLVE(clCreateKernel);
  RESOLVE(clReleaseKernel);
  RESOLVE(clGetKernelWorkGroupInfo);
  RESOLVE(clSetKernelArg);
  RESOLVE(clSetKernelArgSVMPointer);
  RESOLVE(clEnqueueNDRangeKernel);
  RESOLVE(clWaitForEvents);
  RESOLVE(clGetEventInfo);
  RESOLVE(clReleaseEvent);
  RESOLVE(clSVMAlloc);
  RESOLVE(clSVMFree);
  RESOLVE(clEnqueueSVMMemcpy);
#undef RESOLVE
  return true;
}

/* A string property, "" when the query fails. */
static void device_string(cl_device_id d, cl_uint what, char* out, size_t size) {
  out[0] = 0;
  if (driver.clGetDeviceInfo(d, what, size - 1, out, NULL) != CL_SUCCESS) out[0] = 0;
  out[size - 1] = 0;
}

/* The highest "SPIR-V_M.N" in an IL version list; false when there is none. */
static bool highest_spirv(const char* il, unsigned* major, unsigned* minor) {
  bool found = false;
  for (const char* p = strstr(il, "SPIR-V_"); p; p = strstr(p + 1, "SPIR-V_")) {
    unsigned a, b;
    if (sscanf(p, "SPIR-V_%u.%u", &a, &b) != 2) continue;
    if (!found || a > *major || (a == *major && b > *minor)) *major = a, *minor = b;
    found = true;
  }
  return found;
}

/* Fills `out` for `d` when it can run the backend's kernels; otherwise appends why not to `rejected`. */
static bool qualifies(cl_platform_id p, cl_device_id d, tsr_opencl_device_t* out, char* rejected, size_t size) {
  tsr_opencl_device_t dev = {.platform = p, .device = d};
  device_string(d, CL_DEVICE_NAME, dev.name, sizeof dev.name);
  if (driver.clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof dev.platform_name - 1, dev.platform_name, NULL))
    dev.platform_name[0] = 0;
  device_string(d, CL_DEVICE_IL_VERSION, dev.il_versions, sizeof dev.il_versions);
  cl_ulong svm = 0;
  if (driver.clGetDeviceInfo(d, CL_DEVICE_SVM_CAPABILITIES, sizeof svm, &svm, NULL)) svm = 0;
  const char* reason = NULL;
  if (!highest_spirv(dev.il_versions, &dev.spirv_major, &dev.spirv_minor)) reason = "takes no SPIR-V";
  else if (!(svm & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER)) reason = "has no shared virtual memory (SVM)";
  if (reason) {
    size_t len = strlen(rejected);
    snprintf(rejected + len, size - len, "%s'%s' %s", len ? "; " : "", dev.name, reason);
    return false;
  }
  cl_uint dims = 0, align_bits = 0;
  size_t items[8] = {0};
  driver.clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof dev.max_work_group, &dev.max_work_group, NULL);
  driver.clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS, sizeof dims, &dims, NULL);
  if (dims > 8) dims = 8;
  driver.clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_ITEM_SIZES, dims * sizeof *items, items, NULL);
  for (int i = 0; i < 3; i++) dev.max_item[i] = i < (int)dims ? items[i] : 1;
  driver.clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof dev.compute_units, &dev.compute_units, NULL);
  driver.clGetDeviceInfo(d, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, NULL);
  dev.address_align = align_bits / 8;
  driver.clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_SIZE, sizeof dev.local_memory, &dev.local_memory, NULL);
  driver.clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof dev.global_memory, &dev.global_memory, NULL);
  /* Subgroup sizes a kernel may require: only cl_intel_required_subgroup_size devices list them. */
  size_t sizes[16], bytes = 0;
  if (driver.clGetDeviceInfo(d, CL_DEVICE_SUB_GROUP_SIZES_INTEL, sizeof sizes, sizes, &bytes) == CL_SUCCESS)
    for (size_t i = 0; i < bytes / sizeof *sizes && i < 16; i++) {
      if (sizes[i] == 32) dev.subgroup_size = 32;
      else if (dev.subgroup_size != 32 && sizes[i] > dev.subgroup_size) dev.subgroup_size = (uint32_t)sizes[i];
    }
  *out = dev;
  return true;
}

/* Chooses the device (see opencl_driver.h); false with why_not set when none qualifies. */
static bool choose(void) {
  char err[64];
  cl_uint np = 0;
  cl_int r = driver.clGetPlatformIDs(0, NULL, &np);
  if (r == CL_PLATFORM_NOT_FOUND_KHR || (r == CL_SUCCESS && np == 0)) {
    snprintf(why_not, sizeof why_not, "the OpenCL ICD loader finds no platform (no vendor driver is registered in "
             "/etc/OpenCL/vendors or $OCL_ICD_VENDORS)");
    return false;
  }
  if (r != CL_SUCCESS) {
    snprintf(why_not, sizeof why_not, "clGetPlatformIDs failed: %s", tsr_opencl_error_name(r, err, sizeof err));
    return false;
  }
  cl_platform_id platforms[16];
  if (np > 16) np = 16;
  if ((r = driver.clGetPlatformIDs(np, platforms, NULL)) != CL_SUCCESS) {
    snprintf(why_not, sizeof why_not, "clGetPlatformIDs failed: %s", tsr_opencl_error_name(r, err, sizeof err));
    return false;
  }
  const char* wanted_text = getenv("TESSERA_OPENCL_DEVICE");
  long wanted = -1;
  if (wanted_text && *wanted_text) {
    char* end;
    wanted = strtol(wanted_text, &end, 10);
    if (*end || wanted < 0) {
      snprintf(why_not, sizeof why_not, "TESSERA_OPENCL_DEVICE='%s' is not a device number (0, 1, …)", wanted_text);
      return false;
    }
  }
  char rejected[512] = "";
  long index = 0;
  bool have = false, have_gpu = false;
  for (cl_uint p = 0; p < np; p++) {
    cl_device_id devices[16];
    cl_uint nd = 0;
    if (driver.clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 16, devices, &nd) != CL_SUCCESS) continue;
    for (cl_uint i = 0; i < nd && i < 16; i++) {
      tsr_opencl_device_t dev;
      if (!qualifies(platforms[p], devices[i], &dev, rejected, sizeof rejected)) continue;
      cl_ulong type = 0;
      driver.clGetDeviceInfo(devices[i], CL_DEVICE_TYPE, sizeof type, &type, NULL);
      bool gpu = type & CL_DEVICE_TYPE_GPU;
      if (wanted >= 0 ? index == wanted : !have || (gpu && !have_gpu)) {
        chosen = dev;
        have = true;
        have_gpu = gpu;
      }
      index++;
    }
  }
  if (wanted >= index) {
    snprintf(why_not, sizeof why_not, "TESSERA_OPENCL_DEVICE=%ld, but there %s %ld usable OpenCL device%s%s%s",
             wanted, index == 1 ? "is" : "are", index, index == 1 ? "" : "s", rejected[0] ? "; rejected: " : "",
             rejected);
    return false;
  }
  if (!have) {
    snprintf(why_not, sizeof why_not, "no OpenCL device takes SPIR-V with shared virtual memory%s%s",
             rejected[0] ? ": " : "", rejected[0] ? rejected : " (the platforms list no device)");
    return false;
  }
  return true;
}

static void load(void) {
  static const char* const candidates[] = {"libOpenCL.so.1", "libOpenCL.so", NULL};
  tsr_driver_library_t lib;
  if (!tsr_driver_open(&lib, "TESSERA_OPENCL_LIBRARY", candidates, "the OpenCL ICD loader", why_not,
                       sizeof why_not)) {
    size_t len = strlen(why_not);
    snprintf(why_not + len, sizeof why_not - len, " (Debian/Ubuntu: apt-get install ocl-icd-libopencl1)");
    return;
  }
  if (load_symbols(&lib) && choose()) loaded = &driver;
}

const tsr_opencl_driver_t* tsr_opencl_driver(const tsr_opencl_device_t** device, const char** why) {
  pthread_once(&once, load);
  if (why) *why = loaded ? NULL : why_not;
  if (device) *device = loaded ? &chosen : NULL;
  return loaded;
}
