/* cuda_backend.c — the CUDA backend's table (backend.h): kernels of `target: ptx`, loaded through the CUDA
 * driver (dlopen()ed, cuda_driver.h), JIT-compiled from the image's PTX for the context's GPU.
 *
 * A context uses device 0 (CUDA_VISIBLE_DEVICES picks which GPU that is) through its primary context, the
 * one the CUDA runtime — and so PyTorch, CuPy … — uses: device pointers move freely between them. Every
 * entry makes that context current for its call only (push/pop), so any host thread may call any entry.
 *
 * The table's contract is that a launch runs to completion; a launch goes to the calling thread's
 * per-thread default stream and is waited for. Tessera streams run their launches on their own executor
 * threads (stream.c), so launches of different Tessera streams overlap on the GPU; a launch after work
 * another library queued on CUDA's legacy default stream waits for that work, as a blocking stream does.
 *
 * Every CUresult becomes a status with the driver's own name and description of the error. An error that
 * ends the CUDA context (an illegal address, a trap) also ends every later call of the process on this
 * GPU: the driver's messages then say so, and libtessera keeps reporting them rather than aborting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cuda_driver.h"
#include "errors.h"

typedef struct cuda_state {
  const tsr_cuda_driver_t* cu;
  CUdevice device;
  CUcontext context;   /* the device's primary context, retained */
  int cc_major, cc_minor;
  int max_block[3], max_grid[3];
  int max_threads, max_smem, warp_size, sms;
  size_t total_memory;
  char name[128];
} cuda_state_t;

typedef struct cuda_code {
  const tsr_cuda_driver_t* cu;
  CUcontext context;
  CUmodule module;
} cuda_code_t;

/* ---- errors ----------------------------------------------------------------------------------------- */

/* A kernel's fault (illegal or misaligned address, trap, illegal instruction, …) ends the CUDA context: every
 * later call of the process on it fails with the same error. */
static bool sticky(CUresult r) { return r == 700 || r == 710 || (r >= 714 && r <= 719); }

static tsr_status_t status_of(CUresult r, tsr_status_t otherwise) {
  switch (r) {
    case CUDA_ERROR_OUT_OF_MEMORY: return TSR_ERROR_OUT_OF_MEMORY;
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE: return TSR_ERROR_INIT_FAIL;
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION: return TSR_ERROR_BAD_IMAGE;
    default:
      /* 7xx: a launch failed; a sticky one also fails every later call. Not TSR_ERROR_MEMORY_FAULT even for an
       * illegal address: that status means a fault debug mode caught, with its details (backend.h). */
      return r >= 700 && r < 800 ? TSR_ERROR_LAUNCH_FAILED : otherwise;
  }
}

/* Fails with `what` and the driver's description of `r`; `otherwise` is the status when `r` has no closer one. */
static tsr_status_t cuda_fail(CUresult r, tsr_status_t otherwise, const char* what) {
  char why[256];
  tsr_cuda_describe(r, why, sizeof why);
  return tsr_fail(status_of(r, otherwise), "%s: %s%s", what, why,
                  sticky(r) ? " (a kernel failed earlier: the CUDA context cannot be used again in this process)" : "");
}

/* ---- the current context ---------------------------------------------------------------------------- */

static tsr_status_t enter(const tsr_cuda_driver_t* cu, CUcontext ctx, const char* what) {
  CUresult r = cu->cuCtxPushCurrent(ctx);
  return r ? cuda_fail(r, TSR_ERROR_INIT_FAIL, what) : TSR_SUCCESS;
}

static void leave(const tsr_cuda_driver_t* cu) {
  CUcontext popped;
  cu->cuCtxPopCurrent(&popped);
}

/* ---- what the device is ----------------------------------------------------------------------------- */

static const char* unavailable(void) {
  const char* why;
  return tsr_cuda_driver(&why) ? NULL : why;
}

/* "sm_80" runs on compute capability 8.0 and later (the driver compiles its PTX for the device); an
 * architecture-specific "sm_90a" only on 9.0 itself. Asked with no context at hand: GPU 0 is the device. */
