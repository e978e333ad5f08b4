/* fake_cuda.c — a stand-in for libcuda.so.1 with the entry points libtessera's CUDA backend loads, so that
 * the backend's logic (streams as CUstreams, events, asynchronous copies, graph capture and replay, pinned
 * memory, errors of queued work) is tested on machines without a GPU. Installed as libcuda.so.1 in a
 * directory on LD_LIBRARY_PATH (tests/c/test_cuda_fake.py).
 *
 * What it does instead of a GPU: device memory is host memory; work runs when it is queued (so streams are
 * trivially in order), except on a capturing stream, where it is recorded into the graph; the kernels it
 * runs are `saxpy` (y = a * x + y, the test image's PTX record) and `fill_fixed` (out = value, the CPU test
 * kernel's arguments; tests/c/test_function_device.py's plans use it); other kernels do nothing. It writes one line per call that queues or
 * waits for work to $FAKE_CUDA_LOG ("cuLaunchKernel s3"), which is what the tests read. The device has 4 SMs,
 * or $FAKE_CUDA_SMS.
 *
 * A kernel given a pointer in [2^40, 2^41) (no host mapping is there) faults as on a GPU: its launch succeeds,
 * the next call that waits for work fails with CUDA_ERROR_ILLEGAL_ADDRESS, and so does every call after.
 * A module compiled with bounds checks (its PTX defines `__tessera_fault[16]` and `__tessera_fault_sites`,
 * passes/gpu_bounds_checks.py) has both globals, read by cuModuleGetGlobal; its kernels whose names end in
 * `_oob` fail the first check of their own when they run, as the compiled code would: the record, if still
 * clear, becomes (1 + site, block (grid x - 1, 0, 0)). Built with -DFAKE_CUDA_NO_GRAPHS it lacks the
 * graph entry points, as a driver older than CUDA 11.4 does; with -DFAKE_CUDA_NO_POOLS the memory pools' (and
 * says the GPU has none), as one older than 11.2 does.
 *
 * `spin_until(flag, seen, F)` is a kernel that never ends until the host sets flag[0] (device memory is host
 * memory): its stream, and events recorded on it after the kernel, stay busy — cuStreamQuery and cuEventQuery
 * say CUDA_ERROR_NOT_READY — until a query or synchronize finds the flag set, and then sets seen[0] = 1, as the
 * CPU test kernel of that name does. A synchronize that blocks on a busy stream or event logs "… blocked" and
 * waits for the flag (up to 10 s, then the kernel gives up with seen[0] = -1), so a test sees whether the
 * runtime blocked in the driver or polled it. For fake_nccl.c: fake_cuda_spin (NCCL's kernel spinning on a
 * stream, recorded into the graph on a capturing one), fake_cuda_graph_ref (the graphs holding NCCL's work,
 * counted) and fake_cuda_capturing. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum { OK = 0, INVALID_VALUE = 1, INVALID_CONTEXT = 201, NOT_READY = 600, ILLEGAL_ADDRESS = 700, NOT_FOUND = 500 };
#define PER_THREAD ((struct CUstream_st*)0x2)
#define LEGACY ((struct CUstream_st*)0x1)  /* CU_STREAM_LEGACY: the memory pools' stream here */

typedef struct op {
  int kind;  /* KERNEL, COPY, RECORD, WAIT, SPIN, REF */
  int saxpy;  /* a kernel that runs */
  int fill;   /* fill_fixed: y[i] = a for i < n */
  struct CUfunc_st* oob;  /* a kernel that fails a bounds check */
  unsigned grid_x;
  unsigned threads;
  float a;
  const float* x;
  float* y;
  int64_t n;
  void* dst;
  const void* src;
  size_t bytes;
  struct CUevent_st* event;
  volatile int32_t* flag;  /* SPIN: another library's kernel (fake_cuda_spin) recorded into a graph */
  int32_t* seen;
  int32_t* refs;  /* REF: a count another library keeps of the graphs holding its work (fake_cuda_graph_ref) */
} op_t;
enum { KERNEL, COPY, RECORD, WAIT, SPIN, REF };

/* A spinning kernel a stream or event waits for: busy until *flag != 0 (then *seen = 1). */
typedef struct spin {
  volatile int32_t* flag;
  int32_t* seen;
} spin_t;

