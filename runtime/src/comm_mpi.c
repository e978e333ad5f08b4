/* comm_mpi.c — the MPI transport of communicators (comm_backend.h), for CPU contexts: host memory.
 *
 * MPI is dlopen()ed, so libtessera builds and loads without it: $TESSERA_MPI_LIBRARY (a path or soname),
 * else the mpich wheel's libmpi.so.12 beside the installed package (<prefix>/lib, four levels above
 * tessera/lib/libtessera.so), else the system's libmpi.so.12. Only the MPICH ABI is spoken (MPICH, Intel MPI,
 * MVAPICH, Cray MPICH: integer handles with fixed values, declared below), as mpi.h cannot be included at
 * build time; Open MPI's libmpi.so.40 is refused by name.
 *
 * Never a hang: every transfer is a non-blocking MPI call (MPI_Iallreduce, ...) whose request is polled with
 * MPI_Test against the call's deadline; past it the operation returns TSR_ERROR_TIMEOUT and leaves the
 * request behind (a collective cannot be cancelled; the communicator is then broken and freed without MPI's
 * collective MPI_Comm_free, and MPI_Finalize is skipped at exit, since it would wait for the dead peer).
 * Errors MPI reports (MPI_ERRORS_RETURN on every communicator) are TSR_ERROR_LAUNCH_FAILED with MPI's text. */
#define _GNU_SOURCE /* dladdr, RTLD_NOLOAD */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "comm_backend.h"
#include "driver_loader.h"
#include "errors.h"
#include "objects.h"

/* ---- the MPICH ABI ---------------------------------------------------------------------------------- */

typedef int MPI_Comm, MPI_Datatype, MPI_Op, MPI_Request, MPI_Errhandler;
typedef struct { int count_lo, count_hi_and_cancelled, source, tag, error; } MPI_Status;

enum {
  MPI_SUCCESS = 0,
  MPI_COMM_WORLD = 0x44000000,
  MPI_COMM_NULL = 0x04000000,
  MPI_REQUEST_NULL = 0x2c000000,
  MPI_ERRORS_RETURN = 0x54000001,
  MPI_BYTE = 0x4c00010d,
  MPI_FLOAT = 0x4c00040a,
  MPI_DOUBLE = 0x4c00080b,
  MPI_INT32_T = 0x4c000439,
  MPI_INT64_T = 0x4c00083a,
  MPI_INT = 0x4c000405,
  MPI_MAX = 0x58000001,
  MPI_MIN = 0x58000002,
  MPI_SUM = 0x58000003,
  MPI_PROD = 0x58000004,
  MPI_THREAD_MULTIPLE = 3,
  MPI_UNDEFINED = -32766,
  MPI_MAX_ERROR_STRING = 512
};
#define MPI_IN_PLACE ((void*)-1)
#define MPI_STATUS_IGNORE ((MPI_Status*)1)

static struct {
  int (*Initialized)(int*);
  int (*Finalized)(int*);
  int (*Init_thread)(int*, char***, int, int*);
  int (*Finalize)(void);
  int (*Comm_rank)(MPI_Comm, int*);
  int (*Comm_size)(MPI_Comm, int*);
  int (*Comm_idup)(MPI_Comm, MPI_Comm*, MPI_Request*);
  int (*Comm_split)(MPI_Comm, int, int, MPI_Comm*);
  int (*Comm_free)(MPI_Comm*);
  int (*Comm_set_errhandler)(MPI_Comm, MPI_Errhandler);
  int (*Error_string)(int, char*, int*);
  int (*Test)(MPI_Request*, int*, MPI_Status*);
  int (*Cancel)(MPI_Request*);
  int (*Request_free)(MPI_Request*);
  int (*Iallreduce)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request*);
  int (*Ireduce_scatter_block)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request*);
  int (*Iallgather)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm, MPI_Request*);
  int (*Ialltoall)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm, MPI_Request*);
  int (*Ibcast)(void*, int, MPI_Datatype, int, MPI_Comm, MPI_Request*);
  int (*Isend)(const void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request*);
  int (*Irecv)(void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request*);
} M;

/* The tag of every point-to-point message: one stream of messages per pair of ranks, in order. */
enum { P2P_TAG = 0x7e55 };

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[1024];  /* why MPI cannot be used; "" once loaded */
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static bool initialized_here;     /* we called MPI_Init_thread: we finalize at exit */
static bool serialized;           /* MPI gave less than MPI_THREAD_MULTIPLE: one MPI call at a time */
static pthread_mutex_t call_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool any_broken;    /* a request was left behind: MPI_Finalize would wait for it */

