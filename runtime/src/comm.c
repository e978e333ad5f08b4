/* comm.c — communicators (<tessera/comm.h>): handles, options, argument checks, stream order, the
 * deterministic tree reduction, the TCP rendezvous of tsrCommCreateFromEnv, and the host reduce helpers of
 * comm_backend.h. The bytes move through a transport (comm_backend.h): comm_mpi.c, comm_nccl.c. */
#define _GNU_SOURCE /* getaddrinfo, clock_gettime, nanosleep under strict C11 */
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "comm_backend.h"
#include "errors.h"
#include "objects.h"
#include "stream.h"

/* The transports, in the order AUTO prefers them for a device they both serve. */
static const tsr_comm_transport_t* const transports[] = {&tsr_comm_transport_mpi, &tsr_comm_transport_nccl, NULL};

/* What a communicator and those split from it share: one failure breaks them all, since a transfer left
 * half done on any of them leaves the transport's state unknown. */
typedef struct tsr_comm_fault {
  atomic_int refs;
  atomic_bool aborted;      /* tsrCommAbort: waits give up */
  pthread_mutex_t lock;     /* guards status and message */
  tsr_status_t status;      /* TSR_SUCCESS while healthy */
  char message[1024];
} tsr_comm_fault_t;

struct tsr_comm {
  tsr_object_t obj;
  const tsr_comm_transport_t* transport;
  void* state;
  int rank, size;
  uint32_t flags;       /* TSR_COMM_* */
  uint64_t timeout_ms;  /* resolved: never 0 */
  uint32_t units;       /* resolved (comm.h); 0: no limit */
  tsr_comm_fault_t* fault;
  /* The deterministic reductions' gather buffer, kept between calls: a fresh one of size × count elements
   * costs its page faults every time. Operations on one communicator are never concurrent (comm.h). */
  void* scratch;
  size_t scratch_bytes;
};

#define WHAT "communicator"  /* what handle errors call it */
#define DEFAULT_TIMEOUT_MS 300000u

/* ---- helpers for transports (comm_backend.h) ------------------------------------------------------- */

uint64_t tsr_comm_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

size_t tsr_comm_dtype_size(tsr_dtype_t dtype) {
  switch (dtype) {
    case TSR_DTYPE_F64: case TSR_DTYPE_I64: case TSR_DTYPE_U64: case TSR_DTYPE_INDEX: case TSR_DTYPE_C64: return 8;
    case TSR_DTYPE_F32: case TSR_DTYPE_I32: case TSR_DTYPE_U32: case TSR_DTYPE_TF32: return 4;
    case TSR_DTYPE_F16: case TSR_DTYPE_BF16: case TSR_DTYPE_I16: case TSR_DTYPE_U16: return 2;
    case TSR_DTYPE_I8: case TSR_DTYPE_U8: case TSR_DTYPE_BOOL: case TSR_DTYPE_FP8_E4M3: case TSR_DTYPE_FP8_E5M2:
      return 1;
    case TSR_DTYPE_C128: return 16;
  }
  return 0;
}

static const char* dtype_name(tsr_dtype_t dtype) {
  static const char* const names[] = {"?", "f32", "f64", "f16", "bf16", "i8", "i16", "i32", "i64", "u8", "u16",
                                      "u32", "u64", "bool", "fp8_e4m3", "fp8_e5m2", "tf32", "index", "c64", "c128"};
  return (unsigned)dtype < sizeof names / sizeof names[0] ? names[dtype] : "?";
}

static const char* op_name(tsr_reduce_op_t op) {
  static const char* const names[] = {"sum", "prod", "max", "min", "avg"};
  return (unsigned)op < sizeof names / sizeof names[0] ? names[op] : "?";
}

bool tsr_comm_host_reducible(tsr_dtype_t dtype, tsr_reduce_op_t op) {
  switch (dtype) {
    case TSR_DTYPE_F32: case TSR_DTYPE_F64: case TSR_DTYPE_BF16: return (unsigned)op <= TSR_REDUCE_AVG;
    case TSR_DTYPE_I32: case TSR_DTYPE_I64: return (unsigned)op < TSR_REDUCE_AVG;
    default: return false;
  }
}

static float bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Round to nearest even, as tessera.numerics.rounding.round_to("bf16") does; NaN stays a (quiet) NaN. */
static uint16_t f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if (isnan(f)) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* a[i] = a[i] ∘ b[i] for i < count, the op chosen once outside the loops so that each loop vectorizes. LOAD and
 * STORE convert to and from the type T combined in; SUM and PROD are expressions of p and q. max/min as
 * numpy's maximum/minimum: a NaN on either side wins (p + q is then that NaN; ISNAN is 0 for integers). */
#define COMBINE_LOOPS(T, LOAD, STORE, ISNAN, SUM, PROD)                                               \
  switch (op) {                                                                                       \
    case TSR_REDUCE_PROD:                                                                             \
      for (size_t i = 0; i < count; i++) { T p = LOAD(a[i]), q = LOAD(b[i]); a[i] = STORE(PROD); }    \
      break;                                                                                          \
    case TSR_REDUCE_MAX:                                                                              \
      for (size_t i = 0; i < count; i++) {                                                            \
        T p = LOAD(a[i]), q = LOAD(b[i]);                                                             \
        a[i] = STORE(ISNAN(p) || ISNAN(q) ? p + q : p > q ? p : q);                                   \
      }                                                                                               \
      break;                                                                                          \
    case TSR_REDUCE_MIN:                                                                              \
      for (size_t i = 0; i < count; i++) {                                                            \
        T p = LOAD(a[i]), q = LOAD(b[i]);                                                             \
        a[i] = STORE(ISNAN(p) || ISNAN(q) ? p + q : p < q ? p : q);                                   \
      }                                                                                               \
      break;                                                                                          \
    default: /* SUM, and AVG's sum */                                                                 \
      for (size_t i = 0; i < count; i++) { T p = LOAD(a[i]), q = LOAD(b[i]); a[i] = STORE(SUM); }     \
  }

#define SAME(x) (x)
#define NEVER_NAN(x) 0

