/* level_zero_driver.h — the part of the Level Zero core API the Level Zero backend uses, loaded from the
 * loader library libze_loader.so.1 at run time.
 *
 * libtessera has no build-time dependency on Level Zero: the types, constants and structures below are the
 * core API's ABI as ze_api.h (1.x) declares it, under our own names (tsr_ze_*) so that a test can compile
 * them beside the official header and compare their layouts (tests/c/test_gpu_loaders.py does where
 * ze_api.h is installed).
 *
 * The library is $TESSERA_LEVEL_ZERO_LIBRARY when set (a path or a soname: the tests point it at a mock
 * driver), else libze_loader.so.1, else libze_loader.so. */
#ifndef TESSERA_SRC_LEVEL_ZERO_DRIVER_H_
#define TESSERA_SRC_LEVEL_ZERO_DRIVER_H_

#include <stddef.h>
#include <stdint.h>

typedef uint32_t tsr_ze_result_t;  /* ze_result_t */
typedef struct _ze_driver_handle_t* tsr_ze_driver_t;
typedef struct _ze_device_handle_t* tsr_ze_device_t;
typedef struct _ze_context_handle_t* tsr_ze_context_t;
typedef struct _ze_command_queue_handle_t* tsr_ze_queue_t;
typedef struct _ze_command_list_handle_t* tsr_ze_list_t;
typedef struct _ze_event_pool_handle_t* tsr_ze_event_pool_t;
typedef struct _ze_event_handle_t* tsr_ze_event_t;
typedef struct _ze_module_handle_t* tsr_ze_module_t;
typedef struct _ze_module_build_log_handle_t* tsr_ze_build_log_t;
typedef struct _ze_kernel_handle_t* tsr_ze_kernel_t;
typedef struct _ze_fence_handle_t* tsr_ze_fence_t;

enum {
  TSR_ZE_RESULT_SUCCESS = 0,
  TSR_ZE_RESULT_NOT_READY = 1,
  TSR_ZE_RESULT_ERROR_DEVICE_LOST = 0x70000001,
  TSR_ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY = 0x70000002,
  TSR_ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY = 0x70000003,
  TSR_ZE_RESULT_ERROR_MODULE_BUILD_FAILURE = 0x70000004,
  TSR_ZE_RESULT_ERROR_UNINITIALIZED = 0x78000001,
  TSR_ZE_RESULT_ERROR_INVALID_KERNEL_NAME = 0x78000011
};

/* ze_structure_type_t values */
enum {
  TSR_ZE_STYPE_DEVICE_PROPERTIES = 0x3,
  TSR_ZE_STYPE_COMPUTE_PROPERTIES = 0x4,
  TSR_ZE_STYPE_DEVICE_MODULE_PROPERTIES = 0x5,
  TSR_ZE_STYPE_COMMAND_QUEUE_GROUP_PROPERTIES = 0x6,
  TSR_ZE_STYPE_DEVICE_MEMORY_PROPERTIES = 0x7,
  TSR_ZE_STYPE_CONTEXT_DESC = 0xd,
  TSR_ZE_STYPE_COMMAND_QUEUE_DESC = 0xe,
  TSR_ZE_STYPE_COMMAND_LIST_DESC = 0xf,
  TSR_ZE_STYPE_EVENT_POOL_DESC = 0x10,
  TSR_ZE_STYPE_EVENT_DESC = 0x11,
  TSR_ZE_STYPE_DEVICE_MEM_ALLOC_DESC = 0x15,
  TSR_ZE_STYPE_MODULE_DESC = 0x1b,
  TSR_ZE_STYPE_KERNEL_DESC = 0x1d
};

enum { TSR_ZE_INIT_FLAG_GPU_ONLY = 1 };
enum { TSR_ZE_DEVICE_TYPE_GPU = 1 };
enum { TSR_ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE = 1 };
enum { TSR_ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS = 2 };
enum { TSR_ZE_EVENT_POOL_FLAG_HOST_VISIBLE = 1 };
enum { TSR_ZE_EVENT_SCOPE_FLAG_HOST = 4 };
enum { TSR_ZE_MODULE_FORMAT_IL_SPIRV = 0 };

#define TSR_ZE_MAX_DEVICE_NAME 256
#define TSR_ZE_SUBGROUPSIZE_COUNT 8

typedef struct tsr_ze_device_properties {  /* ze_device_properties_t */
  uint32_t stype;
  void* pNext;
  uint32_t type, vendorId, deviceId, flags, subdeviceId, coreClockRate;
  uint64_t maxMemAllocSize;
  uint32_t maxHardwareContexts, maxCommandQueuePriority, numThreadsPerEU, physicalEUSimdWidth, numEUsPerSubslice,
      numSubslicesPerSlice, numSlices;
  uint64_t timerResolution;
  uint32_t timestampValidBits, kernelTimestampValidBits;
  uint8_t uuid[16];
  char name[TSR_ZE_MAX_DEVICE_NAME];
} tsr_ze_device_properties_t;

