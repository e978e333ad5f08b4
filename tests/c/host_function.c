/* host_function.c — runs an `@function` of an image from C: tsrModuleGetFunction, tsrFunctionGetSignature and
 * tsrFunctionCall with DLPack tensors, on the CPU backend or, with --backend, another one (the tensors then
 * live in the context's device memory: tsrAlloc, filled and read back with tsrMemcpy).
 *
 *   host_function IMAGE FUNCTION DIR [--bad] [--backend NAME]
 *
 * DIR/shapes.txt has one line per tensor, inputs first: "in|out NDIM D0 D1 ...". Inputs are read from
 * DIR/in<i>.bin (raw, as the signature's dtype stores them), outputs written to DIR/out<i>.bin. With --bad, the
 * host also checks that bad calls (unknown function, wrong count, rank, dtype, extent, NULL pointers,
 * non-contiguous strides, a buffer shorter than its shape) return their status with a message naming the
 * function and argument. Every run also checks tsrFunctionGetResultShapes against the outputs' extents. */
#include "check.h"

#define MAX_TENSORS 32

typedef struct host_tensor {
  DLTensor t;
  int64_t shape[8];
  void* data;    /* host memory */
  void* device;  /* with --backend: the tensor's memory (t.data), else NULL */
  size_t bytes;
} host_tensor_t;

/* The DLPack device type of a backend's memory. */
static DLDeviceType device_type_of(const char* backend) {
  if (strcmp(backend, "cuda") == 0) return kDLCUDA;
  if (strcmp(backend, "hip") == 0) return kDLROCM;
  if (strcmp(backend, "level_zero") == 0) return kDLOneAPI;
  if (strcmp(backend, "opencl") == 0) return kDLOpenCL;
  return kDLCPU;
}

static void print_spec(const char* role, const tsr_tensor_spec_t* s) {
  printf("%s %s: %s[", role, s->name, s->dtype_name);
  for (uint32_t r = 0; r < s->rank; r++) printf("%s%s", r ? ", " : "", s->dims[r]);
  printf("] (DLPack code %u, %u bits)\n", (unsigned)s->dtype.code, (unsigned)s->dtype.bits);
}