void tsr_comm_combine(tsr_dtype_t dtype, tsr_reduce_op_t op, void* acc, const void* x, size_t count) {
  switch (dtype) {
    case TSR_DTYPE_F32: {
      float* a = acc;
      const float* b = x;
      COMBINE_LOOPS(float, SAME, SAME, isnan, p + q, p * q)
      break;
    }
    case TSR_DTYPE_F64: {
      double* a = acc;
      const double* b = x;
      COMBINE_LOOPS(double, SAME, SAME, isnan, p + q, p * q)
      break;
    }
    case TSR_DTYPE_BF16: {  /* in f32, which holds a bf16 sum or product exactly enough to round once */
      uint16_t* a = acc;
      const uint16_t* b = x;
      COMBINE_LOOPS(float, bf16_to_f32, f32_to_bf16, isnan, p + q, p * q)
      break;
    }
    case TSR_DTYPE_I32: {  /* integers wrap, as the interpreter's do: combined in the unsigned type */
      int32_t* a = acc;
      const int32_t* b = x;
      COMBINE_LOOPS(int32_t, SAME, SAME, NEVER_NAN, (int32_t)((uint32_t)p + (uint32_t)q),
                    (int32_t)((uint32_t)p * (uint32_t)q))
      break;
    }
    case TSR_DTYPE_I64: {
      int64_t* a = acc;
      const int64_t* b = x;
      COMBINE_LOOPS(int64_t, SAME, SAME, NEVER_NAN, (int64_t)((uint64_t)p + (uint64_t)q),
                    (int64_t)((uint64_t)p * (uint64_t)q))
      break;
    }
    default: break;  /* comm.c admits only tsr_comm_host_reducible pairs */
  }
}

void tsr_comm_scale(tsr_dtype_t dtype, void* buf, size_t count, int n) {
  if (dtype == TSR_DTYPE_F32) {
    float* a = buf;
    for (size_t i = 0; i < count; i++) a[i] /= (float)n;
  } else if (dtype == TSR_DTYPE_F64) {
    double* a = buf;
    for (size_t i = 0; i < count; i++) a[i] /= (double)n;
  } else if (dtype == TSR_DTYPE_BF16) {
    uint16_t* a = buf;
    for (size_t i = 0; i < count; i++) a[i] = f32_to_bf16(bf16_to_f32(a[i]) / (float)n);
  }
}

void tsr_comm_tree_reduce(tsr_dtype_t dtype, tsr_reduce_op_t op, void* gathered, int size, size_t count, void* out) {
  size_t block = count * tsr_comm_dtype_size(dtype);
  unsigned char* g = gathered;
  /* Level by level: block i*2*stride absorbs block i*2*stride + stride, as dist_ops._reduce pairs its list. */
  for (int stride = 1; stride < size; stride *= 2)
    for (int i = 0; i + stride < size; i += 2 * stride)
      tsr_comm_combine(dtype, op, g + (size_t)i * block, g + (size_t)(i + stride) * block, count);
  if (op == TSR_REDUCE_AVG) tsr_comm_scale(dtype, g, count, size);
  if (out != (void*)g) memmove(out, g, block);
}

/* ---- faults ----------------------------------------------------------------------------------------- */

static tsr_comm_fault_t* fault_new(void) {
  tsr_comm_fault_t* f = calloc(1, sizeof *f);
  if (!f) return NULL;
  atomic_init(&f->refs, 1);
  atomic_init(&f->aborted, false);
  pthread_mutex_init(&f->lock, NULL);
  return f;
}

static void fault_unref(tsr_comm_fault_t* f) {
  if (atomic_fetch_sub(&f->refs, 1) != 1) return;
  pthread_mutex_destroy(&f->lock);
  free(f);
}

/* Breaks the communicator's fault domain with the calling thread's last error (the first failure wins). */
static void fault_set(tsr_comm_fault_t* f, tsr_status_t st) {
  pthread_mutex_lock(&f->lock);
  if (!f->status) {
    f->status = st;
    snprintf(f->message, sizeof f->message, "%s", tsrGetLastErrorMessage());
  }
  pthread_mutex_unlock(&f->lock);
}

/* The broken status, with a message naming `function`; TSR_SUCCESS while healthy. */
static tsr_status_t fault_check(tsr_comm_fault_t* f, const char* function) {
  pthread_mutex_lock(&f->lock);
  tsr_status_t st = f->status;
  char message[sizeof f->message];
  if (st) memcpy(message, f->message, sizeof message);
  pthread_mutex_unlock(&f->lock);
  if (!st) return TSR_SUCCESS;
  return tsr_fail(st, "%s: the communicator is broken by an earlier failure (destroy it): %s", function, message);
}

/* ---- life ------------------------------------------------------------------------------------------- */

tsr_status_t tsrCommOptionsInitialize(tsr_comm_options_t* options) {
  if (!options) return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrCommOptionsInitialize: the options are NULL");
  *options = (tsr_comm_options_t){0};
  return TSR_SUCCESS;
}

/* The options with the environment's defaults applied, and their transport, checked for `context`. */
static tsr_status_t resolve(struct tsr_context* ctx, const tsr_comm_options_t* options, const char* function,
                            tsr_comm_options_t* out, const tsr_comm_transport_t** out_transport) {
  tsr_comm_options_t o;
  tsrCommOptionsInitialize(&o);
  if (options) o = *options;
  if (o.flags & ~TSR_COMM_DETERMINISTIC) return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: unknown flags 0x%x", function,
                                                          o.flags & ~TSR_COMM_DETERMINISTIC);
  const char* det = getenv("TESSERA_DETERMINISTIC");
  if (det && strcmp(det, "1") == 0) o.flags |= TSR_COMM_DETERMINISTIC;
  if (o.timeout_ms == 0) {
    o.timeout_ms = DEFAULT_TIMEOUT_MS;
    const char* env = getenv("TESSERA_COMM_TIMEOUT_MS");
    if (env && *env) {
      char* end;
      errno = 0;
      unsigned long long v = strtoull(env, &end, 10);
      if (errno || *end || v == 0 || env[0] == '-')
        return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: TESSERA_COMM_TIMEOUT_MS=%s is not a positive number of "
                        "milliseconds", function, env);
      o.timeout_ms = v;
    }
  }
  const char* units = getenv("TESSERA_COMM_UNITS");
  if (o.units == 0 && units && *units) {
    char* end;
    errno = 0;
    unsigned long v = strtoul(units, &end, 10);
    if (errno || *end || v == 0 || v > INT32_MAX || units[0] == '-')
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: TESSERA_COMM_UNITS=%s is not a positive number of compute units",
                      function, units);
    o.units = (uint32_t)v;
  }
  if (o.units > INT32_MAX)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: units %u is more than any device has", function, o.units);
  uint32_t backend = o.backend;
  if (backend > TSR_COMM_BACKEND_NCCL)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: unknown backend %u (tsr_comm_backend_t)", function, backend);
  const char* env = getenv("TESSERA_COMM_BACKEND");
  if (backend == TSR_COMM_BACKEND_AUTO && env && *env) {
    if (strcmp(env, "mpi") == 0) backend = TSR_COMM_BACKEND_MPI;
    else if (strcmp(env, "nccl") == 0) backend = TSR_COMM_BACKEND_NCCL;
    else return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: TESSERA_COMM_BACKEND=%s names no backend (mpi, nccl)",
                         function, env);
  }
  if (backend == TSR_COMM_BACKEND_AUTO)
    backend = strcmp(ctx->backend->name, "cuda") == 0 ? TSR_COMM_BACKEND_NCCL : TSR_COMM_BACKEND_MPI;
  const tsr_comm_transport_t* t = NULL;
  for (size_t i = 0; transports[i]; i++)
    if (transports[i]->backend == backend) t = transports[i];
  if (!t)
    return tsr_fail(TSR_ERROR_UNSUPPORTED, "%s: this build of libtessera has no %s communicator backend", function,
                    backend == TSR_COMM_BACKEND_NCCL ? "nccl" : "mpi");
  tsr_status_t st = t->available(ctx);
  if (st) return tsr_fail(st, "%s: %s", function, tsrGetLastErrorMessage());
  o.backend = backend;
  *out = o;
  *out_transport = t;
  return TSR_SUCCESS;
}

