"""Derivatives of @functions (frontend/derivatives.py declares them, passes/autodiff.py writes their bodies).

Per op, in f64 through the interpreter: the reverse-mode derivative (vjp) against central finite
differences, and forward mode (jvp) against reverse mode by duality <v, J u> = <J^T v, u>. Then the compiled
CPU image against the interpreter in f32, the refusals at the user's line, and an MLP trained by one
@function step whose loss falls the same way in both.
"""

import zlib

import numpy as np
import pytest

import tessera
from tessera import compiler, executor, tessera_frontend_compile
from tessera.diagnostics import CompileError
from tessera.dialects import make_context
from tessera.mlir import ir

from derivative_checks import check_vjp_jvp, derivative_source

# name -> the body of `def name(X, Y, P, Q, W, r):` (X, Y: any values [3, 4]; P, Q: positive [3, 4]; W [4, 5];
# r [4]). Values stay away from the kinks of relu, abs, max and min (see _inputs).
CASES = {
    "add": "X + Y", "sub": "X - Y", "mul": "X * Y", "div": "X / P", "neg": "-X", "pow": "P ** Y",
    "exp": "op.exp(X)", "log": "op.log(P)", "tanh": "op.tanh(X)", "relu": "op.relu(X)", "gelu": "op.gelu(X)",
    "gelu_tanh": "op.gelu(X, approximate='tanh')", "silu": "op.silu(X)", "sigmoid": "op.sigmoid(X)",
    "sqrt": "op.sqrt(P)", "rsqrt": "op.rsqrt(P)", "abs": "op.abs(X)", "erf": "op.erf(X)",
    "square": "op.square(X)", "reciprocal": "op.reciprocal(P)", "maximum": "op.maximum(X, Y)",
    "minimum": "op.minimum(X, Y)", "broadcast_mul": "X * r", "bias_add": "op.bias_add(X, r)",
    "bias_add_rows": "op.bias_add(op.transpose(X), r, axis=0)", "matmul": "op.matmul(X, W)",
    "batch_matmul": "op.matmul(op.reshape(X, (3, 4, 1)), op.reshape(r, (1, 4)))", "transpose": "X.T",
    "reshape": "op.reshape(X, (2, 6))", "broadcast_to": "op.broadcast_to(r, (3, 4)) * X",
    "sum": "op.sum(X, 1)", "sum_all": "op.sum(X * Y)", "sum_keepdims": "op.sum(X, axis=0, keepdims=True) * Y",
    "mean": "op.mean(X, 0)", "mean_keepdims": "op.mean(X, axis=1, keepdims=True) * Y",
    "softmax": "op.softmax(X)", "softmax_axis0": "op.softmax(X, 0)",
    "log_softmax": "op.log_softmax(X)", "log_softmax_axis0": "op.log_softmax(X * Y, 0)",
    "prod": "op.prod(X, 1)", "prod_all": "op.prod(X * P)",
    "prod_keepdims_axis0": "op.prod(X, axis=0, keepdims=True) * Y",
    "layernorm": "op.layernorm(X, gamma=r, beta=r * r)", "layernorm_plain": "op.layernorm(X)",
    "rmsnorm": "op.rmsnorm(X, gamma=r)", "max": "op.max(X, 1)", "min_axis0": "op.min(X, 0)",
    "max_all": "op.max(X * Y)", "max_keepdims": "op.max(X, axis=1, keepdims=True) * Y",
    "min_keepdims_axis0": "op.min(X, axis=0, keepdims=True) * Y",
    "dropout": "op.tanh(op.dropout(X * Y, 0.3, 7, offset=5))",
    "cast": "op.cast(op.square(op.cast(X, f32)), f64) * Y", "mlp": "op.matmul(op.tanh(op.bias_add(X, r)), W)",
}
PARAMS = ('X: tensor[f64, 3, 4], Y: tensor[f64, 3, 4], P: tensor[f64, 3, 4], Q: tensor[f64, 3, 4], '
          'W: tensor[f64, 4, 5], r: tensor[f64, 4]')


@pytest.fixture(scope="module")
def ops_module():
    src = derivative_source("from tessera import f32, f64, function, jvp, op, tensor, vjp",
                            ((name, PARAMS, body) for name, body in CASES.items()))
    return tessera_frontend_compile(src, {"filename": "ops.py"})


