"""The launch-plan reader in C (runtime/src/plan.c, extent.c) against tessera/plan.py, through
tests/c/plan_tool.c built from the runtime's sources (under ASan + UBSan where the compiler has them):

- every plan the repository's graph programs compile to reads in C as `plan.decode` reads it;
- C evaluates thousands of random extent expressions as `plan.evaluate` does, failing where it fails, and
  also where an int64 overflows;
- malformed documents are refused with messages naming the function, the step and the member;
- random mutations of real plans (bytes and JSON structure, deterministic seeds) never crash or leak, and C
  accepts one only when Python decodes it to the same plans.
"""
import json
import random
import shutil
import subprocess

import pytest

from hostutil import HERE, REPO, run
import plan_corpus
from tessera import plan

SOURCES = [REPO / "runtime" / "src" / f for f in ("plan.c", "extent.c", "json_doc.c", "arena.c", "json.c", "status.c")]
SANITIZE = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=undefined"]
SANITIZER_REPORTS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")
INT64_MIN, INT64_MAX = -2**63, 2**63 - 1


def build_tool(cc, out, flags):
    exe = out / "plan_tool"
    run([cc, "-std=c11", "-g", "-O1", "-Wall", "-Wextra", "-Werror", *flags, "-D_POSIX_C_SOURCE=200809L",
         "-DTSR_BUILDING_LIBRARY", f"-I{REPO / 'runtime' / 'include'}", f"-I{REPO / 'runtime' / 'src'}",
         HERE / "plan_tool.c", *SOURCES, "-o", exe, "-lm", "-pthread"])
    return exe


@pytest.fixture(scope="module")
def tool(cc, tmp_path_factory):
    """plan_tool, sanitized where `cc` can."""
    out = tmp_path_factory.mktemp("plan_tool")
    probe = out / "probe.c"
    probe.write_text("int main(void) { return 0; }\n")
    sanitized = subprocess.run([cc, *SANITIZE, probe, "-o", out / "probe"], capture_output=True).returncode == 0
    return build_tool(cc, out, SANITIZE if sanitized else [])


def call(tool, *args):
    p = subprocess.run([str(tool), *map(str, args)], capture_output=True, text=True, timeout=600,
                       env={"ASAN_OPTIONS": "detect_leaks=1", "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"})
    reports = [r for r in SANITIZER_REPORTS if r in p.stderr]
    assert p.returncode in (0, 1) and not reports, f"exit {p.returncode}, {reports}\n{p.stderr[-6000:]}"
    return p.stdout


def batch(tool, tmp_path, sections):
    """C's reading of each section: ("OK", document) or ("ERR", message)."""
    path = tmp_path / "batch"
    path.write_bytes(b"".join(b"%d\n" % len(s) + s for s in sections))
    lines = call(tool, "batch", path).split("\n")[:-1]  # a message may quote a \r or \x1c: not a line end
    assert len(lines) == len(sections)
    return [("OK", json.loads(line[3:])) if line.startswith("OK ") else ("ERR", line[4:]) for line in lines]


def python_reading(section):
    """Python's reading, in the form C writes: ("OK", document) or ("ERR", message)."""
    try:
        plans = plan.decode(section)
    except plan.PlanError as e:
        return "ERR", str(e)
    return "OK", {"version": plan.VERSION, "functions": {n: p.to_json() for n, p in plans.items()}}


def canonical(doc):
    return json.dumps(doc)  # member order kept: env is ordered


@pytest.fixture(scope="module")
def sections():
    found = plan_corpus.sections()
    assert len(found) >= 40, sorted(found)
    return found


def test_the_reader_takes_the_version_python_writes(tool):
    assert int(call(tool, "version")) == plan.VERSION


def test_every_compiled_plan_reads_in_c_as_python_decodes_it(tool, sections, tmp_path):
    names = sorted(sections)
    for name, (status, doc) in zip(names, batch(tool, tmp_path, [sections[n] for n in names])):
        assert status == "OK", f"{name}: {doc}"
        assert canonical(doc) == canonical(python_reading(sections[name])[1]), name
    print(f"{len(names)} plans of {len({n.split(' [')[0] for n in names})} programs read alike in C and Python")


# ---- extent expressions ---------------------------------------------------------------------------------------

NAMES = ["M", "N", "K", "B", "DEVICE_UNITS", "x1", "_t", "minimum", "ceil_", "R"]


