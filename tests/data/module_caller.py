"""The importing module of the linked version fixture (README.md): `head` calls module_callee.py's `gated`
through a plan call step, which tessera-link resolves."""
from tessera import f32, function, op, tensor
from module_callee import gated


@function(export=True)
def head(X: tensor[f32, "T", 16], W1: tensor[f32, 16, 24], b1: tensor[f32, 24], W2: tensor[f32, 24, 4]):
    return op.softmax(gated(X, W1, b1) @ W2)
