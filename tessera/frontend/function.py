"""`@tessera.function` programs: the AST of an operator program becomes a Graph IR ``func.func``.

A function takes tensors (`tensor[bf16, "M", "K"]`; scalars are 0-d tensors), computes with `op.*` calls and
Python operators (`A @ B`, `x + 1.0`, `-x`, `x.T`), and returns one or more tensors. Everything is evaluated
at compile time except tensor values: Python numbers, strings, tuples, dtypes and meshes are constants, and
`for i in range(3)` over constants is unrolled. Shapes are unified as ops are built (shapes.py); every
mistake is reported at the user's file:line:col.
"""

from __future__ import annotations

import ast
import math
import operator as py_op

from ..diagnostics import CompileError
from ..dialects import ttensor
from ..mlir import func, ir
from .. import dtypes
from . import consts, derivatives, hints
from .attrs import INT64_MAX, INT64_MIN, UINT64_MAX
from .oplib import OPS, Accum, DTypePolicy, GTensor, MeshSpec, describe
from .operator_abi import exported
from .shapes import DIM_RULE, ShapeEnv, ShapeError, annotated

_TENSOR_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Pow: "pow",
                  ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.BitAnd: "bitwise_and", ast.BitOr: "bitwise_or",
                  ast.BitXor: "bitwise_xor", ast.LShift: "left_shift", ast.RShift: "right_shift"}
# an i4 tensor is stored two per byte along its last axis, and crosses the ABI so (docs/language.md,
# "Quantization")
I4_ABI = "{what}: an i4 tensor needs a static even last extent (two elements a byte)"
_TENSOR_COMPARES = {ast.Lt: "less", ast.LtE: "less_equal", ast.Gt: "greater", ast.GtE: "greater_equal",
                    ast.Eq: "equal", ast.NotEq: "not_equal"}


