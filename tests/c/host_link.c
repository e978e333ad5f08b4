/* host_link.c — runs an `@function` of a linked image (tessera-link) whose plan calls a function another image
 * exported, and checks that the unlinked image refuses the call naming the caller, the import and tessera-link.
 *
 *   host_link LINKED FUNCTION DIR UNLINKED IMPORT
 *   host_link --cycle IMAGE FUNCTION
 *
 * DIR holds the file protocol of host_function.c (tests/c/hostutil.py, run_host_function): shapes.txt with one
 * line per tensor, inputs first ("in|out NDIM D0 D1 ..."), inputs in DIR/in<i>.bin; outputs are written to
 * DIR/out<i>.bin. All tensors are f32 on the CPU backend. */
#include "check.h"

#define MAX_TENSORS 16

typedef struct host_tensor {
  DLTensor t;
  int64_t shape[8];
  size_t bytes;
} host_tensor_t;

/* host_link --cycle IMAGE FUNCTION: FUNCTION (one f32 [1] argument and result) calls itself through call
 * steps, which the executor refuses at its depth limit instead of exhausting the stack. */
static int cycle(const char* path, const char* name) {
  tsr_context_t ctx;
  MUST(tsrCreateContext(&ctx));
  tsr_module_t module = load_test_image(ctx, path);
  tsr_function_t fn;
  MUST(tsrModuleGetFunction(module, name, &fn));
  float x = 1, y = 0;
  int64_t shape[1] = {1};
  DLTensor in = {&x, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, NULL, 0}, out = in;
  out.data = &y;
  const DLTensor* ins[1] = {&in};
  const DLTensor* outs[1] = {&out};
  expect_msg("a cycle of calls stops at the depth limit", tsrFunctionCall(fn, NULL, ins, 1, outs, 1),
             TSR_ERROR_UNSUPPORTED, "calls deep");
  tsrUnloadModule(module);
  tsrDestroyContext(ctx);
  printf("%d failed\n", failures);
  return failures;
}

int main(int argc, char** argv) {
  if (argc == 4 && strcmp(argv[1], "--cycle") == 0) return cycle(argv[2], argv[3]);
  if (argc != 6) {
    fprintf(stderr, "usage: %s LINKED FUNCTION DIR UNLINKED IMPORT\n", argv[0]);
    return 2;
  }
  tsr_context_t ctx;
  MUST(tsrCreateContext(&ctx));
  tsr_module_t linked = load_test_image(ctx, argv[1]), unlinked = load_test_image(ctx, argv[4]);
  tsr_function_t fn, alone;
  MUST(tsrModuleGetFunction(linked, argv[2], &fn));
  MUST(tsrModuleGetFunction(unlinked, argv[2], &alone));
  tsr_function_t callee;
  expect("the linked image holds the imported function", tsrModuleGetFunction(linked, argv[5], &callee),
         TSR_SUCCESS);
  tsr_function_signature_t sig;
  MUST(tsrFunctionGetSignature(fn, &sig));
  if (sig.input_count + sig.output_count > MAX_TENSORS) return 2;

  char path[4096];
  FILE* shapes = open_shapes(argv[3]);
  if (!shapes) return 2;
  static host_tensor_t h[MAX_TENSORS];
  const DLTensor* t[MAX_TENSORS];
  for (size_t k = 0; k < sig.input_count + sig.output_count; k++) {
    size_t elems;
    int ndim = read_shape(shapes, h[k].shape, &elems);
    if (ndim < 0) return 2;
    h[k].bytes = elems * sizeof(float);
    void* data;
    if (k < sig.input_count) {
      snprintf(path, sizeof path, "%s/in%zu.bin", argv[3], k);
      size_t got;
      data = read_file(path, &got);
      if (got != h[k].bytes) return 2;
    } else {
      data = calloc(h[k].bytes ? h[k].bytes : 1, 1);
    }
    h[k].t = (DLTensor){data, {kDLCPU, 0}, ndim, {kDLFloat, 32, 1}, h[k].shape, NULL, 0};
    t[k] = &h[k].t;
  }
  fclose(shapes);

  /* the unlinked image's plan calls an import it does not define */
  char caller[256];
  snprintf(caller, sizeof caller, "function '%s'", argv[2]);
  tsr_status_t st = tsrFunctionCall(alone, NULL, t, sig.input_count, t + sig.input_count, sig.output_count);
  expect_msg("the unlinked call names the caller", st, TSR_ERROR_NOT_FOUND, caller);
  expect_msg("the unlinked call names the import", st, TSR_ERROR_NOT_FOUND, argv[5]);
  expect_msg("the unlinked call says to link it", st, TSR_ERROR_NOT_FOUND, "tessera-link");

  expect("the linked call", tsrFunctionCall(fn, NULL, t, sig.input_count, t + sig.input_count, sig.output_count),
         TSR_SUCCESS);
  /* a call with a wrong extent (the first input's last axis, which the test gives a static extent) is refused
   * before any step runs, naming the function and argument */
  int64_t* last = &h[0].shape[h[0].t.ndim - 1];
  *last += 1;
  expect_msg("a wrong extent", tsrFunctionCall(fn, NULL, t, sig.input_count, t + sig.input_count, sig.output_count),
             TSR_ERROR_INVALID_VALUE, sig.inputs[0].name);
  *last -= 1;
  for (size_t k = sig.input_count; k < sig.input_count + sig.output_count; k++) {
    snprintf(path, sizeof path, "%s/out%zu.bin", argv[3], k - sig.input_count);
    FILE* f = fopen(path, "wb");
    if (!f || fwrite(h[k].t.data, 1, h[k].bytes, f) != h[k].bytes) return 2;
    fclose(f);
  }
  for (size_t k = 0; k < sig.input_count + sig.output_count; k++) free(h[k].t.data);
  tsrUnloadModule(unlinked);
  tsrUnloadModule(linked);
  tsrDestroyContext(ctx);
  printf("%d failed\n", failures);
  return failures;
}