struct CUstream_st {
  int id;
  int capturing;
  spin_t spin;
  op_t* ops;  /* while capturing */
  size_t count, capacity;
};
struct CUevent_st {
  double time;
  spin_t spin;  /* recorded after a spinning kernel */
};
struct CUgraph_st {
  op_t* ops;
  size_t count;
};
struct CUgraphExec_st {
  op_t* ops;
  size_t count;
};
struct CUfunc_st {
  struct module* module;  /* of an `_oob` kernel */
  uint32_t site;
};
/* A loaded module: the globals of bounds checks, when compiled with them. */
struct module {
  uint32_t* record;
  unsigned char* sites;
  size_t sites_bytes;
};
enum { MAX_OOB_KERNELS = 64 };
static struct CUfunc_st oob_functions[MAX_OOB_KERNELS];
static int oob_count;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int next_stream = 1, faulted, sticky;
static struct CUfunc_st saxpy_function, fill_function, spin_function, other_function;
static spin_t ptds_spin;  /* a spinning kernel on the per-thread streams (one for all threads: enough here) */
static int context_token;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void log_call(const char* call, struct CUstream_st* s) {
  const char* path = getenv("FAKE_CUDA_LOG");
  if (!path) return;
  FILE* f = fopen(path, "a");
  if (!f) return;
  if (s == LEGACY) fprintf(f, "%s legacy\n", call);
  else if (s == PER_THREAD || !s) fprintf(f, "%s ptds\n", call);
  else fprintf(f, "%s s%d%s\n", call, s->id, s->capturing ? " capturing" : "");
  fclose(f);
}

/* ---- running work ------------------------------------------------------------------------------------ */

/* Whether a spinning kernel still runs; once its flag is set, it ends (seen = 1) and is forgotten. */
static int spinning(spin_t* spin) {
  if (!spin->flag) return 0;
  if (!__atomic_load_n(spin->flag, __ATOMIC_ACQUIRE)) return 1;
  *spin->seen = 1;
  spin->flag = NULL;
  return 0;
}

/* For fake_nccl.c: a kernel of another library that spins on `s` until *flag != 0 (NCCL's, waiting for a
 * peer that never comes, until ncclCommAbort ends it). On a capturing stream it is recorded into the graph, and
 * spins on the stream each launch of it runs on. */
void fake_cuda_spin(struct CUstream_st* s, volatile int32_t* flag, int32_t* seen) {
  pthread_mutex_lock(&lock);
  if (s && s != PER_THREAD && s->capturing) {
    if (s->count == s->capacity) {
      s->capacity = s->capacity ? 2 * s->capacity : 16;
      s->ops = realloc(s->ops, s->capacity * sizeof *s->ops);
    }
    s->ops[s->count++] = (op_t){.kind = SPIN, .flag = flag, .seen = seen};
  } else if (s && s != PER_THREAD) {
    s->spin = (spin_t){flag, seen};
  }
  pthread_mutex_unlock(&lock);
}

/* For fake_nccl.c: the graph `s` captures holds a reference on `*refs`, as NCCL's persistent plans are held by a
 * CUDA user object the graph retains: +1 for the graph, +1 for each executable graph instantiated from it, -1
 * as each is destroyed (NCCL 2.26 and later wait in ncclCommDestroy and ncclCommAbort until the count is 0). */
void fake_cuda_graph_ref(struct CUstream_st* s, int32_t* refs) {
  pthread_mutex_lock(&lock);
  if (s && s != PER_THREAD && s->capturing) {
    if (s->count == s->capacity) {
      s->capacity = s->capacity ? 2 * s->capacity : 16;
      s->ops = realloc(s->ops, s->capacity * sizeof *s->ops);
    }
    s->ops[s->count++] = (op_t){.kind = REF, .refs = refs};
    __atomic_add_fetch(refs, 1, __ATOMIC_ACQ_REL);
  }
  pthread_mutex_unlock(&lock);
}

/* For fake_nccl.c: whether `s` is capturing a graph. */
int fake_cuda_capturing(struct CUstream_st* s) { return s && s != PER_THREAD && s->capturing; }

/* A blocking synchronize on a spinning kernel: logged, then waits for the flag (up to 10 s). */
static void block_on(spin_t* spin, const char* call) {
  if (!spinning(spin)) return;
  char line[128];
  snprintf(line, sizeof line, "%s blocked", call);
  log_call(line, NULL);
  for (int i = 0; i < 100000 && spinning(spin); i++) nanosleep(&(struct timespec){0, 100000}, NULL);
  if (spin->flag) {
    *spin->seen = -1;
    spin->flag = NULL;
  }
}

