/* fuzz_image.c — libFuzzer target: the image loader and everything a host may then ask of a module.
 *
 * Each input is an image. A loaded one is introspected in full (kernels, arguments, attributes, properties)
 * and each kernel is launched with arguments built from its own metadata, on the NULL stream and on a stream,
 * so that the validation of launches runs on whatever the fuzzer made of the metadata. A module's launch plans
 * (read at load: tsr_module_load_functions) are looked up, described and called with tensors built from their
 * own (fuzzed) signatures, so that the plan reader and the executor run on whatever the fuzzer made of the
 * plans. Entries are inert (cpu_code_double.c). A crash, a sanitizer report or a leak is a bug; refusals are the
 * expected outcome, and a function's refusal names it. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tessera/tessera.h"

static tsr_context_t ctx;
static tsr_stream_t stream;
static _Alignas(64) unsigned char host[1 << 16];

int LLVMFuzzerInitialize(int* argc, char*** argv) {
  (void)argc, (void)argv;
  tsr_context_options_t o;
  tsrContextOptionsInitialize(&o);
  o.worker_threads = 2;
  o.flags = TSR_CONTEXT_DEBUG;
  if (tsrCreateContextWithOptions(&o, &ctx) || tsrCreateStream(ctx, NULL, &stream)) __builtin_trap();
  return 0;
}

/* A function's refusal names it: "function 'NAME'". */
static void check_named(tsr_status_t st, const char* name) {
  char want[256];
  snprintf(want, sizeof want, "function '%s'", name);
  if (st && !strstr(tsrGetLastErrorMessage(), want)) {
    fprintf(stderr, "fuzz_image: status %d without the function's name: %s\n", (int)st, tsrGetLastErrorMessage());
    __builtin_trap();
  }
}

static void exercise(tsr_kernel_t k, uint64_t seed) {
  size_t nargs = 0;
  if (tsrKernelGetArgCount(k, &nargs) || nargs > 64) return;
  uint64_t values[64];
  void* args[64];
  for (size_t i = 0; i < nargs; i++) {
    tsr_arg_info_t info;
    if (tsrKernelGetArgInfo(k, i, &info)) __builtin_trap();  /* a loaded kernel describes every argument */
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    if (info.kind == TSR_ARG_TENSOR) values[i] = (uint64_t)(uintptr_t)(host + (seed >> 60) * 64);
    else values[i] = info.kind == TSR_ARG_DIMENSION ? (seed >> 59) : seed;  /* extents 0..31 */
    for (uint32_t d = 0; d < info.rank; d++) (void)info.dims[d];  /* must be readable */
    args[i] = &values[i];
  }
  int64_t block[3];
  tsrKernelGetAttribute(k, TSR_KERNEL_ATTR_BLOCK_X, &block[0]);
  tsrKernelGetAttribute(k, TSR_KERNEL_ATTR_BLOCK_Y, &block[1]);
  tsrKernelGetAttribute(k, TSR_KERNEL_ATTR_BLOCK_Z, &block[2]);
  for (int a = TSR_KERNEL_ATTR_WARP_SIZE; a <= TSR_KERNEL_ATTR_FLAGS; a++) {
    int64_t v;
    tsrKernelGetAttribute(k, (tsr_kernel_attribute_t)a, &v);
  }
  const char* value;
  tsrKernelGetProperty(k, "tile.M", &value);
  tsr_launch_t l = {1 + (uint32_t)(seed & 3), 1, 1, block[0] ? (uint32_t)block[0] : 32,
                    block[0] ? (uint32_t)block[1] : 1, block[0] ? (uint32_t)block[2] : 1, 0};
  tsrLaunch(k, NULL, l, args, nargs);
  tsrLaunch(k, stream, l, args, nargs);
  tsr_launch_desc_t d;
  tsrLaunchDescInitialize(&d);
  d.warps = 1 + (uint32_t)(seed >> 62);
  d.tile[0] = 64;
  d.args = args;
  d.nargs = nargs;
  tsrLaunchTile(k, &d);
  tsrStreamSynchronize(stream);
}

