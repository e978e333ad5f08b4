"""What the docs show runs: every python block of README.md and docs/*.md, and every example, as plain Python.

Each block runs alone, as a file (a `@kernel` compiles its own source file) in a fresh subprocess whose cwd is
a temporary directory laid out as the docs assume a reader's checkout is: `examples/`, and `saxpy.tessera`,
which the quick start's `tessera-cc examples/saxpy.py -o saxpy.tessera` makes. A block is left out only where
an HTML comment right before it gives the reason, `<!-- not run: needs a GPU -->`; those show as skips.
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
EXAMPLES = sorted((REPO / "examples").rglob("*.py"))
TIMEOUT_S = 300
NOT_RUN = re.compile(r"<!--\s*not run:\s*(\S.*?)\s*-->")


def python_blocks(path: Path):
    """(first line, text, reason not run or None) of each ```python block of a markdown file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            before = next((line for line in reversed(lines[:i]) if line.strip()), "")
            reason = NOT_RUN.fullmatch(before.strip())
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            yield i + 2, "\n".join(lines[i + 1:end]) + "\n", reason.group(1) if reason else None
            i = end
        i += 1


BLOCKS = [pytest.param(f"{path.relative_to(REPO)}:{line}", text, reason, id=f"{path.relative_to(REPO)}:{line}")
          for path in DOCS for line, text, reason in python_blocks(path)]


@pytest.fixture(scope="session")
def saxpy_image(tmp_path_factory) -> Path:
    import tessera
    image = tmp_path_factory.mktemp("image") / "saxpy.tessera"
    image.write_bytes(tessera.compile((REPO / "examples" / "saxpy.py").read_text(), "saxpy.py"))
    return image


@pytest.fixture
def reader_dir(tmp_path, saxpy_image) -> Path:
    shutil.copytree(REPO / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(saxpy_image, tmp_path / "saxpy.tessera")
    return tmp_path


def run_python(args, cwd: Path):
    p = subprocess.run([sys.executable, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                       timeout=TIMEOUT_S)
    assert p.returncode == 0, f"exit status {p.returncode}\n{p.stdout}\n{p.stderr}"


@pytest.mark.parametrize("where, text, reason", BLOCKS)
def test_doc_block_runs(where, text, reason, reader_dir):
    if reason:
        pytest.skip(f"{where} not run: {reason}")
    block = reader_dir / "block.py"
    block.write_text(text, encoding="utf-8")
    run_python([block], reader_dir)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(REPO)))
def test_example_runs(path, reader_dir):
    args = [reader_dir / path.relative_to(REPO)]
    if path.name == "run_saxpy.py":  # it launches the image that tessera-cc made of examples/saxpy.py
        args.append(reader_dir / "saxpy.tessera")
    run_python(args, reader_dir)


def test_the_docs_have_python_blocks():
    """The extraction still finds the blocks (a changed fence style would otherwise pass by finding none)."""
    assert len(BLOCKS) >= 20 and all(b.values[1].strip() for b in BLOCKS)


def test_the_modules_example_compiles_links_and_runs(tmp_path):
    """docs/language.md's two-file module example (blocks.py, model.py), as files: each compiled by tessera-cc,
    linked by tessera-link, and model run by tessera.executor against numpy."""
    import numpy as np

    from tessera import executor
    doc = REPO / "docs" / "language.md"
    text = next(t for _, t, _ in python_blocks(doc) if t.startswith("# blocks.py"))
    blocks, model = text.split("# model.py\n")
    (tmp_path / "blocks.py").write_text(blocks, encoding="utf-8")
    (tmp_path / "model.py").write_text(model, encoding="utf-8")
    for name in ("blocks", "model"):
        run_python(["-m", "tessera.tools.cc", f"{name}.py", "-o", f"{name}.tessera"], tmp_path)
    run_python(["-m", "tessera.tools.link", "model.tessera", "blocks.tessera", "-o", "linked.tessera"], tmp_path)
    rng = np.random.default_rng(8)
    X, W1, b1, W2 = (rng.standard_normal(s).astype(np.float32) for s in ((5, 16), (16, 32), (32,), (32, 8)))
    got = executor.load(tmp_path / "linked.tessera").model(X, W1, b1, W2)
    h = np.maximum(X.astype(np.float64) @ W1 + b1, 0) @ W2
    ref = np.exp(h - h.max(-1, keepdims=True))
    np.testing.assert_allclose(got, ref / ref.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
