"""Training an MLP: forward, mean-squared-error loss, backward (tessera.value_and_grad) and an SGD or Adam
update, each training step one @function that compiles to one image.

    python examples/graph/train_mlp.py [steps]    # the same steps in the interpreter and the compiled CPU image

The extents are symbolic (T tokens, D model width, F hidden width): one image trains any size. Everything is
f32 on the CPU. Adam's moments are parameters and results of its step, like the weights (the caller threads
them from one step to the next); its bias correction reads the step number t (1, 2, …), a 0-d f32.
bench/train_step_cpu.py times `sgd_step` against jax.jit(jax.grad(…)) of the same formulas.
"""

from tessera import f32, function, op, tensor, value_and_grad


@function
def loss(X: tensor[f32, "T", "D"], Y: tensor[f32, "T", "D"], W1: tensor[f32, "D", "F"], b1: tensor[f32, "F"],
         W2: tensor[f32, "F", "D"], b2: tensor[f32, "D"]):
    H = op.gelu(op.bias_add(X @ W1, b1))
    E = op.bias_add(H @ W2, b2) - Y
    return op.mean(E * E)


# (X, Y, W1, b1, W2, b2) -> (loss, dW1, db1, dW2, db2)
loss_and_grads = value_and_grad(loss, argnums=(2, 3, 4, 5))


@function
def sgd_step(X: tensor[f32, "T", "D"], Y: tensor[f32, "T", "D"], W1: tensor[f32, "D", "F"], b1: tensor[f32, "F"],
             W2: tensor[f32, "F", "D"], b2: tensor[f32, "D"], lr: f32):
    value, gW1, gb1, gW2, gb2 = loss_and_grads(X, Y, W1, b1, W2, b2)
    return value, W1 - lr * gW1, b1 - lr * gb1, W2 - lr * gW2, b2 - lr * gb2


# Adam (β1 0.9, β2 0.999, ε 1e-8) of one weight: the weight and its two moments, updated. One function per
# rank, as a parameter's rank is part of its type.
@function
def adam_matrix(W: tensor[f32, "R", "C"], g: tensor[f32, "R", "C"], m: tensor[f32, "R", "C"],
                v: tensor[f32, "R", "C"], lr_t: f32):
    m1 = 0.9 * m + 0.1 * g
    v1 = 0.999 * v + 0.001 * (g * g)
    return W - lr_t * m1 / (op.sqrt(v1) + 1e-8), m1, v1


@function
def adam_vector(W: tensor[f32, "C"], g: tensor[f32, "C"], m: tensor[f32, "C"], v: tensor[f32, "C"], lr_t: f32):
    m1 = 0.9 * m + 0.1 * g
    v1 = 0.999 * v + 0.001 * (g * g)
    return W - lr_t * m1 / (op.sqrt(v1) + 1e-8), m1, v1


@function
def adam_step(X: tensor[f32, "T", "D"], Y: tensor[f32, "T", "D"],
              W1: tensor[f32, "D", "F"], b1: tensor[f32, "F"], W2: tensor[f32, "F", "D"], b2: tensor[f32, "D"],
              mW1: tensor[f32, "D", "F"], mb1: tensor[f32, "F"], mW2: tensor[f32, "F", "D"], mb2: tensor[f32, "D"],
              vW1: tensor[f32, "D", "F"], vb1: tensor[f32, "F"], vW2: tensor[f32, "F", "D"], vb2: tensor[f32, "D"],
              t: f32, lr: f32):
    value, gW1, gb1, gW2, gb2 = loss_and_grads(X, Y, W1, b1, W2, b2)
    # the bias corrections of both moments folded into the step size
    lr_t = lr * op.sqrt(1.0 - op.pow(0.999, t)) / (1.0 - op.pow(0.9, t))
    W1n, mW1n, vW1n = adam_matrix(W1, gW1, mW1, vW1, lr_t)
    b1n, mb1n, vb1n = adam_vector(b1, gb1, mb1, vb1, lr_t)
    W2n, mW2n, vW2n = adam_matrix(W2, gW2, mW2, vW2, lr_t)
    b2n, mb2n, vb2n = adam_vector(b2, gb2, mb2, vb2, lr_t)
    return value, W1n, b1n, W2n, b2n, mW1n, mb1n, mW2n, mb2n, vW1n, vb1n, vW2n, vb2n


def problem(tokens=64, d=32, ff=128, seed=0):
    """A regression task (Y a fixed nonlinear function of X) and a starting point: (X, Y, [W1, b1, W2, b2])."""
    import numpy as np  # lazy: only the script needs numpy; the compiler reads this file's @functions
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((tokens, d)).astype(np.float32)
    Y = np.tanh(X * np.roll(X, 1, axis=1)).astype(np.float32)
    W1 = rng.standard_normal((d, ff)) / np.sqrt(d)
    W2 = rng.standard_normal((ff, d)) / np.sqrt(ff)
    params = [w.astype(np.float32) for w in (W1, np.zeros(ff), W2, np.zeros(d))]
    return X, Y, params


def train(step, X, Y, params, steps, optimizer="sgd", lr=0.1):
    """`steps` steps of `step` (sgd_step or adam_step: the interpreter's or an image's) from `params`: the loss
    before each step, and the final weights."""
    import numpy as np  # lazy: see problem
    lr = np.float32(lr)
    state = list(params) + ([np.zeros_like(p) for p in params] * 2 if optimizer == "adam" else [])
    losses = []
    for t in range(1, steps + 1):
        extra = (np.float32(t), lr) if optimizer == "adam" else (lr,)
        out = step(X, Y, *state, *extra)
        losses.append(float(np.asarray(out[0])))
        state = [np.asarray(s) for s in out[1:]]
    return losses, state[:len(params)]


def main(steps: int = 20) -> None:
    import pathlib  # lazy: see problem

    from tessera import compiler, executor, tessera_frontend_compile  # lazy: see problem

    source = pathlib.Path(__file__).read_text()
    interpreted = tessera_frontend_compile(source, {"filename": __file__})
    image = executor.load(compiler.compile_source(source, __file__).image)
    X, Y, params = problem()
    # SGD's step is large because the loss is a mean over T·D elements, which makes each gradient small
    for optimizer, name, lr in (("sgd", "sgd_step", 1.0), ("adam", "adam_step", 0.01)):
        li, _ = train(lambda *a: interpreted.interpret(name, *a), X, Y, params, steps, optimizer, lr)
        lc, _ = train(image.function(name), X, Y, params, steps, optimizer, lr)
        print(f"{optimizer}: step  interpreter  CPU image")
        for i, (a, b) in enumerate(zip(li, lc)):
            print(f"{optimizer}: {i:4d}  {a:11.6f}  {b:9.6f}")


if __name__ == "__main__":
    import sys
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
