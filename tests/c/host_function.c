/* host_function.c — runs an `@function` of an image from C: tsrModuleGetFunction, tsrFunctionGetSignature and
 * tsrFunctionCall with DLPack tensors, on the CPU backend or, with --backend, another one (the tensors then
 * live in the context's device memory: tsrAlloc, filled and read back with tsrMemcpy).
 *
 *   host_function IMAGE FUNCTION DIR [--bad] [--backend NAME]
 *
 * DIR/shapes.txt has one line per tensor, inputs first: "in|out NDIM D0 D1 ...". Inputs are read from
 * DIR/in<i>.bin (raw, as the signature's dtype stores them), outputs written to DIR/out<i>.bin. With --bad, the
 * host also checks that bad calls (unknown function, wrong count, rank, dtype, extent, NULL pointers,
 * an output whose strides overlap, a buffer shorter than its shape or its strides reach) return their status
 * with a message naming the function and argument. With --strided (CPU), the host runs the function on strided
 * views of the same values, as numpy makes them (transposed, every other element with an offset, axis 0
 * reversed; inputs broadcast along axis 0 by a zero stride), and checks that outputs and inputs end bit for
 * bit as the compact call leaves them. Every run also checks tsrFunctionGetResultShapes against the outputs'
 * extents. */
#include "check.h"

#define MAX_TENSORS 32

typedef struct host_tensor {
  DLTensor t;
  int64_t shape[8];
  void* data;    /* host memory */
  void* device;  /* with --backend: the tensor's memory (t.data), else NULL */
  size_t bytes;
} host_tensor_t;

/* ---- strided views (--strided) ---------------------------------------------------------------------------- */

enum { TRANSPOSED, SLICED, REVERSED, BROADCAST, LAYOUTS };
static const char* const layout_names[LAYOUTS] = {"transposed", "every other element", "axis 0 reversed",
                                                  "inputs broadcast along axis 0"};

/* A strided view of a tensor of `h`'s shape, laid out as `layout` says in a new buffer (*buffer, to free). */
typedef struct view {
  DLTensor t;
  int64_t strides[8];
  char* buffer;
} view_t;

static void view_make(view_t* v, const host_tensor_t* h, int layout) {
  int nd = h->t.ndim;
  size_t size = h->t.dtype.bits / 8;
  int64_t elements = 1, compact[8], stride = 1;
  for (int r = nd - 1; r >= 0; r--) compact[r] = stride, stride *= h->shape[r];
  elements = stride;
  v->t = h->t;
  v->t.strides = v->strides;
  int64_t span = elements, first = 0;  /* buffer elements; element 0's index in it */
  if (layout == TRANSPOSED) {         /* numpy: a.T.copy().T, column-major storage */
    stride = 1;
    for (int r = 0; r < nd; r++) v->strides[r] = stride, stride *= h->shape[r];
  } else if (layout == SLICED) {      /* numpy: b[..., 1::2] of b with twice the last axis, plus one */
    stride = 1;
    for (int r = nd - 1; r >= 0; r--) v->strides[r] = (r == nd - 1 ? 2 : 1) * stride, stride *= (r == nd - 1 ? 2 * h->shape[r] + 1 : h->shape[r]);
    span = stride, first = nd ? 1 : 0;
  } else if (layout == REVERSED) {    /* numpy: b[::-1] */
    memcpy(v->strides, compact, sizeof(int64_t) * (size_t)nd);
    if (nd) v->strides[0] = -compact[0], first = (h->shape[0] - 1) * compact[0];
  } else {                            /* numpy: np.broadcast_to(b[:1], shape) */
    memcpy(v->strides, compact, sizeof(int64_t) * (size_t)nd);
    if (nd) v->strides[0] = 0, span = h->shape[0] ? elements / h->shape[0] : 0;
  }
  v->buffer = calloc((size_t)(span ? span : 1), size);
  v->t.data = v->buffer;
  v->t.byte_offset = (uint64_t)first * size;  /* element 0, through byte_offset as DLPack allows */
}