static tsr_comm_call_t call_for(const char* function, uint64_t timeout_ms, const tsr_comm_fault_t* f) {
  return (tsr_comm_call_t){.function = function, .deadline_ns = tsr_comm_now_ns() + timeout_ms * 1000000u,
                           .queue = NULL, .recording = false, .aborted = f ? &f->aborted : NULL};
}

/* Publishes a communicator over a transport's new state; on failure destroys the state. */
static tsr_status_t publish(struct tsr_context* ctx, const tsr_comm_transport_t* t, void* state, int rank, int size,
                            const tsr_comm_options_t* o, tsr_comm_fault_t* shared, const char* function,
                            tsr_comm_t* out) {
  struct tsr_comm* c = calloc(1, sizeof *c);
  tsr_comm_fault_t* f = shared ? shared : fault_new();
  if (!c || !f) {
    free(c);
    if (f && !shared) fault_unref(f);
    t->destroy(state, false);
    return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "%s: out of memory", function);
  }
  if (shared) atomic_fetch_add(&f->refs, 1);
  c->transport = t;
  c->state = state;
  c->rank = rank;
  c->size = size;
  c->flags = o->flags;
  c->timeout_ms = o->timeout_ms;
  c->units = o->units;
  c->fault = f;
  tsr_status_t st = tsr_object_publish(ctx, &c->obj, TSR_MAGIC_COMM, function);
  if (st) {
    tsr_comm_free(c);
    return st;
  }
  *out = c;
  return TSR_SUCCESS;
}

uint32_t tsr_comm_units(const struct tsr_comm* c) {
  return c->transport->flags & TSR_COMM_TRANSPORT_DEVICE_QUEUE ? c->units : 0;
}

void tsr_comm_free(struct tsr_comm* c) {
  pthread_mutex_lock(&c->fault->lock);
  bool broken = c->fault->status != TSR_SUCCESS;
  pthread_mutex_unlock(&c->fault->lock);
  if (broken) c->transport->abort(c->state);
  c->transport->destroy(c->state, broken);
  fault_unref(c->fault);
  free(c->scratch);
  free(c);
}

/* What every entry taking a context checks first: the context, the output, the options and their transport. */
static tsr_status_t prologue(tsr_context_t ctx, const void* out, const tsr_comm_options_t* options,
                             const char* function, tsr_comm_options_t* o, const tsr_comm_transport_t** t) {
  tsr_status_t st = tsr_check_context(ctx, function);
  if (st) return st;
  if (!out) return tsr_fail_null_output(function);
  return resolve(ctx, options, function, o, t);
}

static tsr_status_t create(tsr_context_t ctx, const tsr_comm_options_t* o, const tsr_comm_transport_t* t,
                           const tsr_comm_init_t* init_in, const char* function, tsr_comm_t* out_comm) {
  tsr_comm_init_t init = *init_in;
  init.context = ctx;
  init.units = o->units;
  tsr_comm_call_t call = call_for(function, o->timeout_ms, NULL);
  void* state;
  int rank, size;
  tsr_status_t st = t->create(&init, &call, &state, &rank, &size);
  if (st) return st;
  return publish(ctx, t, state, rank, size, o, NULL, function, out_comm);
}

tsr_status_t tsrCommGetUniqueId(tsr_context_t ctx, const tsr_comm_options_t* options, tsr_comm_unique_id_t* out_id) {
  tsr_comm_options_t o;
  const tsr_comm_transport_t* t;
  tsr_status_t st = prologue(ctx, out_id, options, __func__, &o, &t);
  return st ? st : t->unique_id(ctx, out_id);
}

tsr_status_t tsrCommCreate(tsr_context_t ctx, const tsr_comm_options_t* options, int world, int rank,
                           const tsr_comm_unique_id_t* id, tsr_comm_t* out_comm) {
  tsr_comm_options_t o;
  const tsr_comm_transport_t* t;
  tsr_status_t st = prologue(ctx, out_comm, options, __func__, &o, &t);
  if (st) return st;
  if (!id) return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: the unique id is NULL", __func__);
  if (world < 1 || rank < 0 || rank >= world)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: rank %d of a world of %d (need world >= 1, 0 <= rank < world)",
                    __func__, rank, world);
  return create(ctx, &o, t, &(tsr_comm_init_t){.world = world, .rank = rank, .local_rank = -1, .id = id}, __func__,
                out_comm);
}

/* ---- the rendezvous of tsrCommCreateFromEnv --------------------------------------------------------- */

/* An environment variable as an int in [lo, hi]. */
static tsr_status_t env_int(const char* name, int lo, int hi, bool required, int* out) {
  const char* v = getenv(name);
  if (!v || !*v) {
    if (required)
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrCommCreateFromEnv: %s is not set (the launcher sets RANK, "
                      "WORLD_SIZE and TESSERA_RENDEZVOUS or MASTER_ADDR/MASTER_PORT; docs/launching.md)", name);
    return TSR_SUCCESS;
  }
  char* end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || *end || x < lo || x > hi)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrCommCreateFromEnv: %s=%s is not an integer in [%d, %d]", name, v, lo,
                    hi);
  *out = (int)x;
  return TSR_SUCCESS;
}

