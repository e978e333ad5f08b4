/* level_zero_backend.c — the Level Zero backend's table (backend.h): kernels of `target: spirv`, built by the
 * Level Zero driver (dlopen()ed through its loader, level_zero_driver.h) from the image's SPIR-V modules.
 *
 * A context uses the first GPU of the first driver that has one, in a Level Zero context of its own.
 *
 * The table's contract is that an operation runs to completion. Each launch and copy goes to a "lane": a
 * command queue (asynchronous, of the device's first compute queue group) with a command list and a
 * host-visible event. The command is appended with the event to signal, the list closed and executed, the
 * event waited for from the host, then event and list reset for the lane's next use. Lanes are taken from
 * the context's idle ones (or made), so launches of different Tessera streams, which run on different
 * executor threads (stream.c), go to different queues and overlap on the GPU; one queue is never used by two
 * threads at once, which Level Zero forbids.
 *
 * Kernel arguments are state of a Level Zero kernel object: a launch sets them (sizes from the kernel's
 * argument descriptions: tensors are 8-byte device pointers, OpenCL `__global T*`) and the group size, and
 * appends the launch, under the kernel's lock, since the values are captured when the launch is appended.
 *
 * Every ze_result_t becomes a status with the result's name and description; a module that does not build
 * also reports the driver's build log. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "errors.h"
#include "gpu_fault.h"
#include "launch.h"
#include "level_zero_driver.h"

typedef struct ze_lane {
  tsr_ze_queue_t queue;
  tsr_ze_list_t list;
  tsr_ze_event_pool_t pool;
  tsr_ze_event_t done;
  struct ze_lane* next;
} ze_lane_t;

typedef struct ze_state {
  const tsr_ze_driver_api_t* ze;
  bool debug;  /* debug mode: only checked code loads (gpu_fault.h) */
  const tsr_ze_gpu_t* gpu;
  tsr_ze_context_t context;
  uint32_t ordinal;  /* the compute queue group */
  uint64_t total_memory;
  uint32_t warp_size;
  pthread_mutex_t lock;  /* guards `idle` */
  ze_lane_t* idle;
} ze_state_t;

/* One kernel of a module: what code_entry hands out. */
typedef struct ze_entry {
  tsr_ze_kernel_t kernel;
  pthread_mutex_t lock;  /* arguments and group size are the kernel object's state */
  const struct ze_code* code;
  struct ze_entry* next;
} ze_entry_t;

typedef struct ze_code {
  ze_state_t* state;
  tsr_ze_module_t module;
  bool checked;        /* compiled with bounds checks: its kernels take the fault record last (gpu_fault.h) */
  char* sites;         /* its site table */
  size_t sites_bytes;
  pthread_mutex_t lock;  /* guards `entries` */
  ze_entry_t* entries;
} ze_code_t;

/* ---- errors ----------------------------------------------------------------------------------------- */

static tsr_status_t status_of(tsr_ze_result_t r, tsr_status_t otherwise) {
  switch (r) {
    case 0x70000002:  /* out of host memory */
    case 0x70000003: return TSR_ERROR_OUT_OF_MEMORY;  /* out of device memory */
    case 0x70000001:  /* device lost */
    case 0x70000006: return TSR_ERROR_LAUNCH_FAILED;  /* device requires a reset */
    case 0x70000004:  /* module build failure */
    case 0x70000005:  /* module link failure */
    case 0x7800000f:  /* invalid native binary */
    case 0x78000018: return TSR_ERROR_BAD_IMAGE;  /* module unlinked */
    case 0x78000011: return TSR_ERROR_NOT_FOUND;  /* invalid kernel name */
    case 0x78000001: return TSR_ERROR_INIT_FAIL;  /* uninitialized */
    case 0x78000002:  /* unsupported version */
    case 0x78000003:  /* unsupported feature */
    case 0x78000009:  /* unsupported size */
    case 0x7800000a: return TSR_ERROR_UNSUPPORTED;  /* unsupported alignment */
    case 0x78000004:  /* invalid argument */
    case 0x78000008:  /* invalid size */
    case 0x78000013:  /* invalid group size dimension */
    case 0x78000015:  /* invalid kernel argument index */
    case 0x78000016: return TSR_ERROR_INVALID_VALUE;  /* invalid kernel argument size */
    default: return otherwise;
  }
}