def random_expr(rng, depth=0):
    """A random expression of the grammar, with random blanks."""
    sp = lambda: rng.choice(["", "", " ", "  "])  # noqa: E731
    choice = rng.randrange(10) if depth < 6 else rng.randrange(2)
    if choice == 0:
        return str(rng.choice([0, 1, 2, 3, 7, 8, 64, 128, 1000, 2**31, 2**32 + 1, 2**62, INT64_MAX,
                               rng.randrange(100000)]))
    if choice == 1:
        return rng.choice(NAMES)
    if choice in (2, 3, 4, 5):
        op = rng.choice(["+", "-", "*", "//"])
        return f"{random_expr(rng, depth + 1)}{sp()}{op}{sp()}{random_expr(rng, depth + 1)}"
    if choice == 6:
        return f"({sp()}{random_expr(rng, depth + 1)}{sp()})"
    if choice in (7, 8):
        return f"{rng.choice(['min', 'max'])}({random_expr(rng, depth + 1)},{sp()}{random_expr(rng, depth + 1)})"
    atom = lambda: random_expr(rng, 6) if rng.random() < 0.5 else f"({random_expr(rng, depth + 1)})"  # noqa: E731
    return f"ceil({atom()}{sp()}/{sp()}{atom()})"


def broken(rng, expr):
    """`expr` with a random edit, mostly leaving the grammar."""
    i = rng.randrange(len(expr) + 1)
    edit = rng.randrange(4)
    if edit == 0:
        return expr[:i] + expr[i + 1:]
    if edit == 1:
        return expr[:i] + rng.choice(["(", ")", ",", "/", "+", "$", "min", "ceil(", "99999999999999999999", " "]) + expr[i:]
    if edit == 2:
        return expr[:i]
    return expr + rng.choice([")", "(", "//", "", "1"])


def checked(tree, env):
    """The C evaluator's outcome, computed from Python's tree: ("OK", value) or ("ERR", kind, detail), with
    int64 overflow an error; operands left to right, then the operation, as both evaluators go."""
    kind = tree[0]
    if kind == "int":
        return ("OK", tree[1]) if tree[1] <= INT64_MAX else ("ERR", "parse", "outside int64")
    if kind == "name":
        return ("OK", env[tree[1]]) if tree[1] in env else ("ERR", "unknown", tree[1])
    a = checked(tree[1], env)
    if a[0] == "ERR":
        return a
    b = checked(tree[2], env)
    if b[0] == "ERR":
        return b
    a, b = a[1], b[1]
    if kind in ("//", "cdiv") and b == 0:
        return "ERR", "zero", None
    r = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "min": lambda: min(a, b),
         "max": lambda: max(a, b), "//": lambda: a // b, "cdiv": lambda: -(-a // b)}[kind]()
    return ("OK", r) if INT64_MIN <= r <= INT64_MAX else ("ERR", "overflow", None)


def literals(tree):
    return [tree[1]] if tree[0] == "int" else [] if tree[0] == "name" else literals(tree[1]) + literals(tree[2])


def test_c_evaluates_extent_expressions_as_python_does(tool, tmp_path):
    rng = random.Random(14)
    cases = []
    for i in range(6000):
        expr = random_expr(rng)
        if i % 4 == 3:
            expr = broken(rng, expr)
        env = {n: rng.choice([0, 1, 2, 5, 64, -1, -7, rng.randrange(-2**40, 2**40), 2**62, INT64_MAX, INT64_MIN])
               for n in NAMES if rng.random() < 0.8}
        cases.append((expr, env))
    path = tmp_path / "exprs"
    path.write_text("".join(f"{e}\t{' '.join(f'{k}={v}' for k, v in env.items())}\n" for e, env in cases))
    results = call(tool, "eval", path).splitlines()
    assert len(results) == len(cases)
    tally = {}
    for (expr, env), got in zip(cases, results):
        try:
            tree = plan.parse(expr)
        except plan.PlanError:
            assert got.startswith("ERR parse: "), (expr, got)
            tally["refused by both parsers"] = tally.get("refused by both parsers", 0) + 1
            continue
        if any(v > INT64_MAX for v in literals(tree)):
            assert got.startswith("ERR parse: ") and "outside int64" in got, (expr, got)
            tally["literal outside int64"] = tally.get("literal outside int64", 0) + 1
            continue
        want = checked(tree, env)
        if want[0] == "OK":
            assert got == f"OK {want[1]}" and plan.evaluate(expr, env) == want[1], (expr, env, got)
        elif want[1] == "unknown":
            assert got.startswith("ERR eval: ") and f"extent '{want[2]}' is unknown" in got, (expr, env, got)
            with pytest.raises(plan.PlanError, match=f"extent '{want[2]}' is unknown"):
                plan.evaluate(expr, env)
        elif want[1] == "zero":
            assert got.startswith("ERR eval: ") and "division by zero" in got and expr[:40] in got, (expr, env, got)
            with pytest.raises(plan.PlanError, match="division by zero"):
                plan.evaluate(expr, env)
        else:
            assert got.startswith("ERR eval: ") and "overflows int64" in got, (expr, env, got)
        key = want[0] if want[0] == "OK" else want[1]
        tally[key] = tally.get(key, 0) + 1
    print(tally)
    assert all(tally.get(k, 0) >= 100 for k in ("OK", "unknown", "zero", "overflow", "refused by both parsers"))


