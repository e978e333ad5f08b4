"""The exporting module of the linked version fixture (README.md): `gated` is called from module_caller.py."""
from tessera import f32, function, op, tensor


@function(export=True)
def gated(X: tensor[f32, "M", "K"], W: tensor[f32, "K", "N"], b: tensor[f32, "N"]):
    return op.relu(op.bias_add(X @ W, b))
