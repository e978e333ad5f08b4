/* fuzz_function.c — libFuzzer target: tsrFunctionCall and tsrFunctionGetResultShapes on compiled images.
 *
 * $TESSERA_FUZZ_IMAGES lists compiled, plan-bearing images (paths separated by ':'), loaded once into a
 * debug-mode context with the real CPU code loader (cpu_code.c): the images are trusted, the calls are not.
 * Each input picks a function and builds its DLTensors: each tensor's dtype, rank, shape (the signature's
 * extents, symbolic ones bound to small or hostile values, or fuzzed), strides, byte offset, device, NULL
 * tensor/data/shape, and a buffer from tsrAlloc that may be shorter than the descriptor; the counts may be
 * off and the arrays NULL; the call runs on the default stream or on a stream.
 *
 * What the API promises is what this checks: every call either succeeds or returns a status whose message
 * names the function; no call crashes, hangs, leaks or lets a kernel write outside a checked buffer (debug
 * mode's canaries and guard pages would report that as a fault: it traps here). The harness keeps to what
 * the API leaves to the host: every data pointer is a tsrAlloc allocation (which the runtime can check),
 * never unknown memory. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "tessera/tessera.h"

enum { MAX_MODULES = 8, MAX_TENSORS = 16, MAX_RANK = 8, MAX_BYTES = 1 << 22 };

static tsr_context_t ctx;
static tsr_stream_t stream;
static tsr_function_t functions[64];
static size_t function_count;

static void* read_file(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  *size = (size_t)ftell(f);
  rewind(f);
  void* data = malloc(*size);
  if (!data || fread(data, 1, *size, f) != *size) exit(2);
  fclose(f);
  return data;
}

int LLVMFuzzerInitialize(int* argc, char*** argv) {
  (void)argc, (void)argv;
  const char* list = getenv("TESSERA_FUZZ_IMAGES");
  if (!list) {
    fprintf(stderr, "fuzz_function: set TESSERA_FUZZ_IMAGES to compiled images with launch plans (':' between)\n");
    exit(2);
  }
  tsr_context_options_t o;
  tsrContextOptionsInitialize(&o);
  o.worker_threads = 2;
  o.flags = TSR_CONTEXT_DEBUG;
  if (tsrCreateContextWithOptions(&o, &ctx) || tsrCreateStream(ctx, NULL, &stream)) __builtin_trap();
  char* paths = strdup(list);
  for (char* path = strtok(paths, ":"); path; path = strtok(NULL, ":")) {
    size_t size;
    void* image = read_file(path, &size);
    tsr_module_t m;
    if (!image || tsrLoadModule(ctx, image, size, &m)) {
      fprintf(stderr, "fuzz_function: cannot load %s: %s\n", path, tsrGetLastErrorMessage());
      exit(2);
    }
    free(image);
    size_t n;
    if (tsrModuleGetFunctionCount(m, &n)) __builtin_trap();
    for (size_t i = 0; i < n && function_count < 64; i++) {
      const char* name;
      if (tsrModuleGetFunctionName(m, i, &name) || tsrModuleGetFunction(m, name, &functions[function_count++]))
        __builtin_trap();
    }
  }
  free(paths);
  if (!function_count) {
    fprintf(stderr, "fuzz_function: the images have no functions\n");
    exit(2);
  }
  return 0;
}

/* Extents a symbol takes: mostly small ones that kernels run quickly, some that break a tile's divisibility,
 * and hostile ones (negative, huge: refused before anything runs or allocated and refused by size). */
static int64_t extent(uint8_t b) {
  static const int64_t small[] = {0, 1, 2, 3, 4, 7, 8, 13, 16, 17, 31, 32, 33, 48, 64, 65};
  static const int64_t hostile[] = {-1, INT64_MIN, INT64_MAX, (int64_t)1 << 40, (int64_t)1 << 62, -64, 4096, 1 << 20};
  return b & 0x80 ? hostile[b & 7] : small[b & 15];
}

typedef struct tensor {
  DLTensor t;
  int64_t shape[MAX_RANK], strides[MAX_RANK];
  void* buffer;  /* tsrAlloc'd, or NULL */
} tensor_t;

/* One tensor for `spec`; `symbols` binds the signature's symbolic extents (by their text) to input bytes so
 * that most calls agree on them. */
