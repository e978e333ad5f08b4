/* opencl_driver.h — the part of OpenCL the OpenCL backend uses, loaded from the ICD loader (libOpenCL.so.1)
 * at run time, and the device it runs on.
 *
 * libtessera has no link-time (and no build-time) dependency on OpenCL: the types and constants below are
 * OpenCL's stable ABI as CL/cl.h declares it (every handle a pointer, cl_int/cl_uint 32-bit, cl_ulong and
 * bitfields 64-bit), and the functions are looked up with dlsym. OpenCL 2.1 is the least the backend needs:
 * clCreateProgramWithIL for SPIR-V and shared virtual memory (clSVMAlloc), so that device memory has
 * addresses like every other backend's. */
#ifndef TESSERA_SRC_OPENCL_DRIVER_H_
#define TESSERA_SRC_OPENCL_DRIVER_H_

#include <stddef.h>
#include <stdint.h>

typedef int32_t cl_int;
typedef uint32_t cl_uint;
typedef uint64_t cl_ulong;
typedef uint32_t cl_bool;
typedef struct _cl_platform_id* cl_platform_id;
typedef struct _cl_device_id* cl_device_id;
typedef struct _cl_context* cl_context;
typedef struct _cl_command_queue* cl_command_queue;
typedef struct _cl_program* cl_program;
typedef struct _cl_kernel* cl_kernel;
typedef struct _cl_event* cl_event;

enum {
  CL_SUCCESS = 0,
  CL_DEVICE_NOT_FOUND = -1,
  CL_OUT_OF_RESOURCES = -5,
  CL_OUT_OF_HOST_MEMORY = -6,
  CL_MEM_OBJECT_ALLOCATION_FAILURE = -4,
  CL_BUILD_PROGRAM_FAILURE = -11,
  CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST = -14,
  CL_INVALID_VALUE = -30,
  CL_INVALID_BINARY = -42,
  CL_INVALID_PROGRAM = -44,
  CL_INVALID_KERNEL_NAME = -46,
  CL_INVALID_WORK_GROUP_SIZE = -54,
  CL_PLATFORM_NOT_FOUND_KHR = -1001
};

/* clGetPlatformInfo / clGetDeviceInfo / … parameter names */
enum {
  CL_PLATFORM_VERSION = 0x0901,
  CL_PLATFORM_NAME = 0x0902,
  CL_DEVICE_TYPE = 0x1000,
  CL_DEVICE_MAX_COMPUTE_UNITS = 0x1002,
  CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS = 0x1003,
  CL_DEVICE_MAX_WORK_GROUP_SIZE = 0x1004,
  CL_DEVICE_MAX_WORK_ITEM_SIZES = 0x1005,
  CL_DEVICE_MEM_BASE_ADDR_ALIGN = 0x1019,
  CL_DEVICE_GLOBAL_MEM_SIZE = 0x101F,
  CL_DEVICE_LOCAL_MEM_SIZE = 0x1023,
  CL_DEVICE_NAME = 0x102B,
  CL_DEVICE_VERSION = 0x102F,
  CL_DEVICE_SVM_CAPABILITIES = 0x1053,
  CL_DEVICE_IL_VERSION = 0x105B,
  CL_DEVICE_SUB_GROUP_SIZES_INTEL = 0x4108, /* cl_intel_required_subgroup_size */
  CL_PROGRAM_BUILD_LOG = 0x1183,
  CL_KERNEL_WORK_GROUP_SIZE = 0x11B0,
  CL_EVENT_COMMAND_EXECUTION_STATUS = 0x11D3
};

#define CL_DEVICE_TYPE_CPU ((cl_ulong)1 << 1)
#define CL_DEVICE_TYPE_GPU ((cl_ulong)1 << 2)
#define CL_DEVICE_TYPE_ALL ((cl_ulong)0xFFFFFFFF)
#define CL_DEVICE_SVM_COARSE_GRAIN_BUFFER ((cl_ulong)1 << 0)
#define CL_MEM_READ_WRITE ((cl_ulong)1 << 0)