static bool runs_arch(const char* arch) {
  unsigned number;
  char suffix[4] = "";
  int device_cc = tsr_cuda_device0_cc();
  if (!tsr_cuda_driver(NULL) || sscanf(arch, "sm_%u%3s", &number, suffix) < 1) return false;
  if (suffix[0] == 'a' && suffix[1] == 0) return (int)number == device_cc;
  return suffix[0] == 0 && (int)number <= device_cc;
}

static tsr_status_t attribute(cuda_state_t* s, int which, int* out) {
  CUresult r = s->cu->cuDeviceGetAttribute(out, which, s->device);
  return r ? cuda_fail(r, TSR_ERROR_INIT_FAIL, "querying the GPU") : TSR_SUCCESS;
}

static tsr_status_t create(const tsr_context_options_t* options, void** out_state) {
  (void)options;  /* worker threads are a CPU notion; debug mode's guard pages need host memory */
  const char* why = unavailable();
  if (why) return tsr_fail(TSR_ERROR_UNSUPPORTED, "the CUDA backend is not available: %s", why);
  cuda_state_t* s = calloc(1, sizeof *s);
  if (!s) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory creating a context");
  s->cu = tsr_cuda_driver(NULL);
  CUresult r = s->cu->cuDeviceGet(&s->device, 0);
  if (!r) r = s->cu->cuDevicePrimaryCtxRetain(&s->context, s->device);
  if (r) {
    free(s);
    return cuda_fail(r, TSR_ERROR_INIT_FAIL, "creating a CUDA context on GPU 0");
  }
  tsr_status_t st = TSR_SUCCESS;
  static const int block_attrs[3] = {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y,
                                     CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z};
  static const int grid_attrs[3] = {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y,
                                    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z};
  for (int i = 0; i < 3 && !st; i++)
    if (!(st = attribute(s, block_attrs[i], &s->max_block[i]))) st = attribute(s, grid_attrs[i], &s->max_grid[i]);
  if (!st) st = attribute(s, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &s->max_threads);
  if (!st) st = attribute(s, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &s->max_smem);
  if (!st) st = attribute(s, CU_DEVICE_ATTRIBUTE_WARP_SIZE, &s->warp_size);
  if (!st) st = attribute(s, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &s->sms);
  if (!st) st = attribute(s, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &s->cc_major);
  if (!st) st = attribute(s, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &s->cc_minor);
  if (!st && (r = s->cu->cuDeviceTotalMem(&s->total_memory, s->device)))
    st = cuda_fail(r, TSR_ERROR_INIT_FAIL, "querying the GPU");
  if (!st && (r = s->cu->cuDeviceGetName(s->name, sizeof s->name, s->device)))
    st = cuda_fail(r, TSR_ERROR_INIT_FAIL, "querying the GPU");
  if (st) {
    s->cu->cuDevicePrimaryCtxRelease(s->device);
    free(s);
    return st;
  }
  *out_state = s;
  return TSR_SUCCESS;
}

static void destroy(void* state) {
  cuda_state_t* s = state;
  s->cu->cuDevicePrimaryCtxRelease(s->device);
  free(s);
}

static tsr_status_t limit(void* state, tsr_limit_t which, int64_t* out) {
  cuda_state_t* s = state;
  switch (which) {
    case TSR_LIMIT_MAX_THREADS_PER_BLOCK: *out = s->max_threads; return TSR_SUCCESS;
    case TSR_LIMIT_MAX_SHARED_BYTES_PER_BLOCK: *out = s->max_smem; return TSR_SUCCESS;
    case TSR_LIMIT_WARP_SIZE: *out = s->warp_size; return TSR_SUCCESS;
    case TSR_LIMIT_MAX_BLOCK_DIM_X:
    case TSR_LIMIT_MAX_BLOCK_DIM_Y:
    case TSR_LIMIT_MAX_BLOCK_DIM_Z: *out = s->max_block[which - TSR_LIMIT_MAX_BLOCK_DIM_X]; return TSR_SUCCESS;
    case TSR_LIMIT_MAX_GRID_DIM_X:
    case TSR_LIMIT_MAX_GRID_DIM_Y:
    case TSR_LIMIT_MAX_GRID_DIM_Z: *out = s->max_grid[which - TSR_LIMIT_MAX_GRID_DIM_X]; return TSR_SUCCESS;
    case TSR_LIMIT_COMPUTE_UNITS: *out = s->sms; return TSR_SUCCESS;
    case TSR_LIMIT_SIMD_WIDTH_BYTES: *out = 0; return TSR_SUCCESS;  /* no vector ISA: SIMT lanes instead */
    case TSR_LIMIT_ALLOC_ALIGNMENT: *out = TSR_ALLOC_ALIGNMENT; return TSR_SUCCESS;
    case TSR_LIMIT_TOTAL_MEMORY_BYTES: *out = (int64_t)s->total_memory; return TSR_SUCCESS;
  }
  return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrGetLimit: unknown limit %d", (int)which);
}

