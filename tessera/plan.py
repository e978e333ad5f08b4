"""Launch plans of Graph IR functions: the kernels to run, in order, on which tensors.

docs/image-format.md ("Launch plans") is the reference of the format an image's `.tessera.plan` section
holds: every field of every step kind, the format version and the grammar of extent expressions. This module
holds the typed plans, their one serializer (`encode`/`decode`, `Plan.to_json`/`Plan.from_json`, both
checking every extent expression against the grammar) and the expressions' evaluator (`evaluate`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from dataclasses import dataclass
from typing import Mapping, Union

SECTION = ".tessera.plan"
VERSION = 8  # 4: call steps (a function calling a function of the same document, or an import); 5: collectives;
#             6: alias steps with an offset (a row range of a tensor: pipelined collectives' chunks);
#             7: a function's `broadcasts` (pairs of extents a call must make broadcastable);
#             8: a function's `operators` (operator parameters and results as TessOperatorDesc records)
READS = (3, 4, 5, 6, 7, 8)  # the versions `decode` reads: each version only adds a step kind (or member) to the one before

VIEWS = ("matrix", "cols", "rows", "scalar", "bmn", "bnm")
# collective steps (tdist ops): what each one reads besides its tensors
COLLECTIVES = {"all_reduce": ("reduce",), "reduce_scatter": ("reduce", "dim"), "all_gather": ("dim",),
               "broadcast": ("root",)}
REDUCTIONS = ("sum", "max", "min", "mean", "prod")
ALGOS = ("ring", "tree", "binary_tree", "auto")
# operator descriptors (runtime/include/tessera/operator.h): representation -> payload tensors it carries
OPERATOR_REPRS = {"dense": 1, "factor": 3, "implicit": 1, "blocksparse": 3}
OPERATOR_TAGS = {"dense": ("none",), "factor": ("none",), "implicit": ("diag", "conv1d"), "blocksparse": ("none",)}
OPERATOR_FLAGS = ("unitary", "self_adjoint", "normal", "adjoint", "recursion")
DECOMPOSITIONS = ("svd", "eig", "eigh")


class PlanError(ValueError):
    pass


# -- extent expressions ---------------------------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(//|[-+*/(),]))")
_CALLS = {"min": 2, "max": 2, "ceil": 1}


def _tokens(expr: str) -> list[str]:
    out, i = [], 0
    while i < len(expr):
        m = _TOKEN.match(expr, i)
        if m is None:
            if expr[i:].strip() == "":
                break
            raise PlanError(f"extent expression '{expr}': unexpected '{expr[i:].strip()[0]}'")
        out.append(m.group(m.lastindex))
        i = m.end()
    return out


class _Parser:
    """Recursive descent over the grammar of docs/image-format.md; the tree is nested tuples:
    ("int", n) | ("name", s) | (op, a, b) for op in + - * // min max cdiv."""

    def __init__(self, expr: str):
        self.expr, self.toks, self.i = expr, _tokens(expr), 0

    def fail(self, what: str):
        at = self.toks[self.i] if self.i < len(self.toks) else "the end"
        raise PlanError(f"extent expression '{self.expr}': expected {what}, found {at!r}"
                        if at != "the end" else f"extent expression '{self.expr}': expected {what} at the end")

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, tok: str) -> None:
        if self.peek() != tok:
            self.fail(f"'{tok}'")
        self.i += 1

    def whole(self):
        tree = self.sum()
        if self.peek() is not None:
            self.fail("an operator")
        return tree

    def sum(self):
        tree = self.product()
        while self.peek() in ("+", "-"):
            op = self.toks[self.i]
            self.i += 1
            tree = (op, tree, self.product())
        return tree

    def product(self):
        tree = self.atom()
        while self.peek() in ("*", "//"):
            op = self.toks[self.i]
            self.i += 1
            tree = (op, tree, self.atom())
        return tree

    def atom(self):
        tok = self.peek()
        if tok is None:
            self.fail("an extent")
        self.i += 1
        if tok.isdigit():
            return ("int", int(tok))
        if tok == "(":
            tree = self.sum()
            self.take(")")
            return tree
        if tok in _CALLS:
            self.take("(")
            if tok == "ceil":  # ceiling division, the one place '/' may stand: ceil(atom / atom)
                a = self.atom()
                self.take("/")
                b = self.atom()
                self.take(")")
                return ("cdiv", a, b)
            a = self.sum()
            self.take(",")
            b = self.sum()
            self.take(")")
            return (tok, a, b)
        if tok[0].isalpha() or tok[0] == "_":
            return ("name", tok)
        self.i -= 1
        self.fail("an extent")