/* TESSERA_RENDEZVOUS=host:port (the last colon splits, so "[::1]:29500" works), else MASTER_ADDR/PORT. */
static tsr_status_t rendezvous_address(char* host, size_t host_size, char* port, size_t port_size) {
  const char* rv = getenv("TESSERA_RENDEZVOUS");
  if (rv && *rv) {
    const char* colon = strrchr(rv, ':');
    if (!colon || colon == rv || !colon[1])
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrCommCreateFromEnv: TESSERA_RENDEZVOUS=%s is not host:port", rv);
    size_t n = (size_t)(colon - rv);
    if (rv[0] == '[' && n >= 2 && rv[n - 1] == ']') rv++, n -= 2;
    snprintf(host, host_size, "%.*s", (int)n, rv);
    snprintf(port, port_size, "%s", colon + 1);
    return TSR_SUCCESS;
  }
  const char* addr = getenv("MASTER_ADDR");
  const char* p = getenv("MASTER_PORT");
  if (!addr || !*addr || !p || !*p)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrCommCreateFromEnv: no rendezvous address: set TESSERA_RENDEZVOUS="
                    "host:port, or MASTER_ADDR and MASTER_PORT");
  snprintf(host, host_size, "%s", addr);
  snprintf(port, port_size, "%s", p);
  return TSR_SUCCESS;
}

static int ms_left(uint64_t deadline_ns) {
  uint64_t now = tsr_comm_now_ns();
  if (now >= deadline_ns) return 0;
  uint64_t ms = (deadline_ns - now) / 1000000u + 1;
  return ms > 1000 ? 1000 : (int)ms;  /* poll in slices of at most a second */
}

/* Moves `n` bytes over a socket before the deadline (send or receive). */
static bool transfer(int fd, void* buf, size_t n, bool sending, uint64_t deadline_ns) {
  unsigned char* p = buf;
  while (n) {
    struct pollfd pfd = {.fd = fd, .events = sending ? POLLOUT : POLLIN};
    int left = ms_left(deadline_ns);
    if (left == 0) return false;
    if (poll(&pfd, 1, left) <= 0) continue;
    ssize_t k = sending ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
    if (k <= 0) {
      if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      return false;
    }
    p += k;
    n -= (size_t)k;
  }
  return true;
}

/* What rank 0 sends each peer: a tag (so that a stray connection is told apart), the world, the id. */
typedef struct rendezvous_msg {
  char tag[8];
  int32_t world;
  tsr_comm_unique_id_t id;
} rendezvous_msg_t;

static const char kTag[8] = "TSRCOMM1";

/* Rank 0: listens on host:port and gives the message to world - 1 peers. */
static tsr_status_t serve_id(const char* host, const char* port, const rendezvous_msg_t* msg, int world,
                             uint64_t deadline_ns) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai;
  int err = getaddrinfo(host, port, &hints, &ai);
  if (err)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrCommCreateFromEnv: rendezvous address %s:%s: %s", host, port,
                    gai_strerror(err));
  int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
  int one = 1;
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  bool ok = fd >= 0 && bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, world) == 0;
  int bind_errno = errno;
  freeaddrinfo(ai);
  if (!ok) {
    if (fd >= 0) close(fd);
    return tsr_fail(TSR_ERROR_INIT_FAIL, "tsrCommCreateFromEnv: rank 0 cannot listen on %s:%s (%s)", host, port,
                    strerror(bind_errno));
  }
  int served = 0;
  while (served < world - 1) {
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int left = ms_left(deadline_ns);
    if (left == 0) break;
    if (poll(&pfd, 1, left) <= 0) continue;
    int c = accept(fd, NULL, NULL);
    if (c < 0) continue;
    if (transfer(c, (void*)msg, sizeof *msg, true, deadline_ns)) served++;
    close(c);
  }
  close(fd);
  if (served < world - 1)
    return tsr_fail(TSR_ERROR_TIMEOUT, "tsrCommCreateFromEnv: rank 0 heard from %d of the %d other ranks at %s:%s "
                    "before the timeout", served, world - 1, host, port);
  return TSR_SUCCESS;
}

/* Connects the non-blocking socket `fd` to `ai` before the deadline: a blocking connect whose SYN goes
 * unanswered (a host that drops it, rank 0's full listen queue) waits out the kernel's retries, about two
 * minutes, whatever the communicator's timeout. */
static bool connect_by(int fd, const struct addrinfo* ai, uint64_t deadline_ns) {
  if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) return true;
  if (errno != EINPROGRESS) return false;
  struct pollfd pfd = {.fd = fd, .events = POLLOUT};
  for (;;) {
    int left = ms_left(deadline_ns);
    if (left == 0) return false;
    if (poll(&pfd, 1, left) > 0) break;
  }
  int error = 0;
  socklen_t len = sizeof error;
  return getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && error == 0;
}

/* A peer: connects to rank 0 (retrying while it has not started listening) and reads the message. */
static tsr_status_t fetch_id(const char* host, const char* port, rendezvous_msg_t* msg, uint64_t deadline_ns) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
  int err = getaddrinfo(host, port, &hints, &ai);
  if (err)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrCommCreateFromEnv: rendezvous address %s:%s: %s", host, port,
                    gai_strerror(err));
  bool got = false;
  while (!got && tsr_comm_now_ns() < deadline_ns) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd >= 0 && connect_by(fd, ai, deadline_ns))
      got = transfer(fd, msg, sizeof *msg, false, deadline_ns) && memcmp(msg->tag, kTag, sizeof kTag) == 0;
    if (fd >= 0) close(fd);
    if (!got) nanosleep(&(struct timespec){.tv_nsec = 50 * 1000000}, NULL);
  }
  freeaddrinfo(ai);
  if (!got)
    return tsr_fail(TSR_ERROR_TIMEOUT, "tsrCommCreateFromEnv: no rank 0 answered at %s:%s before the timeout", host,
                    port);
  return TSR_SUCCESS;
}

tsr_status_t tsrCommCreateFromEnv(tsr_context_t ctx, const tsr_comm_options_t* options, tsr_comm_t* out_comm) {
  tsr_comm_options_t o;
  const tsr_comm_transport_t* t;
  tsr_status_t st = prologue(ctx, out_comm, options, __func__, &o, &t);
  if (st) return st;
  if (t->launched && t->launched())
    return create(ctx, &o, t, &(tsr_comm_init_t){.world = -1, .rank = -1, .local_rank = -1}, __func__, out_comm);
  int world = 0, rank = 0, local_rank = -1;
  if ((st = env_int("WORLD_SIZE", 1, 1 << 24, true, &world)) || (st = env_int("RANK", 0, world - 1, true, &rank)) ||
      (st = env_int("LOCAL_RANK", 0, world - 1, false, &local_rank)))
    return st;
  rendezvous_msg_t msg = {.world = world};
  memcpy(msg.tag, kTag, sizeof kTag);
  if (world > 1) {
    char host[256], port[32];
    if ((st = rendezvous_address(host, sizeof host, port, sizeof port))) return st;
    uint64_t deadline = tsr_comm_now_ns() + o.timeout_ms * 1000000u;
    if (rank == 0) {
      if ((st = t->unique_id(ctx, &msg.id)) || (st = serve_id(host, port, &msg, world, deadline))) return st;
    } else {
      if ((st = fetch_id(host, port, &msg, deadline))) return st;
      if (msg.world != world)
        return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrCommCreateFromEnv: WORLD_SIZE=%d here but %d on rank 0", world,
                        msg.world);
    }
  } else if ((st = t->unique_id(ctx, &msg.id))) {
    return st;
  }
  return create(ctx, &o, t, &(tsr_comm_init_t){.world = world, .rank = rank, .local_rank = local_rank, .id = &msg.id},
                __func__, out_comm);
}

