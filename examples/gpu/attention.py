"""Flash attention forward on NVIDIA Hopper (compile with --target ptx --arch sm_90a): [B, H, S, D] bf16,
head dimension 64 or 128, causal (top-left aligned, as torch's is_causal) or not.

    tessera-cc examples/gpu/attention.py --target ptx --arch sm_90a -o attention.tessera
    python bench/attention_gpu.py        # on the GPU: against torch.nn.functional.scaled_dot_product_attention
"""

from tessera import function, op, tensor, bf16


@function
def attention_d128(Q: tensor[bf16, "B", "H", "S", 128], K: tensor[bf16, "B", "H", "T", 128],
                   V: tensor[bf16, "B", "H", "T", 128]) -> tensor[bf16, "B", "H", "S", 128]:
    return op.flash_attention(Q, K, V, scale=0.08838834764831845)


@function
def causal_d128(Q: tensor[bf16, "B", "H", "S", 128], K: tensor[bf16, "B", "H", "T", 128],
                V: tensor[bf16, "B", "H", "T", 128]) -> tensor[bf16, "B", "H", "S", 128]:
    return op.flash_attention(Q, K, V, causal=True, scale=0.08838834764831845)


@function
def attention_d64(Q: tensor[bf16, "B", "H", "S", 64], K: tensor[bf16, "B", "H", "T", 64],
                  V: tensor[bf16, "B", "H", "T", 64]) -> tensor[bf16, "B", "H", "S", 64]:
    return op.flash_attention(Q, K, V, scale=0.125)


@function
def causal_d64(Q: tensor[bf16, "B", "H", "S", 64], K: tensor[bf16, "B", "H", "T", 64],
               V: tensor[bf16, "B", "H", "T", 64]) -> tensor[bf16, "B", "H", "S", 64]:
    return op.flash_attention(Q, K, V, causal=True, scale=0.125)
