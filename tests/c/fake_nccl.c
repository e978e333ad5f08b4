/* fake_nccl.c — a stand-in for libnccl.so.2 with the entry points comm_nccl.c loads, so that the NCCL transport's
 * logic is tested without GPUs (tests/c/test_comm_nccl_fake.py, with tests/c/fake_cuda.c as the driver). It
 * writes one line per call to $FAKE_NCCL_LOG, with what NCCL would see: ranks, the unique id, the config,
 * $NCCL_NVLS_ENABLE at initialization, each operation's count, datatype and op codes and its CUstream (the
 * fake driver's "s3", or "ptds"; an all_reduce whose send and recv are one buffer says "inplace" before it).
 * Non-blocking communicators (comm_nccl.c creates each communicator so, then splits its blocking one from it)
 * behave as NCCL's do: after ncclCommInitRankConfig and ncclCommSplit (which returns ncclSuccess, as NCCL 2.18-2.2x's does) the
 * communicator's state stays ncclInProgress for a few ncclCommGetAsyncError polls, a split writes the new
 * communicator only when it completes, and a call on a communicator still in progress fails with NCCL's
 * "Attempt to use communicator before the previous operation returned ncclSuccess". An operation on the
 * per-thread stream ("ptds") runs on NCCL's own thread's per-thread stream, not the caller's
 * (NVIDIA/nccl#1976): its data is not there when the caller looks, so the fake moves none. A blocking
 * communicator (config.blocking = 1, made only by a split) enqueues from the caller's thread: an operation
 * returns ncclSuccess at once, and a split into it keeps the parent's ranks (comm_nccl.c splits every rank into
 * one color to make it).
 *
 * Data: every operation completes at once as if the other ranks gave zeros (all_reduce and broadcast copy
 * send to recv, all_gather puts send at this rank's block and zeros elsewhere, reduce_scatter takes this
 * rank's block; send and recv move nothing); with $FAKE_NCCL_LOG_CTAS set, each operation's line also names the
 * communicator's cap before the stream ("maxCTAs=N", or "uncapped"); the tests read the log, the GPU test checks the numbers. $FAKE_NCCL_HANG makes a peer go missing: "init" (initialization stays
 * in progress), "split" (a split stays in progress), "gpu" (the enqueue succeeds, and the stream stays busy — fake_cuda_spin — until ncclCommAbort ends the kernel), "async" (ncclCommGetAsyncError reports
 * ncclRemoteError once an operation was enqueued), "graph" (operations issued directly complete; one recorded
 * into a CUDA graph spins wherever the graph is launched, until ncclCommAbort: the peer died after the
 * instantiation). As NCCL 2.26 and later do, an operation recorded into a graph makes the graph (and each
 * executable graph made from it) hold its communicator, and ncclCommAbort and ncclCommDestroy wait until no
 * graph holds it (NCCL's abort flag set first, so its kernels end). */
#define _GNU_SOURCE /* RTLD_NOLOAD */
#include <limits.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int ncclResult_t;
enum { ok = 0, invalid_argument = 4, remote_error = 6, in_progress = 7 };
typedef struct {
  char internal[128];
} ncclUniqueId;
typedef struct {  /* the fields of ncclConfig_t the fake reads */
  size_t size;
  unsigned magic, version;
  int blocking;
  int cgaClusterSize, minCTAs, maxCTAs;
} config_prefix_t;

/* " maxCTAs=N" where a caller limits it (INT_MIN: NCCL's default), else "" */
static const char* ctas(const config_prefix_t* c) {
  static char text[32];
  if (c->maxCTAs == INT_MIN) return "";
  snprintf(text, sizeof text, " maxCTAs=%d", c->maxCTAs);
  return text;
}

