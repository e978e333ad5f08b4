/*
 * comm.h — communicators: collectives and point-to-point transfers between the processes ("ranks") of a
 * job, over MPI (host memory, CPU contexts) or NCCL (device memory, CUDA contexts). Included by tessera.h;
 * do not include it alone. The reference page is docs/c-api.md, "Communicators"; starting a job is
 * docs/launching.md.
 *
 * Conventions, in addition to tessera.h's:
 *  - A communicator belongs to a context and is reference-counted like a stream: a create/split returns one
 *    reference, tsrRetainComm adds one, tsrReleaseComm (= tsrDestroyComm) drops one; destroying the context
 *    destroys its communicators.
 *  - Buffers are addressed as tsrLaunch addresses tensors: plain pointers into memory the context's
 *    kernels address (CPU contexts: host memory; CUDA contexts: device memory), e.g. from tsrAlloc or
 *    tsrHostRegister/tsrDeviceRegister, or memory the context does not know (not bounds-checked). A buffer
 *    that starts in a known allocation and runs past its end returns TSR_ERROR_MEMORY_FAULT before anything
 *    is sent. NCCL, which queues on the GPU (a host address would fault there and lose the context), takes
 *    only device memory of the communicator's context — tsrAlloc'd, or another library's registered with
 *    tsrDeviceRegister (DLPack imports are) — and refuses any other buffer (host memory, pinned or
 *    registered host memory, unknown memory, another context's) with TSR_ERROR_INVALID_VALUE naming the
 *    argument (send, recv, buf) before NCCL is called. `count` is in elements of `dtype`; a count of 0 is a no-op (no peer is waited for).
 *  - Collective calls (every function marked "collective") must be made by every rank of the communicator,
 *    in the same order, with matching counts, dtypes, ops and roots; a mismatch is not detected and its
 *    result is undefined (it may time out).
 *  - Stream order: each operation runs on a tsr_stream_t (NULL: the synchronous default stream), after the
 *    work queued on it before the call and before the work queued after it; events order it with other
 *    streams. With the MPI backend the call waits for the stream's earlier work, then runs the transfer in
 *    the calling thread and returns when it is done (the buffers may be reused at once). With the NCCL
 *    backend it is queued on the stream's device queue and the call returns at once; the buffers must stay
 *    valid until it has run.
 *  - Graph capture: on a capturing stream (tsrStreamBeginCapture) an operation is checked at the call as
 *    usual (a refusal leaves the capture going) and recorded as a node of the graph, in order with its other
 *    nodes; the graph holds a reference to the communicator. Each tsrGraphLaunch runs it again on the recorded
 *    buffers (their contents then), as a collective every rank must replay alike; its buffers are checked
 *    again before each launch (an allocation freed since: TSR_ERROR_INVALID_VALUE). MPI: the replay runs the
 *    transfer at the node, in the replaying thread, blocking, under the communicator's timeout as a direct
 *    call (a failure breaks the communicator and is the replay's status). NCCL: tsrGraphInstantiate issues
 *    the operation on its CUDA capture stream, so NCCL's kernels are part of the CUDA graph; each launch is
 *    watched against the timeout (the communicator is aborted past it and reports it; on the NULL stream the
 *    launch returns it). A deterministic reduction (TSR_COMM_DETERMINISTIC) on NCCL cannot be captured (it
 *    combines on the host between waits): TSR_ERROR_UNSUPPORTED. docs/c-api.md, "Communicators", "Graph
 *    capture".
 *  - Never a hang: every wait of an operation (for the peers, the network, the stream's earlier work) is
 *    bounded by the communicator's timeout. When it expires the operation returns TSR_ERROR_TIMEOUT naming
 *    the operation and, where the transport can tell, the peers not heard from; a transport that detects a
 *    dead peer returns TSR_ERROR_LAUNCH_FAILED ("peer error") naming it. Either way the communicator is
 *    then broken: the transfer may be half done on any rank, so every later operation on it (and on every
 *    communicator split from the same one) returns the same status at once; destroy it. Other communicators
 *    and the context stay usable. MPI: the abandoned transfer may still write its receive buffer later.
 *  - Statuses common to every operation below: TSR_ERROR_INVALID_HANDLE (comm, or a stream of no context),
 *    TSR_ERROR_INVALID_VALUE (a NULL buffer with count > 0, on NCCL a buffer not device memory of the
 *    context (above), a dtype or op the call does not take, a root or
 *    peer outside [0, size), a count that does not divide as the call requires, a stream of another
 *    context), TSR_ERROR_MEMORY_FAULT (above), TSR_ERROR_UNSUPPORTED (a dtype or op this backend cannot
 *    combine, e.g. avg of integers; on NCCL a deterministic reduction on a capturing stream),
 *    TSR_ERROR_TIMEOUT and TSR_ERROR_LAUNCH_FAILED
 *    (above; also a transport's own failure, with its message), TSR_ERROR_OUT_OF_MEMORY (a deterministic
 *    reduction's gather buffer). MPI only: TSR_ERROR_UNSUPPORTED for a transfer of more than INT_MAX bytes
 *    (MPI's int counts; split it). docs/c-api.md, "Communicators", has the table.
 *
 * Thread safety: every function may be called from any thread. Operations on one communicator must not be
 * issued by several threads at once (the order of collectives must be the same on every rank, which only
 * the caller can guarantee); different communicators may be used concurrently. Destruction must not race
 * with other uses of the same communicator.
 */