def test_nesting_is_bounded(tool, tmp_path):
    path = tmp_path / "exprs"
    path.write_text("(" * 31 + "M" + ")" * 31 + "\tM=3\n" + "(" * 40 + "M" + ")" * 40 + "\tM=3\n" +
                    "min(" * 20 + "M" + ", 1)" * 20 + "\tM=3\n")
    assert call(tool, "eval", path).splitlines() == ["OK 3", "ERR parse: nested deeper than 32 levels", "OK 1"]


# ---- malformed documents ----------------------------------------------------------------------------------------

def document(steps, **plan_members):
    fn = {"params": ["x"], "args": ["v0"], "results": ["v1"],
          "values": {"v0": {"dtype": "f32", "dims": ["M", "N"]}, "v1": {"dtype": "f32", "dims": ["M", "N"]}},
          "steps": steps, "fallbacks": [], "outputs": [], **plan_members}
    return json.dumps({"version": plan.VERSION, "functions": {"mlp": fn}}).encode()


GEMM = {"kernel": "k_gemm", "env": {"M": "M", "N": "N"}, "args": [{"value": "v0", "shape": ["M", "N"]}],
        "block": [128, 1, 1], "grid": ["ceil(M/128)", "N", "1"]}
ADD = {"kernel": "k_add", "tensors": [{"value": "v0", "view": "matrix"}, {"value": "v1", "view": "matrix"}],
       "R": "M", "C": "N", "block": [256, 1, 1], "grid": ["ceil(C/256)", "R", "1"]}
CALL = {"call": "inner", "args": ["v0"], "results": ["v1"]}
MESH = {"mesh_axes": ["dp", "tp"], "mesh_shape": [2, 3]}
ALL_REDUCE = {"collective": "all_reduce", "input": "v0", "output": "v1", **MESH, "axis": "tp", "reduce": "mean",
              "deterministic": True, "algo": "binary_tree"}
GATHER = {"collective": "all_gather", "input": "v0", "output": "v1", **MESH, "axis": "dp", "dim": 1}

