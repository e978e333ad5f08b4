"""Pipelined collectives (passes/pipeline_collectives.py, graph lowering's chunks): a matmul feeding an
all_reduce runs in row chunks, each chunk's GEMM launch of one kernel on aliases of a row range of its lhs and
of the all_reduce's result (plan version 6's alias offsets), each chunk's all_reduce in place right after it;
the ops whose rows lead to that lhs (the first GEMM, the gelu) run in the same chunks, before it.
The plans' structure on the CPU and on ptx (sm_90a, sm_80: bench/tp_mlp_gpu.py's program, ptxas-checked), and
the numerics on 2 and 3 CPU ranks through MPI: the chunked MLP equals the whole one and the interpreter, at a
row count that is not a multiple of a chunk, one of four whole chunks, and one smaller than a chunk."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tessera
from tessera import plan, tessera_frontend_compile
from tessera.diagnostics import CompileError
from tessera.backends.ptx import ptxas
from tessera.image import read_image

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import pipelined_worker as W  # noqa: E402
from mpi_jobs import child_env, mpiexec_or_skip  # noqa: E402

sys.path.insert(0, str(HERE.parent.parent / "bench"))
GUARD = 300  # seconds the job may take before the test fails instead of hanging
# each row count's chunk rows (4 chunks of a multiple of 128 rows, the last what remains)
CHUNK_ROWS = {300: [128, 128, 44, 0], 1024: [256, 256, 256, 256], 5: [5, 0, 0, 0]}
# the same for uneven chunks of weights 6:6:3:1: chunk i ends at min(ceil(T*(w_0+...+w_i)/(16*128))*128, T)
WEIGHTS = (6, 6, 3, 1)
WEIGHTED_ROWS = {300: [128, 128, 44, 0], 1024: [384, 384, 256, 0], 5: [5, 0, 0, 0],
                 8192: [3072, 3072, 1536, 512], 2000: [768, 768, 384, 80]}


def _plan(source: str, **options) -> tuple[plan.Plan, list]:
    img = read_image(tessera.compile(source, "tp.py", **options))
    doc = json.loads(img.plan)
    (fn,) = doc["functions"].values()
    return plan.Plan.from_json(fn), img.kernels


def _chunks(p: plan.Plan) -> list[dict]:
    """The chunks of `p`'s pipelined all_reduce: each collective step with the alias steps and the compute
    steps (GEMMs and generated kernels) since the one before."""
    out, cur = [], {"aliases": [], "gemms": []}
    for s in p.steps:
        if isinstance(s, plan.AliasStep):
            cur["aliases"].append(s)
        elif isinstance(s, plan.CollectiveStep):
            out.append(dict(cur, collective=s))
            cur = {"aliases": [], "gemms": []}
        elif cur["aliases"]:
            cur["gemms"].append(s)
    return out


def _rows(s) -> str:
    """The rows a compute step runs on: a view step's R, an argument step's extent of its first tensor's rows."""
    return s.R if isinstance(s, plan.ViewStep) else s.env[s.args[0].shape[0]]


def _check_chunks(p: plan.Plan, chunks: int, x_cols: int, cols: int, steps: int,
                  chunk_rows: dict = CHUNK_ROWS) -> set[str]:
    """The chunks tile X and the result row by row at every row count of CHUNK_ROWS (for 4 chunks), each
    chunk the whole MLP on its rows (`steps` compute steps: both GEMMs, the gelu, a rounding) with its
    collective in place on its rows of the plan's result, nothing computed before the first chunk, and every
    [T, *] intermediate read and written only through the chunks' aliases; the chunks' kernels."""
    (result,) = p.results
    found = _chunks(p)
    assert len(found) == chunks
    first = next(i for i, s in enumerate(p.steps) if isinstance(s, plan.AliasStep))
    assert not any(isinstance(s, (plan.ArgsStep, plan.ViewStep)) for s in p.steps[:first])
    aliases = {s.alias for s in p.steps if isinstance(s, plan.AliasStep)}
    middle = [v for v, x in p.values.items() if v not in aliases and v not in p.args and v not in p.results
              and x.dims[0] == "T"]
    assert middle and not any(v in plan.uses(s) for v in middle for s in p.steps if not isinstance(s, plan.AliasStep))
    kernels = set()
    for T, want in chunk_rows.items():
        start, env = 0, {"T": T, "D": x_cols}   # D: the bench program's width (symbolic there)
        for rows, c in zip(want, found):
            of = {a.alias: a for a in c["aliases"]}
            ar = c["collective"]
            into, out = of[ar.input], of[ar.output]
            assert into.of == out.of == result and into.alias != out.alias
            for a in (into, out):
                assert plan.evaluate(a.offset, env) == start * cols
                assert a.offset != "0" or start == 0   # the first chunk's window is written "0"
                assert [plan.evaluate(d, env) for d in p.values[a.alias].dims] == [rows, cols]
            (x,) = [a for a in c["aliases"] if a.of == p.args[0]]
            assert plan.evaluate(x.offset, env) == start * x_cols
            for a in c["aliases"]:
                assert plan.evaluate(p.values[a.alias].dims[0], env) == rows
            assert len(c["gemms"]) == steps
            assert [plan.evaluate(_rows(s), env) for s in c["gemms"]] == [rows] * steps
            kernels |= {s.kernel for s in c["gemms"]}
            start += rows
        assert start == T
    return kernels


