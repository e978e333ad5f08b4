"""Tensor-core GEMMs for NVIDIA sm_80 … sm_90 (compile with --target ptx --arch sm_80, sm_86, sm_89 or sm_90):
mma.sync with a cp.async pipeline (backends/ptx/gemm_sm80.py). PTX for sm_80 runs on every later GPU.

    tessera-cc examples/gpu/gemm_ampere.py --target ptx --arch sm_80 -o gemm_ampere.tessera

K and N must be multiples of 8 (bf16, f16) or 4 (tf32): the kernel copies 16-byte chunks of A's and B's rows.
"""

from tessera import function, op, tensor, bf16, f16, f32, tf32


@function
def gemm_bf16(A: tensor[bf16, "M", "K"], B: tensor[bf16, "K", "N"]) -> tensor[bf16, "M", "N"]:
    return op.matmul(A, B)


@function
def gemm_f16_f32(A: tensor[f16, "M", "K"], B: tensor[f16, "K", "N"]) -> tensor[f32, "M", "N"]:
    return op.matmul(A, B, out_dtype=f32)


# tf32 operands are f32 words holding tf32 values (10-bit fractions): numpy f32 inputs are rounded to them.
@function
def gemm_tf32(A: tensor[tf32, "M", "K"], B: tensor[tf32, "K", "N"]) -> tensor[f32, "M", "N"]:
    return op.matmul(A, B, out_dtype=f32)


# A transformer MLP's first layer: bias and GELU applied to the fp32 accumulator.
@function
def linear_gelu(X: tensor[bf16, "T", "D"], W: tensor[bf16, "D", "F"], b: tensor[bf16, "F"]) -> tensor[bf16, "T", "F"]:
    return op.gelu(op.bias_add(op.matmul(X, W), b))


# Scaled product plus a residual: alpha · (A @ B) + R.
@function
def scaled_residual(A: tensor[bf16, "M", "K"], B: tensor[bf16, "K", "N"], R: tensor[bf16, "M", "N"]) -> tensor[bf16, "M", "N"]:
    return op.matmul(A, B) * 0.5 + R
