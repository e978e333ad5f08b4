/* comm_nccl.c — the NCCL transport of communicators (comm_backend.h), for CUDA contexts: device memory,
 * operations queued on the Tessera stream's CUstream.
 *
 * NCCL is dlopen()ed, so libtessera builds and loads without it: $TESSERA_NCCL_LIBRARY (a path or soname),
 * else a libnccl.so.2 the process has loaded already (PyTorch's, once torch is imported: one NCCL in the
 * process, whichever wheel brought it), else the nvidia-nccl wheel's site-packages/nvidia/nccl/lib/libnccl.so.2
 * beside the installed package (two levels above tessera/lib/libtessera.so), else the system's libnccl.so.2.
 * The types and constants below are nccl.h's stable ABI (NCCL 2.17 and later; ncclCommSplit from 2.18).
 *
 * NVLink multicast (NVLS) stays off: NCCL_NVLS_ENABLE=0 is put in the environment before the first
 * communicator starts, unless the user set the variable (then theirs is NCCL's).
 *
 * Never a hang, and no NCCL thread per operation. Each communicator is created non-blocking
 * (ncclConfig_t.blocking = 0): initialization and split return at once, and their completion is polled with
 * ncclCommGetAsyncError against the call's deadline; past it, or once tsrCommAbort was called, the communicator
 * is aborted (ncclCommAbort) and the call returns TSR_ERROR_TIMEOUT or TSR_ERROR_LAUNCH_FAILED. It is then split
 * at once, every rank in one color in rank order, into a blocking communicator (blocking = 1, the same maxCTAs)
 * on which the calling thread enqueues every operation: a non-blocking group launches each operation from a new
 * thread of NCCL's (group.cc), about 100 µs of host time per operation (147 µs per 1 MiB all_reduce on 4x H200,
 * 44 µs blocking). That split is polled on the non-blocking parent, so it is bounded like initialization, and
 * tsrCommSplit splits the parent and derives the new communicator's blocking one the same way. With units
 * (maxCTAs), a second blocking split of the parent without the cap, `wide`, runs the operations issued alone
 * (tsr_comm_call_t.alone: a compiled function's last collective, with nothing computing beside it); every path
 * that aborts or destroys the communicator takes it too, and the monitor asks it for NCCL's errors. Peers are
 * connected at initialization (NCCL_RUNTIME_CONNECT=0 is put in the environment unless the user set it), so an
 * enqueue never waits for a peer. An operation queued on a stream runs later, on the GPU:
 * a CUDA event recorded after it is watched by the communicator's monitor thread, which aborts the
 * communicator when the event has not completed by the operation's deadline (a peer died or stopped) or when
 * ncclCommGetAsyncError reports an error; ncclCommAbort ends NCCL's kernels, so the stream moves on, and the
 * fault is reported by the next operation or tsrCommGetAsyncError (a dead or stopped peer leaves the kernels
 * spinning: the monitor's abort of both communicators ends them). A call's own return value is not trusted to
 * mean done: ncclCommSplit returns ncclSuccess while the split still runs on NCCL's thread, and any call on a
 * communicator whose state (ncclCommGetAsyncError) is still ncclInProgress fails with "Attempt to use
 * communicator before the previous operation returned ncclSuccess"; so initialization and split poll the
 * state of every communicator they touch until it is ncclSuccess, whatever they returned.
 *
 * The NULL stream is never handed to NCCL: it would be CUDA's per-thread stream (cuda_backend.c), which names
 * the stream of whichever thread launches (a non-blocking communicator's is NCCL's own: NVIDIA/nccl#1976), and
 * a NULL-stream call must return with the GPU done. A NULL-stream operation runs on a stream of the
 * communicator's, after the calling thread's per-thread stream's work, and has finished when it returns (that
 * stream is polled to the deadline). */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm_backend.h"
#include "cuda_driver.h"
#include "driver_loader.h"
#include "errors.h"
#include "objects.h"

/* ---- nccl.h's ABI ----------------------------------------------------------------------------------- */

typedef struct ncclComm* ncclComm_t;
typedef int ncclResult_t;
enum { ncclSuccess = 0, ncclInProgress = 7 };
typedef struct {
  char internal[128];
} ncclUniqueId;
typedef enum {
  ncclInt8 = 0, ncclUint8 = 1, ncclInt32 = 2, ncclUint32 = 3, ncclInt64 = 4, ncclUint64 = 5, ncclFloat16 = 6,
  ncclFloat32 = 7, ncclFloat64 = 8, ncclBfloat16 = 9
} ncclDataType_t;
typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 } ncclRedOp_t;

/* ncclConfig_t as of NCCL 2.17; NCCL reads `size` and `version` to know which fields a caller's struct has. */
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
} ncclConfig_t;
#define NCCL_CONFIG_MAGIC 0xcafebeefu
#define NCCL_CONFIG_VERSION 21700u /* NCCL_VERSION(2, 17, 0) */
#define NCCL_SPLIT_NOCOLOR (-1)

_Static_assert(sizeof(ncclUniqueId) == TSR_COMM_UNIQUE_ID_BYTES, "an NCCL unique id is a tsr_comm_unique_id_t");

static struct {
  ncclResult_t (*GetVersion)(int*);
  ncclResult_t (*GetUniqueId)(ncclUniqueId*);
  ncclResult_t (*CommInitRankConfig)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*);
  ncclResult_t (*CommSplit)(ncclComm_t, int, int, ncclComm_t*, ncclConfig_t*);  /* NULL before NCCL 2.18 */
  ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t*);
  ncclResult_t (*CommAbort)(ncclComm_t);
  ncclResult_t (*CommCount)(ncclComm_t, int*);
  ncclResult_t (*CommUserRank)(ncclComm_t, int*);
  ncclResult_t (*CommDestroy)(ncclComm_t);
  const char* (*GetErrorString)(ncclResult_t);
  const char* (*GetLastError)(ncclComm_t);
  ncclResult_t (*AllReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, CUstream);
  ncclResult_t (*ReduceScatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, CUstream);
  ncclResult_t (*AllGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, CUstream);
  ncclResult_t (*Broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, CUstream);
  ncclResult_t (*Send)(const void*, size_t, ncclDataType_t, int, ncclComm_t, CUstream);
  ncclResult_t (*Recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, CUstream);
  ncclResult_t (*GroupStart)(void);
  ncclResult_t (*GroupEnd)(void);
} N;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[1024];  /* why NCCL cannot be used; "" once loaded */
static int nccl_version;

