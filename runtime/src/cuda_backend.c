/* cuda_backend.c — the CUDA backend's table (backend.h): kernels of `target: ptx`, loaded through the CUDA
 * driver (dlopen()ed, cuda_driver.h), JIT-compiled from the image's PTX for the context's GPU.
 *
 * A context uses device 0 (CUDA_VISIBLE_DEVICES picks which GPU that is) through its primary context, the
 * one the CUDA runtime — and so PyTorch, CuPy … — uses: device pointers move freely between them. Every
 * entry makes that context current for its call only (push/pop), so any host thread may call any entry.
 *
 * Work on the NULL stream (`launch`, `copy`) goes to the calling thread's per-thread default stream and is
 * waited for. A Tessera stream is a CUstream of its own (the queue entries): launches, copies and event
 * operations are handed to the driver and the call returns; nothing waits until a synchronize or query.
 * Both kinds are blocking CUDA streams: they wait for work another library (PyTorch) queued on CUDA's legacy
 * default stream, and that stream waits for them, but they do not wait for each other. A graph is built by
 * capturing the recorded work on a private stream into a CUDA graph, replayed by cuGraphLaunch.
 *
 * Every CUresult becomes a status with the driver's own name and description of the error. An error that
 * ends the CUDA context (an illegal address, a trap) also ends every later call of the process on this
 * GPU: the driver's messages then say so, and libtessera keeps reporting them rather than aborting.
 *
 * Device memory (mem_alloc, below the context's own caching pool, memory.c) comes from a CUDA memory pool of
 * the context's own, with a release threshold that keeps freed memory in the pool for reuse. An allocation is
 * made on a private non-blocking stream that holds nothing but allocations, and waited for there (a host wait
 * for no kernel: it never joins the streams doing work); a free is queued on CUDA's legacy default stream,
 * after the work queued on every blocking stream (no wait on the host, as cuMemFree does for the whole
 * device). TESSERA_CUDA_MEMPOOL=0, a driver older than
 * CUDA 11.2 or a GPU without memory pools: cuMemAlloc and cuMemFree instead (docs/runtime.md, "Device
 * memory on CUDA").
 *
 * Modules compiled with bounds checks skip an access outside its tensor and record it (cuda_fault.h): each
 * wait for work (a launch on the NULL stream, a stream's or event's synchronize, a replay's) then reads the
 * records and fails with TSR_ERROR_MEMORY_FAULT naming kernel, block, tensor and line, in the words of the
 * CPU's checks, and the context stays usable. Debug mode refuses PTX compiled without them. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cuda_driver.h"
#include "cuda_fault.h"
#include "cuda_tensor_map.h"
#include "errors.h"
#include "gpu_fault.h"
#include "wait.h"

typedef struct cuda_state {
  const tsr_cuda_driver_t* cu;
  CUdevice device;
  CUcontext context;   /* the device's primary context, retained */
  int cc_major, cc_minor;
  int max_block[3], max_grid[3];
  int max_threads, max_smem, warp_size, sms;
  int least_priority, greatest_priority;  /* CUDA stream priorities: lower numbers run first */
  size_t total_memory;
  char name[128];
  bool debug;                /* debug mode: only code compiled with bounds checks loads */
  uint32_t wait_timeout_ms;  /* the context's watchdog (wait.h): NULL-stream work is polled to it; 0: none */
  tsr_cuda_checks_t checks;  /* the loaded modules compiled with them */
  CUmemoryPool pool;         /* device memory from it (POOL_STREAM); NULL: cuMemAlloc/cuMemFree */
  CUstream alloc_stream;     /* the pool's allocations, nothing else: non-blocking, private (mem_alloc) */
} cuda_state_t;

/* A queue: a Tessera stream, or a graph being recorded. */
typedef struct cuda_queue {
  CUstream stream;
  bool recording;  /* capturing into a graph: event operations become event nodes */
} cuda_queue_t;