def _inputs(rng):
    X = rng.standard_normal((3, 4))
    X += np.sign(X) * 0.05              # no element near 0, relu's and abs's kink
    Y = X + rng.choice([-1, 1], (3, 4)) * rng.uniform(0.1, 1, (3, 4))   # no tie for max and min
    P, Q = rng.uniform(0.5, 2.0, (2, 3, 4))
    return [X, Y, P, Q, rng.standard_normal((4, 5)), rng.standard_normal(4)]


# Cases that round through f32 on the way: (h, rtol of the finite difference, rtol of the duality). A step of
# 1e-3 keeps f32's rounding of the difference (6e-8 / 1e-3) and the O(h²) truncation near 1e-5; jvp and vjp
# each round their own product to f32 once, ~1e-7 apart.
F32_ROUNDED = {"cast": (1e-3, 1e-3, 1e-6)}


@pytest.mark.parametrize("name", CASES)
def test_vjp_matches_finite_differences_and_jvp(ops_module, name):
    """f64 through the interpreter. The central difference of <v, f(x + h u)> has error O(h²) ≈ 1e-10 relative
    to the derivative's size here, far below rtol 1e-6; jvp and vjp are exact transposes, to rtol 1e-10."""
    h, fd_rtol, dual_rtol = F32_ROUNDED.get(name, (1e-5, 1e-6, 1e-10))
    # hash() of a str is salted per process: crc32 keeps each case's inputs the same from run to run
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    check_vjp_jvp(ops_module, name, _inputs(rng), rng, h, fd_rtol, dual_rtol, fd_atol=1e-8)


def test_max_and_min_split_ties_equally(ops_module):
    """The subgradient convention of the max and min reductions (docs/language.md): k tied extremes get 1/k of
    the cotangent each, and the tangent is the mean of theirs, so jvp and vjp stay transposes at a tie."""
    X = np.array([[1.0, 3.0, 3.0, -2.0], [0.5, 0.5, 0.5, 0.5], [-1.0, 4.0, 2.0, 0.0]])
    rest = [np.zeros((3, 4)), np.ones((3, 4)), np.ones((3, 4)), np.zeros((4, 5)), np.zeros(4)]
    v = np.array([6.0, 8.0, 10.0])
    ct_x = ops_module.interpret("vjp_max", X, *rest, v)[1]
    np.testing.assert_array_equal(ct_x, [[0, 3, 3, 0], [2, 2, 2, 2], [0, 10, 0, 0]])
    U = np.arange(12.0).reshape(3, 4)
    tangent = ops_module.interpret("jvp_max", X, *rest, U, *[np.zeros_like(r) for r in rest])[1]
    np.testing.assert_array_equal(tangent, [1.5, 5.5, 9.0])
    Z = np.array([[1.0, 2.0, 0.0, 5.0], [1.0, 3.0, 0.0, 4.0], [2.0, 2.0, 0.0, 4.0]])
    ct_z = ops_module.interpret("vjp_min_axis0", Z, *rest, np.ones(4))[1]
    np.testing.assert_allclose(ct_z, [[0.5, 0.5, 1 / 3, 0], [0.5, 0, 1 / 3, 0.5], [0, 0.5, 1 / 3, 0.5]], rtol=1e-15)


LOSSES = '''
from tessera import f32, f64, function, grad, op, tensor, value_and_grad

@function
def loss(X: tensor[f32, 8, 4], P: tensor[f32, 8, 4], g: tensor[f32, 4], b: tensor[f32, 4], V: tensor[f32, 8, 4],
         W: tensor[f32, 4, 4]):
    A = op.softmax(X) + op.layernorm(X, gamma=g, beta=b) + op.rmsnorm(X, gamma=g) + op.gelu(X @ W) + op.silu(X)
    B = op.log(P) / P + op.exp(X) * op.sqrt(P) + op.sigmoid(op.reshape(op.reshape(X, (4, 8)).T, (4, 8)).T)
    C = op.sum(X, axis=1, keepdims=True) * op.rsqrt(P) + op.gelu(X, approximate="tanh") - op.relu(-X)
    # the mask replayed by dropout's backward must be the CPU's own Philox stream, the interpreter's too
    D = op.dropout(X, 0.25, 11) * op.max(X, axis=1, keepdims=True) + op.cast(op.cast(X, f64) * 2.0, f32)
    return op.mean(op.tanh(A + B + C + D) * V)

dloss = grad(loss, argnums=(0, 1, 2, 3, 5))
both = value_and_grad(loss, argnums=2)
'''