typedef struct tsr_ze_compute_properties {  /* ze_device_compute_properties_t */
  uint32_t stype;
  void* pNext;
  uint32_t maxTotalGroupSize, maxGroupSizeX, maxGroupSizeY, maxGroupSizeZ, maxGroupCountX, maxGroupCountY,
      maxGroupCountZ, maxSharedLocalMemory, numSubGroupSizes;
  uint32_t subGroupSizes[TSR_ZE_SUBGROUPSIZE_COUNT];
} tsr_ze_compute_properties_t;

typedef struct tsr_ze_module_properties {  /* ze_device_module_properties_t */
  uint32_t stype;
  void* pNext;
  uint32_t spirvVersionSupported;  /* ZE_MAKE_VERSION(major, minor): major << 16 | minor */
  uint32_t flags, fp16flags, fp32flags, fp64flags, maxArgumentsSize, printfBufferSize;
  uint8_t nativeKernelSupported[16];
} tsr_ze_module_properties_t;

typedef struct tsr_ze_memory_properties {  /* ze_device_memory_properties_t */
  uint32_t stype;
  void* pNext;
  uint32_t flags, maxClockRate, maxBusWidth;
  uint64_t totalSize;
  char name[TSR_ZE_MAX_DEVICE_NAME];
} tsr_ze_memory_properties_t;

typedef struct tsr_ze_queue_group_properties {  /* ze_command_queue_group_properties_t */
  uint32_t stype;
  void* pNext;
  uint32_t flags;
  size_t maxMemoryFillPatternSize;
  uint32_t numQueues;
} tsr_ze_queue_group_properties_t;

typedef struct tsr_ze_context_desc {  /* ze_context_desc_t */
  uint32_t stype;
  const void* pNext;
  uint32_t flags;
} tsr_ze_context_desc_t;

typedef struct tsr_ze_queue_desc {  /* ze_command_queue_desc_t */
  uint32_t stype;
  const void* pNext;
  uint32_t ordinal, index, flags, mode, priority;
} tsr_ze_queue_desc_t;

typedef struct tsr_ze_list_desc {  /* ze_command_list_desc_t */
  uint32_t stype;
  const void* pNext;
  uint32_t commandQueueGroupOrdinal, flags;
} tsr_ze_list_desc_t;

typedef struct tsr_ze_event_pool_desc {  /* ze_event_pool_desc_t */
  uint32_t stype;
  const void* pNext;
  uint32_t flags, count;
} tsr_ze_event_pool_desc_t;

typedef struct tsr_ze_event_desc {  /* ze_event_desc_t */
  uint32_t stype;
  const void* pNext;
  uint32_t index, signal, wait;
} tsr_ze_event_desc_t;

typedef struct tsr_ze_module_desc {  /* ze_module_desc_t */
  uint32_t stype;
  const void* pNext;
  uint32_t format;
  size_t inputSize;
  const uint8_t* pInputModule;
  const char* pBuildFlags;
  const void* pConstants;
} tsr_ze_module_desc_t;

typedef struct tsr_ze_kernel_desc {  /* ze_kernel_desc_t */
  uint32_t stype;
  const void* pNext;
  uint32_t flags;
  const char* pKernelName;
} tsr_ze_kernel_desc_t;

typedef struct tsr_ze_mem_alloc_desc {  /* ze_device_mem_alloc_desc_t */
  uint32_t stype;
  const void* pNext;
  uint32_t flags, ordinal;
} tsr_ze_mem_alloc_desc_t;

typedef struct tsr_ze_group_count {  /* ze_group_count_t */
  uint32_t groupCountX, groupCountY, groupCountZ;
} tsr_ze_group_count_t;

