/* mock_level_zero.c — a fake libze_loader for testing libtessera's Level Zero loader
 * (runtime/src/level_zero_*.c) where there is no Intel GPU: it exports the core entry points the loader
 * resolves, logs each call (mock_common.h), fails on request, and keeps "device" memory on the host.
 *
 * It checks what a real driver would: zeModuleCreate takes SPIR-V (the magic number, format IL_SPIRV) and
 * zeKernelCreate finds the kernel among the module's OpEntryPoint names; descriptors carry their stype;
 * a command list takes no commands once closed and runs them only when executed on a queue; an event is
 * signalled by the work that names it and must be reset before reuse. Kernel arguments are captured when a
 * launch is appended, as Level Zero specifies. The GPU is described by MOCK_ZE_SUBGROUPS (default "8,16,32")
 * and MOCK_ZE_SPIRV (default 0x10004, SPIR-V 1.4); MOCK_ZE_GPUS=0 makes it a driver with a CPU device only.
 * Its first command queue group copies only; the second computes. */
#include <stdatomic.h>
#include <stdbool.h>

#include "../../../runtime/src/level_zero_driver.h"
#include "mock_common.h"

#define EXPORT __attribute__((visibility("default")))

#define FAIL_IF_ASKED(fn)                    \
  do {                                       \
    long code_ = mock_fail(fn);              \
    if (code_) {                             \
      mock_log("%s -> 0x%lx", fn, code_);    \
      return (tsr_ze_result_t)code_;         \
    }                                        \
  } while (0)

#define CHECK_STYPE(desc, want)                                       \
  do {                                                                \
    if ((desc)->stype != (want)) {                                    \
      mock_log("%s: stype %u, want %u", __func__, (desc)->stype, (unsigned)(want)); \
      return 0x78000004; /* invalid argument */                       \
    }                                                                 \
  } while (0)

static struct _ze_driver_handle_t {
  int unused;
} the_driver;
static struct _ze_device_handle_t {
  int unused;
} the_device;

EXPORT tsr_ze_result_t zeInit(uint32_t flags) {
  FAIL_IF_ASKED("zeInit");
  mock_log("zeInit flags=%u", flags);
  return 0;
}

EXPORT tsr_ze_result_t zeDriverGet(uint32_t* count, tsr_ze_driver_t* drivers) {
  FAIL_IF_ASKED("zeDriverGet");
  if (drivers && *count >= 1) drivers[0] = &the_driver;
  *count = 1;
  return 0;
}

EXPORT tsr_ze_result_t zeDeviceGet(tsr_ze_driver_t driver, uint32_t* count, tsr_ze_device_t* devices) {
  FAIL_IF_ASKED("zeDeviceGet");
  if (driver != &the_driver) return 0x78000005;
  if (devices && *count >= 1) devices[0] = &the_device;
  *count = 1;
  return 0;
}

static bool has_gpu(void) {
  const char* v = getenv("MOCK_ZE_GPUS");
  return !(v && strcmp(v, "0") == 0);
}

EXPORT tsr_ze_result_t zeDeviceGetProperties(tsr_ze_device_t device, tsr_ze_device_properties_t* p) {
  FAIL_IF_ASKED("zeDeviceGetProperties");
  CHECK_STYPE(p, TSR_ZE_STYPE_DEVICE_PROPERTIES);
  if (device != &the_device) return 0x78000005;
  p->type = has_gpu() ? TSR_ZE_DEVICE_TYPE_GPU : 2 /* CPU */;
  p->vendorId = 0x8086;
  p->numSlices = 4;
  p->numSubslicesPerSlice = 8;
  p->numEUsPerSubslice = 16;
  p->maxMemAllocSize = (uint64_t)4 << 30;
  snprintf(p->name, sizeof p->name, "Mock Intel Data Center GPU");
  return 0;
}