def test_compiled_gradients_match_the_interpreter():
    """The derivatives go through the whole pipeline to the CPU image. f32 both sides; the interpreter rounds
    each op once from f64 and the CPU rounds its own way (fused, vectorized exp/erf): atol 1e-5 on gradients of
    size ~1e-1, rtol 1e-4."""
    m = tessera_frontend_compile(LOSSES, {"filename": "losses.py"})
    prog = executor.load(compiler.compile_source(LOSSES, "losses.py").image)
    rng = np.random.default_rng(3)
    X, V = rng.standard_normal((2, 8, 4)).astype(np.float32)
    P = rng.uniform(0.5, 2.0, (8, 4)).astype(np.float32)
    g, b = rng.standard_normal((2, 4)).astype(np.float32)
    W = rng.standard_normal((4, 4)).astype(np.float32)
    for name in ("dloss", "both"):
        want = m.interpret(name, X, P, g, b, V, W)
        got = prog.function(name)(X, P, g, b, V, W)
        assert len(got) == len(want)
        for w, c in zip(want, got):
            assert w.shape == c.shape and w.dtype == c.dtype == np.float32
            np.testing.assert_allclose(c, w, rtol=1e-4, atol=1e-5)
    # value_and_grad's value is the loss itself, to the f32 rounding of a mean that cancels to ~3e-3 (the
    # derivative's copy of the forward is evaluated as its own function, its f64 round trip included)
    np.testing.assert_allclose(m.interpret("both", X, P, g, b, V, W)[0], m.interpret("loss", X, P, g, b, V, W),
                               rtol=1e-7, atol=1e-8)


UNREAD = '''
from tessera import f32, function, grad, op, tensor

@function
def total(X: tensor[f32, "M", "K"], W: tensor[f32, "K", "N"]):
    return op.sum(X @ W)

@function
def squashed(X: tensor[f32, "M", "K"], W: tensor[f32, "K", "N"]):
    return op.sum(op.tanh(X @ W))

d_total = grad(total, argnums=1)
d_squashed = grad(squashed, argnums=1)
'''


def test_broadcast_cotangents_leave_the_forward_unread():
    """A sum's cotangent is broadcast over its operand's run-time extents without reading the operand's values:
    d sum(X @ W) / dW = Xᵀ · ones keeps no copy of the forward product (one matmul, not two), and neither
    derivative multiplies anything by 0. Compiled (CPU, symbolic extents) against the interpreter, f32."""
    result = compiler.compile_source(UNREAD, "unread.py", stop_after="canonical")
    with make_context():
        mod = ir.Module.parse(result.metadata["ops"])
        fns = {ir.StringAttr(f.attributes["sym_name"]).value: f for f in mod.body.operations
               if f.operation.name == "func.func"}
        ops = {k: [op for op in f.regions[0].blocks[0].operations] for k, f in fns.items()}
        assert [op.operation.name for op in ops["d_total"]].count("ttensor.matmul") == 1
        for name in ("d_total", "d_squashed"):
            zeros = [str(op) for op in ops[name] if op.operation.name == "ttensor.constant"
                     and ir.FloatAttr(op.attributes["value"]).value == 0.0]
            assert not zeros, zeros
    m = tessera_frontend_compile(UNREAD, {"filename": "unread.py"})
    prog = executor.load(compiler.compile_source(UNREAD, "unread.py").image)
    rng = np.random.default_rng(5)
    X, W = rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal((5, 7)).astype(np.float32)
    np.testing.assert_allclose(m.interpret("d_total", X, W), np.repeat(X.sum(0)[:, None], 7, 1), rtol=1e-6)
    for name in ("d_total", "d_squashed"):
        np.testing.assert_allclose(prog.function(name)(X, W), m.interpret(name, X, W), rtol=1e-4, atol=1e-5)


MLP = '''
from tessera import f32, function, grad, op, tensor

@function
def loss(X: tensor[f32, 16, 4], Y: tensor[f32, 16, 2], W1: tensor[f32, 4, 32], b1: tensor[f32, 32],
         W2: tensor[f32, 32, 2], b2: tensor[f32, 2]):
    H = op.gelu(op.bias_add(X @ W1, b1))
    E = op.bias_add(H @ W2, b2) - Y
    return op.mean(E * E)

dloss = grad(loss, argnums=(2, 3, 4, 5))

@function
def step(X: tensor[f32, 16, 4], Y: tensor[f32, 16, 2], W1: tensor[f32, 4, 32], b1: tensor[f32, 32],
         W2: tensor[f32, 32, 2], b2: tensor[f32, 2]):
    gW1, gb1, gW2, gb2 = dloss(X, Y, W1, b1, W2, b2)
    lr = 0.05
    return loss(X, Y, W1, b1, W2, b2), W1 - lr * gW1, b1 - lr * gb1, W2 - lr * gW2, b2 - lr * gb2
'''


