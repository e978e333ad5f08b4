/* host_comm_nccl.c — communicators over NCCL (comm_nccl.c) on tests/c/fake_nccl.c and tests/c/fake_cuda.c: the
 * calls NCCL sees (read from $FAKE_NCCL_LOG by tests/c/test_comm_nccl_fake.py), and the statuses of a peer
 * that never comes.
 *
 *   host_comm_nccl MODE     MODE: ops (every operation, dtype and op), host (host buffers refused), or the
 *                           $FAKE_NCCL_HANG mode the test set: init, gpu, async */
#define _POSIX_C_SOURCE 200809L
#include "phases.h"

static tsr_context_t ctx;

static void* device_alloc(size_t bytes) {
  void* p;
  MUST(tsrAlloc(ctx, bytes, 0, &p));
  memset(p, 0, bytes);  /* the fake driver's device memory is host memory */
  return p;
}

static tsr_comm_options_t options(void) {
  tsr_comm_options_t o;
  MUST(tsrCommOptionsInitialize(&o));
  o.backend = TSR_COMM_BACKEND_NCCL;
  o.timeout_ms = 300;
  return o;
}

static tsr_comm_t create(int world, int rank, tsr_status_t want) {
  tsr_comm_options_t o = options();
  tsr_comm_unique_id_t id;
  MUST(tsrCommGetUniqueId(ctx, &o, &id));
  check("the unique id is ncclGetUniqueId's", memcmp(id.bytes, "fake-nccl-id-", 13) == 0);
  tsr_comm_t comm = NULL;
  double t0 = seconds();
  expect("tsrCommCreate", tsrCommCreate(ctx, &o, world, rank, &id, &comm), want);
  if (want == TSR_ERROR_TIMEOUT) check("it gave up after the 300 ms timeout", seconds() - t0 >= 0.29);
  return comm;
}

