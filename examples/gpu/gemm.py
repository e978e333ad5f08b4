"""GEMMs for NVIDIA Hopper (compile with --target ptx --arch sm_90a): tensor cores, and FMA units for f32.

    tessera-cc examples/gpu/gemm.py --target ptx --arch sm_90a -o gemm.tessera
    python bench/gemm_gpu.py            # on the GPU: against cuBLAS (torch.matmul) and Triton
"""

from tessera import function, op, tensor, bf16, f16, f32, fp8_e4m3, fp8_e5m2


@function
def gemm_bf16(A: tensor[bf16, "M", "K"], B: tensor[bf16, "K", "N"]) -> tensor[bf16, "M", "N"]:
    return op.matmul(A, B)


@function
def gemm_f16_f32(A: tensor[f16, "M", "K"], B: tensor[f16, "K", "N"]) -> tensor[f32, "M", "N"]:
    return op.matmul(A, B, out_dtype=f32)


# The fused epilogue of a transformer MLP's first layer: bias and GELU applied to the fp32 accumulator.
@function
def linear_gelu(X: tensor[bf16, "T", "D"], W: tensor[bf16, "D", "F"], b: tensor[bf16, "F"]) -> tensor[bf16, "T", "F"]:
    return op.gelu(op.bias_add(op.matmul(X, W), b))


# Scaled product plus a residual: alpha · (A @ B) + R.
@function
def scaled_residual(A: tensor[bf16, "M", "K"], B: tensor[bf16, "K", "N"], R: tensor[bf16, "M", "N"]) -> tensor[bf16, "M", "N"]:
    return op.matmul(A, B) * 0.5 + R


# A transformer MLP block: two GEMMs, the first with its bias and GELU fused, the second with its bias.
@function
def mlp(X: tensor[bf16, "T", "D"], W1: tensor[bf16, "D", "F"], b1: tensor[bf16, "F"], W2: tensor[bf16, "F", "D"],
        b2: tensor[bf16, "D"]) -> tensor[bf16, "T", "D"]:
    return op.bias_add(op.matmul(op.gelu(op.bias_add(op.matmul(X, W1), b1)), W2), b2)


# Batched products (attention-style [B, M, K] @ [B, K, N]): one launch of the GEMM per batch entry.
@function
def batched(A: tensor[bf16, "B", "M", "K"], B: tensor[bf16, "B", "K", "N"]) -> tensor[bf16, "B", "M", "N"]:
    return A @ B


# fp8 operands on fp8 tensor cores (wgmma e4m3/e5m2, k32): the parameters stay one byte wide; B [K, N] is copied
# to [N, K] first (wgmma reads 8-bit operands K-major), A is read in place.
@function
def gemm_fp8(A: tensor[fp8_e4m3, "M", "K"], B: tensor[fp8_e4m3, "K", "N"]) -> tensor[bf16, "M", "N"]:
    return op.matmul(A, B, out_dtype=bf16)


# The kinds mix, as in a training step's backward products (e4m3 activations, e5m2 gradients).
@function
def gemm_e4m3_e5m2(A: tensor[fp8_e4m3, "M", "K"], B: tensor[fp8_e5m2, "K", "N"]) -> tensor[f32, "M", "N"]:
    return op.matmul(A, B)


# The scaled fp8 GEMM of a quantized linear layer: one-byte e4m3 tensors, the weight stored transposed [N, K], a
# scale per tensor each. One wgmma kernel reads both in place and applies sa·sb and the cast to bf16 in its
# epilogue (as torch._scaled_mm(A, Bt.t(), scale_a, scale_b, out_dtype=bf16) does).
@function
def gemm_fp8_scaled(A: tensor[fp8_e4m3, "M", "K"], Bt: tensor[fp8_e4m3, "N", "K"], sa: tensor[f32],
                    sb: tensor[f32]) -> tensor[bf16, "M", "N"]:
    return op.cast(op.dequantize(A, sa) @ op.transpose(op.dequantize(Bt, sb)), bf16)


# f32 data: on FMA units by default (gemm_fma.py: f32 products, one rounding a k); input_precision="tf32" (or
# tessera-cc --input-precision tf32 for every function) multiplies on tf32 tensor cores, which read each operand's
# top 19 bits (truncated to a 10-bit fraction; docs/nvidia.md)
@function
def gemm_f32(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"]) -> tensor[f32, "M", "N"]:
    return op.matmul(A, B)


@function(input_precision="tf32")
def gemm_f32_tf32(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"]) -> tensor[f32, "M", "N"]:
    return op.matmul(A, B)
