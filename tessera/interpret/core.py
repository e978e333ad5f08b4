"""Walks a function's ops in order, keeping one value per device for every SSA value."""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..mlir import ir
from .registry import LOCAL, SPMD
from .tensor_ops import broadcast, reshape
from .values import InterpreterError, from_user, to_user


class Interpreter:
    def __init__(self, module: ir.Module, world: int = 1):
        if world < 1:
            raise ValueError("world must be at least 1")
        self.module = module
        self.world = world

    def function(self, name: str):
        for op in self.module.body.operations:
            if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == name:
                return op
        have = [ir.StringAttr(op.attributes["sym_name"]).value for op in self.module.body.operations
                if op.operation.name == "func.func"]
        raise InterpreterError(f"no function '{name}' (functions: {', '.join(have) or 'none'})")

    def run(self, name: str, *args):
        fn = self.function(name)
        params = list(fn.entry_block.arguments)
        if any(isinstance(p.type, ir.MemRefType) for p in params):
            raise InterpreterError(f"'{name}' is a SIMT kernel (@kernel): the interpreter runs Graph IR (@function "
                                   f"and tile programs), not thread-level code; compile it and launch it "
                                   f"(tessera.runtime.load(tessera.compile(source)).kernel('{name}')), which the "
                                   f"CPU backend runs on any machine")
        if len(args) != len(params):
            raise InterpreterError(f"'{name}' takes {len(params)} arguments, got {len(args)}")
        ins = []
        attrs = list(ir.ArrayAttr(fn.attributes["arg_attrs"])) if "arg_attrs" in fn.attributes else []
        for i, (p, a) in enumerate(zip(params, args)):
            shard = ir.DictAttr(attrs[i]) if i < len(attrs) else None
            if shard is not None and "tessera.shard" in shard and not isinstance(a, list):
                per_device = _split(ir.DictAttr(shard["tessera.shard"]), np.asarray(a), self.world,
                                    f"argument {i} of '{name}'")
            else:
                per_device = a if isinstance(a, list) else [a] * self.world
            if len(per_device) != self.world:
                raise InterpreterError(f"argument {i} has {len(per_device)} per-device values for a world of "
                                       f"{self.world}")
            ins.append([from_user(x, p.type, f"argument {i} of '{name}'") for x in per_device])
        results, types = self._body(fn, ins, [name])
        outs = [[to_user(v, t) for v in vals] for vals, t in zip(results, types)]
        outs = [o[0] if self.world == 1 else o for o in outs]
        _write_outputs(fn, args, outs, self.world)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _body(self, fn, ins: list, stack: list):
        """Runs `fn` on per-device values; returns its results' per-device values and their types. A
        `func.call` runs its callee the same way (the frontend writes calls between @functions so)."""
        env: dict = dict(zip(fn.entry_block.arguments, ins))
        symbols = _symbols(fn, ins, self.world)
        for op in fn.entry_block.operations:
            name_ = op.operation.name
            if name_ == "func.return":
                return [env[o] for o in op.operands], [o.type for o in op.operands]
            ins = [env[o] for o in op.operands]
            try:
                if name_ == "func.call":
                    callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
                    if callee in stack:
                        raise InterpreterError(f"{op.location}: '{callee}' calls itself "
                                               f"({' -> '.join(stack + [callee])})")
                    outs, _ = self._body(self.function(callee), ins, stack + [callee])
                elif name_ == "tensor.cast":   # a type made more or less precise: the same values
                    outs = [ins[0]]
                elif name_ == "ttensor.reshape":   # its named extents bound to this call's arguments'
                    outs = [[reshape(op, ins[0][d], symbols[d]) for d in range(self.world)]]
                elif name_ == "ttensor.broadcast":   # likewise
                    outs = [[broadcast(op, ins[0][d], symbols[d]) for d in range(self.world)]]
                elif name_ in SPMD:
                    outs = SPMD[name_](op, ins)
                elif name_ in LOCAL:
                    per = [LOCAL[name_](op, [i[d] for i in ins]) for d in range(self.world)]
                    outs = [[p[k] for p in per] for k in range(len(op.results))]
                else:
                    raise InterpreterError(f"{op.location}: the interpreter has no implementation of '{name_}'")
            except InterpreterError:
                raise
            except (ValueError, FloatingPointError, np.linalg.LinAlgError) as e:
                raise InterpreterError(f"{op.location}: '{name_}' failed: {e}") from None
            for r, vals in zip(op.results, outs):
                env[r] = vals
        raise InterpreterError(f"'{stack[-1]}' has no return")


