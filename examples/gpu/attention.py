"""Flash attention forward on NVIDIA Hopper (compile with --target ptx --arch sm_90a): [B, H, S, D] bf16,
head dimension 64 or 128, causal (top-left aligned, as torch's is_causal) or not; and at D = 128 on fp8
(op.flash_attention_fp8: Q, K, V quantized to e4m3 per tensor from their amax, P rounded to e4m3).

    tessera-cc examples/gpu/attention.py --target ptx --arch sm_90a -o attention.tessera
    python bench/attention_gpu.py        # on the GPU: against torch.nn.functional.scaled_dot_product_attention
    python bench/attention_gpu.py --fp8 --image attention.tessera   # fp8 against our bf16 and SDPA's
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


@function
def fp8_d128(Q: tensor[bf16, "B", "H", "S", 128], K: tensor[bf16, "B", "H", "T", 128],
             V: tensor[bf16, "B", "H", "T", 128]) -> tensor[bf16, "B", "H", "S", 128]:
    return op.flash_attention_fp8(Q, K, V, scale="amax_dynamic")


@function
def causal_fp8_d128(Q: tensor[bf16, "B", "H", "S", 128], K: tensor[bf16, "B", "H", "T", 128],
                    V: tensor[bf16, "B", "H", "T", 128]) -> tensor[bf16, "B", "H", "S", 128]:
    return op.flash_attention_fp8(Q, K, V, scale="amax_dynamic", causal=True)
