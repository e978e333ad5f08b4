"""An MLP in f32, and the same MLP with int8 and fp8 (e4m3) weights and activations.

Weights are quantized once per output channel (`quantize_weights`: one scale per column, from the column's
largest magnitude) and passed as one-byte tensors with their f32 scales; activations are quantized per tensor
with a dynamic scale from their amax (op.amax). The int8 MLP multiplies one-byte tensors in integer GEMMs
(i32 accumulators, exact) and scales each accumulator back; the fp8 one multiplies dequantized values. Accuracy against f32 (tests/unit/
test_quantize.py, docs/language.md "Quantization"): relative errors of 1.7 % (int8) and 5.4 % (fp8 e4m3)
measured, tested below 2.5 % and 7 %."""

from tessera import f32, fp8_e4m3, function, int8, op, tensor


@function
def mlp(X: tensor[f32, "T", 64], W1: tensor[f32, 64, 256], b1: tensor[f32, 256], W2: tensor[f32, 256, 64],
        b2: tensor[f32, 64]):
    return op.bias_add(op.relu(op.bias_add(X @ W1, b1)) @ W2, b2)


@function
def quantize_weights(W1: tensor[f32, 64, 256], W2: tensor[f32, 256, 64]):
    s1, s2 = op.max(op.abs(W1), 0) / 127.0, op.max(op.abs(W2), 0) / 127.0
    e1, e2 = op.max(op.abs(W1), 0) / 448.0, op.max(op.abs(W2), 0) / 448.0
    return (op.quantize(W1, int8, scale=s1, axis=1), s1, op.quantize(W2, int8, scale=s2, axis=1), s2,
            op.quantize(W1, fp8_e4m3, scale=e1, axis=1), e1, op.quantize(W2, fp8_e4m3, scale=e2, axis=1), e2)


@function
def mlp_int8(X: tensor[f32, "T", 64], W1: tensor[int8, 64, 256], s1: tensor[f32, 256], b1: tensor[f32, 256],
             W2: tensor[int8, 256, 64], s2: tensor[f32, 64], b2: tensor[f32, 64]):
    # i8 x i8 -> i32 GEMMs; each accumulator scaled back by the product of its two scales (a requantizing
    # epilogue: scale, bias, relu and the next quantization fuse into one kernel)
    sx = op.maximum(op.amax(X), 1e-30) / 127.0       # a zero input keeps a positive scale
    H = op.relu(op.bias_add(op.cast(op.quantize(X, int8, scale=sx) @ W1, f32) * (s1 * sx), b1))
    sh = op.maximum(op.amax(H), 1e-30) / 127.0
    return op.bias_add(op.cast(op.quantize(H, int8, scale=sh) @ W2, f32) * (s2 * sh), b2)


@function
def mlp_fp8(X: tensor[f32, "T", 64], W1: tensor[fp8_e4m3, 64, 256], s1: tensor[f32, 256], b1: tensor[f32, 256],
            W2: tensor[fp8_e4m3, 256, 64], s2: tensor[f32, 64], b2: tensor[f32, 64]):
    sx = op.maximum(op.amax(X), 1e-30) / 448.0
    x = op.dequantize(op.quantize(X, fp8_e4m3, scale=sx), sx)
    H = op.relu(op.bias_add(x @ op.dequantize(W1, s1, axis=1), b1))
    sh = op.maximum(op.amax(H), 1e-30) / 448.0
    h = op.dequantize(op.quantize(H, fp8_e4m3, scale=sh), sh)
    return op.bias_add(h @ op.dequantize(W2, s2, axis=1), b2)
