/* hip_backend.c — the HIP backend's table (backend.h): kernels of `target: amdgpu`, loaded through the HIP
 * runtime (dlopen()ed, hip_driver.h) from the image's HSACO code objects.
 *
 * A context uses device 0 (HIP_VISIBLE_DEVICES picks which GPU that is). HIP's current device is a property
 * of the calling thread, so every entry makes device 0 current for its call only and gives the thread back
 * the device it had: any host thread may call any entry, as with the CUDA backend.
 *
 * The table's contract is that a launch runs to completion. A launch goes to a "lane", a non-blocking HIP
 * stream with an event, taken from the context's idle lanes (or made) for the launch: the kernel is queued
 * on the stream, the event recorded after it and waited for. Launches of different Tessera streams, which
 * run on different executor threads (stream.c), so take different lanes and overlap on the GPU. The event is
 * created with hipEventBlockingSync: the waiting thread sleeps instead of spinning on a CPU core while the
 * GPU works.
 *
 * Every hipError_t becomes a status with HIP's own name and description of the error (gpu_status.h for the
 * numbering). A kernel's memory fault usually makes ROCm's runtime end the process (its default handler
 * aborts after printing "Memory access fault by GPU"): libtessera cannot report that one.
 *
 * Code objects compiled with bounds checks (gpu_fault.h) skip an access outside its tensor and record it in
 * their `__tessera_fault` (found with hipModuleGetGlobal): after each launch the records of the context's
 * checked modules are read, and a set one is cleared and fails the launch with TSR_ERROR_MEMORY_FAULT
 * naming kernel, block, tensor and line, as the CPU's checks do. Debug mode (TESSERA_DEBUG) refuses code
 * objects compiled without them, which could still fault past a tensor. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "errors.h"
#include "gpu_fault.h"
#include "gpu_status.h"
#include "hip_driver.h"

typedef struct hip_lane {
  hipStream_t stream;
  hipEvent_t done;
  struct hip_lane* next;
} hip_lane_t;

typedef struct hip_state {
  const tsr_hip_driver_t* hip;
  int device;
  int max_block[3], max_grid[3];
  int max_threads, max_smem, warp_size, compute_units;
  size_t total_memory;
  char name[128], arch[64];  /* arch: the gcnArchName's processor ("gfx942" of "gfx942:sramecc+:xnack-") */
  bool debug;                /* debug mode: only code compiled with bounds checks loads */
  pthread_mutex_t lock;      /* guards `idle` and `checked` */
  hip_lane_t* idle;
  struct hip_code* checked;  /* the loaded modules compiled with bounds checks */
} hip_state_t;

typedef struct hip_code {
  hip_state_t* state;
  hipModule_t module;
  void* image;  /* our copy of the code object: the section is the caller's buffer, which may go */
  void *record, *sites;  /* the fault record and site table of a module compiled with bounds checks, else NULL */
  size_t sites_bytes;
  struct hip_code *prev, *next;  /* in state->checked */
} hip_code_t;

/* ---- errors ----------------------------------------------------------------------------------------- */

static tsr_status_t hip_fail(hipError_t r, tsr_status_t otherwise, const char* what) {
  char why[256];
  tsr_hip_describe(r, why, sizeof why);
  return tsr_fail(tsr_gpu_status(r, otherwise), "%s: %s%s", what, why,
                  tsr_gpu_sticky(r) ? " (a kernel failed: the GPU cannot be used again in this process)" : "");
}

/* ---- the current device ----------------------------------------------------------------------------- */

/* Makes the context's device current; `*previous` is the thread's device before, for leave(). */
static tsr_status_t enter(hip_state_t* s, int* previous, const char* what) {
  hipError_t r = s->hip->hipGetDevice(previous);
  if (!r && *previous != s->device) r = s->hip->hipSetDevice(s->device);
  return r ? hip_fail(r, TSR_ERROR_INIT_FAIL, what) : TSR_SUCCESS;
}

static void leave(hip_state_t* s, int previous) {
  if (previous != s->device) s->hip->hipSetDevice(previous);
}

/* ---- what the device is ----------------------------------------------------------------------------- */

static const char* unavailable(void) {
  const char* why;
  return tsr_hip_driver(&why) ? NULL : why;
}