/* The wheel's libnccl.so.2 relative to this library installed from a wheel: site-packages/tessera/lib/
 * libtessera.so -> site-packages/nvidia/nccl/lib/libnccl.so.2. */
static void wheel_candidate(char* out, size_t size) {
  Dl_info info;
  out[0] = 0;
  if (!dladdr(load_error, &info) || !info.dli_fname) return;
  const char* slash = strrchr(info.dli_fname, '/');
  if (slash)
    snprintf(out, size, "%.*s/../../nvidia/nccl/lib/libnccl.so.2", (int)(slash - info.dli_fname), info.dli_fname);
}

static void load(void) {
  char wheel[PATH_MAX + 48];
  wheel_candidate(wheel, sizeof wheel);
  const char* candidates[] = {"libnccl.so.2", NULL, NULL};
  /* dlopen of the soname returns a copy already loaded (matched by DT_SONAME) wherever it came from, so a
   * PyTorch imported first shares its NCCL instead of a second copy (maybe another version) joining it. */
  void* loaded = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
  if (loaded)
    dlclose(loaded);
  else if (wheel[0] && access(wheel, R_OK) == 0)
    candidates[0] = wheel, candidates[1] = "libnccl.so.2";
  tsr_driver_library_t lib;
  char why[768];
  if (!tsr_driver_open(&lib, "TESSERA_NCCL_LIBRARY", candidates, "NCCL (libnccl.so.2)", why, sizeof why)) {
    snprintf(load_error, sizeof load_error, "%s; install the nvidia-nccl-cu13 wheel (pip install nvidia-nccl-cu13)",
             why);
    return;
  }
  const char* hint = "(NCCL 2.17 or later has it)";
#define RESOLVE(field, symbol) \
  if (!tsr_driver_resolve(&lib, symbol, &N.field, hint, load_error, sizeof load_error)) return
  RESOLVE(GetVersion, "ncclGetVersion");
  RESOLVE(GetUniqueId, "ncclGetUniqueId");
  RESOLVE(CommInitRankConfig, "ncclCommInitRankConfig");
  RESOLVE(CommGetAsyncError, "ncclCommGetAsyncError");
  RESOLVE(CommAbort, "ncclCommAbort");
  RESOLVE(CommCount, "ncclCommCount");
  RESOLVE(CommUserRank, "ncclCommUserRank");
  RESOLVE(CommDestroy, "ncclCommDestroy");
  RESOLVE(GetErrorString, "ncclGetErrorString");
  RESOLVE(GetLastError, "ncclGetLastError");
  RESOLVE(AllReduce, "ncclAllReduce");
  RESOLVE(ReduceScatter, "ncclReduceScatter");
  RESOLVE(AllGather, "ncclAllGather");
  RESOLVE(Broadcast, "ncclBroadcast");
  RESOLVE(Send, "ncclSend");
  RESOLVE(Recv, "ncclRecv");
  RESOLVE(GroupStart, "ncclGroupStart");
  RESOLVE(GroupEnd, "ncclGroupEnd");
#undef RESOLVE
  void* split = dlsym(lib.handle, "ncclCommSplit");
  memcpy(&N.CommSplit, &split, sizeof split);
  N.GetVersion(&nccl_version);
  /* Before any communicator exists, so NCCL reads it at its initialization; once, as setenv is not safe
   * against another thread's getenv. */
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  /* A blocking communicator's first operation would otherwise connect to its peers inside the enqueue, where a
   * missing peer holds the caller past any deadline (the monitor cannot abort a call made under the state's
   * lock): connected during the bounded initialization and split instead. NCCL reads it once per process, so
   * where another library (PyTorch) started NCCL first, the user exports it. */
  setenv("NCCL_RUNTIME_CONNECT", "0", 0);
  load_error[0] = 0;
}

/* ---- a communicator's state ------------------------------------------------------------------------ */

/* An operation queued on a stream: the event recorded after it, and when it must have completed. */
typedef struct inflight {
  CUevent done;
  uint64_t deadline_ns;
  const char* function;
} inflight_t;

typedef struct nccl_state {
  const tsr_cuda_driver_t* cu;
  CUdevice device;
  CUcontext context;           /* device 0's primary context, retained: the Tessera context's */
  pthread_mutex_t lock;        /* guards everything below: NCCL calls on `comm` are made holding it */
  ncclComm_t comm;             /* NULL once aborted; the one operations run on */
  ncclComm_t parent;           /* the non-blocking communicator the blocking `comm` was split from, kept for
                                * splits, whose waits it bounds; NULL once aborted */
  ncclComm_t wide;             /* with units: a blocking sibling of `comm` (the same ranks, split from `parent`)
                                * without the maxCTAs cap, for operations issued alone (tsr_comm_call_t); NULL
                                * without units and once aborted */
  uint32_t units;              /* maxCTAs of its operations (tsr_comm_init_t.units; 0: NCCL's choice), kept
                                * for its splits */
  tsr_status_t fault;          /* what the monitor found (TIMEOUT, LAUNCH_FAILED), reported once asked */
  char fault_message[512];
  inflight_t* inflight;
  size_t count, capacity;
  pthread_cond_t wake;         /* the monitor: work to watch, or stop */
  bool stopping;
  bool monitoring;             /* the monitor thread was started */
  pthread_t monitor;
  CUstream own;                /* NULL-stream operations run here (created at the first) */
  ncclComm_t doomed[3];        /* `comm`, `wide` and `parent` once aborted, for the reaper (abort_locked) */
  bool reaping;                /* the reaper thread was started: joined before the state is freed */
  pthread_t reaper;
} nccl_state_t;