typedef struct cuda_code {
  const tsr_cuda_driver_t* cu;
  CUcontext context;
  CUmodule module;
  cuda_state_t* state;
  tsr_cuda_checked_t* checked;  /* its fault record, when compiled with bounds checks */
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

/* ---- the memory pool -------------------------------------------------------------------------------- */

/* Whether TESSERA_CUDA_MEMPOOL turns the pool off ("0", "off", "false", "no"). */
static bool pool_turned_off(void) {
  const char* v = getenv("TESSERA_CUDA_MEMPOOL");
  if (!v) return false;
  char lower[8] = "";
  for (size_t i = 0; v[i] && i + 1 < sizeof lower; i++) lower[i] = (char)(v[i] >= 'A' && v[i] <= 'Z' ? v[i] + 32 : v[i]);
  static const char* const off[] = {"0", "off", "false", "no"};
  for (size_t i = 0; i < sizeof off / sizeof *off; i++)
    if (strlen(v) < sizeof lower && strcmp(lower, off[i]) == 0) return true;
  return false;
}

/* The context's memory pool, where the driver and the GPU have one and TESSERA_CUDA_MEMPOOL does not say
 * no; else s->pool stays NULL and allocation is cuMemAlloc's, as before. Never an error: a pool the driver
 * refuses leaves the plain path. Freed memory stays in the pool (release threshold: all of it) until the
 * context goes, or an allocation finds the device full (mem_alloc trims it then). The pool never makes a
 * stream wait on another's work behind the runtime's back (no internal dependencies): its allocations and
 * frees are ordered by the stream they are made on alone (ALLOC_STREAM, POOL_STREAM). */
static void pool_create(cuda_state_t* s) {
  const tsr_cuda_driver_t* cu = s->cu;
  int supported = 0;
  if (pool_turned_off() || cu->missing_pool_entry ||
      cu->cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, s->device) || !supported)
    return;
  if (enter(cu, s->context, "creating the CUDA memory pool")) return;
  tsr_cu_mem_pool_props_t props;
  memset(&props, 0, sizeof props);
  props.alloc_type = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location_type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location_id = s->device;
  uint64_t keep_all = UINT64_MAX;
  int no = 0;
  CUmemoryPool pool = NULL;
  CUresult r = cu->cuMemPoolCreate(&pool, &props);
  if (!r) r = cu->cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_all);
  if (!r) r = cu->cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, &no);
  CUstream alloc_stream = NULL;
  if (!r) r = cu->cuStreamCreateWithPriority(&alloc_stream, CU_STREAM_NON_BLOCKING, s->least_priority);
  if (r && pool) cu->cuMemPoolDestroy(pool);
  if (!r) s->pool = pool, s->alloc_stream = alloc_stream;
  leave(cu);
}

/* Context destroy, after the runtime freed every block: the pool's memory goes back to the system (the frees
 * queued in the legacy stream's order first). */
static void pool_destroy(cuda_state_t* s) {
  if (!s->pool || enter(s->cu, s->context, "destroying the CUDA memory pool")) return;
  s->cu->cuStreamSynchronize(TSR_CU_STREAM_LEGACY);
  s->cu->cuStreamDestroy(s->alloc_stream);
  s->cu->cuMemPoolTrimTo(s->pool, 0);
  s->cu->cuMemPoolDestroy(s->pool);
  leave(s->cu);
  s->pool = NULL;
  s->alloc_stream = NULL;
}

static tsr_status_t create(const tsr_context_options_t* options, void** out_state) {
  /* worker threads are a CPU notion; debug mode's guard pages need host memory, its checks checked code */
  const char* why = unavailable();
  if (why) return tsr_fail(TSR_ERROR_UNSUPPORTED, "the CUDA backend is not available: %s", why);
  cuda_state_t* s = calloc(1, sizeof *s);
  if (!s) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory creating a context");
  s->cu = tsr_cuda_driver(NULL);
  s->debug = options->flags & TSR_CONTEXT_DEBUG;
  s->wait_timeout_ms = options->wait_timeout_ms;
  tsr_cuda_checks_init(&s->checks);
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
  if (!st && !(st = enter(s->cu, s->context, "querying the GPU"))) {
    r = s->cu->cuCtxGetStreamPriorityRange(&s->least_priority, &s->greatest_priority);
    leave(s->cu);
    if (r) st = cuda_fail(r, TSR_ERROR_INIT_FAIL, "querying the GPU's stream priorities");
  }
  if (!st) pool_create(s);
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
  pool_destroy(s);
  s->cu->cuDevicePrimaryCtxRelease(s->device);
  pthread_mutex_destroy(&s->checks.lock);
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
  if (!r && !(st = tsr_cuda_checked_find(s->cu, code->module, section, &code->checked)) && !code->checked &&
      s->debug)
    st = tsr_fail(TSR_ERROR_UNSUPPORTED, "debug mode (TESSERA_DEBUG) checks every tensor access, and the PTX of "
                  "section %s was compiled without bounds checks: compile it with TESSERA_DEBUG=1 set, "
                  "tessera-cc --gpu-bounds-checks or CompileOptions(gpu_bounds_checks=True)", section);
  if (!r && st) {
    s->cu->cuModuleUnload(code->module);
    free(code->checked);
  }
  leave(s->cu);
  free(ptx);
  if (!r && st) {
    free(code);
    return st;
  }
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
  code->state = s;
  if (code->checked) tsr_cuda_checks_add(&s->checks, code->checked);
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
    /* Launches of its kernels may still be queued on streams or in replays of graphs. */
    code->cu->cuCtxSynchronize();
    code->cu->cuModuleUnload(code->module);
    leave(code->cu);
  }
  if (code->checked) tsr_cuda_checks_remove(&code->state->checks, code->checked);
  free(code);
}

