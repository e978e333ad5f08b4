"""Mixture of recursions (spec Part IX, chapter 30's "MoR recursion"): one shared block applied recursively
to every token, a router choosing per token how deep it goes, and the block's weight crossing the ABI as an
operator descriptor (TessOperatorDesc, docs/operators.md "Operators across the ABI").

The block W is a recursion operator: its descriptor declares the ABI spec's §5.3 contract, the stack frame
of one recursion level (one token's state: 64 f32 entries, 256 bytes) and the most levels it recurses (3).
The recursion is bounded and unrolled: level k computes h_k = h_{k-1} + relu(W h_{k-1} + b) for all tokens
at once (the columns of X), and applying W more often than the declared depth is refused at the user's line.

The router gives each token t a probability g_t = sigmoid(r · x_t) of recursing once more; a token exits
after level k with weight g_t^(k-1)·(1 − g_t), and the last level keeps what is left, g_t^(DEPTH-1): the
output is the mixture Σ_k weight_k · h_k, each token's expected depth 1 + g_t + g_t². Calling `mor` runs the
reference interpreter; `tessera-compile` builds it for every target, the descriptor recorded in the image
(`tessera-objdump` shows it) and passed by a C host with tsrFunctionBindOperator."""

from tessera import f32, function, op, tensor

D, DEPTH = 64, 3


@function
def mor(W: tensor[f32, 64, 64], b: tensor[f32, 64, 1], r: tensor[f32, 1, 64], X: tensor[f32, 64, "T"]):
    block = op.descriptor("dense", W, flags=("recursion",), frame_bytes=256, depth=3, name="block")
    g = op.sigmoid(r @ X)                 # [1, T]: each token's probability of recursing once more
    h = X
    out = 0.0 * X
    stay = 1.0 + 0.0 * g                  # the weight still in the recursion: g^(k-1)
    for k in range(2):
        h = h + op.relu(block @ h + b)    # recursion level k + 1, the shared block on every token
        out = out + stay * (1.0 - g) * h  # the tokens that exit here
        stay = stay * g
    h = h + op.relu(block @ h + b)        # the last level keeps every token still recursing
    return out + stay * h