static tsr_status_t ze_fail(tsr_ze_result_t r, tsr_status_t otherwise, const char* what) {
  char why[256];
  tsr_ze_describe(r, why, sizeof why);
  return tsr_fail(status_of(r, otherwise), "%s: %s", what, why);
}

/* ---- what the device is ----------------------------------------------------------------------------- */

static const char* unavailable(void) {
  const char* why;
  return tsr_ze_driver(&why) ? NULL : why;
}

static bool has_subgroup(const tsr_ze_gpu_t* gpu, uint32_t size) {
  for (uint32_t i = 0; i < gpu->compute.numSubGroupSizes; i++)
    if (gpu->compute.subGroupSizes[i] == size) return true;
  return false;
}

/* Our SPIR-V kernels require subgroups of this size (docs/portability.md, "SPIR-V"). */
enum { KERNEL_SUBGROUP = 32 };

/* "spirv1.3" runs where the driver takes SPIR-V 1.3 or later and the GPU has subgroups of 32. */
static bool runs_arch(const char* arch) {
  const tsr_ze_gpu_t* gpu = tsr_ze_gpu();
  unsigned major, minor;
  char rest;
  if (!gpu || sscanf(arch, "spirv%u.%u%c", &major, &minor, &rest) != 2) return false;
  uint32_t supported = gpu->module.spirvVersionSupported;
  return (major << 16 | minor) <= supported && has_subgroup(gpu, KERNEL_SUBGROUP);
}

static tsr_status_t compute_ordinal(ze_state_t* s) {
  uint32_t count = 0;
  tsr_ze_result_t r = s->ze->zeDeviceGetCommandQueueGroupProperties(s->gpu->device, &count, NULL);
  if (r) return ze_fail(r, TSR_ERROR_INIT_FAIL, "listing the GPU's command queue groups");
  tsr_ze_queue_group_properties_t* groups = calloc(count ? count : 1, sizeof *groups);
  if (!groups) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory creating a context");
  for (uint32_t i = 0; i < count; i++) groups[i].stype = TSR_ZE_STYPE_COMMAND_QUEUE_GROUP_PROPERTIES;
  r = s->ze->zeDeviceGetCommandQueueGroupProperties(s->gpu->device, &count, groups);
  tsr_status_t st = r ? ze_fail(r, TSR_ERROR_INIT_FAIL, "listing the GPU's command queue groups")
                      : tsr_fail(TSR_ERROR_INIT_FAIL, "the GPU %s has no compute queue group", s->gpu->props.name);
  for (uint32_t i = 0; !r && i < count; i++)
    if (groups[i].flags & TSR_ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE) {
      s->ordinal = i;
      st = TSR_SUCCESS;
      break;
    }
  free(groups);
  return st;
}

static tsr_status_t total_memory(ze_state_t* s) {
  uint32_t count = 0;
  tsr_ze_result_t r = s->ze->zeDeviceGetMemoryProperties(s->gpu->device, &count, NULL);
  if (r) return ze_fail(r, TSR_ERROR_INIT_FAIL, "querying the GPU's memory");
  tsr_ze_memory_properties_t* mems = calloc(count ? count : 1, sizeof *mems);
  if (!mems) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory creating a context");
  for (uint32_t i = 0; i < count; i++) mems[i].stype = TSR_ZE_STYPE_DEVICE_MEMORY_PROPERTIES;
  r = s->ze->zeDeviceGetMemoryProperties(s->gpu->device, &count, mems);
  for (uint32_t i = 0; !r && i < count; i++) s->total_memory += mems[i].totalSize;
  free(mems);
  return r ? ze_fail(r, TSR_ERROR_INIT_FAIL, "querying the GPU's memory") : TSR_SUCCESS;
}

