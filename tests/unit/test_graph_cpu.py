"""Graph IR functions through the whole pipeline on the CPU, checked against the reference interpreter
(the oracle) on the same inputs. Tolerances: f32 1e-5 relative (the kernels use libmvec's erf/exp/tanh,
within a few ulp, and reduce in a different order); bf16 one bf16 ulp of the result (2^-7 relative)."""

import numpy as np
import pytest

from tessera import compiler, executor, tessera_frontend_compile

RNG = np.random.default_rng(11)


def both(src: str, name: str, *args):
    """(CPU result, interpreter result) of function `name` in `src`."""
    image = compiler.compile_source(src, "prog.py").image
    cpu = executor.load(image).function(name)(*args)
    ref = tessera_frontend_compile(src, {"filename": "prog.py"}).interpret(name, *args)
    return cpu, ref


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("act", ["relu", "gelu", "silu", "sigmoid", "tanh", "exp", "abs", "neg", "erf", "square"])
def test_fused_elementwise_chain(act):
    src = f"""
@function
def f(X: tensor[f32, "N", "D"], b: tensor[f32, "D"], s: tensor[f32, "N", 1]):
    return op.{act}(op.bias_add(X, b)) * 0.5 + s
"""
    cpu, ref = both(src, "f", randn(33, 130), randn(130), randn(33, 1))
    np.testing.assert_allclose(cpu, ref, rtol=1e-5, atol=1e-5)


def test_elementwise_fuses_into_one_kernel():
    src = """
@function
def f(X: tensor[f32, "N", "D"], b: tensor[f32, "D"]):
    return op.gelu(op.bias_add(X, b)) * 0.5 + 1.0
"""
    r = compiler.compile_source(src, "prog.py")
    plan = r.metadata["plans"]["f"]
    assert [s["kernel"] for s in plan["steps"]] == ["f__elementwise0"]