def dtype_of_annotation(node: ast.expr, filename: str) -> DTypePolicy:
    """`bf16`, `tessera.bf16`, `fp8_e4m3 @ accum(fp32)`."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        base = dtype_of_annotation(node.left, filename)
        r = node.right
        if isinstance(r, ast.Call) and _name(r.func) == "accum" and len(r.args) == 1:
            return DTypePolicy(base.dtype, dtype_of_annotation(r.args[0], filename).dtype)
        raise CompileError.at(node, filename, "write an accumulation policy as `dtype @ accum(dtype)`")
    name = _name(node)
    dt = dtypes.lookup(name) if name else None
    if dt is None or dt.name in ("index", "bool"):
        raise CompileError.at(node, filename, f"'{ast.unparse(node)}' is not a tensor element type")
    return DTypePolicy(dt)


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


class FunctionBuilder:
    def __init__(self, fn: ast.FunctionDef, filename: str, module_env: dict):
        self.fn = fn
        self.filename = filename
        self.env: dict[str, object] = dict(module_env)
        self.shapes = ShapeEnv()
        self.results: list[GTensor] | None = None
        self.unrolled = 0   # loop iterations unrolled so far (consts.MAX_UNROLLED)
        self.functions: ModuleFunctions | None = None   # the file's other @functions, which a call may name
        self.shards: dict[str, tuple[MeshSpec, str, int]] = {}   # parameter -> its dist.shard (mesh, axis, dim)

    # -- services for op builders ---------------------------------------------------------------------
    def error(self, node: ast.AST, message: str) -> CompileError:
        return CompileError.at(node, self.filename, message)

    def loc(self, node: ast.AST) -> ir.Location:
        return ir.Location.file(self.filename, getattr(node, "lineno", 0), getattr(node, "col_offset", 0) + 1)

    def tensor_type(self, dtype: dtypes.DType, dims: list) -> ir.RankedTensorType:
        shape = [d if isinstance(d, int) else ir.ShapedType.get_dynamic_size()
                 for d in (self.shapes.resolve(x) for x in dims)]
        return ir.RankedTensorType.get(shape, ir.Type.parse(dtype.mlir))

    def unify(self, node: ast.AST, a, b, what: str):
        try:
            return self.shapes.unify(a, b, what)
        except ShapeError as e:
            raise self.error(node, str(e)) from None

    def broadcast(self, node: ast.AST, a: list, b: list, what: str) -> list:
        try:
            return self.shapes.broadcast(a, b, what)
        except ShapeError as e:
            raise self.error(node, str(e)) from None

    def as_tensor(self, v, node: ast.AST, like: GTensor | None = None) -> GTensor:
        """A tensor operand: a tensor as is, a Python number as a 0-d constant of `like`'s dtype."""
        if isinstance(v, GTensor):
            return v
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            dt = like.dtype if like is not None else dtypes.BY_NAME["f32"]
            if dt.kind == "complex":  # ttensor constants are real; a scale of an operator takes a number
                raise self.error(node, f"a Python number cannot meet a {dt.name} tensor here")
            if isinstance(v, float) and dt.kind in ("int", "uint"):  # numpy would promote to a float
                raise self.error(node, f"the float {v!r} meets a {dt.name} tensor, and integer tensors do not "
                                       f"promote; op.cast the tensor to a float type, or write an integer")
            et = ir.Type.parse(dt.mlir)
            # as C reads a constant, signed or unsigned (MLIR's attributes hold at most 64 bits)
            if dt.kind != "float" and not ((isinstance(v, int) or math.isfinite(v))
                                           and -2 ** (dt.bits - 1) <= int(v) < 2 ** min(dt.bits, 63)):
                raise self.error(node, f"{describe(v)} does not fit in a {dt.name} tensor")
            with self.loc(node):
                attr = ir.FloatAttr.get(et, float(v)) if dt.kind == "float" else ir.IntegerAttr.get(et, int(v))
                c = ttensor.ConstantOp(value=attr, result=ir.RankedTensorType.get([], et))
            return GTensor(c.result, dt, [])
        raise self.error(node, f"expected a tensor, got {describe(v)}")

    # -- entry ----------------------------------------------------------------------------------------
    def begin(self):
        """The `func.func` with its parameters bound in `env`; results are set once the body is built.
        Returns (function, entry block, parameter names, argument types)."""
        params = self._params()
        with self.loc(self.fn):
            arg_types = [self.tensor_type(p.dtype, p.dims) for _, p in params]
            f = func.FuncOp(self.fn.name, ir.FunctionType.get(arg_types, []))
            f.attributes["tessera.function"] = ir.UnitAttr.get()
            f.arg_attrs = ir.ArrayAttr.get([_arg_attr(n, p, self.shards.get(n)) for n, p in params])
            hints.attach(f, self.fn, self.filename)
            entry = f.add_entry_block()
        for (name, p), arg in zip(params, entry.arguments):
            self.env[name] = GTensor(arg, p.dtype, list(p.dims), p.accum)
        return f, entry, [name for name, _ in params], arg_types

    @staticmethod
    def finish(f, arg_types, results: list) -> func.FuncOp:
        f.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(arg_types, [r.value.type for r in results]))
        return f

    def build(self) -> func.FuncOp:
        f, entry, _, arg_types = self.begin()
        with ir.InsertionPoint(entry):
            self.block(self.fn.body)
        if self.results is None:
            raise self.error(self.fn, f"function '{self.fn.name}' must return its result tensor(s)")
        self._result_shards(f)
        return self.finish(f, arg_types, self.results)

    def _params(self):
        out = []
        a = self.fn.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.defaults:
            raise self.error(self.fn, "a function takes named tensor parameters only")
        for arg in a.args:
            out.append((arg.arg, self._param_type(arg)))
        return out

    def _param_type(self, arg: ast.arg) -> GTensor:
        ann = arg.annotation
        if ann is None:
            raise self.error(arg, f"parameter '{arg.arg}' needs a type, e.g. tensor[f32, \"M\", \"N\"]")
        if _is_shard(ann):
            return self._sharded(arg, ann)
        if isinstance(ann, ast.Subscript) and _name(ann.value) == "tensor":
            items = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
            policy = dtype_of_annotation(items[0] if items else ann, self.filename)
            dims = []
            for d in items[1:]:
                dim = annotated(d)
                if dim is None:
                    raise self.error(d, DIM_RULE)
                dims.append(dim)
            if policy.dtype.name == "i4" and (not dims or not isinstance(dims[-1], int) or dims[-1] % 2):
                raise self.error(ann, I4_ABI.format(what=f"parameter '{arg.arg}'"))
            return GTensor(None, policy.dtype, dims, policy.accum)
        policy = dtype_of_annotation(ann, self.filename)  # a scalar: a 0-d tensor
        if policy.dtype.name == "i4":
            raise self.error(ann, I4_ABI.format(what=f"parameter '{arg.arg}'"))
        return GTensor(None, policy.dtype, [], policy.accum)

    def _sharded(self, arg: ast.arg, ann: ast.Call) -> GTensor:
        """`dist.shard(tensor[f32, 256, 1024], mesh, axis="tp", dim=1)`: the tensor written is the whole one;
        each device's parameter is its slice along `dim`, slice i on the devices whose coordinate along `axis`
        is i (so the body, and each rank's plan, sees the slice's extents)."""
        t, shard = self._shard_of(ann, arg.arg)
        self.shards[arg.arg] = shard
        return t

    def _shard_of(self, ann: ast.Call, name: str) -> tuple[GTensor, tuple[MeshSpec, str, int]]:
        """A `dist.shard(...)` annotation's slice type and (mesh, axis, dim)."""
        if not ann.args or any(k.arg is None for k in ann.keywords):
            raise self.error(ann, "dist.shard(tensor[...], mesh, axis=..., dim=...) takes the tensor type first")
        kwargs = {k.arg: self.expr(k.value) for k in ann.keywords}
        args = [self.expr(a) for a in ann.args[1:]]
        unknown = sorted(set(kwargs) - {"mesh", "axis", "dim"})
        if unknown or len(args) > 1 or (args and "mesh" in kwargs):
            raise self.error(ann, "dist.shard takes the tensor type, the mesh, and axis= and dim= by keyword"
                             + (f" (unknown: {', '.join(unknown)})" if unknown else ""))
        mesh = args[0] if args else kwargs.get("mesh")
        if not isinstance(mesh, MeshSpec):
            raise self.error(ann, "dist.shard needs a mesh: dist.shard(tensor[...], mesh, axis=..., dim=...)")
        axis = kwargs.get("axis", mesh.axes[0])
        if axis not in mesh.axes:
            raise self.error(ann, f"axis {axis!r} is not an axis of the mesh {list(mesh.axes)}")
        inner = ast.arg(arg=name, annotation=ann.args[0])
        ast.copy_location(inner, ann.args[0])
        t = self._param_type(inner)
        dim = kwargs.get("dim", 0)
        if type(dim) is not int or not -len(t.dims) <= dim < max(len(t.dims), 1) or not t.dims:
            raise self.error(ann, f"dim {dim!r} is not an axis of the rank-{len(t.dims)} tensor")
        dim %= len(t.dims)
        n = mesh.shape[mesh.axes.index(axis)]
        extent = t.dims[dim]
        if not isinstance(extent, int):
            raise self.error(ann, f"the sharded extent {extent!r} must be a constant (divisible by the {n} "
                                  f"devices of axis {axis!r}), so that every device's slice is the same")
        if extent % n:
            raise self.error(ann, f"extent {extent} of dim {dim} is not divisible by the {n} devices of axis "
                                  f"{axis!r}")
        dims = list(t.dims)
        dims[dim] = extent // n
        return GTensor(None, t.dtype, dims, t.accum), (mesh, axis, dim)

    def _result_shards(self, f: func.FuncOp) -> None:
        """`-> dist.shard(tensor[...], mesh, axis=, dim=)` (or a tuple of annotations, one a result): each
        device returns its slice of the whole tensor written, which the result must be (its dtype, rank and
        constant extents; a located error otherwise); recorded as the result's tessera.shard. Other return
        annotations are not read."""
        ann = self.fn.returns
        anns = ann.elts if isinstance(ann, ast.Tuple) else [ann]
        if ann is None or not any(_is_shard(a) for a in anns):
            return
        if len(anns) != len(self.results):
            raise self.error(ann, f"the return annotation names {len(anns)} results, the function returns "
                                  f"{len(self.results)}")
        attrs = []
        for i, (a, r) in enumerate(zip(anns, self.results)):
            if not _is_shard(a):
                attrs.append(ir.DictAttr.get({}))
                continue
            t, shard = self._shard_of(a, f"result {i}")
            have = [self.shapes.resolve(d) for d in r.dims]
            if t.dtype != r.dtype or len(t.dims) != len(have) or any(
                    isinstance(w, int) and isinstance(h, int) and w != h for w, h in zip(t.dims, have)):
                raise self.error(a, f"result {i} is {r.dtype.name}{_show_dims(have)} on each device, not the slice "
                                    f"{t.dtype.name}{_show_dims(t.dims)} its annotation says")
            attrs.append(_arg_attr(f"result{i}", t, shard))
        f.attributes["res_attrs"] = ir.ArrayAttr.get(attrs)

    # -- statements -----------------------------------------------------------------------------------
    def block(self, stmts: list[ast.stmt]) -> None:
        for s in stmts:
            if self.results is not None:
                raise self.error(s, "code after 'return' never runs")
            self.stmt(s)

    def stmt(self, s: ast.stmt) -> None:
        if isinstance(s, ast.Expr):
            if not (isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)):
                self.expr(s.value)
        elif isinstance(s, ast.Pass):
            pass
        elif isinstance(s, ast.Assign):
            value = self.expr(s.value)
            for t in s.targets:
                self.assign(t, value)
        elif isinstance(s, ast.AnnAssign) and s.value is not None:
            self.assign(s.target, self.expr(s.value))
        elif isinstance(s, ast.AugAssign):
            self.assign(s.target, self.binop(s.op, self.expr(s.target), self.expr(s.value), s))
        elif isinstance(s, ast.Return):
            if s.value is None:
                raise self.error(s, "a function returns its result tensor(s)")
            v = self.expr(s.value)
            vals = list(v) if isinstance(v, tuple) else [v]
            if not vals:
                raise self.error(s.value, "a function returns at least one tensor")
            for x in vals:
                if isinstance(x, (int, float)):  # a constant result is computed from no input: no kernel makes it
                    raise self.error(s.value, f"a function returns tensors computed from its parameters, not "
                                              f"{describe(x)}")
            if any(hasattr(x, "descriptor") for x in vals):   # operators cross the ABI as their payload tensors
                vals = [t for i, x in enumerate(vals)
                        for t in (exported(self, s.value, x, i) if hasattr(x, "descriptor") else [x])]
            self.results = [self.as_tensor(x, s.value) for x in vals]
            with self.loc(s):
                func.ReturnOp([r.value for r in self.results])
        elif isinstance(s, ast.For):
            self.unrolled_for(s)
        elif isinstance(s, ast.If):
            cond = self.expr(s.test)
            if isinstance(cond, GTensor):
                raise self.error(s.test, "a branch on tensor data is not supported in a function; "
                                         "use op.where-style arithmetic")
            self.block(s.body if cond else s.orelse)
        else:
            raise self.error(s, f"'{type(s).__name__}' is not supported in a Tessera function")

    def assign(self, target: ast.expr, value) -> None:
        if isinstance(target, ast.Name):
            self.env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, tuple) or len(value) != len(target.elts):
                raise self.error(target, f"cannot unpack {describe(value)} into {len(target.elts)} names")
            for t, v in zip(target.elts, value):
                self.assign(t, v)
        else:
            raise self.error(target, "tensors are values: assign to a name, not into a tensor")

    def unrolled_for(self, s: ast.For) -> None:
        it = self.expr(s.iter)
        if not isinstance(it, (range, tuple, list)) or s.orelse:
            raise self.error(s.iter, "a function loop must iterate over constants (e.g. range(4)); it is unrolled")
        try:
            self.unrolled += len(it)
        except OverflowError:
            self.unrolled = consts.MAX_UNROLLED + 1
        if self.unrolled > consts.MAX_UNROLLED:
            raise self.error(s.iter, f"a function unrolls its loops: at most {consts.MAX_UNROLLED} iterations "
                                     f"in all, and this loop goes past that")
        for item in it:
            self.assign(s.target, item)
            self.block(s.body)

    # -- expressions ----------------------------------------------------------------------------------
    def expr(self, node: ast.expr):
        m = getattr(self, "expr_" + type(node).__name__, None)
        if m is None:
            raise self.error(node, f"'{type(node).__name__}' expressions are not supported in a function")
        v = m(node)
        # Compile-time integers are 64-bit (signed, or unsigned as a seed is): every use of one fits MLIR's
        # attributes and the runtime's extents, so a larger one is a mistake where it is written.
        if type(v) is int and not INT64_MIN <= v <= UINT64_MAX:
            raise self.error(node, f"integer {_short(v)} does not fit in 64 bits")
        return v

    def expr_Constant(self, node: ast.Constant):
        return node.value

    def expr_Name(self, node: ast.Name):
        if node.id in self.env:
            return self.env[node.id]
        dt = dtypes.lookup(node.id)
        if dt is not None:
            return DTypePolicy(dt)
        raise self.error(node, f"name '{node.id}' is not defined")

    def expr_Tuple(self, node: ast.Tuple):
        return tuple(self.expr(e) for e in node.elts)

    expr_List = expr_Tuple

    def expr_Attribute(self, node: ast.Attribute):
        if node.attr == "T":
            x = self.expr(node.value)
            if isinstance(x, GTensor):
                return OPS["transpose"](self, node, [x], {})
        dt = dtypes.lookup(node.attr)
        if dt is not None and _name(node.value) in ("tessera", "ts", "dtypes"):
            return DTypePolicy(dt)
        raise self.error(node, f"'{ast.unparse(node)}' is not supported here")

    def expr_UnaryOp(self, node: ast.UnaryOp):
        v = self.expr(node.operand)
        if isinstance(v, GTensor):
            if isinstance(node.op, ast.USub):
                return OPS["neg"](self, node, [v], {})
            if isinstance(node.op, ast.UAdd):
                return v
            if isinstance(node.op, ast.Invert):
                return OPS["invert"](self, node, [v], {})
            raise self.error(node, f"'{type(node.op).__name__}' is not defined on tensors")
        if _program_value(v) and "operator_binop" in OPS and isinstance(node.op, (ast.USub, ast.UAdd)):
            return v if isinstance(node.op, ast.UAdd) else OPS["operator_binop"](self, node, [-1.0, v],
                                                                                   {"op": ast.Mult()})
        try:
            return {ast.USub: py_op.neg, ast.UAdd: py_op.pos, ast.Not: py_op.not_}[type(node.op)](v)
        except (KeyError, TypeError):
            raise self.error(node, f"cannot apply '{ast.unparse(node)}' to {describe(v)}") from None

    def expr_BinOp(self, node: ast.BinOp):
        return self.binop(node.op, self.expr(node.left), self.expr(node.right), node)

    def binop(self, op: ast.operator, a, b, node: ast.AST):
        if isinstance(op, ast.MatMult):
            if isinstance(a, DTypePolicy) and isinstance(b, Accum):
                return DTypePolicy(a.dtype, b.dtype)
            if "matmul" in OPS and isinstance(a, GTensor) and isinstance(b, GTensor):
                return OPS["matmul"](self, node, [a, b], {})
            if "apply" in OPS and not isinstance(a, GTensor):
                return OPS["apply"](self, node, [a, b], {})
            raise self.error(node, f"'@' needs two tensors, got {describe(a)} and {describe(b)}")
        if (_program_value(a) or _program_value(b)) and "operator_binop" in OPS:
            return OPS["operator_binop"](self, node, [a, b], {"op": op})
        if isinstance(a, GTensor) or isinstance(b, GTensor):
            name = _TENSOR_BINOPS.get(type(op))
            if name is None:
                raise self.error(node, f"operator '{ast.unparse(node)}' is not defined on tensors")
            return OPS[name](self, node, [a, b], {})
        if type(op) in consts.BINOPS and not isinstance(a, (str, DTypePolicy)):
            try:
                return consts.binop(op, a, b)
            except consts.FoldError as e:
                raise self.error(node, str(e)) from None
            except Exception as e:  # noqa: BLE001 — any other Python failure of a constant expression
                raise self.error(node, f"cannot evaluate constant expression: {e}") from None
        raise self.error(node, f"operator '{ast.unparse(node)}' is not defined on {describe(a)}")

    def expr_Compare(self, node: ast.Compare):
        left = self.expr(node.left)
        for op, c in zip(node.ops, node.comparators):
            right = self.expr(c)
            if isinstance(left, GTensor) or isinstance(right, GTensor):
                fn = _TENSOR_COMPARES.get(type(op))
                if len(node.ops) != 1 or fn is None:  # a chain would be an `and` of bool tensors: not yet
                    raise self.error(node, f"'{ast.unparse(node)}': a tensor comparison is one of < <= > >= == != "
                                           f"between two operands")
                return OPS[fn](self, node, [left, right], {})
            cmp = {ast.Eq: py_op.eq, ast.NotEq: py_op.ne, ast.Lt: py_op.lt, ast.LtE: py_op.le, ast.Gt: py_op.gt,
                   ast.GtE: py_op.ge}.get(type(op))
            if cmp is None:
                raise self.error(node, f"comparison '{ast.unparse(node)}' is not supported in a function")
            try:
                holds = cmp(left, right)
            except TypeError:
                raise self.error(node, f"cannot compare {describe(left)} with {describe(right)}") from None
            if not holds:
                return False
            left = right
        return True

    def expr_Call(self, node: ast.Call):
        f = node.func
        args = [self.expr(a) for a in node.args]
        kwargs = {k.arg: self.expr(k.value) for k in node.keywords if k.arg is not None}
        if len(kwargs) != len(node.keywords):
            raise self.error(node, "'**kwargs' is not supported here")
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            ns, name = f.value.id, f.attr
            if ns == "op":
                if name not in OPS or name.startswith("operator_"):
                    raise self.error(node, f"unknown operation 'op.{name}'")
                try:
                    return OPS[name](self, node, args, kwargs)
                except (TypeError, ValueError, OverflowError) as e:
                    # an argument of the wrong kind that a builder did not check by name
                    raise self.error(node, f"invalid arguments to op.{name}: {e}") from None
            if ns == "dist" and name == "Mesh":
                return self.mesh(node, args, kwargs)
        if isinstance(f, ast.Name):
            if f.id == "range":
                try:
                    return range(*args)
                except TypeError as e:
                    raise self.error(node, str(e)) from None
            if f.id == "accum" and len(args) == 1 and isinstance(args[0], DTypePolicy):
                return Accum(args[0].dtype)
            if f.id in ("min", "max") and any(consts.too_long(a) for a in args):
                raise self.error(node, f"{f.id}(): the argument has more than {consts.MAX_ITEMS} items, more than "
                                       f"a constant may scan")
            if f.id in ("len", "int", "float", "min", "max", "abs") and not any(isinstance(a, GTensor) for a in args):
                try:
                    return {"len": len, "int": int, "float": float, "min": min, "max": max, "abs": abs}[f.id](
                        *args, **kwargs)
                except (TypeError, ValueError, OverflowError) as e:
                    raise self.error(node, f"{f.id}(): {e}") from None
        if isinstance(f, ast.Name) and self.functions is not None and (
                f.id in self.functions.kinds or (self.functions.imports is not None and f.id in self.functions.imports)):
            return self.call_function(node, f.id, args, kwargs)
        raise self.error(node, f"unknown function '{ast.unparse(f)}' in a Tessera function")

    def call_function(self, node: ast.Call, name: str, args: list, kwargs: dict):
        """`inner(X, W)`: a `func.call` of another @function of the file, type-checked against its signature.

        The callee's extent names are its own: each is bound to the caller's extent it meets (two
        parameters that share a name must get equal extents), and its results' extents follow. An operand
        whose type is more static than the callee's parameter is `tensor.cast` to it, and a result back to
        what the caller knows; the inlining pass (passes/inline_functions.py) removes both."""
        sig = self.functions.signature(node, name, self.fn.name)
        params = sig.params
        if len(args) > len(params):
            raise self.error(node, f"'{name}' takes {len(params)} argument(s), got {len(args) + len(kwargs)}")
        given = list(args) + [None] * (len(params) - len(args))
        for k, v in kwargs.items():
            idx = next((i for i, (pn, _) in enumerate(params) if pn == k), None)
            if idx is None:
                raise self.error(node, f"'{name}' has no parameter '{k}'")
            if given[idx] is not None:
                raise self.error(node, f"'{name}': parameter '{k}' is given twice")
            given[idx] = v
        missing = [pn for (pn, _), v in zip(params, given) if v is None]
        if missing:
            raise self.error(node, f"'{name}' takes {len(params)} argument(s): missing {', '.join(missing)}")
        binding: dict[str, object] = {}
        operands = []
        for i, ((pn, p), a) in enumerate(zip(params, given)):
            where = f"argument {i + 1} ('{pn}') of '{name}'"
            if isinstance(a, (int, float)) and not isinstance(a, bool) and not p.dims:
                a = self.as_tensor(a, node, like=p)
            if not isinstance(a, GTensor):
                raise self.error(node, f"{where} is a tensor of {p.dtype.name}, got {describe(a)}")
            if a.dtype != p.dtype:
                raise self.error(node, f"{where} is a tensor of {p.dtype.name}, got a tensor of {a.dtype.name}")
            if len(a.dims) != len(p.dims):
                raise self.error(node, f"{where} has rank {len(p.dims)} ({_show_dims(p.dims)}), got rank "
                                       f"{len(a.dims)} ({self.shapes.show_shape(a.dims)})")
            for axis, (pd, ad) in enumerate(zip(p.dims, a.dims)):
                what = f"{where}, axis {axis} ('{pd}' in '{name}')" if isinstance(pd, str) else \
                    f"{where}, axis {axis}"
                if isinstance(pd, str) and pd not in binding:
                    binding[pd] = self.shapes.resolve(ad)
                else:
                    self.unify(node, binding[pd] if isinstance(pd, str) else pd, ad, what)
            want = sig.arg_types[i]
            value = a.value
            if value.type != want:
                with self.loc(node):
                    value = ir.Operation.create("tensor.cast", results=[want], operands=[value]).result
            operands.append(value)
        with self.loc(node):
            call = func.CallOp(sig.result_types, sig.symbol, operands)
        fresh: dict[str, object] = {}
        out = []
        for r, (dt, dims, accum) in zip(call.results, sig.results):
            ds = [d if isinstance(d, int) else binding[d] if d in binding else
                  fresh.setdefault(d, self.shapes.fresh()) for d in dims]
            value = r
            have = self.tensor_type(dt, ds)
            if have != r.type:
                with self.loc(node):
                    value = ir.Operation.create("tensor.cast", results=[have], operands=[r]).result
            out.append(GTensor(value, dt, ds, accum))
        return out[0] if len(out) == 1 else tuple(out)

    def mesh(self, node: ast.Call, args, kwargs) -> MeshSpec:
        return mesh_from(args, kwargs, lambda msg: self.error(node, msg))


