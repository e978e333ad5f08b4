"""Pipelined collectives (passes/pipeline_collectives.py, graph lowering's chunks): a matmul feeding an
all_reduce runs in row chunks, each chunk's GEMM launch of one kernel on aliases of a row range of its lhs and
of the all_reduce's result (plan version 6's alias offsets), each chunk's all_reduce in place right after it.
The plans' structure on the CPU and on ptx (sm_90a, sm_80: bench/tp_mlp_gpu.py's program, ptxas-checked), and
the numerics on 2 and 3 CPU ranks through MPI: the chunked MLP equals the whole one and the interpreter, at a
row count that is not a multiple of a chunk, one of four whole chunks, and one smaller than a chunk."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import tessera
from tessera import plan
from tessera.diagnostics import CompileError
from tessera.backends.ptx import ptxas
from tessera.image import read_image

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import pipelined_worker as W  # noqa: E402

sys.path.insert(0, str(HERE.parent.parent / "bench"))
# each row count's chunk rows (4 chunks of a multiple of 128 rows, the last what remains)
CHUNK_ROWS = {300: [128, 128, 44, 0], 1024: [256, 256, 256, 256], 5: [5, 0, 0, 0]}


def _plan(source: str, **options) -> tuple[plan.Plan, list]:
    img = read_image(tessera.compile(source, "tp.py", **options))
    doc = json.loads(img.plan)
    (fn,) = doc["functions"].values()
    return plan.Plan.from_json(fn), img.kernels


def _chunks(p: plan.Plan) -> list[dict]:
    """The chunks of `p`'s pipelined all_reduce: each collective step with the alias steps and the GEMM
    steps since the one before."""
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


def _check_chunks(p: plan.Plan, chunks: int, lhs_cols: int, cols: int) -> set[str]:
    """The chunks tile the lhs and the result row by row at every row count of CHUNK_ROWS (for 4 chunks),
    each collective in place on its GEMM's rows of the plan's result; the GEMMs' kernels."""
    (result,) = p.results
    found = _chunks(p)
    assert len(found) == chunks
    kernels = set()
    for T, want in CHUNK_ROWS.items():
        start = 0
        for rows, c in zip(want, found):
            of = {a.alias: a for a in c["aliases"]}
            ar = c["collective"]
            into, out = of[ar.input], of[ar.output]
            assert into.of == out.of == result and into.alias != out.alias
            for a in (into, out):
                assert plan.evaluate(a.offset, {"T": T}) == start * cols
                assert [plan.evaluate(d, {"T": T}) for d in p.values[a.alias].dims] == [rows, cols]
            lhs = [a for a in c["aliases"] if a.of != result and p.values[a.alias].dims[-1] == str(lhs_cols)]
            assert lhs and all(plan.evaluate(a.offset, {"T": T}) == start * lhs_cols for a in lhs)
            (gemm,) = c["gemms"]
            assert plan.evaluate(gemm.env["M"], {"T": T}) == rows
            kernels |= {s.kernel for s in c["gemms"]}
            start += rows
        assert start == T
    return kernels


def test_the_cpu_plan_launches_one_kernel_per_chunk_on_row_ranges():
    p, kernels = _plan(W.source(2), target="cpu", collective_chunks=4)
    gemms = _check_chunks(p, 4, W.H // 2, W.D)
    assert len(gemms) == 1 and sum(k.name in gemms for k in kernels) == 1
    # no partial product: the first GEMM's output and the arguments are the only [T, *] values not aliases
    aliases = {s.alias for s in p.steps if isinstance(s, plan.AliasStep)}
    assert [v for v, x in p.values.items() if v not in aliases and x.dims[0] == "T"] == [*p.args[:1], p.steps[0]
                                                                                        .args[2].value, *p.results]


def test_the_cpu_default_and_deterministic_reductions_stay_whole():
    for source, options in ((W.source(2), {}), (W.source(2).replace("mesh=mesh)", "mesh=mesh, deterministic=True)"),
                                                dict(collective_chunks=4))):
        p, _ = _plan(source, target="cpu", **options)
        assert [s.collective for s in p.steps if isinstance(s, plan.CollectiveStep)] == ["all_reduce"]
        assert all(s.offset == "0" for s in p.steps if isinstance(s, plan.AliasStep))


def test_a_narrower_result_chunks_its_wider_accumulator_too():
    """A bf16 product on the CPU accumulates in an f32 temporary that a second kernel rounds: both run per
    chunk, on aliases of the temporary's rows."""
    from tp_mlp_gpu import program  # lazy: the bench's program, from bench/
    p, _ = _plan(program(2, 64), target="cpu", collective_chunks=4)
    found = _chunks(p)
    assert len(found) == 4
    for c in found:
        assert len(c["gemms"]) == 2 and {p.values[a.alias].dtype for a in c["aliases"]} == {"bf16", "f32"}
    assert len({s.kernel for c in found for s in c["gemms"]}) == 2


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_the_bench_program_on_ptx_chunks_by_default(arch):
    from tp_mlp_gpu import program  # lazy: the bench's program, from bench/
    p, kernels = _plan(program(2, 64), target="ptx", arch=arch)
    found = _chunks(p)
    assert len(found) == 4
    names = {s.kernel for c in found for s in c["gemms"]}
    assert len(names) == 1 and sum(k.name in names for k in kernels) == 1   # one kernel, launched 4 times
    for c in found:
        (gemm,) = c["gemms"]
        rows = [plan.evaluate(gemm.env["M"], {"T": T, "D": 256}) for T in CHUNK_ROWS]
        assert rows == [want[found.index(c)] for want in CHUNK_ROWS.values()]
    if ptxas.find():
        k = next(k for k in kernels if k.name in names)
        assert k.regs > 0 and "ptx.spill_bytes" not in k.props


def test_an_all_reduces_own_chunks_override_the_option():
    own = W.source(2).replace("mesh=mesh)", "mesh=mesh, chunks=3)")
    p, _ = _plan(own, target="cpu")
    assert len(_chunks(p)) == 3
    p, _ = _plan(W.source(2).replace("mesh=mesh)", "mesh=mesh, chunks=1)"), target="cpu", collective_chunks=4)
    assert [s.collective for s in p.steps if isinstance(s, plan.CollectiveStep)] == ["all_reduce"]


@pytest.mark.parametrize("kwargs, message", [
    ("chunks=0", "tp.py:10:12: error: chunks must be a positive int, got 0"),
    ("chunks=2, deterministic=True", "tp.py:10:12: error: op.all_reduce(chunks=2) cannot run in row chunks: it "
                                     "reduces in the interpreter's tree order"),
])
def test_chunks_that_cannot_be_are_located_errors(kwargs, message):
    with pytest.raises(CompileError) as e:
        tessera.compile(W.source(2).replace("mesh=mesh)", f"mesh=mesh, {kwargs})"), "tp.py", target="cpu")
    assert message in str(e.value)