def test_the_cpu_plan_runs_the_whole_mlp_per_chunk_on_row_ranges():
    """Each chunk: the first GEMM (the gelu its epilogue) and the second on its rows, one kernel each launched
    per chunk."""
    p, kernels = _plan(W.source(2), target="cpu", collective_chunks=4)
    names = _check_chunks(p, 4, W.D, W.D, 2)
    assert len(names) == 2 and sum(k.name in names for k in kernels) == 2


@pytest.mark.parametrize("how", ["option", "own", "option list"])
def test_weighted_chunks_end_where_the_weights_say(how):
    """collective_chunks=(6, 6, 3, 1) or op.all_reduce(chunks=(6, 6, 3, 1)): four chunks, each a multiple of
    128 rows but the one reaching T, of rows in proportion to the weights (rounded up to 128), each the whole
    MLP on its rows with its all_reduce."""
    if how == "own":
        p, _ = _plan(W.source(2).replace("mesh=mesh)", "mesh=mesh, chunks=(6, 6, 3, 1))"), target="cpu")
    else:
        p, _ = _plan(W.source(2), target="cpu", collective_chunks=WEIGHTS if how == "option" else list(WEIGHTS))
    _check_chunks(p, 4, W.D, W.D, 2, WEIGHTED_ROWS)


def test_equal_weights_are_the_counts_plan():
    """Weights all equal are that many equal chunks: the same plan as the count's."""
    a, _ = _plan(W.source(2), target="cpu", collective_chunks=4)
    b, _ = _plan(W.source(2).replace("mesh=mesh)", "mesh=mesh, chunks=[3, 3, 3, 3])"), target="cpu")
    assert a.steps == b.steps


def test_weights_key_the_compile_cache():
    from tessera.options import CompileOptions
    keys = {CompileOptions(target="ptx", collective_chunks=c).hash() for c in (0, 4, (6, 6, 3, 1), (3, 3, 2, 1))}
    assert len(keys) == 4
    assert CompileOptions(collective_chunks=[6, 6, 3, 1]) == CompileOptions(collective_chunks=(6, 6, 3, 1))


@pytest.mark.parametrize("value", [(), (6, 0), (6, -1), (6, 1.5), (True, 1), "6:1"])
def test_bad_weight_options_are_refused(value):
    from tessera.options import CompileOptions
    with pytest.raises((TypeError, ValueError), match="collective_chunks"):
        CompileOptions(collective_chunks=value)


BIAS = W.source(2).replace("W2: dist.shard(", "b: dist.shard(tensor[f32, 48], mesh, axis=\"tp\", dim=0),\n        "
                            "W2: dist.shard(").replace("op.gelu(X @ W1)", "op.gelu(X @ W1 + b)")


def test_a_bias_broadcast_along_the_rows_runs_in_the_chunks_whole():
    """A bias added after the first GEMM (a binary op whose other operand broadcasts along the rows) runs in
    the chunks, the bias itself read whole by every chunk."""
    p, _ = _plan(BIAS, target="cpu", collective_chunks=4)
    bias = p.args[2]
    assert not any(s.of == bias for s in p.steps if isinstance(s, plan.AliasStep))
    for c in _chunks(p):
        assert any(bias in plan.uses(s) for s in c["gemms"])
        assert len(c["gemms"]) >= 2


