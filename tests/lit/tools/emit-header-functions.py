# `tessera-cc --emit-header`: a call wrapper per @function, its tensors documented (dtype, extents, symbols).
# RUN: tessera-cc %s -o %t.tessera --emit-header %t.h
# RUN: FileCheck %s --input-file %t.h

from tessera import bf16, f32, function, op, tensor

# Parameters named as the wrapper's own (fn, stream, inputs, outputs) or a C keyword get a trailing "_".
# CHECK-LABEL: * @function block: tsrFunctionCall with its tensors in this order
# CHECK-NEXT:  *   in  fn: f32[T, 64]
# CHECK-NEXT:  *   in  stream: bf16[64, F]
# CHECK-NEXT:  *   in  inputs: f32[F]
# CHECK-NEXT:  *   in  int: f32[T, 64]
# CHECK-NEXT:  *   out result0: f32[T, F]
# CHECK-NEXT:  *   out result1: f32[T, 64]
# CHECK-NEXT:  * Symbolic extents (F, T) are bound by the first input that has them
# CHECK-NEXT:  */
# CHECK-NEXT: #define TESSERA_BLOCK_NAME "block"
# CHECK-NEXT: #define TESSERA_BLOCK_NUM_INPUTS 4
# CHECK-NEXT: #define TESSERA_BLOCK_NUM_OUTPUTS 2
# CHECK-NEXT: static inline tsr_status_t tessera_block_lookup(tsr_module_t module, tsr_function_t* out_function) {
# CHECK-NEXT:   return tsrModuleGetFunction(module, TESSERA_BLOCK_NAME, out_function);
# CHECK-NEXT: }
# CHECK-NEXT: static inline tsr_status_t tessera_block(tsr_function_t fn, tsr_stream_t stream, const DLTensor* fn_, const DLTensor* stream_, const DLTensor* inputs_, const DLTensor* int_, const DLTensor* result0, const DLTensor* result1) {
# CHECK-NEXT:   const DLTensor* inputs[4] = {fn_, stream_, inputs_, int_};
# CHECK-NEXT:   const DLTensor* outputs[2] = {result0, result1};
# CHECK-NEXT:   return tsrFunctionCall(fn, stream, inputs, 4, outputs, 2);
# CHECK-NEXT: }
@function
def block(fn: tensor[f32, "T", 64], stream: tensor[bf16, 64, "F"], inputs: tensor[f32, "F"],
          int: tensor[f32, "T", 64]):
    return op.bias_add(op.matmul(op.cast(fn, bf16), stream, out_dtype=f32), inputs), fn + int


# Names whose macros would be one (TESSERA_MIX_NAME) or whose wrapper is another's lookup (tessera_mix_lookup)
# get a trailing "_" in every name they declare; the string keeps the function's name.
# CHECK-LABEL: * @function Mix: tsrFunctionCall
# CHECK:       #define TESSERA_MIX_NAME "Mix"
# CHECK:       static inline tsr_status_t tessera_Mix(tsr_function_t fn, tsr_stream_t stream, const DLTensor* X, const DLTensor* result0) {
# CHECK-LABEL: * @function mix: tsrFunctionCall
# CHECK:       #define TESSERA_MIX__NAME "mix"
# CHECK:       static inline tsr_status_t tessera_mix__lookup(
# CHECK:       static inline tsr_status_t tessera_mix_(
# CHECK-LABEL: * @function Mix_lookup: tsrFunctionCall
# CHECK:       #define TESSERA_MIX_LOOKUP__NAME "Mix_lookup"
# CHECK:       static inline tsr_status_t tessera_Mix_lookup_(
@function
def Mix(X: tensor[f32, "N"]):
    return op.relu(X)


@function
def mix(X: tensor[f32, "N"]):
    return op.relu(X)


@function
def Mix_lookup(X: tensor[f32, "N"]):
    return op.relu(X)
