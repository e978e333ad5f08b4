/* opencl_backend.c — the OpenCL backend's table (backend.h): kernels of `target: spirv`, loaded through the
 * OpenCL ICD loader (dlopen()ed, opencl_driver.h) with clCreateProgramWithIL, on the device the driver chose.
 *
 * Memory is coarse-grained shared virtual memory (clSVMAlloc): device allocations have addresses, as on every
 * other backend, so the generic layer's table of allocations, pools, views at offsets and the launch ABI
 * (a tensor argument is the address of its first element) carry over unchanged; tensors are passed with
 * clSetKernelArgSVMPointer. Copies are blocking clEnqueueSVMMemcpy calls.
 *
 * A context has one OpenCL context and one in-order command queue. Any host thread may call any entry: the
 * OpenCL calls used are thread-safe except clSetKernelArg on one cl_kernel, so a kernel's arguments are set
 * and its launch enqueued under that kernel's lock; the launch is then waited for on its own event, so that
 * its failure is its own. Launches of different Tessera streams therefore run one after another on the
 * device (on a CPU device each one already spreads over every core).
 *
 * Every OpenCL error becomes a status with OpenCL's name of the error; a program that does not build reports
 * the driver's build log. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "errors.h"
#include "gpu_fault.h"
#include "launch.h"
#include "opencl_driver.h"

typedef struct opencl_state {
  const tsr_opencl_driver_t* cl;
  bool debug;  /* debug mode: only checked code loads (gpu_fault.h) */
  const tsr_opencl_device_t* dev;
  cl_context context;
  cl_command_queue queue;
} opencl_state_t;

typedef struct opencl_kernel {
  cl_kernel kernel;
  pthread_mutex_t lock;  /* clSetKernelArg … clEnqueueNDRangeKernel */
  size_t max_work_group; /* CL_KERNEL_WORK_GROUP_SIZE: this kernel's limit, at most the device's */
  char name[128];
  const struct opencl_code* code;
  struct opencl_kernel* next;
} opencl_kernel_t;

typedef struct opencl_code {
  opencl_state_t* state;
  cl_program program;
  bool checked;        /* compiled with bounds checks: its kernels take the fault record last (gpu_fault.h) */
  char* sites;         /* its site table */
  size_t sites_bytes;
  pthread_mutex_t lock;  /* the list of kernels */
  opencl_kernel_t* kernels;
} opencl_code_t;

/* ---- errors ----------------------------------------------------------------------------------------- */

static tsr_status_t status_of(cl_int r, tsr_status_t otherwise) {
  switch (r) {
    case CL_OUT_OF_HOST_MEMORY:
    case CL_OUT_OF_RESOURCES:
    case CL_MEM_OBJECT_ALLOCATION_FAILURE: return TSR_ERROR_OUT_OF_MEMORY;
    case CL_DEVICE_NOT_FOUND:
    case CL_PLATFORM_NOT_FOUND_KHR: return TSR_ERROR_INIT_FAIL;
    case CL_BUILD_PROGRAM_FAILURE:
    case CL_INVALID_BINARY:
    case CL_INVALID_PROGRAM: return TSR_ERROR_BAD_IMAGE;
    case CL_INVALID_WORK_GROUP_SIZE: return TSR_ERROR_INVALID_VALUE;
    default: return otherwise;
  }
}

/* Fails with `what` and OpenCL's name of `r`; `otherwise` is the status when `r` has no closer one. */
static tsr_status_t cl_fail(cl_int r, tsr_status_t otherwise, const char* what) {
  char name[64];
  return tsr_fail(status_of(r, otherwise), "%s: %s", what, tsr_opencl_error_name(r, name, sizeof name));
}

/* ---- what the device is ----------------------------------------------------------------------------- */

static const char* unavailable(void) {
  const char* why;
  return tsr_opencl_driver(NULL, &why) ? NULL : why;
}