/* The mpich wheel's libmpi.so.12 relative to this library installed from a wheel: <prefix>/lib/python3.X/
 * site-packages/tessera/lib/libtessera.so -> <prefix>/lib/libmpi.so.12. */
static void wheel_candidate(char* out, size_t size) {
  Dl_info info;
  out[0] = 0;
  if (!dladdr(load_error, &info) || !info.dli_fname) return;
  const char* slash = strrchr(info.dli_fname, '/');
  if (!slash) return;
  snprintf(out, size, "%.*s/../../../../libmpi.so.12", (int)(slash - info.dli_fname), info.dli_fname);
}

static void load(void) {
  char wheel[PATH_MAX + 32];
  wheel_candidate(wheel, sizeof wheel);
  const char* candidates[] = {"libmpi.so.12", wheel[0] ? wheel : "libmpi.so.12", NULL};
  /* The wheel's copy first when it is there: a system MPI of another build may not match its mpiexec. */
  if (wheel[0] && access(wheel, R_OK) == 0) candidates[0] = wheel, candidates[1] = "libmpi.so.12";
  tsr_driver_library_t lib;
  char why[768];
  if (!tsr_driver_open(&lib, "TESSERA_MPI_LIBRARY", candidates, "MPI (the MPICH ABI's libmpi.so.12)", why,
                       sizeof why)) {
    void* ompi = dlopen("libmpi.so.40", RTLD_LAZY | RTLD_LOCAL);
    if (ompi) dlclose(ompi);
    snprintf(load_error, sizeof load_error, "%s%s; install the mpich wheel (pip install mpich)", why,
             ompi ? " (Open MPI's libmpi.so.40 is installed, but its ABI is not MPICH's, which Tessera speaks)" : "");
    return;
  }
  /* Global, as MPI's own plugins (network providers) resolve its symbols. */
  dlopen(lib.name, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
  static const struct {
    const char* name;
    size_t offset;
  } entries[] = {
#define E(f) {"MPI_" #f, offsetof(__typeof__(M), f)}
      E(Initialized), E(Finalized), E(Init_thread), E(Finalize), E(Comm_rank), E(Comm_size), E(Comm_idup),
      E(Comm_split), E(Comm_free), E(Comm_set_errhandler), E(Error_string), E(Test), E(Cancel), E(Request_free),
      E(Iallreduce), E(Ireduce_scatter_block), E(Iallgather), E(Ialltoall), E(Ibcast), E(Isend), E(Irecv),
#undef E
  };
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
    if (!tsr_driver_resolve(&lib, entries[i].name, (char*)&M + entries[i].offset, "(not an MPI-3 library)", why,
                            sizeof why)) {
      snprintf(load_error, sizeof load_error, "%s", why);
      return;
    }
  load_error[0] = 0;
}

static void finalize_at_exit(void) {
  int done = 0;
  M.Finalized(&done);
  if (!done && !atomic_load(&any_broken)) M.Finalize();
}

/* MPI loaded and initialized (by us with MPI_THREAD_MULTIPLE, or by the host program already). */
static tsr_status_t start(const char* function) {
  pthread_once(&load_once, load);
  if (load_error[0]) return tsr_fail(TSR_ERROR_UNSUPPORTED, "%s: %s", function, load_error);
  pthread_mutex_lock(&init_lock);
  int done = 0, finalized = 0;
  tsr_status_t st = TSR_SUCCESS;
  M.Initialized(&done);
  M.Finalized(&finalized);
  if (finalized) {
    st = tsr_fail(TSR_ERROR_INIT_FAIL, "%s: MPI was finalized already in this process", function);
  } else if (!done) {
    int provided = 0;
    int rc = M.Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) {
      st = tsr_fail(TSR_ERROR_INIT_FAIL, "%s: MPI_Init_thread failed (error %d)", function, rc);
    } else {
      initialized_here = true;
      serialized = provided < MPI_THREAD_MULTIPLE;
      M.Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
      atexit(finalize_at_exit);
    }
  } else if (!initialized_here) {
    /* The host initialized MPI; its thread level is unknown here, so calls are serialized to be safe. */
    serialized = true;
  }
  pthread_mutex_unlock(&init_lock);
  return st;
}

static void lock_calls(void) {
  if (serialized) pthread_mutex_lock(&call_lock);
}
static void unlock_calls(void) {
  if (serialized) pthread_mutex_unlock(&call_lock);
}