/* The element offsets of row-major element k in the view. */
static int64_t view_offset(const view_t* v, int64_t k) {
  int64_t offset = 0;
  for (int r = v->t.ndim - 1; r >= 0; r--) {
    offset += (k % v->t.shape[r]) * v->strides[r];
    k /= v->t.shape[r];
  }
  return offset;
}

/* Copies compact `data` into the view (`in`) or out of it. */
static void view_copy(view_t* v, char* data, bool in) {
  size_t size = v->t.dtype.bits / 8;
  int64_t elements = 1;
  for (int r = 0; r < v->t.ndim; r++) elements *= v->t.shape[r];
  char* origin = v->buffer + v->t.byte_offset;
  for (int64_t k = 0; k < elements; k++) {
    char* p = origin + view_offset(v, k) * (int64_t)size;
    if (in) memcpy(p, data + k * (int64_t)size, size);
    else memcpy(data + k * (int64_t)size, p, size);
  }
}

/* Each layout: the function on views of `pristine` inputs (broadcast: their slices 0) against the compact call
 * on the same values; the outputs and the inputs (a tile program writes some) must end alike. */
static void strided_calls(tsr_context_t ctx, tsr_function_t fn, const tsr_function_signature_t* sig,
                          host_tensor_t* ins, host_tensor_t* outs, char** pristine) {
  tsr_stream_t stream;
  MUST(tsrCreateStream(ctx, NULL, &stream));
  size_t n_in = sig->input_count, n_out = sig->output_count;
  for (int layout = 0; layout < LAYOUTS; layout++) {
    static view_t vin[MAX_TENSORS], vout[MAX_TENSORS];
    static char *want_in[MAX_TENSORS], *want_out[MAX_TENSORS];
    const DLTensor *in[MAX_TENSORS], *out[MAX_TENSORS];
    /* the compact call on the values the views will hold */
    for (size_t i = 0; i < n_in; i++) {
      memcpy(ins[i].data, pristine[i], ins[i].bytes);
      if (layout == BROADCAST && ins[i].t.ndim && ins[i].shape[0]) {
        size_t slice = ins[i].bytes / (size_t)ins[i].shape[0];
        for (int64_t j = 1; j < ins[i].shape[0]; j++) memcpy((char*)ins[i].data + j * (int64_t)slice, ins[i].data, slice);
      }
      in[i] = &ins[i].t;
    }
    for (size_t i = 0; i < n_out; i++) memset(outs[i].data, 0, outs[i].bytes), out[i] = &outs[i].t;
    for (size_t i = 0; i < n_in; i++) {
      view_make(&vin[i], &ins[i], layout);
      view_copy(&vin[i], ins[i].data, true);
      in[i] = &vin[i].t;
    }
    const DLTensor* compact_in[MAX_TENSORS];
    for (size_t i = 0; i < n_in; i++) compact_in[i] = &ins[i].t;
    MUST(tsrFunctionCall(fn, NULL, compact_in, n_in, out, n_out));
    for (size_t i = 0; i < n_in; i++) want_in[i] = malloc(ins[i].bytes + 1), memcpy(want_in[i], ins[i].data, ins[i].bytes);
    for (size_t i = 0; i < n_out; i++) {
      want_out[i] = malloc(outs[i].bytes + 1), memcpy(want_out[i], outs[i].data, outs[i].bytes);
      view_make(&vout[i], &outs[i], layout == BROADCAST ? SLICED : layout);
      out[i] = &vout[i].t;
    }
    char what[160];
    snprintf(what, sizeof what, "a call on views: %s", layout_names[layout]);
    tsr_status_t st = tsrFunctionCall(fn, stream, in, n_in, out, n_out);
    if (layout == BROADCAST && st == TSR_ERROR_INVALID_VALUE)  /* refused where a tile program writes the input */
      expect_msg(what, st, TSR_ERROR_INVALID_VALUE, "but the tile program writes result");
    else
      expect(what, st, TSR_SUCCESS);
    MUST(tsrStreamSynchronize(stream));
    bool same = true;
    for (size_t i = 0; i < n_out; i++) {
      view_copy(&vout[i], outs[i].data, false);
      same = same && memcmp(outs[i].data, want_out[i], outs[i].bytes) == 0;
    }
    for (size_t i = 0; i < n_in && layout != BROADCAST; i++) {
      view_copy(&vin[i], ins[i].data, false);
      same = same && memcmp(ins[i].data, want_in[i], ins[i].bytes) == 0;
    }
    snprintf(what, sizeof what, "%s: the same bits as the compact call", layout_names[layout]);
    if (!st) check(what, same);
    for (size_t i = 0; i < n_in; i++) free(vin[i].buffer), free(want_in[i]);
    for (size_t i = 0; i < n_out; i++) free(vout[i].buffer), free(want_out[i]);
  }
  MUST(tsrDestroyStream(stream));
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
  /* a fixed extent says "must have extent", a symbolic one bound by this argument "but an earlier argument has" */
  expect_msg("wrong extent", tsrFunctionCall(fn, NULL, in, sig->input_count, out, sig->output_count),
             TSR_ERROR_INVALID_VALUE, "on axis");
  t = ins[0].t;
  int64_t strides[8] = {0};  /* every element the same */
  DLTensor o0 = outs[0].t;
  o0.strides = strides;
  out[0] = &o0;
  expect_msg("an output broadcast by zero strides", tsrFunctionCall(fn, NULL, in, sig->input_count, out,
                                                                     sig->output_count),
             TSR_ERROR_INVALID_VALUE, "share memory");
  out[0] = &outs[0].t;
  /* a view of axis 0 reversed whose data pointer is the start of its allocation: it reaches before it */
  void* exact;
  MUST(tsrAlloc(ctx, ins[0].bytes, TSR_ALLOC_DEFAULT, &exact));
  t = ins[0].t;
  t.data = exact;
  int64_t stride = 1;
  for (int r = t.ndim - 1; r >= 0; r--) strides[r] = stride, stride *= t.shape[r];
  strides[0] = -strides[0];
  t.strides = strides;
  if (t.ndim && t.shape[0] > 1)
    expect_msg("a reversed view reaching before its allocation", tsrFunctionCall(fn, NULL, in, sig->input_count, out,
                                                                                 sig->output_count),
               TSR_ERROR_MEMORY_FAULT, "past its start");
  MUST(tsrFree(ctx, exact));
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
  bool bad = false, strided = false;
  const char* backend = "cpu";
  for (int i = 4; i < argc; i++) {
    if (strcmp(argv[i], "--bad") == 0) bad = true;
    else if (strcmp(argv[i], "--strided") == 0) strided = true;
    else if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) backend = argv[++i];
    else return 2;
  }
  if (strided && strcmp(backend, "cpu") != 0) return 2;  /* the views are host memory */
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
  FILE* shapes = open_shapes(argv[3]);
  if (!shapes) return 2;
  static host_tensor_t ins[MAX_TENSORS], outs[MAX_TENSORS];
  const DLTensor* in[MAX_TENSORS];
  const DLTensor* out[MAX_TENSORS];
  for (size_t k = 0; k < sig.input_count + sig.output_count; k++) {
    bool is_in = k < sig.input_count;
    size_t i = is_in ? k : k - sig.input_count;
    host_tensor_t* h = is_in ? &ins[i] : &outs[i];
    const tsr_tensor_spec_t* spec = is_in ? &sig.inputs[i] : &sig.outputs[i];
    size_t elems;
    int ndim = read_shape(shapes, h->shape, &elems);
    if (ndim < 0) return 2;
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

  static char* pristine[MAX_TENSORS];  /* the inputs before any call writes them */
  for (size_t i = 0; i < sig.input_count; i++) {
    pristine[i] = malloc(ins[i].bytes + 1);
    memcpy(pristine[i], ins[i].data, ins[i].bytes);
  }
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
  if (strided) strided_calls(ctx, fn, &sig, ins, outs, pristine);
  for (size_t i = 0; i < sig.input_count; i++) free(pristine[i]);
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