static tsr_status_t properties(void* state, tsr_device_properties_t* p) {
  cuda_state_t* s = state;
  *p = (tsr_device_properties_t){.warp_size = (uint32_t)s->warp_size, .max_threads_per_block = (uint32_t)s->max_threads,
                                 .max_shared_bytes_per_block = (uint32_t)s->max_smem, .compute_units = (uint32_t)s->sms,
                                 .total_memory_bytes = s->total_memory};
  snprintf(p->backend, sizeof p->backend, "cuda");
  snprintf(p->name, sizeof p->name, "%s", s->name);
  snprintf(p->arch, sizeof p->arch, "sm_%d%d", s->cc_major, s->cc_minor);
  return TSR_SUCCESS;
}

/* ---- code ------------------------------------------------------------------------------------------- */

static tsr_status_t code_load(void* state, const uint8_t* bytes, size_t size, const char* section, void** out) {
  cuda_state_t* s = state;
  /* The driver reads PTX as a C string; the section holds the text without its terminator. */
  char* ptx = malloc(size + 1);
  cuda_code_t* code = calloc(1, sizeof *code);
  if (!ptx || !code) {
    free(ptx);
    free(code);
    return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory loading section %s", section);
  }
  memcpy(ptx, bytes, size);
  ptx[size] = 0;
  char log[4096] = "";  /* the JIT's error messages, for the failure's message */
  int options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {log, (void*)(uintptr_t)sizeof log};
  tsr_status_t st = enter(s->cu, s->context, "loading PTX");
  if (st) {
    free(ptx);
    free(code);
    return st;
  }
  CUresult r = s->cu->cuModuleLoadDataEx(&code->module, ptx, 2, options, values);
  leave(s->cu);
  free(ptx);
  if (r) {
    free(code);
    char why[256];
    tsr_cuda_describe(r, why, sizeof why);
    log[sizeof log - 1] = 0;
    return tsr_fail(status_of(r, TSR_ERROR_BAD_IMAGE), "the CUDA driver could not load the PTX of section %s for "
                    "%s (sm_%d%d): %s%s%s", section, s->name, s->cc_major, s->cc_minor, why,
                    log[0] ? "; JIT log: " : "", log);
  }
  code->cu = s->cu;
  code->context = s->context;
  *out = code;
  return TSR_SUCCESS;
}

static bool code_entry(void* code_ptr, const char* symbol, const void** out) {
  cuda_code_t* code = code_ptr;
  if (enter(code->cu, code->context, "looking up a kernel")) return false;
  CUfunction f;
  CUresult r = code->cu->cuModuleGetFunction(&f, code->module, symbol);
  leave(code->cu);
  if (r) return false;
  *out = (const void*)f;
  return true;
}

static void code_unload(void* code_ptr) {
  cuda_code_t* code = code_ptr;
  if (!enter(code->cu, code->context, "unloading a module")) {
    code->cu->cuModuleUnload(code->module);
    leave(code->cu);
  }
  free(code);
}

/* ---- memory ----------------------------------------------------------------------------------------- */