static tsr_status_t mpi_fail(int rc, const tsr_comm_call_t* call, const char* what) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (M.Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "error %d", rc);
  return tsr_fail(TSR_ERROR_LAUNCH_FAILED, "%s: %s failed (peer error): %s", call->function, what, text);
}

typedef struct mpi_state {
  MPI_Comm comm;
  int rank, size;
} mpi_state_t;

/* Polls a request to completion, the deadline, an abort, or an MPI error. */
static tsr_status_t wait_request(const mpi_state_t* s, MPI_Request* req, bool cancellable, const tsr_comm_call_t* call,
                                 const char* what) {
  long sleep_ns = 0;
  uint64_t started = tsr_comm_now_ns();
  for (;;) {
    int flag = 0;
    lock_calls();
    int rc = M.Test(req, &flag, MPI_STATUS_IGNORE);
    unlock_calls();
    if (rc != MPI_SUCCESS) return mpi_fail(rc, call, what);
    if (flag) return TSR_SUCCESS;
    bool aborted = call->aborted && atomic_load(call->aborted);
    if (aborted || tsr_comm_now_ns() >= call->deadline_ns) {
      if (cancellable) {  /* a send or receive not matched yet: nothing arrives later */
        lock_calls();
        M.Cancel(req);
        M.Request_free(req);
        unlock_calls();
      }  /* a collective's request cannot be cancelled or freed (MPI-3.1 §5.12): it is left behind */
      atomic_store(&any_broken, true);
      if (aborted) return tsr_fail(TSR_ERROR_LAUNCH_FAILED, "%s: the communicator was aborted during %s",
                                   call->function, what);
      return tsr_fail(TSR_ERROR_TIMEOUT, "%s: %s on rank %d of %d did not complete within the communicator's "
                      "timeout: a peer died, stopped, or is not making the same call", call->function, what, s->rank,
                      s->size);
    }
    /* MPI moves data only inside its calls (a large transfer takes one step per poll), so for the first
     * 100 ms it is polled back to back, yielding the core to ranks that share it; a wait longer than that
     * is a peer that is late, polled with growing sleeps (up to 1 ms) to spare the CPU. */
    if (tsr_comm_now_ns() - started < 100000000u) {
      sched_yield();
    } else {
      sleep_ns = sleep_ns ? (sleep_ns < 1000000 ? sleep_ns * 2 : sleep_ns) : 10000;
      nanosleep(&(struct timespec){.tv_nsec = sleep_ns}, NULL);
    }
  }
}

static MPI_Datatype native_type(tsr_dtype_t dtype) {
  switch (dtype) {
    case TSR_DTYPE_F32: return MPI_FLOAT;
    case TSR_DTYPE_F64: return MPI_DOUBLE;
    case TSR_DTYPE_I32: return MPI_INT32_T;
    case TSR_DTYPE_I64: return MPI_INT64_T;
    default: return 0;  /* BF16: MPI has no type for it */
  }
}

static MPI_Op native_op(tsr_reduce_op_t op) {
  switch (op) {
    case TSR_REDUCE_PROD: return MPI_PROD;
    case TSR_REDUCE_MAX: return MPI_MAX;
    case TSR_REDUCE_MIN: return MPI_MIN;
    default: return MPI_SUM;  /* SUM, and AVG's sum */
  }
}

/* One non-blocking MPI call, as every transfer is made: started under the call lock, then its request polled
 * (wait_request). */
typedef enum { IALLREDUCE, IREDUCE_SCATTER, IALLGATHER, IALLTOALL, IBCAST, ISEND, IRECV, COMM_IDUP } mpi_kind_t;

static const char* const kind_names[] = {"MPI_Iallreduce", "MPI_Ireduce_scatter_block", "MPI_Iallgather",
                                         "MPI_Ialltoall",  "MPI_Ibcast",                "MPI_Isend",
                                         "MPI_Irecv",      "MPI_Comm_idup"};

typedef struct mpi_op {
  mpi_kind_t kind;
  const void* send;
  void* recv;         /* COMM_IDUP: the new MPI_Comm */
  size_t count;       /* units of `type` per rank (each pair for all_to_all) */
  MPI_Datatype type;
  MPI_Op op;          /* reductions */
  int peer;           /* the root of a broadcast, the peer of a send or receive */
  const char* what;   /* for messages; NULL: the MPI function's name */
} mpi_op_t;