def parse(expr: str):
    """The tree of `expr`; PlanError, naming it, where it is not in the grammar."""
    if not isinstance(expr, str):
        raise PlanError(f"extent expression {expr!r} is not a string")
    return _parse(expr)


@functools.lru_cache(maxsize=4096)
def _parse(expr: str):
    return _Parser(expr).whole()


def evaluate(expr: str, env: Mapping[str, int]) -> int:
    """The value of extent expression `expr` with the extents `env`."""
    def ev(t) -> int:
        kind = t[0]
        if kind == "int":
            return t[1]
        if kind == "name":
            if t[1] not in env:
                raise PlanError(f"extent '{t[1]}' is unknown (known: {', '.join(sorted(env))})")
            return env[t[1]]
        a, b = ev(t[1]), ev(t[2])
        if kind == "+":
            return a + b
        if kind == "-":
            return a - b
        if kind == "*":
            return a * b
        if kind == "min":
            return min(a, b)
        if kind == "max":
            return max(a, b)
        if b == 0:
            raise PlanError(f"division by zero in extent '{expr}'")
        return a // b if kind == "//" else -(-a // b)
    return ev(parse(expr))


# -- typed plans ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Value:
    """A tensor of the function: its dtype, extents and, for an intermediate, the buffer slot it shares. An
    argument stored as another dtype than its parameter declares (an fp8 parameter is taken as f32, an i4 one
    as its bytes, u8 [..., N/2]) has the declared one in `declared`, which says what a caller may pass; an i4
    result, returned as its bytes, has `declared` i4 too."""
    dtype: str
    dims: tuple[str, ...]
    buffer: int | None = None
    declared: str | None = None


@dataclass(frozen=True)
class TensorView:
    value: str
    view: str       # one of VIEWS


@dataclass(frozen=True)
class ViewStep:
    """A generated kernel over an [R, C] (or [B, R, C]) iteration space, its tensors seen through views."""
    kernel: str
    tensors: tuple[TensorView, ...]
    R: str
    C: str
    block: tuple[int, int, int]
    grid: tuple[str, str, str]
    B: str = "1"
    scalars: tuple[str, ...] = ()
    source: str | None = None


@dataclass(frozen=True)
class TensorArg:
    value: str
    shape: tuple[str, ...]


@dataclass(frozen=True)
class F32Arg:
    f32: float


@dataclass(frozen=True)
class I64Arg:
    i64: str


Arg = Union[TensorArg, F32Arg, I64Arg]


@dataclass(frozen=True)
class MultipleOf:
    expr: str
    m: int
    reason: str


@dataclass(frozen=True)
class Alternative:
    """Another kernel for a step's arguments, launched in its place where `when` is positive."""
    when: str
    kernel: str
    grid: tuple[str, str, str]
    block: tuple[int, int, int]
    smem: int = 0


@dataclass(frozen=True)
class ArgsStep:
    """A kernel whose arguments are listed in order, tensors with shapes over the step's own `env`."""
    kernel: str
    env: Mapping[str, str]       # each over the function's extents (and DEVICE_UNITS) only
    args: tuple[Arg, ...]
    block: tuple[int, int, int]
    grid: tuple[str, str, str]
    batch: str | None = None
    smem: int = 0
    multiple_of: tuple[MultipleOf, ...] = ()
    prefer: tuple[Alternative, ...] = ()
    source: str | None = None


# the dtypes an alias may view each other as: a complex value and its parts, side by side (passes/fourier.py)
COMPLEX_VIEWS = ({"c64", "f32"}, {"c128", "f64"})


@dataclass(frozen=True)
class AliasStep:
    """`alias` is `of`'s storage seen with its own extents. Without an `offset` a reshape, which sees every
    element; with one (an extent expression counting elements of `of`'s dtype, "0" included) a window of it
    from that element on, which may see fewer."""
    alias: str
    of: str
    offset: str | None = None