EXPORT tsr_ze_result_t zeDeviceGetComputeProperties(tsr_ze_device_t device, tsr_ze_compute_properties_t* c) {
  FAIL_IF_ASKED("zeDeviceGetComputeProperties");
  CHECK_STYPE(c, TSR_ZE_STYPE_COMPUTE_PROPERTIES);
  (void)device;
  c->maxTotalGroupSize = 1024;
  c->maxGroupSizeX = c->maxGroupSizeY = c->maxGroupSizeZ = 1024;
  c->maxGroupCountX = c->maxGroupCountY = c->maxGroupCountZ = 0xffffffff;
  c->maxSharedLocalMemory = 128 << 10;
  const char* sizes = getenv("MOCK_ZE_SUBGROUPS");
  c->numSubGroupSizes = 0;
  for (const char* p = sizes && *sizes ? sizes : "8,16,32"; p && *p && c->numSubGroupSizes < 8;) {
    c->subGroupSizes[c->numSubGroupSizes++] = (uint32_t)strtoul(p, NULL, 10);
    p = strchr(p, ',');
    if (p) p++;
  }
  return 0;
}

EXPORT tsr_ze_result_t zeDeviceGetModuleProperties(tsr_ze_device_t device, tsr_ze_module_properties_t* m) {
  FAIL_IF_ASKED("zeDeviceGetModuleProperties");
  CHECK_STYPE(m, TSR_ZE_STYPE_DEVICE_MODULE_PROPERTIES);
  (void)device;
  const char* v = getenv("MOCK_ZE_SPIRV");
  m->spirvVersionSupported = v && *v ? (uint32_t)strtoul(v, NULL, 0) : 0x10004;
  return 0;
}

EXPORT tsr_ze_result_t zeDeviceGetMemoryProperties(tsr_ze_device_t device, uint32_t* count,
                                                   tsr_ze_memory_properties_t* out) {
  FAIL_IF_ASKED("zeDeviceGetMemoryProperties");
  (void)device;
  if (out)
    for (uint32_t i = 0; i < *count && i < 2; i++) {
      CHECK_STYPE(&out[i], TSR_ZE_STYPE_DEVICE_MEMORY_PROPERTIES);
      out[i].totalSize = (uint64_t)32 << 30;  /* two HBM stacks of 32 GiB */
    }
  *count = 2;
  return 0;
}

EXPORT tsr_ze_result_t zeDeviceGetCommandQueueGroupProperties(tsr_ze_device_t device, uint32_t* count,
                                                              tsr_ze_queue_group_properties_t* out) {
  FAIL_IF_ASKED("zeDeviceGetCommandQueueGroupProperties");
  (void)device;
  if (out && *count >= 2) {
    CHECK_STYPE(&out[0], TSR_ZE_STYPE_COMMAND_QUEUE_GROUP_PROPERTIES);
    out[0].flags = 2;      /* COPY only */
    out[0].numQueues = 2;
    out[1].flags = 1 | 2;  /* COMPUTE | COPY */
    out[1].numQueues = 4;
  }
  *count = 2;
  return 0;
}

/* ---- context, queues, lists, events ---- */

static atomic_int next_id = 1;

struct _ze_context_handle_t {
  int id;
};

EXPORT tsr_ze_result_t zeContextCreate(tsr_ze_driver_t driver, const tsr_ze_context_desc_t* desc, tsr_ze_context_t* out) {
  FAIL_IF_ASKED("zeContextCreate");
  CHECK_STYPE(desc, TSR_ZE_STYPE_CONTEXT_DESC);
  if (driver != &the_driver) return 0x78000005;
  *out = calloc(1, sizeof **out);
  (*out)->id = next_id++;
  mock_log("zeContextCreate -> C%d", (*out)->id);
  return 0;
}

EXPORT tsr_ze_result_t zeContextDestroy(tsr_ze_context_t c) {
  mock_log("zeContextDestroy C%d", c->id);
  free(c);
  return 0;
}

struct _ze_command_queue_handle_t {
  int id;
};

EXPORT tsr_ze_result_t zeCommandQueueCreate(tsr_ze_context_t ctx, tsr_ze_device_t dev, const tsr_ze_queue_desc_t* desc,
                                            tsr_ze_queue_t* out) {
  FAIL_IF_ASKED("zeCommandQueueCreate");
  CHECK_STYPE(desc, TSR_ZE_STYPE_COMMAND_QUEUE_DESC);
  (void)ctx;
  (void)dev;
  *out = calloc(1, sizeof **out);
  (*out)->id = next_id++;
  mock_log("zeCommandQueueCreate ordinal=%u mode=%u -> Q%d", desc->ordinal, desc->mode, (*out)->id);
  return 0;
}