/* "spirv1.3" runs when the device lists SPIR-V 1.3 among the IL versions it takes. */
static bool runs_arch(const char* arch) {
  const tsr_opencl_device_t* dev;
  unsigned major, minor;
  char tail;
  if (!tsr_opencl_driver(&dev, NULL) || sscanf(arch, "spirv%u.%u%c", &major, &minor, &tail) != 2) return false;
  char version[32];
  snprintf(version, sizeof version, "SPIR-V_%u.%u", major, minor);
  for (const char* p = strstr(dev->il_versions, version); p; p = strstr(p + 1, version)) {
    char next = p[strlen(version)];
    if (next == 0 || next == ' ') return true;  /* not SPIR-V_1.1 inside SPIR-V_1.10 */
  }
  return false;
}

static tsr_status_t create(const tsr_context_options_t* options, void** out_state) {
  /* worker threads are a CPU notion; debug mode's guard pages need host memory, its checks checked code */
  const char* why;
  const tsr_opencl_device_t* dev;
  const tsr_opencl_driver_t* cl = tsr_opencl_driver(&dev, &why);
  if (!cl) return tsr_fail(TSR_ERROR_UNSUPPORTED, "the OpenCL backend is not available: %s", why);
  opencl_state_t* s = calloc(1, sizeof *s);
  if (!s) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory creating a context");
  s->cl = cl;
  s->dev = dev;
  s->debug = options->flags & TSR_CONTEXT_DEBUG;
  cl_int r = CL_SUCCESS;
  s->context = cl->clCreateContext(NULL, 1, &dev->device, NULL, NULL, &r);
  if (r == CL_SUCCESS) s->queue = cl->clCreateCommandQueueWithProperties(s->context, dev->device, NULL, &r);
  if (r != CL_SUCCESS) {
    if (s->context) cl->clReleaseContext(s->context);
    free(s);
    char what[256];
    snprintf(what, sizeof what, "creating an OpenCL context on '%s'", dev->name);
    return cl_fail(r, TSR_ERROR_INIT_FAIL, what);
  }
  *out_state = s;
  return TSR_SUCCESS;
}

static void destroy(void* state) {
  opencl_state_t* s = state;
  s->cl->clFinish(s->queue);
  s->cl->clReleaseCommandQueue(s->queue);
  s->cl->clReleaseContext(s->context);
  free(s);
}

/* The grid has no limit of its own in OpenCL beyond the global size's size_t; the launch record's is 32-bit. */
enum { MAX_GRID = 0x7fffffff };

static tsr_status_t limit(void* state, tsr_limit_t which, int64_t* out) {
  const tsr_opencl_device_t* d = ((opencl_state_t*)state)->dev;
  switch (which) {
    case TSR_LIMIT_MAX_THREADS_PER_BLOCK: *out = (int64_t)d->max_work_group; return TSR_SUCCESS;
    /* local memory per work-group; the SPIR-V kernel ABI has no dynamic local memory yet (launch refuses it) */
    case TSR_LIMIT_MAX_SHARED_BYTES_PER_BLOCK: *out = (int64_t)d->local_memory; return TSR_SUCCESS;
    case TSR_LIMIT_WARP_SIZE: *out = d->subgroup_size; return TSR_SUCCESS;
    case TSR_LIMIT_MAX_BLOCK_DIM_X:
    case TSR_LIMIT_MAX_BLOCK_DIM_Y:
    case TSR_LIMIT_MAX_BLOCK_DIM_Z: *out = (int64_t)d->max_item[which - TSR_LIMIT_MAX_BLOCK_DIM_X]; return TSR_SUCCESS;
    case TSR_LIMIT_MAX_GRID_DIM_X:
    case TSR_LIMIT_MAX_GRID_DIM_Y:
    case TSR_LIMIT_MAX_GRID_DIM_Z: *out = MAX_GRID; return TSR_SUCCESS;
    case TSR_LIMIT_COMPUTE_UNITS: *out = d->compute_units; return TSR_SUCCESS;
    case TSR_LIMIT_SIMD_WIDTH_BYTES: *out = 0; return TSR_SUCCESS;  /* the driver vectorizes work-items itself */
    case TSR_LIMIT_ALLOC_ALIGNMENT: *out = TSR_ALLOC_ALIGNMENT; return TSR_SUCCESS;
    case TSR_LIMIT_TOTAL_MEMORY_BYTES: *out = (int64_t)d->global_memory; return TSR_SUCCESS;
  }
  return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrGetLimit: unknown limit %d", (int)which);
}