/* Runs `o` on `s`'s communicator to completion (wait_request). MPI counts are ints: a bigger transfer is
 * refused rather than split, in this version. */
static tsr_status_t run(const mpi_state_t* s, const mpi_op_t* o, const tsr_comm_call_t* call) {
  const char* what = o->what ? o->what : kind_names[o->kind];
  if (o->count > INT_MAX)
    return tsr_fail(TSR_ERROR_UNSUPPORTED, "%s: %zu units exceed MPI's int count (%d); split the transfer",
                    call->function, o->count, INT_MAX);
  int n = (int)o->count, rc = MPI_SUCCESS;
  MPI_Request req = MPI_REQUEST_NULL;
  lock_calls();
  switch (o->kind) {
    case IALLREDUCE: rc = M.Iallreduce(o->send, o->recv, n, o->type, o->op, s->comm, &req); break;
    case IREDUCE_SCATTER: rc = M.Ireduce_scatter_block(o->send, o->recv, n, o->type, o->op, s->comm, &req); break;
    case IALLGATHER: rc = M.Iallgather(o->send, n, o->type, o->recv, n, o->type, s->comm, &req); break;
    case IALLTOALL: rc = M.Ialltoall(o->send, n, o->type, o->recv, n, o->type, s->comm, &req); break;
    case IBCAST: rc = M.Ibcast(o->recv, n, o->type, o->peer, s->comm, &req); break;
    case ISEND: rc = M.Isend(o->send, n, o->type, o->peer, P2P_TAG, s->comm, &req); break;
    case IRECV: rc = M.Irecv(o->recv, n, o->type, o->peer, P2P_TAG, s->comm, &req); break;
    case COMM_IDUP: rc = M.Comm_idup(s->comm, (MPI_Comm*)o->recv, &req); break;
  }
  unlock_calls();
  if (rc != MPI_SUCCESS) return mpi_fail(rc, call, what);
  /* a send or receive not matched yet can be cancelled: nothing arrives later */
  return wait_request(s, &req, o->kind == ISEND || o->kind == IRECV, call, what);
}

/* ---- the transport's entries ----------------------------------------------------------------------- */

static tsr_status_t available(struct tsr_context* ctx) {
  pthread_once(&load_once, load);
  if (load_error[0]) return tsr_fail(TSR_ERROR_UNSUPPORTED, "%s", load_error);
  if (strcmp(ctx->backend->name, "cpu") != 0)
    return tsr_fail(TSR_ERROR_UNSUPPORTED, "the MPI backend moves host memory and serves CPU contexts; this "
                    "context's backend is '%s' (use the nccl backend for CUDA)", ctx->backend->name);
  return TSR_SUCCESS;
}

static bool launched(void) {
  static const char* const vars[] = {"PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "MPI_LOCALRANKID"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    if (getenv(vars[i])) return true;
  return false;
}

static tsr_status_t unique_id(struct tsr_context* ctx, tsr_comm_unique_id_t* out) {
  (void)ctx;
  tsr_comm_unique_id_t id = {{'T', 'S', 'R', 'M', 'P', 'I'}};
  if (getrandom(id.bytes + 8, sizeof id.bytes - 8, 0) != (ssize_t)(sizeof id.bytes - 8)) {
    uint64_t t = tsr_comm_now_ns() ^ ((uint64_t)getpid() << 32);
    memcpy(id.bytes + 8, &t, sizeof t);
  }
  *out = id;
  return TSR_SUCCESS;
}

/* The state of a new communicator `comm` (MPI_Comm_idup's or MPI_Comm_split's), errors returned, not fatal. */
static tsr_status_t adopt(MPI_Comm comm, const tsr_comm_call_t* call, void** out_state, int* out_rank,
                          int* out_size) {
  mpi_state_t* s = calloc(1, sizeof *s);
  lock_calls();
  if (!s) M.Comm_free(&comm);
  else {
    s->comm = comm;
    M.Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    M.Comm_rank(comm, &s->rank);
    M.Comm_size(comm, &s->size);
  }
  unlock_calls();
  if (!s) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "%s: out of memory", call->function);
  *out_state = s;
  *out_rank = s->rank;
  *out_size = s->size;
  return TSR_SUCCESS;
}