EXPORT tsr_ze_result_t zeCommandQueueDestroy(tsr_ze_queue_t q) {
  mock_log("zeCommandQueueDestroy Q%d", q->id);
  free(q);
  return 0;
}

struct _ze_event_pool_handle_t {
  int id;
  uint32_t flags;
};
struct _ze_event_handle_t {
  int id;
  bool signalled;
};

EXPORT tsr_ze_result_t zeEventPoolCreate(tsr_ze_context_t ctx, const tsr_ze_event_pool_desc_t* desc, uint32_t ndev,
                                         tsr_ze_device_t* devs, tsr_ze_event_pool_t* out) {
  FAIL_IF_ASKED("zeEventPoolCreate");
  CHECK_STYPE(desc, TSR_ZE_STYPE_EVENT_POOL_DESC);
  (void)ctx;
  if (ndev != 1 || devs[0] != &the_device) return 0x78000004;
  *out = calloc(1, sizeof **out);
  (*out)->id = next_id++;
  (*out)->flags = desc->flags;
  mock_log("zeEventPoolCreate flags=%u count=%u -> P%d", desc->flags, desc->count, (*out)->id);
  return 0;
}

EXPORT tsr_ze_result_t zeEventPoolDestroy(tsr_ze_event_pool_t p) {
  mock_log("zeEventPoolDestroy P%d", p->id);
  free(p);
  return 0;
}

EXPORT tsr_ze_result_t zeEventCreate(tsr_ze_event_pool_t pool, const tsr_ze_event_desc_t* desc, tsr_ze_event_t* out) {
  FAIL_IF_ASKED("zeEventCreate");
  CHECK_STYPE(desc, TSR_ZE_STYPE_EVENT_DESC);
  *out = calloc(1, sizeof **out);
  (*out)->id = next_id++;
  mock_log("zeEventCreate P%d index=%u signal=%u wait=%u -> E%d", pool->id, desc->index, desc->signal, desc->wait,
           (*out)->id);
  return 0;
}

EXPORT tsr_ze_result_t zeEventDestroy(tsr_ze_event_t e) {
  mock_log("zeEventDestroy E%d", e->id);
  free(e);
  return 0;
}

EXPORT tsr_ze_result_t zeEventHostSynchronize(tsr_ze_event_t e, uint64_t timeout) {
  FAIL_IF_ASKED("zeEventHostSynchronize");
  mock_log("zeEventHostSynchronize E%d timeout=%s", e->id, timeout == UINT64_MAX ? "max" : "finite");
  /* Nothing runs behind the host's back here: an unsignalled event would never be, and waiting forever for
   * it is the loader's bug, reported rather than hung on. */
  return e->signalled ? 0 : 0x7800000b;
}

EXPORT tsr_ze_result_t zeEventHostReset(tsr_ze_event_t e) {
  FAIL_IF_ASKED("zeEventHostReset");
  mock_log("zeEventHostReset E%d", e->id);
  e->signalled = false;
  return 0;
}

/* ---- modules and kernels ---- */

struct _ze_module_handle_t {
  int id;
  char names[8][64];  /* its OpEntryPoint names */
  int count;
};

struct _ze_module_build_log_handle_t {
  char text[128];
};

/* The OpEntryPoint names of a SPIR-V module (each: word count << 16 | 15, model, id, name as a literal). */
static int entry_points(const uint32_t* words, size_t n, tsr_ze_module_t m) {
  if (n < 5 || words[0] != 0x07230203) return 0;
  for (size_t i = 5; i < n;) {
    uint32_t count = words[i] >> 16, opcode = words[i] & 0xffff;
    if (count == 0 || i + count > n) return 0;
    if (opcode == 15 && count > 3 && m->count < 8) snprintf(m->names[m->count++], 64, "%s", (const char*)&words[i + 3]);
    i += count;
  }
  return 1;
}