static void build(input_t* in, const tsr_tensor_spec_t* spec, const uint8_t* symbols, tensor_t* x) {
  memset(x, 0, sizeof *x);
  uint8_t how = u8(in);
  x->t.device = (DLDevice){kDLCPU, 0};
  x->t.dtype = spec->dtype;
  x->t.ndim = (int32_t)spec->rank;
  if ((how & 0x0f) == 1) x->t.dtype.code = (uint8_t)(u8(in) % 8);
  if ((how & 0x0f) == 2) x->t.dtype.bits = u8(in);
  if ((how & 0x0f) == 3) x->t.dtype.lanes = (uint16_t)(1 + u8(in) % 4);
  if ((how & 0x0f) == 4) x->t.ndim = (int32_t)(u8(in) % (MAX_RANK + 1)) - (how >> 7);
  if ((how & 0x0f) == 5) x->t.device.device_type = (DLDeviceType)(u8(in) % 16);
  int32_t rank = x->t.ndim < 0 ? 0 : x->t.ndim > MAX_RANK ? MAX_RANK : x->t.ndim;
  uint64_t elements = 1;
  for (int32_t r = 0; r < rank; r++) {
    int64_t d = (uint32_t)r < spec->rank ? spec->extents[r] : 1;
    if ((uint32_t)r < spec->rank && d < 0) {  /* symbolic: the symbol's shared value */
      const char* s = spec->dims[r];
      uint32_t h = 0;
      while (*s) h = h * 31 + (uint8_t)*s++;
      d = extent(symbols[h % 8]);
    }
    if ((how & 0x0f) == 6 && u8(in) & 1) d = extent(u8(in));
    if ((how & 0x0f) == 7 && r == rank - 1 && d < INT64_MAX) d += 1;
    x->shape[r] = d;
    elements = d < 0 || elements > (uint64_t)MAX_BYTES ? (uint64_t)MAX_BYTES + 1 : elements * (uint64_t)d;
  }
  x->t.shape = (how & 0x0f) == 8 ? NULL : x->shape;
  if ((how & 0x0f) == 9 || (how & 0x0f) == 10) {  /* explicit strides: compact, or one of them wrong */
    int64_t s = 1;
    for (int32_t r = rank - 1; r >= 0; r--) {
      x->strides[r] = s;
      s *= x->shape[r] > 0 && x->shape[r] < (1 << 20) ? x->shape[r] : 1;
    }
    if ((how & 0x0f) == 10 && rank) x->strides[u8(in) % rank] += 1 + u8(in) % 3;
    x->t.strides = x->strides;
  }
  uint64_t bytes = elements * (uint64_t)((spec->dtype.bits + 7) / 8);
  if (bytes > MAX_BYTES) bytes = 64;  /* shorter than the descriptor: refused by size */
  if ((how & 0x0f) == 11) bytes = bytes > 0 ? bytes - 1 - u8(in) % bytes : 0;  /* a short buffer */
  if ((how & 0x0f) == 12) x->t.byte_offset = 1 + u8(in) % 16;                  /* past its start */
  if ((how & 0x0f) == 13) return;                                              /* NULL data */
  if (tsrAlloc(ctx, bytes ? bytes : 1, TSR_ALLOC_DEFAULT, &x->buffer)) __builtin_trap();
  memset(x->buffer, how >> 4, bytes);  /* small values: float kernels stay finite and quick */
  x->t.data = x->buffer;
}

/* A failure's message names the function: "function 'NAME'" (tsrFunctionGetResultShapes prefixes its own
 * name). */
static void check_failure(tsr_status_t st, const char* name) {
  if (st == TSR_SUCCESS) return;
  const char* message = tsrGetLastErrorMessage();
  char want[256];
  snprintf(want, sizeof want, "function '%s'", name);
  if (!strstr(message, want)) {
    fprintf(stderr, "fuzz_function: status %d without the function's name: %s\n", (int)st, message);
    __builtin_trap();
  }
  /* a kernel that ran on checked tensors never writes outside them */
  if (st == TSR_ERROR_MEMORY_FAULT && (strstr(message, "canary") || strstr(message, "guard"))) {
    fprintf(stderr, "fuzz_function: a kernel wrote outside its tensors: %s\n", message);
    __builtin_trap();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  input_t in = {data, size};
  tsr_function_t fn = functions[u8(&in) % function_count];
  tsr_function_signature_t sig;
  if (tsrFunctionGetSignature(fn, &sig)) {
    fprintf(stderr, "fuzz_function: tsrFunctionGetSignature: %s\n", tsrGetLastErrorMessage());
    __builtin_trap();
  }
  if (sig.input_count > MAX_TENSORS || sig.output_count > MAX_TENSORS) return 0;
  uint8_t symbols[8];
  for (int i = 0; i < 8; i++) symbols[i] = u8(&in);
  uint8_t shape_of_call = u8(&in);
  static tensor_t ins[MAX_TENSORS], outs[MAX_TENSORS];
  const DLTensor* in_ptrs[MAX_TENSORS + 1];
  const DLTensor* out_ptrs[MAX_TENSORS + 1];
  for (size_t i = 0; i < sig.input_count; i++) {
    build(&in, &sig.inputs[i], symbols, &ins[i]);
    in_ptrs[i] = u8(&in) == 0xff ? NULL : &ins[i].t;
  }
  for (size_t i = 0; i < sig.output_count; i++) {
    build(&in, &sig.outputs[i], symbols, &outs[i]);
    out_ptrs[i] = u8(&in) == 0xff ? NULL : &outs[i].t;
  }
  in_ptrs[sig.input_count] = out_ptrs[sig.output_count] = NULL;
  size_t n_in = sig.input_count, n_out = sig.output_count;
  if ((shape_of_call & 7) == 1) n_in = n_in ? n_in - 1 : 1;
  if ((shape_of_call & 7) == 2) n_out += 1;
  const DLTensor* const* ins_arg = (shape_of_call & 7) == 3 ? NULL : in_ptrs;
  const DLTensor* const* outs_arg = (shape_of_call & 7) == 4 ? NULL : out_ptrs;

  int64_t dims[MAX_TENSORS * MAX_RANK];
  size_t n_dims = 0;
  for (size_t i = 0; i < sig.output_count; i++) n_dims += sig.outputs[i].rank;
  if ((shape_of_call & 7) == 5) n_dims += 1;
  check_failure(tsrFunctionGetResultShapes(fn, ins_arg, n_in, dims, n_dims), sig.name);
  check_failure(tsrFunctionCall(fn, shape_of_call & 8 ? stream : NULL, ins_arg, n_in, outs_arg, n_out), sig.name);
  if (shape_of_call & 8 && tsrStreamSynchronize(stream)) __builtin_trap();  /* a call leaves no error behind */
  for (size_t i = 0; i < sig.input_count; i++)
    if (ins[i].buffer && tsrFree(ctx, ins[i].buffer)) __builtin_trap();
  for (size_t i = 0; i < sig.output_count; i++)
    if (outs[i].buffer && tsrFree(ctx, outs[i].buffer)) __builtin_trap();
  return 0;
}