static tsr_status_t properties(void* state, tsr_device_properties_t* p) {
  const tsr_opencl_device_t* d = ((opencl_state_t*)state)->dev;
  *p = (tsr_device_properties_t){.warp_size = d->subgroup_size, .max_threads_per_block = (uint32_t)d->max_work_group,
                                 .max_shared_bytes_per_block = (uint32_t)d->local_memory,
                                 .compute_units = d->compute_units, .total_memory_bytes = d->global_memory};
  snprintf(p->backend, sizeof p->backend, "opencl");
  snprintf(p->name, sizeof p->name, "%s", d->name);
  snprintf(p->arch, sizeof p->arch, "spirv%u.%u", d->spirv_major, d->spirv_minor);
  return TSR_SUCCESS;
}

/* ---- code ------------------------------------------------------------------------------------------- */

static tsr_status_t code_load(void* state, const uint8_t* bytes, size_t size, const char* section, void** out) {
  opencl_state_t* s = state;
  const tsr_opencl_driver_t* cl = s->cl;
  bool checked;
  char* sites;
  size_t sites_bytes;
  tsr_status_t st = tsr_gpu_fault_spirv_load(bytes, size, section, s->debug, &checked, &sites, &sites_bytes);
  if (st) return st;
  opencl_code_t* code = calloc(1, sizeof *code);
  if (!code) {
    free(sites);
    return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory loading section %s", section);
  }
  code->checked = checked;
  code->sites = sites;
  code->sites_bytes = sites_bytes;
  char name[64];
  cl_int r = CL_SUCCESS;
  code->program = cl->clCreateProgramWithIL(s->context, bytes, size, &r);
  if (r != CL_SUCCESS) {
    free(sites);
    free(code);
    return tsr_fail(status_of(r, TSR_ERROR_BAD_IMAGE), "OpenCL refused the SPIR-V of section %s for '%s': %s",
                    section, s->dev->name, tsr_opencl_error_name(r, name, sizeof name));
  }
  r = cl->clBuildProgram(code->program, 1, &s->dev->device, "", NULL, NULL);
  if (r != CL_SUCCESS) {
    char log[2048] = "";
    size_t len = 0;
    if (cl->clGetProgramBuildInfo(code->program, s->dev->device, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, &len))
      log[0] = 0;
    log[sizeof log - 1] = 0;
    cl->clReleaseProgram(code->program);
    free(code->sites);
    free(code);
    return tsr_fail(status_of(r, TSR_ERROR_BAD_IMAGE), "OpenCL could not build the SPIR-V of section %s for '%s': "
                    "%s%s%s", section, s->dev->name, tsr_opencl_error_name(r, name, sizeof name),
                    log[0] ? "; build log: " : "", log);
  }
  pthread_mutex_init(&code->lock, NULL);
  code->state = s;
  *out = code;
  return TSR_SUCCESS;
}

static bool code_entry(void* code_ptr, const char* symbol, const void** out) {
  opencl_code_t* code = code_ptr;
  const tsr_opencl_driver_t* cl = code->state->cl;
  opencl_kernel_t* k = calloc(1, sizeof *k);
  if (!k) return false;
  cl_int r = CL_SUCCESS;
  k->kernel = cl->clCreateKernel(code->program, symbol, &r);
  if (r == CL_SUCCESS)
    r = cl->clGetKernelWorkGroupInfo(k->kernel, code->state->dev->device, CL_KERNEL_WORK_GROUP_SIZE,
                                     sizeof k->max_work_group, &k->max_work_group, NULL);
  if (r != CL_SUCCESS) {
    if (k->kernel) cl->clReleaseKernel(k->kernel);
    free(k);
    return false;
  }
  snprintf(k->name, sizeof k->name, "%s", symbol);
  k->code = code;
  pthread_mutex_init(&k->lock, NULL);
  pthread_mutex_lock(&code->lock);
  k->next = code->kernels;
  code->kernels = k;
  pthread_mutex_unlock(&code->lock);
  *out = k;
  return true;
}