class Signature:
    """What a call of a built @function needs: its parameters (name, dtype, extents in its own names), the
    MLIR types of its arguments and results, and its results' (dtype, extents, accumulation policy)."""

    def __init__(self, builder: FunctionBuilder, f: func.FuncOp, params: list):
        fty = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
        self.params = params
        self.arg_types = list(fty.inputs)
        self.result_types = list(fty.results)
        self.results = [(r.dtype, [builder.shapes.resolve(d) for d in r.dims], r.accum) for r in builder.results]
        self.symbol = builder.fn.name   # what a `func.call` names


class ModuleFunctions:
    """The @functions (and, to name them in errors, @kernels) of one file, built once each, on first call
    when a function calls one defined below it. A call of a function being built is recursion, refused."""

    def __init__(self, defs: list[ast.FunctionDef], kinds: dict[str, str], filename: str, env: dict,
                 body: ir.Block):
        self.defs = {d.name: d for d in defs}
        self.kinds = kinds
        self.filename = filename
        self.env = env
        self.body = body
        self.built: dict[str, Signature] = {}
        self.building: list[str] = []
        self.imports = None        # the file's imported functions (module.FileImports), which a call may name
        self.exported: set[str] = set()
        self.scratch = None        # an imported file's: the block its functions are built into to declare them
        self.derived: dict = {}    # name -> derivatives.Request: `g = grad(f)`, declared for passes/autodiff.py

    def build(self, name: str) -> Signature:
        if name in self.built:
            return self.built[name]
        if name in self.derived:
            return self._derive(self.derived[name])
        d = self.defs[name]
        b = FunctionBuilder(d, self.filename, self.env)
        b.functions = self
        self.building.append(name)
        try:
            with ir.InsertionPoint(self.body):
                params = b._params()
                f = b.build()
        finally:
            self.building.pop()
        self.built[name] = Signature(b, f, params)
        return self.built[name]

    def _derive(self, req) -> Signature:
        """`req.name = grad(req.of, …)`: the primal built first, then the derivative declared."""
        if req.of not in self.defs and req.of not in self.derived:
            what = "a @kernel" if req.of in self.kinds else "not a @function of this file"
            raise CompileError.at(req.node, self.filename, f"{req.kind}() of '{req.of}': it is {what}")
        if req.of in self.derived:
            raise CompileError.at(req.node, self.filename, f"{req.kind}() of '{req.of}', itself a derivative: "
                                                           f"higher-order derivatives are not supported yet")
        primal = self.signature(req.node, req.of, req.name)
        params, arg_types, results, result_types, argnums = derivatives.signature(req, primal, self.filename)
        with ir.InsertionPoint(self.body):
            derivatives.declare(req, argnums, params, arg_types, result_types, _arg_attr, self.filename)
        sig = Signature.__new__(Signature)
        sig.params, sig.arg_types, sig.result_types = params, arg_types, result_types
        sig.results, sig.symbol = results, req.name
        self.built[req.name] = sig
        return sig

    def signature(self, node: ast.AST, name: str, caller: str) -> Signature:
        if name not in self.kinds and self.imports is not None and name in self.imports:
            return self.imports.signature(node, name)
        if self.kinds.get(name) != "function":
            raise CompileError.at(node, self.filename, f"'{name}' is a @kernel: a @function calls other "
                                                       f"@functions only (kernels are launched by the host)")
        if name in self.building:
            chain = self.building[self.building.index(name):] + [name]
            raise CompileError.at(node, self.filename, f"'{caller}' calls '{name}' recursively "
                                                       f"({' -> '.join(chain)}): a function call is inlined, "
                                                       f"so recursion is not supported")
        return self.build(name)