tsr_status_t tsrRetainComm(tsr_comm_t c) { return tsr_object_retain(c, TSR_MAGIC_COMM, __func__, WHAT); }
tsr_status_t tsrReleaseComm(tsr_comm_t c) {
  return tsr_object_release(c, TSR_MAGIC_COMM, __func__, WHAT);
}
tsr_status_t tsrDestroyComm(tsr_comm_t c) {
  return tsr_object_release(c, TSR_MAGIC_COMM, __func__, WHAT);
}

/* A live communicator (a reference taken). */
static tsr_status_t acquire(tsr_comm_t c, const char* function) {
  return tsr_object_retain(c, TSR_MAGIC_COMM, function, WHAT);
}

static tsr_status_t query_int(tsr_comm_t c, int* out, int which, const char* function) {
  tsr_status_t st = acquire(c, function);
  if (st) return st;
  if (!out) st = tsr_fail_null_output(function);
  else *out = which == 0 ? c->rank : c->size;
  tsr_object_unref(&c->obj);
  return st;
}

tsr_status_t tsrCommGetRank(tsr_comm_t c, int* out_rank) { return query_int(c, out_rank, 0, __func__); }
tsr_status_t tsrCommGetSize(tsr_comm_t c, int* out_size) { return query_int(c, out_size, 1, __func__); }

tsr_status_t tsrCommGetBackend(tsr_comm_t c, uint32_t* out_backend) {
  tsr_status_t st = acquire(c, __func__);
  if (st) return st;
  if (!out_backend) st = tsr_fail_null_output(__func__);
  else *out_backend = c->transport->backend;
  tsr_object_unref(&c->obj);
  return st;
}

tsr_status_t tsrCommGetAsyncError(tsr_comm_t c) {
  tsr_status_t st = acquire(c, __func__);
  if (st) return st;
  st = fault_check(c->fault, __func__);
  if (!st && c->transport->async_error && (st = c->transport->async_error(c->state))) fault_set(c->fault, st);
  tsr_object_unref(&c->obj);
  return st;
}

tsr_status_t tsrCommAbort(tsr_comm_t c) {
  tsr_status_t st = acquire(c, __func__);
  if (st) return st;
  atomic_store(&c->fault->aborted, true);
  tsr_fail(TSR_ERROR_LAUNCH_FAILED, "the communicator was aborted (tsrCommAbort)");
  fault_set(c->fault, TSR_ERROR_LAUNCH_FAILED);
  c->transport->abort(c->state);
  tsr_object_unref(&c->obj);
  return TSR_SUCCESS;
}

/* ---- operations ------------------------------------------------------------------------------------- */

/* The operations, as graph nodes record them (tsr_comm_node_t.kind). */
enum { ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, ALL_TO_ALL, BROADCAST, SEND, RECV };

/* An operation in progress: the communicator and stream held, the call's deadline set. */
typedef struct op_ctx {
  struct tsr_comm* comm;
  struct tsr_stream* stream;
  bool capturing;  /* the stream records a graph: the operation becomes a node of it */
  tsr_comm_call_t call;
} op_ctx_t;

/* Waits for the work queued on `stream` so far, polling an event against the deadline (host transports). */
static tsr_status_t wait_stream(struct tsr_stream* s, const tsr_comm_call_t* call) {
  tsr_event_t ev;
  tsr_status_t st = tsrCreateEvent(s->obj.context, &ev);
  if (st || (st = tsrEventRecord(ev, s))) {
    if (!st) tsrDestroyEvent(ev);
    return st;
  }
  long sleep_ns = 1000;
  while ((st = tsrEventQuery(ev)) == TSR_ERROR_NOT_READY) {
    if (tsr_comm_now_ns() >= call->deadline_ns) {
      st = tsr_fail(TSR_ERROR_TIMEOUT, "%s: the stream's earlier work did not finish before the communicator's "
                    "timeout", call->function);
      break;
    }
    nanosleep(&(struct timespec){.tv_nsec = sleep_ns}, NULL);
    if (sleep_ns < 1000000) sleep_ns *= 2;
  }
  tsrDestroyEvent(ev);
  return st;
}

static tsr_status_t op_begin(tsr_comm_t c, tsr_stream_t stream, const char* function, op_ctx_t* o) {
  tsr_status_t st = acquire(c, function);
  if (st) return st;
  o->comm = c;
  o->stream = NULL;
  o->capturing = false;
  if ((st = fault_check(c->fault, function))) goto fail;
  o->call = call_for(function, c->timeout_ms, c->fault);
  if (stream) {
    if ((st = tsr_stream_acquire(stream, c->obj.context, function))) goto fail;
    o->stream = stream;
    int capturing = 0;
    tsrStreamIsCapturing(stream, &capturing);
    bool device = c->transport->flags & TSR_COMM_TRANSPORT_DEVICE_QUEUE;
    if (capturing && device && !(c->transport->flags & TSR_COMM_TRANSPORT_CAPTURE)) {
      st = tsr_fail(TSR_ERROR_UNSUPPORTED, "%s: the %s backend cannot record a transfer into a capturing stream",
                    function, c->transport->name);
      goto fail;
    }
    o->capturing = capturing;
    if (device) o->call.queue = stream->queue;
  }
  return TSR_SUCCESS;
fail:
  if (o->stream) tsr_object_unref(&o->stream->obj);
  tsr_object_unref(&c->obj);
  return st;
}

/* Before the transfer of a host transport: the stream's earlier work. */
static tsr_status_t op_order(op_ctx_t* o) {
  if (!o->stream || (o->comm->transport->flags & TSR_COMM_TRANSPORT_DEVICE_QUEUE)) return TSR_SUCCESS;
  return wait_stream(o->stream, &o->call);
}