static tsr_status_t nccl_fail(ncclResult_t r, ncclComm_t comm, const char* function, const char* what) {
  const char* last = comm ? N.GetLastError(comm) : "";
  return tsr_fail(TSR_ERROR_LAUNCH_FAILED, "%s: %s failed: %s%s%s", function, what, N.GetErrorString(r),
                  last && *last ? ": " : "", last ? last : "");
}

/* The reaper: ncclCommAbort of the communicators abort_locked took from the state. */
static void* reap(void* arg) {
  nccl_state_t* s = arg;
  bool current = !s->cu->cuCtxPushCurrent(s->context);
  for (int i = 0; i < 3; i++)
    if (s->doomed[i]) N.CommAbort(s->doomed[i]);
  if (current) {
    CUcontext popped;
    s->cu->cuCtxPopCurrent(&popped);
  }
  return NULL;
}

/* Aborts the communicator (state locked): NCCL's kernels end, its peers are not told. ncclCommAbort sets NCCL's
 * abort flag first, so the kernels end at once, and then, from NCCL 2.26 on, waits as ncclCommDestroy does until
 * every CUDA graph holding one of the communicator's operations is destroyed (init.cc, commDestroySync) — a
 * graph the caller holds, maybe the one whose replay just timed out. Called here, under the lock, it held the
 * monitor in NCCL and every thread asking the state for the fault behind it, the replay's caller included: a
 * hang, not a status (tests/gpu/test_comm_capture_gpu.py's dead peer). So the handles leave the state now (no
 * later call can use them) and a thread of the state's own aborts them, joined when the state is freed, which
 * is after the graphs holding the communicator are (they hold it: tsr_comm_node_hold; a context frees its
 * graphs before its communicators). Where no thread can be started the abort runs here. */
static void abort_locked(nccl_state_t* s) {
  if (!s->comm && !s->wide && !s->parent) return;
  s->doomed[0] = s->comm;
  s->doomed[1] = s->wide;
  s->doomed[2] = s->parent;
  s->comm = s->wide = s->parent = NULL;
  if (s->reaping || pthread_create(&s->reaper, NULL, reap, s) != 0) {
    for (int i = 0; i < 3; i++)
      if (s->doomed[i]) N.CommAbort(s->doomed[i]);
    return;
  }
  s->reaping = true;
}

static tsr_status_t enter(const nccl_state_t* s, const char* function) {
  CUresult r = s->cu->cuCtxPushCurrent(s->context);
  if (!r) return TSR_SUCCESS;
  char why[256];
  tsr_cuda_describe(r, why, sizeof why);
  return tsr_fail(TSR_ERROR_INIT_FAIL, "%s: making the GPU's context current: %s", function, why);
}

static void leave(const nccl_state_t* s) {
  CUcontext popped;
  s->cu->cuCtxPopCurrent(&popped);
}

/* A poll's pause. For its first YIELD_NS a wait yields the core instead of sleeping: Linux lengthens any sleep
 * to its 50 µs timer slack, and a short NULL-stream operation or a split completes in a few µs, so sleeping
 * from the first poll added tens of µs to every call. Then sleeps growing to 1 ms. */
#define YIELD_NS 200000
typedef struct backoff {
  uint64_t start;
  long ns;
} backoff_t;

static backoff_t backoff(void) { return (backoff_t){.start = tsr_comm_now_ns(), .ns = 1000}; }

static void pause_ns(backoff_t* b) {
  if (tsr_comm_now_ns() - b->start < YIELD_NS) {
    sched_yield();
    return;
  }
  nanosleep(&(struct timespec){0, b->ns}, NULL);
  if (b->ns < 1000000) b->ns *= 2;
}

/* After a call on a non-blocking communicator that returned `r` (state locked, context current): polls
 * ncclCommGetAsyncError until the call is done, the deadline passes (abort: TSR_ERROR_TIMEOUT) or the
 * communicator is aborted (TSR_ERROR_LAUNCH_FAILED). `*comm` is the communicator polled (a split's new one). */
static tsr_status_t settle(nccl_state_t* s, ncclComm_t* comm, ncclResult_t r, const tsr_comm_call_t* call,
                           const char* what) {
  backoff_t ns = backoff();
  while (r == ncclInProgress) {
    if (call->aborted && atomic_load(call->aborted)) {
      if (*comm != s->comm && *comm != s->wide && *comm != s->parent) N.CommAbort(*comm), *comm = NULL;
      abort_locked(s);
      return tsr_fail(TSR_ERROR_LAUNCH_FAILED, "%s: the communicator was aborted during %s", call->function, what);
    }
    if (tsr_comm_now_ns() >= call->deadline_ns) {
      if (*comm != s->comm && *comm != s->wide && *comm != s->parent) N.CommAbort(*comm), *comm = NULL;
      abort_locked(s);
      return tsr_fail(TSR_ERROR_TIMEOUT, "%s: %s did not complete before the communicator's timeout (a peer is "
                      "missing or stopped); NCCL's communicator was aborted (ncclCommAbort)", call->function, what);
    }
    pthread_mutex_unlock(&s->lock);
    pause_ns(&ns);
    pthread_mutex_lock(&s->lock);
    if (!*comm) return tsr_fail(TSR_ERROR_LAUNCH_FAILED, "%s: the communicator was aborted", call->function);
    if (N.CommGetAsyncError(*comm, &r)) r = ncclInProgress + 1000;  /* the query itself failed */
  }
  return r == ncclSuccess ? TSR_SUCCESS : nccl_fail(r, *comm, call->function, what);
}

/* Which of the communicators operations run on (`comm`, `wide`) reports an asynchronous error, in `*r`; NULL
 * when neither does (state locked). */
static ncclComm_t async_failed(nccl_state_t* s, ncclResult_t* r) {
  ncclComm_t ops[2] = {s->comm, s->wide};
  for (int i = 0; i < 2; i++)
    if (ops[i] && !N.CommGetAsyncError(ops[i], r) && *r != ncclSuccess && *r != ncclInProgress) return ops[i];
  return NULL;
}

/* The monitor: watches the events of queued operations against their deadlines and NCCL's asynchronous
 * error, and aborts the communicator on either. */