def test_mlp_training_step_interpreted_and_compiled():
    """Forward, MSE loss, grad and an SGD update as one @function, compiled to one image: 40 steps from the same
    start. The loss falls by more than 4x in both, and the two trajectories agree to rtol 1e-3 (f32 rounding
    differences compound over the steps)."""
    m = tessera_frontend_compile(MLP, {"filename": "mlp.py"})
    prog = executor.load(compiler.compile_source(MLP, "mlp.py").image)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((16, 4)).astype(np.float32)
    Y = np.stack([np.sin(X[:, 0]), X[:, 1] * X[:, 2]], axis=1).astype(np.float32)
    params = [(rng.standard_normal(s) * 0.5).astype(np.float32) for s in [(4, 32), (32,), (32, 2), (2,)]]
    interp, compiled = list(params), list(params)
    li, lc = [], []
    for _ in range(40):
        out = m.interpret("step", X, Y, *interp)
        li.append(float(out[0]))
        interp = list(out[1:])
        out = prog.function("step")(X, Y, *compiled)
        lc.append(float(out[0]))
        compiled = list(out[1:])
    assert li[-1] < li[0] / 4
    assert all(b < a for a, b in zip(li, li[1:]))
    np.testing.assert_allclose(lc, li, rtol=1e-3)


def test_python_api(tmp_path):
    """tessera.grad(f) and friends from Python, in JAX's conventions, against numpy's derivative."""
    src = tmp_path / "prog.py"
    src.write_text('''
from tessera import f64, function, op, tensor

@function
def f(x: tensor[f64, 5], w: tensor[f64, 5]):
    return op.sum(op.tanh(x * w))
''')
    import importlib.util
    spec = importlib.util.spec_from_file_location("prog", src)
    prog = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(prog)
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 5))
    d = 1 - np.tanh(x * w) ** 2
    np.testing.assert_allclose(tessera.grad(prog.f)(x, w), d * w, rtol=1e-12)          # argnums=0
    np.testing.assert_allclose(tessera.grad(prog.f, argnums=1)(x, w), d * x, rtol=1e-12)
    value, gx, gw = tessera.value_and_grad(prog.f, argnums=(0, 1))(x, w)
    np.testing.assert_allclose(value, np.sum(np.tanh(x * w)), rtol=1e-12)
    np.testing.assert_allclose(gw, d * x, rtol=1e-12)
    y, tangent = tessera.jvp(prog.f, argnums=1)(x, w, np.ones(5))
    np.testing.assert_allclose(tangent, np.sum(d * x), rtol=1e-12)
    y, ct_x, ct_w = tessera.vjp(prog.f)(x, w, np.array(2.0))
    np.testing.assert_allclose(ct_x, 2 * d * w, rtol=1e-12)


def test_op_without_rule_is_refused_at_its_line():
    """A collective has no rule (docs/language.md): refused at the op's file:line:col, named as the user wrote
    it, in both modes, with the differentiable ops listed."""
    src = '''from tessera import dist, f32, function, grad, jvp, op, tensor

mesh = dist.Mesh(axes=["dp"], devices=range(1))

@function
def f(X: tensor[f32, 4, 8], W: tensor[f32, 8, 8]):
    H = X @ W
    return op.sum(op.all_reduce(H, mesh=mesh))

g = grad(f, argnums=1)
t = jvp(f, argnums=1)
'''
    m = tessera_frontend_compile(src, {"filename": "coll.py"})
    with pytest.raises(CompileError) as e:
        m.interpret("g", np.ones((4, 8), np.float32), np.ones((8, 8), np.float32))
    assert (e.value.filename, e.value.line, e.value.col) == ("coll.py", 8, 19)
    assert e.value.message.startswith("op.all_reduce has no reverse-mode differentiation rule yet (needed by 'g'); "
                                      "differentiable ops: ")
    assert "prod, softmax, log_softmax," in e.value.message
    with pytest.raises(CompileError) as e:
        m.interpret("t", *[np.ones((4, 8), np.float32)] + [np.ones((8, 8), np.float32)] * 2)
    assert (e.value.filename, e.value.line, e.value.col) == ("coll.py", 8, 19)
    assert e.value.message.startswith("op.all_reduce has no forward-mode differentiation rule yet (needed by 't')")
    with pytest.raises(CompileError) as e:
        compiler.compile_source(src, "coll.py")
    assert (e.value.filename, e.value.line, e.value.col) == ("coll.py", 8, 19)
    # off the path from the differentiated parameter, an op needs no rule
    ok = src.replace("op.all_reduce(H, mesh=mesh)", "H * op.all_reduce(X, mesh=mesh) @ W")
    assert tessera_frontend_compile(ok, {"filename": "ok.py"}).interpret(
        "g", np.ones((4, 8), np.float32), np.ones((8, 8), np.float32)).shape == (8, 8)


