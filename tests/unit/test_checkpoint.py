"""The memory policy of derivatives (issue 15 item 3): `@function(checkpoint=True)` recomputes a call's values
in the backward instead of saving them (passes/autodiff_policy.py), and the launch plan's buffers shrink."""

import numpy as np
import pytest

from tessera import compiler, executor, plan, tessera_frontend_compile
from tessera.diagnostics import CompileError

_BYTES = {"f32": 4, "bf16": 2, "f64": 8}


def _mlp(layers: int, checkpoint: bool, activation: str = "op.gelu", dt: str = "f32") -> str:
    params = ", ".join(f"W{i}: tensor[{dt}, 64, 64], b{i}: tensor[{dt}, 64]" for i in range(layers))
    h = "X"
    for i in range(layers):
        h = f"block({h}, W{i}, b{i})"
    return f'''
from tessera import {dt}, function, grad, op, tensor

@function(checkpoint={checkpoint})
def block(H: tensor[{dt}, "M", 64], W: tensor[{dt}, 64, 64], b: tensor[{dt}, 64]):
    return {activation}(op.bias_add(H @ W, b))

@function
def loss(X: tensor[{dt}, "M", 64], {params}):
    return op.mean(op.square({h}))

dloss = grad(loss, argnums={tuple(range(1, 2 * layers + 1))})
'''


def _intermediate_bytes(p: dict, env: dict) -> int:
    """What the C executor allocates for a call's intermediates: each buffer slot sized for its largest tenant
    (runtime/src/function.c)."""
    slots: dict = {}
    for v in p["values"].values():
        if v.get("buffer") is None:
            continue
        n = _BYTES[v["dtype"]] * int(np.prod([plan.evaluate(str(d), env) for d in v["dims"]]))
        slots[v["buffer"]] = max(slots.get(v["buffer"], 0), n)
    return sum(slots.values())


@pytest.mark.parametrize("target, dt", [("cpu", "f32"), ("ptx", "bf16")])
def test_checkpointing_lowers_the_plans_intermediate_bytes(target, dt):
    """An 8-layer MLP's gradient at M = 1024: saved, each layer keeps X·W + b (gelu's input) and gelu's result
    [M, 64] alive from the forward to its backward; checkpointed, only the result (the next layer's input),
    X·W + b being recomputed in the backward. Measured on both targets (the plans share graph_lowering; the
    ptx GEMMs take bf16): on the CPU 4.98 MB of [M, 64] f32 buffers saved vs 3.15 MB checkpointed (19 slots
    vs 12)."""
    from tessera.options import CompileOptions
    got = {}
    for ck in (False, True):
        plans = compiler.compile_source(_mlp(8, ck, dt=dt), "mlp.py", CompileOptions(target=target),
                                        stop_after="kernels").metadata["plans"]
        got[ck] = _intermediate_bytes(plans["dloss"], {"M": 1024})
    assert got[True] < 0.7 * got[False], got


def _params(rng, layers: int) -> list:
    out = []
    for _ in range(layers):
        out += [(rng.standard_normal((64, 64)) / 8).astype(np.float32), (rng.standard_normal(64) / 10).astype(np.float32)]
    return out


@pytest.mark.parametrize("activation", ["op.relu", "op.gelu"])
def test_checkpointed_gradients_equal_the_saved_ones(activation):
    """Recomputing evaluates the same ops on the same values. The interpreter's gradients are bitwise equal.
    On the CPU image they are bitwise equal with relu; with gelu within 2e-6 relative: checkpointing changes
    what fuses (unsaved, gelu joins its GEMM's epilogue, whose erf is vmath's inline approximation, where the
    saved program applies it in an elementwise kernel calling glibc's erff), not what is computed."""
    rng = np.random.default_rng(5)
    X = rng.standard_normal((96, 64)).astype(np.float32)
    ps = _params(rng, 4)
    runs = {}
    for ck in (False, True):
        source = _mlp(4, ck, activation)
        runs["interp", ck] = tessera_frontend_compile(source, {"filename": "mlp.py"}).interpret("dloss", X, *ps)
        runs["cpu", ck] = executor.load(compiler.compile_source(source, "mlp.py").image).function("dloss")(X, *ps)
    for saved, ckpt, ref in zip(runs["cpu", False], runs["cpu", True], runs["interp", False]):
        if activation == "op.relu":
            np.testing.assert_array_equal(ckpt, saved)
        else:
            np.testing.assert_allclose(ckpt, saved, rtol=2e-6, atol=2e-6 * np.abs(saved).max())
        np.testing.assert_allclose(ckpt, ref, rtol=1e-4, atol=1e-5 * np.abs(ref).max())
    for saved, ckpt in zip(runs["interp", False], runs["interp", True]):
        np.testing.assert_array_equal(ckpt, saved)


NESTED = '''
from tessera import f64, function, grad, op, tensor

@function(checkpoint=True)
def inner(H: tensor[f64, 8, 16], g: tensor[f64, 16]):
    return op.dropout(op.layernorm(H, gamma=g), 0.25, 7)

@function(checkpoint=True)
def outer(H: tensor[f64, 8, 16], W: tensor[f64, 16, 16], g: tensor[f64, 16]):
    return op.tanh(inner(H @ W, g)) * op.softmax(H, axis=1)

@function
def loss(X: tensor[f64, 8, 16], W: tensor[f64, 16, 16], g: tensor[f64, 16]):
    return op.sum(outer(outer(X, W, g), W, g))

dloss = grad(loss, argnums=(0, 1, 2))
'''


def test_nested_regions_dropout_and_expansions_recompute_exactly():
    """A checkpointed call inside a checkpointed call (the outer region takes the inner's ops), a dropout
    (recomputed, it replays its Philox mask) and a layernorm (expanded) in a region: the interpreter's f64
    gradients are bitwise those of the same program without checkpoints."""
    rng = np.random.default_rng(2)
    args = [rng.standard_normal((8, 16)), rng.standard_normal((16, 16)) / 4, rng.standard_normal(16)]
    got = tessera_frontend_compile(NESTED, {"filename": "n.py"}).interpret("dloss", *args)
    want = tessera_frontend_compile(NESTED.replace("checkpoint=True", "checkpoint=False"),
                                    {"filename": "n.py"}).interpret("dloss", *args)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_checkpoint_takes_a_bool_at_its_line():
    source = '''
from tessera import f32, function, op, tensor

@function(checkpoint=1)
def f(X: tensor[f32, 4]):
    return op.relu(X)
'''
    with pytest.raises(CompileError, match=r"c\.py:4:22: error: checkpoint= takes True or False"):
        tessera_frontend_compile(source, {"filename": "c.py"})
