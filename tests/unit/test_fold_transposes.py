"""Matmuls reading a transposed operand in place (passes/fold_transposes.py, tessera.transpose_a/_b): compiled
CPU images of products with Aᵀ, Bᵀ and both, 2-D and batched, against numpy, their plans without a layout
kernel; the interpreter on the folded IR; the backward of a linear layer folds both of its transposes.

Tolerance: f32 products of K ≤ 70 terms of unit normals, summed in f32 by the GEMM against float64 numpy:
rtol 1e-5 with atol 1e-5 (the error is ~sqrt(K)·2^-24·|A||B| ≈ 1e-6; a wrong layout gives O(1) errors).
"""

import numpy as np
import pytest

from tessera import compiler, executor
from tessera.options import CompileOptions

SOURCE = '''
from tessera import f32, function, grad, op, tensor


@function
def tn(A: tensor[f32, "K", "M"], B: tensor[f32, "K", "N"]):
    return op.transpose(A, (1, 0)) @ B


@function
def nt(A: tensor[f32, "M", "K"], B: tensor[f32, "N", "K"]):
    return A @ op.transpose(B, (1, 0))


@function
def tt(A: tensor[f32, "K", "M"], B: tensor[f32, "N", "K"]):
    return op.transpose(A, (1, 0)) @ op.transpose(B, (1, 0))


@function
def batched(A: tensor[f32, 3, "K", "M"], B: tensor[f32, 3, "N", "K"]):
    return op.transpose(A, (0, 2, 1)) @ op.transpose(B, (0, 2, 1))


@function
def shared(A: tensor[f32, "K", "M"], B: tensor[f32, "K", "N"]):
    T = op.transpose(A, (1, 0))
    return T @ B, op.relu(T)


@function
def loss(X: tensor[f32, "M", 24], W: tensor[f32, 24, 16]):
    return op.sum(op.gelu(X @ W))


dloss = grad(loss, argnums=(0, 1))
'''

# (function, stored shapes of A and B for M=37, K=70, N=29; the numpy product)
CASES = {
    "tn": ([(70, 37), (70, 29)], lambda a, b: a.T @ b),
    "nt": ([(37, 70), (29, 70)], lambda a, b: a @ b.T),
    "tt": ([(70, 37), (29, 70)], lambda a, b: a.T @ b.T),
    "batched": ([(3, 70, 37), (3, 29, 70)], lambda a, b: np.swapaxes(a, 1, 2) @ np.swapaxes(b, 1, 2)),
}


@pytest.fixture(scope="module")
def image():
    return executor.load(compiler.compile_source(SOURCE, "fold.py").image)


def _stage(stage: str) -> str:
    """The CPU compilation's module text after `stage`."""
    if stage not in _STAGES:
        compiler.compile_source(SOURCE, "fold.py", CompileOptions(target="cpu"), stop_after=stage,
                                on_stage=lambda name, text: _STAGES.setdefault(name, text))
    return _STAGES[stage]


_STAGES: dict = {}


def _kernel_groups(name: str) -> list[str]:
    """The kind of each fusion group (each kernel) of function `name`, in program order."""
    from tessera.dialects import make_context
    from tessera.mlir import ir
    fused = ir.Module.parse(_stage("fusion"), context=make_context())
    for fn in fused.body.operations:
        if ir.StringAttr(fn.attributes["sym_name"]).value == name:
            kinds = [(ir.IntegerAttr(op.attributes["tessera.group"]).value,
                      ir.StringAttr(op.attributes["tessera.group_kind"]).value)
                     for op in fn.entry_block.operations if "tessera.group_kind" in op.attributes]
            return [kind for _, kind in sorted(set(kinds))]
    raise KeyError(name)


@pytest.mark.parametrize("name", list(CASES))
def test_transposed_operands_run_in_place(image, name):
    shapes, ref = CASES[name]
    rng = np.random.default_rng(7)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    got = image.function(name)(a, b)
    np.testing.assert_allclose(got, ref(a.astype(np.float64), b.astype(np.float64)), rtol=1e-5, atol=1e-5)
    assert _kernel_groups(name) == ["gemm"], "the transposes are read by the GEMM, no layout kernel"


def test_a_transpose_with_other_users_stays(image):
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((70, 37)).astype(np.float32), rng.standard_normal((70, 29)).astype(np.float32)
    p, r = image.function("shared")(a, b)
    np.testing.assert_allclose(p, a.T.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(r, np.maximum(a.T, 0))
    assert sorted(_kernel_groups("shared")) == ["elementwise", "gemm", "layout"]


def _canonical_modules():
    """The canonical stage's module, and a copy after tessera-fold-transposes (both parsed in one context)."""
    from tessera.dialects import make_context
    from tessera.mlir import ir
    from tessera.passes.registry import build_pass_manager
    ctx = make_context()
    plain, folded = (ir.Module.parse(_stage("canonical"), context=ctx) for _ in range(2))
    with ctx:
        build_pass_manager("builtin.module(tessera-fold-transposes)").run(folded.operation)
    return plain, folded


def test_linear_layer_backward_folds_both_transposes(image):
    """dX = dY·Wᵀ and dW = Xᵀ·dY: GEMMs reading W and X in place. The interpreter gives the same gradients
    (bitwise: the same f64 products) on the folded IR as on the transposes, and the image agrees with it."""
    from tessera import interpret
    groups = _kernel_groups("dloss")
    assert "layout" not in groups and groups.count("gemm") == 3, groups
    plain, folded = _canonical_modules()
    assert "tessera.transpose_a" in str(folded) and "tessera.transpose_b" in str(folded)
    rng = np.random.default_rng(9)
    X, W = rng.standard_normal((33, 24)).astype(np.float32), (rng.standard_normal((24, 16)) / 5).astype(np.float32)
    want = interpret.run(plain, "dloss", X, W)
    for name, (shapes, _) in CASES.items():
        a, b = (rng.standard_normal(sh).astype(np.float32) for sh in shapes)
        np.testing.assert_array_equal(interpret.run(folded, name, a, b), interpret.run(plain, name, a, b))
    for g, w, f in zip(image.function("dloss")(X, W), want, interpret.run(folded, "dloss", X, W)):
        np.testing.assert_array_equal(f, w)
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