/* ---- memory ----------------------------------------------------------------------------------------- */

/* The streams the pool's allocations and frees are ordered in.
 *
 * Allocations: ALLOC_STREAM, a private non-blocking stream on which nothing but allocations is ever queued;
 * mem_alloc waits there for its allocation (no kernel is before it: the wait is the driver's bookkeeping), so
 * the memory may be used by any stream as soon as tsrAlloc returns. An allocation on CUDA's legacy default
 * stream (what this was before) waits on the device for the work queued on every blocking stream — every
 * Tessera stream, the per-thread streams — and makes their later work wait for it: one allocation in the middle
 * of a function call joined the communication stream's gradient buckets back into the call's stream, so the
 * backward's next kernels waited for the collectives in flight (tests/c/test_comm_nccl_fake.py,
 * test_allocations_never_join_the_streams_doing_work; on GPUs this was not what kept bench/data_parallel_gpu.py's
 * buckets from hiding: docs/performance.md, "The legacy default stream"). Memory a free has not yet given back
 * (its work still queued) is not reused by the allocation stream, which waits for nothing: the pool takes other
 * memory then.
 *
 * Frees: POOL_STREAM, CUDA's legacy default stream, with which every stream of the runtime is ordered (Tessera
 * streams and the per-thread streams are blocking streams; a graph's capture stream is not, and a graph keeps
 * what it uses until it is destroyed, after its replays). So a free comes after all work queued on any stream
 * before it, with no wait on the host; the cost is that order on the device: a stream's work queued after a
 * free waits for the work queued on the others before it. Frees reach the CUDA pool rarely: the runtime's own
 * pool (memory.c) keeps freed blocks up to 1 GiB, and gives them back only when trimmed (tsrTrimMemory, an
 * allocation the device has no room for) or when the context goes. */
#define POOL_STREAM TSR_CU_STREAM_LEGACY
#define ALLOC_STREAM(s) ((s)->alloc_stream)

/* One allocation from the pool, waited for on the allocation stream (context current). */
static CUresult pool_alloc(cuda_state_t* s, CUdeviceptr* p, size_t bytes) {
  CUresult r = s->cu->cuMemAllocFromPoolAsync(p, bytes, s->pool, ALLOC_STREAM(s));
  if (!r && (r = s->cu->cuStreamSynchronize(ALLOC_STREAM(s)))) s->cu->cuMemFreeAsync(*p, POOL_STREAM);
  return r;
}

static tsr_status_t mem_alloc(void* state, size_t bytes, void** out) {
  cuda_state_t* s = state;
  tsr_status_t st = enter(s->cu, s->context, "tsrAlloc");
  if (st) return st;
  CUdeviceptr p = 0;
  CUresult r;
  if (s->pool) {
    /* Full: the pool's free memory goes back to the device (once its frees are done), and one more try. */
    r = pool_alloc(s, &p, bytes);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && !s->cu->cuStreamSynchronize(POOL_STREAM) && !s->cu->cuMemPoolTrimTo(s->pool, 0))
      r = pool_alloc(s, &p, bytes);
  } else {
    r = s->cu->cuMemAlloc(&p, bytes);  /* 256-byte aligned: more than TSR_ALLOC_ALIGNMENT */
  }
  leave(s->cu);
  if (r) return cuda_fail(r, TSR_ERROR_OUT_OF_MEMORY, s->pool ? "tsrAlloc: cuMemAllocFromPoolAsync" : "tsrAlloc: cuMemAlloc");
  *out = (void*)(uintptr_t)p;
  return TSR_SUCCESS;
}

static void mem_free(void* state, void* ptr) {
  cuda_state_t* s = state;
  if (enter(s->cu, s->context, "tsrFree")) return;  /* a dead context has freed it already */
  /* In the pool: after the work queued so far on every stream, no wait (cuMemFree waits for the device). */
  if (s->pool) s->cu->cuMemFreeAsync((CUdeviceptr)(uintptr_t)ptr, POOL_STREAM);
  else s->cu->cuMemFree((CUdeviceptr)(uintptr_t)ptr);
  leave(s->cu);
}