static tsr_status_t create(const tsr_context_options_t* options, void** out_state) {
  /* worker threads are a CPU notion; debug mode's guard pages need host memory, its checks checked code */
  const char* why = unavailable();
  if (why) return tsr_fail(TSR_ERROR_UNSUPPORTED, "the Level Zero backend is not available: %s", why);
  ze_state_t* s = calloc(1, sizeof *s);
  if (!s) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory creating a context");
  s->ze = tsr_ze_driver(NULL);
  s->gpu = tsr_ze_gpu();
  s->debug = options->flags & TSR_CONTEXT_DEBUG;
  s->warp_size = has_subgroup(s->gpu, KERNEL_SUBGROUP) ? KERNEL_SUBGROUP : 0;
  tsr_status_t st = compute_ordinal(s);
  if (!st) st = total_memory(s);
  if (!st) {
    tsr_ze_context_desc_t desc = {.stype = TSR_ZE_STYPE_CONTEXT_DESC};
    tsr_ze_result_t r = s->ze->zeContextCreate(s->gpu->driver, &desc, &s->context);
    if (r) st = ze_fail(r, TSR_ERROR_INIT_FAIL, "creating a Level Zero context (zeContextCreate)");
  }
  if (st) {
    free(s);
    return st;
  }
  pthread_mutex_init(&s->lock, NULL);
  *out_state = s;
  return TSR_SUCCESS;
}

static void lane_free(ze_state_t* s, ze_lane_t* lane) {
  if (lane->done) s->ze->zeEventDestroy(lane->done);
  if (lane->pool) s->ze->zeEventPoolDestroy(lane->pool);
  if (lane->list) s->ze->zeCommandListDestroy(lane->list);
  if (lane->queue) s->ze->zeCommandQueueDestroy(lane->queue);
  free(lane);
}

