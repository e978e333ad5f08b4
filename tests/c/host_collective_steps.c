/* host_collective_steps.c — a C host of compiled collectives (test_collective_steps.py starts it under mpiexec
 * with 2 and 3 ranks): loads the image argv[1] (test_collective_steps.SOURCE for the mesh of all ranks) and
 * calls its functions through tsrFunctionCallWithOptions with the job's communicator, on the NULL stream and
 * on a stream, with inputs each rank can predict; then the statuses of a call without a communicator and of
 * options naming a communicator of another size. Prints one line per check, "N failed". */
#include "check.h"

enum { N = 6 };  /* elements per rank: a multiple of 2 and 3 */

static int rank, size;

/* Calls function `name` of `module` on x (rank, 6 elements) into y (`ny` elements). */
static tsr_status_t call(tsr_module_t module, const char* name, tsr_stream_t stream, float* x, float* y, int64_t ny,
                         const tsr_function_call_options_t* options) {
  tsr_function_t fn;
  MUST(tsrModuleGetFunction(module, name, &fn));
  int64_t xs[1] = {N}, ys[1] = {ny};
  DLTensor X = {x, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, xs, NULL, 0};
  DLTensor Y = {y, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, ys, NULL, 0};
  const DLTensor* in[] = {&X};
  const DLTensor* out[] = {&Y};
  tsr_status_t st = tsrFunctionCallWithOptions(fn, stream, in, 1, out, 1, options);
  if (!st && stream) st = tsrStreamSynchronize(stream);
  return st;
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  tsr_context_t ctx;
  MUST(tsrCreateContext(&ctx));
  tsr_comm_t comm = mpi_comm_from_env(ctx, &rank, &size);
  tsr_module_t module = load_test_image(ctx, argv[1]);
  tsr_stream_t stream;
  MUST(tsrCreateStream(ctx, NULL, &stream));
  tsr_function_call_options_t options;
  MUST(tsrFunctionCallOptionsInitialize(&options));
  check("the options start without a communicator", options.comm == NULL);
  options.comm = comm;

  float x[N], y[3 * N];
  for (int i = 0; i < N; i++) x[i] = (float)(rank * 10 + i);  /* exact in f32, as are their sums */
  for (int s = 0; s < 2; s++) {
    tsr_stream_t on = s ? stream : NULL;
    char what[128];
    snprintf(what, sizeof what, "rank %d: all_reduce sum%s", rank, s ? " on a stream" : "");
    expect(what, call(module, "ar", on, x, y, N, &options), TSR_SUCCESS);
    bool ok = true;
    for (int i = 0; i < N; i++) ok = ok && y[i] == (float)(10 * size * (size - 1) / 2 + size * i);
    check(what, ok);
    snprintf(what, sizeof what, "rank %d: all_gather%s", rank, s ? " on a stream" : "");
    expect(what, call(module, "gather", on, x, y, (int64_t)size * N, &options), TSR_SUCCESS);
    ok = true;
    for (int r = 0; r < size; r++)
      for (int i = 0; i < N; i++) ok = ok && y[r * N + i] == (float)(r * 10 + i);
    check(what, ok);
  }

  expect_msg("without a communicator", call(module, "ar", NULL, x, y, N, NULL), TSR_ERROR_INVALID_VALUE,
             "step 0 is a collective (all_reduce over mesh axis 'tp'), which runs only with a communicator");
  tsr_comm_t alone;  /* each rank on its own: a communicator of size 1 for a mesh of `size` */
  MUST(tsrCommSplit(comm, rank, 0, &alone));
  options.comm = alone;
  expect_msg("a communicator of another size", call(module, "ar", NULL, x, y, N, &options), TSR_ERROR_INVALID_VALUE,
             "communicator 1 ranks: they must be equal");
  MUST(tsrReleaseComm(alone));
  MUST(tsrDestroyStream(stream));
  MUST(tsrReleaseComm(comm));
  MUST(tsrUnloadModule(module));
  MUST(tsrDestroyContext(ctx));
  return finish();
}
