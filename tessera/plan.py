"""Launch plans of Graph IR functions: the kernels to run, in order, on which tensors.

An image stores the plans of its functions as JSON in its `.tessera.plan` section:

    {"version": 1, "functions": {NAME: {
        "params": [parameter names], "args": [value ids], "results": [value ids],
        "values": {ID: {"dtype": "f32", "dims": [extent expressions], ["buffer": slot]}},
        "steps": [{"kernel": K, "tensors": [{"value": ID, "view": V}], "R": expr, "C": expr, ["B": expr,]
                   "block": [x, y, z], "grid": [expr, expr, expr], ["scalars": [expr, …]]}
                  | {"alias": ID, "of": ID}],
        "fallbacks": ["bf16 computed in f32", ...],
        "outputs": [parameter indices a tile program writes in place, in result order],
        ["same_extents": [[symbol, symbol], …]: extents the arguments must give equal values]}}}

Steps that list "args" give each tensor's "shape" (expressions over the step's "env") and scalars as
{"f32": value} or {"i64": expr}; with "batch": NAME the step runs once per batch entry, on the [i] slices of
the tensors whose shape starts with NAME; "smem": BYTES is the dynamic shared memory each block of the step
needs (the Hopper kernels' stage rings); "multiple_of": [[expr, m, reason], …] are extents the kernel needs
to be multiples of m (checked before the launch, the reason in the error); "prefer": [{"when": expr,
"kernel": K, "grid": […], "block": […], "smem": BYTES}, …] are alternative kernels for the same arguments, the
first whose `when` is positive at the launch taking the step's place (a GEMM's other tile shape, chosen by
the cost model once symbolic extents are known). Otherwise a view says how the
kernel sees a tensor: "matrix" [R, C], "cols" [C], "rows" [R], "scalar" (all its elements), "bmn" [B, R, C]
and "bnm" [B, C, R]; R, C and B are the step's own extents. `scalars` are int64 arguments after the tensors
(the strides a broadcast input is indexed with).
Extent expressions are Python arithmetic over the parameters' symbols (`"M"`, `"(M*K)//8"`, `"ceil(C/128)"`),
evaluated by `evaluate` — which accepts only names, integers, + - * // /, ceil(), max() and min(). The name
DEVICE_UNITS is the device's number of multiprocessors (CPU: worker threads), which persistent kernels size
their grids by.
"""

from __future__ import annotations

import ast
import json
import math

SECTION = ".tessera.plan"
VERSION = 1


class PlanError(ValueError):
    pass


def encode(functions: dict) -> bytes:
    return json.dumps({"version": VERSION, "functions": functions}, sort_keys=True).encode()


def decode(data: bytes) -> dict:
    try:
        doc = json.loads(data.decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise PlanError(f"the launch plan is not valid JSON: {e}") from None
    if doc.get("version") != VERSION:
        raise PlanError(f"launch plan version {doc.get('version')} is not {VERSION}")
    return doc["functions"]


def chosen(step: dict, env: dict[str, int]) -> dict:
    """`step` as it launches with extents `env` (DEVICE_UNITS included): its first "prefer" alternative whose
    `when` is positive in place of its own kernel, grid, block and shared memory."""
    for alt in step.get("prefer", []):
        if evaluate(alt["when"], env) > 0:
            return {**step, **{k: v for k, v in alt.items() if k != "when"}}
    return step


def evaluate(expr: str, env: dict[str, int]) -> int:
    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in env:
                raise PlanError(f"extent '{node.id}' is unknown (known: {', '.join(sorted(env))})")
            return env[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Div):
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            if b == 0:
                raise PlanError(f"division by zero in extent '{expr}'")
            return a // b if isinstance(node.op, ast.FloorDiv) else a / b
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "ceil" \
                and len(node.args) == 1:
            return math.ceil(ev(node.args[0]))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("max", "min") \
                and len(node.args) == 2:
            return (max if node.func.id == "max" else min)(ev(node.args[0]), ev(node.args[1]))
        raise PlanError(f"unsupported extent expression '{expr}'")
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        raise PlanError(f"malformed extent expression '{expr}'") from None
    v = ev(tree)
    if v != int(v):
        raise PlanError(f"extent '{expr}' = {v} is not an integer")
    return int(v)