static void code_unload(void* code_ptr) {
  opencl_code_t* code = code_ptr;
  const tsr_opencl_driver_t* cl = code->state->cl;
  for (opencl_kernel_t *k = code->kernels, *next; k; k = next) {
    next = k->next;
    cl->clReleaseKernel(k->kernel);
    pthread_mutex_destroy(&k->lock);
    free(k);
  }
  cl->clReleaseProgram(code->program);
  pthread_mutex_destroy(&code->lock);
  free(code->sites);
  free(code);
}

/* ---- memory ----------------------------------------------------------------------------------------- */

static tsr_status_t mem_alloc(void* state, size_t bytes, void** out) {
  opencl_state_t* s = state;
  cl_uint align = s->dev->address_align > TSR_ALLOC_ALIGNMENT ? s->dev->address_align : TSR_ALLOC_ALIGNMENT;
  void* p = s->cl->clSVMAlloc(s->context, CL_MEM_READ_WRITE, bytes, align);
  if (!p)
    return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "tsrAlloc: clSVMAlloc of %zu bytes failed on '%s'", bytes, s->dev->name);
  *out = p;
  return TSR_SUCCESS;
}

static void mem_free(void* state, void* ptr) {
  opencl_state_t* s = state;
  s->cl->clSVMFree(s->context, ptr);
}

static tsr_status_t copy(void* state, void* dst, const void* src, size_t bytes, tsr_memcpy_kind_t kind) {
  opencl_state_t* s = state;
  if (kind == TSR_MEMCPY_HOST_TO_HOST) {
    memmove(dst, src, bytes);
    return TSR_SUCCESS;
  }
  const char *d = dst, *sp = src;
  cl_int r;
  if (d < sp + bytes && sp < d + bytes) {
    /* clEnqueueSVMMemcpy refuses overlapping ranges (CL_MEM_COPY_OVERLAP); the table promises memmove. */
    void* staging = malloc(bytes);
    if (!staging) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "tsrMemcpy: out of memory staging an overlapping copy");
    r = s->cl->clEnqueueSVMMemcpy(s->queue, 1, staging, src, bytes, 0, NULL, NULL);
    if (r == CL_SUCCESS) r = s->cl->clEnqueueSVMMemcpy(s->queue, 1, dst, staging, bytes, 0, NULL, NULL);
    free(staging);
  } else {
    r = s->cl->clEnqueueSVMMemcpy(s->queue, 1, dst, src, bytes, 0, NULL, NULL);
  }
  return r != CL_SUCCESS ? cl_fail(r, TSR_ERROR_INVALID_VALUE, "tsrMemcpy: clEnqueueSVMMemcpy") : TSR_SUCCESS;
}

/* ---- launches --------------------------------------------------------------------------------------- */

/* Sets argument `i` of a launch: a tensor as an SVM pointer, a scalar or a dimension by value. */
static cl_int set_arg(const tsr_opencl_driver_t* cl, cl_kernel k, const tsr_backend_launch_t* l, size_t i) {
  const tsr_arg_info_t* a = &l->arg_info[i];
  if (a->kind == TSR_ARG_TENSOR) {
    void* p;
    memcpy(&p, l->args[i], sizeof p);
    return cl->clSetKernelArgSVMPointer(k, (cl_uint)i, p);
  }
  return cl->clSetKernelArg(k, (cl_uint)i, tsr_arg_value_size(a), l->args[i]);
}

/* The fault record of a checked kernel's launch, after it: TSR_ERROR_MEMORY_FAULT naming its failed check. */
static tsr_status_t fault_of(opencl_state_t* s, const opencl_kernel_t* k, const uint32_t* record_dev,
                             tsr_fault_t* fault) {
  uint32_t record[TSR_GPU_FAULT_SPIRV_BYTES / 4];
  tsr_status_t st = copy(s, record, record_dev, sizeof record, TSR_MEMCPY_DEVICE_TO_HOST);
  return st ? st : tsr_gpu_fault_of_record(record, k->code->sites, k->code->sites_bytes, fault);
}