/* The stream of a queue; NULL: the calling thread's per-thread default stream. */
static CUstream stream_of(void* queue) { return queue ? ((cuda_queue_t*)queue)->stream : TSR_CU_STREAM_PER_THREAD; }

CUstream tsr_cuda_queue_stream(void* queue) { return stream_of(queue); }

typedef struct ptds_query {
  const tsr_cuda_driver_t* cu;
  CUresult result;
} ptds_query_t;

static tsr_status_t query_ptds(void* arg) {
  ptds_query_t* q = arg;
  q->result = q->cu->cuStreamQuery(TSR_CU_STREAM_PER_THREAD);
  return q->result == CUDA_ERROR_NOT_READY ? TSR_ERROR_NOT_READY : TSR_SUCCESS;
}

/* Waits for the calling thread's per-thread stream, the NULL stream's work (context current), its outcome in
 * `*r`: blocking, or under the context's watchdog by polling cuStreamQuery, TSR_ERROR_TIMEOUT (naming
 * `function` and `what`) past it, the work left running. */
static tsr_status_t finish_ptds(const cuda_state_t* s, const char* function, const char* what, CUresult* r) {
  if (!s->wait_timeout_ms) {
    *r = s->cu->cuStreamSynchronize(TSR_CU_STREAM_PER_THREAD);
    return TSR_SUCCESS;
  }
  tsr_wait_limit_t limit = tsr_wait_within(s->wait_timeout_ms);
  limit.watchdog = true;
  ptds_query_t q = {.cu = s->cu};
  if (tsr_poll_within(query_ptds, &q, &limit) == TSR_ERROR_NOT_READY) return tsr_fail_timeout(function, what, &limit);
  *r = q.result;
  return TSR_SUCCESS;
}

/* Queues a copy on `stream` (context current). Unified addressing tells host from device memory for the
 * kinds that do not say. */
static CUresult enqueue_copy(const tsr_cuda_driver_t* cu, CUstream stream, void* dst, const void* src,
                             size_t bytes, tsr_memcpy_kind_t kind) {
  CUdeviceptr d = (CUdeviceptr)(uintptr_t)dst, sp = (CUdeviceptr)(uintptr_t)src;
  switch (kind) {
    case TSR_MEMCPY_HOST_TO_DEVICE: return cu->cuMemcpyHtoDAsync(d, src, bytes, stream);
    case TSR_MEMCPY_DEVICE_TO_HOST: return cu->cuMemcpyDtoHAsync(dst, sp, bytes, stream);
    case TSR_MEMCPY_DEVICE_TO_DEVICE: return cu->cuMemcpyDtoDAsync(d, sp, bytes, stream);
    default: return cu->cuMemcpyAsync(d, sp, bytes, stream);
  }
}

static tsr_status_t copy(void* state, void* dst, const void* src, size_t bytes, tsr_memcpy_kind_t kind) {
  cuda_state_t* s = state;
  if (kind == TSR_MEMCPY_HOST_TO_HOST) {
    memmove(dst, src, bytes);
    return TSR_SUCCESS;
  }
  tsr_status_t st = enter(s->cu, s->context, "tsrMemcpy");
  if (st) return st;
  /* On the per-thread stream, not the legacy default one: a copy on the NULL stream does not wait for work
   * queued on Tessera streams (no implicit barrier), as on every backend. */
  CUresult r = enqueue_copy(s->cu, TSR_CU_STREAM_PER_THREAD, dst, src, bytes, kind);
  if (!r) st = finish_ptds(s, "tsrMemcpy", "the copy on the NULL stream", &r);
  leave(s->cu);
  if (st) return st;
  return r ? cuda_fail(r, TSR_ERROR_INVALID_VALUE, "tsrMemcpy") : TSR_SUCCESS;
}

static tsr_status_t queue_copy(void* state, void* queue, void* dst, const void* src, size_t bytes,
                               tsr_memcpy_kind_t kind) {
  cuda_state_t* s = state;
  tsr_status_t st = enter(s->cu, s->context, "tsrMemcpyAsync");
  if (st) return st;
  CUresult r = enqueue_copy(s->cu, stream_of(queue), dst, src, bytes, kind);
  leave(s->cu);
  return r ? cuda_fail(r, TSR_ERROR_INVALID_VALUE, "tsrMemcpyAsync: the CUDA driver refused the copy") : TSR_SUCCESS;
}

/* ---- page-locked host memory ------------------------------------------------------------------------ */

/* Portable: usable by every CUDA context of the process; device-mapped: kernels may read it directly. */
enum { HOST_FLAGS = CU_MEMHOST_PORTABLE | CU_MEMHOST_DEVICEMAP };

