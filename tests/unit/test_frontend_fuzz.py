"""The frontend fuzzer: mutated example programs compile, or fail with a located error.

Every example (examples/**/*.py), every lit program (tests/lit/**/*.py) and every program held in a string of
the unit tests is mutated by a seeded generator — numbers made huge, negative, 2^63, 2^64 or floats, names
swapped, call arguments dropped or added, operators changed, keyword arguments of the wrong type, lines
duplicated or deleted, NUL bytes and unicode inserted — and compiled for the CPU through the `kernels` stage.
Each outcome must be a success or a CompileError reading ``file:line:col: error:`` with a line of the file;
anything else fails with the input printed.

CI runs a few hundred inputs. A longer campaign prints its counts:

    python tests/unit/test_frontend_fuzz.py --inputs 5000 --seed 1
"""

from __future__ import annotations

import argparse
import ast
import collections
import copy
import pathlib
import random
import re
import signal
import sys
import textwrap
import traceback

import pytest

from tessera.compiler import compile_source
from tessera.diagnostics import CompileError
from tessera.options import CompileOptions

ROOT = pathlib.Path(__file__).resolve().parents[2]
CI_INPUTS = 400
CI_SEED = 13
# A compilation's limit: valid but silly programs must not hang the compiler. The largest seed,
# examples/graph/train_transformer.py (a training step: forward, backward, update), takes 10 s through the
# kernels stage on an idle 2-core machine; a mutation of it ran past 20 s under load.
SECONDS = 60
LOCATED = re.compile(r"^(?P<file>[^\n]*):(?P<line>\d+):(?P<col>\d+): error: ")

# What a mutated number becomes: the edges of the integer types, of float32 and of the index type.
NUMBERS = [0, -1, -7, 2**31, 2**32, 2**63 - 1, 2**63, 2**64, 2**64 + 1, 10**30, -2**63, -2**64, 1.5, -0.5,
           1e300, float("inf"), float("nan"), 3]
# What a keyword argument's value becomes: values of the wrong type.
WRONG_VALUES = ["1", "'x'", "None", "()", "[]", "{}", "1.5", "2**64", "-1", "(4, None)", "{**x}", "{[1]: 2}",
                "lambda: 0", "X", "f32", "...", "True", "b'\\x00'", "1j"]
UNICODE = ["é", "λ", "\u200b", "\U0001F600", "\ufeff", "ß", "\u0301", "Ω", "\u2028", "\x00"]
BINOPS = [ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.MatMult, ast.LShift,
          ast.RShift, ast.BitAnd, ast.BitOr, ast.BitXor]
CMPOPS = [ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq, ast.Is, ast.In]


def _is_program(text: str) -> bool:
    if not re.search(r"@(\w+\.)*(kernel|function)\b", text):
        return False
    try:
        ast.parse(text)
    except SyntaxError:
        return False
    return True