@dataclass(frozen=True)
class CallStep:
    """Runs function `call` of the same plan document with `args` as its arguments and `results` as its
    results (the caller allocates them; the callee writes them). A name the document does not hold is an
    unresolved import, which `tessera-link` resolves."""
    call: str
    args: tuple[str, ...]
    results: tuple[str, ...]


@dataclass(frozen=True)
class CollectiveStep:
    """A tdist collective from value `input` to value `output` among the ranks that differ only in their
    coordinate along mesh axis `axis` (rank r's coordinates: r unravelled row-major over `mesh_shape`).
    `reduce` (all_reduce, reduce_scatter), `dim` (all_gather, reduce_scatter: the tensor axis that grows or
    shrinks by the axis' size) and `root` (broadcast: an index along the axis) are set where the collective
    has them; `deterministic` fixes a reduction's order to the interpreter's tree."""
    collective: str
    input: str
    output: str
    mesh_axes: tuple[str, ...]
    mesh_shape: tuple[int, ...]
    axis: str
    reduce: str | None = None
    dim: int | None = None
    root: int | None = None
    deterministic: bool = False
    algo: str = "auto"


Step = Union[ViewStep, ArgsStep, AliasStep, CallStep, CollectiveStep]


@dataclass(frozen=True)
class OperatorRecord:
    """An operator parameter or result of the function (a TessOperatorDesc at the C API): its representation,
    its implicit kind (`tag`), its flags, and `payload`, the indices of the parameters (role "param") or
    results (role "result") that hold its payload tensors. The ABI spec's §5.3 contracts: a factor
    (spectral) operator declares its `decomposition`; an adjoint carries the "adjoint" flag; a recursion
    operator (flag "recursion") declares `frame_bytes`, the stack frame of one level, and `depth`, the most
    levels it recurses."""
    name: str
    role: str
    repr: str
    payload: tuple[int, ...]
    tag: str = "none"
    flags: tuple[str, ...] = ()
    decomposition: str | None = None
    frame_bytes: int | None = None
    depth: int | None = None


@dataclass(frozen=True)
class Plan:
    params: tuple[str, ...]
    args: tuple[str, ...]
    results: tuple[str, ...]
    values: Mapping[str, Value]
    steps: tuple[Step, ...]
    fallbacks: tuple[str, ...] = ()
    outputs: tuple[int, ...] = ()
    same_extents: tuple[tuple[str, str], ...] = ()
    # extents broadcast against each other (numpy's rule: equal, or one of them 1); the plan's extent of the
    # broadcast is max(a, b), which is the broadcast's only where the rule holds and neither is 0
    broadcasts: tuple[tuple[str, str], ...] = ()
    operators: tuple[OperatorRecord, ...] = ()

    def to_json(self) -> dict:
        """The plan's JSON document (docs/image-format.md); PlanError where an expression is outside the
        grammar or the plan names what it does not define."""
        _check_names(self)
        doc = {"params": list(self.params), "args": list(self.args), "results": list(self.results),
               "values": {k: _value_json(v) for k, v in self.values.items()},
               "steps": [_step_json(s) for s in self.steps], "fallbacks": list(self.fallbacks),
               "outputs": list(self.outputs)}
        if self.same_extents:
            doc["same_extents"] = [[_expr(a), _expr(b)] for a, b in self.same_extents]
        if self.broadcasts:
            doc["broadcasts"] = [[_expr(a), _expr(b)] for a, b in self.broadcasts]
        if self.operators:
            doc["operators"] = [_operator_json(o) for o in self.operators]
        return doc

    @staticmethod
    def from_json(doc) -> "Plan":
        """The plan of a JSON document; PlanError where it is not one."""
        r = _Fields(doc, "plan")
        values = r.object("values")
        plan = Plan(params=r.strings("params"), args=r.strings("args"), results=r.strings("results"),
                    values={k: _value(v, f"value '{k}'") for k, v in values.items()},
                    steps=tuple(_step(s, f"step {i}") for i, s in enumerate(r.list("steps"))),
                    fallbacks=r.strings("fallbacks"), outputs=tuple(r.ints("outputs")),
                    same_extents=tuple(_pair(p) for p in r.list("same_extents", ())),
                    broadcasts=tuple(_pair(p, "broadcasts") for p in r.list("broadcasts", ())),
                    operators=tuple(_operator(o, f"operator {i}") for i, o in enumerate(r.list("operators", ()))))
        r.done()
        _check_names(plan)
        return plan