static tsr_status_t host_alloc(void* state, size_t bytes, void** out) {
  cuda_state_t* s = state;
  tsr_status_t st = enter(s->cu, s->context, "tsrAlloc");
  if (st) return st;
  CUresult r = s->cu->cuMemHostAlloc(out, bytes ? bytes : 1, HOST_FLAGS);  /* page-aligned */
  leave(s->cu);
  return r ? cuda_fail(r, TSR_ERROR_OUT_OF_MEMORY, "tsrAlloc: cuMemHostAlloc (pinned host memory)") : TSR_SUCCESS;
}

static void host_free(void* state, void* ptr) {
  cuda_state_t* s = state;
  if (enter(s->cu, s->context, "tsrFree")) return;
  s->cu->cuMemFreeHost(ptr);
  leave(s->cu);
}

static tsr_status_t host_register(void* state, void* ptr, size_t bytes) {
  cuda_state_t* s = state;
  tsr_status_t st = enter(s->cu, s->context, "tsrHostRegister");
  if (st) return st;
  CUresult r = s->cu->cuMemHostRegister(ptr, bytes, HOST_FLAGS);
  leave(s->cu);
  if (r == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrHostRegister: [%p, +%zu) is already page-locked with CUDA (by "
                    "another library, or another context)", ptr, bytes);
  return r ? cuda_fail(r, TSR_ERROR_OUT_OF_MEMORY, "tsrHostRegister: cuMemHostRegister") : TSR_SUCCESS;
}

static void host_unregister(void* state, void* ptr) {
  cuda_state_t* s = state;
  if (enter(s->cu, s->context, "tsrHostUnregister")) return;
  s->cu->cuMemHostUnregister(ptr);
  leave(s->cu);
}

static tsr_status_t host_device_pointer(void* state, void* host, void** out) {
  cuda_state_t* s = state;
  tsr_status_t st = enter(s->cu, s->context, "tsrHostGetDevicePointer");
  if (st) return st;
  CUdeviceptr d = 0;
  CUresult r = s->cu->cuMemHostGetDevicePointer(&d, host, 0);
  leave(s->cu);
  if (r) return cuda_fail(r, TSR_ERROR_INVALID_VALUE, "tsrHostGetDevicePointer: cuMemHostGetDevicePointer");
  *out = (void*)(uintptr_t)d;
  return TSR_SUCCESS;
}

/* ---- launches --------------------------------------------------------------------------------------- */

static tsr_status_t check_shape(const cuda_state_t* s, const tsr_backend_launch_t* l) {
  for (int i = 0; i < 3; i++) {
    if (l->block[i] > (uint32_t)s->max_block[i] || l->grid[i] > (uint32_t)s->max_grid[i])
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "grid (%u, %u, %u) of blocks (%u, %u, %u) exceeds %s's limits: "
                      "grid (%d, %d, %d), block (%d, %d, %d)", l->grid[0], l->grid[1], l->grid[2], l->block[0],
                      l->block[1], l->block[2], s->name, s->max_grid[0], s->max_grid[1], s->max_grid[2],
                      s->max_block[0], s->max_block[1], s->max_block[2]);
  }
  return TSR_SUCCESS;
}

/* Queues a kernel on `stream` (context current: the driver encodes tensor maps in the current context, and
 * says CUDA_ERROR_INVALID_CONTEXT without one), with its parameters: l->args after any tensor maps
 * (cuda_tensor_map.h). A status for what the maps refuse; the driver's answer to the launch in `*r`. */
static tsr_status_t enqueue_kernel(const cuda_state_t* s, CUstream stream, const tsr_backend_launch_t* l,
                                   CUresult* r) {
  tsr_cuda_params_t p;
  tsr_status_t st = tsr_cuda_params_prepare(s->cu, l->tensor_maps, l, &p);
  if (st) return st;
  CUfunction f = (CUfunction)l->entry;
  *r = CUDA_SUCCESS;
  /* Beyond 48 KiB a kernel must opt in to dynamic shared memory. */
  if (l->smem_bytes > 48u << 10)
    *r = s->cu->cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)l->smem_bytes);
  if (!*r)
    *r = s->cu->cuLaunchKernel(f, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2],
                               l->smem_bytes, stream, p.params ? p.params : l->args, NULL);
  tsr_cuda_params_free(&p);  /* cuLaunchKernel has copied the parameter values */
  return TSR_SUCCESS;
}