static void run(const op_t* op) {
  switch (op->kind) {
    case KERNEL: {
      uintptr_t x = (uintptr_t)op->x, y = (uintptr_t)op->y;
      if (op->oob && !op->oob->module->record[0]) {
        uint32_t* record = op->oob->module->record;
        record[0] = op->oob->site + 1, record[1] = op->grid_x - 1, record[2] = record[3] = 0;
      }
      if (op->fill)
        for (int64_t i = 0; i < op->n && i < (int64_t)op->threads; i++) op->y[i] = op->a;
      if (!op->saxpy) return;
      if (x >> 40 == 1 || y >> 40 == 1) {
        faulted = 1;
        return;
      }
      for (int64_t i = 0; i < op->n && i < (int64_t)op->threads; i++) op->y[i] = op->a * op->x[i] + op->y[i];
      break;
    }
    case COPY: memmove(op->dst, op->src, op->bytes); break;
    case RECORD: op->event->time = now(); break;
    case WAIT: break;  /* everything before has run already */
    case SPIN: break;  /* submit() sets it spinning on its stream */
    case REF: break;
  }
}

/* Runs `op` now, or records it into the stream's capture. */
static CUresult submit(struct CUstream_st* s, const op_t* op) {
  if (sticky) return sticky;
  if (s && s != PER_THREAD && s->capturing) {
    if (s->count == s->capacity) {
      s->capacity = s->capacity ? 2 * s->capacity : 16;
      s->ops = realloc(s->ops, s->capacity * sizeof *s->ops);
    }
    s->ops[s->count++] = *op;
    return OK;
  }
  if (op->kind == SPIN && s && s != PER_THREAD) s->spin = (spin_t){op->flag, op->seen};
  run(op);
  return OK;
}

/* A call that waits for work: where a kernel's fault shows first. */
static CUresult waited(void) {
  if (faulted) sticky = ILLEGAL_ADDRESS;
  return sticky;
}

/* ---- the driver API ---------------------------------------------------------------------------------- */

CUresult cuInit(unsigned flags) { return flags ? INVALID_VALUE : OK; }
CUresult cuDriverGetVersion(int* v) { *v = 12040; return OK; }
CUresult cuGetErrorName(CUresult e, const char** name) {
  *name = e == OK ? "CUDA_SUCCESS" : e == NOT_READY ? "CUDA_ERROR_NOT_READY"
        : e == ILLEGAL_ADDRESS ? "CUDA_ERROR_ILLEGAL_ADDRESS" : e == INVALID_CONTEXT ? "CUDA_ERROR_INVALID_CONTEXT"
        : e == 2 ? "CUDA_ERROR_OUT_OF_MEMORY" : "CUDA_ERROR_INVALID_VALUE";
  return OK;
}
CUresult cuGetErrorString(CUresult e, const char** text) {
  *text = e == ILLEGAL_ADDRESS ? "an illegal memory access was encountered" : e == 2 ? "out of memory"
        : "fake driver error";
  return OK;
}
CUresult cuDeviceGetCount(int* n) { *n = 1; return OK; }
CUresult cuDeviceGet(int* d, int ordinal) { *d = ordinal; return ordinal ? INVALID_VALUE : OK; }
CUresult cuDeviceGetName(char* name, int length, int d) {
  (void)d;
  snprintf(name, (size_t)length, "Fake GPU");
  return OK;
}
CUresult cuDeviceGetAttribute(int* v, int attribute, int d) {
  (void)d;
  switch (attribute) {
    case 1: *v = 1024; break;                /* threads per block */
    case 2: case 3: *v = 1024; break;        /* block x, y */
    case 4: *v = 64; break;                  /* block z */
    case 5: *v = 2147483647; break;          /* grid x */
    case 6: case 7: *v = 65535; break;       /* grid y, z */
    case 10: *v = 32; break;                 /* warp */
    case 16: *v = getenv("FAKE_CUDA_SMS") ? atoi(getenv("FAKE_CUDA_SMS")) : 4; break;  /* SMs */
    case 75: *v = 9; break;                  /* compute capability 9.0: runs the test image's sm_90a */
    case 76: *v = 0; break;
    case 97: *v = 232448; break;             /* shared memory per block, opted in */
#ifndef FAKE_CUDA_NO_POOLS
    case 115: *v = 1; break;                 /* memory pools supported */
#endif
    default: *v = 0;
  }
  return OK;
}
CUresult cuDeviceTotalMem_v2(size_t* bytes, int d) { (void)d; *bytes = (size_t)1 << 30; return OK; }
CUresult cuDevicePrimaryCtxRetain(void** ctx, int d) { (void)d; *ctx = &context_token; return OK; }
CUresult cuDevicePrimaryCtxRelease_v2(int d) { (void)d; return OK; }
/* How many times the context is pushed on this thread: the driver encodes tensor maps only in a current one. */
static _Thread_local int current_depth;
CUresult cuCtxPushCurrent_v2(void* ctx) {
  if (ctx != &context_token) return INVALID_VALUE;
  current_depth++;
  return OK;
}
CUresult cuCtxPopCurrent_v2(void** ctx) {
  if (!current_depth) return INVALID_CONTEXT;
  current_depth--;
  *ctx = &context_token;
  return OK;
}
CUresult cuCtxSynchronize(void) { log_call("cuCtxSynchronize", NULL); return waited(); }
CUresult cuCtxGetStreamPriorityRange(int* least, int* greatest) { *least = 0; *greatest = -5; return OK; }