def _check_names(plan: Plan) -> None:
    """Every value a plan uses is among its values, every batch extent in its step's env, a collective's
    tensors of one dtype and rank (its dim an axis of them), an alias of its storage's dtype, every extent of `same_extents` bound by an
    argument, and only arguments and results have a declared dtype."""
    for vid in (*plan.args, *plan.results, *(v for s in plan.steps for v in uses(s))):
        if vid not in plan.values:
            raise PlanError(f"the plan uses value '{vid}', which its 'values' do not list")
    for s in plan.steps:
        if isinstance(s, ArgsStep) and s.batch is not None and s.batch not in s.env:
            raise PlanError(f"step '{s.kernel}' runs per entry of '{s.batch}', which its env does not define")
    for s in plan.steps:
        if isinstance(s, CollectiveStep):
            x, y = plan.values[s.input], plan.values[s.output]
            if x.dtype != y.dtype or len(x.dims) != len(y.dims):
                raise PlanError(f"collective step ({s.collective}) from '{s.input}' to '{s.output}': the dtype "
                                f"and rank must be kept ({x.dtype}{list(x.dims)} -> {y.dtype}{list(y.dims)})")
            if s.dim is not None and s.dim >= len(x.dims):
                raise PlanError(f"collective step ({s.collective}): dim {s.dim} is not an axis of the rank-"
                                f"{len(x.dims)} tensor '{s.input}'")
        if isinstance(s, AliasStep) and plan.values[s.alias].dtype != plan.values[s.of].dtype and \
                (s.offset is not None or {plan.values[s.alias].dtype, plan.values[s.of].dtype} not in COMPLEX_VIEWS):
            raise PlanError(f"alias step '{s.alias}' of '{s.of}': an alias has its storage's dtype "
                            f"({plan.values[s.alias].dtype} is not {plan.values[s.of].dtype})")
    for vid, v in plan.values.items():
        if v.declared is not None and vid not in plan.args and vid not in plan.results:
            raise PlanError(f"value '{vid}' has a 'declared' dtype, which only an argument or a result has")
    bound = {d for vid in plan.args for d in plan.values[vid].dims}
    for pair in plan.same_extents:
        for name in pair:
            if name not in bound:
                raise PlanError(f"same_extents names '{name}', which no argument's extents bind")
    taken: set[tuple[str, int]] = set()
    for o in plan.operators:
        check_operator(o)
        count = len(plan.args) if o.role == "param" else len(plan.results)
        for i in o.payload:
            if not 0 <= i < count:
                raise PlanError(f"operator '{o.name}': payload index {i} is not one of the function's {count} "
                                f"{'parameters' if o.role == 'param' else 'results'}")
            if (o.role, i) in taken:
                raise PlanError(f"operator '{o.name}': {o.role} {i} is the payload of another operator too")
            taken.add((o.role, i))


def check_operator(o: OperatorRecord) -> None:
    """The rules of an operator record (docs/image-format.md, "Operators"), the ABI spec's §5.3 among them."""
    where = f"operator '{o.name}'"
    if o.role not in ("param", "result"):
        raise PlanError(f"{where}: role '{o.role}' is not 'param' or 'result'")
    if o.repr not in OPERATOR_REPRS:
        raise PlanError(f"{where}: repr '{o.repr}' is not one of {', '.join(OPERATOR_REPRS)}")
    if o.tag not in OPERATOR_TAGS[o.repr]:
        raise PlanError(f"{where}: tag '{o.tag}' is not one of {', '.join(OPERATOR_TAGS[o.repr])} (a {o.repr} "
                        f"operator)")
    if len(o.payload) != OPERATOR_REPRS[o.repr]:
        raise PlanError(f"{where}: a {o.repr} operator carries {OPERATOR_REPRS[o.repr]} payload tensor(s), not "
                        f"{len(o.payload)}")
    for f in o.flags:
        if f not in OPERATOR_FLAGS:
            raise PlanError(f"{where}: flag '{f}' is not one of {', '.join(OPERATOR_FLAGS)}")
    if list(o.flags) != sorted(set(o.flags), key=OPERATOR_FLAGS.index):
        raise PlanError(f"{where}: flags {list(o.flags)} repeat a flag or come out of the order "
                        f"{', '.join(OPERATOR_FLAGS)}")
    if (o.repr == "factor") != (o.decomposition is not None):
        raise PlanError(f"{where}: a factor (spectral) operator, and only one, declares its decomposition "
                        f"(ABI spec §5.3)" if o.repr == "factor" else
                        f"{where}: only a factor operator declares a decomposition, not a {o.repr} one")
    if o.decomposition is not None and o.decomposition not in DECOMPOSITIONS:
        raise PlanError(f"{where}: decomposition '{o.decomposition}' is not one of {', '.join(DECOMPOSITIONS)}")
    recursion = "recursion" in o.flags
    if recursion != (o.frame_bytes is not None) or recursion != (o.depth is not None):
        raise PlanError(f"{where}: a recursion operator, and only one, declares frame_bytes and depth "
                        f"(ABI spec §5.3)")
    if recursion and (o.frame_bytes < 1 or o.depth < 1):
        raise PlanError(f"{where}: frame_bytes {o.frame_bytes} and depth {o.depth} must be positive")