static void* monitor(void* arg) {
  nccl_state_t* s = arg;
  s->cu->cuCtxPushCurrent(s->context);
  pthread_mutex_lock(&s->lock);
  while (!s->stopping) {
    if (!s->count) {
      pthread_cond_wait(&s->wake, &s->lock);
      continue;
    }
    size_t kept = 0;
    uint64_t now = tsr_comm_now_ns();
    for (size_t i = 0; i < s->count; i++) {
      inflight_t* f = &s->inflight[i];
      CUresult q = s->cu->cuEventQuery(f->done);
      if (q == CUDA_ERROR_NOT_READY && now < f->deadline_ns && s->comm) {
        s->inflight[kept++] = *f;
        continue;
      }
      if (q == CUDA_ERROR_NOT_READY && s->comm && !s->fault) {
        s->fault = TSR_ERROR_TIMEOUT;
        snprintf(s->fault_message, sizeof s->fault_message, "%s: the operation queued on the stream did not "
                 "complete before the communicator's timeout (a peer is missing or stopped); NCCL's communicator "
                 "was aborted (ncclCommAbort)", f->function);
        abort_locked(s);
      }
      s->cu->cuEventDestroy(f->done);
    }
    s->count = kept;
    ncclResult_t async = ncclSuccess;
    ncclComm_t failed = async_failed(s, &async);
    if (failed) {
      s->fault = TSR_ERROR_LAUNCH_FAILED;
      snprintf(s->fault_message, sizeof s->fault_message, "NCCL reported an asynchronous error: %s: %s; the "
               "communicator was aborted (ncclCommAbort)", N.GetErrorString(async), N.GetLastError(failed));
      abort_locked(s);
    }
    pthread_mutex_unlock(&s->lock);
    nanosleep(&(struct timespec){0, 1000000}, NULL);
    pthread_mutex_lock(&s->lock);
  }
  pthread_mutex_unlock(&s->lock);
  CUcontext popped;
  s->cu->cuCtxPopCurrent(&popped);
  return NULL;
}

/* ---- the transport ---------------------------------------------------------------------------------- */

static tsr_status_t available(struct tsr_context* ctx) {
  if (strcmp(ctx->backend->name, "cuda") != 0)
    return tsr_fail(TSR_ERROR_UNSUPPORTED, "the nccl backend moves CUDA memory, and this context's backend is %s "
                    "(use the mpi backend)", ctx->backend->name);
  pthread_once(&load_once, load);
  if (load_error[0]) return tsr_fail(TSR_ERROR_UNSUPPORTED, "%s", load_error);
  return TSR_SUCCESS;
}

static tsr_status_t unique_id(struct tsr_context* ctx, tsr_comm_unique_id_t* out) {
  (void)ctx;
  ncclUniqueId id;
  ncclResult_t r = N.GetUniqueId(&id);
  if (r) return nccl_fail(r, NULL, "tsrCommGetUniqueId", "ncclGetUniqueId");
  memcpy(out->bytes, id.internal, sizeof id.internal);
  return TSR_SUCCESS;
}

/* `units`: at most that many CTAs per operation (so that a GEMM leaving them free runs beside it); 0: NCCL's
 * choice. */
static ncclConfig_t config_of(uint32_t units, int blocking) {
  int ctas = units ? (int)units : INT_MIN;
  return (ncclConfig_t){.size = sizeof(ncclConfig_t), .magic = NCCL_CONFIG_MAGIC, .version = NCCL_CONFIG_VERSION,
                        .blocking = blocking, .cgaClusterSize = INT_MIN, .minCTAs = INT_MIN, .maxCTAs = ctas,
                        .netName = NULL, .splitShare = INT_MIN};
}

static void state_free(nccl_state_t* s) {
  if (s->reaping) pthread_join(s->reaper, NULL);
  pthread_cond_destroy(&s->wake);
  pthread_mutex_destroy(&s->lock);
  s->cu->cuDevicePrimaryCtxRelease(s->device);
  free(s->inflight);
  free(s);
}

/* A state over the GPU's primary context, without a communicator yet. */
static tsr_status_t state_new(const char* function, nccl_state_t** out) {
  nccl_state_t* s = calloc(1, sizeof *s);
  if (!s) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "%s: out of memory", function);
  s->cu = tsr_cuda_driver(NULL);
  CUresult r = s->cu->cuDeviceGet(&s->device, 0);
  if (!r) r = s->cu->cuDevicePrimaryCtxRetain(&s->context, s->device);
  if (r) {
    free(s);
    char why[256];
    tsr_cuda_describe(r, why, sizeof why);
    return tsr_fail(TSR_ERROR_INIT_FAIL, "%s: the GPU's context: %s", function, why);
  }
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->wake, NULL);
  *out = s;
  return TSR_SUCCESS;
}

/* Starts the monitor of `s`, whose communicators have settled. */
static tsr_status_t state_start(nccl_state_t* s, const char* function) {
  int err = pthread_create(&s->monitor, NULL, monitor, s);
  if (err) return tsr_fail(TSR_ERROR_INIT_FAIL, "%s: cannot start the communicator's monitor thread (error %d)",
                           function, err);
  s->monitoring = true;
  return TSR_SUCCESS;
}

/* Splits `*from` (a non-blocking communicator of `s`, its `comm` or `parent`; state locked, context current) with
 * `config` and waits for the new communicator, polling to the call's deadline (past it `s` is aborted). `*out`:
 * the new one, NULL for color -1 or on failure. */