/* The initializer `= {b, b, …}` of the PTX array `name` (zero-filled to its declared size). */
static unsigned char* ptx_array(const char* ptx, const char* name, size_t* bytes) {
  const char* at = strstr(ptx, name);
  if (!at) return NULL;
  *bytes = strtoul(at + strlen(name), NULL, 10);
  unsigned char* data = calloc(*bytes ? *bytes : 1, 1);
  const char *p = strstr(at, "= {"), *end = strchr(at, ';');
  if (p > end) p = NULL;  /* an all-zero array has no initializer */
  for (size_t i = 0; p && i < *bytes && *p != '}'; i++) {
    char* end;
    data[i] = (unsigned char)strtoul(p + (i ? 1 : 3), &end, 10);
    p = end;
  }
  return data;
}

CUresult cuModuleLoadDataEx(void** module, const void* image, unsigned n, int* options, void** values) {
  (void)n, (void)options, (void)values;
  struct module* m = calloc(1, sizeof *m);
  if (strstr(image, "__tessera_fault[16]")) {
    m->record = calloc(4, sizeof *m->record);
    m->sites = ptx_array(image, "__tessera_fault_sites[", &m->sites_bytes);
  }
  *module = m;
  return OK;
}
CUresult cuModuleUnload(void* module) {
  struct module* m = module;
  free(m->record);
  free(m->sites);
  free(m);
  return OK;
}
CUresult cuModuleGetGlobal_v2(CUdeviceptr* p, size_t* bytes, void* module, const char* name) {
  struct module* m = module;
  if (m->record && strcmp(name, "__tessera_fault") == 0) *p = (uintptr_t)m->record, *bytes = 16;
  else if (m->sites && strcmp(name, "__tessera_fault_sites") == 0) *p = (uintptr_t)m->sites, *bytes = m->sites_bytes;
  else return NOT_FOUND;
  return OK;
}
/* The first site of kernel `name` in the module's table (kernel name, report; …). */
static uint32_t first_site(const struct module* m, const char* name) {
  uint32_t site = 0;
  for (size_t at = 0; at < m->sites_bytes; site++) {
    const char* kernel = (const char*)m->sites + at;
    at += strlen(kernel) + 1;
    if (strcmp(kernel, name) == 0) return site;
    at += strlen((const char*)m->sites + at) + 1;
  }
  return site;
}
CUresult cuModuleGetFunction(struct CUfunc_st** f, void* module, const char* name) {
  struct module* m = module;
  size_t n = strlen(name);
  if (m->record && n > 4 && strcmp(name + n - 4, "_oob") == 0 && oob_count < MAX_OOB_KERNELS) {
    uint32_t site = first_site(m, name);
    for (int i = 0; i < oob_count; i++)  /* one handle per kernel, as the driver gives */
      if (oob_functions[i].module == m && oob_functions[i].site == site) return *f = &oob_functions[i], OK;
    *f = &oob_functions[oob_count++];
    **f = (struct CUfunc_st){m, site};
    return OK;
  }
  *f = strcmp(name, "saxpy") == 0        ? &saxpy_function
       : strcmp(name, "fill_fixed") == 0 ? &fill_function
       : strcmp(name, "spin_until") == 0 ? &spin_function
                                         : &other_function;
  return OK;
}
/* Logs what it was asked to describe and writes "TMAP" and the rank into the map, so a test can see the maps
 * reach the kernel's first parameters. */
CUresult cuTensorMapEncodeTiled(void* map, int dtype, unsigned rank, void* address, const uint64_t* dims,
                                const uint64_t* strides, const unsigned* box, const unsigned* element_strides,
                                int interleave, int swizzle, int l2, int oob) {
  (void)address, (void)element_strides, (void)interleave, (void)l2, (void)oob;
  if ((uintptr_t)map % 64) return INVALID_VALUE;
  if (!current_depth) return INVALID_CONTEXT;  /* what a real driver says (seen on an H200, driver 580) */
  const char* path = getenv("FAKE_CUDA_LOG");
  FILE* f = path ? fopen(path, "a") : NULL;
  if (f) {
    fprintf(f, "cuTensorMapEncodeTiled dtype=%d rank=%u dims=", dtype, rank);
    for (unsigned i = 0; i < rank; i++) fprintf(f, "%s%llu", i ? "x" : "", (unsigned long long)dims[i]);
    fprintf(f, " strides=");
    for (unsigned i = 0; i + 1 < rank; i++) fprintf(f, "%s%llu", i ? "x" : "", (unsigned long long)strides[i]);
    fprintf(f, " box=");
    for (unsigned i = 0; i < rank; i++) fprintf(f, "%s%u", i ? "x" : "", box[i]);
    fprintf(f, " swizzle=%d\n", swizzle);
    fclose(f);
  }
  memset(map, 0, 128);
  memcpy(map, "TMAP", 4);
  ((unsigned char*)map)[4] = (unsigned char)rank;
  return OK;
}