struct ncclComm {
  int nranks, rank;
  int pending;  /* a hang mode keeps its last initialization or split in progress */
  int enqueued;
  int blocking; /* config.blocking */
  int busy;     /* ncclCommGetAsyncError polls left before the last init or split completes */
  struct ncclComm *child, **child_out;  /* a split's new communicator, written to *child_out on completion */
  int32_t graphs;  /* CUDA graphs and executable graphs holding an operation of it (fake_cuda_graph_ref) */
  int max_ctas;    /* its config's maxCTAs (INT_MIN: NCCL's default) */
};

#define POLLS 3  /* how many polls an initialization or a split stays in progress */
static const char* last_error = "";

/* NCCL's kernels spinning on a stream (mode "gpu"): they end when the communicator is aborted. */
static int32_t kernels_stop, kernels_seen;
static int ids;

static int hang(const char* mode) {
  const char* h = getenv("FAKE_NCCL_HANG");
  return h && strcmp(h, mode) == 0;
}

static void say(const char* format, ...) __attribute__((format(printf, 1, 2)));
static void say(const char* format, ...) {
  const char* path = getenv("FAKE_NCCL_LOG");
  FILE* f = path ? fopen(path, "a") : NULL;
  if (!f) return;
  va_list ap;
  va_start(ap, format);
  vfprintf(f, format, ap);
  va_end(ap);
  fputc('\n', f);
  fclose(f);
}

/* The fake driver's name of a stream: its id is the first field of its struct. */
static const char* stream_name(const void* stream, char* out, size_t size) {
  if (!stream || (uintptr_t)stream == 2) snprintf(out, size, "ptds");
  else snprintf(out, size, "s%d", *(const int*)stream);
  return out;
}

static size_t type_bytes(int type) { return type == 8 || type == 4 || type == 5 ? 8 : type == 6 || type == 9 ? 2
                                            : type == 2 || type == 3 || type == 7 ? 4 : 1; }

/* Whether an operation on `stream` lands where the caller looks: not on the per-thread stream, which names
 * NCCL's own thread's stream when NCCL launches there. */
static int lands(const void* stream) { return (uintptr_t)stream != 2; }

/* The fake driver's entry point `name` (libcuda.so.1, loaded RTLD_LOCAL by libtessera), or NULL. */
static void* driver_entry(const char* name) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  return driver ? dlsym(driver, name) : NULL;
}

/* An operation enqueued on `stream`: in mode "gpu" a kernel spinning there; in mode "graph" one recorded into
 * the graph a capturing stream makes, which spins wherever the graph is launched (the peer died after the
 * instantiation), while operations issued directly complete. */
static ncclResult_t enqueued(struct ncclComm* c, void* stream) {
  c->enqueued++;
  int (*capturing)(void*);
  void* is = driver_entry("fake_cuda_capturing");
  memcpy(&capturing, &is, sizeof is);
  if (capturing && capturing(stream)) {  /* NCCL's persistent plan: the graph holds the communicator */
    void (*ref)(void*, int32_t*);
    void* f = driver_entry("fake_cuda_graph_ref");
    memcpy(&ref, &f, sizeof f);
    if (ref) ref(stream, &c->graphs);
  }
  if (hang("gpu") || (hang("graph") && capturing && capturing(stream))) {
    void (*spin)(void*, volatile int32_t*, int32_t*);
    void* f = driver_entry("fake_cuda_spin");
    memcpy(&spin, &f, sizeof f);
    if (spin) spin(stream, &kernels_stop, &kernels_seen);
  }
  return ok;
}

ncclResult_t ncclGetVersion(int* v) { *v = 22703; return ok; }
const char* ncclGetErrorString(ncclResult_t r) {
  return r == remote_error ? "remote process exited or there was a network error" : "fake NCCL error";
}
const char* ncclGetLastError(struct ncclComm* c) {
  (void)c;
  return *last_error ? last_error : "fake NCCL's last error";
}

/* NCCL's ncclCommEnsureReady: a call before the previous one completed. */
static int not_ready(struct ncclComm* c) {
  if (!c->busy && !c->pending) return 0;
  last_error = "Attempt to use communicator before the previous operation returned ncclSuccess";
  say("refused: %s", last_error);
  return 1;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  memset(id, 0, sizeof *id);
  snprintf(id->internal, sizeof id->internal, "fake-nccl-id-%d", ++ids);
  say("ncclGetUniqueId");
  return ok;
}