static void destroy(void* state) {
  ze_state_t* s = state;
  for (ze_lane_t* lane = s->idle; lane;) {
    ze_lane_t* next = lane->next;
    lane_free(s, lane);
    lane = next;
  }
  s->ze->zeContextDestroy(s->context);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

static tsr_status_t limit(void* state, tsr_limit_t which, int64_t* out) {
  ze_state_t* s = state;
  const tsr_ze_compute_properties_t* c = &s->gpu->compute;
  const tsr_ze_device_properties_t* p = &s->gpu->props;
  switch (which) {
    case TSR_LIMIT_MAX_THREADS_PER_BLOCK: *out = c->maxTotalGroupSize; return TSR_SUCCESS;
    case TSR_LIMIT_MAX_SHARED_BYTES_PER_BLOCK: *out = c->maxSharedLocalMemory; return TSR_SUCCESS;
    case TSR_LIMIT_WARP_SIZE: *out = s->warp_size; return TSR_SUCCESS;
    case TSR_LIMIT_MAX_BLOCK_DIM_X: *out = c->maxGroupSizeX; return TSR_SUCCESS;
    case TSR_LIMIT_MAX_BLOCK_DIM_Y: *out = c->maxGroupSizeY; return TSR_SUCCESS;
    case TSR_LIMIT_MAX_BLOCK_DIM_Z: *out = c->maxGroupSizeZ; return TSR_SUCCESS;
    case TSR_LIMIT_MAX_GRID_DIM_X: *out = c->maxGroupCountX; return TSR_SUCCESS;
    case TSR_LIMIT_MAX_GRID_DIM_Y: *out = c->maxGroupCountY; return TSR_SUCCESS;
    case TSR_LIMIT_MAX_GRID_DIM_Z: *out = c->maxGroupCountZ; return TSR_SUCCESS;
    case TSR_LIMIT_COMPUTE_UNITS:  /* execution units, as OpenCL counts Intel's compute units */
      *out = (int64_t)p->numSlices * p->numSubslicesPerSlice * p->numEUsPerSubslice;
      return TSR_SUCCESS;
    case TSR_LIMIT_SIMD_WIDTH_BYTES: *out = 0; return TSR_SUCCESS;  /* SIMT lanes, no host vector ISA */
    case TSR_LIMIT_ALLOC_ALIGNMENT: *out = TSR_ALLOC_ALIGNMENT; return TSR_SUCCESS;
    case TSR_LIMIT_TOTAL_MEMORY_BYTES: *out = (int64_t)s->total_memory; return TSR_SUCCESS;
  }
  return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrGetLimit: unknown limit %d", (int)which);
}

static tsr_status_t properties(void* state, tsr_device_properties_t* out) {
  ze_state_t* s = state;
  int64_t units;
  limit(s, TSR_LIMIT_COMPUTE_UNITS, &units);
  const tsr_ze_compute_properties_t* c = &s->gpu->compute;
  *out = (tsr_device_properties_t){.warp_size = s->warp_size, .max_threads_per_block = c->maxTotalGroupSize,
                                   .max_shared_bytes_per_block = c->maxSharedLocalMemory,
                                   .compute_units = (uint32_t)units, .total_memory_bytes = s->total_memory};
  snprintf(out->backend, sizeof out->backend, "level_zero");
  snprintf(out->name, sizeof out->name, "%.127s", s->gpu->props.name);
  uint32_t v = s->gpu->module.spirvVersionSupported;
  snprintf(out->arch, sizeof out->arch, "spirv%u.%u", v >> 16, v & 0xffff);
  return TSR_SUCCESS;
}

/* ---- code ------------------------------------------------------------------------------------------- */

static tsr_status_t code_load(void* state, const uint8_t* bytes, size_t size, const char* section, void** out) {
  ze_state_t* s = state;
  bool checked;
  char* sites;
  size_t sites_bytes;
  tsr_status_t st = tsr_gpu_fault_spirv_load(bytes, size, section, s->debug, &checked, &sites, &sites_bytes);
  if (st) return st;
  ze_code_t* code = calloc(1, sizeof *code);
  if (!code) {
    free(sites);
    return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory loading section %s", section);
  }
  code->checked = checked;
  code->sites = sites;
  code->sites_bytes = sites_bytes;
  tsr_ze_module_desc_t desc = {.stype = TSR_ZE_STYPE_MODULE_DESC, .format = TSR_ZE_MODULE_FORMAT_IL_SPIRV,
                               .inputSize = size, .pInputModule = bytes, .pBuildFlags = ""};
  tsr_ze_build_log_t log = NULL;
  tsr_ze_result_t r = s->ze->zeModuleCreate(s->context, s->gpu->device, &desc, &code->module, &log);
  if (!r) {
    if (log) s->ze->zeModuleBuildLogDestroy(log);
    pthread_mutex_init(&code->lock, NULL);
    code->state = s;
    *out = code;
    return TSR_SUCCESS;
  }
  free(code->sites);
  free(code);
  char text[2048] = "";
  size_t n = 0;
  if (log && !s->ze->zeModuleBuildLogGetString(log, &n, NULL) && n > 0 && n <= sizeof text)
    s->ze->zeModuleBuildLogGetString(log, &n, text);
  text[sizeof text - 1] = 0;
  if (log) s->ze->zeModuleBuildLogDestroy(log);
  char why[256];
  tsr_ze_describe(r, why, sizeof why);
  return tsr_fail(status_of(r, TSR_ERROR_BAD_IMAGE), "the Level Zero driver could not build the SPIR-V of section %s "
                  "for %s: %s%s%s", section, s->gpu->props.name, why, text[0] ? "; build log: " : "", text);
}

static bool code_entry(void* code_ptr, const char* symbol, const void** out) {
  ze_code_t* code = code_ptr;
  ze_entry_t* e = calloc(1, sizeof *e);
  if (!e) return false;
  tsr_ze_kernel_desc_t desc = {.stype = TSR_ZE_STYPE_KERNEL_DESC, .pKernelName = symbol};
  if (code->state->ze->zeKernelCreate(code->module, &desc, &e->kernel)) {
    free(e);
    return false;
  }
  e->code = code;
  pthread_mutex_init(&e->lock, NULL);
  pthread_mutex_lock(&code->lock);
  e->next = code->entries;
  code->entries = e;
  pthread_mutex_unlock(&code->lock);
  *out = e;
  return true;
}

static void code_unload(void* code_ptr) {
  ze_code_t* code = code_ptr;
  for (ze_entry_t* e = code->entries; e;) {
    ze_entry_t* next = e->next;
    code->state->ze->zeKernelDestroy(e->kernel);
    pthread_mutex_destroy(&e->lock);
    free(e);
    e = next;
  }
  code->state->ze->zeModuleDestroy(code->module);
  pthread_mutex_destroy(&code->lock);
  free(code->sites);
  free(code);
}

/* ---- lanes ------------------------------------------------------------------------------------------ */

static tsr_status_t lane_make(ze_state_t* s, ze_lane_t** out) {
  ze_lane_t* lane = calloc(1, sizeof *lane);
  if (!lane) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory for a Level Zero command queue");
  tsr_ze_queue_desc_t qd = {.stype = TSR_ZE_STYPE_COMMAND_QUEUE_DESC, .ordinal = s->ordinal,
                            .mode = TSR_ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS};
  tsr_ze_list_desc_t ld = {.stype = TSR_ZE_STYPE_COMMAND_LIST_DESC, .commandQueueGroupOrdinal = s->ordinal};
  tsr_ze_event_pool_desc_t pd = {.stype = TSR_ZE_STYPE_EVENT_POOL_DESC, .flags = TSR_ZE_EVENT_POOL_FLAG_HOST_VISIBLE,
                                 .count = 1};
  tsr_ze_event_desc_t ed = {.stype = TSR_ZE_STYPE_EVENT_DESC, .index = 0, .signal = TSR_ZE_EVENT_SCOPE_FLAG_HOST,
                            .wait = TSR_ZE_EVENT_SCOPE_FLAG_HOST};
  tsr_ze_device_t device = s->gpu->device;
  const char* step = "zeCommandQueueCreate";
  tsr_ze_result_t r = s->ze->zeCommandQueueCreate(s->context, device, &qd, &lane->queue);
  if (!r && (r = s->ze->zeCommandListCreate(s->context, device, &ld, &lane->list))) step = "zeCommandListCreate";
  if (!r && (r = s->ze->zeEventPoolCreate(s->context, &pd, 1, &device, &lane->pool))) step = "zeEventPoolCreate";
  if (!r && (r = s->ze->zeEventCreate(lane->pool, &ed, &lane->done))) step = "zeEventCreate";
  if (r) {
    lane_free(s, lane);
    char what[96];
    snprintf(what, sizeof what, "preparing a command queue (%s)", step);
    return ze_fail(r, TSR_ERROR_LAUNCH_FAILED, what);
  }
  *out = lane;
  return TSR_SUCCESS;
}

static tsr_status_t lane_take(ze_state_t* s, ze_lane_t** out) {
  pthread_mutex_lock(&s->lock);
  ze_lane_t* lane = s->idle;
  if (lane) s->idle = lane->next;
  pthread_mutex_unlock(&s->lock);
  if (lane) {
    *out = lane;
    return TSR_SUCCESS;
  }
  return lane_make(s, out);
}

static void lane_give(ze_state_t* s, ze_lane_t* lane) {
  pthread_mutex_lock(&s->lock);
  lane->next = s->idle;
  s->idle = lane;
  pthread_mutex_unlock(&s->lock);
}

/* Runs what was appended to the lane's list (signalling its event) to completion and readies the lane for its
 * next use; `what` names the operation for messages. */
static tsr_status_t lane_run(ze_state_t* s, ze_lane_t* lane, const char* what) {
  const char* step = "zeCommandListClose";
  tsr_ze_result_t r = s->ze->zeCommandListClose(lane->list);
  if (!r && (r = s->ze->zeCommandQueueExecuteCommandLists(lane->queue, 1, &lane->list, NULL)))
    step = "zeCommandQueueExecuteCommandLists";
  if (!r && (r = s->ze->zeEventHostSynchronize(lane->done, UINT64_MAX))) step = "zeEventHostSynchronize";
  tsr_ze_result_t reset = s->ze->zeEventHostReset(lane->done);
  if (!reset) reset = s->ze->zeCommandListReset(lane->list);
  if (r) {
    char full[512];
    snprintf(full, sizeof full, "%s on %s (%s)", what, s->gpu->props.name, step);
    return ze_fail(r, TSR_ERROR_LAUNCH_FAILED, full);
  }
  if (reset) return ze_fail(reset, TSR_ERROR_LAUNCH_FAILED, "resetting a command list after its work");
  return TSR_SUCCESS;
}

/* ---- memory ----------------------------------------------------------------------------------------- */

static tsr_status_t mem_alloc(void* state, size_t bytes, void** out) {
  ze_state_t* s = state;
  tsr_ze_mem_alloc_desc_t desc = {.stype = TSR_ZE_STYPE_DEVICE_MEM_ALLOC_DESC};
  void* p = NULL;
  tsr_ze_result_t r = s->ze->zeMemAllocDevice(s->context, &desc, bytes, TSR_ALLOC_ALIGNMENT, s->gpu->device, &p);
  if (r) return ze_fail(r, TSR_ERROR_OUT_OF_MEMORY, "tsrAlloc: zeMemAllocDevice");
  *out = p;
  return TSR_SUCCESS;
}

static void mem_free(void* state, void* ptr) {
  ze_state_t* s = state;
  s->ze->zeMemFree(s->context, ptr);
}

/* One copy on a lane; the ranges do not overlap. */
static tsr_status_t copy_once(ze_state_t* s, void* dst, const void* src, size_t bytes) {
  ze_lane_t* lane;
  tsr_status_t st = lane_take(s, &lane);
  if (st) return st;
  tsr_ze_result_t r = s->ze->zeCommandListAppendMemoryCopy(lane->list, dst, src, bytes, lane->done, 0, NULL);
  if (r) {
    s->ze->zeCommandListReset(lane->list);
    lane_give(s, lane);
    return ze_fail(r, TSR_ERROR_INVALID_VALUE, "tsrMemcpy: zeCommandListAppendMemoryCopy");
  }
  st = lane_run(s, lane, "tsrMemcpy");
  lane_give(s, lane);
  return st;
}

static tsr_status_t copy(void* state, void* dst, const void* src, size_t bytes, tsr_memcpy_kind_t kind) {
  ze_state_t* s = state;
  if (kind == TSR_MEMCPY_HOST_TO_HOST) {
    memmove(dst, src, bytes);
    return TSR_SUCCESS;
  }
  uintptr_t d = (uintptr_t)dst, o = (uintptr_t)src;
  if (d + bytes <= o || o + bytes <= d) return copy_once(s, dst, src, bytes);
  /* Level Zero refuses overlapping copies (ZE_RESULT_ERROR_OVERLAPPING_REGIONS); the table promises memmove:
   * go through a temporary device buffer. */
  void* tmp = NULL;
  tsr_status_t st = mem_alloc(s, bytes, &tmp);
  if (!st) st = copy_once(s, tmp, src, bytes);
  if (!st) st = copy_once(s, dst, tmp, bytes);
  if (tmp) mem_free(s, tmp);
  return st;
}

/* ---- launches --------------------------------------------------------------------------------------- */

/* The fault record of a checked kernel's launch, after it: TSR_ERROR_MEMORY_FAULT naming its failed check. */
static tsr_status_t fault_of(ze_state_t* s, const ze_entry_t* e, const uint32_t* record_dev, tsr_fault_t* fault) {
  uint32_t record[TSR_GPU_FAULT_SPIRV_BYTES / 4];
  tsr_status_t st = copy(s, record, record_dev, sizeof record, TSR_MEMCPY_DEVICE_TO_HOST);
  return st ? st : tsr_gpu_fault_of_record(record, e->code->sites, e->code->sites_bytes, fault);
}

/* A launch of a checked kernel: its own zeroed fault record, so that concurrent launches keep theirs apart. */
static tsr_status_t fault_record(ze_state_t* s, uint32_t** out) {
  static const uint32_t zero[TSR_GPU_FAULT_SPIRV_BYTES / 4];
  *out = NULL;
  tsr_status_t st = mem_alloc(s, sizeof zero, (void**)out);
  if (!st) st = copy(s, *out, zero, sizeof zero, TSR_MEMCPY_HOST_TO_DEVICE);
  if (st && *out) {
    mem_free(s, *out);
    *out = NULL;
  }
  return st;
}

static tsr_status_t launch(void* state, const tsr_backend_launch_t* l, tsr_fault_t* fault) {
  ze_state_t* s = state;
  ze_entry_t* e = (ze_entry_t*)l->entry;
  const tsr_ze_compute_properties_t* c = &s->gpu->compute;
  const uint32_t max_block[3] = {c->maxGroupSizeX, c->maxGroupSizeY, c->maxGroupSizeZ};
  const uint32_t max_grid[3] = {c->maxGroupCountX, c->maxGroupCountY, c->maxGroupCountZ};
  for (int i = 0; i < 3; i++)
    if (l->block[i] > max_block[i] || l->grid[i] > max_grid[i])
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "grid (%u, %u, %u) of blocks (%u, %u, %u) exceeds %s's limits: "
                      "grid (%u, %u, %u), block (%u, %u, %u)", l->grid[0], l->grid[1], l->grid[2], l->block[0],
                      l->block[1], l->block[2], s->gpu->props.name, max_grid[0], max_grid[1], max_grid[2],
                      max_block[0], max_block[1], max_block[2]);
  if (l->smem_bytes)  /* a SPIR-V kernel's shared memory is declared in it; a dynamic amount would be a
                       * `local` pointer argument, which our kernels do not take */
    return tsr_fail(TSR_ERROR_UNSUPPORTED, "the Level Zero backend takes no dynamic shared memory (%u bytes asked)",
                    l->smem_bytes);
  uint32_t* record = NULL;
  tsr_status_t st = e->code->checked ? fault_record(s, &record) : TSR_SUCCESS;
  if (st) return st;
  ze_lane_t* lane;
  st = lane_take(s, &lane);
  if (st) {
    if (record) mem_free(s, record);
    return st;
  }
  tsr_ze_group_count_t groups = {l->grid[0], l->grid[1], l->grid[2]};
  char what[96] = "zeKernelSetGroupSize";
  pthread_mutex_lock(&e->lock);
  tsr_ze_result_t r = s->ze->zeKernelSetGroupSize(e->kernel, l->block[0], l->block[1], l->block[2]);
  for (size_t i = 0; !r && i < l->nargs; i++)
    if ((r = s->ze->zeKernelSetArgumentValue(e->kernel, (uint32_t)i, tsr_arg_value_size(&l->arg_info[i]), l->args[i])))
      snprintf(what, sizeof what, "zeKernelSetArgumentValue of argument %zu ('%s')", i, l->arg_info[i].name);
  if (!r && record && (r = s->ze->zeKernelSetArgumentValue(e->kernel, (uint32_t)l->nargs, sizeof record, &record)))
    snprintf(what, sizeof what, "zeKernelSetArgumentValue of the fault record");
  if (!r && (r = s->ze->zeCommandListAppendLaunchKernel(lane->list, e->kernel, &groups, lane->done, 0, NULL)))
    snprintf(what, sizeof what, "zeCommandListAppendLaunchKernel");
  pthread_mutex_unlock(&e->lock);
  if (r) {
    s->ze->zeCommandListReset(lane->list);
    lane_give(s, lane);
    if (record) mem_free(s, record);
    char full[512];
    snprintf(full, sizeof full, "the kernel could not be launched on %s (%s)", s->gpu->props.name, what);
    return ze_fail(r, TSR_ERROR_LAUNCH_FAILED, full);
  }
  st = lane_run(s, lane, "the kernel failed");
  lane_give(s, lane);
  if (record) {
    if (!st) st = fault_of(s, e, record, fault);
    mem_free(s, record);
  }
  return st;
}

const tsr_backend_t tsr_level_zero_backend = {
    .name = "level_zero",
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