static tsr_status_t split_locked(nccl_state_t* s, ncclComm_t* from, int color, int key, ncclConfig_t* config,
                                 const tsr_comm_call_t* call, ncclComm_t* out) {
  *out = NULL;
  if (!*from) return tsr_fail(TSR_ERROR_LAUNCH_FAILED, "%s: the communicator was aborted", call->function);
  ncclComm_t comm = NULL;
  tsr_status_t st;
  ncclResult_t r = N.CommSplit(*from, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &comm, config);
  /* The split's progress shows on the parent, and NCCL writes `comm` from its thread once the new one exists
   * (NULL until then); then the new one settles in turn. */
  if (r == ncclSuccess || r == ncclInProgress) st = settle(s, from, ncclInProgress, call, "ncclCommSplit");
  else st = nccl_fail(r, *from, call->function, "ncclCommSplit");
  for (backoff_t ns = backoff(); !st && color >= 0 && !__atomic_load_n(&comm, __ATOMIC_ACQUIRE);) {
    if (tsr_comm_now_ns() >= call->deadline_ns) {
      abort_locked(s);
      st = tsr_fail(TSR_ERROR_TIMEOUT, "%s: ncclCommSplit gave no communicator before the communicator's "
                    "timeout; NCCL's communicator was aborted (ncclCommAbort)", call->function);
    }
    pthread_mutex_unlock(&s->lock);
    pause_ns(&ns);
    pthread_mutex_lock(&s->lock);
  }
  if (!st && comm) st = settle(s, &comm, ncclInProgress, call, "ncclCommSplit");
  if (st && comm) N.CommAbort(comm);
  else if (!st) *out = comm;
  return st;
}

/* State locked, context current: `s->comm`, non-blocking and settled, becomes `s->parent`,
 * and operations run on a blocking split of it over the same ranks in the same order (color 0, key `rank`), with
 * the same units. The split is bounded by the deadline like initialization: ncclCommSplit queues the child's
 * initialization as a job of the parent's group (init.cc: ncclAsyncLaunch(..., parent)), so the group takes the
 * parent's non-blocking mode (runs on NCCL's thread, in progress on the parent, polled here), and aborting the
 * parent aborts that initialization too (the parent's childAbortFlag is the child's abort flag). */
static tsr_status_t derive_blocking(nccl_state_t* s, int rank, const tsr_comm_call_t* call) {
  ncclConfig_t config = config_of(s->units, 1);
  s->parent = s->comm;
  s->comm = NULL;
  ncclComm_t comm;
  tsr_status_t st = split_locked(s, &s->parent, 0, rank, &config, call, &comm);
  s->comm = comm;
  /* With units, a second blocking split the same way without maxCTAs: `wide`, for operations issued alone
   * (nothing computes beside them, so a cap only slows them). Every rank has the same units (comm.h), so
   * every rank splits it. Both are used on one stream at a time, so their operations stay ordered. */
  if (!st && s->units) {
    ncclConfig_t uncapped = config_of(0, 1);
    st = split_locked(s, &s->parent, 0, rank, &uncapped, call, &comm);
    s->wide = comm;
  }
  return st;
}

static void destroy(void* state, bool broken) {
  nccl_state_t* s = state;
  pthread_mutex_lock(&s->lock);
  s->stopping = true;
  pthread_cond_signal(&s->wake);
  pthread_mutex_unlock(&s->lock);
  if (s->monitoring) pthread_join(s->monitor, NULL);
  bool entered = !enter(s, "tsrReleaseComm");
  for (size_t i = 0; i < s->count; i++) s->cu->cuEventDestroy(s->inflight[i].done);
  if (s->own && entered) s->cu->cuStreamDestroy(s->own);
  /* Broken: peers may be gone, and ncclCommDestroy could wait for them. */
  if (s->comm && broken) N.CommAbort(s->comm);
  else if (s->comm) N.CommDestroy(s->comm);
  if (s->wide && broken) N.CommAbort(s->wide);
  else if (s->wide) N.CommDestroy(s->wide);
  if (s->parent && broken) N.CommAbort(s->parent);
  else if (s->parent) N.CommDestroy(s->parent);
  if (entered) leave(s);
  state_free(s);
}

static tsr_status_t create(const tsr_comm_init_t* init, const tsr_comm_call_t* call, void** out_state, int* out_rank,
                           int* out_size) {
  if (init->world < 0)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: the nccl backend needs RANK and WORLD_SIZE (it has no launcher "
                    "of its own)", call->function);
  nccl_state_t* s;
  tsr_status_t st = state_new(call->function, &s);
  if (st) return st;
  if ((st = enter(s, call->function))) {
    state_free(s);
    return st;
  }
  ncclUniqueId id;
  memcpy(id.internal, init->id->bytes, sizeof id.internal);
  s->units = init->units;
  ncclConfig_t config = config_of(s->units, 0);
  ncclComm_t comm = NULL;
  pthread_mutex_lock(&s->lock);
  ncclResult_t r = N.CommInitRankConfig(&comm, init->world, id, init->rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) st = nccl_fail(r, NULL, call->function, "ncclCommInitRankConfig");
  else st = settle(s, &comm, ncclInProgress, call, "ncclCommInitRankConfig");  /* done once its state says so */
  if (st && comm) N.CommAbort(comm);
  else if (!st) s->comm = comm;
  if (!st) st = derive_blocking(s, init->rank, call);
  if (!st) st = state_start(s, call->function);
  if (st) abort_locked(s);
  pthread_mutex_unlock(&s->lock);
  leave(s);
  if (st) {
    state_free(s);
    return st;
  }
  *out_state = s;
  *out_rank = init->rank;
  *out_size = init->world;
  return TSR_SUCCESS;
}

static tsr_status_t split(void* state, int color, int key, const tsr_comm_call_t* call, void** out_state,
                          int* out_rank, int* out_size) {
  nccl_state_t* s = state;
  if (!N.CommSplit)
    return tsr_fail(TSR_ERROR_UNSUPPORTED, "%s: this NCCL (%d) has no ncclCommSplit (NCCL 2.18 or later has it)",
                    call->function, nccl_version);
  nccl_state_t* sub;
  tsr_status_t st = state_new(call->function, &sub);
  if (st) return st;
  if ((st = enter(s, call->function))) {
    state_free(sub);
    return st;
  }
  sub->units = s->units;
  ncclConfig_t config = config_of(sub->units, 0);
  ncclComm_t comm = NULL;
  pthread_mutex_lock(&s->lock);
  /* From the non-blocking parent, whose split is polled to the deadline (the blocking one's would hold the
   * caller until NCCL returned). */
  st = split_locked(s, &s->parent, color, key, &config, call, &comm);
  if (!st && comm && (N.CommCount(comm, out_size) || N.CommUserRank(comm, out_rank)))
    st = tsr_fail(TSR_ERROR_LAUNCH_FAILED, "%s: NCCL cannot say the new communicator's rank and size", call->function);
  pthread_mutex_unlock(&s->lock);
  if (st && comm) N.CommAbort(comm);
  if (st || !comm) {  /* color -1: this rank is in no new communicator */
    leave(s);
    state_free(sub);
    if (!st) *out_state = NULL;
    return st;
  }
  pthread_mutex_lock(&sub->lock);
  sub->comm = comm;
  st = derive_blocking(sub, *out_rank, call);
  if (!st) st = state_start(sub, call->function);
  if (st) abort_locked(sub);
  pthread_mutex_unlock(&sub->lock);
  leave(s);
  if (st) {
    state_free(sub);
    return st;
  }
  *out_state = sub;
  return TSR_SUCCESS;
}

