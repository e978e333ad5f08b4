"""Casts with accumulation policies, fp8 GEMM, and dropout with a fixed Philox seed."""

from tessera import accum, bf16, f32, fp8_e4m3, fp32, function, op, tensor


@function
def fp8_gemm(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"]):
    A8 = op.cast(A, fp8_e4m3 @ accum(fp32))
    B8 = op.cast(B, fp8_e4m3 @ accum(fp32))
    return A8 @ B8


@function
def bf16_round_trip(X: tensor[f32, "N"]):
    return op.cast(op.cast(X, bf16), f32)


@function
def regularize(X: tensor[f32, "B", "D"]):
    return op.dropout(op.relu(X), p=0.25, seed=1234)
