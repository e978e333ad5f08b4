"""int4 quantize/dequantize programs (tests/unit/test_quantize_i4.py; tests/gpu/test_quantize_i4_gpu.py runs
them on a GPU against their CPU image). Read as source text by both."""

from tessera import bf16, f32, function, i4, op, tensor


@function
def quantize4(X: tensor[f32, "N", 32], s: tensor[f32], c: tensor[f32, 32], r: tensor[f32, "N"],
              b: tensor[f32, "N", 4]):
    return (op.quantize(X, i4, scale=s), op.quantize(X, i4, scale=c, axis=1), op.quantize(X, i4, scale=r, axis=0),
            op.quantize(X, i4, scale=b, block=8))

@function
def dequantize4(Q: tensor[i4, "N", 32], s: tensor[f32], c: tensor[f32, 32], b: tensor[f32, "N", 4]):
    return op.dequantize(Q, s), op.dequantize(Q, c, axis=1), op.dequantize(Q, b, block=8, dtype=bf16)

@function
def round_trip(X: tensor[f32, "N", 32], b: tensor[f32, "N", 4]):
    return op.dequantize(op.quantize(X, i4, scale=b, block=8), b, block=8)