def _is_shard(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _name(node.func.value) == "dist" \
        and node.func.attr == "shard"


def _show_dims(dims: list) -> str:
    return "[" + ", ".join(repr(d) if isinstance(d, str) else str(d) for d in dims) + "]"


def mesh_from(args, kwargs, error) -> MeshSpec:
    axes = kwargs.get("axes", args[0] if args else None)
    devices = kwargs.get("devices", args[1] if len(args) > 1 else None)
    if not isinstance(axes, (list, tuple)) or not axes or not all(isinstance(a, str) for a in axes):
        raise error("dist.Mesh needs axes=[names]")
    try:
        n = len(devices) if isinstance(devices, (range, list, tuple)) else devices
    except OverflowError:  # a range longer than sys.maxsize
        n = None
    if not isinstance(n, int) or not 1 <= n <= INT64_MAX:
        raise error("dist.Mesh needs devices=range(N) or a device count")
    shape = kwargs.get("shape")
    if shape is None:
        if len(axes) != 1:
            raise error("a mesh with several axes needs shape=(…) giving each axis' size")
        shape = (n,)
    if not isinstance(shape, (tuple, list)) or not all(type(s) is int and 0 < s <= INT64_MAX for s in shape):
        raise error(f"dist.Mesh's shape= is a tuple of positive axis sizes, got {describe(shape)}")
    shape = tuple(shape)
    size = 1
    for s in shape:
        size *= s
    if len(shape) != len(axes) or size != n:
        raise error(f"mesh shape {shape} must give one size per axis and multiply to {n} devices")
    return MeshSpec(tuple(axes), shape)


def _arg_attr(name: str, p: GTensor, shard: tuple | None = None) -> ir.DictAttr:
    i64 = ir.IntegerType.get_signless(64)
    dims = [ir.StringAttr.get(d) if isinstance(d, str) else ir.IntegerAttr.get(i64, d) for d in p.dims]
    attrs = {"tessera.name": ir.StringAttr.get(name), "tessera.dims": ir.ArrayAttr.get(dims)}
    if shard is not None:   # dist.shard: the interpreter splits a whole tensor passed for it
        mesh, axis, dim = shard
        attrs["tessera.shard"] = ir.DictAttr.get({
            "mesh_axes": ir.ArrayAttr.get([ir.StringAttr.get(a) for a in mesh.axes]),
            "mesh_shape": ir.ArrayAttr.get([ir.IntegerAttr.get(i64, n) for n in mesh.shape]),
            "axis": ir.StringAttr.get(axis), "dim": ir.IntegerAttr.get(i64, dim)})
    if p.accum is not None:
        attrs["tessera.accum"] = ir.TypeAttr.get(ir.Type.parse(p.accum.mlir))
    return ir.DictAttr.get(attrs)


def _program_value(v) -> bool:
    """A value the program computes that is not a tensor — an operator of the algebra (operator_ops.py)."""
    return isinstance(getattr(v, "value", None), ir.Value) and not isinstance(v, GTensor)


def _short(v: int) -> str:
    """An integer as a reader can take it in (Python refuses to print the largest in decimal)."""
    return str(v) if v.bit_length() <= 80 else f"of {v.bit_length()} bits"


def module_env(tree: ast.Module, filename: str) -> dict:
    """Module-level constants a function may use: `mesh = dist.Mesh(...)`, numbers, strings, tuples.

    Only assignments the frontend can evaluate without running code count; anything else is ignored (the
    file is a normal Python module too). Only the names some function of the file reads, and the names those
    are computed from, are evaluated: the rest of the module is no business of the compiler's."""
    env: dict = {}
    probe = FunctionBuilder(ast.FunctionDef(name="<module>", args=None, body=[], decorator_list=[]), filename, env)
    assigns = [s for s in tree.body
               if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)]
    used = _names_read(f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)))
    for s in reversed(assigns):
        if s.targets[0].id in used:
            used |= _names_read([s.value])
    for s in assigns:
        if s.targets[0].id not in used:
            continue
        if any(isinstance(n, ast.Attribute) and _name(n.value) == "op" for n in ast.walk(s.value)):
            continue  # tensor ops need a function to live in
        try:
            env[s.targets[0].id] = probe.expr(s.value)
        except CompileError:
            continue
        probe.env = env
    return env


def _names_read(nodes) -> set[str]:
    return {n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name)}
