/* hip_driver.h — the part of the HIP runtime API the HIP backend uses, loaded from libamdhip64 at run time.
 *
 * libtessera has no build-time dependency on ROCm: the types, constants and the one structure below are
 * HIP's ABI as ROCm 6's hip_runtime_api.h declares it (attribute numbers of ROCm 6, whose enum differs from
 * ROCm 5's; the device-properties layout `hipDeviceProp_tR0600`, read through the symbol of that name, which
 * ROCm 5 lacks: an older HIP is reported unavailable rather than misread).
 *
 * The library is $TESSERA_HIP_LIBRARY when set (a path or a soname: the tests point it at a mock driver),
 * else the first of libamdhip64.so, libamdhip64.so.7, libamdhip64.so.6 and /opt/rocm/lib/libamdhip64.so. */
#ifndef TESSERA_SRC_HIP_DRIVER_H_
#define TESSERA_SRC_HIP_DRIVER_H_

#include <stddef.h>

typedef int hipError_t;  /* hipSuccess = 0; the other numbers follow CUDA's (gpu_status.h) */
typedef struct ihipModule_t* hipModule_t;
typedef struct ihipModuleSymbol_t* hipFunction_t;
typedef struct ihipStream_t* hipStream_t;
typedef struct ihipEvent_t* hipEvent_t;

enum { hipSuccess = 0, hipErrorNoDevice = 100, hipErrorNotFound = 500 };

/* hipDeviceAttribute_t values (ROCm 6) */
enum {
  hipDeviceAttributeMaxBlockDimX = 26,
  hipDeviceAttributeMaxBlockDimY = 27,
  hipDeviceAttributeMaxBlockDimZ = 28,
  hipDeviceAttributeMaxGridDimX = 29,
  hipDeviceAttributeMaxGridDimY = 30,
  hipDeviceAttributeMaxGridDimZ = 31,
  hipDeviceAttributeMaxThreadsPerBlock = 56,
  hipDeviceAttributeMultiprocessorCount = 63,
  hipDeviceAttributeMaxSharedMemoryPerBlock = 74,
  hipDeviceAttributeWarpSize = 87
};

/* hipMemcpyKind */
enum { hipMemcpyHostToDevice = 1, hipMemcpyDeviceToHost = 2, hipMemcpyDeviceToDevice = 3, hipMemcpyDefault = 4 };

enum { hipStreamNonBlocking = 1 };
enum { hipEventBlockingSync = 1, hipEventDisableTiming = 2 };

/* hipDeviceProp_tR0600: 1472 bytes on x86-64 in ROCm 6.x; we read its first member and gcnArchName only and
 * hand the runtime a larger buffer, so that a later ROCm growing the structure cannot write past ours. */
enum { TSR_HIP_PROPS_BUFFER = 4096, TSR_HIP_PROPS_NAME = 0, TSR_HIP_PROPS_GCN_ARCH_NAME = 1160 };

typedef struct tsr_hip_driver {
  hipError_t (*hipInit)(unsigned flags);
  hipError_t (*hipDriverGetVersion)(int* version);
  const char* (*hipGetErrorName)(hipError_t error);
  const char* (*hipGetErrorString)(hipError_t error);
  hipError_t (*hipGetDeviceCount)(int* count);
  hipError_t (*hipGetDevice)(int* device);
  hipError_t (*hipSetDevice)(int device);
  hipError_t (*hipDeviceGetAttribute)(int* value, int attribute, int device);
  hipError_t (*hipGetDeviceProperties)(void* props, int device);  /* hipGetDevicePropertiesR0600 */
  hipError_t (*hipDeviceTotalMem)(size_t* bytes, int device);
  hipError_t (*hipModuleLoadData)(hipModule_t* module, const void* image);
  hipError_t (*hipModuleUnload)(hipModule_t module);
  hipError_t (*hipModuleGetFunction)(hipFunction_t* function, hipModule_t module, const char* name);
  hipError_t (*hipModuleGetGlobal)(void** address, size_t* bytes, hipModule_t module, const char* name);
  hipError_t (*hipModuleLaunchKernel)(hipFunction_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                      unsigned by, unsigned bz, unsigned shared_bytes, hipStream_t stream,
                                      void** params, void** extra);
  hipError_t (*hipStreamCreateWithFlags)(hipStream_t* stream, unsigned flags);
  hipError_t (*hipStreamDestroy)(hipStream_t stream);
  hipError_t (*hipEventCreateWithFlags)(hipEvent_t* event, unsigned flags);
  hipError_t (*hipEventRecord)(hipEvent_t event, hipStream_t stream);
  hipError_t (*hipEventSynchronize)(hipEvent_t event);
  hipError_t (*hipEventDestroy)(hipEvent_t event);
  hipError_t (*hipMalloc)(void** ptr, size_t bytes);
  hipError_t (*hipFree)(void* ptr);
  hipError_t (*hipMemcpy)(void* dst, const void* src, size_t bytes, int kind);
} tsr_hip_driver_t;

/* What the loader learned of device 0 when it loaded the driver. */
typedef struct tsr_hip_device0 {
  char arch[64];    /* gcnArchName: "gfx942:sramecc+:xnack-" */
  char name[128];   /* the marketing name: "AMD Instinct MI300X" */
  int driver_version;
} tsr_hip_device0_t;

/* The runtime, loaded and initialized (hipInit) once per process; NULL when this machine cannot run it, with
 * `*why` (static storage) saying why: no library, a symbol missing (a HIP older than ROCm 6), hipInit
 * failing, no device. */
const tsr_hip_driver_t* tsr_hip_driver(const char** why);

/* Device 0 as read at load time; NULL when the driver is not usable. */
const tsr_hip_device0_t* tsr_hip_device0(void);

/* "hipErrorInvalidImage (invalid kernel image)": the runtime's own words. */
void tsr_hip_describe(hipError_t r, char* out, size_t size);

#endif  /* TESSERA_SRC_HIP_DRIVER_H_ */
