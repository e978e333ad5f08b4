"""Plan format 7 and Graph IR 1.2 fixture (tests/data/README.md): a per-channel int8 round trip whose scales
are function inputs (ttensor.quantize / ttensor.dequantize, Graph IR 1.2), and a tile program whose
accumulator broadcasts against its product (the plan's 'broadcasts', format 7)."""

from tessera import f32, function, i8, kernel, op, tensor, tile


@function
def roundtrip(X: tensor[f32, "T", 8], s: tensor[f32, 8]):
    return op.dequantize(op.quantize(X, i8, scale=s, axis=1), s, axis=1)


@kernel
def accumulate(A, B, C):
    for m, n, k in tile.mma(A, B, C, BM=32, BN=32, BK=16):
        tile.mma_sync(m, n, k)