def test_a_hidden_value_read_elsewhere_keeps_the_first_gemm_whole():
    """H also returned: the walk stops at it, so the first GEMM and the gelu run whole before the chunks (the
    second GEMM alone in them, as before rows went back to the inputs)."""
    source = W.source(2).replace("return op.all_reduce(op.gelu(X @ W1) @ W2, mesh=mesh)",
                                 "H = op.gelu(X @ W1)\n    return op.all_reduce(H @ W2, mesh=mesh), H")
    p, _ = _plan(source, target="cpu", collective_chunks=4)
    first = next(i for i, s in enumerate(p.steps) if isinstance(s, plan.AliasStep))
    assert any(isinstance(s, plan.ArgsStep) for s in p.steps[:first])
    assert all(len(c["gemms"]) == 1 for c in _chunks(p)) and len(_chunks(p)) == 4


def test_the_cpu_default_and_deterministic_reductions_stay_whole():
    for source, options in ((W.source(2), {}), (W.source(2).replace("mesh=mesh)", "mesh=mesh, deterministic=True)"),
                                                dict(collective_chunks=4))):
        p, _ = _plan(source, target="cpu", **options)
        assert [s.collective for s in p.steps if isinstance(s, plan.CollectiveStep)] == ["all_reduce"]
        assert all(s.offset is None for s in p.steps if isinstance(s, plan.AliasStep))


def test_a_narrower_result_chunks_its_wider_accumulator_too():
    """A bf16 product on the CPU accumulates in an f32 temporary that a second kernel rounds: both run per
    chunk, on aliases of the temporary's rows."""
    from tp_mlp_gpu import program  # lazy: the bench's program, from bench/
    p, _ = _plan(program(2, 64), target="cpu", collective_chunks=4)
    names = _check_chunks(p, 4, 256, 256, 4)   # first GEMM, gelu and cast, second GEMM, its rounding
    assert len(names) == 4
    for c in _chunks(p):
        assert {p.values[a.alias].dtype for a in c["aliases"]} == {"bf16", "f32"}
        assert c["gemms"][-1].kernel.endswith("_f32_to_bf16_1") and \
            {x.value for x in c["gemms"][-1].args} == {x.value for x in c["gemms"][-2].args[2:]} | {c["collective"].input}


@pytest.mark.parametrize("arch, steps", [("sm_90a", 2), ("sm_80", 3)])
def test_the_bench_program_on_ptx_chunks_by_default(arch, steps):
    """Per chunk: the first GEMM (on sm_90a its epilogue the gelu and the cast; on sm_80 a kernel of theirs
    after it) and the second, each one kernel launched per chunk."""
    from tp_mlp_gpu import program  # lazy: the bench's program, from bench/
    p, kernels = _plan(program(2, 64), target="ptx", arch=arch)
    names = _check_chunks(p, 4, 256, 256, steps)
    assert len(names) == steps and sum(k.name in names for k in kernels) == steps
    if ptxas.find():
        mine = {k.name: k for k in kernels if k.name in names}
        assert all(k.regs > 0 for k in mine.values())
        # the second GEMM's (the first's, with its gelu epilogue, is the unchunked plan's kernel: its spills too)
        assert "ptx.spill_bytes" not in mine[_chunks(p)[0]["gemms"][-1].kernel].props


def test_an_all_reduces_own_chunks_override_the_option():
    own = W.source(2).replace("mesh=mesh)", "mesh=mesh, chunks=3)")
    p, _ = _plan(own, target="cpu")
    assert len(_chunks(p)) == 3
    p, _ = _plan(W.source(2).replace("mesh=mesh)", "mesh=mesh, chunks=1)"), target="cpu", collective_chunks=4)
    assert [s.collective for s in p.steps if isinstance(s, plan.CollectiveStep)] == ["all_reduce"]