static tsr_status_t create(const tsr_comm_init_t* init, const tsr_comm_call_t* call_in, void** out_state,
                           int* out_rank, int* out_size) {
  uint64_t began = tsr_comm_now_ns();
  tsr_status_t st = start(call_in->function);
  if (st) return st;
  /* MPI_Init_thread returns only once every rank of the job has started MPI (MPICH's PMI exchange), without a
   * limit of ours (docs/launching.md): the communicator's timeout counts from then, so that a rank that
   * started late is not taken for a dead one by the MPI_Comm_idup below. */
  tsr_comm_call_t late = *call_in;
  late.deadline_ns += tsr_comm_now_ns() - began;
  const tsr_comm_call_t* call = &late;
  mpi_state_t world = {.comm = MPI_COMM_WORLD};
  lock_calls();
  M.Comm_rank(MPI_COMM_WORLD, &world.rank);
  M.Comm_size(MPI_COMM_WORLD, &world.size);
  unlock_calls();
  if (init->world >= 0 && (init->world != world.size || init->rank != world.rank))
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: asked for rank %d of %d, but MPI_COMM_WORLD makes this process rank "
                    "%d of %d: start the job with an MPI launcher of that size (mpiexec -n %d, tessera-run -n %d "
                    "--backend mpi)", call->function, init->rank, init->world, world.rank, world.size, init->world,
                    init->world);
  /* A communicator of its own over the world's ranks, duplicated without a blocking call. */
  MPI_Comm dup = MPI_COMM_NULL;
  if ((st = run(&world, &(mpi_op_t){.kind = COMM_IDUP, .recv = &dup}, call))) return st;
  return adopt(dup, call, out_state, out_rank, out_size);
}

static tsr_status_t split(void* state, int color, int key, const tsr_comm_call_t* call, void** out_state,
                          int* out_rank, int* out_size) {
  mpi_state_t* s = state;
  /* Everybody shows up first, bounded by the deadline; the blocking MPI_Comm_split after it then only
   * waits for ranks that were alive a moment ago. */
  int mine[2] = {color, key};
  int* all = malloc(sizeof mine * (size_t)s->size);
  if (!all) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "%s: out of memory", call->function);
  tsr_status_t st = run(s, &(mpi_op_t){.kind = IALLGATHER, .send = mine, .recv = all, .count = 2, .type = MPI_INT,
                                       .what = "MPI_Iallgather (split)"}, call);
  free(all);
  if (st) return st;
  MPI_Comm sub = MPI_COMM_NULL;
  lock_calls();
  int rc = M.Comm_split(s->comm, color < 0 ? MPI_UNDEFINED : color, key, &sub);
  unlock_calls();
  if (rc != MPI_SUCCESS) return mpi_fail(rc, call, "MPI_Comm_split");
  if (sub == MPI_COMM_NULL) {
    *out_state = NULL;
    return TSR_SUCCESS;
  }
  return adopt(sub, call, out_state, out_rank, out_size);
}

/* Moves `count` elements of `dtype` per rank as bytes (no reduction: the type does not matter to MPI). */
static tsr_status_t move_bytes(const mpi_state_t* s, mpi_kind_t kind, const void* send, void* recv, size_t count,
                               tsr_dtype_t dtype, int peer, const tsr_comm_call_t* call) {
  return run(s, &(mpi_op_t){.kind = kind, .send = send, .recv = recv, .count = count * tsr_comm_dtype_size(dtype),
                            .type = MPI_BYTE, .peer = peer}, call);
}

static tsr_status_t all_gather(void* state, const void* send, void* recv, size_t count, tsr_dtype_t dtype,
                               const tsr_comm_call_t* call) {
  mpi_state_t* s = state;
  size_t bytes = count * tsr_comm_dtype_size(dtype);
  const void* from = (const unsigned char*)recv + (size_t)s->rank * bytes == send ? MPI_IN_PLACE : send;
  return move_bytes(s, IALLGATHER, from, recv, count, dtype, 0, call);
}

/* A reduction MPI cannot do itself (BF16): every rank's `total` elements gathered and combined in rank order;
 * elements [first, first + count) of the result go to `out` (all_reduce: all; reduce_scatter: this rank's). */
static tsr_status_t gathered_reduce(mpi_state_t* s, const void* send, void* out, size_t total, size_t first,
                                    size_t count, tsr_dtype_t dtype, tsr_reduce_op_t op, const tsr_comm_call_t* call) {
  size_t elem = tsr_comm_dtype_size(dtype), block = total * elem;
  unsigned char* all = malloc(block * (size_t)s->size);
  if (!all) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "%s: out of memory (%zu bytes)", call->function,
                            block * (size_t)s->size);
  tsr_status_t st = all_gather(s, send, all, total, dtype, call);
  if (!st) {
    unsigned char* acc = all + first * elem;
    for (int r = 1; r < s->size; r++) tsr_comm_combine(dtype, op, acc, acc + (size_t)r * block, count);
    memcpy(out, acc, count * elem);
  }
  free(all);
  return st;
}

