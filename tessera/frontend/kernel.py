"""SIMT kernels: the AST of one `@kernel` function becomes a ``func.func`` over ``ttile``, ``arith``, ``scf``
and ``memref`` ops, every op located at the user's file:line:col.

Variables are SSA values with a fixed type: a variable assigned inside an ``if`` or a loop and defined before
it becomes a result of the ``scf.if`` / an iteration argument of the ``scf.for``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from ..diagnostics import CompileError
from ..mlir import arith, func, ir, math, memref, scf
from ..dialects import ttile, ttile_tile
from .. import dtypes
from . import shapes
from .attrs import INT64_MAX, UINT64_MAX, i64, u64
from .values import Scalar, TensorParam, Typer, assigned_names


@dataclass
class SharedArray(TensorParam):
    """A block's shared-memory array (`S = tile.alloc_shared((64, 32), float)`): one per block, seen by all its
    threads, indexed like a tensor parameter; `param` describes it as one (static extents)."""


# What a kernel's shared arrays may hold in all: the static shared memory every NVIDIA GPU gives a block
# without an opt-in (AMD's LDS and OpenCL's local memory are at least as large on the devices we target).
SHARED_BYTES = 48 * 1024


@dataclass
class Group:
    """A cooperative group of threads (`g = tile.cooperative_group(size=64)`)."""

    value: ir.Value
    size: int


# u8 has no type of its own in a kernel: MLIR's arithmetic takes signless integers and the kernel language's
# integers are signed (its //, %, <, float() pick the signed ops). A u8 tensor is stored as bytes (i8) and an
# element reads zero-extended into an i32, where the signed ops are the unsigned ones for 0..255; u8(x) wraps
# x to 0..255 (mod 256, numpy's astype), and a store keeps the low byte. Image signatures still say u8
# (the parameter's tessera.dtype attribute).
U8_STORAGE = "i8"
U8_VALUE = "i32"


# fp8 (e4m3, e5m2) is a memory type only: a tensor of it is stored as bytes (i8) and an element reads widened
# to f32 (arith.extf of the byte bitcast to f8E4M3FN / f8E5M2); a store, and fp8_e4m3(x), narrow to the
# format — ties to even, saturating at its largest finite value (±448, ±57344), NaN a NaN — as the interpreter
# rounds (tessera/numerics/rounding.py); fp8_e4m3(x) is that value held in an f32. Each backend spells the
# conversions out (passes/fp8_convert.py): ptx sm_89+ by cvt, every other target by integer arithmetic.
FP8 = ("fp8_e4m3", "fp8_e5m2")


def storage_type(dt: dtypes.DType) -> ir.Type:
    """The MLIR element type a kernel's tensor of `dt` is declared with."""
    return ir.Type.parse(U8_STORAGE if dt.name == "u8" or dt.name in FP8 else dt.mlir)


@dataclass
class KernelParam:
    name: str
    dtype: dtypes.DType
    tensor: bool
    dims: list = field(default_factory=list)  # per axis: int (static) or str (symbol)


_LAUNCH_QUERIES = {
    "thread_id": ttile.ThreadIdOp, "local_id": ttile.LocalIdOp, "block_id": ttile.BlockIdOp,
    "block_dim": ttile.BlockDimOp, "grid_dim": ttile.GridDimOp,
}
_SHUFFLES = {"warp_shuffle_down": ttile.ShuffleDownOp, "warp_shuffle_xor": ttile.ShuffleXorOp}
_WARP_QUERIES = {"lane_id": ttile.LaneIdOp, "warp_id": ttile.WarpIdOp, "warp_size": ttile.WarpSizeOp}
_MATH_UNARY = {
    "exp": math.ExpOp, "exp2": math.Exp2Op, "log": math.LogOp, "log2": math.Log2Op, "sqrt": math.SqrtOp,
    "rsqrt": math.RsqrtOp, "tanh": math.TanhOp, "sin": math.SinOp, "cos": math.CosOp, "erf": math.ErfOp,
    "floor": math.FloorOp, "ceil": math.CeilOp, "fabs": math.AbsFOp,
}
_ATOMICS = {"atomic_add": 1, "atomic_max": 1, "atomic_cas": 2}  # value operands after the element
_ATOMIC_DEFAULTS = {"order": "relaxed", "scope": "device"}  # CUDA's atomicAdd: relaxed, device scope
_FENCE_DEFAULTS = {"order": "seq_cst", "scope": "device"}    # CUDA's __threadfence()
_MATH_CONSTANTS = {"inf": float("inf"), "nan": float("nan"), "pi": 3.141592653589793, "e": 2.718281828459045}