static tsr_status_t launch(void* state, const tsr_backend_launch_t* l, tsr_fault_t* fault) {
  opencl_state_t* s = state;
  const tsr_opencl_driver_t* cl = s->cl;
  opencl_kernel_t* k = (opencl_kernel_t*)l->entry;
  if (l->smem_bytes)
    return tsr_fail(TSR_ERROR_UNSUPPORTED, "kernel '%s': %u bytes of dynamic shared memory, but SPIR-V kernels take "
                    "no local-memory argument yet", k->name, l->smem_bytes);
  size_t global[3], local[3];
  for (int i = 0; i < 3; i++) {
    if (l->block[i] > s->dev->max_item[i])
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "kernel '%s': block (%u, %u, %u) exceeds '%s''s work-group limits "
                      "(%zu, %zu, %zu)", k->name, l->block[0], l->block[1], l->block[2], s->dev->name,
                      s->dev->max_item[0], s->dev->max_item[1], s->dev->max_item[2]);
    local[i] = l->block[i];
    global[i] = (size_t)l->grid[i] * l->block[i];
  }
  if (local[0] * local[1] * local[2] > k->max_work_group)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "kernel '%s': a block of %zu threads exceeds the kernel's work-group "
                    "limit of %zu on '%s'", k->name, local[0] * local[1] * local[2], k->max_work_group, s->dev->name);
  /* a checked kernel's fault record: one per launch, so that concurrent launches keep theirs apart */
  uint32_t* record = NULL;
  if (k->code->checked) {
    static const uint32_t zero[TSR_GPU_FAULT_SPIRV_BYTES / 4];
    tsr_status_t st = mem_alloc(s, sizeof zero, (void**)&record);
    if (!st) st = copy(s, record, zero, sizeof zero, TSR_MEMCPY_HOST_TO_DEVICE);
    if (st) {
      if (record) mem_free(s, record);
      return st;
    }
  }
  cl_event done = NULL;
  cl_int r = CL_SUCCESS;
  char what[192];
  pthread_mutex_lock(&k->lock);
  for (size_t i = 0; i < l->nargs && r == CL_SUCCESS; i++) {
    r = set_arg(cl, k->kernel, l, i);
    if (r != CL_SUCCESS)
      snprintf(what, sizeof what, "kernel '%s': setting argument %zu ('%s')", k->name, i, l->arg_info[i].name);
  }
  if (r == CL_SUCCESS && record) {
    r = cl->clSetKernelArgSVMPointer(k->kernel, (cl_uint)l->nargs, record);
    if (r != CL_SUCCESS) snprintf(what, sizeof what, "kernel '%s': setting its fault record", k->name);
  }
  if (r == CL_SUCCESS) {
    r = cl->clEnqueueNDRangeKernel(s->queue, k->kernel, 3, NULL, global, local, 0, NULL, &done);
    if (r != CL_SUCCESS) snprintf(what, sizeof what, "kernel '%s': clEnqueueNDRangeKernel", k->name);
  }
  pthread_mutex_unlock(&k->lock);
  if (r != CL_SUCCESS) {
    if (record) mem_free(s, record);
    return cl_fail(r, TSR_ERROR_LAUNCH_FAILED, what);
  }
  r = cl->clWaitForEvents(1, &done);
  cl_int status = CL_SUCCESS;
  if (r != CL_SUCCESS &&
      cl->clGetEventInfo(done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL) == CL_SUCCESS &&
      status < 0)
    r = status;  /* the command's own error, rather than "an event in the wait list failed" */
  cl->clReleaseEvent(done);
  if (r == CL_SUCCESS) {
    tsr_status_t st = record ? fault_of(s, k, record, fault) : TSR_SUCCESS;
    if (record) mem_free(s, record);
    return st;
  }
  if (record) mem_free(s, record);
  char name[64];
  return tsr_fail(TSR_ERROR_LAUNCH_FAILED, "kernel '%s' failed on '%s': %s", k->name, s->dev->name,
                  tsr_opencl_error_name(r, name, sizeof name));
}

const tsr_backend_t tsr_opencl_backend = {
    .name = "opencl",
    .target = "spirv",
    .unavailable = unavailable,
    .runs_arch = runs_arch,
    .create = create,
    .destroy = destroy,
    .properties = properties,
    .limit = limit,
    .code_load = code_load,
    .code_entry = code_entry,
    .code_unload = code_unload,
    .host_memory = false,
    .mem_alloc = mem_alloc,
    .mem_free = mem_free,
    .copy = copy,
    .launch = launch,
};