/* After the transfer: a failure of the transport breaks the communicator. */
static tsr_status_t op_end(op_ctx_t* o, tsr_status_t st, bool from_transport) {
  if (st && from_transport) fault_set(o->comm->fault, st);
  if (o->stream) tsr_object_unref(&o->stream->obj);
  tsr_object_unref(&o->comm->obj);
  return st;
}

static tsr_status_t check_dtype(tsr_dtype_t dtype, const char* function) {
  if (tsr_comm_dtype_size(dtype) == 0)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: dtype %d is not a tsr_dtype_t", function, (int)dtype);
  return TSR_SUCCESS;
}

/* Whether comm.c reduces deterministically itself: through all_gather and the tree (host transports). */
static bool host_tree(const struct tsr_comm* c) {
  return (c->flags & TSR_COMM_DETERMINISTIC) && !(c->transport->flags & TSR_COMM_TRANSPORT_DETERMINISTIC);
}

static tsr_status_t check_reduction(const op_ctx_t* o, tsr_dtype_t dtype, tsr_reduce_op_t op, const char* function) {
  const struct tsr_comm* c = o->comm;
  tsr_status_t st = check_dtype(dtype, function);
  if (st) return st;
  if ((unsigned)op > TSR_REDUCE_AVG)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: op %d is not a tsr_reduce_op_t", function, (int)op);
  bool device = c->transport->flags & TSR_COMM_TRANSPORT_DEVICE_QUEUE;
  if (!tsr_comm_host_reducible(dtype, op) && !(device && dtype == TSR_DTYPE_F16))
    return tsr_fail(TSR_ERROR_UNSUPPORTED, "%s: the %s backend cannot reduce %s with %s", function,
                    c->transport->name, dtype_name(dtype), op_name(op));
  /* A device transport's deterministic reduction combines on the host between two copies it waits for: no
   * device graph can hold that. comm.c's own tree (host transports) runs at its node of the replay. */
  if (o->capturing && device && (c->flags & TSR_COMM_DETERMINISTIC))
    return tsr_fail(TSR_ERROR_UNSUPPORTED, "%s: the %s backend's deterministic reduction cannot be captured: it "
                    "gathers to the host, combines there and copies back, waiting for the GPU in between, which a "
                    "CUDA graph cannot record (capture without TSR_COMM_DETERMINISTIC, or call it uncaptured)",
                    function, c->transport->name);
  return TSR_SUCCESS;
}

/* A buffer of `count` elements: not NULL (unless count is 0), inside the allocation it starts in, and for a
 * transport that queues on the device, device memory of the context: the GPU faults on any other address
 * (a host array handed to ncclAllGather did), and a fault kills the whole context, not just this call. */
static tsr_status_t check_buffer(const struct tsr_comm* c, const void* p, size_t count, tsr_dtype_t dtype,
                                 const char* what, const char* function) {
  if (count == 0) return TSR_SUCCESS;
  if (!p) return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: the %s buffer is NULL", function, what);
  size_t bytes = count * tsr_comm_dtype_size(dtype);
  if (bytes / tsr_comm_dtype_size(dtype) != count)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: %zu elements of %s overflow size_t", function, count,
                    dtype_name(dtype));
  tsr_allocation_t a;
  bool known = tsr_memory_lookup(c->obj.context, p, &a);
  if ((c->transport->flags & TSR_COMM_TRANSPORT_DEVICE_QUEUE) &&
      !(known && (a.kind == TSR_MEMORY_DEVICE || a.kind == TSR_MEMORY_DEVICE_REGISTERED)))
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: %s (%p) must be device memory of the communicator's context "
                    "(tsrAlloc, or tsrDeviceRegister for another library's): the %s backend queues the transfer on "
                    "the GPU, which would fault on %s", function, what, p, c->transport->name,
                    known ? "pinned or registered host memory" : "memory the context does not know");
  if (known && (uintptr_t)p - a.base + bytes > a.bytes)
    return tsr_fail(TSR_ERROR_MEMORY_FAULT, "%s: the %s buffer (%zu bytes) runs %zu bytes past the end of its "
                    "allocation #%llu of %zu bytes", function, what, bytes, (size_t)((uintptr_t)p - a.base + bytes -
                    a.bytes), (unsigned long long)a.serial, a.bytes);
  return TSR_SUCCESS;
}

static tsr_status_t check_divisible(const struct tsr_comm* c, size_t count, const char* function) {
  if (count % (size_t)c->size)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: count %zu is not a multiple of the communicator's %d ranks",
                    function, count, c->size);
  return TSR_SUCCESS;
}

static tsr_status_t check_rank(const struct tsr_comm* c, int r, const char* what, const char* function) {
  if (r < 0 || r >= c->size)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: %s %d is outside [0, %d)", function, what, r, c->size);
  return TSR_SUCCESS;
}

/* The elements a node's send and recv buffers hold (send: 0 where it is not read on this rank). */
static void extents(const tsr_comm_node_t* n, size_t* send, size_t* recv) {
  size_t size = (size_t)n->comm->size;
  *send = *recv = n->count;
  switch (n->kind) {
    case REDUCE_SCATTER: *recv = n->count / size; break;
    case ALL_GATHER: *recv = n->count * size; break;
    case BROADCAST: if (n->peer != n->comm->rank) *send = 0; break;
    case SEND: *recv = 0; break;
    case RECV: *send = 0; break;
    default: break;
  }
}

/* The serial of the allocation `p` starts in, 0 when the context knows none. */
static uint64_t serial_of(const struct tsr_comm* c, const void* p) {
  tsr_allocation_t a;
  return p && tsr_memory_lookup(c->obj.context, p, &a) ? a.serial : 0;
}

/* A recorded buffer: checked as at the call, and still in the allocation it was recorded in: one freed since
 * (a temporary of the code that recorded it) would be written after its reuse. */
static tsr_status_t check_recorded(const tsr_comm_node_t* n, const void* p, size_t count, uint64_t serial,
                                   const char* what) {
  tsr_status_t st = check_buffer(n->comm, p, count, n->dtype, what, n->function);
  if (st || !count || !serial || serial_of(n->comm, p) == serial) return st;
  return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s (recorded in a graph): the %s buffer's allocation #%llu was freed "
                  "since the capture", n->function, what, (unsigned long long)serial);
}

/* The buffer checks of a node (for p2p both are `buf`: send's in send, recv's in recv). */
static tsr_status_t check_node_buffers(const tsr_comm_node_t* n) {
  size_t send, recv;
  extents(n, &send, &recv);
  bool p2p = n->kind == SEND || n->kind == RECV;
  tsr_status_t st = check_recorded(n, n->send, send, n->send_serial, p2p ? "buf" : "send");
  if (!st) st = check_recorded(n, n->recv, recv, n->recv_serial, p2p ? "buf" : "recv");
  return st;
}