def uses(step: Step) -> list[str]:
    """The ids of the values `step` reads or writes."""
    if isinstance(step, AliasStep):
        return [step.alias, step.of]
    if isinstance(step, CallStep):
        return [*step.args, *step.results]
    if isinstance(step, CollectiveStep):
        return [step.input, step.output]
    if isinstance(step, ViewStep):
        return [t.value for t in step.tensors]
    return [a.value for a in step.args if isinstance(a, TensorArg)]


def chosen(step: ArgsStep, env: Mapping[str, int]) -> ArgsStep:
    """`step` as it launches with extents `env` (DEVICE_UNITS included): its first "prefer" alternative whose
    `when` is positive in place of its own kernel, grid, block and shared memory."""
    for alt in step.prefer:
        if evaluate(alt.when, env) > 0:
            return dataclasses.replace(step, kernel=alt.kernel, grid=alt.grid, block=alt.block, smem=alt.smem)
    return step


def encode(plans: Mapping[str, Plan]) -> bytes:
    """The `.tessera.plan` section of the functions' plans, by name."""
    return json.dumps({"version": VERSION, "functions": {n: p.to_json() for n, p in plans.items()}}).encode()


def decode(data: bytes) -> dict[str, Plan]:
    try:
        doc = json.loads(data.decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise PlanError(f"the launch plan is not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise PlanError("the launch plan is not a JSON object")
    if doc.get("version") not in READS:
        raise PlanError(f"launch plan version {doc.get('version')} is not one of "
                        f"{', '.join(map(str, READS[:-1]))} and {READS[-1]}, the versions this Tessera reads")
    r = _Fields(doc, "the launch plan")
    r.field("version", int)
    functions = r.object("functions")
    r.done()
    plans = {name: Plan.from_json(p) for name, p in functions.items()}
    for has, what, since in ((lambda s: isinstance(s, CallStep), "call steps", 4),
                             (lambda s: isinstance(s, CollectiveStep), "collective steps", 5),
                             (lambda s: isinstance(s, AliasStep) and s.offset is not None,
                              "alias steps with an offset", 6)):
        if doc["version"] < since and any(has(s) for p in plans.values() for s in p.steps):
            raise PlanError(f"launch plan version {doc['version']} has {what}, which version {since} introduced")
    if doc["version"] < 7 and any(p.broadcasts for p in plans.values()):
        raise PlanError(f"launch plan version {doc['version']} has 'broadcasts', which version 7 introduced")
    if doc["version"] < 8 and any(p.operators for p in plans.values()):
        raise PlanError(f"launch plan version {doc['version']} has 'operators', which version 8 introduced")
    return plans


def calls(plans: Mapping[str, Plan]) -> list[tuple[str, int, str]]:
    """(caller, step index, callee) of every call step of `plans`, in order."""
    return [(name, i, s.call) for name, p in plans.items() for i, s in enumerate(p.steps) if isinstance(s, CallStep)]


# -- the JSON form ------------------------------------------------------------------------------------------------

def _expr(e) -> str:
    parse(e)
    return e


def _value_json(v: Value) -> dict:
    doc = {"dtype": v.dtype, "dims": [_expr(d) for d in v.dims]}
    if v.buffer is not None:
        doc["buffer"] = v.buffer
    if v.declared is not None:
        doc["declared"] = v.declared
    return doc


def _operator_json(o: OperatorRecord) -> dict:
    check_operator(o)
    doc = {"name": o.name, "role": o.role, "repr": o.repr, "tag": o.tag, "flags": list(o.flags),
           "payload": list(o.payload)}
    if o.decomposition is not None:
        doc["decomposition"] = o.decomposition
    if o.frame_bytes is not None:
        doc.update(frame_bytes=o.frame_bytes, depth=o.depth)
    return doc


def _launch_json(block, grid) -> dict:
    if len(block) != 3 or len(grid) != 3:
        raise PlanError(f"a launch needs 3 block and 3 grid extents, not {list(block)} and {list(grid)}")
    return {"block": [int(b) for b in block], "grid": [_expr(g) for g in grid]}


def _arg_json(a: Arg) -> dict:
    if isinstance(a, TensorArg):
        return {"value": a.value, "shape": [_expr(d) for d in a.shape]}
    if isinstance(a, F32Arg):
        return {"f32": a.f32}
    return {"i64": _expr(a.i64)}


def _step_json(s: Step) -> dict:
    if isinstance(s, AliasStep):
        return {"alias": s.alias, "of": s.of, **({"offset": _expr(s.offset)} if s.offset is not None else {})}
    if isinstance(s, CallStep):
        return {"call": s.call, "args": list(s.args), "results": list(s.results)}
    if isinstance(s, CollectiveStep):
        _check_collective(s)
        doc = {"collective": s.collective, "input": s.input, "output": s.output, "mesh_axes": list(s.mesh_axes),
               "mesh_shape": list(s.mesh_shape), "axis": s.axis}
        for key in COLLECTIVES[s.collective]:
            doc[key] = getattr(s, key)
        if "reduce" in COLLECTIVES[s.collective]:
            doc.update(deterministic=s.deterministic, algo=s.algo)
        return doc
    doc = {"kernel": s.kernel}
    if s.source is not None:
        doc["source"] = s.source
    if isinstance(s, ViewStep):
        for t in s.tensors:
            if t.view not in VIEWS:
                raise PlanError(f"step '{s.kernel}': view '{t.view}' is not one of {', '.join(VIEWS)}")
        doc.update(tensors=[{"value": t.value, "view": t.view} for t in s.tensors], R=_expr(s.R), C=_expr(s.C),
                   **_launch_json(s.block, s.grid))
        if s.B != "1":
            doc["B"] = _expr(s.B)
        if s.scalars:
            doc["scalars"] = [_expr(e) for e in s.scalars]
        return doc
    doc.update(env={k: _expr(e) for k, e in s.env.items()}, args=[_arg_json(a) for a in s.args],
               **_launch_json(s.block, s.grid))
    if s.batch is not None:
        doc["batch"] = s.batch
    if s.smem:
        doc["smem"] = s.smem
    if s.multiple_of:
        doc["multiple_of"] = [[_expr(m.expr), m.m, m.reason] for m in s.multiple_of]
    if s.prefer:
        doc["prefer"] = [{"when": _expr(a.when), "kernel": a.kernel, **_launch_json(a.block, a.grid),
                          **({"smem": a.smem} if a.smem else {})} for a in s.prefer]
    return doc


class _Fields:
    """Reads a JSON object's members by type; every failure, and every member left unread (`done`), is a
    PlanError naming `where`."""

    def __init__(self, doc, where: str):
        if not isinstance(doc, dict):
            raise PlanError(f"{where} is not a JSON object: {doc!r}")
        self.doc, self.where, self.read = doc, where, set()

    def field(self, key: str, kind, default=...):
        self.read.add(key)
        if key not in self.doc:
            if default is ...:
                raise PlanError(f"{self.where} has no '{key}'")
            return default
        v = self.doc[key]
        if not isinstance(v, kind) or (isinstance(v, bool) and kind is not bool):
            raise PlanError(f"{self.where}: '{key}' is {v!r}, not {getattr(kind, '__name__', 'a number')}")
        return v

    def list(self, key: str, default=...) -> list:
        return self.field(key, list, default)

    def object(self, key: str) -> dict:
        return self.field(key, dict)

    def strings(self, key: str, default=...) -> tuple[str, ...]:
        items = self.list(key, default)
        if not all(isinstance(x, str) for x in items):
            raise PlanError(f"{self.where}: '{key}' must hold strings, not {items!r}")
        return tuple(items)

    def ints(self, key: str, n: int | None = None) -> list[int]:
        items = self.list(key)
        if not all(type(x) is int for x in items) or (n is not None and len(items) != n):
            raise PlanError(f"{self.where}: '{key}' must be {n or 'a list of'} integers, not {items!r}")
        return items

    def exprs(self, key: str, default=..., n: int | None = None) -> tuple[str, ...]:
        items = self.strings(key, default)
        if n is not None and len(items) != n:
            raise PlanError(f"{self.where}: '{key}' must be {n} extent expressions, not {list(items)!r}")
        for e in items:
            parse(e)
        return items

    def expr(self, key: str, default=...) -> str | None:
        e = self.field(key, str, default)
        if e is not None:   # an absent member's default None (an alias's offset)
            parse(e)
        return e

    def done(self) -> None:
        unknown = sorted(set(self.doc) - self.read)
        if unknown:
            raise PlanError(f"{self.where} has unknown member{'s' if len(unknown) > 1 else ''} "
                            f"{', '.join(repr(k) for k in unknown)}")


def _value(doc, where: str) -> Value:
    r = _Fields(doc, where)
    v = Value(dtype=r.field("dtype", str), dims=r.exprs("dims"), buffer=r.field("buffer", int, None),
              declared=r.field("declared", str, None))
    r.done()
    return v


def _operator(doc, where: str) -> OperatorRecord:
    r = _Fields(doc, where)
    o = OperatorRecord(name=r.field("name", str), role=r.field("role", str), repr=r.field("repr", str),
                       tag=r.field("tag", str), flags=r.strings("flags"), payload=tuple(r.ints("payload")),
                       decomposition=r.field("decomposition", str, None),
                       frame_bytes=r.field("frame_bytes", int, None), depth=r.field("depth", int, None))
    r.done()
    return o


def _pair(doc, member: str = "same_extents") -> tuple[str, str]:
    if not (isinstance(doc, list) and len(doc) == 2 and all(isinstance(x, str) for x in doc)):
        raise PlanError(f"a '{member}' entry must be two extent expressions, not {doc!r}")
    return tuple(_expr(x) for x in doc)


def _step(doc, where: str) -> Step:
    r = _Fields(doc, where)
    if isinstance(doc, dict) and "alias" in doc:
        s = AliasStep(alias=r.field("alias", str), of=r.field("of", str), offset=r.expr("offset", None))
        r.done()
        return s
    if isinstance(doc, dict) and "call" in doc:
        s = CallStep(call=r.field("call", str), args=r.strings("args"), results=r.strings("results"))
        r.done()
        return s
    if isinstance(doc, dict) and "collective" in doc:
        return _collective(r, where)
    kernel = r.field("kernel", str)
    r.where = f"{where} ('{kernel}')"
    launch = {"block": tuple(r.ints("block", 3)), "grid": r.exprs("grid", n=3), "source": r.field("source", str, None)}
    if "args" not in doc:
        tensors = []
        for t in r.list("tensors"):
            tr = _Fields(t, f"{r.where}: a tensor")
            tensors.append(TensorView(value=tr.field("value", str), view=tr.field("view", str)))
            tr.done()
            if tensors[-1].view not in VIEWS:
                raise PlanError(f"{r.where}: view '{tensors[-1].view}' is not one of {', '.join(VIEWS)}")
        s = ViewStep(kernel=kernel, tensors=tuple(tensors), R=r.expr("R"), C=r.expr("C"), B=r.expr("B", "1"),
                     scalars=r.exprs("scalars", ()), **launch)
        r.done()
        return s
    env = r.object("env")
    for k, e in env.items():
        if not isinstance(e, str):
            raise PlanError(f"{r.where}: env '{k}' is {e!r}, not an extent expression")
        parse(e)
    s = ArgsStep(kernel=kernel, env=env, args=tuple(_arg(a, r.where) for a in r.list("args")),
                 batch=r.field("batch", str, None), smem=r.field("smem", int, 0),
                 multiple_of=tuple(_multiple(m, r.where) for m in r.list("multiple_of", ())),
                 prefer=tuple(_alternative(a, r.where) for a in r.list("prefer", ())), **launch)
    r.done()
    return s


def _collective(r: _Fields, where: str) -> CollectiveStep:
    kind = r.field("collective", str)
    if kind not in COLLECTIVES:
        raise PlanError(f"{where}: collective '{kind}' is not one of {', '.join(COLLECTIVES)}")
    r.where = f"{where} ({kind})"
    has = COLLECTIVES[kind]
    axes, shape = r.strings("mesh_axes"), tuple(r.ints("mesh_shape"))
    s = CollectiveStep(collective=kind, input=r.field("input", str), output=r.field("output", str),
                       mesh_axes=axes, mesh_shape=shape, axis=r.field("axis", str),
                       reduce=r.field("reduce", str) if "reduce" in has else None,
                       dim=r.field("dim", int) if "dim" in has else None,
                       root=r.field("root", int) if "root" in has else None,
                       deterministic=r.field("deterministic", bool) if "reduce" in has else False,
                       algo=r.field("algo", str) if "reduce" in has else "auto")
    r.done()
    _check_collective(s, r.where)
    return s


def _check_collective(s: CollectiveStep, where: str | None = None) -> None:
    """The rules of a collective step (docs/image-format.md), naming `where` (the step's place)."""
    where = where or f"collective step ({s.collective})"
    if s.collective not in COLLECTIVES:
        raise PlanError(f"{where}: collective '{s.collective}' is not one of {', '.join(COLLECTIVES)}")
    if not s.mesh_axes or len(s.mesh_axes) != len(s.mesh_shape) or len(set(s.mesh_axes)) != len(s.mesh_axes):
        raise PlanError(f"{where}: mesh_axes {list(s.mesh_axes)} must be distinct names, one per mesh_shape "
                        f"entry {list(s.mesh_shape)}")
    if any(type(n) is not int or n < 1 for n in s.mesh_shape):
        raise PlanError(f"{where}: mesh_shape {list(s.mesh_shape)} must hold positive sizes")
    if s.axis not in s.mesh_axes:
        raise PlanError(f"{where}: axis '{s.axis}' is not one of the mesh's {list(s.mesh_axes)}")
    n = s.mesh_shape[s.mesh_axes.index(s.axis)]
    if "reduce" in COLLECTIVES[s.collective]:
        if s.reduce not in REDUCTIONS:
            raise PlanError(f"{where}: reduce '{s.reduce}' is not one of {', '.join(REDUCTIONS)}")
        if s.algo not in ALGOS:
            raise PlanError(f"{where}: algo '{s.algo}' is not one of {', '.join(ALGOS)}")
    if "dim" in COLLECTIVES[s.collective] and (type(s.dim) is not int or s.dim < 0):
        raise PlanError(f"{where}: dim {s.dim!r} must be a tensor axis (an integer >= 0)")
    if "root" in COLLECTIVES[s.collective] and (type(s.root) is not int or not 0 <= s.root < n):
        raise PlanError(f"{where}: root {s.root!r} is not an index along axis '{s.axis}' (0..{n - 1})")


def _arg(doc, where: str) -> Arg:
    r = _Fields(doc, f"{where}: an argument")
    if "value" in doc:
        a = TensorArg(value=r.field("value", str), shape=r.exprs("shape"))
    elif "f32" in doc:
        a = F32Arg(float(r.field("f32", (int, float))))
    else:
        a = I64Arg(r.expr("i64"))
    r.done()
    return a


def _multiple(doc, where: str) -> MultipleOf:
    if not (isinstance(doc, list) and len(doc) == 3 and isinstance(doc[0], str) and type(doc[1]) is int
            and isinstance(doc[2], str)):
        raise PlanError(f"{where}: a 'multiple_of' entry must be [expression, integer, reason], not {doc!r}")
    return MultipleOf(_expr(doc[0]), doc[1], doc[2])


def _alternative(doc, where: str) -> Alternative:
    r = _Fields(doc, f"{where}: a 'prefer' alternative")
    a = Alternative(when=r.expr("when"), kernel=r.field("kernel", str), grid=r.exprs("grid", n=3),
                    block=tuple(r.ints("block", 3)), smem=r.field("smem", int, 0))
    r.done()
    return a


