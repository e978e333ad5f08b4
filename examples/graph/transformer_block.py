"""A pre-norm transformer block as one operator program: layernorm, causal attention, residual, layernorm, MLP
(gelu), residual.

The residual stream, the norms, the softmax statistics and the MLP's activations are f32; the GEMMs multiply
bf16 operands with f32 results, because the targets' matrix kernels take no f32 operands that both of them
accept (the CPU's take f32 but not tf32, the ptx target's bf16, f16 or tf32). On the ptx target
op.flash_attention needs `--arch sm_90a` (Hopper's tensor-core kernel).
"""

from tessera import bf16, f32, function, op, tensor


@function
def transformer_block(X: tensor[f32, "S", 64], ln1: tensor[f32, 64], Wq: tensor[bf16, 64, 64],
                      Wk: tensor[bf16, 64, 64], Wv: tensor[bf16, 64, 64], Wo: tensor[bf16, 64, 64],
                      ln2: tensor[f32, 64], W1: tensor[bf16, 64, 256], b1: tensor[f32, 256],
                      W2: tensor[bf16, 256, 64], b2: tensor[f32, 64]):
    H = op.cast(op.layernorm(X, gamma=ln1, eps=1e-5), bf16)
    A = op.flash_attention(H @ Wq, H @ Wk, H @ Wv, causal=True)
    X1 = X + op.matmul(A, Wo, out_dtype=f32)
    N = op.cast(op.layernorm(X1, gamma=ln2, eps=1e-5), bf16)
    M = op.gelu(op.bias_add(op.matmul(N, W1, out_dtype=f32), b1))
    return X1 + op.bias_add(op.matmul(op.cast(M, bf16), W2, out_dtype=f32), b2)