/* The deterministic all_reduce of `count` elements into `out`, through the transport's all_gather. */
static tsr_status_t tree_all_reduce(struct tsr_comm* c, const tsr_comm_call_t* call, const void* send, void* out,
                                    size_t count, tsr_dtype_t dtype, tsr_reduce_op_t op) {
  size_t block = count * tsr_comm_dtype_size(dtype);
  if (block > SIZE_MAX / (size_t)c->size)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: %d × %zu bytes overflow size_t", call->function, c->size, block);
  size_t bytes = block * (size_t)c->size;
  if (c->scratch_bytes < bytes) {
    void* grown = realloc(c->scratch, bytes);
    if (!grown) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "%s: out of memory for the %d ranks' buffers (%zu bytes)",
                                call->function, c->size, bytes);
    c->scratch = grown;
    c->scratch_bytes = bytes;
  }
  tsr_status_t st = c->transport->all_gather(c->state, send, c->scratch, count, dtype, call);
  if (!st) tsr_comm_tree_reduce(dtype, op, c->scratch, c->size, count, out);
  return st;
}

/* Moves the bytes of a checked operation of count > 0, now (or, with call->queue, queued or recorded on it):
 * what a direct call and a graph replay both do. `*from_transport`: a failure breaks the communicator. */
static tsr_status_t perform(const tsr_comm_node_t* n, const tsr_comm_call_t* call, bool* from_transport) {
  struct tsr_comm* c = n->comm;
  const tsr_comm_transport_t* t = c->transport;
  bool det = c->flags & TSR_COMM_DETERMINISTIC;
  size_t size = (size_t)c->size, elem = tsr_comm_dtype_size(n->dtype);
  *from_transport = true;
  switch (n->kind) {
    case ALL_REDUCE:
      if (host_tree(c)) return tree_all_reduce(c, call, n->send, n->recv, n->count, n->dtype, n->op);
      return t->all_reduce(c->state, n->send, n->recv, n->count, n->dtype, n->op, det, call);
    case REDUCE_SCATTER: {
      size_t part = n->count / size;
      if (!host_tree(c)) return t->reduce_scatter(c->state, n->send, n->recv, part, n->dtype, n->op, det, call);
      /* The whole reduction in tree order, of which this rank keeps its part: size × count of traffic, the
       * documented price of a result bit-identical to the interpreter's. */
      void* whole = malloc(n->count * elem);
      if (!whole) {
        *from_transport = false;
        return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "%s: out of memory (%zu bytes)", call->function, n->count * elem);
      }
      tsr_status_t st = tree_all_reduce(c, call, n->send, whole, n->count, n->dtype, n->op);
      if (!st) memcpy(n->recv, (unsigned char*)whole + (size_t)c->rank * part * elem, part * elem);
      free(whole);
      return st;
    }
    case ALL_GATHER: return t->all_gather(c->state, n->send, n->recv, n->count, n->dtype, call);
    case ALL_TO_ALL: return t->all_to_all(c->state, n->send, n->recv, n->count / size, n->dtype, call);
    case BROADCAST: return t->broadcast(c->state, n->send, n->recv, n->count, n->dtype, n->peer, call);
    case SEND: return t->send(c->state, n->send, n->count, n->dtype, n->peer, call);
    default: return t->recv(c->state, n->recv, n->count, n->dtype, n->peer, call);
  }
}

/* The end of every checked operation: nothing for count 0; recorded as a node while the stream captures;
 * else after the stream's earlier work (host transports), the transfer. */
static tsr_status_t op_finish(op_ctx_t* o, int kind, const void* send, void* recv, size_t count, tsr_dtype_t dtype,
                              tsr_reduce_op_t op, int peer) {
  if (count == 0) return op_end(o, TSR_SUCCESS, false);
  tsr_comm_node_t n = {.comm = o->comm, .function = o->call.function, .kind = kind, .send = send, .recv = recv,
                       .count = count, .dtype = dtype, .op = op, .peer = peer};
  if (o->capturing) {
    n.send_serial = serial_of(o->comm, send);
    n.recv_serial = serial_of(o->comm, recv);
    return op_end(o, tsr_stream_record_comm(o->stream, &n), false);
  }
  tsr_status_t st = op_order(o);
  if (st) return op_end(o, st, false);
  bool from_transport;
  st = perform(&n, &o->call, &from_transport);
  return op_end(o, st, from_transport);
}

static tsr_status_t all_reduce(tsr_comm_t c, const void* send, void* recv, size_t count, tsr_dtype_t dtype,
                               tsr_reduce_op_t op, tsr_stream_t stream, bool alone, const char* function) {
  op_ctx_t o;
  tsr_status_t st = op_begin(c, stream, function, &o);
  if (st) return st;
  o.call.alone = alone;
  if ((st = check_reduction(&o, dtype, op, function)) || (st = check_buffer(c, send, count, dtype, "send", function)) ||
      (st = check_buffer(c, recv, count, dtype, "recv", function)))
    return op_end(&o, st, false);
  return op_finish(&o, ALL_REDUCE, send, recv, count, dtype, op, 0);
}

tsr_status_t tsrCommAllReduce(tsr_comm_t c, const void* send, void* recv, size_t count, tsr_dtype_t dtype,
                              tsr_reduce_op_t op, tsr_stream_t stream) {
  return all_reduce(c, send, recv, count, dtype, op, stream, false, __func__);
}

tsr_status_t tsr_comm_all_reduce(struct tsr_comm* c, const void* send, void* recv, size_t count, tsr_dtype_t dtype,
                                 tsr_reduce_op_t op, tsr_stream_t stream, bool alone) {
  return all_reduce(c, send, recv, count, dtype, op, stream, alone, "tsrCommAllReduce");
}

tsr_status_t tsrCommReduceScatter(tsr_comm_t c, const void* send, void* recv, size_t count, tsr_dtype_t dtype,
                                  tsr_reduce_op_t op, tsr_stream_t stream) {
  op_ctx_t o;
  tsr_status_t st = op_begin(c, stream, __func__, &o);
  if (st) return st;
  if ((st = check_reduction(&o, dtype, op, __func__)) || (st = check_divisible(c, count, __func__)) ||
      (st = check_buffer(c, send, count, dtype, "send", __func__)) ||
      (st = check_buffer(c, recv, count / (size_t)c->size, dtype, "recv", __func__)))
    return op_end(&o, st, false);
  return op_finish(&o, REDUCE_SCATTER, send, recv, count, dtype, op, 0);
}