CUresult cuFuncSetAttribute(struct CUfunc_st* f, int attribute, int value) { (void)f, (void)attribute, (void)value; return OK; }

CUresult cuLaunchKernel(struct CUfunc_st* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned smem, struct CUstream_st* s, void** params, void** extra) {
  (void)f, (void)smem, (void)extra;
  pthread_mutex_lock(&lock);
  log_call("cuLaunchKernel", s);
  if (params && params[0] && memcmp(params[0], "TMAP", 4) == 0) {  /* a kernel given tensor maps: which ranks */
    const char* path = getenv("FAKE_CUDA_LOG");
    FILE* lf = path ? fopen(path, "a") : NULL;
    if (lf) {
      fprintf(lf, "params: map rank %d, map rank %d, then A at %p, grid %u\n", ((unsigned char*)params[0])[4],
              ((unsigned char*)params[1])[4], *(void**)params[2], gx);
      fclose(lf);
    }
  }
  op_t op = {.kind = KERNEL, .saxpy = f == &saxpy_function, .threads = gx * gy * gz * bx * by * bz,
             .oob = f->module ? f : NULL, .grid_x = gx};
  if (f == &spin_function && (!s || s == PER_THREAD || !s->capturing)) {  /* spin_until(flag, seen, F) */
    spin_t* spin = !s || s == PER_THREAD ? &ptds_spin : &s->spin;
    memcpy((void*)&spin->flag, params[0], sizeof spin->flag);
    memcpy(&spin->seen, params[1], sizeof spin->seen);
  }
  if (f == &fill_function) {  /* fill_fixed(out, value, N) */
    op.fill = 1;
    memcpy(&op.y, params[0], sizeof op.y);
    memcpy(&op.a, params[1], sizeof op.a);
    memcpy(&op.n, params[2], sizeof op.n);
  }
  if (op.saxpy) {  /* the values are taken now, as the driver does */
    memcpy(&op.a, params[0], sizeof op.a);
    memcpy(&op.x, params[1], sizeof op.x);
    memcpy(&op.y, params[2], sizeof op.y);
    memcpy(&op.n, params[3], sizeof op.n);
  }
  CUresult r = submit(s, &op);
  pthread_mutex_unlock(&lock);
  return r;
}

CUresult cuStreamCreateWithPriority(struct CUstream_st** s, unsigned flags, int priority) {
  pthread_mutex_lock(&lock);
  *s = calloc(1, sizeof **s);
  (*s)->id = next_stream++;
  const char* path = getenv("FAKE_CUDA_LOG");
  FILE* f = path ? fopen(path, "a") : NULL;
  if (f) {
    fprintf(f, "cuStreamCreateWithPriority s%d flags=%u priority=%d\n", (*s)->id, flags, priority);
    fclose(f);
  }
  pthread_mutex_unlock(&lock);
  return OK;
}
CUresult cuStreamDestroy_v2(struct CUstream_st* s) {
  log_call("cuStreamDestroy", s);
  free(s->ops);
  free(s);
  return OK;
}
CUresult cuStreamSynchronize(struct CUstream_st* s) {
  log_call("cuStreamSynchronize", s);
  block_on(s && s != PER_THREAD && s != LEGACY ? &s->spin : &ptds_spin, "cuStreamSynchronize");
  return waited();
}
CUresult cuStreamQuery(struct CUstream_st* s) {
  log_call("cuStreamQuery", s);
  if (spinning(s && s != PER_THREAD ? &s->spin : &ptds_spin)) return NOT_READY;
  return waited();
}
CUresult cuStreamWaitEvent(struct CUstream_st* s, struct CUevent_st* e, unsigned flags) {
  pthread_mutex_lock(&lock);
  log_call(flags ? "cuStreamWaitEvent external" : "cuStreamWaitEvent", s);
  CUresult r = submit(s, &(op_t){.kind = WAIT, .event = e});
  pthread_mutex_unlock(&lock);
  return r;
}

