/* comm_backend.h — the table through which comm.c (the public communicator API, <tessera/comm.h>) drives a
 * transport: MPI (comm_mpi.c) and NCCL (comm_nccl.c). comm.c validates every request first (handles, counts,
 * dtypes, ops, roots, peers, buffer extents, the stream) and orders it on its stream; a transport's entries
 * get checked values, move the bytes, and report only what the transport itself refuses or what goes wrong
 * on the wire, through tsr_fail (errors.h) with a message naming `call->function`.
 *
 * Never a hang: every entry that waits (for peers, the network, a device) polls against call->deadline_ns
 * and returns TSR_ERROR_TIMEOUT past it, or TSR_ERROR_LAUNCH_FAILED when it learns that a peer died or the
 * transport failed, and TSR_ERROR_LAUNCH_FAILED once *call->aborted becomes true (tsrCommAbort from another
 * thread). After any such failure comm.c marks the communicator broken and calls no entry but abort and
 * destroy on its state again. */
#ifndef TESSERA_SRC_COMM_BACKEND_H_
#define TESSERA_SRC_COMM_BACKEND_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/tessera.h"

struct tsr_context;

/* What one call of an entry is about. */
typedef struct tsr_comm_call {
  const char* function;        /* the API function, for messages ("tsrCommAllReduce") */
  uint64_t deadline_ns;        /* CLOCK_MONOTONIC time (tsr_comm_now_ns) past which a wait gives up */
  void* queue;                 /* TSR_COMM_TRANSPORT_DEVICE_QUEUE: the stream's device queue (backend.h; NULL
                                * for the NULL stream), or a device graph's recorder (backend.h
                                * graph_begin) when `recording`; host transports: always NULL, the call
                                * runs now */
  bool recording;              /* `queue` records a device graph (tsrGraphInstantiate): issue the operation
                                * so that the graph holds it; it does not run now (no completion to watch) */
  const atomic_bool* aborted;  /* true once tsrCommAbort was called: give up at the next poll */
  bool alone;                  /* nothing of the caller computes beside the operation (a compiled function's
                                * collective followed by no kernel step: tsr_comm_all_reduce): a transport
                                * that caps its operations at the communicator's units may run it uncapped */
} tsr_comm_call_t;

/* What tsrCommCreate / tsrCommCreateFromEnv ask a transport for. */
typedef struct tsr_comm_init {
  struct tsr_context* context;
  int world, rank;  /* -1, -1: take them from the launcher (MPI under mpiexec); else the caller's */
  int local_rank;   /* LOCAL_RANK, or -1 when unknown */
  const tsr_comm_unique_id_t* id;  /* NULL together with world -1 */
  uint32_t units;   /* tsr_comm_options_t.units, resolved: the most compute units an operation's kernels take
                     * (device-queue transports; split communicators keep their parent's), but for those
                     * issued `alone` (tsr_comm_call_t); 0: no limit */
} tsr_comm_init_t;

/* Flags of a transport. */
#define TSR_COMM_TRANSPORT_DEVICE_QUEUE 0x1u  /* operations are queued on the stream's device queue (NCCL);
                                               * else comm.c waits for the stream's earlier work and runs
                                               * the operation in the calling thread (MPI) */
#define TSR_COMM_TRANSPORT_CAPTURE 0x2u       /* a device-queue transport's operations may be recorded into
                                               * a capturing stream: tsrGraphInstantiate calls the entry with
                                               * call->recording to issue them into the device graph. Host
                                               * transports are always captured: comm.c calls the entry at the
                                               * node's place in each replay, in the replaying thread */
#define TSR_COMM_TRANSPORT_DETERMINISTIC 0x4u /* all_reduce/reduce_scatter honour `deterministic` themselves;
                                               * else comm.c reduces deterministically through all_gather
                                               * and tsr_comm_tree_reduce (host memory) */

