"""Reductions, layout changes and normalizations."""

from tessera import f32, function, op, tensor


@function
def stats(X: tensor[f32, "N", 8, 16]):
    total = op.sum(X)
    row_max = op.max(X, axis=-1)
    mean = op.mean(X, axis=(1, 2), keepdims=True)
    flat = op.reshape(op.transpose(X, perm=(0, 2, 1)), (-1, 8))
    return total, row_max, X - mean, op.rmsnorm(flat, eps=1e-6)


@function
def broadcast_scale(x: tensor[f32, 16], s: f32):
    return op.broadcast_to(x, (4, 16)) * s + 1.0