#ifndef TESSERA_COMM_H_
#define TESSERA_COMM_H_

#ifdef __cplusplus
extern "C" {
#endif

/* A communicator: `size` ranks numbered 0 .. size-1, this process being `rank`. */
typedef struct tsr_comm* tsr_comm_t;

/* Element types of communicated buffers: the dtype codes of docs/image-format.md. Data movement (all_gather,
 * all_to_all, broadcast, send, recv) takes every one of them; reductions take F32, F64, BF16, I32, I64 (and
 * F16 where the backend combines it: NCCL). */
typedef enum tsr_dtype {
  TSR_DTYPE_F32 = 1, TSR_DTYPE_F64 = 2, TSR_DTYPE_F16 = 3, TSR_DTYPE_BF16 = 4,
  TSR_DTYPE_I8 = 5, TSR_DTYPE_I16 = 6, TSR_DTYPE_I32 = 7, TSR_DTYPE_I64 = 8,
  TSR_DTYPE_U8 = 9, TSR_DTYPE_U16 = 10, TSR_DTYPE_U32 = 11, TSR_DTYPE_U64 = 12,
  TSR_DTYPE_BOOL = 13, TSR_DTYPE_FP8_E4M3 = 14, TSR_DTYPE_FP8_E5M2 = 15, TSR_DTYPE_TF32 = 16,
  TSR_DTYPE_INDEX = 17, TSR_DTYPE_C64 = 18, TSR_DTYPE_C128 = 19
} tsr_dtype_t;

/* How a reduction combines. AVG is the sum divided by the number of ranks (floating dtypes only). */
typedef enum tsr_reduce_op {
  TSR_REDUCE_SUM = 0,
  TSR_REDUCE_PROD = 1,
  TSR_REDUCE_MAX = 2,
  TSR_REDUCE_MIN = 3,
  TSR_REDUCE_AVG = 4
} tsr_reduce_op_t;

/* Which transport carries a communicator. */
typedef enum tsr_comm_backend {
  TSR_COMM_BACKEND_AUTO = 0,  /* $TESSERA_COMM_BACKEND ("mpi", "nccl") if set; else NCCL for a CUDA context,
                               * MPI otherwise */
  TSR_COMM_BACKEND_MPI = 1,   /* MPI, dlopen()ed: $TESSERA_MPI_LIBRARY, else the mpich wheel's or the
                               * system's libmpi.so.12 (MPICH ABI: MPICH, Intel MPI, MVAPICH); host memory */
  TSR_COMM_BACKEND_NCCL = 2   /* NCCL, dlopen()ed: $TESSERA_NCCL_LIBRARY, else the nvidia-nccl-cu13 wheel's
                               * or the system's libnccl.so.2; device memory. NVLink multicast stays off
                               * (NCCL_NVLS_ENABLE=0 is set before NCCL starts). Operations run on a blocking
                               * NCCL communicator split at creation from a non-blocking one, whose waits are
                               * bounded (no NCCL thread per operation; NCCL_RUNTIME_CONNECT=0 is set unless the
                               * user set it, so peers connect then); docs/c-api.md, "NCCL" */
} tsr_comm_backend_t;

/* Flags of tsr_comm_options_t. */
#define TSR_COMM_DETERMINISTIC 0x1u  /* all_reduce and reduce_scatter combine in the interpreter's fixed tree
                                      * order (below); $TESSERA_DETERMINISTIC=1 adds it */

typedef struct tsr_comm_options {
  uint32_t backend;     /* a tsr_comm_backend_t (default AUTO) */
  uint32_t flags;       /* TSR_COMM_* */
  uint64_t timeout_ms;  /* bound on every wait of an operation, creation and split included; 0: the default,
                         * $TESSERA_COMM_TIMEOUT_MS if set, else 300000 (5 minutes) */
  uint32_t units;       /* the most compute units (SMs) one operation's kernels occupy on a device-queue
                         * transport (NCCL's maxCTAs; split communicators inherit it); a compiled function
                         * called with this communicator launches its persistent kernels (grids over
                         * DEVICE_UNITS) on up to that many units fewer while its collectives are in flight,
                         * so that both run at once instead of the transport's kernels waiting for free units:
                         * min(units, slack), where slack = DEVICE_UNITS - ceil(tiles / rounds), tiles the
                         * kernel's grid with DEVICE_UNITS unbounded, rounds = ceil(tiles / DEVICE_UNITS), so
                         * that no kernel takes a round more (132 SMs: 512 or 256 tiles leave 4 free, 264
                         * none). A compiled function's collective that no kernel step of the call follows
                         * runs without the cap, on a second NCCL communicator of the same ranks that a
                         * communicator with units holds (made at creation and split; docs/c-api.md, "Compute
                         * units"). Every rank passes the same units.
                         * 0: $TESSERA_COMM_UNITS if set, else no limit (the transport's choice) and no units
                         * left free. Host transports (MPI) ignore it. */
} tsr_comm_options_t;

/* Sets the defaults: backend AUTO, no flags, timeout 0 and units 0 (the defaults). TSR_ERROR_INVALID_VALUE for
 * NULL. */
TSR_API tsr_status_t tsrCommOptionsInitialize(tsr_comm_options_t* options);

/* ---------------------------------------------------------------------------------------------------------
 * Creation
 * ------------------------------------------------------------------------------------------------------- */

/* The rendezvous token of a job: one rank makes it, every rank passes the same bytes to tsrCommCreate. */
#define TSR_COMM_UNIQUE_ID_BYTES 128
typedef struct tsr_comm_unique_id {
  unsigned char bytes[TSR_COMM_UNIQUE_ID_BYTES];
} tsr_comm_unique_id_t;

/* Makes a new unique id for the backend `options` name (NULL: the defaults) on `context`'s device. NCCL:
 * ncclGetUniqueId (it holds the address rank 0 listens on). MPI: random bytes (an MPI job's ranks find each
 * other through the launcher; the id only has to be equal everywhere). Errors: TSR_ERROR_INVALID_HANDLE
 * (context), TSR_ERROR_INVALID_VALUE (NULL output, unknown backend or flags), TSR_ERROR_UNSUPPORTED (the
 * backend's library cannot be loaded, or does not serve this context's device: the message says which and
 * why). Thread safety: any thread. */
TSR_API tsr_status_t tsrCommGetUniqueId(tsr_context_t context, const tsr_comm_options_t* options,
                                        tsr_comm_unique_id_t* out_id);

/* Collective over the `world` processes of a job: makes this process rank `rank` of a communicator of size
 * `world` on `context`'s device, every rank passing the same `id` (from tsrCommGetUniqueId on one of them,
 * shared by the caller) and the same options. MPI: the job must have been started by an MPI launcher
 * (mpiexec, tessera-run; docs/launching.md), whose MPI_COMM_WORLD must have `world` ranks with this process
 * as `rank`; the communicator is a duplicate of it. Waits at most the timeout for the other ranks.
 * Errors: TSR_ERROR_INVALID_HANDLE (context); TSR_ERROR_INVALID_VALUE (NULL id or output, world < 1, rank
 * outside [0, world), unknown backend or flags, MPI's world or rank differing from the arguments: the
 * message gives both); TSR_ERROR_UNSUPPORTED (the backend's library cannot be loaded, or cannot move this
 * context's memory: MPI needs a CPU context, NCCL a CUDA one); TSR_ERROR_INIT_FAIL (the transport refused
 * to start, with its message); TSR_ERROR_TIMEOUT (the other ranks did not all arrive in time);
 * TSR_ERROR_OUT_OF_MEMORY. Thread safety: any thread. */
TSR_API tsr_status_t tsrCommCreate(tsr_context_t context, const tsr_comm_options_t* options, int world, int rank,
                                   const tsr_comm_unique_id_t* id, tsr_comm_t* out_comm);

/* Collective: tsrCommCreate with the world, rank and id the job's launcher gives.
 *  - Under an MPI launcher (MPI backend, or AUTO on a CPU context, when the environment shows one: PMI_RANK,
 *    PMI_SIZE, PMIX_RANK, OMPI_COMM_WORLD_RANK or MPI_LOCALRANKID): rank and size are MPI_COMM_WORLD's.
 *  - Otherwise RANK and WORLD_SIZE (required; LOCAL_RANK optional, default RANK: informational, the device a
 *    rank uses is its context's) and a rendezvous address, TESSERA_RENDEZVOUS=host:port or else
 *    MASTER_ADDR and MASTER_PORT: rank 0 makes the unique id and serves it over TCP on that address, the
 *    other ranks connect (retrying until the timeout) and read it.
 * Errors: tsrCommCreate's, and TSR_ERROR_INVALID_VALUE naming a missing or malformed variable;
 * TSR_ERROR_INIT_FAIL when rank 0 cannot listen on the rendezvous address (it is in use);
 * TSR_ERROR_TIMEOUT when the rendezvous is not reached in time. Thread safety: any thread. */
TSR_API tsr_status_t tsrCommCreateFromEnv(tsr_context_t context, const tsr_comm_options_t* options,
                                          tsr_comm_t* out_comm);

/* Collective over `comm`: partitions its ranks by `color` (>= 0) into new communicators, ranked by `key`
 * then by rank in `comm` (MPI_Comm_split's rule), with `comm`'s options. A rank passing a negative color
 * belongs to none: *out_comm is set to NULL (success). Errors: the common statuses; TSR_ERROR_INVALID_VALUE
 * (NULL output); TSR_ERROR_OUT_OF_MEMORY. Thread safety: as operations. */
TSR_API tsr_status_t tsrCommSplit(tsr_comm_t comm, int color, int key, tsr_comm_t* out_comm);

/* Reference counting. The last release waits for nothing (MPI operations have completed when they return;
 * NCCL's queued work keeps what it uses) and frees the transport's state; a broken communicator is
 * aborted. */
TSR_API tsr_status_t tsrRetainComm(tsr_comm_t comm);
TSR_API tsr_status_t tsrReleaseComm(tsr_comm_t comm);
TSR_API tsr_status_t tsrDestroyComm(tsr_comm_t comm);  /* = tsrReleaseComm */

/* This process's rank, the number of ranks, and the backend in use (a tsr_comm_backend_t, never AUTO). */
TSR_API tsr_status_t tsrCommGetRank(tsr_comm_t comm, int* out_rank);
TSR_API tsr_status_t tsrCommGetSize(tsr_comm_t comm, int* out_size);
TSR_API tsr_status_t tsrCommGetBackend(tsr_comm_t comm, uint32_t* out_backend);

/* ---------------------------------------------------------------------------------------------------------
 * Faults
 * ------------------------------------------------------------------------------------------------------- */

/* The communicator's asynchronous error: TSR_SUCCESS while it is healthy; the status that broke it (a
 * timeout, a peer error, an abort: TSR_ERROR_LAUNCH_FAILED) afterwards, with its message. Does not wait;
 * for NCCL it asks ncclCommGetAsyncError. Thread safety: any thread, also during an operation. */
TSR_API tsr_status_t tsrCommGetAsyncError(tsr_comm_t comm);

/* Breaks the communicator now: operations waiting on it (in other threads) return TSR_ERROR_LAUNCH_FAILED
 * as soon as they next poll, and later ones at once. For NCCL, ncclCommAbort. Peers are not told: they
 * time out, or see the connection close. Thread safety: any thread, also during an operation. */
TSR_API tsr_status_t tsrCommAbort(tsr_comm_t comm);

/* ---------------------------------------------------------------------------------------------------------
 * Operations (each collective but send/recv; statuses: the common ones above)
 * ------------------------------------------------------------------------------------------------------- */

/* recv[i] = send[i] combined over the ranks, for i < count; send == recv is in place.
 * Deterministic (TSR_COMM_DETERMINISTIC): every rank gathers all ranks' buffers and combines them in the
 * interpreter's tree order (tessera/interpret/dist_ops.py): values paired by rank ((r0 ∘ r1) ∘ (r2 ∘ r3))
 * ∘ …, an odd one out carried up a level, each combination rounded to the dtype (BF16 combined in f32,
 * then rounded to nearest even), AVG dividing the tree's result by size; the result is bit-identical to the
 * interpreter's and the same on every run and rank. It costs size × count elements of traffic and memory per
 * rank instead of about 2 × count. Otherwise the backend's own algorithm decides the order (MPI: MPI's
 * reduction for F32/F64/I32/I64, rank order 0, 1, 2, … for BF16). */
TSR_API tsr_status_t tsrCommAllReduce(tsr_comm_t comm, const void* send, void* recv, size_t count, tsr_dtype_t dtype,
                                      tsr_reduce_op_t op, tsr_stream_t stream);

/* `send` holds `count` elements (count a multiple of size, else TSR_ERROR_INVALID_VALUE); they are combined
 * over the ranks as tsrCommAllReduce does (in tree order when deterministic), and rank r receives elements
 * [r·count/size, (r+1)·count/size) in `recv` (count/size elements). */
TSR_API tsr_status_t tsrCommReduceScatter(tsr_comm_t comm, const void* send, void* recv, size_t count,
                                          tsr_dtype_t dtype, tsr_reduce_op_t op, tsr_stream_t stream);

/* Each rank contributes `count` elements; `recv` (size × count elements) receives rank r's at r·count. */
TSR_API tsr_status_t tsrCommAllGather(tsr_comm_t comm, const void* send, void* recv, size_t count,
                                      tsr_dtype_t dtype, tsr_stream_t stream);

/* `send` holds `count` elements (a multiple of size), block j (count/size elements) for rank j; `recv`
 * (count elements) receives rank j's block for this rank at j·count/size. send and recv must not overlap. */
TSR_API tsr_status_t tsrCommAllToAll(tsr_comm_t comm, const void* send, void* recv, size_t count, tsr_dtype_t dtype,
                                     tsr_stream_t stream);

/* Every rank's `recv` receives the `count` elements of rank `root`'s `send` (send is read on root only and
 * may be NULL elsewhere; send == recv is in place). */
TSR_API tsr_status_t tsrCommBroadcast(tsr_comm_t comm, const void* send, void* recv, size_t count, tsr_dtype_t dtype,
                                      int root, tsr_stream_t stream);

/* Point to point: `peer` (not this rank: TSR_ERROR_INVALID_VALUE) receives the `count` elements with a
 * tsrCommRecv of the same count and dtype. Messages between two ranks arrive in the order sent. */
TSR_API tsr_status_t tsrCommSend(tsr_comm_t comm, const void* buf, size_t count, tsr_dtype_t dtype, int peer,
                                 tsr_stream_t stream);
TSR_API tsr_status_t tsrCommRecv(tsr_comm_t comm, void* buf, size_t count, tsr_dtype_t dtype, int peer,
                                 tsr_stream_t stream);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* TESSERA_COMM_H_ */