ncclResult_t ncclCommInitRankConfig(struct ncclComm** comm, int nranks, ncclUniqueId id, int rank,
                                    config_prefix_t* config) {
  const char* nvls = getenv("NCCL_NVLS_ENABLE");
  say("ncclCommInitRankConfig nranks=%d rank=%d id=%.20s magic=%#x version=%u blocking=%d NCCL_NVLS_ENABLE=%s%s",
      nranks, rank, id.internal, config->magic, config->version, config->blocking, nvls ? nvls : "unset",
      ctas(config));
  if (rank < 0 || rank >= nranks) return invalid_argument;
  *comm = calloc(1, sizeof **comm);
  (*comm)->nranks = nranks;
  (*comm)->rank = rank;
  (*comm)->pending = hang("init");
  (*comm)->max_ctas = config->maxCTAs;
  (*comm)->busy = POLLS;
  return in_progress;
}

ncclResult_t ncclCommSplit(struct ncclComm* comm, int color, int key, struct ncclComm** out, config_prefix_t* c) {
  const char* connect = getenv("NCCL_RUNTIME_CONNECT");
  say("ncclCommSplit color=%d key=%d blocking=%d%s%s%s", color, key, c->blocking, ctas(c),
      c->blocking ? " NCCL_RUNTIME_CONNECT=" : "", c->blocking ? connect ? connect : "unset" : "");
  if (not_ready(comm)) return invalid_argument;
  *out = NULL;  /* until the split completes */
  if (color >= 0) {
    comm->child = calloc(1, sizeof *comm->child);
    /* this rank alone in its color (the fake knows no other process), but for a blocking one */
    comm->child->nranks = c->blocking ? comm->nranks : 1;
    comm->child->rank = c->blocking ? comm->rank : 0;
    comm->child->blocking = c->blocking;
    comm->child->max_ctas = c->maxCTAs;
    comm->child->busy = POLLS;
    comm->child_out = out;
  }
  comm->busy = POLLS;
  comm->pending = hang("split");
  return ok;
}

ncclResult_t ncclCommGetAsyncError(struct ncclComm* c, ncclResult_t* state) {
  if (c->busy && !--c->busy && c->child_out) {
    *c->child_out = c->child;
    c->child_out = NULL;
  }
  *state = c->pending || c->busy ? in_progress : hang("async") && c->enqueued ? remote_error : ok;
  return ok;
}

/* NCCL 2.26 and later (commDestroySync): destroying or aborting a communicator waits until every CUDA graph
 * holding one of its operations is destroyed. The fake waits up to 20 s, then says so and keeps `c` (NCCL
 * would wait forever); 0 once none holds it. */
static int wait_for_graphs(struct ncclComm* c, const char* call) {
  if (!__atomic_load_n(&c->graphs, __ATOMIC_ACQUIRE)) return 0;
  say("%s rank=%d waits for the graphs holding it", call, c->rank);
  for (int i = 0; i < 200000 && __atomic_load_n(&c->graphs, __ATOMIC_ACQUIRE); i++)
    nanosleep(&(struct timespec){0, 100000}, NULL);
  if (!__atomic_load_n(&c->graphs, __ATOMIC_ACQUIRE)) return 0;
  say("%s rank=%d gave up: graphs still hold it", call, c->rank);
  return 1;
}

ncclResult_t ncclCommAbort(struct ncclComm* c) {
  say("ncclCommAbort rank=%d", c->rank);
  __atomic_store_n(&kernels_stop, 1, __ATOMIC_RELEASE);  /* NCCL's abort flag, set first: its kernels end */
  if (wait_for_graphs(c, "ncclCommAbort")) return ok;
  if (c->child_out) free(c->child);  /* a split that never completed */
  free(c);
  return ok;
}
ncclResult_t ncclCommDestroy(struct ncclComm* c) {
  say("ncclCommDestroy rank=%d", c->rank);
  if (wait_for_graphs(c, "ncclCommDestroy")) return ok;
  free(c);
  return ok;
}
ncclResult_t ncclCommCount(struct ncclComm* c, int* n) { *n = c->nranks; return ok; }
ncclResult_t ncclCommUserRank(struct ncclComm* c, int* r) { *r = c->rank; return ok; }

