"""Symbolic shapes of Graph IR values, for the launch plan: every extent as an expression over the function's
parameter symbols (`"M"`, `"(M*K)//8"`), so buffers and grids can be sized when the inputs arrive.

MLIR types keep only `?` for an extent known at run time; the function's arguments carry their symbols
(`tessera.dims`), and each op's rule below carries them to its results.
"""

from __future__ import annotations

import json
import re

from ..diagnostics import LoweringError
from ..dialects.ttensor import as_read, conv_extent, matmul_transposes
from ..mlir import ir
from .schedule_ir import graph_ops

Dims = list[str]


def _static(t: ir.RankedTensorType) -> list[str | None]:
    return [None if t.is_dynamic_dim(i) else str(t.get_dim_size(i)) for i in range(t.rank)]


def product(dims: Dims) -> str:
    if not dims:
        return "1"
    if all(d.isdigit() for d in dims):
        n = 1
        for d in dims:
            n *= int(d)
        return str(n)
    return "*".join(d if d.isidentifier() or d.isdigit() else f"({d})" for d in dims)


def blocks(rows: str, step: int) -> str:
    """How many blocks of `step` rows hold `rows` rows (the last one may be partial)."""
    return str(-(-int(rows) // step)) if rows.isdigit() else f"ceil(({rows})/{step})"


def _broadcast(a: Dims, b: Dims) -> Dims:
    """numpy broadcasting; two different symbolic extents broadcast to their maximum (one of them is 1 or
    they are equal, which the verifier and the runtime's shape checks guarantee)."""
    out = []
    for i in range(max(len(a), len(b))):
        x = a[len(a) - 1 - i] if i < len(a) else "1"
        y = b[len(b) - 1 - i] if i < len(b) else "1"
        out.append(y if x == "1" else x if y in ("1", x) else f"max({x}, {y})")
    return list(reversed(out))


def broadcasts(fn, dims: dict) -> list[tuple[str, str]]:
    """The pairs of different extents that `fn`'s ops broadcast against each other (each once, in program
    order): the extents _broadcast joins as max(x, y), which is their broadcast only where a call gives them
    equal, or one of them 1 and the other not 0 — the plan's `broadcasts`, which the runtime checks."""
    pairs: list[tuple[str, str]] = []

    def join(a: Dims, b: Dims) -> Dims:
        for x, y in zip(reversed(a), reversed(b)):
            if "1" not in (x, y) and x != y and (x, y) not in pairs:
                pairs.append((x, y))
        return _broadcast(a, b)

    for op in graph_ops(fn):
        name = op.operation.name
        ins = [dims.get(o) for o in op.operands]
        if name == "ttensor.binary":
            join(ins[0], ins[1])
        elif name == "ttensor.select":
            join(join(ins[0], ins[1]), ins[2])
        elif name == "ttensor.matmul":
            a, b = (as_read(d, t) for d, t in zip(ins, matmul_transposes(op)))
            join(a[:-2], b[:-2])
    return pairs


_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def rename(expr: str, names: dict) -> str:
    """Extent expression `expr` (a reshape's `tessera.result_dims` entry: a symbol, digits, an expression over
    symbols or `?`) with its symbols renamed by `names` (symbol -> a name, digits or an expression); `?`
    where one of them has no new name."""
    if expr == "?" or expr.isdigit():
        return expr
    missing = []

    def sub(m):
        word = m.group(0)
        if word in ("max", "min", "ceil"):
            return word
        if word not in names:
            missing.append(word)
            return word
        new = names[word]
        return new if new.isidentifier() or new.isdigit() else f"({new})"
    out = _SYMBOL.sub(sub, expr)
    return "?" if missing else out


def _ints(attr) -> list[int]:
    return [ir.IntegerAttr(a).value for a in ir.ArrayAttr(attr)]


def infer(fn) -> dict:
    """Value -> dims for every tensor value of a `tessera.function`."""
    dims: dict = {}
    arg_attrs = list(ir.ArrayAttr(fn.attributes["arg_attrs"]))
    for arg, attrs in zip(fn.entry_block.arguments, arg_attrs):
        d = ir.DictAttr(attrs)["tessera.dims"]
        dims[arg] = [ir.StringAttr(x).value if isinstance(x, ir.StringAttr) else str(ir.IntegerAttr(x).value)
                     for x in ir.ArrayAttr(d)]
    for op in graph_ops(fn):
        if op.operation.name == "func.return":
            continue
        ins = [dims.get(o) for o in op.operands]
        for r, d in zip(op.results, _rule(op, ins)):
            dims[r] = d
    return dims


def _rule(op, ins: list[Dims]) -> list[Dims]:
    name = op.operation.name
    t = op.results[0].type if op.results else None
    if name == "tensor.cast":   # the frontend's cast to and from an imported function's types: same extents
        return [ins[0]]
    if name == "func.call":
        return _call_dims(op, ins)
    if name in ("ttensor.unary", "ttensor.softmax", "ttensor.log_softmax", "ttensor.layernorm", "ttensor.rmsnorm",
                "ttensor.dropout", "ttensor.cast", "ttensor.bias_add", "ttensor.quantize", "ttensor.dequantize",
                "tdist.all_reduce", "tdist.broadcast"):
        return [ins[0]]
    if name == "ttensor.binary":
        return [_broadcast(ins[0], ins[1])]
    if name == "ttensor.push":   # the history's extent
        return [ins[1]]
    if name == "ttensor.select":
        return [_broadcast(_broadcast(ins[0], ins[1]), ins[2])]
    if name == "ttensor.matmul":
        a, b = (as_read(d, t) for d, t in zip(ins, matmul_transposes(op)))
        return [_broadcast(a[:-2], b[:-2]) + [a[-2], b[-1]]]
    if name == "ttensor.constant":
        return [[d for d in _static(t)]]
    if name == "ttensor.reduce":
        axes = set(_ints(op.attributes["axes"]))
        keep = ir.BoolAttr(op.attributes["keepdims"]).value
        return [[("1" if i in axes else d) for i, d in enumerate(ins[0]) if keep or i not in axes]]
    if name == "ttensor.transpose":
        return [[ins[0][p] for p in _ints(op.attributes["perm"])]]
    if name == "ttensor.reshape":
        out = _named(op, _static(t))
        unknown = [i for i, d in enumerate(out) if d is None]
        if len(unknown) > 1:
            raise LoweringError(op, "a reshape with more than one extent known only at run time cannot be "
                                    "planned; give all but one extent")
        if unknown:
            known = product([d for d in out if d is not None])
            out[unknown[0]] = product(ins[0]) if known == "1" else f"({product(ins[0])})//({known})"
        return [out]
    if name == "ttensor.broadcast":
        out = _named(op, _static(t))
        x = ins[0]
        for i, d in enumerate(out):
            j = i - (len(out) - len(x))
            if d is None:
                out[i] = x[j] if j >= 0 else "1"
        return [out]
    if name in ("ttensor.flash_attention", "ttensor.flash_attention_fp8"):
        return [ins[0][:-1] + ins[2][-1:]]
    if name == "ttensor.attention_lse":   # one value per query row
        return [ins[0][:-1]]
    if name == "ttensor.attention_grad":  # the extents of the operand it differentiates
        return [ins["qkv".index(ir.StringAttr(op.attributes["wrt"]).value)]]
    if name == "ttensor.conv":   # the extents after N and O are static (the frontend requires it)
        return [[ins[0][0], ins[1][0]] + _static(t)[2:]]
    if name in ("ttensor.twiddle", "ttensor.linalg", "ttensor.slice"):   # static
        return [[d for d in _static(t)]]
    if name == "ttensor.interleave":   # the parts side by side
        return [ins[0] + ["2"]]
    if name in ("ttensor.fft_stage", "ttensor.chirp", "ttensor.chirp_mul", "ttensor.spectrum_mul"):   # static
        return [[d for d in _static(t)]]
    if name == "ttensor.part":   # one of the pairs' halves
        return [ins[0][:-1]]
    if name == "ttensor.col2im":   # like's extents
        return [ins[1]]
    if name == "ttensor.im2col":   # [N · output positions, C · taps]: only N may be known at run time
        x = ir.RankedTensorType(op.operands[0].type)
        kernel, stride, pad, dil = (_ints(op.attributes[a]) for a in ("kernel", "stride", "padding", "dilation"))
        positions = 1
        for i, (k, s, d) in enumerate(zip(kernel, stride, dil)):
            positions *= conv_extent(x.get_dim_size(2 + i), k, s, pad[2 * i], pad[2 * i + 1], d)
        return [[product([ins[0][0], str(positions)]), _static(t)[1]]]
    if name == "ttensor.load_blocks":
        step = ir.IntegerAttr(op.attributes["step"]).value
        return [[blocks(ins[0][0], step), str(step)] + ins[0][1:]]
    if name == "ttensor.store_blocks":
        return [ins[1]]
    if name == "ttensor.mask_blocks":
        return [ins[0]]
    if name in ("tdist.all_gather", "tdist.reduce_scatter"):   # dim grows or shrinks by the axis' size
        d = ir.IntegerAttr(op.attributes["dim"]).value
        n = str(collective_size(op))
        out = list(ins[0])
        x = out[d]
        if name == "tdist.all_gather":
            out[d] = str(int(x) * int(n)) if x.isdigit() else product([x, n])
        else:
            out[d] = str(int(x) // int(n)) if x.isdigit() else f"({x})//{n}"
        return [out]
    raise LoweringError(op, f"'{name}' has no kernel lowering yet (run it with tessera.interpret)")


def collective_size(op) -> int:
    """The size of the mesh axis a tdist op runs over."""
    axes = [ir.StringAttr(a).value for a in ir.ArrayAttr(op.attributes["mesh_axes"])]
    return _ints(op.attributes["mesh_shape"])[axes.index(ir.StringAttr(op.attributes["axis"]).value)]


def _named(op, out: list) -> list:
    """A reshape's or broadcast's result extents `out` (None: known only at run time) with those its
    `tessera.result_dims` names (the frontend's names, or a derivative's: passes/autodiff.py) filled in."""
    if "tessera.result_dims" not in op.attributes:
        return out
    named = [ir.StringAttr(a).value for a in ir.ArrayAttr(op.attributes["tessera.result_dims"])]
    return [o if o is not None else (n if n != "?" else None) for o, n in zip(out, named)]


def _call_dims(call, ins: list[Dims]) -> list[Dims]:
    """The extents of a call's results: the callee's declared result extents (its `tessera.signature`), its
    parameter extent names bound to the caller's arguments'."""
    callee = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
    module = call.operation.parent
    while module is not None and module.name != "builtin.module":
        module = module.parent
    decl = next((op for op in module.regions[0].blocks[0].operations if op.operation.name == "func.func"
                 and ir.StringAttr(op.attributes["sym_name"]).value == callee), None) if module else None
    if decl is None or "tessera.signature" not in decl.attributes:
        raise LoweringError(call, f"a call of '{callee}', which is not an imported function, was not inlined")
    sig = json.loads(ir.StringAttr(decl.attributes["tessera.signature"]).value)
    binding: dict[str, str] = {}
    for p, dims in zip(sig["params"], ins):
        for d, have in zip(p["dims"], dims):
            if not d.isdigit():
                binding.setdefault(d, have)
    out = []
    for r in sig["results"]:
        if any(d not in binding and not d.isdigit() for d in r["dims"]):
            raise LoweringError(call, f"'{callee}' returns a tensor whose extents its parameters do not determine "
                                      f"({', '.join(r['dims'])}): an imported function's result extents are its "
                                      f"parameters' extents or constants")
        out.append([d if d.isdigit() else binding[d] for d in r["dims"]])
    return out


def arg_dims(fn) -> dict:
    """Block argument -> its `tessera.dims` names (strings; a static extent as its digits)."""
    out = {}
    if "arg_attrs" not in fn.attributes:
        return out
    for arg, attrs in zip(fn.regions[0].blocks[0].arguments, ir.ArrayAttr(fn.attributes["arg_attrs"])):
        d = ir.DictAttr(attrs)
        if "tessera.dims" in d:
            out[arg] = [ir.StringAttr(x).value if isinstance(x, ir.StringAttr) else str(ir.IntegerAttr(x).value)
                        for x in ir.ArrayAttr(d["tessera.dims"])]
    return out