static void every_operation(void) {
  phase("create");
  tsr_comm_t comm = create(2, 1, TSR_SUCCESS);
  int rank = -1, size = -1;
  MUST(tsrCommGetRank(comm, &rank));
  MUST(tsrCommGetSize(comm, &size));
  check("rank 1 of 2", rank == 1 && size == 2);
  tsr_stream_t s;
  MUST(tsrCreateStream(ctx, NULL, &s));
  enum { N = 8 };
  char *send = device_alloc(N * 8), *recv = device_alloc(2 * N * 8);

  phase("all_reduce");
  static const tsr_dtype_t floats[] = {TSR_DTYPE_F32, TSR_DTYPE_F64, TSR_DTYPE_F16, TSR_DTYPE_BF16};
  static const tsr_dtype_t ints[] = {TSR_DTYPE_I32, TSR_DTYPE_I64};
  for (int op = TSR_REDUCE_SUM; op <= TSR_REDUCE_AVG; op++) {
    for (size_t i = 0; i < 4; i++)
      expect("tsrCommAllReduce (float)", tsrCommAllReduce(comm, send, recv, N, floats[i], op, s), TSR_SUCCESS);
    for (size_t i = 0; i < 2 && op != TSR_REDUCE_AVG; i++)
      expect("tsrCommAllReduce (int)", tsrCommAllReduce(comm, send, recv, N, ints[i], op, s), TSR_SUCCESS);
  }

  phase("others");
  expect("tsrCommReduceScatter", tsrCommReduceScatter(comm, send, recv, N, TSR_DTYPE_BF16, TSR_REDUCE_SUM, s),
         TSR_SUCCESS);
  expect("tsrCommAllGather", tsrCommAllGather(comm, send, recv, N, TSR_DTYPE_F32, s), TSR_SUCCESS);
  expect("tsrCommAllToAll", tsrCommAllToAll(comm, send, recv, N, TSR_DTYPE_I64, s), TSR_SUCCESS);
  expect("tsrCommBroadcast", tsrCommBroadcast(comm, NULL, recv, N, TSR_DTYPE_F64, 0, s), TSR_SUCCESS);
  expect("tsrCommSend", tsrCommSend(comm, send, N, TSR_DTYPE_FP8_E4M3, 0, s), TSR_SUCCESS);
  expect("tsrCommRecv", tsrCommRecv(comm, recv, N, TSR_DTYPE_FP8_E4M3, 0, s), TSR_SUCCESS);
  expect("the stream's work (and NCCL's) finishes", tsrStreamSynchronizeTimeout(s, 5000), TSR_SUCCESS);

  phase("null stream");
  float* f = (float*)send;
  for (int i = 0; i < N; i++) f[i] = (float)i;
  expect("tsrCommAllReduce on the NULL stream", tsrCommAllReduce(comm, send, recv, N, TSR_DTYPE_F32,
                                                                 TSR_REDUCE_SUM, NULL), TSR_SUCCESS);
  check("its result is there when it returns", ((float*)recv)[N - 1] == (float)(N - 1));
  expect("tsrCommGetAsyncError", tsrCommGetAsyncError(comm), TSR_SUCCESS);

  phase("deterministic");
  tsr_comm_options_t o = options();
  o.flags = TSR_COMM_DETERMINISTIC;
  tsr_comm_unique_id_t id;
  MUST(tsrCommGetUniqueId(ctx, &o, &id));
  tsr_comm_t tree;
  MUST(tsrCommCreate(ctx, &o, 2, 1, &id, &tree));
  memset(recv, 0, N * 4);
  expect("a deterministic all_reduce", tsrCommAllReduce(tree, send, recv, N, TSR_DTYPE_F32, TSR_REDUCE_SUM, s),
         TSR_SUCCESS);
  /* The fake gathers only this rank's block (rank 0's stays 0): the tree's sum is this rank's values. */
  check("combined on the host, written when it returns", memcmp(recv, send, N * 4) == 0);
  MUST(tsrReleaseComm(tree));

  phase("split");
  tsr_comm_t sub = NULL, none = (tsr_comm_t)&ctx;
  expect("tsrCommSplit color 3", tsrCommSplit(comm, 3, 7, &sub), TSR_SUCCESS);
  int sub_size = 0;
  if (sub) MUST(tsrCommGetSize(sub, &sub_size));
  check("the new communicator's size is NCCL's", sub_size == 1);
  /* NCCL refuses a call on either before the split completed ("Attempt to use communicator before ..."). */
  expect("the parent, right after the split", tsrCommAllReduce(comm, send, recv, N, TSR_DTYPE_F32, TSR_REDUCE_SUM,
                                                               s), TSR_SUCCESS);
  if (sub)
    expect("the new one, right after the split", tsrCommAllReduce(sub, send, recv, N, TSR_DTYPE_F32, TSR_REDUCE_SUM,
                                                                  s), TSR_SUCCESS);
  expect("tsrCommSplit with no color", tsrCommSplit(comm, -1, 0, &none), TSR_SUCCESS);
  check("no color: no communicator", none == NULL);
  if (sub) MUST(tsrReleaseComm(sub));

  phase("destroy");
  MUST(tsrDestroyStream(s));
  MUST(tsrReleaseComm(comm));
}

/* NCCL queues on the GPU, which faults on a host address and loses the context with it: such buffers are
 * refused before NCCL is called; device memory another library allocated, once registered, is taken. */
