"""No mistake in a user's program reaches them as a Python traceback: mutated versions of every example
either compile or fail with a CompileError located in the user's file."""

import pathlib
import random

import pytest

from tessera import compiler
from tessera.diagnostics import CompileError

ROOT = pathlib.Path(__file__).resolve().parents[2] / "examples"
SOURCES = sorted(ROOT.glob("*.py")) + sorted((ROOT / "graph").glob("*.py"))
TOKENS = ["0", "-1", "1.5", "'x'", "None", "X", "op.relu", "(", ")", ",", "[", "]", "@", "+", "tensor[f32]",
          "axis=7", "eps='a'", "p=2", "seed=-1", "dim=9", "mesh=3", "range(2)", "launch.thread_id()", ".T"]


def mutants(text: str, rng: random.Random, n: int):
    lines = text.splitlines()
    body = [i for i, line in enumerate(lines) if line.startswith("    ") and line.strip()]
    for _ in range(n):
        new = list(lines)
        i = rng.choice(body)
        words = new[i].split(" ")
        j = rng.randrange(len(words))
        kind = rng.random()
        if kind < 0.4:
            words[j] = rng.choice(TOKENS)
        elif kind < 0.7:
            words.insert(j, rng.choice(TOKENS))
        else:
            del words[j]
        new[i] = " ".join(words)
        yield "\n".join(new) + "\n"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_mutated_programs_fail_cleanly(path):
    rng = random.Random(path.name)
    text = path.read_text()
    outcomes = {"compiled": 0, "located errors": 0}
    for src in mutants(text, rng, 40):
        try:
            compiler.compile_source(src, "user.py", stop_after="canonical")
            outcomes["compiled"] += 1
        except CompileError as e:
            assert e.filename == "user.py" and e.line >= 1, f"unlocated error {e!s} for:\n{src}"
            outcomes["located errors"] += 1
    assert outcomes["located errors"] > 0