typedef struct tsr_opencl_driver {
  cl_int (*clGetPlatformIDs)(cl_uint n, cl_platform_id* platforms, cl_uint* count);
  cl_int (*clGetPlatformInfo)(cl_platform_id platform, cl_uint name, size_t size, void* value, size_t* size_ret);
  cl_int (*clGetDeviceIDs)(cl_platform_id platform, cl_ulong type, cl_uint n, cl_device_id* devices, cl_uint* count);
  cl_int (*clGetDeviceInfo)(cl_device_id device, cl_uint name, size_t size, void* value, size_t* size_ret);
  cl_context (*clCreateContext)(const intptr_t* properties, cl_uint n, const cl_device_id* devices,
                                void (*notify)(const char*, const void*, size_t, void*), void* user, cl_int* err);
  cl_int (*clReleaseContext)(cl_context context);
  cl_command_queue (*clCreateCommandQueueWithProperties)(cl_context context, cl_device_id device,
                                                         const cl_ulong* properties, cl_int* err);
  cl_int (*clReleaseCommandQueue)(cl_command_queue queue);
  cl_int (*clFinish)(cl_command_queue queue);
  cl_program (*clCreateProgramWithIL)(cl_context context, const void* il, size_t size, cl_int* err);
  cl_int (*clBuildProgram)(cl_program program, cl_uint n, const cl_device_id* devices, const char* options,
                           void (*notify)(cl_program, void*), void* user);
  cl_int (*clGetProgramBuildInfo)(cl_program program, cl_device_id device, cl_uint name, size_t size, void* value,
                                  size_t* size_ret);
  cl_int (*clReleaseProgram)(cl_program program);
  cl_kernel (*clCreateKernel)(cl_program program, const char* name, cl_int* err);
  cl_int (*clReleaseKernel)(cl_kernel kernel);
  cl_int (*clGetKernelWorkGroupInfo)(cl_kernel kernel, cl_device_id device, cl_uint name, size_t size, void* value,
                                     size_t* size_ret);
  cl_int (*clSetKernelArg)(cl_kernel kernel, cl_uint index, size_t size, const void* value);
  cl_int (*clSetKernelArgSVMPointer)(cl_kernel kernel, cl_uint index, const void* pointer);
  cl_int (*clEnqueueNDRangeKernel)(cl_command_queue queue, cl_kernel kernel, cl_uint dims, const size_t* offset,
                                   const size_t* global, const size_t* local, cl_uint n_wait, const cl_event* wait,
                                   cl_event* event);
  cl_int (*clWaitForEvents)(cl_uint n, const cl_event* events);
  cl_int (*clGetEventInfo)(cl_event event, cl_uint name, size_t size, void* value, size_t* size_ret);
  cl_int (*clReleaseEvent)(cl_event event);
  void* (*clSVMAlloc)(cl_context context, cl_ulong flags, size_t size, cl_uint alignment);
  void (*clSVMFree)(cl_context context, void* pointer);
  cl_int (*clEnqueueSVMMemcpy)(cl_command_queue queue, cl_bool blocking, void* dst, const void* src, size_t size,
                               cl_uint n_wait, const cl_event* wait, cl_event* event);
} tsr_opencl_driver_t;

/* The device the backend runs on, chosen once per process among every platform's devices that take SPIR-V
 * and have coarse-grained buffer SVM: the one $TESSERA_OPENCL_DEVICE numbers (0, 1, … in platform order),
 * else the first GPU, else the first such device. */
typedef struct tsr_opencl_device {
  cl_platform_id platform;
  cl_device_id device;
  char name[128];
  char platform_name[128];
  char il_versions[256];      /* "SPIR-V_1.0 SPIR-V_1.1 …" */
  unsigned spirv_major, spirv_minor;  /* the highest SPIR-V version it takes */
  size_t max_work_group, max_item[3];
  cl_uint compute_units, address_align;  /* alignment of allocations in bytes */
  cl_ulong local_memory, global_memory;
  uint32_t subgroup_size;     /* 32 when it runs subgroups of 32 (what kernels require); else its widest; 0: unknown */
} tsr_opencl_device_t;

/* The driver, loaded once per process ($TESSERA_OPENCL_LIBRARY, else libOpenCL.so.1), and the device; NULL
 * when this machine cannot run the backend, with `*why` (static storage) saying why: no ICD loader, a symbol
 * missing, no platform (no vendor driver registered: /etc/OpenCL/vendors or $OCL_ICD_VENDORS), or no device
 * that takes SPIR-V with SVM — each rejected device named with the reason. */
const tsr_opencl_driver_t* tsr_opencl_driver(const tsr_opencl_device_t** device, const char** why);

/* "CL_BUILD_PROGRAM_FAILURE (-11)": OpenCL's name of an error code. */
const char* tsr_opencl_error_name(cl_int error, char* buffer, size_t size);

#endif  /* TESSERA_SRC_OPENCL_DRIVER_H_ */