/* The processor part of a target ID: "gfx90a" of "gfx90a:sramecc+:xnack-". */
static void processor_of(const char* target_id, char* out, size_t size) {
  size_t n = strcspn(target_id, ":");
  snprintf(out, size, "%.*s", (int)n, target_id);
}

/* An HSACO runs only on the processor it was built for; our code objects name no target features (sramecc,
 * xnack "any"), so they run whatever the device's are. */
static bool runs_arch(const char* arch) {
  const tsr_hip_device0_t* d = tsr_hip_device0();
  if (!d) return false;
  char processor[64];
  processor_of(d->arch, processor, sizeof processor);
  return strcmp(arch, processor) == 0;
}

static tsr_status_t attribute(hip_state_t* s, int which, int* out) {
  hipError_t r = s->hip->hipDeviceGetAttribute(out, which, s->device);
  return r ? hip_fail(r, TSR_ERROR_INIT_FAIL, "querying the GPU (hipDeviceGetAttribute)") : TSR_SUCCESS;
}

static tsr_status_t create(const tsr_context_options_t* options, void** out_state) {
  /* worker threads are a CPU notion; debug mode's guard pages need host memory, its checks checked code */
  const char* why = unavailable();
  if (why) return tsr_fail(TSR_ERROR_UNSUPPORTED, "the HIP backend is not available: %s", why);
  hip_state_t* s = calloc(1, sizeof *s);
  if (!s) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory creating a context");
  s->hip = tsr_hip_driver(NULL);
  s->debug = options->flags & TSR_CONTEXT_DEBUG;
  s->device = 0;
  const tsr_hip_device0_t* d0 = tsr_hip_device0();
  snprintf(s->name, sizeof s->name, "%s", d0->name);
  processor_of(d0->arch, s->arch, sizeof s->arch);
  static const int block_attrs[3] = {hipDeviceAttributeMaxBlockDimX, hipDeviceAttributeMaxBlockDimY,
                                     hipDeviceAttributeMaxBlockDimZ};
  static const int grid_attrs[3] = {hipDeviceAttributeMaxGridDimX, hipDeviceAttributeMaxGridDimY,
                                    hipDeviceAttributeMaxGridDimZ};
  tsr_status_t st = TSR_SUCCESS;
  for (int i = 0; i < 3 && !st; i++)
    if (!(st = attribute(s, block_attrs[i], &s->max_block[i]))) st = attribute(s, grid_attrs[i], &s->max_grid[i]);
  if (!st) st = attribute(s, hipDeviceAttributeMaxThreadsPerBlock, &s->max_threads);
  if (!st) st = attribute(s, hipDeviceAttributeMaxSharedMemoryPerBlock, &s->max_smem);
  if (!st) st = attribute(s, hipDeviceAttributeWarpSize, &s->warp_size);
  if (!st) st = attribute(s, hipDeviceAttributeMultiprocessorCount, &s->compute_units);
  hipError_t r;
  if (!st && (r = s->hip->hipDeviceTotalMem(&s->total_memory, s->device)))
    st = hip_fail(r, TSR_ERROR_INIT_FAIL, "querying the GPU (hipDeviceTotalMem)");
  if (st) {
    free(s);
    return st;
  }
  pthread_mutex_init(&s->lock, NULL);
  *out_state = s;
  return TSR_SUCCESS;
}

static void destroy(void* state) {
  hip_state_t* s = state;
  int previous;
  bool entered = enter(s, &previous, "destroying a context") == TSR_SUCCESS;
  for (hip_lane_t* lane = s->idle; lane;) {
    hip_lane_t* next = lane->next;
    s->hip->hipEventDestroy(lane->done);
    s->hip->hipStreamDestroy(lane->stream);
    free(lane);
    lane = next;
  }
  if (entered) leave(s, previous);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

static tsr_status_t limit(void* state, tsr_limit_t which, int64_t* out) {
  hip_state_t* s = state;
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
    case TSR_LIMIT_COMPUTE_UNITS: *out = s->compute_units; return TSR_SUCCESS;
    case TSR_LIMIT_SIMD_WIDTH_BYTES: *out = 0; return TSR_SUCCESS;  /* SIMT lanes, no host vector ISA */
    case TSR_LIMIT_ALLOC_ALIGNMENT: *out = TSR_ALLOC_ALIGNMENT; return TSR_SUCCESS;
    case TSR_LIMIT_TOTAL_MEMORY_BYTES: *out = (int64_t)s->total_memory; return TSR_SUCCESS;
  }
  return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrGetLimit: unknown limit %d", (int)which);
}

