"""A transformer MLP block as an operator program: matmul, bias, gelu, residual, layernorm."""

from tessera import bf16, f32, function, op, tensor


@function
def mlp_block(X: tensor[bf16, "T", 256], W1: tensor[bf16, 256, 1024], b1: tensor[bf16, 1024],
              W2: tensor[bf16, 1024, 256], b2: tensor[bf16, 256], gamma: tensor[bf16, 256]):
    H = op.gelu(op.bias_add(X @ W1, b1))
    Y = op.bias_add(H @ W2, b2) + X
    return op.layernorm(Y, gamma=gamma, eps=1e-5)


@function
def swiglu(X: tensor[f32, "T", "D"], Wg: tensor[f32, "D", "F"], Wu: tensor[f32, "D", "F"],
           Wd: tensor[f32, "F", "D"]):
    return (op.silu(X @ Wg) * (X @ Wu)) @ Wd
