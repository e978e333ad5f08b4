"""The version fixtures (tests/data/README.md): images an earlier release built, which this one must load and run,
or refuse by the compatibility rule of docs/image-format.md ("Versions") with a message naming both versions."""

from __future__ import annotations

import pathlib
import struct

import numpy as np
import pytest

from tessera import ceil_div, executor, plan, runtime
from tessera.image import ImageError, Versions, read_image, symbols
from tessera.image.format import BYTECODE_VERSION, IR_MAJOR, IR_MINOR, NOTE_NAME, NT_TESSERA_IR_VERSION
from tessera.tools import objdump

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
FIXTURES = ("saxpy.cpu.tessera", "saxpy.cpu-ptx.tessera", "function.cpu.tessera")
LINKED = "linked.cpu.tessera"   # plan format 4, made by a later release than FIXTURES (README.md)


def _bytes(name: str) -> bytes:
    return (DATA / name).read_bytes()


def _patched(data: bytes, ir=None, bytecode=None, plan_version=None, drop=False) -> bytes:
    """A copy of image `data` whose IR version note records other versions (or, with `drop`, is no IR version
    note: its type becomes one readers skip, as an image made before the note existed)."""
    img = read_image(data)
    note = next(s for s in img.sections if s.name == ".note.tessera")
    header = struct.pack("<III", len(NOTE_NAME), 16, NT_TESSERA_IR_VERSION) + NOTE_NAME
    at = note.offset + note.data.index(header)
    out = bytearray(data)
    if drop:
        struct.pack_into("<I", out, at + 8, 0x7fff)
        return bytes(out)
    v = img.versions
    ir = ir or v.ir
    struct.pack_into("<IIII", out, at + len(header), ir[0], ir[1],
                     v.bytecode if bytecode is None else bytecode, v.plan if plan_version is None else plan_version)
    return bytes(out)


def test_fixtures_are_small_and_committed_versions():
    assert sum((DATA / f).stat().st_size for f in FIXTURES) < 1 << 20
    for f in FIXTURES:
        v = read_image(_bytes(f)).versions
        assert v == Versions((1, 0), 6, 3), f


def test_linked_fixture_of_plan_version_4_runs():
    """linked.cpu.tessera: module_caller.py's `head` calls module_callee.py's exported `gated` through a call
    step, the two compiled apart and linked by tessera-link (plan format 4, `.tessera.rel`)."""
    data = _bytes(LINKED)
    assert len(data) < 1 << 18 and read_image(data).versions == Versions((1, 0), 6, 4)
    syms = symbols.Symbols.decode(read_image(data).section(symbols.SECTION))
    assert sorted(syms.exports) == ["gated", "head"] and not syms.imports and not syms.relocations
    prog = executor.load(data)
    rng = np.random.default_rng(2)
    X, W1, b1, W2 = (rng.standard_normal(s, dtype=np.float32) for s in [(6, 16), (16, 24), (24,), (24, 4)])
    z = np.maximum(X.astype(np.float64) @ W1 + b1, 0) @ W2
    ref = np.exp(z - z.max(-1, keepdims=True))
    ref /= ref.sum(-1, keepdims=True)
    np.testing.assert_allclose(prog.function("head")(X, W1, b1, W2), ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["saxpy.cpu.tessera", "saxpy.cpu-ptx.tessera"])