static void host_buffers(void) {
  phase("host buffers");
  tsr_comm_t comm = create(2, 1, TSR_SUCCESS);
  enum { N = 8 };
  float *dev = device_alloc(2 * N * 4), *host = calloc(2 * N, 4), *known = calloc(2 * N, 4);
  float* foreign = calloc(2 * N, 4);  /* the fake driver's device memory is host memory */
  MUST(tsrHostRegister(ctx, known, 2 * N * 4, 0));
  MUST(tsrDeviceRegister(ctx, foreign, 2 * N * 4, TSR_DEVICE_REGISTER_DEFAULT));
  expect_msg("a host send buffer", tsrCommAllGather(comm, host, dev, N, TSR_DTYPE_F32, NULL), TSR_ERROR_INVALID_VALUE,
             "send (");
  expect_msg("a host recv buffer", tsrCommAllGather(comm, dev, host, N, TSR_DTYPE_F32, NULL),
             TSR_ERROR_INVALID_VALUE, "recv (");
  expect_msg("it must be device memory", tsrCommAllReduce(comm, dev, host, N, TSR_DTYPE_F32, TSR_REDUCE_SUM, NULL),
             TSR_ERROR_INVALID_VALUE, "must be device memory of the communicator's context");
  expect_msg("registered host memory", tsrCommBroadcast(comm, known, known, N, TSR_DTYPE_F32, 1, NULL),
             TSR_ERROR_INVALID_VALUE, "registered host memory");
  expect_msg("a host buffer to send", tsrCommSend(comm, host, N, TSR_DTYPE_F32, 0, NULL), TSR_ERROR_INVALID_VALUE,
             "buf (");
  expect("the communicator is not broken by them", tsrCommGetAsyncError(comm), TSR_SUCCESS);
  expect("registered device memory is taken", tsrCommAllGather(comm, foreign, dev, N, TSR_DTYPE_F32, NULL),
         TSR_SUCCESS);
  MUST(tsrDeviceUnregister(ctx, foreign));
  MUST(tsrHostUnregister(ctx, known));
  free(host);
  free(known);
  free(foreign);
  MUST(tsrReleaseComm(comm));
}

static void a_peer_never_comes(const char* mode) {
  phase(mode);
  if (strcmp(mode, "init") == 0) {
    create(2, 0, TSR_ERROR_TIMEOUT);
    return;
  }
  tsr_comm_t comm = create(2, 0, TSR_SUCCESS);
  tsr_stream_t s;
  MUST(tsrCreateStream(ctx, NULL, &s));
  float *send = device_alloc(64), *recv = device_alloc(64);
  tsr_status_t fault = TSR_ERROR_TIMEOUT;  /* what breaks the communicator */
  if (strcmp(mode, "gpu") == 0) {
    expect("the all_reduce is queued", tsrCommAllReduce(comm, send, recv, 16, TSR_DTYPE_F32, TSR_REDUCE_SUM, s),
           TSR_SUCCESS);
    expect("its kernel spins: the stream is busy", tsrStreamQuery(s), TSR_ERROR_NOT_READY);
    /* The monitor aborts NCCL at the operation's deadline, which ends its kernel: the stream moves on. */
    expect("the stream finishes once NCCL is aborted", tsrStreamSynchronizeTimeout(s, 5000), TSR_SUCCESS);
    expect_msg("the communicator reports the timeout", tsrCommGetAsyncError(comm), TSR_ERROR_TIMEOUT,
               "did not complete before the communicator's timeout");
  } else {
    expect("the all_reduce is queued", tsrCommAllReduce(comm, send, recv, 16, TSR_DTYPE_F32, TSR_REDUCE_SUM, s),
           TSR_SUCCESS);
    tsr_status_t st = TSR_SUCCESS;
    for (int i = 0; i < 500 && !st; i++) {  /* the monitor polls every millisecond */
      st = tsrCommGetAsyncError(comm);
      nanosleep(&(struct timespec){0, 2000000}, NULL);
    }
    expect_msg("NCCL's asynchronous error is reported", st, TSR_ERROR_LAUNCH_FAILED, "remote process exited");
    fault = TSR_ERROR_LAUNCH_FAILED;
  }
  expect_msg("a later operation fails at once", tsrCommAllReduce(comm, send, recv, 16, TSR_DTYPE_F32,
             TSR_REDUCE_SUM, s), fault, "broken");
  MUST(tsrDestroyStream(s));
  MUST(tsrReleaseComm(comm));
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s ops|host|init|gpu|async\n", argv[0]);
    return 2;
  }
  tsr_context_options_t o;
  MUST(tsrContextOptionsInitialize(&o));
  o.backend = "cuda";
  MUST(tsrCreateContextWithOptions(&o, &ctx));
  if (strcmp(argv[1], "ops") == 0) every_operation();
  else if (strcmp(argv[1], "host") == 0) host_buffers();
  else a_peer_never_comes(argv[1]);
  MUST(tsrDestroyContext(ctx));
  printf("%d failed\n", failures);
  return failures;
}
