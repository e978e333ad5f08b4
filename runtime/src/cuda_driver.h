/* cuda_driver.h — the part of the CUDA driver API the CUDA backend uses, loaded from libcuda.so.1 at run time.
 *
 * libtessera has no link-time (and no build-time) dependency on CUDA: the types and constants below are the
 * driver API's stable ABI as cuda.h declares it, and the functions are looked up with dlsym under their
 * versioned names (cuMemAlloc_v2, …), which every driver since CUDA 4 exports and CUDA 13's still does. */
#ifndef TESSERA_SRC_CUDA_DRIVER_H_
#define TESSERA_SRC_CUDA_DRIVER_H_

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;        /* CUDA_SUCCESS = 0 */
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st* CUcontext;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUstream_st* CUstream;
typedef struct CUevent_st* CUevent;
typedef struct CUgraph_st* CUgraph;
typedef struct CUgraphExec_st* CUgraphExec;
typedef struct CUmemPoolHandle_st* CUmemoryPool;

/* CUmemPoolProps (cuda.h, CUDA 11.2 on): 88 bytes, the fields after `location` zero for a device pool of
 * ordinary memory (no export handles, no size cap). */
typedef struct tsr_cu_mem_pool_props {
  int alloc_type;      /* CU_MEM_ALLOCATION_TYPE_PINNED */
  int handle_types;    /* none */
  int location_type;   /* CU_MEM_LOCATION_TYPE_DEVICE */
  int location_id;     /* the device ordinal */
  void* win32_security_attributes;
  size_t max_size;     /* 0: no cap (CUDA 12.2 on; reserved bytes before) */
  unsigned short usage;
  unsigned char reserved[54];
} tsr_cu_mem_pool_props_t;

/* Memory pools (CUDA 11.2 on). */
enum { CU_MEM_ALLOCATION_TYPE_PINNED = 1, CU_MEM_LOCATION_TYPE_DEVICE = 1 };
/* CUmemPool_attribute */
enum {
  CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES = 1,
  CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC = 2,
  CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES = 3,
  CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4
};

enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
  CUDA_ERROR_INVALID_PTX = 218,
  CUDA_ERROR_JIT_COMPILER_NOT_FOUND = 221,
  CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712
};

/* The per-thread default stream: each host thread (so each Tessera stream's executor) gets its own. */
#define TSR_CU_STREAM_PER_THREAD ((CUstream)0x2)
/* CUDA's legacy default stream (CU_STREAM_LEGACY): work there waits for the work queued before it on every
 * blocking stream, and theirs queued after it waits for it. */
#define TSR_CU_STREAM_LEGACY ((CUstream)0x1)

/* cuStreamCreateWithPriority: a stream that waits for work on CUDA's legacy default stream (what PyTorch
 * queues by default) and that work for it, as CUDA's own streams do; CU_STREAM_NON_BLOCKING: one that does not
 * (graph building, which must not be joined by other libraries' work). */
enum { CU_STREAM_DEFAULT = 0, CU_STREAM_NON_BLOCKING = 1 };

/* cuEventCreate flags: default events keep timestamps (tsrEventElapsedTime). */
enum { CU_EVENT_DEFAULT = 0 };
/* cuEventRecordWithFlags / cuStreamWaitEvent in a stream capture: an event node of the graph, not a
 * dependency inside the capture. */
enum { CU_EVENT_RECORD_EXTERNAL = 1, CU_EVENT_WAIT_EXTERNAL = 1 };

/* CUstreamCaptureMode: RELAXED lets other threads allocate and synchronize while a graph is captured. */
enum { CU_STREAM_CAPTURE_MODE_RELAXED = 2 };

/* cuMemHostAlloc / cuMemHostRegister flags: usable from every CUDA context, and mapped into the device's
 * address space. */
enum { CU_MEMHOST_PORTABLE = 1, CU_MEMHOST_DEVICEMAP = 2 };

/* CUdevice_attribute values */
enum {
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7,
  CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
  CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115
};

/* CUjit_option values */
enum {
  CU_JIT_INFO_LOG_BUFFER = 3,
  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
};

/* CUfunction_attribute */
enum { CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8 };

