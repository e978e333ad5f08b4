"""A small convolutional block in PyTorch's layouts (x [N, C, H, W], w [O, C, KH, KW]): a 'same' conv with
its bias and relu, then a strided one downsampling by 2; and a dilated 1-D conv over sequences [N, C, L].
Each conv compiles to an im2col gather and the target's GEMM, the bias and activation in its epilogue."""

from tessera import bf16, f32, function, op, tensor


@function
def conv_block(X: tensor[bf16, "N", 16, 16, 16], W1: tensor[bf16, 32, 16, 3, 3], b1: tensor[bf16, 32],
               W2: tensor[bf16, 32, 32, 3, 3], b2: tensor[bf16, 32]):
    H = op.relu(op.bias_add(op.conv2d(X, W1, padding="same"), b1, axis=1))
    return op.relu(op.bias_add(op.conv2d(H, W2, stride=2, padding=1), b2, axis=1))


@function
def dilated_sequence(X: tensor[f32, "N", 8, 32], W: tensor[f32, 16, 8, 3]):
    return op.gelu(op.conv1d(X, W, padding="same", dilation=2))
