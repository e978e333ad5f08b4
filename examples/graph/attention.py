"""Attention written two ways: the fused op, and step by step (softmax of scaled scores)."""

from tessera import f16, f32, function, op, tensor


@function
def fused(Q: tensor[f16, "B", "H", "S", 64], K: tensor[f16, "B", "H", "S", 64], V: tensor[f16, "B", "H", "S", 64]):
    return op.flash_attention(Q, K, V, causal=True)


@function
def unfused(Q: tensor[f32, "S", 64], K: tensor[f32, "S", 64], V: tensor[f32, "S", 64]):
    P = op.softmax(Q @ op.transpose(K) * 0.125, axis=-1)
    return P @ V