MALFORMED = [
    (b'{"version": 2, "functions": {}}', f"version 2 is not one of 3 to {plan.VERSION}, the versions this runtime "
                                         f"reads"),
    (b'{"functions": {}}', f"version none is not one of 3 to {plan.VERSION}"),
    (document([ALL_REDUCE]).replace(f'"version": {plan.VERSION}'.encode(), b'"version": 4'),
     "function 'mlp': step 0 (all_reduce): a collective step, which version 5 introduced, in a plan of version 4"),
    (document([{**ALL_REDUCE, "collective": "all_to_some"}]),
     "step 0: collective 'all_to_some' is not one of all_reduce, reduce_scatter, all_gather, broadcast"),
    (document([{**ALL_REDUCE, "axis": "pp"}]), "step 0 (all_reduce): axis 'pp' is not an axis of the mesh"),
    (document([{**ALL_REDUCE, "mesh_shape": [2]}]), "mesh_axes and mesh_shape must name the same number of axes"),
    (document([{**ALL_REDUCE, "mesh_shape": [2, 0]}]), "mesh_shape must hold positive sizes, item 1"),
    (document([{**ALL_REDUCE, "mesh_axes": ["tp", "tp"]}]), "mesh axis 'tp' is named twice"),
    (document([{**ALL_REDUCE, "reduce": "xor"}]), "reduce 'xor' is not one of sum, max, min, mean, prod"),
    (document([{**ALL_REDUCE, "algo": "fast"}]), "algo 'fast' is not one of ring, tree, binary_tree, auto"),
    (document([{**ALL_REDUCE, "deterministic": 1}]), "'deterministic' must be true or false"),
    (document([{**ALL_REDUCE, "dim": 0}]), "step 0 (all_reduce): has unknown member 'dim'"),
    (document([{**ALL_REDUCE, "output": "v9"}]), "step 0 (all_reduce): uses value 'v9'"),
    (document([{**GATHER, "dim": 2}]), "step 0 (all_gather): dim 2 is not an axis of the rank-2 tensor 'v0'"),
    (document([{**GATHER, "reduce": "sum"}]), "step 0 (all_gather): has unknown member 'reduce'"),
    (document([{k: v for k, v in GATHER.items() if k != "dim"}]), "step 0 (all_gather): has no 'dim'"),
    (document([{**GATHER, "collective": "broadcast", "dim": None}]), "step 0 (broadcast): has unknown member 'dim'"),
    (document([{**{k: v for k, v in GATHER.items() if k != "dim"}, "collective": "broadcast", "root": 2}]),
     "step 0 (broadcast): root 2 is not an index along axis 'dp' (0..1)"),
    (document([CALL]).replace(f'"version": {plan.VERSION}'.encode(), b'"version": 3'),
     "function 'mlp': step 0: a call step, which version 4 introduced, in a plan of version 3"),
    (document([{**CALL, "args": ["v9"]}]), "step 0 (call of 'inner'): uses value 'v9'"),
    (document([{**CALL, "kernel": "k"}]), "function 'mlp': step 0: has unknown member 'kernel'"),
    (document([{**CALL, "results": "v1"}]), "step 0 (call of 'inner'): 'results' is a string, not a list"),
    (document([ADD])[:-7], "the document is truncated"),
    (b"", "the document is truncated"),
    (b"[1, 2]", "the document is a list, not a JSON object"),
    (document([ADD, {**GEMM, "grid": ["M", "N"]}]), "function 'mlp': step 1 ('k_gemm'): 'grid' must have 3 items"),
    (document([{**GEMM, "grid": ["M", "ceil(N//2)", "1"]}]),
     "function 'mlp': step 0 ('k_gemm'): 'grid' item 1: extent expression 'ceil(N//2)': expected '/', found '//'"),
    (document([{**GEMM, "env": {"M": 3}}]), "function 'mlp': step 0 ('k_gemm'): env 'M' is an integer, not a string"),
    (document([{**GEMM, "args": [{"value": "v9", "shape": []}]}]),
     "function 'mlp': step 0 ('k_gemm'): argument 0: uses value 'v9', which the function's 'values' do not list"),
    (document([{**GEMM, "batch": "Q"}]), "step 0 ('k_gemm'): runs per entry of 'Q', which its env does not define"),
    (document([{**GEMM, "prefer": [{"when": "M", "kernel": "k2", "grid": ["1", "1", "1"], "block": [1, 1]}]}]),
     "step 0 ('k_gemm'): 'prefer' alternative 0: 'block' must have 3 items"),
    (document([{**GEMM, "multiple_of": [["K", "8", "why"]]}]),
     "step 0 ('k_gemm'): 'multiple_of' entry 0: must be [expression, integer, reason]"),
    (document([{**ADD, "tensors": [{"value": "v0", "view": "diagonal"}]}]),
     "step 0 ('k_add'): tensor 0: view 'diagonal' is not one of"),
    (document([{**ADD, "colour": "blue"}]), "step 0 ('k_add'): has unknown member 'colour'"),
    (document([{**ADD, "block": [1, 1.5, 1]}]), "'block' must be 3 integers, item 1 is a real number"),
    (document([{"alias": "v1"}]), "function 'mlp': step 0: has no 'of'"),
    (document([{"alias": "v1", "of": "v0", "offset": "N"}]).replace(f'"version": {plan.VERSION}'.encode(),
                                                                      b'"version": 5'),
     "function 'mlp': step 0: an alias step with an offset, which version 6 introduced, in a plan of version 5"),
    (document([{"alias": "v1", "of": "v0", "offset": "N+"}]),
     "function 'mlp': step 0: 'offset': extent expression 'N+'"),
    (document([{"alias": "v1", "of": "v0", "offset": 3}]), "function 'mlp': step 0: 'offset' is an integer"),
    (document([{"alias": "v1", "of": "v0", "offset": "N", "stride": "2"}]), "step 0: has unknown member 'stride'"),
    (document([], same_extents=[["M", "P"]]), "same_extents names 'P', which no argument's extents bind"),
    (document([], broadcasts=[["M", "N", "K"]]), "function 'mlp': 'broadcasts' entry 0 must be two extent expressions"),
    (document([], broadcasts=[["M", "N+"]]), "function 'mlp': 'broadcasts': extent expression 'N+'"),
    (document([], broadcasts=[["M", "N"]]).replace(f'"version": {plan.VERSION}'.encode(), b'"version": 6'),
     "function 'mlp': 'broadcasts', which version 7 introduced, in a plan of version 6"),
    (document([], outputs=[1, "2"]), "function 'mlp': 'outputs' must hold integers, item 1 is a string"),
    (document([{**GEMM, "smem": 2**70}]), "integer outside int64"),
    (document([{**GEMM, "kernel": "a\u0000b"}]), "'kernel' holds a NUL character"),
    (b'{"version": 3, "version": 3, "functions": {}}', "has the member 'version' twice"),
    (b'{"version": 3, "functions": {"f": "\xff"}}', "invalid UTF-8 in a string"),
    (b"[" * 100 + b"]" * 100, "nesting deeper than 64 levels"),
]