/* A kernel's failure, or work's on a stream, as a status with the driver's words. */
static tsr_status_t work_failed(const cuda_state_t* s, CUresult r, const char* what) {
  char why[256];
  tsr_cuda_describe(r, why, sizeof why);
  return tsr_fail(status_of(r, TSR_ERROR_LAUNCH_FAILED), "%s on %s: %s%s", what, s->name, why,
                  sticky(r) ? "; the CUDA context cannot be used again in this process" : "");
}

/* After waiting for work (context current): a failed bounds check of a checked module, as a status. */
static tsr_status_t check_failed(cuda_state_t* s, const char* what) {
  tsr_cuda_failure_t f;
  if (!tsr_cuda_checks_poll(&s->checks, s->cu, &f)) return TSR_SUCCESS;
  return tsr_fail(TSR_ERROR_MEMORY_FAULT, "%s: kernel '%s' block (%u, %u, %u): %s", what, f.kernel, f.block[0],
                  f.block[1], f.block[2], f.report);
}

static tsr_status_t launch(void* state, const tsr_backend_launch_t* l, tsr_fault_t* fault) {
  /* A GPU's faults come back as CUDA errors, not as caught signals; failed bounds checks as fault.report. */
  cuda_state_t* s = state;
  CUresult r;
  tsr_cuda_failure_t f;
  tsr_status_t st = check_shape(s, l);
  if (st || (st = enter(s->cu, s->context, "tsrLaunch"))) return st;
  st = enqueue_kernel(s, TSR_CU_STREAM_PER_THREAD, l, &r);
  if (!st && !r) st = finish_ptds(s, "tsrLaunch", "the kernel on the NULL stream", &r);
  bool failed = !st && !r && tsr_cuda_checks_poll(&s->checks, s->cu, &f);
  leave(s->cu);
  if (st) return st;
  if (r) return work_failed(s, r, "the kernel failed");
  if (!failed) return TSR_SUCCESS;
  return tsr_gpu_fault_of_launch(f.function == (CUfunction)l->entry, f.kernel, f.report, f.block, fault);
}

/* ---- queues ----------------------------------------------------------------------------------------- */

static tsr_status_t queue_create(void* state, int32_t priority, void** out) {
  cuda_state_t* s = state;
  /* Tessera's higher priority runs first; CUDA's runs first with a lower number, from `least` (0) down to
   * `greatest` (-5 on an H100). */
  int p = priority <= 0 ? s->least_priority : -priority;
  if (p < s->greatest_priority) p = s->greatest_priority;
  cuda_queue_t* q = calloc(1, sizeof *q);
  if (!q) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "tsrCreateStream: out of memory");
  tsr_status_t st = enter(s->cu, s->context, "tsrCreateStream");
  if (st) {
    free(q);
    return st;
  }
  CUresult r = s->cu->cuStreamCreateWithPriority(&q->stream, CU_STREAM_DEFAULT, p);
  leave(s->cu);
  if (r) {
    free(q);
    return cuda_fail(r, TSR_ERROR_INIT_FAIL, "tsrCreateStream: cuStreamCreateWithPriority");
  }
  *out = q;
  return TSR_SUCCESS;
}

static void queue_destroy(void* state, void* queue) {
  cuda_state_t* s = state;
  cuda_queue_t* q = queue;
  if (!enter(s->cu, s->context, "tsrDestroyStream")) {
    s->cu->cuStreamDestroy(q->stream);
    leave(s->cu);
  }
  free(q);
}

static tsr_status_t queue_launch(void* state, void* queue, const tsr_backend_launch_t* l) {
  cuda_state_t* s = state;
  CUresult r;
  tsr_status_t st = check_shape(s, l);
  if (st || (st = enter(s->cu, s->context, "tsrLaunch"))) return st;
  st = enqueue_kernel(s, stream_of(queue), l, &r);
  leave(s->cu);
  return st ? st : r ? work_failed(s, r, "the CUDA driver refused the launch") : TSR_SUCCESS;
}

static tsr_status_t queue_wait(void* state, void* queue) {
  cuda_state_t* s = state;
  tsr_status_t st = enter(s->cu, s->context, "tsrStreamSynchronize");
  if (st) return st;
  CUresult r = s->cu->cuStreamSynchronize(stream_of(queue));
  if (!r) st = check_failed(s, "a kernel queued on the stream failed a bounds check");
  leave(s->cu);
  return r ? work_failed(s, r, "a kernel or copy queued on the stream failed") : st;
}