EXPORT tsr_ze_result_t zeModuleCreate(tsr_ze_context_t ctx, tsr_ze_device_t dev, const tsr_ze_module_desc_t* desc,
                                      tsr_ze_module_t* out, tsr_ze_build_log_t* log) {
  CHECK_STYPE(desc, TSR_ZE_STYPE_MODULE_DESC);
  (void)ctx;
  (void)dev;
  if (log) *log = calloc(1, sizeof **log);
  long injected = mock_fail("zeModuleCreate");
  if (injected) {
    mock_log("zeModuleCreate -> 0x%lx", injected);
    if (log) snprintf((*log)->text, sizeof (*log)->text, "mock build log: error: unsupported capability");
    return (tsr_ze_result_t)injected;
  }
  tsr_ze_module_t m = calloc(1, sizeof *m);
  int ok = desc->format == TSR_ZE_MODULE_FORMAT_IL_SPIRV && desc->inputSize % 4 == 0 &&
           entry_points((const uint32_t*)desc->pInputModule, desc->inputSize / 4, m);
  mock_log("zeModuleCreate format=%u size=%zu spirv=%s entries=%d", desc->format, desc->inputSize, ok ? "yes" : "no",
           m->count);
  if (!ok) {
    free(m);
    if (log) snprintf((*log)->text, sizeof (*log)->text, "mock build log: not a SPIR-V module");
    return 0x70000004;
  }
  m->id = next_id++;
  *out = m;
  return 0;
}

EXPORT tsr_ze_result_t zeModuleDestroy(tsr_ze_module_t m) {
  mock_log("zeModuleDestroy M%d", m->id);
  free(m);
  return 0;
}

EXPORT tsr_ze_result_t zeModuleBuildLogGetString(tsr_ze_build_log_t log, size_t* size, char* text) {
  size_t n = strlen(log->text) + 1;
  if (text) memcpy(text, log->text, *size < n ? *size : n);
  *size = n;
  return 0;
}

EXPORT tsr_ze_result_t zeModuleBuildLogDestroy(tsr_ze_build_log_t log) {
  free(log);
  return 0;
}

enum { MAX_ARGS = 16 };

typedef struct args {
  uint8_t value[MAX_ARGS][16];
  size_t size[MAX_ARGS];
  uint32_t group[3];
} args_t;

struct _ze_kernel_handle_t {
  char name[64];
  args_t args;
};

EXPORT tsr_ze_result_t zeKernelCreate(tsr_ze_module_t m, const tsr_ze_kernel_desc_t* desc, tsr_ze_kernel_t* out) {
  FAIL_IF_ASKED("zeKernelCreate");
  CHECK_STYPE(desc, TSR_ZE_STYPE_KERNEL_DESC);
  for (int i = 0; i < m->count; i++)
    if (strcmp(m->names[i], desc->pKernelName) == 0) {
      *out = calloc(1, sizeof **out);
      snprintf((*out)->name, sizeof (*out)->name, "%s", desc->pKernelName);
      mock_log("zeKernelCreate %s", desc->pKernelName);
      return 0;
    }
  mock_log("zeKernelCreate %s -> not an entry point", desc->pKernelName);
  return TSR_ZE_RESULT_ERROR_INVALID_KERNEL_NAME;
}

EXPORT tsr_ze_result_t zeKernelDestroy(tsr_ze_kernel_t k) {
  mock_log("zeKernelDestroy %s", k->name);
  free(k);
  return 0;
}

EXPORT tsr_ze_result_t zeKernelSetGroupSize(tsr_ze_kernel_t k, uint32_t x, uint32_t y, uint32_t z) {
  FAIL_IF_ASKED("zeKernelSetGroupSize");
  mock_log("zeKernelSetGroupSize %s %u,%u,%u", k->name, x, y, z);
  k->args.group[0] = x;
  k->args.group[1] = y;
  k->args.group[2] = z;
  return 0;
}

EXPORT tsr_ze_result_t zeKernelSetArgumentValue(tsr_ze_kernel_t k, uint32_t index, size_t size, const void* value) {
  FAIL_IF_ASKED("zeKernelSetArgumentValue");
  mock_log("zeKernelSetArgumentValue %s %u size=%zu", k->name, index, size);
  if (index >= MAX_ARGS || size > 16) return 0x78000015;
  memcpy(k->args.value[index], value, size);
  k->args.size[index] = size;
  return 0;
}