typedef struct tsr_ze_driver_api {
  tsr_ze_result_t (*zeInit)(uint32_t flags);
  tsr_ze_result_t (*zeDriverGet)(uint32_t* count, tsr_ze_driver_t* drivers);
  tsr_ze_result_t (*zeDeviceGet)(tsr_ze_driver_t driver, uint32_t* count, tsr_ze_device_t* devices);
  tsr_ze_result_t (*zeDeviceGetProperties)(tsr_ze_device_t device, tsr_ze_device_properties_t* out);
  tsr_ze_result_t (*zeDeviceGetComputeProperties)(tsr_ze_device_t device, tsr_ze_compute_properties_t* out);
  tsr_ze_result_t (*zeDeviceGetModuleProperties)(tsr_ze_device_t device, tsr_ze_module_properties_t* out);
  tsr_ze_result_t (*zeDeviceGetMemoryProperties)(tsr_ze_device_t device, uint32_t* count,
                                                 tsr_ze_memory_properties_t* out);
  tsr_ze_result_t (*zeDeviceGetCommandQueueGroupProperties)(tsr_ze_device_t device, uint32_t* count,
                                                            tsr_ze_queue_group_properties_t* out);
  tsr_ze_result_t (*zeContextCreate)(tsr_ze_driver_t driver, const tsr_ze_context_desc_t* desc,
                                     tsr_ze_context_t* out);
  tsr_ze_result_t (*zeContextDestroy)(tsr_ze_context_t context);
  tsr_ze_result_t (*zeCommandQueueCreate)(tsr_ze_context_t context, tsr_ze_device_t device,
                                          const tsr_ze_queue_desc_t* desc, tsr_ze_queue_t* out);
  tsr_ze_result_t (*zeCommandQueueDestroy)(tsr_ze_queue_t queue);
  tsr_ze_result_t (*zeCommandQueueExecuteCommandLists)(tsr_ze_queue_t queue, uint32_t count, tsr_ze_list_t* lists,
                                                       tsr_ze_fence_t fence);
  tsr_ze_result_t (*zeCommandListCreate)(tsr_ze_context_t context, tsr_ze_device_t device,
                                         const tsr_ze_list_desc_t* desc, tsr_ze_list_t* out);
  tsr_ze_result_t (*zeCommandListDestroy)(tsr_ze_list_t list);
  tsr_ze_result_t (*zeCommandListClose)(tsr_ze_list_t list);
  tsr_ze_result_t (*zeCommandListReset)(tsr_ze_list_t list);
  tsr_ze_result_t (*zeCommandListAppendLaunchKernel)(tsr_ze_list_t list, tsr_ze_kernel_t kernel,
                                                     const tsr_ze_group_count_t* groups, tsr_ze_event_t signal,
                                                     uint32_t wait_count, tsr_ze_event_t* waits);
  tsr_ze_result_t (*zeCommandListAppendMemoryCopy)(tsr_ze_list_t list, void* dst, const void* src, size_t bytes,
                                                   tsr_ze_event_t signal, uint32_t wait_count, tsr_ze_event_t* waits);
  tsr_ze_result_t (*zeEventPoolCreate)(tsr_ze_context_t context, const tsr_ze_event_pool_desc_t* desc,
                                       uint32_t device_count, tsr_ze_device_t* devices, tsr_ze_event_pool_t* out);
  tsr_ze_result_t (*zeEventPoolDestroy)(tsr_ze_event_pool_t pool);
  tsr_ze_result_t (*zeEventCreate)(tsr_ze_event_pool_t pool, const tsr_ze_event_desc_t* desc, tsr_ze_event_t* out);
  tsr_ze_result_t (*zeEventDestroy)(tsr_ze_event_t event);
  tsr_ze_result_t (*zeEventHostSynchronize)(tsr_ze_event_t event, uint64_t timeout_ns);
  tsr_ze_result_t (*zeEventHostReset)(tsr_ze_event_t event);
  tsr_ze_result_t (*zeModuleCreate)(tsr_ze_context_t context, tsr_ze_device_t device, const tsr_ze_module_desc_t* desc,
                                    tsr_ze_module_t* out, tsr_ze_build_log_t* log);
  tsr_ze_result_t (*zeModuleDestroy)(tsr_ze_module_t module);
  tsr_ze_result_t (*zeModuleBuildLogGetString)(tsr_ze_build_log_t log, size_t* size, char* text);
  tsr_ze_result_t (*zeModuleBuildLogDestroy)(tsr_ze_build_log_t log);
  tsr_ze_result_t (*zeKernelCreate)(tsr_ze_module_t module, const tsr_ze_kernel_desc_t* desc, tsr_ze_kernel_t* out);
  tsr_ze_result_t (*zeKernelDestroy)(tsr_ze_kernel_t kernel);
  tsr_ze_result_t (*zeKernelSetGroupSize)(tsr_ze_kernel_t kernel, uint32_t x, uint32_t y, uint32_t z);
  tsr_ze_result_t (*zeKernelSetArgumentValue)(tsr_ze_kernel_t kernel, uint32_t index, size_t size, const void* value);
  tsr_ze_result_t (*zeMemAllocDevice)(tsr_ze_context_t context, const tsr_ze_mem_alloc_desc_t* desc, size_t bytes,
                                      size_t alignment, tsr_ze_device_t device, void** out);
  tsr_ze_result_t (*zeMemFree)(tsr_ze_context_t context, void* ptr);
} tsr_ze_driver_api_t;

/* The first GPU of the first driver that has one, found when the loader was loaded. */
typedef struct tsr_ze_gpu {
  tsr_ze_driver_t driver;
  tsr_ze_device_t device;
  tsr_ze_device_properties_t props;
  tsr_ze_compute_properties_t compute;
  tsr_ze_module_properties_t module;
} tsr_ze_gpu_t;

/* The loader, loaded and initialized (zeInit for GPUs) once per process; NULL when this machine cannot run it,
 * with `*why` (static storage) saying why: no loader, a symbol missing, zeInit failing (no driver), no GPU. */
const tsr_ze_driver_api_t* tsr_ze_driver(const char** why);

/* The GPU found at load time; NULL when the driver is not usable. */
const tsr_ze_gpu_t* tsr_ze_gpu(void);

/* "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY (insufficient device memory)": Level Zero has no function that names
 * its results, so the names are ours, from ze_api.h. */
void tsr_ze_describe(tsr_ze_result_t r, char* out, size_t size);

#endif  /* TESSERA_SRC_LEVEL_ZERO_DRIVER_H_ */