# a file declaring a derivative of f on its line 7, `line`
REQUEST = '''from tessera import f32, function, grad, jvp, op, tensor, vjp

@function
def f(X: tensor[f32, 4, 8], W: tensor[f32, 8, 8]):
    return X @ W

{line}
'''


@pytest.mark.parametrize("line, message", [
    ("g = grad(f)", "grad needs a function returning one scalar (0-d) floating tensor; 'f' returns "
                    "tensor[f32, 4, 8] (use vjp for other results)"),
    ("g = grad(f, argnums=2)", "argnums 2 is out of range: 'f' takes 2 parameter(s)"),
    ("g = vjp(f, argnums=(0, 0))", "argnums names parameter 0 twice"),
    ("g = vjp(k)", "vjp() of 'k': it is not a @function of this file"),
    ("g = jvp(f, argnums=1, has_aux=True)", "jvp() takes argnums= only, not has_aux"),
    # a literal Python cannot build (an unhashable key) was a TypeError traceback (the frontend fuzzer's find)
    ("g = grad(f, argnums={[1]: 2})", "argnums is an int or a non-empty tuple of ints"),
])
def test_requests_are_checked_where_written(line, message):
    src = REQUEST.format(line=line)
    with pytest.raises(CompileError) as e:
        tessera_frontend_compile(src, {"filename": "req.py"})
    assert e.value.line == 7 and e.value.message == message


def test_tuple_assignment_declares_each_derivative():
    src = '''from tessera import f64, function, jvp, op, tensor, vjp

@function
def f(X: tensor[f64, 2, 3]):
    return op.tanh(X)

a, b = vjp(f), jvp(f)
'''
    m = tessera_frontend_compile(src, {"filename": "pair.py"})
    X, V = np.linspace(-1, 1, 6).reshape(2, 3), np.full((2, 3), 2.0)
    _, ct = m.interpret("a", X, V)
    _, t = m.interpret("b", X, V)
    np.testing.assert_allclose(ct, 2 * (1 - np.tanh(X) ** 2), rtol=1e-12)
    np.testing.assert_allclose(t, ct, rtol=1e-12)


@pytest.mark.parametrize("line, col", [("a, b = vjp(f)", 8), ("a: object = grad(f)", 13),
                                       ("a = [vjp(f), jvp(f)]", 6), ("a, b = vjp(f), 3, jvp(f)", 8)])
def test_other_assignments_of_derivatives_are_errors(line, col):
    src = REQUEST.format(line=line)
    with pytest.raises(CompileError) as e:
        tessera_frontend_compile(src, {"filename": "req.py"})
    assert (e.value.filename, e.value.line, e.value.col) == ("req.py", 7, col)
    assert e.value.message.startswith("declare a derivative as `name = ")


SYMBOLIC = '''
from tessera import f64, function, grad, jvp, op, tensor, vjp

@function
def flat(X: tensor[f64, "M", "N", 3], Z: tensor[f64, "M", 3, "N"]):
    return op.reshape(op.tanh(X), (-1,)) * op.reshape(X, (-1,))

@function
def named(X: tensor[f64, "M", "N", 3], Z: tensor[f64, "M", 3, "N"]):
    return op.reshape(op.tanh(X), ("N", 3, "M")) * op.reshape(Z, ("N", 3, "M"))

@function
def sum_last(X: tensor[f64, "M", "N", 3], Z: tensor[f64, "M", 3, "N"]):
    return op.sum(op.tanh(X) * X, axis=2)

@function
def mean_last(X: tensor[f64, "M", "N", 3], Z: tensor[f64, "M", 3, "N"]):
    return op.mean(op.exp(X) * X, axis=-1) * op.mean(X, axis=2)

@function
def kept(X: tensor[f64, "M", "N", 3], Z: tensor[f64, "M", 3, "N"]):
    return op.sum(op.tanh(X), axis=2, keepdims=True) * op.mean(X * X, axis=-1, keepdims=True) * X

@function
def loss(X: tensor[f64, "M", "N", 3], Z: tensor[f64, "M", 3, "N"]):
    return (op.sum(flat(X, Z)) + op.mean(named(X, Z)) + op.sum(sum_last(X, Z)) + op.mean(mean_last(X, Z))
            + op.sum(kept(X, Z)))

dloss = grad(loss, argnums=(0, 1))
''' + "".join(f"vjp_{n} = vjp({n})\njvp_{n} = jvp({n})\n" for n in ("flat", "named", "sum_last", "mean_last",
                                                                        "kept"))