/* The start of every operation: its log line (the stream's name appended), then whether NCCL refuses it (a
 * communicator still in progress), or the fake does: comm_nccl.c runs every operation on a blocking
 * communicator, as a non-blocking one would launch it from a thread of NCCL's. */
static int refused(struct ncclComm* c, const void* stream, const char* format, ...)
    __attribute__((format(printf, 3, 4)));
static int refused(struct ncclComm* c, const void* stream, const char* format, ...) {
  char line[256], s[16], cap[32] = "";
  va_list ap;
  va_start(ap, format);
  vsnprintf(line, sizeof line, format, ap);
  va_end(ap);
  if (getenv("FAKE_NCCL_LOG_CTAS")) {
    if (c->max_ctas == INT_MIN) snprintf(cap, sizeof cap, " uncapped");
    else snprintf(cap, sizeof cap, " maxCTAs=%d", c->max_ctas);
  }
  say("%s%s %s", line, cap, stream_name(stream, s, sizeof s));
  if (!c->blocking) {
    say("refused: an operation on a non-blocking communicator");
    return 1;
  }
  return not_ready(c);
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, int type, int op, struct ncclComm* c,
                           void* stream) {
  if (refused(c, stream, "ncclAllReduce count=%zu type=%d op=%d%s", count, type, op, send == recv ? " inplace" : ""))
    return invalid_argument;
  if (lands(stream)) memmove(recv, send, count * type_bytes(type));
  return enqueued(c, stream);
}
ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, int type, int op, struct ncclComm* c,
                               void* stream) {
  if (refused(c, stream, "ncclReduceScatter count=%zu type=%d op=%d", count, type, op)) return invalid_argument;
  if (lands(stream))
    memmove(recv, (const char*)send + (size_t)c->rank * count * type_bytes(type), count * type_bytes(type));
  return enqueued(c, stream);
}
ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, int type, struct ncclComm* c, void* stream) {
  if (refused(c, stream, "ncclAllGather count=%zu type=%d", count, type)) return invalid_argument;
  if (!lands(stream)) return enqueued(c, stream);
  memset(recv, 0, (size_t)c->nranks * count * type_bytes(type));  /* the other ranks contribute zeros */
  memmove((char*)recv + (size_t)c->rank * count * type_bytes(type), send, count * type_bytes(type));
  return enqueued(c, stream);
}
ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, int type, int root, struct ncclComm* c,
                           void* stream) {
  if (refused(c, stream, "ncclBroadcast count=%zu type=%d root=%d", count, type, root)) return invalid_argument;
  if (c->rank == root && lands(stream)) memmove(recv, send, count * type_bytes(type));
  return enqueued(c, stream);
}
/* Send and receive move nothing: the fake has no peer. */
ncclResult_t ncclSend(const void* buf, size_t count, int type, int peer, struct ncclComm* c, void* stream) {
  (void)buf;
  if (refused(c, stream, "ncclSend count=%zu type=%d peer=%d", count, type, peer)) return invalid_argument;
  return enqueued(c, stream);
}
ncclResult_t ncclRecv(void* buf, size_t count, int type, int peer, struct ncclComm* c, void* stream) {
  (void)buf;
  if (refused(c, stream, "ncclRecv count=%zu type=%d peer=%d", count, type, peer)) return invalid_argument;
  return enqueued(c, stream);
}
ncclResult_t ncclGroupStart(void) { say("ncclGroupStart"); return ok; }
ncclResult_t ncclGroupEnd(void) { say("ncclGroupEnd"); return ok; }