def test_call_steps_read_in_c_as_python_decodes_them(tool, tmp_path):
    section = document([CALL, {"alias": "v1", "of": "v0"}])
    (status, doc), = batch(tool, tmp_path, [section])
    assert status == "OK" and canonical(doc) == canonical(python_reading(section)[1])
    assert doc["functions"]["mlp"]["steps"][0] == CALL


def test_alias_offsets_read_in_c_as_python_decodes_them(tool, tmp_path):
    """Version 6: an offset is read and written back, "0" (a window of the first elements) included; an alias
    without one (a reshape) is written without one, as tessera.plan writes it; an alias of another dtype than
    its storage's is refused by both readers."""
    steps = [{"alias": "v1", "of": "v0", "offset": "M*(N//2)"}, {"alias": "v1", "of": "v0", "offset": "0"},
             {"alias": "v1", "of": "v0"}]
    section = document(steps)
    (status, doc), = batch(tool, tmp_path, [section])
    assert status == "OK" and canonical(doc) == canonical(python_reading(section)[1])
    assert doc["functions"]["mlp"]["steps"] == steps
    other = json.loads(section)
    other["functions"]["mlp"]["values"]["v1"]["dtype"] = "bf16"
    (status, message), = batch(tool, tmp_path, [json.dumps(other).encode()])
    assert status == "ERR" and "alias 'v1' of 'v0': an alias has its storage's dtype (bf16 is not f32)" in message
    assert python_reading(json.dumps(other).encode())[0] == "ERR"


def test_collective_steps_read_in_c_as_python_decodes_them(tool, tmp_path):
    broadcast = {**{k: v for k, v in GATHER.items() if k != "dim"}, "collective": "broadcast", "root": 1}
    scatter = {**ALL_REDUCE, "collective": "reduce_scatter", "dim": 0, "reduce": "max", "deterministic": False}
    section = document([ALL_REDUCE, GATHER, broadcast, scatter])
    (status, doc), = batch(tool, tmp_path, [section])
    assert status == "OK" and canonical(doc) == canonical(python_reading(section)[1])
    assert doc["functions"]["mlp"]["steps"] == [ALL_REDUCE, GATHER, broadcast, scatter]


# ---- operator records (version 8): read in C as Python decodes them; each rule refused by both readers ------

OPERATOR = {"name": "A", "role": "param", "repr": "factor", "tag": "none", "flags": ["unitary", "recursion"],
            "payload": [0, 1, 2], "decomposition": "svd", "frame_bytes": 64, "depth": 3}


def operator_document(*records):
    fn = {"params": ["U", "S", "V"], "args": ["v0", "v1", "v2"], "results": ["v3"],
          "values": {v: {"dtype": "f32", "dims": ["M", "N"]} for v in ("v0", "v1", "v2", "v3")},
          "steps": [], "fallbacks": [], "outputs": [], "operators": list(records)}
    return json.dumps({"version": plan.VERSION, "functions": {"f": fn}}).encode()