/* ---- command lists ---- */

typedef struct command {
  int is_launch;
  char kernel[64];
  args_t args;  /* captured at append */
  tsr_ze_group_count_t groups;
  void* dst;
  const void* src;
  size_t bytes;
  tsr_ze_event_t signal;
} command_t;

struct _ze_command_list_handle_t {
  int id;
  bool closed;
  int count;
  command_t commands[4];
};

EXPORT tsr_ze_result_t zeCommandListCreate(tsr_ze_context_t ctx, tsr_ze_device_t dev, const tsr_ze_list_desc_t* desc,
                                           tsr_ze_list_t* out) {
  FAIL_IF_ASKED("zeCommandListCreate");
  CHECK_STYPE(desc, TSR_ZE_STYPE_COMMAND_LIST_DESC);
  (void)ctx;
  (void)dev;
  *out = calloc(1, sizeof **out);
  (*out)->id = next_id++;
  mock_log("zeCommandListCreate ordinal=%u -> L%d", desc->commandQueueGroupOrdinal, (*out)->id);
  return 0;
}

EXPORT tsr_ze_result_t zeCommandListDestroy(tsr_ze_list_t l) {
  mock_log("zeCommandListDestroy L%d", l->id);
  free(l);
  return 0;
}

EXPORT tsr_ze_result_t zeCommandListClose(tsr_ze_list_t l) {
  FAIL_IF_ASKED("zeCommandListClose");
  mock_log("zeCommandListClose L%d", l->id);
  l->closed = true;
  return 0;
}

EXPORT tsr_ze_result_t zeCommandListReset(tsr_ze_list_t l) {
  FAIL_IF_ASKED("zeCommandListReset");
  mock_log("zeCommandListReset L%d", l->id);
  l->closed = false;
  l->count = 0;
  return 0;
}

static tsr_ze_result_t append(tsr_ze_list_t l, command_t* c) {
  if (l->closed || l->count == 4) return 0x78000019;
  if (c->signal && c->signal->signalled) return 0x7800000b;  /* an event must be reset before it is reused */
  l->commands[l->count++] = *c;
  return 0;
}

EXPORT tsr_ze_result_t zeCommandListAppendLaunchKernel(tsr_ze_list_t l, tsr_ze_kernel_t k,
                                                       const tsr_ze_group_count_t* groups, tsr_ze_event_t signal,
                                                       uint32_t nwait, tsr_ze_event_t* waits) {
  FAIL_IF_ASKED("zeCommandListAppendLaunchKernel");
  (void)waits;
  mock_log("zeCommandListAppendLaunchKernel L%d %s groups=%u,%u,%u signal=E%d waits=%u", l->id, k->name,
           groups->groupCountX, groups->groupCountY, groups->groupCountZ, signal ? signal->id : 0, nwait);
  command_t c = {.is_launch = 1, .args = k->args, .groups = *groups, .signal = signal};
  snprintf(c.kernel, sizeof c.kernel, "%s", k->name);
  return append(l, &c);
}

EXPORT tsr_ze_result_t zeCommandListAppendMemoryCopy(tsr_ze_list_t l, void* dst, const void* src, size_t bytes,
                                                     tsr_ze_event_t signal, uint32_t nwait, tsr_ze_event_t* waits) {
  FAIL_IF_ASKED("zeCommandListAppendMemoryCopy");
  (void)waits;
  mock_log("zeCommandListAppendMemoryCopy L%d %zu signal=E%d waits=%u", l->id, bytes, signal ? signal->id : 0, nwait);
  uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
  if (d < s + bytes && s < d + bytes) return 0x7800001a;  /* overlapping regions, as Level Zero refuses */
  command_t c = {.dst = dst, .src = src, .bytes = bytes, .signal = signal};
  return append(l, &c);
}