/* ---- operations ------------------------------------------------------------------------------------- */

static ncclDataType_t nccl_type(tsr_dtype_t dtype, bool* native) {
  *native = true;
  switch (dtype) {
    case TSR_DTYPE_F32: return ncclFloat32;
    case TSR_DTYPE_F64: return ncclFloat64;
    case TSR_DTYPE_F16: return ncclFloat16;
    case TSR_DTYPE_BF16: return ncclBfloat16;
    case TSR_DTYPE_I8: return ncclInt8;
    case TSR_DTYPE_U8:
    case TSR_DTYPE_BOOL: return ncclUint8;
    case TSR_DTYPE_I32: return ncclInt32;
    case TSR_DTYPE_U32: return ncclUint32;
    case TSR_DTYPE_I64:
    case TSR_DTYPE_INDEX: return ncclInt64;
    case TSR_DTYPE_U64: return ncclUint64;
    default: *native = false; return ncclUint8;  /* moved as bytes: no reduction reaches here with it */
  }
}

static ncclRedOp_t nccl_op(tsr_reduce_op_t op) {
  switch (op) {
    case TSR_REDUCE_PROD: return ncclProd;
    case TSR_REDUCE_MAX: return ncclMax;
    case TSR_REDUCE_MIN: return ncclMin;
    case TSR_REDUCE_AVG: return ncclAvg;
    default: return ncclSum;
  }
}

typedef enum { ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, ALL_TO_ALL, BROADCAST, SEND, RECV } op_kind_t;

/* One operation in NCCL's terms: counts in elements of `type` (a dtype NCCL lacks is moved as bytes). */
typedef struct nccl_op {
  op_kind_t kind;
  const void* send;
  void* recv;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  int peer;  /* broadcast's root, send's and recv's peer */
  size_t element_bytes;  /* of `type` */
} nccl_op_t;

static nccl_op_t describe(op_kind_t kind, const void* send, void* recv, size_t count, tsr_dtype_t dtype, int peer) {
  bool native;
  nccl_op_t o = {.kind = kind, .send = send, .recv = recv, .count = count, .type = nccl_type(dtype, &native),
                 .peer = peer};
  o.element_bytes = native ? tsr_comm_dtype_size(dtype) : 1;
  if (!native) o.count *= tsr_comm_dtype_size(dtype);
  return o;
}

/* Enqueues `o` on `stream` (state locked, context current). */
static ncclResult_t issue(const nccl_op_t* o, ncclComm_t comm, CUstream stream) {
  switch (o->kind) {
    case ALL_REDUCE: return N.AllReduce(o->send, o->recv, o->count, o->type, o->op, comm, stream);
    case REDUCE_SCATTER: return N.ReduceScatter(o->send, o->recv, o->count, o->type, o->op, comm, stream);
    case ALL_GATHER: return N.AllGather(o->send, o->recv, o->count, o->type, comm, stream);
    case BROADCAST: return N.Broadcast(o->send, o->recv, o->count, o->type, o->peer, comm, stream);
    case SEND: return N.Send(o->send, o->count, o->type, o->peer, comm, stream);
    case RECV: return N.Recv(o->recv, o->count, o->type, o->peer, comm, stream);
    case ALL_TO_ALL: break;
  }
  /* All-to-all: a send and a receive per peer in one group (NCCL's own recipe). */
  int size = 0;
  ncclResult_t r = N.CommCount(comm, &size);
  size_t chunk = o->count * o->element_bytes;
  ncclResult_t g = r ? r : N.GroupStart();
  for (int peer = 0; !r && !g && peer < size; peer++) {
    r = N.Send((const char*)o->send + (size_t)peer * chunk, o->count, o->type, peer, comm, stream);
    if (!r) r = N.Recv((char*)o->recv + (size_t)peer * chunk, o->count, o->type, peer, comm, stream);
  }
  if (!g) g = N.GroupEnd();  /* ended even after a failed call, so NCCL's group state is clean */
  return r ? r : g;
}

/* Waits for `stream`'s work (a NULL-stream operation has finished when it returns), polling against the
 * deadline; past it the communicator is aborted. Context current. */
static tsr_status_t finish_now(nccl_state_t* s, CUstream stream, const tsr_comm_call_t* call, const char* what) {
  backoff_t ns = backoff();
  for (;;) {
    CUresult r = s->cu->cuStreamQuery(stream);
    if (r == CUDA_SUCCESS) return TSR_SUCCESS;
    if (r != CUDA_ERROR_NOT_READY) {
      char why[256];
      tsr_cuda_describe(r, why, sizeof why);
      return tsr_fail(TSR_ERROR_LAUNCH_FAILED, "%s: %s failed on the GPU: %s", call->function, what, why);
    }
    bool aborted = call->aborted && atomic_load(call->aborted);
    if (aborted || tsr_comm_now_ns() >= call->deadline_ns) {
      pthread_mutex_lock(&s->lock);
      abort_locked(s);
      pthread_mutex_unlock(&s->lock);
      if (aborted)
        return tsr_fail(TSR_ERROR_LAUNCH_FAILED, "%s: the communicator was aborted during %s", call->function, what);
      return tsr_fail(TSR_ERROR_TIMEOUT, "%s: %s did not complete before the communicator's timeout (a peer is "
                      "missing or stopped); NCCL's communicator was aborted (ncclCommAbort)", call->function, what);
    }
    pause_ns(&ns);
  }
}