static tsr_status_t properties(void* state, tsr_device_properties_t* p) {
  hip_state_t* s = state;
  *p = (tsr_device_properties_t){.warp_size = (uint32_t)s->warp_size, .max_threads_per_block = (uint32_t)s->max_threads,
                                 .max_shared_bytes_per_block = (uint32_t)s->max_smem,
                                 .compute_units = (uint32_t)s->compute_units, .total_memory_bytes = s->total_memory};
  snprintf(p->backend, sizeof p->backend, "hip");
  snprintf(p->name, sizeof p->name, "%s", s->name);
  snprintf(p->arch, sizeof p->arch, "%.31s", s->arch);
  return TSR_SUCCESS;
}

/* ---- code ------------------------------------------------------------------------------------------- */

/* The module's fault record, when it was compiled with bounds checks (device current). */
static tsr_status_t find_checks(hip_state_t* s, hip_code_t* code, const char* section) {
  size_t record_bytes = 0, sites_bytes = 0;
  hipError_t r = s->hip->hipModuleGetGlobal(&code->record, &record_bytes, code->module, TSR_GPU_FAULT_RECORD);
  if (r == hipErrorNotFound) {
    code->record = NULL;
    return s->debug ? tsr_fail(TSR_ERROR_UNSUPPORTED, "debug mode (TESSERA_DEBUG) checks every tensor access, and "
                               "the code object of section %s was compiled without bounds checks: compile it with "
                               "TESSERA_DEBUG=1 set, tessera-cc --gpu-bounds-checks or "
                               "CompileOptions(gpu_bounds_checks=True)", section)
                    : TSR_SUCCESS;
  }
  if (!r) r = s->hip->hipModuleGetGlobal(&code->sites, &sites_bytes, code->module, TSR_GPU_FAULT_SITES);
  if (r || !tsr_gpu_fault_sizes_ok(record_bytes, sites_bytes))
    return tsr_fail(TSR_ERROR_BAD_IMAGE, "section %s: the bounds checks' globals %s (%zu bytes) and %s (%zu bytes) "
                    "are not what the compiler writes (16 bytes; 1 byte to 16 MiB)", section, TSR_GPU_FAULT_RECORD,
                    record_bytes, TSR_GPU_FAULT_SITES, sites_bytes);
  code->sites_bytes = sites_bytes;
  return TSR_SUCCESS;
}

static tsr_status_t code_load(void* state, const uint8_t* bytes, size_t size, const char* section, void** out) {
  hip_state_t* s = state;
  hip_code_t* code = calloc(1, sizeof *code);
  void* image = malloc(size ? size : 1);
  if (!code || !image) {
    free(code);
    free(image);
    return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory loading section %s", section);
  }
  memcpy(image, bytes, size);
  int previous;
  tsr_status_t st = enter(s, &previous, "loading a code object");
  if (st) {
    free(code);
    free(image);
    return st;
  }
  hipError_t r = s->hip->hipModuleLoadData(&code->module, image);
  if (!r && (st = find_checks(s, code, section))) s->hip->hipModuleUnload(code->module);
  leave(s, previous);
  if (st) {
    free(code);
    free(image);
    return st;
  }
  if (r) {
    free(code);
    free(image);
    char why[256];
    tsr_hip_describe(r, why, sizeof why);
    return tsr_fail(tsr_gpu_status(r, TSR_ERROR_BAD_IMAGE), "the HIP runtime could not load the code object of "
                    "section %s on %s (%s): %s", section, s->name, s->arch, why);
  }
  code->state = s;
  code->image = image;
  if (code->record) {
    pthread_mutex_lock(&s->lock);
    code->next = s->checked;
    if (code->next) code->next->prev = code;
    s->checked = code;
    pthread_mutex_unlock(&s->lock);
  }
  *out = code;
  return TSR_SUCCESS;
}

static bool code_entry(void* code_ptr, const char* symbol, const void** out) {
  hip_code_t* code = code_ptr;
  int previous;
  if (enter(code->state, &previous, "looking up a kernel")) return false;
  hipFunction_t f;
  hipError_t r = code->state->hip->hipModuleGetFunction(&f, code->module, symbol);
  leave(code->state, previous);
  if (r) return false;
  *out = (const void*)f;
  return true;
}

