/* host_function_call.c — one tsrFunctionCall (and tsrFunctionGetResultShapes) of an image's function, with every
 * tensor in tsrAlloc memory (so that the runtime can check its size), printing the statuses and messages: for
 * tests of calls that must be refused (tests/c/test_function_steps.py) as well as calls that must succeed.
 *
 *   host_function_call IMAGE FUNCTION DIR
 *
 * DIR/shapes.txt has one line per tensor, inputs first: "in|out NDIM D0 D1 ... [BYTES] +OFFSET" (both
 * optional; BYTES: the buffer's size when it must differ from the shape's; OFFSET: the DLTensor's byte_offset). Inputs are read from DIR/in<i>.bin (raw; a short file fills the
 * start of the buffer), outputs are written to DIR/out<i>.bin after a successful call. Prints
 * "shapes: STATUS: MESSAGE" and "call: STATUS: MESSAGE" (STATUS TSR_SUCCESS with an empty message on success). */
#include "check.h"

#define MAX_TENSORS 32

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s IMAGE FUNCTION DIR\n", argv[0]);
    return 2;
  }
  size_t size;
  void* image = read_file(argv[1], &size);
  tsr_context_t ctx;
  tsr_module_t module;
  MUST(tsrCreateContext(&ctx));
  tsr_status_t st = tsrLoadModule(ctx, image, size, &module);
  free(image);
  if (st) {
    printf("load: %s: %s\n", tsrGetStatusName(st), tsrGetLastErrorMessage());
    MUST(tsrDestroyContext(ctx));
    printf("%d failed\n", failures);
    return failures;
  }
  tsr_function_t fn;
  st = tsrModuleGetFunction(module, argv[2], &fn);
  if (st) {
    printf("lookup: %s: %s\n", tsrGetStatusName(st), tsrGetLastErrorMessage());
    MUST(tsrDestroyContext(ctx));
    printf("%d failed\n", failures);
    return failures;
  }
  tsr_function_signature_t sig;
  MUST(tsrFunctionGetSignature(fn, &sig));
  if (sig.input_count > MAX_TENSORS || sig.output_count > MAX_TENSORS) return 2;

  char path[4096];
  FILE* shapes = open_shapes(argv[3]);
  if (!shapes) return 2;
  static DLTensor tensors[2 * MAX_TENSORS];
  static int64_t extents[2 * MAX_TENSORS][8];
  static size_t bytes[2 * MAX_TENSORS];
  const DLTensor* ptrs[2 * MAX_TENSORS];
  size_t n = sig.input_count + sig.output_count;
  for (size_t k = 0; k < n; k++) {
    const tsr_tensor_spec_t* spec = k < sig.input_count ? &sig.inputs[k] : &sig.outputs[k - sig.input_count];
    size_t elems;
    int ndim = read_shape(shapes, extents[k], &elems);
    if (ndim < 0) return 2;
    bytes[k] = elems * spec->dtype.bits / 8;
    long long given, offset = 0;
    if (fscanf(shapes, " [%lld]", &given) == 1) bytes[k] = (size_t)given;
    if (fscanf(shapes, " +%lld", &offset) != 1) offset = 0;
    void* data;
    MUST(tsrAlloc(ctx, bytes[k] ? bytes[k] : 1, TSR_ALLOC_DEFAULT, &data));
    memset(data, 0, bytes[k]);
    if (k < sig.input_count) {
      snprintf(path, sizeof path, "%s/in%zu.bin", argv[3], k);
      size_t got;
      void* in = read_file(path, &got);
      memcpy(data, in, got < bytes[k] ? got : bytes[k]);
      free(in);
    }
    tensors[k] = (DLTensor){data, {kDLCPU, 0}, ndim, spec->dtype, extents[k], NULL, (uint64_t)offset};
    ptrs[k] = &tensors[k];
  }
  fclose(shapes);

  int64_t dims[MAX_TENSORS * 8];
  size_t total = 0;
  for (size_t i = 0; i < sig.output_count; i++) total += sig.outputs[i].rank;
  st = tsrFunctionGetResultShapes(fn, ptrs, sig.input_count, dims, total);
  printf("shapes: %s: %s\n", tsrGetStatusName(st), st ? tsrGetLastErrorMessage() : "");
  st = tsrFunctionCall(fn, NULL, ptrs, sig.input_count, ptrs + sig.input_count, sig.output_count);
  printf("call: %s: %s\n", tsrGetStatusName(st), st ? tsrGetLastErrorMessage() : "");
  for (size_t k = 0; k < n; k++) {
    if (!st && k >= sig.input_count) {
      snprintf(path, sizeof path, "%s/out%zu.bin", argv[3], k - sig.input_count);
      FILE* f = fopen(path, "wb");
      if (!f || fwrite(tensors[k].data, 1, bytes[k], f) != bytes[k]) return 2;
      fclose(f);
    }
    MUST(tsrFree(ctx, tensors[k].data));
  }
  tsr_memory_stats_t stats;
  MUST(tsrGetMemoryStats(ctx, &stats));
  check("intermediates are freed", stats.allocations == 0);
  MUST(tsrDestroyContext(ctx));
  printf("%d failed\n", failures);
  return failures;
}
