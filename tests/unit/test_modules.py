"""Modules with exports and imports (issue 14, item 3; programming model Part VIII): an exported @function
of one source file called from another, run by the interpreter from its source, compiled into a plan call
step with the image's symbols and relocations (`.tessera.rel`), and every mistake located at file:line:col."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tessera import compiler, plan, tessera_frontend_compile
from tessera.diagnostics import CompileError
from tessera.image import read_image, symbols
from tessera.options import CompileOptions

RNG = np.random.default_rng(14)

BLOCKS = '''
from tessera import function, op, tensor, f32


@function(export=True)
def mlp_block(X: tensor[f32, "M", "K"], W: tensor[f32, "K", "N"], b: tensor[f32, "N"]):
    return op.relu(op.bias_add(X @ W, b)) + double(b)


@function
def double(b: tensor[f32, "N"]):
    return b * 2.0
'''

MODEL = '''
from tessera import function, op, tensor, f32
from blocks import mlp_block


@function(export=True)
def model(X: tensor[f32, "M", 16], W1: tensor[f32, 16, 32], b1: tensor[f32, 32], W2: tensor[f32, 32, 8]):
    h = mlp_block(X, W1, b1)
    return op.softmax(h @ W2)
'''


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def numpy_model(X, W1, b1, W2):
    h = np.maximum(X @ W1 + b1, 0) + 2 * b1
    e = np.exp(h @ W2 - (h @ W2).max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.fixture
def files(tmp_path):
    (tmp_path / "blocks.py").write_text(BLOCKS)
    (tmp_path / "model.py").write_text(MODEL)
    return tmp_path


def test_the_interpreter_runs_an_imported_function_from_its_source(files):
    X, W1, b1, W2 = randn(5, 16), randn(16, 32), randn(32), randn(32, 8)
    m = tessera_frontend_compile(MODEL, {"filename": str(files / "model.py"), "define_imports": True})
    np.testing.assert_allclose(m.interpret("model", X, W1, b1, W2), numpy_model(X, W1, b1, W2), rtol=1e-5, atol=1e-6)
    # and through the decorator, as a Python program that imports the other file runs it
    (files / "run.py").write_text(textwrap.dedent("""
        import numpy as np, model
        r = np.random.default_rng(0)
        a = [r.standard_normal(s).astype(np.float32) for s in [(3, 16), (16, 32), (32,), (32, 8)]]
        print(float(model.model(*a).sum()))
    """))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(files), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "run.py"], cwd=files, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert abs(float(out.stdout) - 3.0) < 1e-4   # three rows of a softmax


def test_a_compiled_call_of_an_import_is_a_call_step_with_a_relocation(files):
    r = compiler.compile_file(str(files / "model.py"), CompileOptions())
    steps = r.metadata["plans"]["model"]["steps"]
    calls = [s for s in steps if "call" in s]
    assert len(calls) == 1 and calls[0]["call"] == "mlp_block" and len(calls[0]["args"]) == 3
    assert "mlp_block" not in r.metadata["plans"]   # the import is resolved by tessera-link
    img = read_image(r.image)
    assert json.loads(img.plan)["version"] == plan.VERSION == 8
    syms = symbols.Symbols.decode(img.section(symbols.SECTION))
    assert list(syms.exports) == ["model"] and list(syms.imports) == ["mlp_block"]
    assert syms.imports["mlp_block"]["module"] == "blocks"
    assert symbols.show_signature(syms.imports["mlp_block"]["signature"]) == \
        "(X: f32[M, K], W: f32[K, N], b: f32[N]) -> f32[M, N]"
    index = steps.index(calls[0])
    assert syms.relocations == [symbols.Relocation("model", index, "mlp_block")]
    # the exporting image exports exactly its exported function, with the same signature
    b = symbols.Symbols.decode(read_image(compiler.compile_file(str(files / "blocks.py")).image)
                               .section(symbols.SECTION))
    assert b.exports == {"mlp_block": syms.imports["mlp_block"]["signature"]} and not b.imports
    assert symbols.mismatch(syms.imports["mlp_block"]["signature"], b.exports["mlp_block"]) is None


def test_imports_are_found_on_the_include_path(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "blocks.py").write_text(BLOCKS)
    (tmp_path / "model.py").write_text(MODEL)
    with pytest.raises(CompileError, match="no source file for module 'blocks'"):
        compiler.compile_file(str(tmp_path / "model.py"))
    r = compiler.compile_file(str(tmp_path / "model.py"), CompileOptions(include=(str(lib),)))
    assert any("call" in s for s in r.metadata["plans"]["model"]["steps"])


@pytest.mark.parametrize("blocks, model, where, message", [
    (BLOCKS, MODEL.replace("from blocks", "from nowhere"), (3, 1), "no source file for module 'nowhere'"),
    (BLOCKS, MODEL.replace("import mlp_block", "import mlp_block, double").replace("h = mlp_block(X, W1, b1)",
                                                                                     "h = double(b1) + X @ W1"),
     (3, 1), "'double': it is not exported by blocks.py"),
    (BLOCKS.replace("def mlp_block", "def mlp_blok"), MODEL, (3, 1), "blocks.py defines no @function 'mlp_block'"),
    (BLOCKS, MODEL.replace("mlp_block(X, W1, b1)", "mlp_block(X, W2, b1)"), (8, 9),
     "argument 2 \\('W'\\) of 'mlp_block', axis 0"),
    (BLOCKS, MODEL.replace("mlp_block(X, W1, b1)", "mlp_block(X, W1)"), (8, 9), "missing b"),
    (BLOCKS.replace("export=True", "export=1"), MODEL, (5, 18), "blocks.py:5:18: error: export= takes True or False"),
])
def test_mistakes_are_located(tmp_path, blocks, model, where, message):
    (tmp_path / "blocks.py").write_text(blocks)
    (tmp_path / "model.py").write_text(model)
    with pytest.raises(CompileError, match=message) as e:
        compiler.compile_file(str(tmp_path / "model.py"))
    assert (e.value.line, e.value.col) == where, str(e.value)


@pytest.mark.parametrize("blocks, message", [
    ((BLOCKS + "# \xff\n").encode("latin-1"), "cannot import from blocks.py: it is not UTF-8 text"),
    (BLOCKS.replace("def double", "def double(").encode(), "blocks.py:"),
    (BLOCKS.encode() + b"x = 1" + b" + 1" * 400_000 + b"\n", "nested too deeply"),
])
def test_an_imported_file_the_parser_refuses_is_a_located_error(tmp_path, blocks, message):
    """Regression: the compile cache's key reads the imported files first (frontend/sources.py), and a file it
    could not parse or decode stopped the compile there with a traceback instead of the frontend's error."""
    (tmp_path / "blocks.py").write_bytes(blocks)
    (tmp_path / "model.py").write_text(MODEL)
    with pytest.raises(CompileError, match=message):
        compiler.compile_file(str(tmp_path / "model.py"))