static void code_unload(void* code_ptr) {
  hip_code_t* code = code_ptr;
  hip_state_t* s = code->state;
  if (code->record) {
    pthread_mutex_lock(&s->lock);
    if (code->prev) code->prev->next = code->next;
    else s->checked = code->next;
    if (code->next) code->next->prev = code->prev;
    pthread_mutex_unlock(&s->lock);
  }
  int previous;
  if (!enter(code->state, &previous, "unloading a module")) {
    code->state->hip->hipModuleUnload(code->module);
    leave(code->state, previous);
  }
  free(code->image);
  free(code);
}

/* ---- memory ----------------------------------------------------------------------------------------- */

static tsr_status_t mem_alloc(void* state, size_t bytes, void** out) {
  hip_state_t* s = state;
  int previous;
  tsr_status_t st = enter(s, &previous, "tsrAlloc");
  if (st) return st;
  void* p = NULL;
  hipError_t r = s->hip->hipMalloc(&p, bytes);  /* 256-byte aligned at least: more than TSR_ALLOC_ALIGNMENT */
  leave(s, previous);
  if (r) return hip_fail(r, TSR_ERROR_OUT_OF_MEMORY, "tsrAlloc: hipMalloc");
  if ((uintptr_t)p % TSR_ALLOC_ALIGNMENT) {
    s->hip->hipFree(p);
    return tsr_fail(TSR_ERROR_UNSUPPORTED, "tsrAlloc: hipMalloc returned %p, not %d-byte aligned", p,
                    TSR_ALLOC_ALIGNMENT);
  }
  *out = p;
  return TSR_SUCCESS;
}

static void mem_free(void* state, void* ptr) {
  hip_state_t* s = state;
  int previous;
  if (enter(s, &previous, "tsrFree")) return;
  s->hip->hipFree(ptr);
  leave(s, previous);
}

static tsr_status_t copy(void* state, void* dst, const void* src, size_t bytes, tsr_memcpy_kind_t kind) {
  hip_state_t* s = state;
  if (kind == TSR_MEMCPY_HOST_TO_HOST) {
    memmove(dst, src, bytes);
    return TSR_SUCCESS;
  }
  int hip_kind;
  switch (kind) {
    case TSR_MEMCPY_HOST_TO_DEVICE: hip_kind = hipMemcpyHostToDevice; break;
    case TSR_MEMCPY_DEVICE_TO_HOST: hip_kind = hipMemcpyDeviceToHost; break;
    case TSR_MEMCPY_DEVICE_TO_DEVICE: hip_kind = hipMemcpyDeviceToDevice; break;
    default: hip_kind = hipMemcpyDefault; break;  /* unified addressing tells the sides apart */
  }
  int previous;
  tsr_status_t st = enter(s, &previous, "tsrMemcpy");
  if (st) return st;
  hipError_t r = s->hip->hipMemcpy(dst, src, bytes, hip_kind);
  leave(s, previous);
  return r ? hip_fail(r, TSR_ERROR_INVALID_VALUE, "tsrMemcpy: hipMemcpy") : TSR_SUCCESS;
}

/* ---- launches --------------------------------------------------------------------------------------- */

/* An idle lane, or a new one; the device is current. */
static tsr_status_t take_lane(hip_state_t* s, hip_lane_t** out) {
  pthread_mutex_lock(&s->lock);
  hip_lane_t* lane = s->idle;
  if (lane) s->idle = lane->next;
  pthread_mutex_unlock(&s->lock);
  if (lane) {
    *out = lane;
    return TSR_SUCCESS;
  }
  lane = calloc(1, sizeof *lane);
  if (!lane) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory for a HIP stream");
  hipError_t r = s->hip->hipStreamCreateWithFlags(&lane->stream, hipStreamNonBlocking);
  if (r) {
    free(lane);
    return hip_fail(r, TSR_ERROR_LAUNCH_FAILED, "tsrLaunch: hipStreamCreateWithFlags");
  }
  r = s->hip->hipEventCreateWithFlags(&lane->done, hipEventBlockingSync | hipEventDisableTiming);
  if (r) {
    s->hip->hipStreamDestroy(lane->stream);
    free(lane);
    return hip_fail(r, TSR_ERROR_LAUNCH_FAILED, "tsrLaunch: hipEventCreateWithFlags");
  }
  *out = lane;
  return TSR_SUCCESS;
}

