"""Values of the kernel language and the typing rules that combine them.

A Python literal stays an untyped number until it meets a typed value, then takes that value's type (as in
C with suffix-less constants). Typed operands promote: integer and index meet as index; integer and float
meet as the float; two floats meet as the wider; two integers as the wider.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ..mlir import arith, ir, math
from . import consts


@dataclass
class Scalar:
    value: ir.Value | None
    py: int | float | bool | None = None

    @property
    def typed(self) -> bool:
        return self.value is not None


@dataclass
class TensorParam:
    name: str
    value: ir.Value
    param: object

    @property
    def rank(self) -> int:
        return len(self.param.dims)

    @property
    def elem_type(self) -> ir.Type:
        return ir.MemRefType(self.value.type).element_type


def assigned_names(stmts: list[ast.stmt]) -> list[str]:
    """Names a block of statements assigns (in first-assignment order): the values an scf region yields."""
    seen: list[str] = []
    for s in stmts:
        for node in ast.walk(s):
            targets = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            elif isinstance(node, ast.For):
                targets = [node.target]
            for t in targets:
                if isinstance(t, ast.Name) and t.id not in seen:
                    seen.append(t.id)
    return seen


def _is_float(t: ir.Type) -> bool:
    return isinstance(t, ir.FloatType)


def _is_index(t: ir.Type) -> bool:
    return isinstance(t, ir.IndexType)


def _int_width(t: ir.Type) -> int:
    return ir.IntegerType(t).width


def _float_width(t: ir.Type) -> int:
    return ir.FloatType(t).width


class Typer:
    """Builds typed arithmetic for the kernel builder, reporting mistakes at the user's source position."""

    def __init__(self, builder):
        self.b = builder

    # -- conversion -----------------------------------------------------------------------------------
    def scalar(self, v, node: ast.AST) -> Scalar:
        """`v` as a Scalar (typed, or a literal not yet typed); a tensor or a group is a mistake at `node`."""
        if isinstance(v, Scalar):
            return v
        if isinstance(v, (bool, int, float)):
            return Scalar(None, v)
        what = f"tensor '{v.name}'" if isinstance(v, TensorParam) else f"a {type(v).__name__.lower()}"
        raise self.b.error(node, f"{what} used where a number is expected")

    def materialize(self, v, node: ast.AST, like: ir.Type | None = None) -> Scalar:
        v = self.scalar(v, node)
        if v.typed:
            return v
        if like is None:
            like = (ir.F32Type.get() if isinstance(v.py, float) else
                    ir.IntegerType.get_signless(1) if isinstance(v.py, bool) else ir.IndexType.get())
        with self.b.loc(node):
            if _is_float(like):
                return Scalar(arith.ConstantOp(like, ir.FloatAttr.get(like, float(v.py))).result)
            if isinstance(v.py, float):
                raise self.b.error(node, f"float literal {v.py} used where {like} is expected")
            bits = 64 if _is_index(like) else _int_width(like)
            # signed or unsigned, as C reads a constant; MLIR's attributes hold at most 64 bits
            if not -2 ** (bits - 1) <= v.py < 2 ** min(bits, 63) and not (bits == 1 and v.py in (0, 1)):
                raise self.b.error(node, f"integer {v.py} does not fit in {like}")
            return Scalar(arith.ConstantOp(like, ir.IntegerAttr.get(like, int(v.py))).result)

    def cast(self, v, to: ir.Type, node: ast.AST, explicit: bool = False) -> Scalar:
        """Converts to `to`. Implicitly only widening and int->float; `explicit` (int(x), float(x)) allows all."""
        v = self.scalar(v, node)
        if not v.typed:
            if explicit and isinstance(v.py, float) and not _is_float(to):
                v = Scalar(None, int(v.py))
            return self.materialize(v, node, like=to)
        src = v.value.type
        if src == to:
            return v
        with self.b.loc(node):
            if _is_float(src) and _is_float(to):
                op = arith.ExtFOp if _float_width(to) > _float_width(src) else arith.TruncFOp
                return Scalar(op(to, v.value).result)
            if not _is_float(src) and _is_float(to):
                if _is_index(src):
                    v = Scalar(arith.IndexCastOp(ir.IntegerType.get_signless(64), v.value).result)
                return Scalar(arith.SIToFPOp(to, v.value).result)
            if _is_float(src) and not _is_float(to):
                if not explicit:
                    raise self.b.error(node, f"a {src} value needs an explicit conversion to {to} (e.g. int(x))")
                if _is_index(to):
                    i64 = ir.IntegerType.get_signless(64)
                    return Scalar(arith.IndexCastOp(to, arith.FPToSIOp(i64, v.value).result).result)
                return Scalar(arith.FPToSIOp(to, v.value).result)
            if _is_index(src) or _is_index(to):
                return Scalar(arith.IndexCastOp(to, v.value).result)
            sw, tw = _int_width(src), _int_width(to)
            if tw > sw:
                op = arith.ExtUIOp if sw == 1 else arith.ExtSIOp
                return Scalar(op(to, v.value).result)
            return Scalar(arith.TruncIOp(to, v.value).result)

    def unify(self, a, b, node: ast.AST) -> tuple[Scalar, Scalar]:
        a, b = self.scalar(a, node), self.scalar(b, node)
        if not a.typed and not b.typed:
            a = self.materialize(a, node)
        if not a.typed:
            a = self.cast(a, self._literal_type(a, b.value.type), node)
        if not b.typed:
            b = self.cast(b, self._literal_type(b, a.value.type), node)
        ta, tb = a.value.type, b.value.type
        if ta == tb:
            return a, b
        return self.cast(a, self._join(ta, tb), node), self.cast(b, self._join(ta, tb), node)

    @staticmethod
    def _literal_type(lit: Scalar, other: ir.Type) -> ir.Type:
        """The type a literal takes beside a value of type `other`: that type, except that a float literal
        beside an integer or index is a float (f32), as `i * 0.5` is a float in Python."""
        return ir.F32Type.get() if isinstance(lit.py, float) and not _is_float(other) else other

    @staticmethod
    def _join(ta: ir.Type, tb: ir.Type) -> ir.Type:
        if _is_float(ta) or _is_float(tb):
            if _is_float(ta) and _is_float(tb):
                return ta if _float_width(ta) >= _float_width(tb) else tb
            return ta if _is_float(ta) else tb
        if _is_index(ta) or _is_index(tb):
            return ir.IndexType.get()
        return ta if _int_width(ta) >= _int_width(tb) else tb

    def to_float(self, v, node: ast.AST) -> Scalar:
        v = self.scalar(v, node)
        if v.typed and _is_float(v.value.type):
            return v
        return self.cast(v, ir.F32Type.get(), node)

    def condition(self, v, node: ast.AST) -> Scalar:
        v = self.scalar(v, node)
        if not v.typed:
            return self.materialize(Scalar(None, bool(v.py)), node)
        t = v.value.type
        if isinstance(t, ir.IntegerType) and _int_width(t) == 1:
            return v
        return self.compare(ast.NotEq(), v, 0, node)

    # -- arithmetic -----------------------------------------------------------------------------------
    _INT = {ast.Add: arith.AddIOp, ast.Sub: arith.SubIOp, ast.Mult: arith.MulIOp, ast.FloorDiv: arith.FloorDivSIOp,
            ast.BitAnd: arith.AndIOp, ast.BitOr: arith.OrIOp, ast.BitXor: arith.XOrIOp,
            ast.LShift: arith.ShLIOp, ast.RShift: arith.ShRSIOp}
    _FLOAT = {ast.Add: arith.AddFOp, ast.Sub: arith.SubFOp, ast.Mult: arith.MulFOp, ast.Div: arith.DivFOp}

    def binop(self, op: ast.operator, a, b, node: ast.AST):
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            return _fold(op, a, b, self.b, node)
        if isinstance(op, ast.Div):  # Python's true division: always a float
            a, b = self.to_float(a, node), self.to_float(b, node)
        if isinstance(op, ast.Pow):
            a, b = self.to_float(a, node), self.to_float(b, node)
            a, b = self.unify(a, b, node)
            with self.b.loc(node):
                return Scalar(math.PowFOp(a.value, b.value).result)
        a, b = self.unify(a, b, node)
        t = a.value.type
        with self.b.loc(node):
            if isinstance(op, ast.Mod):
                if _is_float(t):
                    return Scalar(arith.RemFOp(a.value, b.value).result)
                # Python's modulo follows the divisor's sign: a - floor(a / b) * b
                q = arith.FloorDivSIOp(a.value, b.value).result
                return Scalar(arith.SubIOp(a.value, arith.MulIOp(q, b.value).result).result)
            table = self._FLOAT if _is_float(t) else self._INT
            cls = table.get(type(op))
            if cls is None:
                kind = "float" if _is_float(t) else "integer"
                raise self.b.error(node, f"operator '{_op_symbol(op)}' is not defined on {kind} values")
            return Scalar(cls(a.value, b.value).result)

    def unary(self, op: ast.unaryop, v, node: ast.AST):
        if isinstance(v, (int, float, bool)):
            return {ast.USub: lambda x: -x, ast.UAdd: lambda x: x, ast.Not: lambda x: not x,
                    ast.Invert: lambda x: ~x}[type(op)](v)
        v = self.scalar(v, node)
        if isinstance(op, ast.UAdd):
            return v
        if isinstance(op, ast.Not):
            c = self.condition(v, node)
            return self.logical(ast.BitXor(), c, True, node)
        with self.b.loc(node):
            if isinstance(op, ast.USub):
                if _is_float(v.value.type):
                    return Scalar(arith.NegFOp(v.value).result)
                return self.binop(ast.Sub(), 0, v, node)
        return self.binop(ast.BitXor(), v, -1, node)

    def logical(self, op, a, b, node: ast.AST) -> Scalar:
        a, b = self.condition(a, node), self.condition(b, node)
        cls = {ast.And: arith.AndIOp, ast.Or: arith.OrIOp, ast.BitXor: arith.XOrIOp}[type(op)]
        with self.b.loc(node):
            return Scalar(cls(a.value, b.value).result)

    _ICMP = {ast.Lt: "slt", ast.LtE: "sle", ast.Gt: "sgt", ast.GtE: "sge", ast.Eq: "eq", ast.NotEq: "ne"}
    _FCMP = {ast.Lt: "olt", ast.LtE: "ole", ast.Gt: "ogt", ast.GtE: "oge", ast.Eq: "oeq", ast.NotEq: "une"}

    def compare(self, op: ast.cmpop, a, b, node: ast.AST) -> Scalar:
        if type(op) not in self._ICMP:
            raise self.b.error(node, f"comparison '{_op_symbol(op)}' is not supported in a kernel")
        a, b = self.unify(a, b, node)
        with self.b.loc(node):
            if _is_float(a.value.type):
                pred = getattr(arith.CmpFPredicate, self._FCMP[type(op)].upper())
                return Scalar(arith.CmpFOp(pred, a.value, b.value).result)
            pred = getattr(arith.CmpIPredicate, self._ICMP[type(op)])
            return Scalar(arith.CmpIOp(pred, a.value, b.value).result)

    def minmax(self, name: str, a, b, node: ast.AST) -> Scalar:
        a, b = self.unify(a, b, node)
        floating = _is_float(a.value.type)
        cls = {("min", True): arith.MinimumFOp, ("max", True): arith.MaximumFOp,
               ("min", False): arith.MinSIOp, ("max", False): arith.MaxSIOp}[(name, floating)]
        with self.b.loc(node):
            return Scalar(cls(a.value, b.value).result)

    def absolute(self, v, node: ast.AST) -> Scalar:
        v = self.materialize(v, node)
        with self.b.loc(node):
            if _is_float(v.value.type):
                return Scalar(math.AbsFOp(v.value).result)
            return Scalar(math.AbsIOp(v.value).result)

    def ceil_div(self, a, b, node: ast.AST):
        if isinstance(a, int) and isinstance(b, int):
            return -(-a // b)
        a, b = self.unify(a, b, node)
        if _is_float(a.value.type):
            raise self.b.error(node, "ceil_div takes integers")
        with self.b.loc(node):
            return Scalar(arith.CeilDivSIOp(a.value, b.value).result)


def _fold(op: ast.operator, a, b, builder, node):
    try:
        return consts.binop(op, a, b)
    except consts.FoldError as e:
        raise builder.error(node, str(e)) from None


def _op_symbol(op) -> str:
    return {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
            ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<",
            ast.RShift: ">>", ast.MatMult: "@", ast.Is: "is", ast.IsNot: "is not", ast.In: "in",
            ast.NotIn: "not in"}.get(type(op), type(op).__name__)