static void bad_inputs(tsr_context_t ctx, tsr_module_t module, tsr_function_t fn, const tsr_function_signature_t* sig, host_tensor_t* ins,
                       host_tensor_t* outs) {
  const DLTensor* in[MAX_TENSORS];
  const DLTensor* out[MAX_TENSORS];
  for (size_t i = 0; i < sig->input_count; i++) in[i] = &ins[i].t;
  for (size_t i = 0; i < sig->output_count; i++) out[i] = &outs[i].t;
  tsr_function_t other;
  expect_msg("unknown function", tsrModuleGetFunction(module, "nope", &other), TSR_ERROR_NOT_FOUND, "nope");
  expect("NULL name", tsrModuleGetFunction(module, NULL, &other), TSR_ERROR_INVALID_VALUE);
  expect("NULL output", tsrModuleGetFunction(module, sig->name, NULL), TSR_ERROR_INVALID_VALUE);
  expect("NULL module", tsrModuleGetFunction(NULL, sig->name, &other), TSR_ERROR_INVALID_HANDLE);
  expect("NULL function", tsrFunctionCall(NULL, NULL, in, sig->input_count, out, sig->output_count),
         TSR_ERROR_INVALID_HANDLE);
  expect("signature of NULL", tsrFunctionGetSignature(NULL, NULL), TSR_ERROR_INVALID_HANDLE);
  expect("signature into NULL", tsrFunctionGetSignature(fn, NULL), TSR_ERROR_INVALID_VALUE);
  expect_msg("too few inputs", tsrFunctionCall(fn, NULL, in, sig->input_count - 1, out, sig->output_count),
             TSR_ERROR_INVALID_VALUE, sig->name);
  expect_msg("too many outputs", tsrFunctionCall(fn, NULL, in, sig->input_count, out, sig->output_count + 1),
             TSR_ERROR_INVALID_VALUE, "outputs");
  expect_msg("NULL inputs array", tsrFunctionCall(fn, NULL, NULL, sig->input_count, out, sig->output_count),
             TSR_ERROR_INVALID_VALUE, "inputs");
  expect_msg("NULL outputs array", tsrFunctionCall(fn, NULL, in, sig->input_count, NULL, sig->output_count),
             TSR_ERROR_INVALID_VALUE, "outputs");
  const char* name0 = sig->inputs[0].name;
  in[0] = NULL;
  expect_msg("NULL tensor", tsrFunctionCall(fn, NULL, in, sig->input_count, out, sig->output_count),
             TSR_ERROR_INVALID_VALUE, name0);
  DLTensor t = ins[0].t;
  in[0] = &t;
  t.data = NULL;
  expect_msg("NULL data", tsrFunctionCall(fn, NULL, in, sig->input_count, out, sig->output_count),
             TSR_ERROR_INVALID_VALUE, name0);
  t = ins[0].t;
  t.ndim = t.ndim + 1;
  expect_msg("wrong rank", tsrFunctionCall(fn, NULL, in, sig->input_count, out, sig->output_count),
             TSR_ERROR_INVALID_VALUE, "rank");
  t = ins[0].t;
  t.dtype.code = t.dtype.code == kDLInt ? kDLFloat : kDLInt;
  expect_msg("wrong dtype", tsrFunctionCall(fn, NULL, in, sig->input_count, out, sig->output_count),
             TSR_ERROR_INVALID_VALUE, "dtype");
  /* tsrFunctionGetResultShapes checks inputs as tsrFunctionCall does: the same status and message */
  char call_message[1024];
  snprintf(call_message, sizeof call_message, "%s", tsrGetLastErrorMessage());
  int64_t dims[MAX_TENSORS * 8];
  size_t total = 0;
  for (size_t i = 0; i < sig->output_count; i++) total += sig->outputs[i].rank;
  expect("result shapes of a wrong dtype", tsrFunctionGetResultShapes(fn, in, sig->input_count, dims, total),
         TSR_ERROR_INVALID_VALUE);
  check("result shapes say what the call says", strcmp(call_message, tsrGetLastErrorMessage()) == 0);
  t = ins[0].t;
  expect_msg("result shapes with too few dims", tsrFunctionGetResultShapes(fn, in, sig->input_count, dims, total - 1),
             TSR_ERROR_INVALID_VALUE, "extents");
  expect("result shapes into NULL", tsrFunctionGetResultShapes(fn, in, sig->input_count, NULL, total),
         TSR_ERROR_INVALID_VALUE);
  expect_msg("result shapes of too few inputs", tsrFunctionGetResultShapes(fn, in, sig->input_count - 1, dims, total),
             TSR_ERROR_INVALID_VALUE, "arguments");
  expect("result shapes of NULL", tsrFunctionGetResultShapes(NULL, in, sig->input_count, dims, total),
         TSR_ERROR_INVALID_HANDLE);
  t = ins[0].t;
  t.dtype.lanes = 2;
  expect_msg("vector lanes", tsrFunctionCall(fn, NULL, in, sig->input_count, out, sig->output_count),
             TSR_ERROR_INVALID_VALUE, "dtype");
  t = ins[0].t;
  t.device.device_type = t.device.device_type == kDLCPU ? kDLCUDA : kDLCPU;
  expect_msg("another device", tsrFunctionCall(fn, NULL, in, sig->input_count, out, sig->output_count),
             TSR_ERROR_INVALID_VALUE, "device");
  /* a fixed extent off by one, or a symbolic one bound differently by two arguments */
  int64_t shape[8];
  t = ins[0].t;
  memcpy(shape, t.shape, sizeof(int64_t) * (size_t)t.ndim);
  t.shape = shape;
  shape[t.ndim - 1] += 1;
  expect_msg("wrong extent", tsrFunctionCall(fn, NULL, in, sig->input_count, out, sig->output_count),
             TSR_ERROR_INVALID_VALUE, "extent");
  t = ins[0].t;
  int64_t strides[8];
  for (int r = 0; r < t.ndim; r++) strides[r] = 1;  /* not row-major */
  t.strides = strides;
  expect_msg("non-contiguous", tsrFunctionCall(fn, NULL, in, sig->input_count, out, sig->output_count),
             TSR_ERROR_INVALID_VALUE, "contiguous");
  /* a buffer the context knows, shorter than the descriptor says */
  t = ins[0].t;
  void* small;
  MUST(tsrAlloc(ctx, 4, TSR_ALLOC_DEFAULT, &small));
  t.data = small;
  expect_msg("a buffer shorter than its shape", tsrFunctionCall(fn, NULL, in, sig->input_count, out,
                                                                 sig->output_count), TSR_ERROR_MEMORY_FAULT, name0);
  MUST(tsrFree(ctx, small));
  in[0] = &ins[0].t;
  DLTensor o = outs[0].t;
  int64_t oshape[8];
  memcpy(oshape, o.shape, sizeof(int64_t) * (size_t)o.ndim);
  oshape[0] += 1;
  o.shape = oshape;
  out[0] = &o;
  expect_msg("output of the wrong extent", tsrFunctionCall(fn, NULL, in, sig->input_count, out, sig->output_count),
             TSR_ERROR_INVALID_VALUE, "result0");
  out[0] = &outs[0].t;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s IMAGE FUNCTION DIR [--bad] [--backend NAME]\n", argv[0]);
    return 2;
  }
  bool bad = false;
  const char* backend = "cpu";
  for (int i = 4; i < argc; i++) {
    if (strcmp(argv[i], "--bad") == 0) bad = true;
    else if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) backend = argv[++i];
    else return 2;
  }
  size_t size;
  void* image = read_file(argv[1], &size);
  tsr_context_t ctx;
  tsr_module_t module;
  tsr_context_options_t options;
  MUST(tsrContextOptionsInitialize(&options));
  options.backend = backend;
  MUST(tsrCreateContextWithOptions(&options, &ctx));
  MUST(tsrLoadModule(ctx, image, size, &module));
  free(image);
  size_t count;
  MUST(tsrModuleGetFunctionCount(module, &count));
  printf("functions:");
  for (size_t i = 0; i < count; i++) {
    const char* name;
    MUST(tsrModuleGetFunctionName(module, i, &name));
    printf(" %s", name);
  }
  printf("\n");
  tsr_function_t fn;
  MUST(tsrModuleGetFunction(module, argv[2], &fn));
  tsr_function_signature_t sig;
  MUST(tsrFunctionGetSignature(fn, &sig));
  for (size_t i = 0; i < sig.input_count; i++) print_spec("in", &sig.inputs[i]);
  for (size_t i = 0; i < sig.output_count; i++) print_spec("out", &sig.outputs[i]);
  if (sig.input_count > MAX_TENSORS || sig.output_count > MAX_TENSORS) return 2;

  char path[4096];
  snprintf(path, sizeof path, "%s/shapes.txt", argv[3]);
  FILE* shapes = fopen(path, "r");
  if (!shapes) {
    perror(path);
    return 2;
  }
  static host_tensor_t ins[MAX_TENSORS], outs[MAX_TENSORS];
  const DLTensor* in[MAX_TENSORS];
  const DLTensor* out[MAX_TENSORS];
  for (size_t k = 0; k < sig.input_count + sig.output_count; k++) {
    bool is_in = k < sig.input_count;
    size_t i = is_in ? k : k - sig.input_count;
    host_tensor_t* h = is_in ? &ins[i] : &outs[i];
    const tsr_tensor_spec_t* spec = is_in ? &sig.inputs[i] : &sig.outputs[i];
    char role[8];
    int ndim;
    if (fscanf(shapes, "%7s %d", role, &ndim) != 2 || ndim < 0 || ndim > 8) return 2;
    size_t elems = 1;
    for (int r = 0; r < ndim; r++) {
      long long d;
      if (fscanf(shapes, "%lld", &d) != 1) return 2;
      h->shape[r] = d;
      elems *= (size_t)d;
    }
    h->bytes = elems * spec->dtype.bits / 8;
    if (is_in) {
      snprintf(path, sizeof path, "%s/in%zu.bin", argv[3], i);
      size_t got;
      h->data = read_file(path, &got);
      if (got != h->bytes) {
        printf("FAIL %s has %zu bytes, %zu expected\n", path, got, h->bytes);
        return 2;
      }
    } else {
      h->data = calloc(h->bytes ? h->bytes : 1, 1);
    }
    h->t = (DLTensor){h->data, {device_type_of(backend), 0}, ndim, spec->dtype, h->shape, NULL, 0};
    if (strcmp(backend, "cpu") != 0) {
      MUST(tsrAlloc(ctx, h->bytes ? h->bytes : 1, TSR_ALLOC_DEFAULT, &h->device));
      if (is_in) MUST(tsrMemcpy(ctx, h->device, h->data, h->bytes, TSR_MEMCPY_HOST_TO_DEVICE));
      h->t.data = h->device;
    }
    if (is_in)
      in[i] = &h->t;
    else
      out[i] = &h->t;
  }
  fclose(shapes);

  if (bad) bad_inputs(ctx, module, fn, &sig, ins, outs);

  /* the outputs' extents from the inputs' descriptors alone (their data NULL) */
  static DLTensor bare[MAX_TENSORS];
  const DLTensor* bare_in[MAX_TENSORS];
  for (size_t i = 0; i < sig.input_count; i++) {
    bare[i] = ins[i].t;
    bare[i].data = NULL;
    bare_in[i] = &bare[i];
  }
  int64_t dims[MAX_TENSORS * 8];
  size_t total = 0;
  for (size_t i = 0; i < sig.output_count; i++) total += sig.outputs[i].rank;
  expect("result shapes", tsrFunctionGetResultShapes(fn, bare_in, sig.input_count, dims, total), TSR_SUCCESS);
  bool same = true;
  for (size_t i = 0, at = 0; i < sig.output_count; i++)
    for (uint32_t r = 0; r < sig.outputs[i].rank; r++) same = same && dims[at++] == outs[i].shape[r];
  check("result shapes are the outputs' extents", same);

  /* twice: once on the NULL stream, once on a stream (the call waits for it); the second's outputs are kept */
  expect("call on the NULL stream", tsrFunctionCall(fn, NULL, in, sig.input_count, out, sig.output_count),
         TSR_SUCCESS);
  tsr_stream_t stream;
  MUST(tsrCreateStream(ctx, NULL, &stream));
  expect("call on a stream", tsrFunctionCall(fn, stream, in, sig.input_count, out, sig.output_count), TSR_SUCCESS);
  MUST(tsrStreamSynchronize(stream));
  MUST(tsrDestroyStream(stream));
  for (size_t k = 0; k < sig.input_count + sig.output_count; k++) {
    host_tensor_t* h = k < sig.input_count ? &ins[k] : &outs[k - sig.input_count];
    if (!h->device) continue;
    if (k >= sig.input_count) MUST(tsrMemcpy(ctx, h->data, h->device, h->bytes, TSR_MEMCPY_DEVICE_TO_HOST));
    MUST(tsrFree(ctx, h->device));
  }
  for (size_t i = 0; i < sig.output_count; i++) {
    snprintf(path, sizeof path, "%s/out%zu.bin", argv[3], i);
    FILE* f = fopen(path, "wb");
    if (!f || fwrite(outs[i].data, 1, outs[i].bytes, f) != outs[i].bytes) return 2;
    fclose(f);
  }
  tsr_memory_stats_t stats;
  MUST(tsrGetMemoryStats(ctx, &stats));
  check("intermediates are freed", stats.allocations == 0);
  MUST(tsrUnloadModule(module));
  tsr_function_signature_t gone;
  expect("a function of an unloaded module", tsrFunctionGetSignature(fn, &gone), TSR_ERROR_INVALID_HANDLE);
  MUST(tsrDestroyContext(ctx));
  for (size_t i = 0; i < sig.input_count; i++) free(ins[i].data);
  for (size_t i = 0; i < sig.output_count; i++) free(outs[i].data);
  printf("%d failed\n", failures);
  return failures;
}