typedef struct tsr_cuda_driver {
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int* version);
  CUresult (*cuGetErrorName)(CUresult error, const char** name);
  CUresult (*cuGetErrorString)(CUresult error, const char** text);
  CUresult (*cuDeviceGetCount)(int* count);
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal);
  CUresult (*cuDeviceGetName)(char* name, int length, CUdevice device);
  CUresult (*cuDeviceGetAttribute)(int* value, int attribute, CUdevice device);
  CUresult (*cuDeviceTotalMem)(size_t* bytes, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* ctx, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice device);
  CUresult (*cuCtxPushCurrent)(CUcontext ctx);
  CUresult (*cuCtxPopCurrent)(CUcontext* ctx);
  CUresult (*cuModuleLoadDataEx)(CUmodule* module, const void* image, unsigned num_options, int* options,
                                 void** values);
  CUresult (*cuModuleUnload)(CUmodule module);
  CUresult (*cuModuleGetFunction)(CUfunction* function, CUmodule module, const char* name);
  CUresult (*cuModuleGetGlobal)(CUdeviceptr* address, size_t* bytes, CUmodule module, const char* name);
  CUresult (*cuFuncSetAttribute)(CUfunction function, int attribute, int value);
  CUresult (*cuLaunchKernel)(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, unsigned shared_bytes, CUstream stream, void** params, void** extra);
  CUresult (*cuStreamSynchronize)(CUstream stream);
  CUresult (*cuMemAlloc)(CUdeviceptr* ptr, size_t bytes);
  CUresult (*cuMemFree)(CUdeviceptr ptr);
  CUresult (*cuMemcpy)(CUdeviceptr dst, CUdeviceptr src, size_t bytes);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr dst, const void* src, size_t bytes);
  CUresult (*cuMemcpyDtoH)(void* dst, CUdeviceptr src, size_t bytes);
  CUresult (*cuMemcpyDtoD)(CUdeviceptr dst, CUdeviceptr src, size_t bytes);

  /* Asynchronous work: streams, events, copies, page-locked host memory. */
  CUresult (*cuCtxSynchronize)(void);
  CUresult (*cuCtxGetStreamPriorityRange)(int* least, int* greatest);
  CUresult (*cuStreamCreateWithPriority)(CUstream* stream, unsigned flags, int priority);
  CUresult (*cuStreamDestroy)(CUstream stream);
  CUresult (*cuStreamQuery)(CUstream stream);
  CUresult (*cuStreamWaitEvent)(CUstream stream, CUevent event, unsigned flags);
  CUresult (*cuEventCreate)(CUevent* event, unsigned flags);
  CUresult (*cuEventDestroy)(CUevent event);
  CUresult (*cuEventRecord)(CUevent event, CUstream stream);
  CUresult (*cuEventQuery)(CUevent event);
  CUresult (*cuEventSynchronize)(CUevent event);
  CUresult (*cuEventElapsedTime)(float* ms, CUevent start, CUevent end);
  CUresult (*cuMemcpyAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream);
  CUresult (*cuMemcpyDtoHAsync)(void* dst, CUdeviceptr src, size_t bytes, CUstream stream);
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream);
  CUresult (*cuMemHostAlloc)(void** ptr, size_t bytes, unsigned flags);
  CUresult (*cuMemFreeHost)(void* ptr);
  CUresult (*cuMemHostRegister)(void* ptr, size_t bytes, unsigned flags);
  CUresult (*cuMemHostUnregister)(void* ptr);
  CUresult (*cuMemHostGetDevicePointer)(CUdeviceptr* device, void* host, unsigned flags);

  /* CUDA graphs (CUDA 11.4 and later). NULL when the driver lacks one: graph instantiation then fails with
   * TSR_ERROR_UNSUPPORTED naming it (`missing_graph_entry`); everything else works. */
  CUresult (*cuEventRecordWithFlags)(CUevent event, CUstream stream, unsigned flags);
  CUresult (*cuStreamBeginCapture)(CUstream stream, int mode);
  CUresult (*cuStreamEndCapture)(CUstream stream, CUgraph* graph);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec* exec, CUgraph graph, unsigned long long flags);
  CUresult (*cuGraphLaunch)(CUgraphExec exec, CUstream stream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec exec);
  CUresult (*cuGraphDestroy)(CUgraph graph);
  const char* missing_graph_entry;  /* the first graph entry point the driver lacks, or NULL */

  /* TMA tensor maps (CUDA 12 and later); NULL on older drivers, which then refuse kernels that need them. */
  CUresult (*cuTensorMapEncodeTiled)(void* map, int dtype, uint32_t rank, void* address, const uint64_t* dims,
                                     const uint64_t* strides, const uint32_t* box, const uint32_t* element_strides,
                                     int interleave, int swizzle, int l2_promotion, int oob_fill);

  /* Stream-ordered allocation from a memory pool of the context's own (CUDA 11.2 and later), the CUDA
   * backend's device allocator (cuda_backend.c); NULL when the driver lacks one: the backend then allocates
   * with cuMemAlloc and frees with cuMemFree, as before, `missing_pool_entry` naming the first one missing. */
  CUresult (*cuMemPoolCreate)(CUmemoryPool* pool, const tsr_cu_mem_pool_props_t* props);
  CUresult (*cuMemPoolDestroy)(CUmemoryPool pool);
  CUresult (*cuMemPoolSetAttribute)(CUmemoryPool pool, int attribute, void* value);
  CUresult (*cuMemPoolTrimTo)(CUmemoryPool pool, size_t keep_bytes);
  CUresult (*cuMemAllocFromPoolAsync)(CUdeviceptr* ptr, size_t bytes, CUmemoryPool pool, CUstream stream);
  CUresult (*cuMemFreeAsync)(CUdeviceptr ptr, CUstream stream);
  const char* missing_pool_entry;
} tsr_cuda_driver_t;

/* The driver, loaded and initialized (cuInit) once per process; NULL when this machine cannot run it, with
 * `*why` (static storage) saying why: no libcuda.so.1, a symbol missing, cuInit failing, no device. */
const tsr_cuda_driver_t* tsr_cuda_driver(const char** why);

/* Compute capability of GPU 0 as 10 * major + minor (90 for an H100), read when the driver was loaded. */
int tsr_cuda_device0_cc(void);

/* The CUstream of a CUDA backend's queue (backend.h), for libraries that enqueue on it (NCCL,
 * comm_nccl.c); NULL queue: the calling thread's per-thread default stream, the NULL stream's. */
CUstream tsr_cuda_queue_stream(void* queue);

/* "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)": the driver's own words. */
void tsr_cuda_describe(CUresult r, char* out, size_t size);

#endif  /* TESSERA_SRC_CUDA_DRIVER_H_ */
