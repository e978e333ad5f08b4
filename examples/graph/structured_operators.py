"""Structured operators that compile (spec Part IX, chapter 30's Kronecker structure and spectral denoising):
each applies an operator without forming its matrix. `tessera-compile` builds them for every target
(docs/operators.md, "What compiles"); calling them runs the reference interpreter."""

from tessera import f32, function, op, tensor


@function
def separable_blur(R: tensor[f32, 32, 32], C: tensor[f32, 48, 48], image: tensor[f32, 1536]):
    """A separable 2-D filter on a 32×48 image flattened row-major: (R ⊗ C) vec(X) = vec(R X Cᵀ), two GEMMs
    of the image instead of one of a 1536×1536 matrix; its adjoint sends the result back."""
    K = op.kronecker(op.dense(R), op.dense(C))
    blurred = K @ image
    return blurred, op.adjoint(K) @ blurred


@function
def denoise(U: tensor[f32, 256, 8], s: tensor[f32, 8], V: tensor[f32, 128, 8], x: tensor[f32, 128, 16],
            shrink: f32):
    """Spectral denoising with a measurement operator's leading singular triplets (U, s, V, computed once, e.g.
    by op.spectral in the interpreter): the rank-8 operator U diag(s) Vᵀ applied to 16 signals is a chain of
    thin GEMMs, and the soft-thresholded spectrum diag(s − shrink) an elementwise scaling between them."""
    A = op.dense(U) @ op.diag(s) @ op.adjoint(op.dense(V))
    shrunk = op.dense(U) @ op.diag(op.relu(s - shrink)) @ op.adjoint(op.dense(V))
    return A @ x, shrunk @ x