typedef struct tsr_comm_transport {
  const char* name;  /* "mpi", "nccl": messages and $TESSERA_COMM_BACKEND */
  uint32_t backend;  /* its tsr_comm_backend_t */
  uint32_t flags;    /* TSR_COMM_TRANSPORT_* */

  /* TSR_SUCCESS when the transport can serve `context` (its library loads, the context's device is one it
   * moves memory of); else TSR_ERROR_UNSUPPORTED with a message saying why. Cheap after the first call. */
  tsr_status_t (*available)(struct tsr_context* context);
  /* Whether the environment shows this transport's own launcher (MPI: PMI_RANK, ...), for
   * tsrCommCreateFromEnv; NULL when it has none. */
  bool (*launched)(void);
  tsr_status_t (*unique_id)(struct tsr_context* context, tsr_comm_unique_id_t* out_id);
  /* Creates the state of one rank; sets *out_rank, *out_size. */
  tsr_status_t (*create)(const tsr_comm_init_t* init, const tsr_comm_call_t* call, void** out_state,
                         int* out_rank, int* out_size);
  /* Collective: color >= 0 (comm.c handles negative colors by passing color -1 here, which the transport
   * must still take part in, returning *out_state NULL). */
  tsr_status_t (*split)(void* state, int color, int key, const tsr_comm_call_t* call, void** out_state,
                        int* out_rank, int* out_size);

  /* The operations, with per-rank counts (comm.c has divided): reduce_scatter's `count` is what each rank
   * receives, all_to_all's what each pair exchanges. `op` may be AVG: a transport without a native average
   * sums, then divides with tsr_comm_scale. `deterministic` is true only for transports with
   * TSR_COMM_TRANSPORT_DETERMINISTIC (comm.c does it for the others). dtype/op pairs are those
   * tsr_comm_host_reducible accepts, plus F16 for device transports (which refuse what they cannot do with
   * TSR_ERROR_UNSUPPORTED). */
  tsr_status_t (*all_reduce)(void* state, const void* send, void* recv, size_t count, tsr_dtype_t dtype,
                             tsr_reduce_op_t op, bool deterministic, const tsr_comm_call_t* call);
  tsr_status_t (*reduce_scatter)(void* state, const void* send, void* recv, size_t count, tsr_dtype_t dtype,
                                 tsr_reduce_op_t op, bool deterministic, const tsr_comm_call_t* call);
  tsr_status_t (*all_gather)(void* state, const void* send, void* recv, size_t count, tsr_dtype_t dtype,
                             const tsr_comm_call_t* call);
  tsr_status_t (*all_to_all)(void* state, const void* send, void* recv, size_t count, tsr_dtype_t dtype,
                             const tsr_comm_call_t* call);
  tsr_status_t (*broadcast)(void* state, const void* send, void* recv, size_t count, tsr_dtype_t dtype, int root,
                            const tsr_comm_call_t* call);
  tsr_status_t (*send)(void* state, const void* buf, size_t count, tsr_dtype_t dtype, int peer,
                       const tsr_comm_call_t* call);
  tsr_status_t (*recv)(void* state, void* buf, size_t count, tsr_dtype_t dtype, int peer,
                       const tsr_comm_call_t* call);

  /* Transports with TSR_COMM_TRANSPORT_DEVICE_QUEUE and _CAPTURE: watches the operations a device graph's
   * launch just queued on call->queue (never NULL here), as a queued operation is watched: past
   * call->deadline_ns unfinished, or on the transport's asynchronous error, the communicator is aborted and
   * async_error reports it. */
  tsr_status_t (*watch)(void* state, const tsr_comm_call_t* call);

  /* Stops the transport's work on this state now without waiting for peers (ncclCommAbort); the state
   * is still destroyed afterwards. */
  void (*abort)(void* state);
  /* The transport's asynchronous error (ncclCommGetAsyncError), TSR_SUCCESS when none; NULL: none kept. */
  tsr_status_t (*async_error)(void* state);
  /* Frees the state. `broken`: an operation failed or the communicator was aborted, so peers may be gone:
   * free without any collective step (no MPI_Comm_free, which may wait for them). */
  void (*destroy)(void* state, bool broken);
} tsr_comm_transport_t;

/* The transports comm.c knows (the NCCL one: comm_nccl.c). */
extern const tsr_comm_transport_t tsr_comm_transport_mpi;
extern const tsr_comm_transport_t tsr_comm_transport_nccl;

/* Destroys a communicator (object.c, on its last release or its context's destruction). */
struct tsr_comm;
void tsr_comm_free(struct tsr_comm* comm);
/* The compute units a compiled function leaves free for `comm`'s kernels while its collectives are in flight
 * (function.c): the communicator's units on a device-queue transport, else 0. */
uint32_t tsr_comm_units(const struct tsr_comm* comm);
/* tsrCommAllReduce, for a compiled function's collective step (function.c); `alone`: no kernel step of the call
 * follows it, so a communicator with units runs it without their cap (tsr_comm_call_t.alone). Recorded into a
 * capturing stream it is tsrCommAllReduce's node (capped). */
tsr_status_t tsr_comm_all_reduce(struct tsr_comm* comm, const void* send, void* recv, size_t count,
                                 tsr_dtype_t dtype, tsr_reduce_op_t op, tsr_stream_t stream, bool alone);

/* ---- helpers comm.c provides to transports --------------------------------------------------------- */

/* Now, on CLOCK_MONOTONIC, in nanoseconds. */
uint64_t tsr_comm_now_ns(void);
/* Bytes of one element of `dtype`; 0 for a code comm.h does not name. */
size_t tsr_comm_dtype_size(tsr_dtype_t dtype);
/* Whether a host combine of `dtype` with `op` is defined (tsr_comm_combine): floats F32, F64, BF16 with
 * every op; I32, I64 with every op but AVG. */
bool tsr_comm_host_reducible(tsr_dtype_t dtype, tsr_reduce_op_t op);
/* acc[i] = acc[i] ∘ x[i] for i < count, rounded to the dtype (BF16 in f32, rounded to nearest even), AVG
 * combining as SUM. Host memory. */
void tsr_comm_combine(tsr_dtype_t dtype, tsr_reduce_op_t op, void* acc, const void* x, size_t count);
/* buf[i] /= n (floating dtypes), rounded to the dtype: AVG's last step. */
void tsr_comm_scale(tsr_dtype_t dtype, void* buf, size_t count, int n);
/* out = the `size` blocks of `count` elements at `gathered` (block r: rank r's) combined in the
 * interpreter's tree order (comm.h, tsrCommAllReduce), AVG dividing at the end. `gathered` is overwritten. */
void tsr_comm_tree_reduce(tsr_dtype_t dtype, tsr_reduce_op_t op, void* gathered, int size, size_t count, void* out);

#endif  /* TESSERA_SRC_COMM_BACKEND_H_ */