SYMBOLIC_CASES = ["flat", "named", "sum_last", "mean_last", "kept"]


@pytest.fixture(scope="module")
def symbolic_module():
    return tessera_frontend_compile(SYMBOLIC, {"filename": "symbolic.py"})


@pytest.mark.parametrize("name", SYMBOLIC_CASES)
@pytest.mark.parametrize("m,n", [(2, 5), (4, 3)])
def test_reshaping_rules_with_two_symbolic_extents(symbolic_module, name, m, n):
    """Issue 15: the reshape rule and the sum/mean cotangent's reduced axes put back reshape to a shape with
    two extents known only at run time ("M", "N"), named by the operand's symbols; f64 finite differences and
    jvp/vjp duality through the interpreter at two sizes of one module."""
    rng = np.random.default_rng(zlib.crc32(f"{name}{m}{n}".encode()))
    xs = [rng.standard_normal((m, n, 3)), rng.standard_normal((m, 3, n))]
    us = [rng.standard_normal(x.shape) for x in xs]
    y = np.asarray(symbolic_module.interpret(name, *xs))
    v = rng.standard_normal(y.shape)
    out = symbolic_module.interpret(f"vjp_{name}", *xs, v)
    assert [c.shape for c in out[1:]] == [x.shape for x in xs]
    vjp_u = sum(float(np.sum(c * u)) for c, u in zip(out[1:], us))
    h = 1e-5
    plus = symbolic_module.interpret(name, *[x + h * u for x, u in zip(xs, us)])
    minus = symbolic_module.interpret(name, *[x - h * u for x, u in zip(xs, us)])
    assert vjp_u == pytest.approx(float(np.sum(v * (plus - minus))) / (2 * h), rel=1e-6, abs=1e-8)
    jv = symbolic_module.interpret(f"jvp_{name}", *xs, *us)
    assert jv[1].shape == y.shape
    assert float(np.sum(v * jv[1])) == pytest.approx(vjp_u, rel=1e-10, abs=1e-12)


def test_reshaping_rules_with_two_symbolic_extents_compiled(symbolic_module):
    """The same derivatives compiled for the CPU, one image run at two sizes, against the interpreter (rtol
    1e-5: the CPU's vectorized tanh and exp differ from numpy's by up to ~2e-7 relative here; a wrong reshape
    is off by O(1))."""
    prog = executor.load(compiler.compile_source(SYMBOLIC, "symbolic.py").image)
    for m, n in [(2, 5), (4, 3)]:
        rng = np.random.default_rng(m * 10 + n)
        xs = [rng.standard_normal((m, n, 3)), rng.standard_normal((m, 3, n))]
        calls = {"dloss": xs}
        for name in SYMBOLIC_CASES:
            y = np.asarray(symbolic_module.interpret(name, *xs))
            # vjp_flat's cotangent has flat's fresh extent (the frontend's '?1'): declared M*N*3 by the pass
            calls[f"vjp_{name}"] = xs + [rng.standard_normal(y.shape)]
            calls[f"jvp_{name}"] = xs + [rng.standard_normal(x.shape) for x in xs]
        for fn, args in calls.items():
            want = symbolic_module.interpret(fn, *args)
            got = prog.function(fn)(*args)
            assert len(got) == len(want), fn
            for w, c in zip(want, got):
                assert w.shape == c.shape, (fn, w.shape, c.shape)
                np.testing.assert_allclose(c, w, rtol=1e-5, atol=1e-7, err_msg=f"{fn} at M={m}, N={n}")
        # the cotangent's extent is an expression of X's: checked once the call binds M and N
        with pytest.raises(ValueError, match=rf"argument 'd_out0' must have extent {m * n * 3} \(M\*N\*3\) on "
                                             rf"axis 0, got 5"):
            prog.function("vjp_flat")(*xs, np.ones(5))