static tsr_status_t queue_query(void* state, void* queue) {
  cuda_state_t* s = state;
  tsr_status_t st = enter(s->cu, s->context, "tsrStreamQuery");
  if (st) return st;
  CUresult r = s->cu->cuStreamQuery(stream_of(queue));
  if (!r) st = check_failed(s, "a kernel queued on the stream failed a bounds check");
  leave(s->cu);
  if (r == CUDA_ERROR_NOT_READY) return TSR_ERROR_NOT_READY;
  return r ? work_failed(s, r, "a kernel or copy queued on the stream failed") : st;
}

/* ---- events ----------------------------------------------------------------------------------------- */

static tsr_status_t event_create(void* state, void** out) {
  cuda_state_t* s = state;
  tsr_status_t st = enter(s->cu, s->context, "tsrCreateEvent");
  if (st) return st;
  CUevent e;
  CUresult r = s->cu->cuEventCreate(&e, CU_EVENT_DEFAULT);
  leave(s->cu);
  if (r) return cuda_fail(r, TSR_ERROR_OUT_OF_MEMORY, "tsrCreateEvent: cuEventCreate");
  *out = e;
  return TSR_SUCCESS;
}

static void event_destroy(void* state, void* event) {
  cuda_state_t* s = state;
  if (enter(s->cu, s->context, "tsrDestroyEvent")) return;
  s->cu->cuEventDestroy((CUevent)event);
  leave(s->cu);
}

static tsr_status_t event_record(void* state, void* event, void* queue) {
  cuda_state_t* s = state;
  const cuda_queue_t* q = queue;
  tsr_status_t st = enter(s->cu, s->context, "tsrEventRecord");
  if (st) return st;
  CUresult r = q && q->recording ? s->cu->cuEventRecordWithFlags((CUevent)event, q->stream, CU_EVENT_RECORD_EXTERNAL)
                                 : s->cu->cuEventRecord((CUevent)event, stream_of(queue));
  /* On the NULL stream the record completes at once (backend.h): the GPU reaches it a moment later, so wait. */
  if (!r && !q) r = s->cu->cuEventSynchronize((CUevent)event);
  leave(s->cu);
  return r ? work_failed(s, r, "tsrEventRecord: the CUDA driver refused the record") : TSR_SUCCESS;
}

static tsr_status_t event_wait(void* state, void* queue, void* event) {
  cuda_state_t* s = state;
  const cuda_queue_t* q = queue;
  tsr_status_t st = enter(s->cu, s->context, "tsrStreamWaitEvent");
  if (st) return st;
  CUresult r = !q ? s->cu->cuEventSynchronize((CUevent)event)
                  : s->cu->cuStreamWaitEvent(q->stream, (CUevent)event, q->recording ? CU_EVENT_WAIT_EXTERNAL : 0);
  leave(s->cu);
  return r ? work_failed(s, r, q ? "tsrStreamWaitEvent: the CUDA driver refused the wait"
                                 : "tsrStreamWaitEvent: the work before the event failed")
           : TSR_SUCCESS;
}

static tsr_status_t event_query(void* state, void* event) {
  cuda_state_t* s = state;
  tsr_status_t st = enter(s->cu, s->context, "tsrEventQuery");
  if (st) return st;
  CUresult r = s->cu->cuEventQuery((CUevent)event);
  leave(s->cu);
  if (r == CUDA_ERROR_NOT_READY) return TSR_ERROR_NOT_READY;
  return r ? work_failed(s, r, "tsrEventQuery: the work before the event failed") : TSR_SUCCESS;
}

static tsr_status_t event_synchronize(void* state, void* event) {
  cuda_state_t* s = state;
  tsr_status_t st = enter(s->cu, s->context, "tsrEventSynchronize");
  if (st) return st;
  CUresult r = s->cu->cuEventSynchronize((CUevent)event);
  if (!r) st = check_failed(s, "tsrEventSynchronize: a kernel before the event failed a bounds check");
  leave(s->cu);
  return r ? work_failed(s, r, "tsrEventSynchronize: the work before the event failed") : st;
}

static tsr_status_t event_elapsed(void* state, void* start, void* end, float* out_ms) {
  cuda_state_t* s = state;
  tsr_status_t st = enter(s->cu, s->context, "tsrEventElapsedTime");
  if (st) return st;
  CUresult r = s->cu->cuEventElapsedTime(out_ms, (CUevent)start, (CUevent)end);
  leave(s->cu);
  if (r == CUDA_ERROR_NOT_READY) return TSR_ERROR_NOT_READY;
  return r ? cuda_fail(r, TSR_ERROR_INVALID_VALUE, "tsrEventElapsedTime: cuEventElapsedTime") : TSR_SUCCESS;
}

/* ---- graphs ----------------------------------------------------------------------------------------- */

