/* host_comm.c — a C host of communicators over MPI on the CPU (test_comm_hosts.py starts it under mpiexec with
 * 2 and 3 ranks): every operation through <tessera/comm.h> with values each rank can predict, on the NULL
 * stream and on a stream, a split, and the statuses of bad arguments. Prints one line per check, "N failed". */
#include <math.h>

#include "check.h"

static int rank, size;

static void expect_rank(const char* what, bool ok) {
  char line[160];
  snprintf(line, sizeof line, "rank %d: %s", rank, what);
  check(line, ok);
}

int main(void) {
  tsr_context_t ctx;
  MUST(tsrCreateContext(&ctx));
  tsr_comm_t comm = mpi_comm_from_env(ctx, &rank, &size);
  uint32_t backend = 0;
  MUST(tsrCommGetBackend(comm, &backend));
  expect_rank("the backend is MPI", backend == TSR_COMM_BACKEND_MPI);
  tsr_stream_t stream;
  MUST(tsrCreateStream(ctx, NULL, &stream));

  enum { N = 6 };  /* a multiple of 2 and 3 */
  float* x;
  float* y;
  MUST(tsrAlloc(ctx, sizeof(float) * N * 3, TSR_ALLOC_DEFAULT, (void**)&x));
  MUST(tsrAlloc(ctx, sizeof(float) * N * 3, TSR_ALLOC_DEFAULT, (void**)&y));

  /* all_reduce: rank r holds r + i; the sum is size*i + size*(size-1)/2 */
  for (int i = 0; i < N; i++) x[i] = (float)(rank + i);
  MUST(tsrCommAllReduce(comm, x, y, N, TSR_DTYPE_F32, TSR_REDUCE_SUM, stream));
  bool ok = true;
  for (int i = 0; i < N; i++) ok &= y[i] == (float)(size * i + size * (size - 1) / 2);
  expect_rank("all_reduce sum on a stream", ok);
  MUST(tsrCommAllReduce(comm, x, y, N, TSR_DTYPE_F32, TSR_REDUCE_MAX, NULL));
  ok = true;
  for (int i = 0; i < N; i++) ok &= y[i] == (float)(size - 1 + i);
  expect_rank("all_reduce max", ok);

  /* reduce_scatter: rank r keeps elements [r*N/size, (r+1)*N/size) of the sum */
  MUST(tsrCommReduceScatter(comm, x, y, N, TSR_DTYPE_F32, TSR_REDUCE_SUM, NULL));
  ok = true;
  for (int i = 0; i < N / size; i++) ok &= y[i] == (float)(size * (rank * N / size + i) + size * (size - 1) / 2);
  expect_rank("reduce_scatter sum", ok);

  /* all_gather: rank r's block is r + i */
  MUST(tsrCommAllGather(comm, x, y, N, TSR_DTYPE_F32, NULL));
  ok = true;
  for (int r = 0; r < size; r++)
    for (int i = 0; i < N; i++) ok &= y[r * N + i] == (float)(r + i);
  expect_rank("all_gather", ok);

  /* all_to_all: block j of rank r is 100*r + j; rank r receives 100*j + r from rank j */
  int per = N / size;
  for (int j = 0; j < size; j++)
    for (int k = 0; k < per; k++) x[j * per + k] = (float)(100 * rank + j);
  MUST(tsrCommAllToAll(comm, x, y, N, TSR_DTYPE_F32, NULL));
  ok = true;
  for (int j = 0; j < size; j++)
    for (int k = 0; k < per; k++) ok &= y[j * per + k] == (float)(100 * j + rank);
  expect_rank("all_to_all", ok);

  /* broadcast from the last rank */
  for (int i = 0; i < N; i++) x[i] = (float)(rank * 10 + i);
  MUST(tsrCommBroadcast(comm, x, y, N, TSR_DTYPE_F32, size - 1, stream));
  ok = true;
  for (int i = 0; i < N; i++) ok &= y[i] == (float)((size - 1) * 10 + i);
  expect_rank("broadcast", ok);

  /* send/recv around a ring */
  int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  for (int i = 0; i < N; i++) x[i] = (float)(rank * 7 + i);
  if (rank % 2 == 0) {
    MUST(tsrCommSend(comm, x, N, TSR_DTYPE_F32, next, NULL));
    MUST(tsrCommRecv(comm, y, N, TSR_DTYPE_F32, prev, NULL));
  } else {
    MUST(tsrCommRecv(comm, y, N, TSR_DTYPE_F32, prev, NULL));
    MUST(tsrCommSend(comm, x, N, TSR_DTYPE_F32, next, NULL));
  }
  ok = true;
  for (int i = 0; i < N; i++) ok &= y[i] == (float)(prev * 7 + i);
  expect_rank("send/recv around the ring", ok);

  /* a split: even and odd ranks, reversed by key */
  tsr_comm_t half;
  MUST(tsrCommSplit(comm, rank % 2, -rank, &half));
  int hrank = -1, hsize = -1;
  MUST(tsrCommGetRank(half, &hrank));
  MUST(tsrCommGetSize(half, &hsize));
  int members = (size + (rank % 2 == 0)) / 2;
  expect_rank("split: the sub-communicator's size", hsize == members);
  expect_rank("split: ranked by key (reversed)", hrank == members - 1 - rank / 2);
  double d = rank, dsum = 0;
  MUST(tsrCommAllReduce(half, &d, &dsum, 1, TSR_DTYPE_F64, TSR_REDUCE_SUM, NULL));
  double want = 0;
  for (int r = rank % 2; r < size; r += 2) want += r;
  expect_rank("split: all_reduce over the half", dsum == want);
  tsr_comm_t none = (tsr_comm_t)&none;
  MUST(tsrCommSplit(comm, rank == 0 ? 0 : -1, 0, &none));
  expect_rank("split: a negative color gives NULL", (rank == 0) == (none != NULL));
  if (none) tsrReleaseComm(none);
  tsrReleaseComm(half);

  /* bad arguments: statuses, nothing sent (every rank refuses alike, so the ranks stay in step) */
  expect("reduce_scatter of a count no multiple of size",
         tsrCommReduceScatter(comm, x, y, (size_t)size * 2 + 1, TSR_DTYPE_F32, TSR_REDUCE_SUM, NULL),
         TSR_ERROR_INVALID_VALUE);
  expect("all_to_all of a count no multiple of size", tsrCommAllToAll(comm, x, y, (size_t)size + 1, TSR_DTYPE_F32,
                                                                      NULL), TSR_ERROR_INVALID_VALUE);
  expect("all_reduce of a NULL buffer", tsrCommAllReduce(comm, NULL, y, N, TSR_DTYPE_F32, TSR_REDUCE_SUM, NULL),
         TSR_ERROR_INVALID_VALUE);
  expect("all_reduce of an unknown dtype", tsrCommAllReduce(comm, x, y, N, (tsr_dtype_t)99, TSR_REDUCE_SUM, NULL),
         TSR_ERROR_INVALID_VALUE);
  expect("all_reduce with an unknown op", tsrCommAllReduce(comm, x, y, N, TSR_DTYPE_F32, (tsr_reduce_op_t)9, NULL),
         TSR_ERROR_INVALID_VALUE);
  expect("avg of integers", tsrCommAllReduce(comm, x, y, N, TSR_DTYPE_I32, TSR_REDUCE_AVG, NULL),
         TSR_ERROR_UNSUPPORTED);
  expect("all_reduce past the end of an allocation",
         tsrCommAllReduce(comm, x, y, N * 3 + 1, TSR_DTYPE_F32, TSR_REDUCE_SUM, NULL), TSR_ERROR_MEMORY_FAULT);
  expect("broadcast from a root outside the communicator",
         tsrCommBroadcast(comm, x, y, N, TSR_DTYPE_F32, size, NULL), TSR_ERROR_INVALID_VALUE);
  expect("send to this rank", tsrCommSend(comm, x, N, TSR_DTYPE_F32, rank, NULL), TSR_ERROR_INVALID_VALUE);
  expect("send to a negative peer", tsrCommSend(comm, x, N, TSR_DTYPE_F32, -1, NULL), TSR_ERROR_INVALID_VALUE);
  expect("a NULL communicator", tsrCommAllReduce(NULL, x, y, N, TSR_DTYPE_F32, TSR_REDUCE_SUM, NULL),
         TSR_ERROR_INVALID_HANDLE);
  expect("a NULL rank output", tsrCommGetRank(comm, NULL), TSR_ERROR_INVALID_VALUE);
  tsr_comm_options_t opts;
  MUST(tsrCommOptionsInitialize(&opts));
  opts.flags = 0x80;
  expect("options with unknown flags", tsrCommCreateFromEnv(ctx, &opts, &half), TSR_ERROR_INVALID_VALUE);
  expect("create with rank >= world", tsrCommCreate(ctx, NULL, 2, 2, &(tsr_comm_unique_id_t){{0}}, &half),
         TSR_ERROR_INVALID_VALUE);
  /* a capturing stream records the collective (checked at the call: a refusal leaves the capture going);
   * each launch of the graph runs it, on the data its buffers hold then */
  MUST(tsrStreamBeginCapture(stream));
  expect("avg of integers while capturing", tsrCommAllReduce(comm, x, y, N, TSR_DTYPE_I32, TSR_REDUCE_AVG, stream),
         TSR_ERROR_UNSUPPORTED);
  expect("a collective on a capturing stream is recorded",
         tsrCommAllReduce(comm, x, y, N, TSR_DTYPE_F32, TSR_REDUCE_SUM, stream), TSR_SUCCESS);
  tsr_graph_t graph;
  MUST(tsrStreamEndCapture(stream, &graph));
  size_t nodes = 0;
  MUST(tsrGraphGetNodeCount(graph, &nodes));
  expect_rank("one node recorded", nodes == 1);
  tsr_graph_exec_t exec;
  MUST(tsrGraphInstantiate(graph, &exec));
  for (int replay = 1; replay <= 2; replay++) {
    for (int i = 0; i < N; i++) x[i] = (float)(replay * (rank + i)), y[i] = -1;
    MUST(tsrGraphLaunch(exec, replay == 1 ? NULL : stream));
    MUST(tsrStreamSynchronize(stream));
    ok = true;
    for (int i = 0; i < N; i++) ok &= y[i] == (float)(replay * (size * i + size * (size - 1) / 2));
    expect_rank(replay == 1 ? "the graph's all_reduce, replayed" : "the graph's all_reduce, replayed on a stream", ok);
  }
  MUST(tsrDestroyGraphExec(exec));
  MUST(tsrDestroyGraph(graph));
  /* a buffer freed after the capture: the replay refuses before anything is sent (every rank alike) */
  float* gone;
  MUST(tsrAlloc(ctx, sizeof(float) * N, TSR_ALLOC_DEFAULT, (void**)&gone));
  MUST(tsrStreamBeginCapture(stream));
  MUST(tsrCommAllReduce(comm, x, gone, N, TSR_DTYPE_F32, TSR_REDUCE_SUM, stream));
  MUST(tsrStreamEndCapture(stream, &graph));
  MUST(tsrGraphInstantiate(graph, &exec));
  MUST(tsrFree(ctx, gone));
  expect_msg("a replay into a buffer freed since the capture", tsrGraphLaunch(exec, NULL), TSR_ERROR_INVALID_VALUE,
             "freed since the capture");
  MUST(tsrDestroyGraphExec(exec));
  MUST(tsrDestroyGraph(graph));
  tsr_context_t other;
  tsr_stream_t foreign;
  MUST(tsrCreateContext(&other));
  MUST(tsrCreateStream(other, NULL, &foreign));
  expect_msg("a stream of another context", tsrCommAllReduce(comm, x, y, N, TSR_DTYPE_F32, TSR_REDUCE_SUM, foreign),
             TSR_ERROR_INVALID_VALUE, "another context");
  MUST(tsrDestroyContext(other));
  expect("a count of 0 is a no-op", tsrCommAllReduce(comm, NULL, NULL, 0, TSR_DTYPE_F32, TSR_REDUCE_SUM, NULL),
         TSR_SUCCESS);
  /* the refusals broke nothing: a last collective still agrees */
  x[0] = 1;
  MUST(tsrCommAllReduce(comm, x, y, 1, TSR_DTYPE_F32, TSR_REDUCE_SUM, NULL));
  expect_rank("after the refusals the communicator still works", y[0] == (float)size);
  MUST(tsrCommGetAsyncError(comm));

  MUST(tsrReleaseComm(comm));
  expect("a released communicator", tsrCommGetRank(comm, &rank), TSR_ERROR_INVALID_HANDLE);
  MUST(tsrDestroyStream(stream));
  MUST(tsrDestroyContext(ctx));
  return finish();
}