CUresult cuEventCreate(struct CUevent_st** e, unsigned flags) { (void)flags; *e = calloc(1, sizeof **e); return OK; }
CUresult cuEventDestroy_v2(struct CUevent_st* e) { free(e); return OK; }
static CUresult record(struct CUevent_st* e, struct CUstream_st* s, const char* call) {
  pthread_mutex_lock(&lock);
  log_call(call, s);
  CUresult r = submit(s, &(op_t){.kind = RECORD, .event = e});
  e->spin = s && s != PER_THREAD && !s->capturing ? s->spin : (spin_t){0};
  pthread_mutex_unlock(&lock);
  return r;
}
CUresult cuEventRecord(struct CUevent_st* e, struct CUstream_st* s) { return record(e, s, "cuEventRecord"); }
CUresult cuEventQuery(struct CUevent_st* e) { return spinning(&e->spin) ? NOT_READY : waited(); }
CUresult cuEventSynchronize(struct CUevent_st* e) {
  log_call("cuEventSynchronize", NULL);
  block_on(&e->spin, "cuEventSynchronize");
  return waited();
}
CUresult cuEventElapsedTime(float* ms, struct CUevent_st* a, struct CUevent_st* b) {
  *ms = (float)((b->time - a->time) * 1e3);
  return sticky;
}

static CUresult copy(struct CUstream_st* s, void* dst, const void* src, size_t bytes, const char* call) {
  pthread_mutex_lock(&lock);
  log_call(call, s);
  CUresult r = submit(s, &(op_t){.kind = COPY, .dst = dst, .src = src, .bytes = bytes});
  pthread_mutex_unlock(&lock);
  return r;
}
CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr sp, size_t n, struct CUstream_st* s) {
  return copy(s, (void*)(uintptr_t)d, (const void*)(uintptr_t)sp, n, "cuMemcpyAsync");
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void* sp, size_t n, struct CUstream_st* s) {
  return copy(s, (void*)(uintptr_t)d, sp, n, "cuMemcpyHtoDAsync");
}
CUresult cuMemcpyDtoHAsync_v2(void* d, CUdeviceptr sp, size_t n, struct CUstream_st* s) {
  return copy(s, d, (const void*)(uintptr_t)sp, n, "cuMemcpyDtoHAsync");
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr sp, size_t n, struct CUstream_st* s) {
  return copy(s, (void*)(uintptr_t)d, (const void*)(uintptr_t)sp, n, "cuMemcpyDtoDAsync");
}
/* The synchronous copies: the backend no longer uses them (NULL-stream copies go to the per-thread stream),
 * but it still loads them. */
CUresult cuMemcpy(CUdeviceptr d, CUdeviceptr sp, size_t n) { return cuMemcpyAsync(d, sp, n, NULL); }
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void* sp, size_t n) { return cuMemcpyHtoDAsync_v2(d, sp, n, NULL); }
CUresult cuMemcpyDtoH_v2(void* d, CUdeviceptr sp, size_t n) { return cuMemcpyDtoHAsync_v2(d, sp, n, NULL); }
CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr sp, size_t n) { return cuMemcpyDtoDAsync_v2(d, sp, n, NULL); }

/* Device memory is host memory. $FAKE_CUDA_MEMORY_LIMIT (bytes) caps what the driver holds for the process —
 * live allocations plus what memory pools keep — beyond which an allocation fails with
 * CUDA_ERROR_OUT_OF_MEMORY, as a full GPU's does. */
static size_t held_bytes;
static int over_limit(size_t more) {
  const char* limit = getenv("FAKE_CUDA_MEMORY_LIMIT");
  return limit && held_bytes + more > (size_t)strtoull(limit, NULL, 10);
}
/* The size of each live block, for the accounting: a short list is enough for the tests. */
typedef struct block { void* ptr; size_t bytes; void* pool; } block_t;  /* pool: of cuMemAllocFromPoolAsync */
static block_t* live;
static size_t live_count, live_capacity;
static void* take_memory(size_t bytes, void* pool) {
  void* m = NULL;
  if (over_limit(bytes) || posix_memalign(&m, 256, bytes ? bytes : 1)) return NULL;
  if (live_count == live_capacity) {
    live_capacity = live_capacity ? 2 * live_capacity : 64;
    live = realloc(live, live_capacity * sizeof *live);
  }
  live[live_count++] = (block_t){m, bytes, pool};
  held_bytes += bytes;
  return m;
}
__attribute__((unused)) static block_t* live_block(void* m) {
  for (size_t i = 0; i < live_count; i++)
    if (live[i].ptr == m) return &live[i];
  return NULL;
}
static void give_memory(void* m) {
  for (size_t i = 0; i < live_count; i++)
    if (live[i].ptr == m) {
      held_bytes -= live[i].bytes;
      live[i] = live[--live_count];
      break;
    }
  free(m);
}

/* A real driver may synchronize the device in either (cuMemFree does): with $FAKE_CUDA_LOG_MEMORY set they are
 * logged too ("cuMemFree ptds"), for tests that look for such points; else not, as the other tests expect. */
CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
  if (getenv("FAKE_CUDA_LOG_MEMORY")) log_call("cuMemAlloc", NULL);
  pthread_mutex_lock(&lock);
  void* m = take_memory(bytes, NULL);
  pthread_mutex_unlock(&lock);
  if (!m) return 2;
  *p = (CUdeviceptr)(uintptr_t)m;
  return sticky;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
  if (getenv("FAKE_CUDA_LOG_MEMORY")) log_call("cuMemFree", NULL);
  pthread_mutex_lock(&lock);
  give_memory((void*)(uintptr_t)p);
  pthread_mutex_unlock(&lock);
  return OK;
}

#ifndef FAKE_CUDA_NO_POOLS
/* Memory pools (stream-ordered allocation, CUDA 11.2): a pool keeps freed blocks (all of them: the backend sets
 * the release threshold to the maximum, which is checked) and hands one of the same size out again; TrimTo(0)
 * gives them back. Logged under $FAKE_CUDA_LOG_MEMORY, with the stream ("cuMemFreeAsync s2"); an allocation
 * or free on a capturing stream is refused (CUDA would make it a graph node: the backend must not). A pool's
 * allocation of a block its free left busy on another stream is what a real pool's reuse would order: the fake
 * runs work as it is queued, so there is nothing pending to order after. */
struct CUmemPoolHandle_st {
  block_t* kept;
  size_t count, capacity;
  unsigned long long threshold;
  int internal_dependencies;
};
CUresult cuMemPoolCreate(struct CUmemPoolHandle_st** pool, const void* props) {
  const int* p = props;  /* alloc type, handle types, location type, location id */
  if (p[0] != 1 || p[1] != 0 || p[2] != 1 || p[3] != 0) return INVALID_VALUE;
  *pool = calloc(1, sizeof **pool);
  (*pool)->internal_dependencies = 1;
  if (getenv("FAKE_CUDA_LOG_MEMORY")) log_call("cuMemPoolCreate", NULL);
  return OK;
}
static void pool_trim(struct CUmemPoolHandle_st* pool) {
  for (size_t i = 0; i < pool->count; i++) give_memory(pool->kept[i].ptr);
  pool->count = 0;
}
CUresult cuMemPoolDestroy(struct CUmemPoolHandle_st* pool) {
  if (getenv("FAKE_CUDA_LOG_MEMORY")) log_call("cuMemPoolDestroy", NULL);
  pthread_mutex_lock(&lock);
  pool_trim(pool);
  pthread_mutex_unlock(&lock);
  free(pool->kept);
  free(pool);
  return OK;
}
CUresult cuMemPoolSetAttribute(struct CUmemPoolHandle_st* pool, int attribute, void* value) {
  if (attribute == 4) pool->threshold = *(unsigned long long*)value;
  else if (attribute == 3) pool->internal_dependencies = *(int*)value;
  else return INVALID_VALUE;
  return OK;
}
CUresult cuMemPoolTrimTo(struct CUmemPoolHandle_st* pool, size_t keep) {
  if (getenv("FAKE_CUDA_LOG_MEMORY")) log_call("cuMemPoolTrimTo", NULL);
  if (keep) return INVALID_VALUE;  /* the backend trims to 0 only */
  pthread_mutex_lock(&lock);
  pool_trim(pool);
  pthread_mutex_unlock(&lock);
  return OK;
}
CUresult cuMemAllocFromPoolAsync(CUdeviceptr* p, size_t bytes, struct CUmemPoolHandle_st* pool,
                                 struct CUstream_st* s) {
  if (getenv("FAKE_CUDA_LOG_MEMORY")) log_call("cuMemAllocFromPoolAsync", s);
  if (s && s != PER_THREAD && s != LEGACY && s->capturing) return 900;  /* CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED */
  if (pool->threshold != ~0ull || pool->internal_dependencies) return INVALID_VALUE;  /* as the backend sets */
  pthread_mutex_lock(&lock);
  void* m = NULL;
  for (size_t i = 0; i < pool->count && !m; i++)
    if (pool->kept[i].bytes == bytes) {
      m = pool->kept[i].ptr;
      pool->kept[i] = pool->kept[--pool->count];
    }
  if (!m) m = take_memory(bytes, pool);
  pthread_mutex_unlock(&lock);
  if (!m) return 2;
  *p = (CUdeviceptr)(uintptr_t)m;
  return sticky;
}
CUresult cuMemFreeAsync(CUdeviceptr p, struct CUstream_st* s) {
  if (getenv("FAKE_CUDA_LOG_MEMORY")) log_call("cuMemFreeAsync", s);
  if (s && s != PER_THREAD && s != LEGACY && s->capturing) return 900;
  pthread_mutex_lock(&lock);
  block_t* b = live_block((void*)(uintptr_t)p);
  struct CUmemPoolHandle_st* pool = b ? b->pool : NULL;
  size_t bytes = b ? b->bytes : 0;
  if (!b) {
    pthread_mutex_unlock(&lock);
    return INVALID_VALUE;
  }
  if (pool) {
    if (pool->count == pool->capacity) {
      pool->capacity = pool->capacity ? 2 * pool->capacity : 64;
      pool->kept = realloc(pool->kept, pool->capacity * sizeof *pool->kept);
    }
    pool->kept[pool->count++] = (block_t){(void*)(uintptr_t)p, bytes};
  } else {
    give_memory((void*)(uintptr_t)p);
  }
  pthread_mutex_unlock(&lock);
  return sticky;
}
#endif