def corpus() -> list[tuple[str, str]]:
    """(name, source) of every program the fuzzer starts from, in a fixed order."""
    out = []
    for pattern in ("examples/**/*.py", "tests/lit/**/*.py"):
        for path in sorted(ROOT.glob(pattern)):
            text = path.read_text()
            if _is_program(text):
                out.append((str(path.relative_to(ROOT)), text))
    for path in sorted((ROOT / "tests" / "unit").glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = textwrap.dedent(node.value)
                if _is_program(text):
                    out.append((f"{path.relative_to(ROOT)}:{node.lineno}", text))
    return out


# --- mutations: each takes (rng, source) and returns a new source, or None where it finds nothing to change


def _nodes(tree: ast.AST, kind) -> list:
    return [n for n in ast.walk(tree) if isinstance(n, kind)]


def _ast_mutation(pick):
    """A mutation of one node that `pick(rng, tree)` changes in place (returning False where it cannot)."""
    def mutate(rng: random.Random, source: str) -> str | None:
        tree = ast.parse(source)
        if not pick(rng, tree):
            return None
        return ast.unparse(ast.fix_missing_locations(tree))
    mutate.__name__ = pick.__name__
    return mutate


def _number(node: ast.expr, rng: random.Random) -> ast.expr:
    value = rng.choice(NUMBERS)
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return ast.parse(f"float({str(value)!r})", mode="eval").body
    return ast.parse(repr(value), mode="eval").body


@_ast_mutation
def number(rng, tree):
    nums = [n for n in _nodes(tree, ast.Constant) if type(n.value) in (int, float)]
    if not nums:
        return False
    target = rng.choice(nums)
    new = _number(target, rng)
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is target:
                setattr(parent, field, new)
                return True
            if isinstance(value, list) and any(v is target for v in value):
                value[[i for i, v in enumerate(value) if v is target][0]] = new
                return True
    return False


@_ast_mutation
def swap_name(rng, tree):
    names = _nodes(tree, ast.Name)
    if len(names) < 2:
        return False
    a = rng.choice(names)
    a.id = rng.choice(names).id
    return True


@_ast_mutation
def drop_argument(rng, tree):
    calls = [c for c in _nodes(tree, ast.Call) if c.args or c.keywords]
    if not calls:
        return False
    c = rng.choice(calls)
    if c.args and (not c.keywords or rng.random() < 0.5):
        c.args.pop(rng.randrange(len(c.args)))
    else:
        c.keywords.pop(rng.randrange(len(c.keywords)))
    return True


@_ast_mutation
def add_argument(rng, tree):
    calls = _nodes(tree, ast.Call)
    if not calls:
        return False
    c = rng.choice(calls)
    exprs = [e for e in _nodes(tree, ast.expr) if not isinstance(e, (ast.Starred, ast.Slice))]
    value = copy.deepcopy(rng.choice(exprs)) if rng.random() < 0.6 else ast.parse(rng.choice(WRONG_VALUES),
                                                                                   mode="eval").body
    if rng.random() < 0.5:
        c.args.insert(rng.randrange(len(c.args) + 1), value)
    else:
        c.keywords.append(ast.keyword(rng.choice(["axis", "out_dtype", "shape", "stages", "dtype", "x", "tile"]),
                                      value))
    return True


@_ast_mutation
def change_operator(rng, tree):
    ops = _nodes(tree, (ast.BinOp, ast.AugAssign, ast.Compare, ast.UnaryOp, ast.BoolOp))
    if not ops:
        return False
    op = rng.choice(ops)
    if isinstance(op, (ast.BinOp, ast.AugAssign)):
        op.op = rng.choice(BINOPS)()
    elif isinstance(op, ast.Compare):
        op.ops = [rng.choice(CMPOPS)() for _ in op.ops]
    elif isinstance(op, ast.UnaryOp):
        op.op = rng.choice([ast.USub, ast.UAdd, ast.Not, ast.Invert])()
    else:
        op.op = rng.choice([ast.And, ast.Or])()
    return True


@_ast_mutation
def wrong_keyword(rng, tree):
    kws = [k for c in _nodes(tree, ast.Call) for k in c.keywords]
    if not kws:
        return False
    rng.choice(kws).value = ast.parse(rng.choice(WRONG_VALUES), mode="eval").body
    return True


@_ast_mutation
def replace_expression(rng, tree):
    """An expression (a subscript's index, a call's argument, an assignment's value) replaced by another of the
    program's expressions or by a value of the wrong type: a tensor as an index, a shape as a number."""
    exprs = [e for e in _nodes(tree, ast.expr) if not isinstance(e, (ast.Starred, ast.Slice))]
    holders = _nodes(tree, (ast.Subscript, ast.Call, ast.Assign, ast.Return, ast.BinOp))
    if not holders or not exprs:
        return False
    h = rng.choice(holders)
    value = copy.deepcopy(rng.choice(exprs)) if rng.random() < 0.7 else ast.parse(rng.choice(WRONG_VALUES),
                                                                                   mode="eval").body
    if isinstance(h, ast.Subscript):
        h.slice = value
    elif isinstance(h, ast.Call) and h.args:
        h.args[rng.randrange(len(h.args))] = value
    elif isinstance(h, ast.BinOp):
        setattr(h, rng.choice(["left", "right"]), value)
    elif isinstance(h, (ast.Assign, ast.Return)) and h.value is not None:
        h.value = value
    else:
        return False
    return True


def _lines(rng, source):
    lines = source.split("\n")
    return lines, rng.randrange(len(lines))


def delete_line(rng, source):
    lines, i = _lines(rng, source)
    del lines[i]
    return "\n".join(lines)


def duplicate_line(rng, source):
    lines, i = _lines(rng, source)
    lines.insert(i, lines[i])
    return "\n".join(lines)


def insert_text(rng, source):
    i = rng.randrange(len(source) + 1)
    return source[:i] + rng.choice(UNICODE) + source[i:]


def number_text(rng, source):
    """A number token replaced in the text, where the AST's own forms (a float's repr) do not reach."""
    tokens = list(re.finditer(r"(?<![\w.])\d+(\.\d*)?", source))
    if not tokens:
        return None
    m = rng.choice(tokens)
    return source[:m.start()] + rng.choice(["9" * 25, "18446744073709551616", "9223372036854775808", "1e999",
                                            "0x" + "f" * 20, "00", "1_0"]) + source[m.end():]


MUTATIONS = [number, number, swap_name, drop_argument, add_argument, change_operator, wrong_keyword,
             replace_expression, replace_expression, delete_line, duplicate_line, insert_text, number_text]


def mutants(n: int, seed: int):
    """`n` (name, mutations, source) in a deterministic order."""
    rng = random.Random(seed)
    programs = corpus()
    made = 0
    while made < n:
        name, source = rng.choice(programs)
        applied = []
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            m = rng.choice(MUTATIONS)
            try:
                new = m(rng, source)
            except SyntaxError:  # a text mutation made it unparseable for the next AST mutation
                new = None
            if new is not None and new != source:
                source = new
                applied.append(m.__name__)
        if applied:
            made += 1
            yield name, applied, source


class TooSlow(BaseException):
    """Raised in a compilation that runs past SECONDS (a BaseException, so no `except Exception` hides it)."""


def _too_slow(signum, frame):
    raise TooSlow(f"compiling took more than {SECONDS} s")


def outcome(source: str) -> tuple[str, str]:
    """('ok' | 'located' | 'bad', detail) of compiling `source` through the kernels stage."""
    signal.signal(signal.SIGALRM, _too_slow)
    signal.alarm(SECONDS)
    try:
        compile_source(source, "fuzz.py", CompileOptions(target="cpu"), stop_after="kernels")
    except CompileError as e:
        text = str(e)
        m = LOCATED.match(text)
        lines = source.count("\n") + 1
        if m and m["file"] == "fuzz.py" and 1 <= int(m["line"]) <= lines and int(m["col"]) >= 1:
            return "located", text.split("\n")[0]
        return "bad", "unlocated CompileError: " + text
    except RecursionError:
        return "bad", traceback.format_exc(limit=-8)
    except TooSlow as e:
        return "bad", str(e)
    except Exception:  # noqa: BLE001 -- the fuzzer's point: anything else is a finding
        return "bad", traceback.format_exc(limit=-8)
    finally:
        signal.alarm(0)
    return "ok", ""


@pytest.mark.parametrize("seed", [CI_SEED])
def test_mutated_programs_compile_or_fail_located(seed):
    bad = []
    for name, applied, source in mutants(CI_INPUTS, seed):
        kind, detail = outcome(source)
        if kind == "bad":
            bad.append(f"--- from {name}, mutated by {', '.join(applied)}:\n{source}\n--- gave:\n{detail}")
    assert not bad, f"{len(bad)} of {CI_INPUTS} inputs were not located errors:\n\n" + "\n\n".join(bad[:5])


# What the campaigns found, each class once: (source, the line of its error, a part of the message); a line of
# None means the program compiles.
_K = "from tessera import kernel, function, op, tile, dist, tensor, f32, bf16, fp8_e4m3, fp32, accum\n"
FOUND = {
    "an index literal of 2**63 in a kernel": (
        _K + "@kernel\ndef k(X: tensor[f32], Out: tensor[f32]):\n    i = launch.thread_id()\n"
             "    Out[i + 9223372036854775808] = X[i]\n", 5, "does not fit in index"),
    "a literal of 2**32 for an i32": (
        _K + "@kernel\ndef k(n: i32, Out: tensor[f32]):\n    m = n + 4294967296\n    Out[0] = float(m)\n", 4,
        "does not fit in i32"),
    "a tensor used as an index": (
        _K + "@kernel\ndef k(X: tensor[f32], Out: tensor[f32]):\n    Out[X] = 1.0\n", 4,
        "tensor 'X' used where a number is expected"),
    "a tensor in a kernel's arithmetic": (
        _K + "@kernel\ndef k(X: tensor[f32], Out: tensor[f32]):\n    Out[0] = -X\n", 4,
        "tensor 'X' used where a number is expected"),
    "a group size of 2**63": (
        _K + "@kernel\ndef k(Out: tensor[f32]):\n    g = tile.cooperative_group(size=9223372036854775808)\n", 4,
        "constant power of two"),
    "a philox seed of 2**63 (a valid 64-bit key)": (
        _K + "@kernel\ndef k(Out: tensor[f32]):\n    i = launch.thread_id()\n"
             "    Out[i] = tile.philox_uniform(i, seed=9223372036854775808)\n", None, ""),
    "an extent of 2**64": (
        _K + "@function\ndef f(X: tensor[f32, 18446744073709551616]):\n    return X\n", 3, "at most 2**63 - 1"),
    "an extent of 2**63 in a kernel": (
        _K + "@kernel\ndef k(X: tensor[f32, 9223372036854775808]):\n    pass\n", 3, "at most 2**63 - 1"),
    "a symbol outside ASCII": (
        _K + "@function\ndef f(X: tensor[f32, 'λN']):\n    return X\n", 3, "in ASCII"),
    "an integer of 2**64 in a function": (
        _K + "@function\ndef f(X: tensor[f32, 'N']):\n    n = 18446744073709551616\n    return X\n", 4,
        "does not fit in 64 bits"),
    "a reshape to 2**63": (
        _K + "@function\ndef f(X: tensor[f32, 'N']):\n    return op.reshape(X, (9223372036854775808,))\n", 4,
        "must be a positive int"),
    "a number too wide for an integer tensor": (
        _K + "@function\ndef f(X: tensor[i32, 'N']):\n    return X + 4294967296\n", 4, "does not fit in a i32"),
    "tile.mma blocking of 2**63": (
        _K + "@kernel\ndef k(A, B, C):\n    for m, n, k in tile.mma(A, B, C, BM=9223372036854775808):\n"
             "        tile.mma_sync(m, n, k)\n", 4, "tile.mma's blocking"),
    "tile.mma with two tiles": (
        _K + "@kernel\ndef k(A, B, C):\n    for m, n, k in tile.mma(A, B):\n        tile.mma_sync(m, n, k)\n", 4,
        "takes three tiles"),
    "op.matmul(out_dtype=1)": (
        _K + "@function\ndef f(A: tensor[f32, 'M', 'K'], B: tensor[f32, 'K', 'N']):\n"
             "    return op.matmul(A, B, out_dtype=1)\n", 4, "out_dtype= is a dtype"),
    "op.max(axis=()) reduces over no axis, as numpy's": (
        _K + "@function\ndef f(X: tensor[f32, 'M', 'N']):\n    return op.max(X, axis=())\n", None, ""),
    'int("x") in a function': (
        _K + "@function\ndef f(X: tensor[f32, 'N']):\n    n = int('x')\n    return X\n", 4, "int():"),
    "len(range(2**63 + 1))": (
        _K + "@function\ndef f(X: tensor[f32, 'N']):\n    n = len(range(9223372036854775809))\n    return X\n", 4,
        "len():"),
    "hints built with {**x}": (
        _K + "x = {}\n@function\n@op.specialize(when={**x}, use={'tile': (64, 64, 64)})\n"
             "def f(X: tensor[f32, 'N']):\n    return X\n", 4, "a hint's keys"),
    "a hint with an unhashable key": (
        _K + "@function\n@op.specialize(when={[1]: 2}, use={'tile': (64, 64, 64)})\n"
             "def f(X: tensor[f32, 'N']):\n    return X\n", 3, "a hint's keys"),
    "dist.Mesh(shape=(4, None))": (
        _K + "mesh = dist.Mesh(axes=['a', 'b'], devices=range(8), shape=(4, None))\n@function\n"
             "def f(X: tensor[f32, 'N']):\n    m = dist.Mesh(axes=['a', 'b'], devices=range(8), shape=(4, None))\n"
             "    return X\n", 5, "shape= is a tuple of positive axis sizes"),
    "a mesh of range(2**63) devices": (
        _K + "@function\ndef f(X: tensor[f32, 'N']):\n    m = dist.Mesh(axes=['a'], devices=range(2 ** 63))\n"
             "    return X\n", 4, "device count"),
    "fp8_e4m3 >= accum(fp32)": (
        _K + "@function\ndef f(X: tensor[f32, 'N']):\n    c = fp8_e4m3 >= accum(fp32)\n    return X\n", 4,
        "cannot compare"),
    "a function returning no tensor": (
        _K + "@function\ndef f(X: tensor[f32, 'N']):\n    return []\n", 4, "at least one tensor"),
    "a constant that overflows bf16 (inf in the generated kernel)": (
        _K + "@function\ndef f(X: tensor[bf16, 'N']):\n    return op.gelu(X) + 1e300\n", None, ""),
    "rmsnorm of a 0-d tensor": (
        _K + "@function\ndef f(X: tensor[bf16], g: tensor[bf16, 'D']):\n    return op.rmsnorm(X, gamma=g)\n", 4,
        "0-d tensor"),
    "the transpose of a 0-d tensor": (
        _K + "@function\ndef f(K: tensor[f32], X: tensor[f32, 'N']):\n    return X * K.T\n", None, ""),
    "tile.mma blocking past the schedule's range": (
        _K + "@kernel\ndef k(A, B, C):\n    for m, n, k in tile.mma(A, B, C, BK=9223372036854775807):\n"
             "        tile.mma_sync(m, n, k)\n", 4, "up to 4096"),
    "a function returning a number": (
        _K + "@function\ndef f(X: tensor[f32, 'N']):\n    return 2 ** 2\n", 4, "not int 4"),
    "a NUL byte": (_K + "@kernel\ndef k(Out: tensor[f32]):\n    Out[0] = \0 1.0\n", 4, "null bytes"),
    "a syntax error Python places at column 0": (_K + "@kernel\ndef k(Out):\n    if 1:\n", 4, "indented block"),
}


@pytest.mark.parametrize("case", FOUND)
def test_each_class_found_is_located(case):
    source, line, message = FOUND[case]
    kind, detail = outcome(source)
    if line is None:
        assert kind == "ok", detail
        return
    assert kind == "located", detail
    m = LOCATED.match(detail)
    assert int(m["line"]) == line and message in detail, detail


def test_the_corpus_holds_every_kind_of_program():
    names = [n for n, _ in corpus()]
    assert any(n.startswith("examples/tile") for n in names) and any(n.startswith("examples/graph") for n in names)
    assert any(n.startswith("tests/lit/frontend") for n in names) and any(n.startswith("tests/unit") for n in names)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--inputs", type=int, default=CI_INPUTS)
    p.add_argument("--seed", type=int, default=CI_SEED)
    p.add_argument("--show", type=int, default=20, help="findings to print in full")
    args = p.parse_args()
    counts: collections.Counter = collections.Counter()
    shown = 0
    for name, applied, source in mutants(args.inputs, args.seed):
        kind, detail = outcome(source)
        counts[kind] += 1
        if kind == "bad" and shown < args.show:
            shown += 1
            print(f"=== from {name}, mutated by {', '.join(applied)}:\n{source}\n=== gave:\n{detail}\n", flush=True)
    print(f"inputs {args.inputs}, seed {args.seed}: compiled {counts['ok']}, located errors {counts['located']}, "
          f"other outcomes {counts['bad']}")


if __name__ == "__main__":
    sys.exit(main())