def test_operator_records_read_in_c_as_python_decodes_them(tool, tmp_path):
    records = [OPERATOR, {"name": "B", "role": "result", "repr": "implicit", "tag": "conv1d", "flags": ["adjoint"],
                          "payload": [0]}]
    section = operator_document(*records)
    (status, doc), = batch(tool, tmp_path, [section])
    assert status == "OK" and canonical(doc) == canonical(python_reading(section)[1])
    assert doc["functions"]["f"]["operators"] == records


OPERATOR_MALFORMED = [
    ({**OPERATOR, "repr": "sparse"}, "operator 0: repr 'sparse' is not one of dense, factor, implicit, blocksparse"),
    ({**OPERATOR, "role": "input"}, "operator 0: role 'input' is not 'param' or 'result'"),
    ({**OPERATOR, "tag": "diag"}, "operator 0: tag 'diag' is not one of none (a factor operator)"),
    ({**OPERATOR, "payload": [0, 1]}, "operator 0: a factor operator carries 3 payload tensor(s), not 2"),
    ({**OPERATOR, "payload": [0, 1, 3]}, "operator 0: payload index 2 is not one of the function's 3 parameters"),
    ({k: v for k, v in OPERATOR.items() if k != "decomposition"},
     "operator 0: a factor (spectral) operator, and only one, declares its decomposition (ABI spec §5.3)"),
    ({**OPERATOR, "decomposition": "qr"}, "operator 0: decomposition 'qr' is not one of svd, eig, eigh"),
    ({**OPERATOR, "flags": ["recursion", "unitary"]}, "operator 0: flag 'unitary' repeats or comes out of the order"),
    ({**OPERATOR, "flags": ["hermitian"]}, "operator 0: flag 'hermitian' is not one of unitary, self_adjoint"),
    ({k: v for k, v in OPERATOR.items() if k != "frame_bytes"},
     "operator 0: a recursion operator, and only one, declares frame_bytes and depth (ABI spec §5.3)"),
    ({**OPERATOR, "depth": 0}, "operator 0: frame_bytes 64 and depth 0 must be positive"),
    ({**OPERATOR, "colour": "blue"}, "operator 0: has unknown member 'colour'"),
]


@pytest.mark.parametrize("record, message", OPERATOR_MALFORMED, ids=[m[12:52] for _, m in OPERATOR_MALFORMED])
def test_malformed_operator_records_are_refused_by_both_readers(tool, tmp_path, record, message):
    section = operator_document(record)
    status, got = batch(tool, tmp_path, [section])[0]
    assert status == "ERR" and got.startswith("TSR_ERROR_BAD_IMAGE: launch plan: function 'f': ") and message in got, got
    assert python_reading(section)[0] == "ERR"


def test_operator_records_need_version_8(tool, tmp_path):
    section = operator_document(OPERATOR).replace(f'"version": {plan.VERSION}'.encode(), b'"version": 7')
    status, got = batch(tool, tmp_path, [section])[0]
    assert status == "ERR" and "function 'f': 'operators', which version 8 introduced, in a plan of version 7" in got
    assert python_reading(section)[0] == "ERR"


def test_a_tensor_is_the_payload_of_one_operator(tool, tmp_path):
    dense = {"name": "B", "role": "param", "repr": "dense", "tag": "none", "flags": [], "payload": [1]}
    status, got = batch(tool, tmp_path, [operator_document(OPERATOR, dense)])[0]
    assert status == "ERR" and "operator 1: param 1 is the payload of another operator too" in got, got
    assert python_reading(operator_document(OPERATOR, dense))[0] == "ERR"


@pytest.mark.parametrize("section, message", MALFORMED, ids=[m[:40] for _, m in MALFORMED])
def test_malformed_documents_are_refused_saying_where(tool, tmp_path, section, message):
    status, got = batch(tool, tmp_path, [section])[0]
    assert status == "ERR" and got.startswith("TSR_ERROR_BAD_IMAGE: launch plan: ") and message in got, got


# ---- mutations ------------------------------------------------------------------------------------------------

# What C refuses and Python takes: what a 64-bit runtime cannot hold, and what JSON leaves undefined.
STRICTER = ("outside int64", "holds a NUL character", "twice", "nesting deeper", "lone UTF-16 surrogate",
            "nested deeper")


