"""A linear layer with int4 weights and f32 activations (weight-only quantization, as GPTQ and AWQ store it).

The weight W [N, K] (out features, in features: PyTorch's layout) is quantized once in groups of G = 32
consecutive elements along K, one f32 scale per group (`quantize_weights`: the group's largest magnitude
over 7, symmetric, no zero point), and kept as i4: two weights a byte, so W4 and its scales are about 1/8 and
1/32 of W's f32 bytes. A call passes W4 as those bytes (a uint8 array [N, K/2], element 2j in the low nibble
of byte j) and `linear` computes y = x @ dequantize(W4, s)ᵀ: the dequantization unpacks the nibbles with
shifts (no target has int4 arithmetic) and multiplies each by its group's scale in f32, then an f32 GEMM.

Accuracy against the f32 layer (tests/unit/test_quantize_i4.py, docs/language.md "Quantization"): a relative
(Frobenius) error of 9.5 % at this size and seed (4) with normal weights, tested below 10 %; compiled, it equals
the interpreter's up to the GEMM's summation order."""

from tessera import f32, function, int4, op, tensor

G = 32   # weights a scale covers, along K


@function
def quantize_weights(W: tensor[f32, 96, 128]):
    s = op.max(op.abs(op.reshape(W, [96, 4, 32])), -1) / 7.0      # [N, K/G]
    return op.quantize(W, int4, scale=s, block=32), s


@function
def linear(x: tensor[f32, "T", 128], W4: tensor[int4, 96, 128], s: tensor[f32, 96, 4]):
    return x @ op.transpose(op.dequantize(W4, s, block=32))


@function
def linear_f32(x: tensor[f32, "T", 128], W: tensor[f32, 96, 128]):
    return x @ op.transpose(W)