/* The stream of a NULL-stream operation (state locked, context current): the communicator's own, made to wait
 * for the work the calling thread queued on its per-thread stream. */
static tsr_status_t own_stream(nccl_state_t* s, const tsr_comm_call_t* call, CUstream* out) {
  CUresult r = s->own ? CUDA_SUCCESS : s->cu->cuStreamCreateWithPriority(&s->own, CU_STREAM_DEFAULT, 0);
  CUevent before = NULL;
  if (!r) r = s->cu->cuEventCreate(&before, CU_EVENT_DEFAULT);
  if (!r) r = s->cu->cuEventRecord(before, TSR_CU_STREAM_PER_THREAD);
  if (!r) r = s->cu->cuStreamWaitEvent(s->own, before, 0);
  if (before) s->cu->cuEventDestroy(before);  /* the wait keeps what it needs */
  if (r) {
    char why[256];
    tsr_cuda_describe(r, why, sizeof why);
    return tsr_fail(TSR_ERROR_LAUNCH_FAILED, "%s: the communicator's stream for the NULL stream: %s", call->function,
                    why);
  }
  *out = s->own;
  return TSR_SUCCESS;
}

/* Hands the monitor an event recorded on `stream` after the work queued there so far (state locked, context
 * current): that work must be done by call->deadline_ns. */
static tsr_status_t watch_locked(nccl_state_t* s, CUstream stream, const tsr_comm_call_t* call, const char* what) {
  inflight_t f = {.deadline_ns = call->deadline_ns, .function = call->function};
  CUresult r = s->cu->cuEventCreate(&f.done, CU_EVENT_DEFAULT);
  if (!r && (r = s->cu->cuEventRecord(f.done, stream))) s->cu->cuEventDestroy(f.done);
  if (!r && s->count == s->capacity) {
    size_t capacity = s->capacity ? 2 * s->capacity : 16;
    inflight_t* grown = realloc(s->inflight, capacity * sizeof *grown);
    if (grown) s->inflight = grown, s->capacity = capacity;
    else s->cu->cuEventDestroy(f.done), r = CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (r)
    return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "%s: %s is queued, but no event to watch it could be had",
                    call->function, what);
  s->inflight[s->count++] = f;
  pthread_cond_signal(&s->wake);
  return TSR_SUCCESS;
}

/* Runs one operation: enqueued on the call's stream and handed to the monitor, or for the NULL stream run on
 * the communicator's own and waited for. */
static tsr_status_t run(void* state, const nccl_op_t* o, const tsr_comm_call_t* call, const char* what) {
  nccl_state_t* s = state;
  tsr_status_t st = enter(s, call->function);
  if (st) return st;
  CUstream stream = call->queue ? tsr_cuda_queue_stream(call->queue) : NULL;
  pthread_mutex_lock(&s->lock);
  if (s->fault) {
    st = tsr_fail(s->fault, "%s", s->fault_message);
  } else if (!s->comm) {
    st = tsr_fail(TSR_ERROR_LAUNCH_FAILED, "%s: the communicator was aborted", call->function);
  } else if (call->queue || !(st = own_stream(s, call, &stream))) {
    /* Blocking: the calling thread has enqueued it when NCCL returns (never ncclInProgress). Alone, on the
     * uncapped sibling where there is one. */
    ncclComm_t comm = call->alone && s->wide ? s->wide : s->comm;
    ncclResult_t r = issue(o, comm, stream);
    if (r != ncclSuccess) st = nccl_fail(r, comm, call->function, what);
  }
  /* A recorded operation runs when the graph is launched (watched then): its event would mark nothing (CUDA
   * refuses to query an event recorded under capture), so only a queued one is watched now. */
  if (!st && call->queue && !call->recording) st = watch_locked(s, stream, call, what);
  pthread_mutex_unlock(&s->lock);
  if (!st && !call->queue) st = finish_now(s, stream, call, what);
  leave(s);
  return st;
}

/* The deterministic reduction (comm.h, tsrCommAllReduce): every rank's `total` elements gathered by NCCL into
 * device scratch, copied to the host once the stream has run them, combined there in the interpreter's tree
 * order (tsr_comm_tree_reduce, comm.c) and elements [first, first + count) of the result copied into `recv`.
 * Synchronous: the call returns with `recv` written, whatever the stream (bit-identical results cost the
 * overlap, size × total elements of traffic and a round trip through host memory). */
static tsr_status_t tree_reduce(nccl_state_t* s, const void* send, void* recv, size_t total, size_t first,
                                size_t count, tsr_dtype_t dtype, tsr_reduce_op_t op, const tsr_comm_call_t* call) {
  if (!tsr_comm_host_reducible(dtype, op))
    return tsr_fail(TSR_ERROR_UNSUPPORTED, "%s: the deterministic reduction of the nccl backend combines on the "
                    "host, which cannot reduce this dtype with this op", call->function);
  int size = 0;
  pthread_mutex_lock(&s->lock);
  if (s->comm) N.CommCount(s->comm, &size);
  pthread_mutex_unlock(&s->lock);
  size_t elem = tsr_comm_dtype_size(dtype), bytes = total * elem * (size_t)(size > 0 ? size : 1);
  void* host = malloc(bytes + total * elem);
  if (!host) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "%s: out of memory (%zu bytes)", call->function, bytes);
  void* reduced = (char*)host + bytes;
  tsr_status_t st = enter(s, call->function);
  if (st) {
    free(host);
    return st;
  }
  CUdeviceptr scratch = 0;
  CUresult r = s->cu->cuMemAlloc(&scratch, bytes);
  if (r) {
    leave(s);
    free(host);
    return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "%s: no device memory for the %d ranks' buffers (%zu bytes)",
                    call->function, size, bytes);
  }
  /* On the call's stream, after the work that wrote `send`; then waited for, as the host combines next. */
  nccl_op_t o = describe(ALL_GATHER, send, (void*)(uintptr_t)scratch, total, dtype, 0);
  const char* what = "ncclAllGather (of the deterministic reduction)";
  if (!(st = run(s, &o, call, what)) &&  /* on the NULL stream run has waited */
      !(st = call->queue ? finish_now(s, tsr_cuda_queue_stream(call->queue), call, what) : TSR_SUCCESS) &&
      (r = s->cu->cuMemcpyDtoH(host, scratch, bytes)))
    st = tsr_fail(TSR_ERROR_LAUNCH_FAILED, "%s: copying the gathered buffers to the host failed", call->function);
  if (!st) {
    tsr_comm_tree_reduce(dtype, op, host, size, total, reduced);
    if (s->cu->cuMemcpyHtoD((CUdeviceptr)(uintptr_t)recv, (char*)reduced + first * elem, count * elem))
      st = tsr_fail(TSR_ERROR_LAUNCH_FAILED, "%s: copying the result to the device failed", call->function);
  }
  s->cu->cuMemFree(scratch);
  leave(s);
  free(host);
  return st;
}