static tsr_status_t mem_alloc(void* state, size_t bytes, void** out) {
  cuda_state_t* s = state;
  tsr_status_t st = enter(s->cu, s->context, "tsrAlloc");
  if (st) return st;
  CUdeviceptr p = 0;
  CUresult r = s->cu->cuMemAlloc(&p, bytes);  /* 256-byte aligned: more than TSR_ALLOC_ALIGNMENT */
  leave(s->cu);
  if (r) return cuda_fail(r, TSR_ERROR_OUT_OF_MEMORY, "tsrAlloc: cuMemAlloc");
  *out = (void*)(uintptr_t)p;
  return TSR_SUCCESS;
}

static void mem_free(void* state, void* ptr) {
  cuda_state_t* s = state;
  if (enter(s->cu, s->context, "tsrFree")) return;  /* a dead context has freed it already */
  s->cu->cuMemFree((CUdeviceptr)(uintptr_t)ptr);
  leave(s->cu);
}

static tsr_status_t copy(void* state, void* dst, const void* src, size_t bytes, tsr_memcpy_kind_t kind) {
  cuda_state_t* s = state;
  if (kind == TSR_MEMCPY_HOST_TO_HOST) {
    memmove(dst, src, bytes);
    return TSR_SUCCESS;
  }
  tsr_status_t st = enter(s->cu, s->context, "tsrMemcpy");
  if (st) return st;
  CUdeviceptr d = (CUdeviceptr)(uintptr_t)dst, sp = (CUdeviceptr)(uintptr_t)src;
  CUresult r;
  switch (kind) {
    case TSR_MEMCPY_HOST_TO_DEVICE: r = s->cu->cuMemcpyHtoD(d, src, bytes); break;
    case TSR_MEMCPY_DEVICE_TO_HOST: r = s->cu->cuMemcpyDtoH(dst, sp, bytes); break;
    case TSR_MEMCPY_DEVICE_TO_DEVICE: r = s->cu->cuMemcpyDtoD(d, sp, bytes); break;
    default: r = s->cu->cuMemcpy(d, sp, bytes); break;  /* unified addressing tells the sides apart */
  }
  leave(s->cu);
  return r ? cuda_fail(r, TSR_ERROR_INVALID_VALUE, "tsrMemcpy") : TSR_SUCCESS;
}

/* ---- launches --------------------------------------------------------------------------------------- */

static tsr_status_t launch(void* state, const tsr_backend_launch_t* l, tsr_fault_t* fault) {
  (void)fault;  /* GPU faults come back as CUDA errors, not as caught signals */
  cuda_state_t* s = state;
  for (int i = 0; i < 3; i++) {
    if (l->block[i] > (uint32_t)s->max_block[i] || l->grid[i] > (uint32_t)s->max_grid[i])
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "grid (%u, %u, %u) of blocks (%u, %u, %u) exceeds %s's limits: "
                      "grid (%d, %d, %d), block (%d, %d, %d)", l->grid[0], l->grid[1], l->grid[2], l->block[0],
                      l->block[1], l->block[2], s->name, s->max_grid[0], s->max_grid[1], s->max_grid[2],
                      s->max_block[0], s->max_block[1], s->max_block[2]);
  }
  tsr_status_t st = enter(s->cu, s->context, "tsrLaunch");
  if (st) return st;
  CUfunction f = (CUfunction)l->entry;
  CUresult r = CUDA_SUCCESS;
  /* Beyond 48 KiB a kernel must opt in to dynamic shared memory. */
  if (l->smem_bytes > 48u << 10)
    r = s->cu->cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)l->smem_bytes);
  if (!r)
    r = s->cu->cuLaunchKernel(f, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2],
                              l->smem_bytes, TSR_CU_STREAM_PER_THREAD, l->args, NULL);
  if (!r) r = s->cu->cuStreamSynchronize(TSR_CU_STREAM_PER_THREAD);
  leave(s->cu);
  if (!r) return TSR_SUCCESS;
  char why[256];
  tsr_cuda_describe(r, why, sizeof why);
  return tsr_fail(status_of(r, TSR_ERROR_LAUNCH_FAILED), "the kernel failed on %s: %s%s", s->name, why,
                  sticky(r) ? "; the CUDA context cannot be used again in this process" : "");
}

const tsr_backend_t tsr_cuda_backend = {
    .name = "cuda",
    .target = "ptx",
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