/* Calls `fn` with tensors its signature describes, symbolic extents `extent`, buffers from tsrAlloc. */
static void call(tsr_function_t fn, int64_t extent) {
  tsr_function_signature_t sig;
  if (tsrFunctionGetSignature(fn, &sig)) __builtin_trap();  /* a loaded function describes itself */
  if (sig.input_count + sig.output_count > 32) return;
  DLTensor tensors[32];
  const DLTensor* ptrs[32];
  int64_t shapes[32][8];
  void* buffers[32] = {0};
  size_t n = sig.input_count + sig.output_count, n_dims = 0;
  for (size_t i = 0; i < n; i++) {
    const tsr_tensor_spec_t* s = i < sig.input_count ? &sig.inputs[i] : &sig.outputs[i - sig.input_count];
    if (i >= sig.input_count) n_dims += s->rank;
    if (s->rank > 8) goto done;
    uint64_t bytes = (s->dtype.bits + 7u) / 8u;
    for (uint32_t r = 0; r < s->rank; r++) {
      shapes[i][r] = s->extents[r] >= 0 ? s->extents[r] : extent;
      bytes = shapes[i][r] > (1 << 20) || bytes > (1 << 20) ? 1u << 22 : bytes * (uint64_t)shapes[i][r];
    }
    if (bytes > (1 << 20)) bytes = 64;  /* too large to allocate here: refused as shorter than its shape */
    if (tsrAlloc(ctx, bytes ? bytes : 1, TSR_ALLOC_DEFAULT, &buffers[i])) __builtin_trap();
    memset(buffers[i], 0, bytes);
    tensors[i] = (DLTensor){buffers[i], {kDLCPU, 0}, (int32_t)s->rank, s->dtype, shapes[i], NULL, 0};
    ptrs[i] = &tensors[i];
  }
  int64_t dims[256];
  if (n_dims <= 256) check_named(tsrFunctionGetResultShapes(fn, ptrs, sig.input_count, dims, n_dims), sig.name);
  check_named(tsrFunctionCall(fn, NULL, ptrs, sig.input_count, ptrs + sig.input_count, sig.output_count), sig.name);
  check_named(tsrFunctionCall(fn, stream, ptrs, sig.input_count, ptrs + sig.input_count, sig.output_count), sig.name);
  tsrStreamSynchronize(stream);
done:
  for (size_t i = 0; i < n; i++)
    if (buffers[i] && tsrFree(ctx, buffers[i])) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tsr_module_t m;
  if (tsrLoadModule(ctx, data, size, &m) != TSR_SUCCESS) return 0;
  size_t count = 0;
  if (tsrModuleGetKernelCount(m, &count)) __builtin_trap();
  for (size_t i = 0; i < count && i < 16; i++) {
    const char* name;
    tsr_kernel_t k;
    if (tsrModuleGetKernelName(m, i, &name) || tsrGetKernel(m, name, &k)) __builtin_trap();
    exercise(k, size * 31 + i);
  }
  tsr_kernel_t k;
  tsrGetKernel(m, "gpu_only", &k);  /* the not-found message lists foreign targets */
  size_t functions = 0;
  if (tsrModuleGetFunctionCount(m, &functions)) __builtin_trap();
  for (size_t i = 0; i < functions && i < 8; i++) {
    const char* name;
    tsr_function_t fn;
    if (tsrModuleGetFunctionName(m, i, &name) || tsrModuleGetFunction(m, name, &fn)) __builtin_trap();
    call(fn, (int64_t)((size * 7 + i) % 40));
  }
  tsr_function_t none;
  tsrModuleGetFunction(m, "no_such_function", &none);  /* the not-found message lists the module's functions */
  if (tsrUnloadModule(m)) __builtin_trap();
  return 0;
}
