# The module tests/lit/frontend/imports.py imports (lit does not run the files of Inputs/).
from tessera import f32, function, op, tensor


@function(export=True)
def scaled(X: tensor[f32, "M", "N"], s: tensor[f32, "N"]):
    return op.relu(X * s)