/* all_reduce (`count` elements) and reduce_scatter (`count` of each rank's count * size): MPI's own reduction
 * where it has the type, else gathered_reduce; AVG sums, then divides by the size. */
static tsr_status_t reduce(mpi_state_t* s, mpi_kind_t kind, const void* send, void* recv, size_t count,
                           tsr_dtype_t dtype, tsr_reduce_op_t op, const tsr_comm_call_t* call) {
  MPI_Datatype type = native_type(dtype);
  bool scatter = kind == IREDUCE_SCATTER;
  tsr_status_t st =
      type ? run(s, &(mpi_op_t){.kind = kind, .send = !scatter && send == recv ? MPI_IN_PLACE : send, .recv = recv,
                                .count = count, .type = type, .op = native_op(op)}, call)
           : gathered_reduce(s, send, recv, scatter ? count * (size_t)s->size : count,
                             scatter ? count * (size_t)s->rank : 0, count, dtype, op, call);
  if (!st && op == TSR_REDUCE_AVG) tsr_comm_scale(dtype, recv, count, s->size);
  return st;
}

static tsr_status_t all_reduce(void* state, const void* send, void* recv, size_t count, tsr_dtype_t dtype,
                               tsr_reduce_op_t op, bool deterministic, const tsr_comm_call_t* call) {
  (void)deterministic;  /* comm.c reduces deterministically itself: no TSR_COMM_TRANSPORT_DETERMINISTIC */
  return reduce(state, IALLREDUCE, send, recv, count, dtype, op, call);
}

static tsr_status_t reduce_scatter(void* state, const void* send, void* recv, size_t count, tsr_dtype_t dtype,
                                   tsr_reduce_op_t op, bool deterministic, const tsr_comm_call_t* call) {
  (void)deterministic;
  return reduce(state, IREDUCE_SCATTER, send, recv, count, dtype, op, call);
}

static tsr_status_t all_to_all(void* state, const void* send, void* recv, size_t count, tsr_dtype_t dtype,
                               const tsr_comm_call_t* call) {
  return move_bytes(state, IALLTOALL, send, recv, count, dtype, 0, call);
}

static tsr_status_t broadcast(void* state, const void* send, void* recv, size_t count, tsr_dtype_t dtype, int root,
                              const tsr_comm_call_t* call) {
  mpi_state_t* s = state;
  if (s->rank == root && send != recv) memmove(recv, send, count * tsr_comm_dtype_size(dtype));
  return move_bytes(s, IBCAST, NULL, recv, count, dtype, root, call);
}

/* Send and receive: matched by the tag and the order of messages between the two ranks. */
static tsr_status_t send_to(void* state, const void* buf, size_t count, tsr_dtype_t dtype, int peer,
                            const tsr_comm_call_t* call) {
  return move_bytes(state, ISEND, buf, NULL, count, dtype, peer, call);
}

static tsr_status_t recv_from(void* state, void* buf, size_t count, tsr_dtype_t dtype, int peer,
                              const tsr_comm_call_t* call) {
  return move_bytes(state, IRECV, NULL, buf, count, dtype, peer, call);
}

static void abort_state(void* state) {
  (void)state;  /* waits poll call->aborted; MPI has no per-communicator abort short of killing the job */
  atomic_store(&any_broken, true);
}

static void destroy(void* state, bool broken) {
  mpi_state_t* s = state;
  int finalized = 0;
  M.Finalized(&finalized);
  if (!broken && !finalized) {
    lock_calls();
    M.Comm_free(&s->comm);
    unlock_calls();
  }
  free(s);
}

const tsr_comm_transport_t tsr_comm_transport_mpi = {
    .name = "mpi",
    .backend = TSR_COMM_BACKEND_MPI,
    .flags = 0,
    .available = available,
    .launched = launched,
    .unique_id = unique_id,
    .create = create,
    .split = split,
    .all_reduce = all_reduce,
    .reduce_scatter = reduce_scatter,
    .all_gather = all_gather,
    .all_to_all = all_to_all,
    .broadcast = broadcast,
    .send = send_to,
    .recv = recv_from,
    .abort = abort_state,
    .async_error = NULL,
    .destroy = destroy,
};
