"""The source of the @function fixture (tests/data/README.md): a small MLP block in f32 with one symbolic
extent, and a function of a reduction, so the fixture's plan holds argument and view steps."""

from tessera import f32, function, op, tensor


@function
def mlp(X: tensor[f32, "T", 32], W1: tensor[f32, 32, 64], b1: tensor[f32, 64], W2: tensor[f32, 64, 32]):
    H = op.relu(op.bias_add(X @ W1, b1))
    return H @ W2 + X


@function
def scale_rows(X: tensor[f32, "T", "D"], g: tensor[f32, "D"]):
    return op.layernorm(X, gamma=g, eps=1e-5)
