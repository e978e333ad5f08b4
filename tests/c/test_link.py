"""Linking images (issue 14, item 4): two source files, one exporting a function the other calls, compiled
separately, linked with tessera-link and run from C (tests/c/host_link.c) and Python (tessera.executor, a
binding over the same C executor) against the interpreter and numpy;
each refusal of tessera-link names the symbol and both images; tessera-objdump shows symbols and relocations."""
import dataclasses

import numpy as np
import pytest

from hostutil import run_host_function

RNG = np.random.default_rng(14)

BLOCKS = '''
from tessera import function, op, tensor, f32


@function(export=True)
def mlp_block(X: tensor[f32, "M", "K"], W: tensor[f32, "K", "N"], b: tensor[f32, "N"]):
    return op.relu(op.bias_add(X @ W, b))


@function
def helper(X: tensor[f32, "M", "K"]):
    return X * 3.0
'''

MODEL = '''
from tessera import function, op, tensor, f32
from blocks import mlp_block


@function(export=True)
def model(X: tensor[f32, "M", 16], W1: tensor[f32, 16, 32], b1: tensor[f32, 32], W2: tensor[f32, 32, 8]):
    h = mlp_block(X, W1, b1)
    return op.softmax(helper(h) @ W2)


@function
def helper(X: tensor[f32, "M", "K"]):
    return X * 0.5
'''


def numpy_model(X, W1, b1, W2):
    z = 0.5 * np.maximum(X @ W1 + b1, 0) @ W2
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    compiler = pytest.importorskip("tessera.compiler")
    d = tmp_path_factory.mktemp("link")
    (d / "blocks.py").write_text(BLOCKS)
    (d / "model.py").write_text(MODEL)
    for name in ("blocks", "model"):
        (d / f"{name}.tessera").write_bytes(compiler.compile_file(str(d / f"{name}.py")).image)
    return d


def link(*args):
    from tessera.tools import link as tool
    return tool.main([str(a) for a in args])


def test_linked_images_run_from_c_as_the_interpreter_and_numpy(build_host, images, tmp_path, capsys):
    from tessera import tessera_frontend_compile
    from tessera.image import read_image, symbols
    out = images / "ab.tessera"
    assert link(images / "model.tessera", images / "blocks.tessera", "-o", out) == 0
    img = read_image(out.read_bytes())
    syms = symbols.Symbols.decode(img.section(symbols.SECTION))
    assert sorted(syms.exports) == ["mlp_block", "model"] and not syms.imports and not syms.relocations
    # each input's code stays its own object; the second input's helper and its kernel are renamed
    assert {k.section for k in img.kernels} == {".tessera.code.cpu", ".tessera.code.cpu.1"}
    assert {"helper__elementwise0", "helper__elementwise0__1"} <= {k.name for k in img.kernels}
    from tessera import plan
    plans = plan.decode(img.plan)
    assert {"model", "helper", "mlp_block", "helper__1"} == set(plans)
    assert plans["helper__1"].steps[0].kernel == "helper__elementwise0__1"

    X, W1, b1, W2 = (RNG.standard_normal(s).astype(np.float32) for s in [(5, 16), (16, 32), (32,), (32, 8)])
    got, stdout = run_host_function(build_host("host_link.c"), out.read_bytes(), "model", [X, W1, b1, W2], [(5, 8)],
                                    tmp_path, [str(images / "model.tessera"), "mlp_block"])
    assert "ok   the unlinked call says to link it" in stdout
    got = np.frombuffer(got[0], np.float32).reshape(5, 8)
    ref = tessera_frontend_compile(MODEL, {"filename": str(images / "model.py"), "define_imports": True}) \
        .interpret("model", X, W1, b1, W2)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got, numpy_model(X, W1, b1, W2), rtol=1e-4, atol=1e-6)
    # from Python, through the same executor (tessera.executor binds tsrFunctionCall): bit for bit
    from tessera import executor, runtime
    np.testing.assert_array_equal(executor.load(out.read_bytes()).function("model")(X, W1, b1, W2), got)
    with pytest.raises(runtime.Error, match="function 'model': step 3 calls 'mlp_block', an imported function this "
                                            "image does not define: link it with tessera-link"):
        executor.load((images / "model.tessera").read_bytes()).function("model")(X, W1, b1, W2)
    # the renamed helper of the second image runs its own kernel
    (tmp_path / "h").mkdir()
    got, _ = run_host_function(build_host("host_function.c"), out.read_bytes(), "helper__1", [X], [(5, 16)],
                               tmp_path / "h")
    np.testing.assert_array_equal(np.frombuffer(got[0], np.float32).reshape(5, 16), X * np.float32(3.0))


def test_objdump_shows_symbols_and_relocations(images, capsys):
    from tessera.tools import objdump
    assert objdump.main([str(images / "model.tessera"), "--no-ir"]) == 0
    text = capsys.readouterr().out
    assert '  - {name: model, bind: export, signature: "(X: f32[M, 16], W1: f32[16, 32], b1: f32[32], ' \
           'W2: f32[32, 8]) -> f32[M, 8]"}' in text
    assert '  - {name: mlp_block, bind: import, module: blocks, signature: "(X: f32[M, K], W: f32[K, N], ' \
           'b: f32[N]) -> f32[M, N]"}' in text
    assert "relocations:\n  - {function: model, step: 3, kind: call, symbol: mlp_block}" in text


def refusal(capsys, *args) -> str:
    assert link(*args) == 1
    return capsys.readouterr().err