def mutate_bytes(rng, data):
    i, j = sorted(rng.randrange(len(data) + 1) for _ in range(2))
    edit = rng.randrange(6)
    if edit == 0:
        return data[:i]
    if edit == 1:
        return data[:i] + data[j:]
    if edit == 2:
        return data[:i] + bytes([rng.randrange(256)]) + data[i + 1:]
    if edit == 3:
        return data[:j] + data[i:j] + data[j:]
    if edit == 4:
        token = rng.choice([b"{", b"}", b"[", b"]", b",", b":", b'"', b"\\", b"null", b"-0", b"1e999", b"NaN",
                            b'"\\ud800"', b"\x00", b"\xc3\x28", b"9" * 30])
        return data[:i] + token + data[i:]
    return data.replace(rng.choice([b'"M"', b'"N"', b'"1"', b'"f32"', b"128", b'"v0"', b"[", b'"matrix"']),
                        rng.choice([b'"M*"', b'"N//0"', b'"x"', b"7", b"[]", b'{}', b'"v99"', b'"ceil(M)"']), 1)


JUNK = [None, True, 3, -1, 2**40, 1.5, "M", "ceil(M/0)", "min(M,", "v0", [], ["M", "N", "1"], [1, 1, 1], {},
        {"value": "v0", "view": "rows"}, {"f32": 2}, {"i64": "M"}, ["M", 8, "why"]]


def mutate_structure(rng, doc):
    """`doc` with one node replaced, removed or added, somewhere at random."""
    doc = json.loads(json.dumps(doc))
    node, parents = doc, []
    while isinstance(node, (dict, list)) and node and rng.random() < 0.8:
        key = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
        parents.append((node, key))
        node = node[key]
    if not parents:
        return rng.choice(JUNK)
    parent, key = parents[-1]
    edit = rng.randrange(4)
    if edit == 0:
        del parent[key]
    elif edit == 1 and isinstance(parent, dict):
        parent[rng.choice(["unknown", "B", "batch", "smem", "buffer", "source", "scalars", "same_extents"])] = \
            rng.choice(JUNK)
    elif edit == 2 and isinstance(parent, dict):
        parent[key + "_"] = parent.pop(key)
    else:
        parent[key] = rng.choice(JUNK)
    return doc


def test_mutated_plans_never_crash_and_read_as_python_reads_them(tool, sections, tmp_path):
    rng = random.Random(1414)
    seeds = [sections[n] for n in sorted(sections)]
    mutants = []
    for _ in range(4000):
        seed = rng.choice(seeds)
        if rng.random() < 0.5:
            mutants.append(mutate_bytes(rng, seed))
        else:
            mutants.append(json.dumps(mutate_structure(rng, json.loads(seed))).encode())
    tally = {"read alike": 0, "refused by both": 0, "refused by C only": 0}
    for section, (status, got) in zip(mutants, batch(tool, tmp_path, mutants)):
        want_status, want = python_reading(section)
        if status == "OK":
            assert want_status == "OK" and canonical(got) == canonical(want), (section[:300], got, want)
            tally["read alike"] += 1
        elif want_status == "ERR":
            tally["refused by both"] += 1
        else:
            assert any(s in got for s in STRICTER), (section[:300], got)
            tally["refused by C only"] += 1
    print(tally)
    assert tally["read alike"] >= 200 and tally["refused by both"] >= 2000


def test_reading_leaks_nothing_under_valgrind(cc, sections, tmp_path):
    valgrind = shutil.which("valgrind")
    if not valgrind:
        pytest.skip("valgrind is not on PATH (the sanitized runs above check leaks too)")
    exe = build_tool(cc, tmp_path, [])
    rng = random.Random(7)
    seeds = [sections[n] for n in sorted(sections)]
    mutants = seeds + [mutate_bytes(rng, rng.choice(seeds)) for _ in range(300)]
    path = tmp_path / "batch"
    path.write_bytes(b"".join(b"%d\n" % len(s) + s for s in mutants))
    p = subprocess.run([valgrind, "--leak-check=full", "--errors-for-leak-kinds=all", "--error-exitcode=99", str(exe),
                        "batch", str(path)], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-6000:]
    assert "All heap blocks were freed" in p.stderr, p.stderr[-3000:]