def parse_params(fn: ast.FunctionDef, filename: str) -> list[KernelParam]:
    params = []
    for a in fn.args.args:
        params.append(_param_from_annotation(a, filename))
    for bad in (fn.args.vararg, fn.args.kwarg):
        if bad is not None:
            raise CompileError.at(bad, filename, "kernels take named parameters only (no *args or **kwargs)")
    if fn.args.kwonlyargs or fn.args.defaults:
        raise CompileError.at(fn, filename, "kernel parameters can have no defaults and no keyword-only marker")
    return params


def _param_from_annotation(a: ast.arg, filename: str) -> KernelParam:
    ann = a.annotation
    if ann is None:  # the spec's unannotated kernels take 1-D float tensors
        return KernelParam(a.arg, dtypes.BY_NAME["f32"], True, [f"{a.arg}.shape[0]"])
    if isinstance(ann, ast.Name):
        if ann.id == "tensor":
            return KernelParam(a.arg, dtypes.BY_NAME["f32"], True, [f"{a.arg}.shape[0]"])
        dt = dtypes.lookup(ann.id)
        if dt is None:
            raise CompileError.at(ann, filename, f"unknown type '{ann.id}' for parameter '{a.arg}'")
        if dt.name == "u8":  # a kernel computes u8 in an i32 (U8_VALUE): take the number as one
            raise CompileError.at(ann, filename, f"parameter '{a.arg}': a u8 scalar parameter is not supported; "
                                                 f"declare it int and wrap it with u8(...)")
        return KernelParam(a.arg, dt, False)
    if isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name) and ann.value.id == "tensor":
        items = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
        head = items[0] if items else ann
        if not isinstance(head, ast.Name) or dtypes.lookup(head.id) is None:
            raise CompileError.at(head, filename, "tensor[...] starts with an element type, e.g. tensor[float, \"N\"]")
        dims: list = []
        for d in items[1:]:
            dim = shapes.annotated(d)
            if dim is None:
                raise CompileError.at(d, filename, shapes.DIM_RULE)
            dims.append(dim)
        if not dims:
            dims = [f"{a.arg}.shape[0]"]
        return KernelParam(a.arg, dtypes.lookup(head.id), True, dims)
    raise CompileError.at(ann, filename, f"cannot read the type annotation of parameter '{a.arg}'")


