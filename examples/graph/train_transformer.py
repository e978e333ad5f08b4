"""Training a pre-norm transformer block (examples/graph/transformer_block.py's, one head, causal
op.flash_attention): forward, a mean-squared-error loss against a target, backward (tessera.value_and_grad) and
an SGD update, as one @function that compiles to one image.

    python examples/graph/train_transformer.py [steps]   # the interpreter and the compiled CPU image, side by side

The weights are f32 master copies; each GEMM multiplies them cast to bf16 with f32 results (the ptx target's
tensor cores take bf16, not f32), and the backward GEMMs multiply bf16 too (docs/language.md, "Derivatives").
Norms, softmax statistics and residuals are f32. Attention's gradient is flash_attention's rule (its LSE
saved, no S×S matrix kept): the fused backward kernel where the target has one (the CPU, sm_90a), the GEMM
decomposition elsewhere.
"""

from tessera import bf16, f32, function, op, tensor, value_and_grad


@function
def block(X: tensor[f32, "S", 64], ln1: tensor[f32, 64], Wq: tensor[f32, 64, 64],
          Wk: tensor[f32, 64, 64], Wv: tensor[f32, 64, 64], Wo: tensor[f32, 64, 64], ln2: tensor[f32, 64],
          W1: tensor[f32, 64, 256], b1: tensor[f32, 256], W2: tensor[f32, 256, 64], b2: tensor[f32, 64]):
    H = op.cast(op.layernorm(X, gamma=ln1, eps=1e-5), bf16)
    Q = op.matmul(H, op.cast(Wq, bf16))
    K = op.matmul(H, op.cast(Wk, bf16))
    V = op.matmul(H, op.cast(Wv, bf16))
    A = op.flash_attention(Q, K, V, causal=True)
    X1 = X + op.matmul(A, op.cast(Wo, bf16), out_dtype=f32)
    N = op.cast(op.layernorm(X1, gamma=ln2, eps=1e-5), bf16)
    M = op.gelu(op.bias_add(op.matmul(N, op.cast(W1, bf16), out_dtype=f32), b1))
    return X1 + op.bias_add(op.matmul(op.cast(M, bf16), op.cast(W2, bf16), out_dtype=f32), b2)


@function
def loss(X: tensor[f32, "S", 64], Y: tensor[f32, "S", 64], ln1: tensor[f32, 64], Wq: tensor[f32, 64, 64], Wk: tensor[f32, 64, 64], Wv: tensor[f32, 64, 64], Wo: tensor[f32, 64, 64],
         ln2: tensor[f32, 64], W1: tensor[f32, 64, 256], b1: tensor[f32, 256], W2: tensor[f32, 256, 64],
         b2: tensor[f32, 64]):
    E = block(X, ln1, Wq, Wk, Wv, Wo, ln2, W1, b1, W2, b2) - Y
    return op.mean(E * E)


# (X, Y, the 10 weights) -> (loss, the 10 gradients)
loss_and_grads = value_and_grad(loss, argnums=(2, 3, 4, 5, 6, 7, 8, 9, 10, 11))


@function
def sgd_step(X: tensor[f32, "S", 64], Y: tensor[f32, "S", 64], ln1: tensor[f32, 64], Wq: tensor[f32, 64, 64], Wk: tensor[f32, 64, 64], Wv: tensor[f32, 64, 64],
             Wo: tensor[f32, 64, 64], ln2: tensor[f32, 64], W1: tensor[f32, 64, 256], b1: tensor[f32, 256],
             W2: tensor[f32, 256, 64], b2: tensor[f32, 64], lr: f32):
    value, g1, gq, gk, gv, go, g2, gW1, gb1, gW2, gb2 = loss_and_grads(X, Y, ln1, Wq, Wk, Wv, Wo, ln2, W1, b1,
                                                                       W2, b2)
    return (value, ln1 - lr * g1, Wq - lr * gq, Wk - lr * gk, Wv - lr * gv, Wo - lr * go, ln2 - lr * g2,
            W1 - lr * gW1, b1 - lr * gb1, W2 - lr * gW2, b2 - lr * gb2)


def problem(seq=32, seed=0):
    """A task (Y: X with each row replaced by a causal running mean of X's rows, which the block must learn to
    compute through attention) and a start: (X, Y, the 10 weights in sgd_step's order)."""
    import numpy as np  # lazy: only the script needs numpy; the compiler reads this file's @functions
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((seq, 64)).astype(np.float32)
    Y = (np.cumsum(X, axis=0) / np.arange(1, seq + 1)[:, None]).astype(np.float32)

    def w(rows, cols):
        return (rng.standard_normal((rows, cols)) / np.sqrt(rows)).astype(np.float32)

    ones, zeros = np.ones(64, np.float32), np.zeros
    params = [ones, w(64, 64), w(64, 64), w(64, 64), w(64, 64), ones.copy(), w(64, 256), zeros(256, np.float32),
              w(256, 64), zeros(64, np.float32)]
    return X, Y, params


def train(step, X, Y, params, steps, lr=0.05):
    """`steps` SGD steps of `step` (the interpreter's sgd_step or an image's) from `params`: the loss before
    each step, and the final weights."""
    import numpy as np  # lazy: see problem
    losses = []
    for _ in range(steps):
        out = step(X, Y, *params, np.float32(lr))
        losses.append(float(np.asarray(out[0])))
        params = [np.asarray(p) for p in out[1:]]
    return losses, params


def main(steps: int = 20) -> None:
    import pathlib  # lazy: see problem

    from tessera import compiler, executor, tessera_frontend_compile  # lazy: see problem

    source = pathlib.Path(__file__).read_text()
    interpreted = tessera_frontend_compile(source, {"filename": __file__})
    image = executor.load(compiler.compile_source(source, __file__).image)
    X, Y, params = problem()
    li, _ = train(lambda *a: interpreted.interpret("sgd_step", *a), X, Y, params, steps)
    lc, _ = train(image.function("sgd_step"), X, Y, params, steps)
    print("step  interpreter  CPU image")
    for i, (a, b) in enumerate(zip(li, lc)):
        print(f"{i:4d}  {a:11.6f}  {b:9.6f}")


if __name__ == "__main__":
    import sys
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