tsr_status_t tsrCommAllGather(tsr_comm_t c, const void* send, void* recv, size_t count, tsr_dtype_t dtype,
                              tsr_stream_t stream) {
  op_ctx_t o;
  tsr_status_t st = op_begin(c, stream, __func__, &o);
  if (st) return st;
  size_t total = count * (size_t)c->size;
  if ((st = check_dtype(dtype, __func__)) || (st = check_buffer(c, send, count, dtype, "send", __func__)) ||
      (st = check_buffer(c, recv, total, dtype, "recv", __func__)))
    return op_end(&o, st, false);
  return op_finish(&o, ALL_GATHER, send, recv, count, dtype, TSR_REDUCE_SUM, 0);
}

tsr_status_t tsrCommAllToAll(tsr_comm_t c, const void* send, void* recv, size_t count, tsr_dtype_t dtype,
                             tsr_stream_t stream) {
  op_ctx_t o;
  tsr_status_t st = op_begin(c, stream, __func__, &o);
  if (st) return st;
  if ((st = check_dtype(dtype, __func__)) || (st = check_divisible(c, count, __func__)) ||
      (st = check_buffer(c, send, count, dtype, "send", __func__)) ||
      (st = check_buffer(c, recv, count, dtype, "recv", __func__)))
    return op_end(&o, st, false);
  size_t bytes = count * tsr_comm_dtype_size(dtype);
  if (count && (const unsigned char*)send < (unsigned char*)recv + bytes &&
      (unsigned char*)recv < (const unsigned char*)send + bytes)
    return op_end(&o, tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: the send and recv buffers overlap", __func__), false);
  return op_finish(&o, ALL_TO_ALL, send, recv, count, dtype, TSR_REDUCE_SUM, 0);
}

tsr_status_t tsrCommBroadcast(tsr_comm_t c, const void* send, void* recv, size_t count, tsr_dtype_t dtype, int root,
                              tsr_stream_t stream) {
  op_ctx_t o;
  tsr_status_t st = op_begin(c, stream, __func__, &o);
  if (st) return st;
  if ((st = check_dtype(dtype, __func__)) || (st = check_rank(c, root, "root", __func__)) ||
      (c->rank == root && (st = check_buffer(c, send, count, dtype, "send", __func__))) ||
      (st = check_buffer(c, recv, count, dtype, "recv", __func__)))
    return op_end(&o, st, false);
  return op_finish(&o, BROADCAST, send, recv, count, dtype, TSR_REDUCE_SUM, root);
}

/* Send and recv: one peer, not this rank. */
static tsr_status_t p2p(tsr_comm_t c, void* buf, size_t count, tsr_dtype_t dtype, int peer, tsr_stream_t stream,
                        bool sending, const char* function) {
  op_ctx_t o;
  tsr_status_t st = op_begin(c, stream, function, &o);
  if (st) return st;
  if ((st = check_dtype(dtype, function)) || (st = check_rank(c, peer, "peer", function)))
    return op_end(&o, st, false);
  if (peer == c->rank)
    return op_end(&o, tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: peer %d is this rank", function, peer), false);
  if ((st = check_buffer(c, buf, count, dtype, "buf", function))) return op_end(&o, st, false);
  return op_finish(&o, sending ? SEND : RECV, sending ? buf : NULL, sending ? NULL : buf, count, dtype,
                   TSR_REDUCE_SUM, peer);
}

tsr_status_t tsrCommSend(tsr_comm_t c, const void* buf, size_t count, tsr_dtype_t dtype, int peer,
                         tsr_stream_t stream) {
  return p2p(c, (void*)buf, count, dtype, peer, stream, true, __func__);
}

tsr_status_t tsrCommRecv(tsr_comm_t c, void* buf, size_t count, tsr_dtype_t dtype, int peer, tsr_stream_t stream) {
  return p2p(c, buf, count, dtype, peer, stream, false, __func__);
}

/* ---- graph nodes (stream.h) ------------------------------------------------------------------------- */

void tsr_comm_node_hold(const tsr_comm_node_t* n) { tsr_object_ref(&n->comm->obj); }
void tsr_comm_node_drop(const tsr_comm_node_t* n) { tsr_object_unref(&n->comm->obj); }

tsr_status_t tsr_comm_node_check(const tsr_comm_node_t* n) { return check_node_buffers(n); }

tsr_status_t tsr_comm_node_watch(const tsr_comm_node_t* n, void* queue) {
  struct tsr_comm* c = n->comm;
  tsr_comm_call_t call = call_for(n->function, c->timeout_ms, c->fault);
  call.queue = queue;
  return c->transport->watch ? c->transport->watch(c->state, &call) : TSR_SUCCESS;
}

tsr_status_t tsr_comm_node_fault(const tsr_comm_node_t* n) {
  struct tsr_comm* c = n->comm;
  tsr_status_t st = fault_check(c->fault, n->function);
  if (!st && c->transport->async_error && (st = c->transport->async_error(c->state))) fault_set(c->fault, st);
  return st;
}

/* A replay (or a device graph's recording) of a node: as a direct call on a stream whose earlier work has
 * run (the nodes before it), with a deadline of its own and the communicator's fault domain. */
tsr_status_t tsr_comm_node_run(const tsr_comm_node_t* n, void* queue) {
  struct tsr_comm* c = n->comm;
  tsr_status_t st = fault_check(c->fault, n->function);
  if (st) return st;
  tsr_comm_call_t call = call_for(n->function, c->timeout_ms, c->fault);
  call.queue = queue;
  call.recording = queue != NULL;
  bool from_transport;
  if ((st = perform(n, &call, &from_transport)) && from_transport) fault_set(c->fault, st);
  return st;
}

tsr_status_t tsrCommSplit(tsr_comm_t c, int color, int key, tsr_comm_t* out_comm) {
  op_ctx_t o;
  tsr_status_t st = op_begin(c, NULL, __func__, &o);
  if (st) return st;
  if (!out_comm) return op_end(&o, tsr_fail_null_output(__func__), false);
  void* state = NULL;
  int rank = 0, size = 0;
  st = c->transport->split(c->state, color < 0 ? -1 : color, key, &o.call, &state, &rank, &size);
  if (st) return op_end(&o, st, true);
  if (!state) {
    *out_comm = NULL;
    return op_end(&o, TSR_SUCCESS, false);
  }
  tsr_comm_options_t opts = {.backend = c->transport->backend, .flags = c->flags, .timeout_ms = c->timeout_ms,
                             .units = c->units};
  st = publish(c->obj.context, c->transport, state, rank, size, &opts, c->fault, __func__, out_comm);
  return op_end(&o, st, false);
}