@pytest.mark.parametrize("shape", [(1, 1), (5, 33), (64, 1000), (3, 4, 70)])
def test_softmax_layernorm_rmsnorm(shape):
    d = shape[-1]
    src = f"""
@function
def f(X: tensor[f32, {", ".join(map(str, shape))}], g: tensor[f32, {d}], b: tensor[f32, {d}]):
    return op.softmax(X), op.layernorm(X, gamma=g, beta=b), op.rmsnorm(X, gamma=g)
"""
    X = randn(*shape) * 3
    cpu, ref = both(src, "f", X, randn(d), randn(d))
    for c, r in zip(cpu, ref):
        np.testing.assert_allclose(c, r, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("kind", ["sum", "mean", "max", "min"])
def test_trailing_reductions(kind):
    src = f"""
@function
def f(X: tensor[f32, "A", 6, 50]):
    return op.{kind}(X, axis=-1), op.{kind}(X, axis=(1, 2), keepdims=True)
"""
    cpu, ref = both(src, "f", randn(7, 6, 50))
    for c, r in zip(cpu, ref):
        np.testing.assert_allclose(c, r, rtol=1e-5, atol=1e-5)


def test_reshape_is_a_view_and_chains_continue():
    src = """
@function
def f(X: tensor[f32, 4, 6]):
    return op.softmax(op.reshape(op.relu(X), (8, 3)))
"""
    r = compiler.compile_source(src, "prog.py")
    assert any("alias" in s for s in r.metadata["plans"]["f"]["steps"])
    cpu, ref = both(src, "f", randn(4, 6))
    np.testing.assert_allclose(cpu, ref, rtol=1e-5, atol=1e-6)


def test_bf16_is_computed_in_f32_and_recorded():
    src = """
@function
def f(X: tensor[bf16, "N", "D"], g: tensor[bf16, "D"]):
    return op.rmsnorm(op.silu(X), gamma=g)
"""
    r = compiler.compile_source(src, "prog.py")
    assert r.metadata["plans"]["f"]["fallbacks"] == ["bf16 computed in f32"]
    cpu, ref = both(src, "f", randn(9, 40), randn(40))
    np.testing.assert_allclose(cpu, ref, rtol=2 ** -7, atol=2 ** -7)


def test_shapes_are_checked_at_the_call():
    src = """
@function
def f(X: tensor[f32, "N", "D"], b: tensor[f32, "D"]):
    return op.bias_add(X, b)
"""
    prog = executor.load(compiler.compile_source(src, "prog.py").image)
    with pytest.raises(ValueError, match="has D = 5 on axis 0, but an earlier argument has D = 4"):
        prog.f(randn(3, 4), randn(5))
    with pytest.raises(TypeError, match="takes 2 arguments"):
        prog.f(randn(3, 4))
    with pytest.raises(AttributeError, match="no function 'g'"):
        prog.g


def test_unlowerable_ops_say_so_at_their_line():
    from tessera.diagnostics import CompileError
    src = """
@function
def f(L: tensor[f32, 8, 8], x: tensor[f32, 8]):
    return op.is_unitary(op.dense(L)), x
"""
    with pytest.raises(CompileError) as e:
        compiler.compile_source(src, "prog.py")
    assert e.value.line == 4 and "no kernel lowering yet" in e.value.message


@pytest.mark.parametrize("p", [0.0, 0.1, 0.5])
def test_dropout_matches_the_interpreter_bit_for_bit(p):
    """The CPU kernel draws the same Philox-4x32-10 numbers as the interpreter (and tessera.numerics)."""
    src = f"""
@function
def f(X: tensor[f32, "N", "D"]):
    return op.dropout(op.relu(X), p={p}, seed=987654321987, offset=5) * 2.0
"""
    cpu, ref = both(src, "f", randn(33, 257))
    np.testing.assert_allclose(cpu, ref, rtol=2e-7, atol=0)
    assert np.array_equal(cpu == 0, ref == 0)


def test_mlp_block_runs_as_two_fused_gemms_and_a_row_kernel():
    import pathlib
    src = (pathlib.Path(__file__).resolve().parents[2] / "examples" / "graph" / "mlp.py").read_text()
    src = src.replace("bf16", "f32")
    r = compiler.compile_source(src, "mlp.py")
    assert [s["kernel"] for s in r.metadata["plans"]["mlp_block"]["steps"]] == [
        "mlp_block__gemm0", "mlp_block__gemm1", "mlp_block__row2"]
    X, W1, b1 = randn(37, 256), randn(256, 1024) * 0.05, randn(1024)
    W2, b2, g = randn(1024, 256) * 0.03, randn(256), randn(256)
    cpu = executor.load(r.image).mlp_block(X, W1, b1, W2, b2, g)
    ref = tessera_frontend_compile(src, {"filename": "mlp.py"}).interpret("mlp_block", X, W1, b1, W2, b2, g)
    np.testing.assert_allclose(cpu, ref, rtol=1e-4, atol=1e-4)


def test_transformer_block_equals_the_interpreter():
    """examples/graph/transformer_block.py compiled: within one bf16 ulp (2^-7 relative) of the interpreter,
    since both round the GEMMs' operands to bf16 but may round a few differently."""
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "graph" / "transformer_block.py"
    S = 37
    args = [randn(S, 64), 1 + 0.1 * randn(64), *(0.125 * randn(64, 64) for _ in range(4)), 1 + 0.1 * randn(64),
            0.125 * randn(64, 256), 0.1 * randn(256), 0.0625 * randn(256, 64), 0.1 * randn(64)]
    cpu, ref = both(path.read_text(), "transformer_block", *args)
    assert cpu.shape == (S, 64) and cpu.dtype == np.float32
    np.testing.assert_allclose(cpu, ref, rtol=2**-7, atol=2e-2)


@pytest.mark.parametrize("epilogue", ["", "* 0.5", "+ R", "- 1.0"])
def test_gemm_epilogues_and_batched_lhs(epilogue):
    src = f"""
@function
def f(X: tensor[f32, "B", "T", 64], W: tensor[f32, 64, "F"], R: tensor[f32, "B", "T", "F"]):
    return op.relu(X @ W) {epilogue}
"""
    X, W = randn(3, 5, 64), randn(64, 40)
    cpu, ref = both(src, "f", X, W, randn(3, 5, 40))
    np.testing.assert_allclose(cpu, ref, rtol=1e-5, atol=1e-4)


def test_cost_model_schedule_reaches_the_gemm():
    """The schedule phase records the cost model's blocking on the matmul; the kernel uses it."""
    src = """
@function
def f(A: tensor[f32, 200, 300], B: tensor[f32, 300, 100]):
    return A @ B
"""
    dumps = {}
    image = compiler.compile_source(src, "prog.py", on_stage=lambda n, a: dumps.setdefault(n, a)).image
    assert '"tsched.schedule"() {KC = ' in dumps["schedule"] and "MR = " in dumps["schedule"]
    A, B = randn(200, 300), randn(300, 100)
    np.testing.assert_allclose(executor.load(image).f(A, B), A @ B, rtol=1e-4, atol=1e-3)


def test_batched_matmuls_run_per_batch_entry():
    src = """
@function
def f(A: tensor[f32, 2, 4, 8], B: tensor[f32, 2, 8, 3]):
    return A @ B
"""
    A, B = randn(2, 4, 8), randn(2, 8, 3)
    cpu, ref = both(src, "f", A, B)
    np.testing.assert_allclose(cpu, A @ B, rtol=1e-5, atol=1e-5)


def test_batch_rank_mismatch_is_refused_at_its_line():
    from tessera.diagnostics import CompileError
    src = """
@function
def f(A: tensor[f32, 3, 2, 4, 8], B: tensor[f32, 2, 8, 3]):
    return A @ B
"""
    with pytest.raises(CompileError) as e:
        compiler.compile_source(src, "prog.py")
    assert e.value.line == 4 and "batches of equal rank" in e.value.message


HINTED = """
@function(tile=(64, 128, 96), stages=2, epilogue=[bias, gelu])
@op.specialize(when={"backend": "cuda"}, use={"tile_sizes": [128, 128, 32]})
def mlp(X: tensor[f32, "M", "K"], W: tensor[f32, "K", "N"], b: tensor[f32, "N"]):
    return op.gelu(op.bias_add(X @ W, b))

@function
@op.specialize(when={"backend": "cpu"}, use={"tile_sizes": [48, 96, 64]})
def plain(X: tensor[f32, "M", "K"], W: tensor[f32, "K", "N"]):
    return X @ W
"""


def test_hints_and_specializations_reach_the_schedule():
    dumps = {}
    image = compiler.compile_source(HINTED, "h.py", on_stage=lambda n, a: dumps.setdefault(n, a)).image
    sched = dumps["schedule"]
    mlp, plain = sched.split("func.func @plain")
    assert "KC = 96 : i64, MB = 64 : i64" in mlp and "NC = 128 : i64" in mlp and "stages = 2" in mlp
    assert "KC = 64 : i64, MB = 48 : i64" in plain and "NC = 96 : i64" in plain   # the cpu specialization
    prog = executor.load(image)
    X, W, b = randn(70, 100), randn(100, 130), randn(130)
    np.testing.assert_allclose(prog.plain(X, W), X @ W, rtol=1e-4, atol=1e-3)
    ref = tessera_frontend_compile(HINTED).interpret("mlp", X, W, b)
    np.testing.assert_allclose(prog.mlp(X, W, b), ref, rtol=1e-4, atol=1e-4)


def test_requested_epilogue_must_fuse():
    from tessera.diagnostics import CompileError
    with pytest.raises(CompileError) as e:
        compiler.compile_source(HINTED.replace("op.gelu(op.bias_add", "op.relu(op.bias_add"), "h.py")
    assert e.value.line == 5 and "fused epilogue is ['bias', 'relu']" in e.value.message


@pytest.mark.parametrize("decorator, message", [
    ("@function(tile=(64, 128))", "tile= takes three positive sizes"),
    ("@function(stages=0)", "stages= takes a positive integer"),
    ("@function(swizzle=2)", "unknown hint 'swizzle'"),
    ("@function\n@op.specialize(when='cpu')", "op.specialize(when={...}, use={...})"),
])
def test_bad_hints_are_located(decorator, message):
    from tessera.diagnostics import CompileError
    src = f"{decorator}\ndef f(X: tensor[f32, 4, 4]):\n    return X\n"
    with pytest.raises(CompileError) as e:
        compiler.compile_source(src, "h.py")
    assert message in e.value.message and e.value.line >= 1


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype, tol", [("f32", 1e-5), ("f16", 2 ** -9)])
def test_flash_attention_on_the_cpu(causal, dtype, tol):
    src = f"""
@function
def attn(Q: tensor[{dtype}, "B", "S", 64], K: tensor[{dtype}, "B", "T", 64], V: tensor[{dtype}, "B", "T", 32]):
    return op.flash_attention(Q, K, V, causal={causal})
"""
    np_dtype = np.float16 if dtype == "f16" else np.float32
    Q, K, V = randn(2, 37, 64).astype(np_dtype), randn(2, 45, 64).astype(np_dtype), randn(2, 45, 32).astype(np_dtype)
    cpu, ref = both(src, "attn", Q, K, V)
    np.testing.assert_allclose(cpu.astype(np.float32), ref.astype(np.float32), rtol=tol, atol=tol)


def test_groups_run_after_their_inputs_and_buffers_are_reused_safely():
    """Regression: a GEMM whose fused residual is computed after the matmul must run after it; and the
    planned buffer reuse must hold up when fusion moves kernels."""
    src = """
@function
def f(X: tensor[f32, "M", 32], W: tensor[f32, 32, 48], Z: tensor[f32, "M", 48]):
    Y = op.relu(X @ W)
    R = op.tanh(Z) * 2.0
    S = op.softmax(R)
    return Y + S, op.sum(S, axis=-1)
"""
    r = compiler.compile_source(src, "prog.py")
    plan = r.metadata["plans"]["f"]
    order = [s["kernel"] for s in plan["steps"]]
    assert order.index("f__gemm0") > order.index("f__row2")   # the residual S exists first
    assert any("buffer" in v for v in plan["values"].values())
    cpu, ref = both(src, "f", randn(20, 32), randn(32, 48), randn(20, 48))
    for c, w in zip(cpu, ref):
        np.testing.assert_allclose(c, w, rtol=1e-5, atol=1e-5)


def test_fallbacks_are_in_the_kernel_metadata(tmp_path):
    """Portability guide §5: the fallback taken is recorded in the kernel metadata and visible in objdump."""
    import subprocess
    import sys
    src = """
@function
def f(X: tensor[bf16, "N", "D"]):
    return op.gelu(X)
"""
    image = compiler.compile_source(src, "fb.py").image
    from tessera.image import read_image
    (k,) = read_image(image).kernels
    assert k.props["fallbacks"] == "bf16 computed in f32"
    path = tmp_path / "fb.tessera"
    path.write_bytes(image)
    out = subprocess.run([sys.executable, "-m", "tessera.tools.objdump", str(path), "--no-ir"], capture_output=True,
                         text=True, cwd="/")
    assert 'fallbacks: "bf16 computed in f32"' in out.stdout, out.stdout + out.stderr


def test_softmax_and_dropout_fuse_before_the_product_with_v():
    """Attention's softmax + dropout run as one row kernel (the mask applied as probabilities are written),
    then the GEMM with V."""
    src = """
@function
def attn(S: tensor[f32, "Q", "T"], V: tensor[f32, "T", 32]):
    P = op.dropout(op.softmax(S), p=0.2, seed=77)
    return P @ V
"""
    r = compiler.compile_source(src, "sd.py")
    assert [s["kernel"] for s in r.metadata["plans"]["attn"]["steps"]] == ["attn__row0", "attn__gemm1"]
    cpu, ref = both(src, "attn", randn(40, 70), randn(70, 32))
    np.testing.assert_allclose(cpu, ref, rtol=1e-5, atol=1e-5)


# A 0-d constant that reaches storage: grad's seed 1.0 returned as it is (dident), and aliased by reshapes
# (the seed's VJP through each reshape is a reshape of it, a view). No kernel wrote such a constant before:
# the steps read uninitialized memory (values like -2041 or 1e31).
CONSTANT_VIEWS = """
from tessera import grad

@function
def ident(s: tensor[f32]):
    return s

@function
def views(s: tensor[f32], X: tensor[f32, 6, 5]):
    return op.sum(op.reshape(op.reshape(s, (1, 1)) * X, (30,))) + op.reshape(op.reshape(s, (1,)), ())

dident = grad(ident)
dviews = grad(views, argnums=(0, 1))
"""


def test_constants_read_through_views_and_returns_are_written():
    s, X = np.float32(3.0).reshape(()), randn(6, 5)
    for name, args in (("dident", (s,)), ("dviews", (s, X))):
        cpu, ref = both(CONSTANT_VIEWS, name, *args)
        cpu, ref = (cpu, ref) if isinstance(cpu, tuple) else ((cpu,), (ref,))
        for c, r in zip(cpu, ref):
            np.testing.assert_allclose(c, r, rtol=1e-5)
    assert float(both(CONSTANT_VIEWS, "dident", s)[0]) == 1.0


@pytest.mark.parametrize("target", ["cpu", "ptx"])
def test_every_value_a_plan_reads_is_written_first(target):
    """The plans of both targets (graph_lowering is shared): each value a step reads is an argument or was
    written by an earlier kernel or call (an alias is its source's storage)."""
    from tessera.options import CompileOptions
    plans = compiler.compile_source(CONSTANT_VIEWS, "prog.py", CompileOptions(target=target),
                                    stop_after="kernels").metadata["plans"]
    for name in ("dident", "dviews"):
        p = plans[name]
        written = set(p["args"])
        for step in p["steps"]:
            if "alias" in step:
                assert step["of"] in written, (name, step)
                written.add(step["alias"])
            elif "call" in step:
                assert set(step["args"]) <= written
                written |= set(step["results"])
            else:
                *reads, out = [t["value"] for t in step["tensors"]]   # generated kernels: inputs, then outputs
                assert set(reads) <= written, (name, step["kernel"], reads)
                written.add(out)
        assert set(p["results"]) <= written


AXES = [(0,), (1,), (0, 1), (0,), (1,), (2,), (0, 1), (1, 2), (0, 2), (0, 1, 2)]


@pytest.mark.parametrize("kind", ["sum", "mean", "max", "prod"])
@pytest.mark.parametrize("axes", range(len(AXES)), ids=[f"{'3d' if i > 2 else '2d'}-{AXES[i]}" for i in range(10)])
def test_reductions_over_any_axes_without_a_transpose(kind, axes):
    """Every axis combination of a 2-D and a 3-D tensor, symbolic extents, against numpy in f64: a sum or mean
    within the recursive-summation bound n·eps32·Σ|x| (n the count reduced), max exactly, prod (factors near 1)
    to rtol 1e-5. An axis set that is not trailing reduces in place, one thread per
    kept element (kernelgen._strided_reduce): the plan has no layout (transpose) step."""
    three = axes > 2
    axes = AXES[axes]
    shape = (5, 67, 130) if three else (67, 130)
    dims = '"A", "B", "C"' if three else '"B", "C"'
    src = f"""
@function
def f(X: tensor[f32, {dims}]):
    return op.{kind}(X, axis={axes})
"""
    X = RNG.uniform(0.9, 1.1, shape).astype(np.float32) if kind == "prod" else randn(*shape)
    result = compiler.compile_source(src, "prog.py")
    steps = [s["kernel"] for s in result.metadata["plans"]["f"]["steps"]]
    # one kernel, or a reduction over trailing axes split into chunks (symbolic extents): partials, finish
    assert steps in ([steps[-1]], [f"{steps[-1]}_part", steps[-1]]) and "layout" not in steps[-1], steps
    cpu = executor.load(result.image).function("f")(X)
    want = getattr(np, kind)(X.astype(np.float64), axis=axes)
    assert cpu.shape == want.shape and cpu.dtype == np.float32
    if kind in ("sum", "mean"):
        n = X.size // want.size
        bound = n * np.finfo(np.float32).eps * np.sum(np.abs(X.astype(np.float64)), axis=axes)
        assert np.all(np.abs(cpu - want) <= (bound / n if kind == "mean" else bound))
    else:
        np.testing.assert_allclose(cpu, want, rtol=1e-5 if kind == "prod" else 0)


def test_symbolic_gemm_splits_over_the_threads_at_launch(tmp_path):
    """M, N, K known only at run time: the schedule is the cost model's for a nominal 1024-sized product
    (its blocks depend on the machine: 1036×512 on 2 AVX-512 cores), one block at 512×512. The plan step
    prefers a second kernel, blocked for 512-sized extents, wherever it keeps more threads busy: at
    512×512×2048 the launch (TESSERA_METRICS'
    record of it) runs that kernel on two blocks or more. Against numpy in
    f64: K=2048 products of normals, within 1e-4 relative to the result's scale (f32 accumulation)."""
    from tessera import telemetry
    from tessera.backends.cpu.target import worker_threads
    if worker_threads() < 2:
        pytest.skip("one worker thread: nothing to split over")
    src = """
@function
def f(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"]):
    return A @ B
"""
    result = compiler.compile_source(src, "prog.py")
    (step,) = result.metadata["plans"]["f"]["steps"]
    (alt,) = step["prefer"]
    A, B = randn(512, 2048), randn(2048, 512)
    log = tmp_path / "metrics.jsonl"
    telemetry.enable(str(log))
    try:
        C = executor.load(result.image).function("f")(A, B)
    finally:
        telemetry.disable()
    (launch,) = [r for r in telemetry.load(str(log)) if r.get("kind") == "kernel"]
    assert launch["name"].endswith(alt["kernel"]) and launch["name"] != step["kernel"], launch
    assert launch["grid"][0] * launch["grid"][1] >= 2, launch
    want = A.astype(np.float64) @ B.astype(np.float64)
    np.testing.assert_allclose(C, want, atol=1e-4 * np.abs(want).max())