def test_kernel_fixtures_run(name):
    mod = runtime.load(DATA / name)
    rng = np.random.default_rng(0)
    n, a = 10_001, np.float32(2.5)
    X, Y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    Out = np.empty_like(X)
    mod.saxpy(a, X, Y, Out, grid=(ceil_div(n, 256),), block=(256,))
    np.testing.assert_allclose(Out, a * X + Y, rtol=1e-6, atol=1e-6)
    warps = 64
    X = rng.standard_normal(warps * 32, dtype=np.float32)
    Out = np.zeros(warps, dtype=np.float32)
    mod.warp_reduce_sum(X, Out, grid=(warps * 32 // 128,), block=(128,))
    np.testing.assert_allclose(Out, X.reshape(warps, 32).sum(axis=1, dtype=np.float64), rtol=1e-5, atol=1e-4)


def test_function_fixture_runs():
    prog = executor.load(DATA / "function.cpu.tessera")
    assert sorted(prog.functions) == ["mlp", "scale_rows"]
    rng = np.random.default_rng(1)
    X = rng.standard_normal((7, 32), dtype=np.float32)
    W1 = rng.standard_normal((32, 64), dtype=np.float32) / 8
    b1 = rng.standard_normal(64, dtype=np.float32)
    W2 = rng.standard_normal((64, 32), dtype=np.float32) / 8
    ref = np.maximum(X.astype(np.float64) @ W1 + b1, 0) @ W2 + X
    np.testing.assert_allclose(prog.function("mlp")(X, W1, b1, W2), ref, rtol=1e-4, atol=1e-4)
    X = rng.standard_normal((5, 48), dtype=np.float32)
    g = rng.standard_normal(48, dtype=np.float32)
    x = X.astype(np.float64)
    ref = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g
    np.testing.assert_allclose(prog.function("scale_rows")(X, g), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_graph_ir_parses(name):
    from tessera.dialects import make_context
    from tessera.mlir import ir
    data = read_image(_bytes(name)).graph_ir
    assert data is not None and data[:4] == b"ML\xefR"
    with make_context():
        assert "func.func" in str(ir.Module.parse(data))


def test_objdump_prints_the_versions(tmp_path, capsys):
    assert objdump.main([str(DATA / "function.cpu.tessera"), "--no-ir"]) == 0
    out = capsys.readouterr().out
    assert "versions: {ir: 1.0, bytecode: 6, plan: 3}" in out
    assert f"reader: {{ir: {IR_MAJOR}.{IR_MINOR}, bytecode: {BYTECODE_VERSION}, plan: {plan.VERSION}}}" in out
    assert "refused" not in out


@pytest.mark.parametrize("patch, names", [
    (dict(ir=(IR_MAJOR, IR_MINOR + 1)), [f"{IR_MAJOR}.{IR_MINOR + 1}", f"{IR_MAJOR}.{IR_MINOR}"]),
    (dict(ir=(IR_MAJOR + 1, 0)), [f"{IR_MAJOR + 1}.0", f"{IR_MAJOR}.{IR_MINOR}"]),
    (dict(bytecode=BYTECODE_VERSION + 1), [f"bytecode {BYTECODE_VERSION + 1}", f"bytecode {BYTECODE_VERSION}"]),
    (dict(drop=True), ["IR version 0", f"{IR_MAJOR}.{IR_MINOR}"]),
])
def test_newer_or_unrecorded_graph_ir_is_refused_by_name(patch, names, tmp_path, capsys):
    data = _patched(_bytes("function.cpu.tessera"), **patch)
    img = read_image(data)   # the kernels stay readable: the ABI note governs them
    with pytest.raises(ImageError) as e:
        img.graph_ir
    for n in names:
        assert n in str(e.value)
    path = tmp_path / "patched.tessera"
    path.write_bytes(data)
    assert objdump.main([str(path)]) == 0   # shows the image, says what it refuses, prints no IR
    out = capsys.readouterr().out
    assert "refused_graph_ir:" in out and "graph_ir: |" not in out


@pytest.mark.parametrize("patch, names", [
    (dict(plan_version=plan.VERSION + 1), [f"version {plan.VERSION + 1}", f"version {plan.VERSION}"]),
    (dict(plan_version=min(plan.READS) - 1), [f"version {min(plan.READS) - 1}", f"version {plan.VERSION}"]),
    (dict(drop=True), ["version 0", f"version {plan.VERSION}"]),
])
def test_other_plan_versions_are_refused_by_name(patch, names):
    data = _patched(_bytes("function.cpu.tessera"), **patch)
    with pytest.raises(runtime.Error) as e:
        executor.load(data)
    assert "TSR_ERROR_BAD_IMAGE" in str(e.value) or getattr(e.value, "status", None)
    for n in names:
        assert n in str(e.value)


def test_refused_ir_leaves_kernels_loadable():
    mod = runtime.load(_patched(_bytes("saxpy.cpu.tessera"), ir=(IR_MAJOR + 1, 0)))
    X = np.arange(300, dtype=np.float32)
    Out = np.empty_like(X)
    mod.saxpy(np.float32(2), X, X, Out, grid=(2,), block=(256,))
    np.testing.assert_array_equal(Out, 3 * X)


def test_version_note_round_trip_and_older_minor_rule():
    from tessera.image.format import ir_refusal, plan_refusal
    assert ir_refusal(Versions((IR_MAJOR, IR_MINOR), BYTECODE_VERSION, plan.VERSION)) is None
    assert ir_refusal(Versions((IR_MAJOR, 0), max(BYTECODE_VERSION - 1, 0), plan.VERSION)) is None  # older loads
    assert plan_refusal(Versions((IR_MAJOR, 0), BYTECODE_VERSION, plan.VERSION), plan.VERSION) is None
    assert ir_refusal(Versions.NONE) and plan_refusal(Versions.NONE, plan.VERSION)


def test_pipelined_fixture_of_plan_version_6_runs():
    """pipelined.cpu.tessera (plan format 6, Graph IR 1.1): tests/data/pipelined.py's all_reduce in three row
    chunks, each chunk's GEMM writing a window of the result (alias steps with offsets) and reduced in place,
    run with a communicator of one rank (MPI, the test extra's mpich) against numpy, at a T the chunks split
    unevenly (300: 128, 128, 44 rows)."""
    import sys
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    from mpi_jobs import mpiexec_or_skip
    mpiexec_or_skip()
    from tessera import comm
    data = _bytes("pipelined.cpu.tessera")
    assert len(data) < 1 << 17 and read_image(data).versions == Versions((1, 1), 6, 6)
    p = plan.decode(read_image(data).plan)["tp"]
    assert sum(isinstance(s, plan.CollectiveStep) for s in p.steps) == 3
    assert [s.offset for s in p.steps if isinstance(s, plan.AliasStep)][:3] == ["0", "0", "0"]
    c = comm.Communicator.create(1, 0, comm.unique_id("mpi"), backend="mpi")
    rng = np.random.default_rng(6)
    X, W = rng.standard_normal((300, 8), dtype=np.float32), rng.standard_normal((8, 4), dtype=np.float32)
    got = executor.load(data).function("tp")(X, W, comm=c)
    np.testing.assert_allclose(got, X.astype(np.float64) @ W, rtol=1e-5, atol=1e-5)
    c.close()


def test_quantized_fixture_of_plan_version_7_runs():
    """quantized.cpu.tessera (plan format 7, Graph IR 1.2): tests/data/quantized.py's per-channel int8 round trip
    (scales as inputs) equals numpy's quantize rule bit for bit, and its tile program's accumulator broadcast is
    checked at the call (the plan's 'broadcasts'): C of 7 columns against B's 5 is refused."""
    data = _bytes("quantized.cpu.tessera")
    assert len(data) < 1 << 17 and read_image(data).versions == Versions((1, 2), 6, 7)
    assert plan.decode(read_image(data).plan)["accumulate"].broadcasts == (("B_1", "C_1"), ("A_0", "C_0"))
    program = executor.load(data)
    rng = np.random.default_rng(7)
    X = (rng.standard_normal((37, 8)) * 40).astype(np.float32)
    s = np.linspace(0.05, 0.4, 8, dtype=np.float32)
    q = np.clip(np.round(X / s), -128, 127).astype(np.int8)   # X / s in f32, rounded half to even, saturated
    np.testing.assert_array_equal(program.function("roundtrip")(X, s), q.astype(np.float32) * s)
    A, B = rng.standard_normal((3, 2), dtype=np.float32), rng.standard_normal((2, 5), dtype=np.float32)
    C = rng.standard_normal((3, 5), dtype=np.float32)
    want = A @ B + C
    np.testing.assert_allclose(program.function("accumulate")(A, B, C), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"B.shape\[1\] = 5 and C.shape\[1\] = 7 do not broadcast"):
        program.function("accumulate")(A, B, np.zeros((3, 7), np.float32))