def test_unresolved_imports_are_refused_unless_allowed(images, tmp_path, capsys):
    err = refusal(capsys, images / "model.tessera", "-o", tmp_path / "x.tessera")
    assert "unresolved import 'mlp_block' of model.tessera (from module 'blocks')" in err
    assert not (tmp_path / "x.tessera").exists()
    assert link(images / "model.tessera", "-o", tmp_path / "x.tessera", "--allow-unresolved") == 0
    from tessera.image import read_image, symbols
    syms = symbols.Symbols.decode(read_image((tmp_path / "x.tessera").read_bytes()).section(symbols.SECTION))
    assert list(syms.imports) == ["mlp_block"] and syms.relocations == [symbols.Relocation("model", 3, "mlp_block")]
    # and a later link resolves it
    assert link(tmp_path / "x.tessera", images / "blocks.tessera", "-o", tmp_path / "y.tessera") == 0


def test_duplicate_exports_and_overwrites_are_refused(images, tmp_path, capsys):
    (tmp_path / "again.tessera").write_bytes((images / "blocks.tessera").read_bytes())
    err = refusal(capsys, images / "blocks.tessera", tmp_path / "again.tessera", "-o", tmp_path / "x.tessera")
    assert "duplicate symbol 'mlp_block': exported by blocks.tessera and by again.tessera" in err
    err = refusal(capsys, images / "model.tessera", images / "blocks.tessera", "-o", images / "blocks.tessera")
    assert "refusing to overwrite an input" in err
    err = refusal(capsys, images / "blocks.tessera", images / "blocks.tessera", "-o", tmp_path / "x.tessera")
    assert "is given twice" in err


def test_signature_mismatch_is_refused(images, tmp_path, capsys):
    compiler = pytest.importorskip("tessera.compiler")
    (tmp_path / "blocks.py").write_text(BLOCKS.replace('X: tensor[f32, "M", "K"], W', 'X: tensor[f32, "M", 16], W'))
    (tmp_path / "other.tessera").write_bytes(compiler.compile_file(str(tmp_path / "blocks.py")).image)
    err = refusal(capsys, images / "model.tessera", tmp_path / "other.tessera", "-o", tmp_path / "x.tessera")
    assert "signature mismatch for 'mlp_block': model.tessera imports (X: f32[M, K], W: f32[K, N], b: f32[N]) -> " \
           "f32[M, N] (from module 'blocks'), other.tessera exports (X: f32[M, 16], W: f32[K, N], b: f32[N]) -> " \
           "f32[M, N]" in err


def test_abi_and_target_mismatches_are_refused(images):
    from tessera.tools import link as tool
    from tessera.tools.errors import ToolError
    a, b = tool._read(str(images / "model.tessera")), tool._read(str(images / "blocks.tessera"))
    b.img.abi = (1, 1)
    with pytest.raises(ToolError, match=r"ABI version mismatch: model.tessera is ABI 1.0, blocks.tessera is ABI 1.1"):
        tool.link([a, b])
    b = tool._read(str(images / "blocks.tessera"))
    b.img.kernels = [dataclasses.replace(k, target="ptx", arch="sm_90a") for k in b.img.kernels]
    with pytest.raises(ToolError, match=r"target mismatch: model.tessera is for cpu \(.*\), blocks.tessera for "
                                        r"ptx \(sm_90a\)"):
        tool.link([a, b])


def test_a_cycle_of_call_steps_stops_at_the_depth_limit(build_host, tmp_path):
    from hostutil import run
    from tessera import plan
    from tessera.image import write_image
    v = {"v0": plan.Value("f32", ("1",)), "v1": plan.Value("f32", ("1",))}
    ping = plan.Plan(params=("x",), args=("v0",), results=("v1",), values=v,
                     steps=(plan.CallStep("pong", ("v0",), ("v1",)),))
    pong = dataclasses.replace(ping, steps=(plan.CallStep("ping", ("v0",), ("v1",)),))
    path = tmp_path / "cycle.tessera"
    path.write_bytes(write_image([], {plan.SECTION: plan.encode({"ping": ping, "pong": pong})}))
    out = run([build_host("host_link.c"), "--cycle", path, "ping"]).stdout
    assert "ok   a cycle of calls stops at the depth limit" in out and "function 'ping': step 0 (call of 'pong'): function 'pong': step 0 calls" in out


def test_images_with_collective_steps_link(images, tmp_path):
    """Regression: tessera-link renamed every non-call, non-alias step's kernel, and a collective step has none
    (dataclasses.replace raised TypeError). Its steps, pipelined chunks' offset aliases included, pass through."""
    compiler = pytest.importorskip("tessera.compiler")
    from tessera import plan
    from tessera.image import read_image
    (tmp_path / "tp.py").write_text('''
from tessera import dist, f32, function, op, tensor

mesh = dist.Mesh(axes=["tp"], devices=range(2))


@function(export=True)
def tp(X: tensor[f32, "T", 8], W: tensor[f32, 8, 4]):
    return op.all_reduce(op.matmul(X, W), mesh=mesh, chunks=2)
''')
    (tmp_path / "tp.tessera").write_bytes(compiler.compile_file(str(tmp_path / "tp.py")).image)
    out = tmp_path / "linked.tessera"
    assert link(tmp_path / "tp.tessera", images / "blocks.tessera", "-o", out) == 0
    before = plan.decode(read_image((tmp_path / "tp.tessera").read_bytes()).plan)["tp"]
    after = plan.decode(read_image(out.read_bytes()).plan)["tp"]
    assert after.steps == before.steps
    assert sum(isinstance(s, plan.CollectiveStep) for s in after.steps) == 2