@pytest.mark.parametrize("kwargs, message", [
    ("chunks=0", "tp.py:10:12: error: chunks must be a positive int or a non-empty sequence of positive int "
                 "weights (uneven chunks, e.g. (6, 6, 3, 1)), got 0"),
    ("chunks=()", "tp.py:10:12: error: chunks must be a positive int or a non-empty sequence of positive int "
                  "weights (uneven chunks, e.g. (6, 6, 3, 1)), got ()"),
    ("chunks=(6, 0)", "tp.py:10:12: error: chunks must be a positive int or a non-empty sequence of positive int "
                      "weights (uneven chunks, e.g. (6, 6, 3, 1)), got (6, 0)"),
    ("chunks=(6, -1)", "tp.py:10:12: error: chunks must be a positive int or a non-empty sequence of positive "
                       "int weights (uneven chunks, e.g. (6, 6, 3, 1)), got (6, -1)"),
    ("chunks=(6, 1.5)", "tp.py:10:12: error: chunks must be a positive int or a non-empty sequence of positive "
                        "int weights (uneven chunks, e.g. (6, 6, 3, 1)), got (6, 1.5)"),
    ("chunks=(6, 1), deterministic=True", "tp.py:10:12: error: op.all_reduce(chunks=(6, 1)) cannot run in row "
                                          "chunks: it reduces in the interpreter's tree order"),
    ("chunks=2, deterministic=True", "tp.py:10:12: error: op.all_reduce(chunks=2) cannot run in row chunks: it "
                                     "reduces in the interpreter's tree order"),
])
def test_chunks_that_cannot_be_are_located_errors(kwargs, message):
    with pytest.raises(CompileError) as e:
        tessera.compile(W.source(2).replace("mesh=mesh)", f"mesh=mesh, {kwargs})"), "tp.py", target="cpu")
    assert message in str(e.value)


def test_a_gemm_step_that_cannot_be_chunked_is_a_located_error(monkeypatch):
    """A backend whose GEMM steps see the lhs' rows otherwise than as one env extent (here a view step, as a
    stand-in) cannot run in chunks: the error says how to run the pair whole."""
    from tessera.backends.cpu import gemm_lowering

    real = gemm_lowering.lower

    def with_a_view(ctx, kname, ops, model=None, **options):
        steps = real(ctx, kname, ops, model, **options)
        a = steps[-1].args[0].value
        return [plan.ViewStep(f"{kname}_look", (plan.TensorView(a, "matrix"),), R="T", C="1", block=(1, 1, 1),
                              grid=("1", "1", "1")), *steps]
    monkeypatch.setattr(gemm_lowering, "lower", with_a_view)
    with pytest.raises(CompileError) as e:
        tessera.compile(W.source(2), "tp.py", target="cpu", collective_chunks=2)
    assert "tp.py:10:" in str(e.value) and "cannot run in row chunks" in str(e.value) and \
        "collective_chunks=1 runs it whole" in str(e.value)


@pytest.fixture(scope="module", params=[2, 3])
def job(request, tmp_path_factory):
    n = request.param
    out = tmp_path_factory.mktemp(f"ranks{n}")
    images = []
    for i, chunks in enumerate((4, 1, WEIGHTS)):
        images.append(out / f"mlp{i}.tessera")
        images[-1].write_bytes(tessera.compile(W.source(n), target="cpu", collective_chunks=chunks))
    p = subprocess.run([mpiexec_or_skip(), "-n", str(n), sys.executable, str(HERE / "pipelined_worker.py"), str(out),
                        *map(str, images)], capture_output=True, text=True, timeout=GUARD, env=child_env(), cwd=out)
    ranks = [dict(np.load(out / f"rank{r}.npz")) for r in range(n) if (out / f"rank{r}.npz").exists()]
    assert p.returncode == 0 and len(ranks) == n, p.stdout + p.stderr
    return n, ranks


@pytest.mark.parametrize("rows", W.ROWS)
def test_the_chunked_mlp_equals_the_whole_one_and_the_interpreter(job, rows):
    """Two ranks' sums are one addition, in either order the same: bit for bit. Three ranks' are in the order
    MPI chooses for a message's size, which a chunk's smaller messages may change: within that rounding."""
    n, ranks = job
    module = tessera_frontend_compile(W.source(n), {"filename": "tp.py"})
    X, W1, W2 = W.inputs(rows)
    interpreted = module.interpret("mlp", [X] * n, W1, W2, world=n)
    for r, got in enumerate(ranks):
        for i in range(3):
            assert f"error:{i}_{rows}" not in got, got[f"error:{i}_{rows}"]
        whole = got[f"1_{rows}"]
        for chunked in (got[f"0_{rows}"], got[f"2_{rows}"]):   # 4 equal chunks, chunks of weights 6:6:3:1
            assert chunked.shape == whole.shape == (rows, W.D)
            if n == 2:
                assert np.array_equal(chunked.view(np.uint32), whole.view(np.uint32))
            else:
                np.testing.assert_allclose(chunked, whole, rtol=n * np.finfo(np.float32).eps, atol=1e-6)
            np.testing.assert_allclose(chunked, interpreted[r], rtol=1e-5, atol=1e-6)