static void give_lane(hip_state_t* s, hip_lane_t* lane) {
  pthread_mutex_lock(&s->lock);
  lane->next = s->idle;
  s->idle = lane;
  pthread_mutex_unlock(&s->lock);
}

/* A failed bounds check, as read back from a checked module's record. */
typedef struct hip_failure {
  hipFunction_t function;  /* the kernel, NULL if the module does not name it */
  uint32_t block[3];
  char kernel[128], report[400];
} hip_failure_t;

/* After a launch has finished (device current): whether a checked module recorded a failure, then cleared. */
static bool poll_checks(hip_state_t* s, hip_failure_t* out) {
  bool failed = false;
  pthread_mutex_lock(&s->lock);
  for (hip_code_t* c = s->checked; c && !failed; c = c->next) {
    uint32_t record[4];
    if (s->hip->hipMemcpy(record, c->record, sizeof record, hipMemcpyDeviceToHost) || !record[0]) continue;
    static const uint32_t clear[4];
    s->hip->hipMemcpy(c->record, clear, sizeof clear, hipMemcpyHostToDevice);
    memcpy(out->block, record + 1, sizeof out->block);
    char* table = malloc(c->sites_bytes);
    bool read = table && !s->hip->hipMemcpy(table, c->sites, c->sites_bytes, hipMemcpyDeviceToHost);
    bool found = tsr_gpu_fault_site(read ? table : NULL, c->sites_bytes, record[0] - 1, out->kernel,
                                    sizeof out->kernel, out->report, sizeof out->report);
    free(table);
    if (!found || s->hip->hipModuleGetFunction(&out->function, c->module, out->kernel)) out->function = NULL;
    failed = true;
  }
  pthread_mutex_unlock(&s->lock);
  return failed;
}

static tsr_status_t launch(void* state, const tsr_backend_launch_t* l, tsr_fault_t* fault) {
  /* GPU faults come back as HIP errors (or end the process), not as caught signals; failed bounds checks as
   * fault.report */
  hip_state_t* s = state;
  for (int i = 0; i < 3; i++) {
    if (l->block[i] > (uint32_t)s->max_block[i] || l->grid[i] > (uint32_t)s->max_grid[i])
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "grid (%u, %u, %u) of blocks (%u, %u, %u) exceeds %s's limits: "
                      "grid (%d, %d, %d), block (%d, %d, %d)", l->grid[0], l->grid[1], l->grid[2], l->block[0],
                      l->block[1], l->block[2], s->name, s->max_grid[0], s->max_grid[1], s->max_grid[2],
                      s->max_block[0], s->max_block[1], s->max_block[2]);
  }
  int previous;
  tsr_status_t st = enter(s, &previous, "tsrLaunch");
  if (st) return st;
  hip_lane_t* lane;
  if ((st = take_lane(s, &lane))) {
    leave(s, previous);
    return st;
  }
  const char* step = "hipModuleLaunchKernel";
  hipError_t r = s->hip->hipModuleLaunchKernel((hipFunction_t)l->entry, l->grid[0], l->grid[1], l->grid[2],
                                               l->block[0], l->block[1], l->block[2], l->smem_bytes, lane->stream,
                                               l->args, NULL);
  if (!r && (r = s->hip->hipEventRecord(lane->done, lane->stream))) step = "hipEventRecord";
  if (!r && (r = s->hip->hipEventSynchronize(lane->done))) step = "hipEventSynchronize";
  give_lane(s, lane);
  hip_failure_t f;
  bool failed = !r && poll_checks(s, &f);
  leave(s, previous);
  if (failed) return tsr_gpu_fault_of_launch(f.function == (hipFunction_t)l->entry, f.kernel, f.report, f.block,
                                             fault);
  if (!r) return TSR_SUCCESS;
  char why[256];
  tsr_hip_describe(r, why, sizeof why);
  return tsr_fail(tsr_gpu_status(r, TSR_ERROR_LAUNCH_FAILED), "the kernel failed on %s (%s): %s%s", s->name, step,
                  why, tsr_gpu_sticky(r) ? "; the GPU cannot be used again in this process" : "");
}

const tsr_backend_t tsr_hip_backend = {
    .name = "hip",
    .target = "amdgpu",
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