static void run(const command_t* c) {
  if (!c->is_launch) {
    memcpy(c->dst, c->src, c->bytes);
  } else if (strcmp(c->kernel, "saxpy") == 0) {
    /* (a: f32, X, Y, Out: __global float*, N: i64), as set by zeKernelSetArgumentValue */
    const args_t* a = &c->args;
    if (a->size[0] != 4 || a->size[1] != 8 || a->size[2] != 8 || a->size[3] != 8 || a->size[4] != 8) {
      mock_log("  saxpy: argument sizes %zu,%zu,%zu,%zu,%zu", a->size[0], a->size[1], a->size[2], a->size[3],
               a->size[4]);
      return;
    }
    float alpha;
    float *x, *y, *out;
    int64_t n;
    memcpy(&alpha, a->value[0], 4);
    memcpy(&x, a->value[1], 8);
    memcpy(&y, a->value[2], 8);
    memcpy(&out, a->value[3], 8);
    memcpy(&n, a->value[4], 8);
    mock_log("  saxpy a=%g n=%lld", alpha, (long long)n);
    mock_saxpy(c->groups.groupCountX * c->groups.groupCountY * c->groups.groupCountZ,
               a->group[0] * a->group[1] * a->group[2], alpha, x, y, out, n);
  } else if (strcmp(c->kernel, "shift") == 0) {
    /* test_gpu_loaders.py's SHIFT compiled with bounds checks: (X, Out: __global float*, N: i64, the fault
     * record: __global u32*), Out[i + 1] = X[i] for i < N; the write past the end is site 0, as the compiled
     * check records it (passes/gpu_bounds_checks.py, "flat" abi) */
    const args_t* a = &c->args;
    if (a->size[0] != 8 || a->size[1] != 8 || a->size[2] != 8 || a->size[3] != 8) {
      mock_log("  shift: argument sizes %zu,%zu,%zu,%zu", a->size[0], a->size[1], a->size[2], a->size[3]);
      return;
    }
    float *x, *out;
    int64_t n;
    uint32_t* record;
    memcpy(&x, a->value[0], 8);
    memcpy(&out, a->value[1], 8);
    memcpy(&n, a->value[2], 8);
    memcpy(&record, a->value[3], 8);
    for (int64_t i = 0; i < n; i++) {
      if (i + 1 < n) {
        out[i + 1] = x[i];
      } else if (!record[4]++) {
        record[0] = 1;
        record[1] = (uint32_t)(i / a->group[0]);
      }
    }
  }
  if (c->signal) c->signal->signalled = true;
}

EXPORT tsr_ze_result_t zeCommandQueueExecuteCommandLists(tsr_ze_queue_t q, uint32_t count, tsr_ze_list_t* lists,
                                                         tsr_ze_fence_t fence) {
  FAIL_IF_ASKED("zeCommandQueueExecuteCommandLists");
  mock_log("zeCommandQueueExecuteCommandLists Q%d count=%u fence=%s", q->id, count, fence ? "set" : "null");
  for (uint32_t i = 0; i < count; i++) {
    if (!lists[i]->closed) return 0x78000004;  /* a list must be closed before it runs */
    for (int k = 0; k < lists[i]->count; k++) run(&lists[i]->commands[k]);
  }
  return 0;
}

/* ---- memory ---- */

EXPORT tsr_ze_result_t zeMemAllocDevice(tsr_ze_context_t ctx, const tsr_ze_mem_alloc_desc_t* desc, size_t bytes,
                                        size_t alignment, tsr_ze_device_t dev, void** out) {
  FAIL_IF_ASKED("zeMemAllocDevice");
  CHECK_STYPE(desc, TSR_ZE_STYPE_DEVICE_MEM_ALLOC_DESC);
  (void)ctx;
  if (dev != &the_device) return 0x78000005;
  size_t a = alignment ? alignment : 64;
  *out = aligned_alloc(a, (bytes + a - 1) / a * a);
  mock_log("zeMemAllocDevice %zu align=%zu", bytes, alignment);
  return *out ? 0 : 0x70000003;
}

EXPORT tsr_ze_result_t zeMemFree(tsr_ze_context_t ctx, void* p) {
  (void)ctx;
  mock_log("zeMemFree");
  free(p);
  return 0;
}
