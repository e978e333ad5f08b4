/* host_comm_teardown.c — a context destroyed while graphs and executable graphs still hold a communicator
 * (captured operations hold references on it): the context must free them before the communicator, which they
 * drop. One MPI rank (a singleton: no launcher). test_comm_hosts.py runs it under valgrind, where a graph
 * freed after its communicator reads freed memory. */
#include "check.h"

int main(void) {
  tsr_context_t ctx;
  MUST(tsrCreateContext(&ctx));
  tsr_comm_options_t o;
  MUST(tsrCommOptionsInitialize(&o));
  o.backend = TSR_COMM_BACKEND_MPI;
  tsr_comm_unique_id_t id;
  MUST(tsrCommGetUniqueId(ctx, &o, &id));
  tsr_comm_t comm;
  MUST(tsrCommCreate(ctx, &o, 1, 0, &id, &comm));
  float* x;
  MUST(tsrAlloc(ctx, 4 * sizeof *x, TSR_ALLOC_DEFAULT, (void**)&x));
  for (int i = 0; i < 4; i++) x[i] = (float)i;
  tsr_stream_t s;
  tsr_graph_t graph;
  tsr_graph_exec_t exec;
  MUST(tsrCreateStream(ctx, NULL, &s));
  MUST(tsrStreamBeginCapture(s));
  MUST(tsrCommAllReduce(comm, x, x, 4, TSR_DTYPE_F32, TSR_REDUCE_SUM, s));
  MUST(tsrStreamEndCapture(s, &graph));
  MUST(tsrGraphInstantiate(graph, &exec));
  MUST(tsrGraphLaunch(exec, NULL));
  check("one rank's sum is its own values", x[0] == 0 && x[3] == 3);
  MUST(tsrReleaseComm(comm));  /* the graph and the executable graph keep it */
  MUST(tsrDestroyContext(ctx));
  printf("%d failed\n", failures);
  return failures;
}