static tsr_status_t all_reduce(void* state, const void* send, void* recv, size_t count, tsr_dtype_t dtype,
                               tsr_reduce_op_t op, bool deterministic, const tsr_comm_call_t* call) {
  if (deterministic) return tree_reduce(state, send, recv, count, 0, count, dtype, op, call);
  nccl_op_t o = describe(ALL_REDUCE, send, recv, count, dtype, 0);
  o.op = nccl_op(op);
  return run(state, &o, call, "ncclAllReduce");
}

static tsr_status_t reduce_scatter(void* state, const void* send, void* recv, size_t count, tsr_dtype_t dtype,
                                   tsr_reduce_op_t op, bool deterministic, const tsr_comm_call_t* call) {
  if (deterministic) {
    nccl_state_t* s = state;
    int size = 0, rank = 0;
    pthread_mutex_lock(&s->lock);
    if (s->comm) N.CommCount(s->comm, &size), N.CommUserRank(s->comm, &rank);
    pthread_mutex_unlock(&s->lock);
    return tree_reduce(s, send, recv, count * (size_t)size, count * (size_t)rank, count, dtype, op, call);
  }
  nccl_op_t o = describe(REDUCE_SCATTER, send, recv, count, dtype, 0);
  o.op = nccl_op(op);
  return run(state, &o, call, "ncclReduceScatter");
}

static tsr_status_t all_gather(void* state, const void* send, void* recv, size_t count, tsr_dtype_t dtype,
                               const tsr_comm_call_t* call) {
  nccl_op_t o = describe(ALL_GATHER, send, recv, count, dtype, 0);
  return run(state, &o, call, "ncclAllGather");
}

static tsr_status_t all_to_all(void* state, const void* send, void* recv, size_t count, tsr_dtype_t dtype,
                               const tsr_comm_call_t* call) {
  nccl_op_t o = describe(ALL_TO_ALL, send, recv, count, dtype, 0);
  return run(state, &o, call, "the all-to-all (grouped ncclSend/ncclRecv)");
}

static tsr_status_t broadcast(void* state, const void* send, void* recv, size_t count, tsr_dtype_t dtype, int root,
                              const tsr_comm_call_t* call) {
  nccl_op_t o = describe(BROADCAST, send, recv, count, dtype, root);
  return run(state, &o, call, "ncclBroadcast");
}

static tsr_status_t send(void* state, const void* buf, size_t count, tsr_dtype_t dtype, int peer,
                         const tsr_comm_call_t* call) {
  nccl_op_t o = describe(SEND, buf, NULL, count, dtype, peer);
  return run(state, &o, call, "ncclSend");
}

static tsr_status_t recv(void* state, void* buf, size_t count, tsr_dtype_t dtype, int peer,
                         const tsr_comm_call_t* call) {
  nccl_op_t o = describe(RECV, NULL, buf, count, dtype, peer);
  return run(state, &o, call, "ncclRecv");
}

static tsr_status_t watch(void* state, const tsr_comm_call_t* call) {
  nccl_state_t* s = state;
  tsr_status_t st = enter(s, call->function);
  if (st) return st;
  pthread_mutex_lock(&s->lock);
  st = watch_locked(s, tsr_cuda_queue_stream(call->queue), call, "the graph's operations");
  pthread_mutex_unlock(&s->lock);
  leave(s);
  return st;
}

static void abort_comm(void* state) {
  nccl_state_t* s = state;
  bool entered = !enter(s, "tsrCommAbort");
  pthread_mutex_lock(&s->lock);
  abort_locked(s);
  pthread_mutex_unlock(&s->lock);
  if (entered) leave(s);
}

static tsr_status_t async_error(void* state) {
  nccl_state_t* s = state;
  tsr_status_t st = TSR_SUCCESS;
  pthread_mutex_lock(&s->lock);
  ncclResult_t r = ncclSuccess;
  ncclComm_t failed;
  if (s->fault) st = tsr_fail(s->fault, "%s", s->fault_message);
  else if ((failed = async_failed(s, &r)))
    st = nccl_fail(r, failed, "tsrCommGetAsyncError", "the communicator");
  pthread_mutex_unlock(&s->lock);
  return st;
}

const tsr_comm_transport_t tsr_comm_transport_nccl = {
    .name = "nccl",
    .backend = TSR_COMM_BACKEND_NCCL,
    .flags = TSR_COMM_TRANSPORT_DEVICE_QUEUE | TSR_COMM_TRANSPORT_CAPTURE | TSR_COMM_TRANSPORT_DETERMINISTIC,
    .available = available,
    .launched = NULL,
    .unique_id = unique_id,
    .create = create,
    .split = split,
    .all_reduce = all_reduce,
    .reduce_scatter = reduce_scatter,
    .all_gather = all_gather,
    .all_to_all = all_to_all,
    .broadcast = broadcast,
    .send = send,
    .recv = recv,
    .watch = watch,
    .abort = abort_comm,
    .async_error = async_error,
    .destroy = destroy,
};