static tsr_status_t graph_begin(void* state, void** out) {
  cuda_state_t* s = state;
  if (s->cu->missing_graph_entry)
    return tsr_fail(TSR_ERROR_UNSUPPORTED, "tsrGraphInstantiate: CUDA graphs need %s, which this NVIDIA driver "
                    "lacks (CUDA 11.4 or later has it)", s->cu->missing_graph_entry);
  cuda_queue_t* q = calloc(1, sizeof *q);
  if (!q) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "tsrGraphInstantiate: out of memory");
  tsr_status_t st = enter(s->cu, s->context, "tsrGraphInstantiate");
  if (st) {
    free(q);
    return st;
  }
  /* Non-blocking: a capture must not be joined by work on the legacy default stream. Relaxed: other threads
   * may allocate, free and synchronize meanwhile. */
  CUresult r = s->cu->cuStreamCreateWithPriority(&q->stream, CU_STREAM_NON_BLOCKING, s->least_priority);
  if (!r && (r = s->cu->cuStreamBeginCapture(q->stream, CU_STREAM_CAPTURE_MODE_RELAXED)))
    s->cu->cuStreamDestroy(q->stream);
  leave(s->cu);
  if (r) {
    free(q);
    return cuda_fail(r, TSR_ERROR_INIT_FAIL, "tsrGraphInstantiate: starting a CUDA stream capture");
  }
  q->recording = true;
  *out = q;
  return TSR_SUCCESS;
}

static tsr_status_t graph_end(void* state, void* recorder, void** out_exec) {
  cuda_state_t* s = state;
  cuda_queue_t* q = recorder;
  tsr_status_t st = enter(s->cu, s->context, "tsrGraphInstantiate");
  if (st) return st;  /* the context is gone, and the stream with it */
  CUgraph graph = NULL;
  CUgraphExec exec = NULL;
  CUresult r = s->cu->cuStreamEndCapture(q->stream, &graph);
  const char* what = "ending the CUDA stream capture";
  if (!r && out_exec) {
    what = "cuGraphInstantiate";
    r = s->cu->cuGraphInstantiateWithFlags(&exec, graph, 0);
  }
  if (graph) s->cu->cuGraphDestroy(graph);  /* the executable graph is independent of it */
  s->cu->cuStreamDestroy(q->stream);
  leave(s->cu);
  free(q);
  if (!out_exec) return TSR_SUCCESS;
  if (r) {
    char why[256];
    tsr_cuda_describe(r, why, sizeof why);
    return tsr_fail(status_of(r, TSR_ERROR_INVALID_VALUE), "tsrGraphInstantiate: %s failed: %s", what, why);
  }
  *out_exec = exec;
  return TSR_SUCCESS;
}

static tsr_status_t graph_launch(void* state, void* exec, void* queue) {
  cuda_state_t* s = state;
  tsr_status_t st = enter(s->cu, s->context, "tsrGraphLaunch");
  if (st) return st;
  CUresult r = s->cu->cuGraphLaunch((CUgraphExec)exec, stream_of(queue));
  if (r) {
    leave(s->cu);
    return work_failed(s, r, "tsrGraphLaunch: the CUDA driver refused the replay");
  }
  if (!queue) st = finish_ptds(s, "tsrGraphLaunch", "the graph's work on the NULL stream", &r);
  if (st) {
    leave(s->cu);
    return st;
  }
  if (!queue && !r) st = check_failed(s, "a kernel of the graph failed a bounds check");
  leave(s->cu);
  return r ? work_failed(s, r, "a kernel or copy of the graph failed") : st;
}

static void graph_destroy(void* state, void* exec) {
  cuda_state_t* s = state;
  if (enter(s->cu, s->context, "tsrDestroyGraphExec")) return;
  s->cu->cuGraphExecDestroy((CUgraphExec)exec);  /* a replay in flight finishes first, freed by the driver */
  leave(s->cu);
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
    .queue_create = queue_create,
    .queue_destroy = queue_destroy,
    .queue_launch = queue_launch,
    .queue_copy = queue_copy,
    .queue_wait = queue_wait,
    .queue_query = queue_query,
    .event_create = event_create,
    .event_destroy = event_destroy,
    .event_record = event_record,
    .event_wait = event_wait,
    .event_query = event_query,
    .event_synchronize = event_synchronize,
    .event_elapsed = event_elapsed,
    .graph_begin = graph_begin,
    .graph_end = graph_end,
    .graph_launch = graph_launch,
    .graph_destroy = graph_destroy,
    .host_alloc = host_alloc,
    .host_free = host_free,
    .host_register = host_register,
    .host_unregister = host_unregister,
    .host_device_pointer = host_device_pointer,
};
