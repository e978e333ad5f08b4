"""Flash attention's derivatives on NVIDIA Hopper (compile with --target ptx --arch sm_90a): the vjp of each
attention runs the forward kernel writing O and each query row's log-sum-exp, the row sums dO·O, and the
backward kernels (dK and dV in one that also adds dQ into an f32 accumulator, or dQ in a kernel of its own
under the "strict" numerics profile; dK or dV alone when only one is asked for), which never
hold the S×S probabilities in memory. [B, H, S, D], D 64 or 128, bf16 (causal_d64: f16).

    tessera-cc examples/gpu/attention_backward.py --target ptx --arch sm_90a -o attention_bwd.tessera
    python bench/attention_bwd_gpu.py      # on the GPU: against torch SDPA's backward
"""

from tessera import bf16, f16, function, op, tensor, vjp


@function
def attn_d128(Q: tensor[bf16, "B", "H", "S", 128], K: tensor[bf16, "B", "H", "T", 128],
              V: tensor[bf16, "B", "H", "T", 128]):
    return op.flash_attention(Q, K, V, scale=0.08838834764831845)


@function
def causal_d128(Q: tensor[bf16, "B", "H", "S", 128], K: tensor[bf16, "B", "H", "T", 128],
                V: tensor[bf16, "B", "H", "T", 128]):
    return op.flash_attention(Q, K, V, scale=0.08838834764831845, causal=True)


@function
def attn_d64(Q: tensor[bf16, "B", "H", "S", 64], K: tensor[bf16, "B", "H", "T", 64],
             V: tensor[bf16, "B", "H", "T", 64]):
    return op.flash_attention(Q, K, V, scale=0.125)


@function
def causal_d64(Q: tensor[f16, "B", "H", "S", 64], K: tensor[f16, "B", "H", "T", 64],
               V: tensor[f16, "B", "H", "T", 64]):
    return op.flash_attention(Q, K, V, scale=0.125, causal=True)


# (Q, K, V, dO) -> (O, dQ, dK, dV)
vjp_attn_d128 = vjp(attn_d128)
vjp_causal_d128 = vjp(causal_d128)
vjp_attn_d64 = vjp(attn_d64)
vjp_causal_d64 = vjp(causal_d64)
# one gradient alone: (Q, K, V, dO) -> (O, dV) and (O, dQ, dK)
vjp_v_d64 = vjp(attn_d64, argnums=2)
vjp_qk_causal_d128 = vjp(causal_d128, argnums=(0, 1))