def test_an_import_cycle_is_refused(tmp_path):
    (tmp_path / "a.py").write_text("from b import g\n\n@function(export=True)\n"
                                   "def f(X: tensor[f32, 'N']):\n    return g(X)\n")
    (tmp_path / "b.py").write_text("from a import f\n\n@function(export=True)\n"
                                   "def g(X: tensor[f32, 'N']):\n    return f(X)\n")
    with pytest.raises(CompileError, match="cycle|recursively"):
        compiler.compile_file(str(tmp_path / "a.py"))


def test_the_compile_cache_keys_on_the_imported_sources(files, tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_CACHE", "1")
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(tmp_path / "cache"))
    first = compiler.compile_file(str(files / "model.py"))
    assert not first.metadata.get("cached") and compiler.compile_file(str(files / "model.py")).metadata["cached"]
    (files / "blocks.py").write_text(BLOCKS.replace('W: tensor[f32, "K", "N"]', 'W: tensor[f32, "K", 64]'))
    with pytest.raises(CompileError, match="argument 2 \\('W'\\) of 'mlp_block', axis 1"):
        compiler.compile_file(str(files / "model.py"))


def test_tessera_cc_takes_include_paths(tmp_path, capsys):
    from tessera.tools import cc
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "blocks.py").write_text(BLOCKS)
    (tmp_path / "model.py").write_text(MODEL)
    assert cc.main([str(tmp_path / "model.py"), "-o", str(tmp_path / "m.tessera")]) == 1
    assert "model.py:3:1: error: cannot import 'mlp_block'" in capsys.readouterr().err
    assert cc.main([str(tmp_path / "model.py"), "-I", str(lib), "-o", str(tmp_path / "m.tessera")]) == 0
    assert symbols.SECTION in [s.name for s in read_image((tmp_path / "m.tessera").read_bytes()).sections]