CUresult cuMemHostAlloc(void** p, size_t bytes, unsigned flags) {
  log_call(flags == 3 ? "cuMemHostAlloc portable+devicemap" : "cuMemHostAlloc", NULL);
  return posix_memalign(p, 4096, bytes) ? 2 : OK;
}
CUresult cuMemFreeHost(void* p) { log_call("cuMemFreeHost", NULL); free(p); return OK; }
CUresult cuMemHostRegister_v2(void* p, size_t bytes, unsigned flags) {
  (void)p, (void)bytes;
  log_call(flags == 3 ? "cuMemHostRegister portable+devicemap" : "cuMemHostRegister", NULL);
  return OK;
}
CUresult cuMemHostUnregister(void* p) { (void)p; log_call("cuMemHostUnregister", NULL); return OK; }
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* d, void* p, unsigned flags) {
  (void)flags;
  *d = (CUdeviceptr)(uintptr_t)p;  /* unified addressing: the same address */
  return OK;
}

#ifndef FAKE_CUDA_NO_GRAPHS
/* A graph's or executable graph's references (REF ops) taken (+1) or dropped (-1). */
static void graph_refs(const op_t* ops, size_t count, int32_t delta) {
  for (size_t i = 0; i < count; i++)
    if (ops[i].kind == REF) __atomic_add_fetch(ops[i].refs, delta, __ATOMIC_ACQ_REL);
}

CUresult cuEventRecordWithFlags(struct CUevent_st* e, struct CUstream_st* s, unsigned flags) {
  return record(e, s, flags ? "cuEventRecordWithFlags external" : "cuEventRecordWithFlags");
}
CUresult cuStreamBeginCapture_v2(struct CUstream_st* s, int mode) {
  s->capturing = 1;
  const char* path = getenv("FAKE_CUDA_LOG");
  FILE* f = path ? fopen(path, "a") : NULL;
  if (f) {
    fprintf(f, "cuStreamBeginCapture s%d mode=%d\n", s->id, mode);
    fclose(f);
  }
  return sticky;
}
CUresult cuStreamEndCapture(struct CUstream_st* s, struct CUgraph_st** g) {
  log_call("cuStreamEndCapture", s);
  *g = calloc(1, sizeof **g);
  (*g)->ops = s->ops;
  (*g)->count = s->count;
  s->ops = NULL;
  s->count = s->capacity = 0;
  s->capturing = 0;
  return sticky;
}
CUresult cuGraphInstantiateWithFlags(struct CUgraphExec_st** exec, struct CUgraph_st* g, unsigned long long flags) {
  (void)flags;
  *exec = calloc(1, sizeof **exec);
  (*exec)->ops = malloc((g->count + 1) * sizeof *g->ops);
  memcpy((*exec)->ops, g->ops, g->count * sizeof *g->ops);
  (*exec)->count = g->count;
  graph_refs(g->ops, g->count, 1);
  const char* path = getenv("FAKE_CUDA_LOG");
  FILE* f = path ? fopen(path, "a") : NULL;
  if (f) {
    fprintf(f, "cuGraphInstantiate nodes=%zu\n", g->count);
    fclose(f);
  }
  return OK;
}
CUresult cuGraphLaunch(struct CUgraphExec_st* exec, struct CUstream_st* s) {
  pthread_mutex_lock(&lock);
  log_call("cuGraphLaunch", s);
  CUresult r = sticky;
  for (size_t i = 0; i < exec->count && !r; i++) r = submit(s, &exec->ops[i]);
  pthread_mutex_unlock(&lock);
  return r;
}
CUresult cuGraphExecDestroy(struct CUgraphExec_st* exec) {
  graph_refs(exec->ops, exec->count, -1);
  free(exec->ops);
  free(exec);
  return OK;
}
CUresult cuGraphDestroy(struct CUgraph_st* g) {
  graph_refs(g->ops, g->count, -1);
  free(g->ops);
  free(g);
  return OK;
}
#endif