def _split(shard: ir.DictAttr, whole: np.ndarray, world: int, what: str) -> list:
    """A whole tensor passed for a `dist.shard` parameter, as each device's slice: slice i along the shard's
    dim on the devices whose coordinate along its mesh axis is i."""
    axes = [ir.StringAttr(a).value for a in ir.ArrayAttr(shard["mesh_axes"])]
    shape = [ir.IntegerAttr(a).value for a in ir.ArrayAttr(shard["mesh_shape"])]
    axis, dim = axes.index(ir.StringAttr(shard["axis"]).value), ir.IntegerAttr(shard["dim"]).value
    if int(np.prod(shape)) != world:
        raise InterpreterError(f"{what} is sharded over a mesh of {int(np.prod(shape))} devices but the "
                               f"interpreter runs {world}")
    if whole.ndim <= dim or whole.shape[dim] % shape[axis]:
        raise InterpreterError(f"{what}: a whole tensor of shape {list(whole.shape)} cannot be split in "
                               f"{shape[axis]} along dim {dim}")
    parts = np.split(whole, shape[axis], axis=dim)
    return [parts[np.unravel_index(d, shape)[axis]] for d in range(world)]


def _symbols(fn, ins: list, world: int) -> list:
    """Per device, the extent symbols of `fn`'s parameters (their `tessera.dims`) -> the extents of the
    arguments passed: what a reshape's `tessera.result_dims` are evaluated with."""
    out = [{} for _ in range(world)]
    if "arg_attrs" not in fn.attributes:
        return out
    for vals, attrs in zip(ins, ir.ArrayAttr(fn.attributes["arg_attrs"])):
        d = ir.DictAttr(attrs)
        if "tessera.dims" not in d:
            continue
        for i, x in enumerate(ir.ArrayAttr(d["tessera.dims"])):
            if isinstance(x, ir.StringAttr) and ir.StringAttr(x).value.isidentifier():
                for k in range(world):
                    shape = np.shape(vals[k])
                    if i < len(shape):
                        out[k].setdefault(ir.StringAttr(x).value, shape[i])
    return out


def _write_outputs(fn, args: tuple, outs: list, world: int) -> None:
    """A tile program's results written into the arrays passed for its outputs, as the executor does."""
    if "tessera.outputs" not in fn.attributes:
        return
    for index, value in zip((ir.IntegerAttr(a).value for a in ir.ArrayAttr(fn.attributes["tessera.outputs"])), outs):
        targets = args[index] if isinstance(args[index], list) else [args[index]]
        values = value if world > 1 else [value]
        for target, v in zip(targets, values):
            if isinstance(target, np.ndarray):
                np.copyto(target, np.reshape(v, target.shape), casting="same_kind")


def run(module, name: str, *args, world: int = 1):
    """Runs function `name` of `module` (an ``ir.Module`` or a ``ModuleIR``) on numpy arrays. Derivatives the
    frontend declared (`g = grad(f)`) get their bodies first, from the pass the compiler runs."""
    mod = getattr(module, "module", module)
    with mod.context:
        derive(mod)
        return Interpreter(mod, world).run(name, *args)


def derive(mod: ir.Module) -> None:
    """Writes the bodies of `mod`'s declared derivatives (passes/autodiff.py), in place, once; an op without a
    rule is a CompileError at its line, as the compiler reports it."""
    if not any("tessera.derivative" in op.attributes and not op.regions[0].blocks for op in mod.body.operations
               if op.operation.name == "func.func"):
        return
    # lazy: the passes load only for a module with derivatives (the interpreter is above them)
    from ..diagnostics import CompileError, LoweringError
    from ..passes import autodiff
    try:
        autodiff.run(mod.operation)
    except LoweringError as e:
        raise CompileError.from_lowering(e, "<unknown>") from None


__all__ = ["Interpreter", "run", "dtypes"]