class KernelBuilder(ast.NodeVisitor):
    """Emits one kernel into the current insertion point of an MLIR module."""

    def __init__(self, fn: ast.FunctionDef, filename: str):
        self.fn = fn
        self.filename = filename
        self.params = parse_params(fn, filename)
        self.vars: dict[str, object] = {}
        self.typer = Typer(self)
        self.entry: ir.Block | None = None
        self.shared_bytes = 0

    # -- helpers --------------------------------------------------------------------------------------
    def error(self, node: ast.AST, message: str) -> CompileError:
        return CompileError.at(node, self.filename, message)

    def loc(self, node: ast.AST) -> ir.Location:
        return ir.Location.file(self.filename, getattr(node, "lineno", 0), getattr(node, "col_offset", 0) + 1)

    # -- entry ----------------------------------------------------------------------------------------
    def build(self) -> func.FuncOp:
        arg_types = []
        with self.loc(self.fn):
            for p in self.params:
                if p.tensor:
                    shape = [d if isinstance(d, int) else ir.ShapedType.get_dynamic_size() for d in p.dims]
                    arg_types.append(ir.MemRefType.get(shape, storage_type(p.dtype)))
                else:
                    arg_types.append(ir.Type.parse(p.dtype.mlir))
        with self.loc(self.fn):
            f = func.FuncOp(self.fn.name, ir.FunctionType.get(arg_types, []))
            f.attributes["tessera.kernel"] = ir.UnitAttr.get()
            f.arg_attrs = ir.ArrayAttr.get([self._arg_attr(p) for p in self.params])
            entry = f.add_entry_block()
        self.entry = entry
        for p, v in zip(self.params, entry.arguments):
            self.vars[p.name] = TensorParam(p.name, v, p) if p.tensor else Scalar(v)
        with ir.InsertionPoint(entry):
            self.visit_body(self.fn.body)
            with self.loc(self.fn.body[-1] if self.fn.body else self.fn):
                func.ReturnOp([])
        return f

    @staticmethod
    def _arg_attr(p: KernelParam) -> ir.DictAttr:
        attrs = {"tessera.name": ir.StringAttr.get(p.name)}
        if p.tensor and (p.dtype.name == "u8" or p.dtype.name in FP8):  # its memref says i8 (storage_type):
            attrs["tessera.dtype"] = ir.StringAttr.get(p.dtype.name)      # the signature says u8 or the fp8
        if p.tensor:
            attrs["tessera.dims"] = ir.ArrayAttr.get(
                [ir.StringAttr.get(d) if isinstance(d, str) else ir.IntegerAttr.get(ir.IntegerType.get_signless(64), d)
                 for d in p.dims])
        return ir.DictAttr.get(attrs)

    def visit_body(self, stmts: list[ast.stmt]) -> None:
        for i, s in enumerate(stmts):
            if isinstance(s, ast.Return):
                if s.value is not None:
                    raise self.error(s, "kernels return nothing; write results into an output tensor")
                if i != len(stmts) - 1 or stmts is not self.fn.body:
                    raise self.error(s, "an early 'return' is not supported in a kernel; guard the work with 'if'")
                continue
            self.visit(s)

    def generic_visit(self, node: ast.AST):
        raise self.error(node, f"'{type(node).__name__}' is not supported in a Tessera kernel")

    # -- statements -----------------------------------------------------------------------------------
    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstring
        self.expr(node.value)

    def visit_Pass(self, node: ast.Pass) -> None:
        pass

    def visit_Assign(self, node: ast.Assign) -> None:
        if len(node.targets) != 1:
            raise self.error(node, "chained assignment is not supported")
        self.assign(node.targets[0], self.expr(node.value), node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is None:
            raise self.error(node, "a declaration needs a value")
        value = self.expr(node.value)
        if isinstance(node.annotation, ast.Name) and dtypes.lookup(node.annotation.id):
            dt = dtypes.lookup(node.annotation.id)
            value = self.to_u8(value, node) if dt.name == "u8" else self.to_fp8(value, dt, node) \
                if dt.name in FP8 else self.typer.cast(value, ir.Type.parse(dt.mlir), node)
        self.assign(node.target, value, node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        current = self.expr(node.target if isinstance(node.target, ast.Name) else node.target)
        value = self.typer.binop(node.op, current, self.expr(node.value), node)
        self.assign(node.target, value, node)

    def assign(self, target: ast.expr, value, node: ast.AST) -> None:
        if isinstance(target, ast.Name):
            old = self.vars.get(target.id)
            if isinstance(old, TensorParam):
                raise self.error(target, f"tensor parameter '{target.id}' cannot be reassigned")
            if isinstance(value, SharedArray) and value.name is None and old is None:
                value.name = value.param.name = target.id
                value.value.owner.attributes["tessera.name"] = ir.StringAttr.get(target.id)  # for bounds reports
                self.vars[target.id] = value
                return
            if isinstance(value, TensorParam):
                raise self.error(node, "tensors cannot be aliased to new names in a kernel")
            if isinstance(value, Group):
                self.vars[target.id] = value
                return
            if isinstance(old, Scalar) and old.typed:
                value = self.typer.cast(value, old.value.type, node)
            self.vars[target.id] = self.typer.scalar(value, node)
            return
        if isinstance(target, ast.Subscript):
            t = self.expr(target.value)
            if not isinstance(t, TensorParam):
                raise self.error(target, "only tensor parameters can be indexed")
            idx = self.indices(t, target.slice)
            if t.param.dtype.name in FP8:   # narrowed to the format's byte (FP8)
                v = self.narrow_fp8(value, t.param.dtype, node)
            else:
                v = self.typer.cast(value, t.elem_type, node)
            with self.loc(node):
                memref.StoreOp(v.value, t.value, idx)
            return
        raise self.error(target, "this assignment target is not supported")

    def visit_If(self, node: ast.If) -> None:
        cond = self.typer.condition(self.expr(node.test), node.test)
        carried = [n for n in assigned_names(node.body + node.orelse)
                   if isinstance(self.vars.get(n), Scalar)]
        before = {n: self.typer.materialize(self.vars[n], node) for n in carried}
        for n, v in before.items():
            self.vars[n] = v
        with self.loc(node):
            if_op = scf.IfOp(cond.value, [before[n].value.type for n in carried], has_else=True)
        outs = []
        for region_block, body in ((if_op.then_block, node.body), (if_op.else_block, node.orelse)):
            saved = dict(self.vars)
            with ir.InsertionPoint(region_block):
                self.visit_body(body)
                yielded = [self.typer.cast(self.vars[n], before[n].value.type, node).value for n in carried]
                with self.loc(node):
                    scf.YieldOp(yielded)
            outs.append(self.vars)
            self.vars = saved
        for n, r in zip(carried, if_op.results):
            self.vars[n] = Scalar(r)

    def visit_For(self, node: ast.For) -> None:
        if node.orelse:
            raise self.error(node, "'for ... else' is not supported")
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "a loop variable must be a plain name")
        it = node.iter
        if isinstance(it, (ast.List, ast.Tuple)):  # a literal list is unrolled: its items stay constants
            for item in it.elts:
                self.vars[node.target.id] = self.typer.scalar(self.expr(item), item)
                self.visit_body(node.body)
            return
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range":
            return self._range_loop(node, it)
        raise self.error(it, "a kernel loop iterates over range(...) or a literal list")

    def _range_loop(self, node: ast.For, call: ast.Call) -> None:
        args = [self.expr(a) for a in call.args]
        if not 1 <= len(args) <= 3 or call.keywords:
            raise self.error(call, "range() takes 1 to 3 positional arguments")
        start, stop, step = ([0] + args + [1])[:3] if len(args) == 1 else (args + [1])[:3]
        if isinstance(step, (int, float)) and step <= 0:
            raise self.error(call, "range() step must be positive in a kernel")
        index = ir.IndexType.get()
        lb, ub, st = (self.typer.cast(v, index, call).value for v in (start, stop, step))
        carried = [n for n in assigned_names(node.body)
                   if n != node.target.id and isinstance(self.vars.get(n), Scalar)]
        inits = [self.typer.materialize(self.vars[n], node) for n in carried]
        with self.loc(node):
            loop = scf.ForOp(lb, ub, st, [v.value for v in inits])
        saved = dict(self.vars)
        with ir.InsertionPoint(loop.body):
            self.vars[node.target.id] = Scalar(loop.induction_variable)
            for n, arg in zip(carried, loop.inner_iter_args):
                self.vars[n] = Scalar(arg)
            self.visit_body(node.body)
            with self.loc(node):
                scf.YieldOp([self.typer.cast(self.vars[n], v.value.type, node).value
                             for n, v in zip(carried, inits)])
        self.vars = saved
        for n, r in zip(carried, loop.results):
            self.vars[n] = Scalar(r)

    def visit_While(self, node: ast.While) -> None:
        raise self.error(node, "'while' loops are not supported in a kernel; use range(...)")

    # -- expressions ----------------------------------------------------------------------------------
    def expr(self, node: ast.expr):
        """Evaluates an expression to a Scalar, a TensorParam, or a Python number (a literal not yet typed)."""
        method = getattr(self, f"expr_{type(node).__name__}", None)
        if method is None:
            raise self.error(node, f"'{type(node).__name__}' expressions are not supported in a kernel")
        return method(node)

    def expr_Constant(self, node: ast.Constant):
        if isinstance(node.value, (bool, int, float)):
            return node.value
        raise self.error(node, f"constant {node.value!r} has no kernel type")

    def expr_Name(self, node: ast.Name):
        if node.id in self.vars:
            v = self.vars[node.id]
            return v.py if isinstance(v, Scalar) and not v.typed else v
        raise self.error(node, f"name '{node.id}' is not defined in this kernel")

    def expr_BinOp(self, node: ast.BinOp):
        return self.typer.binop(node.op, self.expr(node.left), self.expr(node.right), node)

    def expr_UnaryOp(self, node: ast.UnaryOp):
        return self.typer.unary(node.op, self.expr(node.operand), node)

    def expr_Compare(self, node: ast.Compare):
        left, result = self.expr(node.left), None
        for op, right_node in zip(node.ops, node.comparators):
            right = self.expr(right_node)
            c = self.typer.compare(op, left, right, node)
            result = c if result is None else self.typer.logical(ast.And(), result, c, node)
            left = right
        return result

    def expr_BoolOp(self, node: ast.BoolOp):
        acc = self.typer.condition(self.expr(node.values[0]), node.values[0])
        for v in node.values[1:]:
            if _reads_memory(v):
                acc = self._short_circuit(node, acc, v)
            else:
                acc = self.typer.logical(node.op, acc, self.typer.condition(self.expr(v), v), node)
        return acc

    def _short_circuit(self, node: ast.BoolOp, acc: Scalar, operand: ast.expr) -> Scalar:
        """`acc and operand` (`or`) evaluating `operand` only when `acc` does not decide, as Python does: it
        reads memory, which `acc` may guard (`i < X.shape[0] and X[i] > 0`)."""
        is_and = isinstance(node.op, ast.And)
        i1 = ir.IntegerType.get_signless(1)
        with self.loc(node):
            if_op = scf.IfOp(acc.value, [i1], has_else=True)
        decides, evaluates = (if_op.else_block, if_op.then_block) if is_and else (if_op.then_block, if_op.else_block)
        with ir.InsertionPoint(evaluates):
            v = self.typer.condition(self.expr(operand), operand)
            with self.loc(node):
                scf.YieldOp([v.value])
        with ir.InsertionPoint(decides), self.loc(node):
            scf.YieldOp([arith.ConstantOp(i1, int(not is_and)).result])
        return Scalar(if_op.results[0])

    def expr_IfExp(self, node: ast.IfExp):
        cond = self.typer.condition(self.expr(node.test), node.test)
        a, b = self.typer.unify(self.expr(node.body), self.expr(node.orelse), node)
        with self.loc(node):
            return Scalar(arith.SelectOp(cond.value, a.value, b.value).result)

    def expr_Attribute(self, node: ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id == "math" and node.attr in _MATH_CONSTANTS:
            return _MATH_CONSTANTS[node.attr]
        raise self.error(node, f"attribute '{ast.unparse(node)}' is not supported here")

    def expr_Subscript(self, node: ast.Subscript):
        # X.shape[k]
        if isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
            t = self.expr(node.value.value)
            if not isinstance(t, TensorParam):
                raise self.error(node, "'.shape' belongs to tensor parameters")
            k = node.slice
            if not (isinstance(k, ast.Constant) and isinstance(k.value, int)):
                raise self.error(k, "a shape index must be an integer literal")
            if not 0 <= k.value < t.rank:
                raise self.error(k, f"'{t.name}' has rank {t.rank}; shape[{k.value}] does not exist")
            with self.loc(node):
                return Scalar(memref.DimOp(t.value, arith.ConstantOp.create_index(k.value).result).result)
        t = self.expr(node.value)
        if not isinstance(t, TensorParam):
            raise self.error(node, "only tensor parameters can be indexed")
        idx = self.indices(t, node.slice)
        with self.loc(node):
            v = memref.LoadOp(t.value, idx).result
            if t.param.dtype.name == "u8":  # zero-extended (U8_STORAGE)
                return Scalar(arith.ExtUIOp(ir.Type.parse(U8_VALUE), v).result)
            if t.param.dtype.name in FP8:   # widened to f32 (FP8)
                f8 = arith.BitcastOp(ir.Type.parse(t.param.dtype.mlir), v).result
                return Scalar(arith.ExtFOp(ir.F32Type.get(), f8).result)
            return Scalar(v)

    def indices(self, t: TensorParam, sl: ast.expr) -> list[ir.Value]:
        items = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        if any(isinstance(i, ast.Slice) for i in items):
            raise self.error(sl, "slices are tile-level operations; a SIMT kernel indexes one element")
        if len(items) != t.rank:
            raise self.error(sl, f"'{t.name}' has rank {t.rank} but is indexed with {len(items)} indices")
        return [self.typer.cast(self.expr(i), ir.IndexType.get(), i).value for i in items]

    def expr_Call(self, node: ast.Call):
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            ns, name = f.value.id, f.attr
            if ns == "launch" and name in _LAUNCH_QUERIES:
                return self._launch_query(node, _LAUNCH_QUERIES[name])
            if ns == "tile" and name in _WARP_QUERIES:
                self._arity(node, 0)
                with self.loc(node):
                    return Scalar(_WARP_QUERIES[name](result=ir.IndexType.get()).result)
            if ns == "tile" and name in _SHUFFLES:
                self._arity(node, 2)
                v = self.typer.materialize(self.expr(node.args[0]), node)
                k = self.typer.cast(self.expr(node.args[1]), ir.IndexType.get(), node)
                with self.loc(node):
                    return Scalar(_SHUFFLES[name](v.value, k.value, result=v.value.type).result)
            if ns == "tile" and name == "cooperative_group":
                return self._cooperative_group(node)
            if ns == "tile" and name in ("warp_reduce", "group_reduce"):
                return self._reduce(node, name)
            if ns == "tile" and name == "philox_uniform":
                return self._philox(node)
            if ns == "tile" and name in _ATOMICS:
                return self._atomic(node, name)
            if ns == "tile" and name == "fence":
                return self._fence(node)
            if ns == "tile" and name == "alloc_shared":
                return self._alloc_shared(node)
            if ns == "tile" and name == "cp_async":
                return self._cp_async(node)
            if ns == "tile" and name == "barrier":  # every thread of the block meets here (bar.sync)
                self._arity(node, 0)
                with self.loc(node):
                    ttile_tile.BarrierOp()
                return 0
            group = self.vars.get(ns)
            if isinstance(group, Group):
                return self._group_method(node, group, name)
            if ns == "math" and name in _MATH_UNARY:
                self._arity(node, 1)
                v = self.typer.to_float(self.expr(node.args[0]), node)
                with self.loc(node):
                    return Scalar(_MATH_UNARY[name](v.value).result)
            raise self.error(node, f"unknown function '{ns}.{name}' in a kernel")
        if isinstance(f, ast.Name):
            return self._builtin(node, f.id)
        raise self.error(node, "this call is not supported in a kernel")

    def _cooperative_group(self, node: ast.Call):
        kw = {k.arg: k.value for k in node.keywords}
        size = kw.get("size", node.args[0] if node.args else None)
        if not (isinstance(size, ast.Constant) and type(size.value) is int and 0 < size.value <= INT64_MAX
                and size.value & (size.value - 1) == 0) or len(node.args) + len(node.keywords) != 1:
            raise self.error(node, "tile.cooperative_group(size=N) takes a constant power of two")
        with self.loc(node):
            t = ttile_tile.GroupType.get(i64(size.value))
            return Group(ttile_tile.CooperativeGroupOp(group=t).result, size.value)

    def _alloc_shared(self, node: ast.Call) -> SharedArray:
        """tile.alloc_shared(shape, dtype): a shared-memory array of constant extents, at the kernel's top level
        (memref.alloca in the workgroup address space; the backends make it the block's shared memory)."""
        usage = "tile.alloc_shared((n, ...), dtype) takes constant positive extents and an element type"
        if len(node.args) != 2 or node.keywords:
            raise self.error(node, usage)
        shape_node, dtype_node = node.args
        items = shape_node.elts if isinstance(shape_node, ast.Tuple) else [shape_node]
        if not items or not all(isinstance(d, ast.Constant) and type(d.value) is int and d.value > 0 for d in items):
            raise self.error(shape_node, usage)
        dt = dtypes.lookup(dtype_node.id) if isinstance(dtype_node, ast.Name) else None
        if dt is None or dt.name not in ("f64", "f32", "f16", "bf16", "i64", "i32", "i16", "i8"):
            raise self.error(dtype_node, "a shared array holds floats or signed integers (f64, f32, f16, bf16, "
                                         "i64, i32, i16, i8)")
        if ir.InsertionPoint.current.block != self.entry:
            raise self.error(node, "tile.alloc_shared belongs at the kernel's top level (one array per block, "
                                   "not per branch or iteration)")
        dims = [d.value for d in items]
        elem = storage_type(dt)
        count = 1
        for d in dims:
            count *= d
        self.shared_bytes += count * dt.nbytes
        if self.shared_bytes > SHARED_BYTES:
            raise self.error(node, f"the kernel's shared arrays take {self.shared_bytes} bytes, more than the "
                                   f"{SHARED_BYTES} a block has on every target")
        t = ir.MemRefType.get(dims, elem, memory_space=ir.Attribute.parse("#gpu.address_space<workgroup>"))
        with self.loc(node):
            buf = memref.AllocaOp(t, [], []).result
        return SharedArray(None, buf, KernelParam(None, dt, True, dims))

    def _cp_async(self, node: ast.Call):
        """tile.cp_async(S[j], X[i]): starts copying one element of tensor X into shared array S; the copy is
        complete, and visible to the block, after the next tile.barrier() (cp.async on sm_80+, elsewhere a load
        and a store). The store carries `tessera.cp_async` for the backends that have the instruction."""
        usage = "tile.cp_async(S[j], X[i]) copies an element of a tensor parameter into a shared array"
        if len(node.args) != 2 or node.keywords or not all(isinstance(a, ast.Subscript) for a in node.args):
            raise self.error(node, usage)
        dst, src = self.expr(node.args[0].value), self.expr(node.args[1].value)
        if not isinstance(dst, SharedArray):
            raise self.error(node.args[0], f"{usage}: the destination is an element of a tile.alloc_shared array")
        if not isinstance(src, TensorParam) or isinstance(src, SharedArray):
            raise self.error(node.args[1], f"{usage}: the source is an element of a tensor parameter")
        if src.param.dtype != dst.param.dtype:
            raise self.error(node, f"tile.cp_async copies between equal element types, not {src.param.dtype.name} "
                                   f"into {dst.param.dtype.name}")
        to, frm = self.indices(dst, node.args[0].slice), self.indices(src, node.args[1].slice)
        with self.loc(node):
            v = memref.LoadOp(src.value, frm).result
            memref.StoreOp(v, dst.value, to).operation.attributes["tessera.cp_async"] = ir.UnitAttr.get()
        return 0

    def _group_method(self, node: ast.Call, group: "Group", name: str):
        self._arity(node, 0)
        with self.loc(node):
            if name == "sync":
                ttile_tile.GroupSyncOp(group.value)
                return 0
            if name == "thread_rank":
                return Scalar(ttile_tile.ThreadRankOp(group.value, result=ir.IndexType.get()).result)
        raise self.error(node, f"a cooperative group has sync() and thread_rank(), not {name}()")

    def _reduce(self, node: ast.Call, name: str):
        """tile.warp_reduce(v, "sum"), tile.group_reduce(v, "max", size=8): every lane gets the result."""
        if len(node.args) != 2 or not (isinstance(node.args[1], ast.Constant) and node.args[1].value in
                                       ("sum", "max", "min")):
            raise self.error(node, f"tile.{name}(value, \"sum\"|\"max\"|\"min\"{', size=N' if 'group' in name else ''})")
        v = self.typer.materialize(self.expr(node.args[0]), node)
        kind = ir.StringAttr.get(node.args[1].value)
        with self.loc(node):
            if name == "warp_reduce":
                if node.keywords:
                    raise self.error(node, "tile.warp_reduce takes no keyword arguments")
                return Scalar(ttile_tile.WarpReduceOp(v.value, kind=kind, result=v.value.type).result)
            size = {k.arg: k.value for k in node.keywords}.get("size")
            if not (isinstance(size, ast.Constant) and type(size.value) is int and 0 < size.value <= INT64_MAX) \
                    or len(node.keywords) != 1:
                raise self.error(node, "tile.group_reduce needs a constant size=N")
            return Scalar(ttile_tile.GroupReduceOp(v.value, kind=kind, group_size=i64(size.value),
                                                   result=v.value.type).result)

    def _philox(self, node: ast.Call):
        """tile.philox_uniform(counter, seed=S): the dropout generator's uniform for `counter`."""
        seed = {k.arg: k.value for k in node.keywords}.get("seed")
        if len(node.args) != 1 or not (isinstance(seed, ast.Constant) and type(seed.value) is int
                                       and 0 <= seed.value <= UINT64_MAX):
            raise self.error(node, "tile.philox_uniform(counter, seed=S) takes a constant 64-bit seed")
        counter = self.typer.cast(self.expr(node.args[0]), ir.IndexType.get(), node)
        with self.loc(node):
            return Scalar(ttile.PhiloxUniformOp(counter.value, seed=u64(seed.value), result=ir.F32Type.get()).result)

    def _memory_keywords(self, node: ast.Call, defaults: dict) -> dict:
        """order= and scope= of an atomic or fence: string literals among ttile_tile's names."""
        out = dict(defaults)
        choices = {"order": ttile_tile.ATOMIC_ORDERS, "scope": ttile_tile.ATOMIC_SCOPES}
        for k in node.keywords:
            if k.arg not in choices:
                raise self.error(k.value if k.arg else node, f"'{ast.unparse(node.func)}' takes order= and "
                                                             f"scope= keywords, not {k.arg or '**'}")
            if not (isinstance(k.value, ast.Constant) and k.value.value in choices[k.arg]):
                raise self.error(k.value, f"{k.arg} must be one of {', '.join(map(repr, choices[k.arg]))}")
            out[k.arg] = k.value.value
        return out

    def _atomic(self, node: ast.Call, name: str):
        """tile.atomic_add(X[i], v), tile.atomic_max(X[i, j], v), tile.atomic_cas(X[i], compare, value),
        each with optional order= and scope=: the element's old value."""
        values = _ATOMICS[name]
        usage = f"tile.{name}(X[index], {'compare, value' if values == 2 else 'value'}, order=..., scope=...)"
        if len(node.args) != values + 1 or not isinstance(node.args[0], ast.Subscript):
            raise self.error(node, f"{usage}: the first argument is the tensor element to update")
        target = node.args[0]
        t = self.expr(target.value)
        if not isinstance(t, TensorParam):
            raise self.error(target, "an atomic updates an element of a tensor parameter")
        kw = self._memory_keywords(node, _ATOMIC_DEFAULTS)
        elem = t.elem_type
        kind = name[len("atomic_"):]
        ok = isinstance(elem, ir.IntegerType) and ir.IntegerType(elem).width in (32, 64) or (
            kind in ("add", "max") and isinstance(elem, ir.F32Type))
        if not ok:
            allowed = {"add": "i32, i64 or f32", "max": "i32, i64 or f32", "cas": "i32 or i64"}[kind]
            raise self.error(node, f"tile.{name} takes a tensor of {allowed} elements; '{t.name}' has {elem}")
        idx = self.indices(t, target.slice)
        operands = [self.typer.cast(self.expr(a), elem, a).value for a in node.args[1:]]
        attrs = {k: ir.StringAttr.get(v) for k, v in kw.items()}
        with self.loc(node):
            if kind == "cas":
                return Scalar(ttile_tile.AtomicCasOp(*operands, t.value, idx, result=elem, **attrs).result)
            return Scalar(ttile_tile.AtomicRmwOp(operands[0], t.value, idx, kind=ir.StringAttr.get(kind),
                                                 result=elem, **attrs).result)

    def _fence(self, node: ast.Call):
        """tile.fence(order="seq_cst", scope="device"): orders this thread's memory accesses."""
        if node.args:
            raise self.error(node, "tile.fence takes only order= and scope= keywords")
        kw = self._memory_keywords(node, _FENCE_DEFAULTS)
        if kw["order"] == "relaxed":
            raise self.error(node, "a relaxed fence orders nothing; use acquire, release, acq_rel or seq_cst")
        with self.loc(node):
            ttile_tile.FenceOp(**{k: ir.StringAttr.get(v) for k, v in kw.items()})
        return 0

    def _arity(self, node: ast.Call, n: int) -> None:
        if len(node.args) != n or node.keywords:
            raise self.error(node, f"'{ast.unparse(node.func)}' takes {n} positional argument(s)")

    def _launch_query(self, node: ast.Call, op_cls):
        axis = 0
        if node.args or node.keywords:
            arg = node.args[0] if node.args else node.keywords[0].value
            if len(node.args) + len(node.keywords) != 1 or not (isinstance(arg, ast.Constant) and arg.value in (0, 1, 2)):
                raise self.error(node, f"'{ast.unparse(node.func)}' takes an optional axis 0, 1 or 2")
            axis = arg.value
        with self.loc(node):
            return Scalar(op_cls(dim=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), axis), result=ir.IndexType.get()).result)

    def _builtin(self, node: ast.Call, name: str):
        args = [self.expr(a) for a in node.args]
        if name in ("min", "max") and len(args) == 2 and not node.keywords:
            return self.typer.minmax(name, args[0], args[1], node)
        if name == "abs" and len(args) == 1:
            return self.typer.absolute(args[0], node)
        if name == "ceil_div" and len(args) == 2:
            return self.typer.ceil_div(args[0], args[1], node)
        if name in ("float", "int", "bool") and len(args) == 1:
            target = {"float": "f32", "int": "i32", "bool": "bool"}[name]
            return self.typer.cast(args[0], ir.Type.parse(dtypes.BY_NAME[target].mlir), node, explicit=True)
        dt = dtypes.lookup(name)
        if dt is not None and dt.name == "u8" and len(args) == 1:
            return self.to_u8(args[0], node)
        if dt is not None and dt.name in FP8 and len(args) == 1:
            return self.to_fp8(args[0], dt, node)
        if dt is not None and len(args) == 1:
            return self.typer.cast(args[0], ir.Type.parse(dt.mlir), node, explicit=True)
        raise self.error(node, f"unknown function '{name}' in a kernel")


    def to_u8(self, v, node: ast.AST) -> Scalar:
        """u8(v): v's integer value modulo 256, as an i32 (U8_VALUE); a float truncates toward zero first
        (undefined outside the i32 range, as int(x): generated kernels saturate before, kernelgen.saturate)."""
        v = self.typer.scalar(v, node)
        if not v.typed:
            return self.typer.materialize(Scalar(None, int(v.py) % 256), node, like=ir.Type.parse(U8_VALUE))
        wide = self.typer.cast(v, ir.Type.parse(U8_VALUE), node, explicit=True)
        return self.typer.binop(ast.BitAnd(), wide, 255, node)


    def narrow_fp8(self, v, dt: dtypes.DType, node: ast.AST) -> Scalar:
        """The byte (i8) of fp8 format `dt` nearest a number `v` (FP8): an f64 is narrowed from itself (one
        rounding), any other value from its f32."""
        v = self.typer.scalar(v, node)
        if not (v.typed and str(v.value.type) == "f64"):
            v = self.typer.cast(v, ir.F32Type.get(), node, explicit=True)
        with self.loc(node):
            f8 = arith.TruncFOp(ir.Type.parse(dt.mlir), v.value).result
            return Scalar(arith.BitcastOp(ir.Type.parse(U8_STORAGE), f8).result)

    def to_fp8(self, v, dt: dtypes.DType, node: ast.AST) -> Scalar:
        """fp8_e4m3(v), fp8_e5m2(v): `v` rounded to the format (FP8), held in an f32."""
        b = self.narrow_fp8(v, dt, node)
        with self.loc(node):
            f8 = arith.BitcastOp(ir.Type.parse(dt.mlir), b.value).result
            return Scalar(arith.ExtFOp(ir.F32Type.get(), f8).result)


def _reads_memory(node: ast.AST) -> bool:
    """Whether evaluating `node` indexes a tensor (`.shape[k]` reads no memory)."""
    return any(isinstance(n, ast.Subscript) and not (isinstance(n.value, ast.Attribute) and n.value.attr == "shape")
               for n in ast.walk(node))
