"""``tessera-gpu-math``: math ops of GPU kernels as arithmetic and as intrinsics PTX has instructions for.

``convert-gpu-to-nvvm`` turns every math op into a call of CUDA's libdevice (``__nv_expf`` …), which would
have to be linked from a CUDA installation at compile time. Tessera stays self-contained instead:

    sqrt, fabs, floor, ceil, fma, copysign   LLVM intrinsics: sqrt.rn, abs, cvt.rmi/rpi, fma.rn (exact)
    exp, tanh, erf                           the inline f32 approximations of passes/vmath.py
                                             (exp ≤ 1e-7, tanh ≤ 4e-7 relative; erf ≤ 5e-7 absolute)
    log                                      Cephes' logf below (≤ 2e-7 relative on normal and subnormal x)
    log2                                     log(x) / ln 2
    exp2                                     ex2.approx.f32 (≤ 2 ulp, PTX ISA), via llvm.exp2.f32
    rsqrt                                    1 / sqrt(x), both correctly rounded
    powf                                     exp(y · log|x|), with C's signs for negative x and integral y
    absi                                     max(x, -x)
    arith.mului_extended on i32 (Philox)     with `mulhi` (PTX: llvm.nvvm.mulhi.ui, mul.hi.u32): the low word
                                             as a 32-bit multiply, the high word by the intrinsic. Left to
                                             the upstream lowering, the product is an i64 multiply that
                                             LLVM's instcombine spreads over the whole Philox round, so
                                             every multiply becomes a 64-bit one (several instructions).

f64 exp, exp2, log, log2, erf, tanh and pow are plain f64 arithmetic accurate to a few f64 ulp
(passes/f64_math.py): the `strict` profile computes f32 ones in f64 (passes/strict_math.py) to round them once.

f16 and bf16 operands are computed in f32 and rounded back. Anything else — sin, cos and the like — is refused
at the user's line rather than left for codegen, where an op with no PTX instruction would abort
the compiler process ("no libcall available").

The intrinsics are emitted as ``llvm.call_intrinsic``, which ``convert-gpu-to-nvvm`` leaves alone (it marks
the LLVM dialect's own ``llvm.intr.sqrt`` … illegal, to force its libdevice calls).
"""

from __future__ import annotations

import math as _pymath

from ..diagnostics import LoweringError
from ..mlir import arith, ir, llvm
from . import f64_math, vmath


def _const(like: ir.Value, value: float) -> ir.Value:
    return arith.ConstantOp(like.type, ir.FloatAttr.get(like.type, value)).result


def _iconst(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IntegerType.get_signless(32), value).result


def _intrinsic(name: str, *args: ir.Value) -> ir.Value:
    t = args[0].type
    suffix = {32: "f32", 64: "f64"}[t.width]
    return llvm.CallIntrinsicOp(t, f"llvm.{name}.{suffix}", list(args), [], []).result


def _select(pred, a, b, then, otherwise):
    return arith.SelectOp(arith.CmpFOp(pred, a, b).result, then, otherwise).result


_SQRTHF = 0.707106781186547524
_LOG_P = [7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
          -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1]


def log(x: ir.Value) -> ir.Value:
    """Cephes' logf: x = m·2^e with m in [√½, √2), log(m) by a degree-9 polynomial in m - 1, e·ln 2 added
    in two parts. Subnormal x are scaled by 2^23 first; x < 0 and NaN give NaN, 0 gives -inf, inf gives inf."""
    i32 = ir.IntegerType.get_signless(32)
    P = arith.CmpFPredicate
    tiny = _select(P.OLT, x, _const(x, 1.1754943508222875e-38), _const(x, 8388608.0), _const(x, 1.0))
    xs = arith.MulFOp(x, tiny).result
    bias = _select(P.OLT, x, _const(x, 1.1754943508222875e-38), _const(x, 23.0), _const(x, 0.0))
    bits = arith.BitcastOp(i32, xs).result
    exponent = arith.SubIOp(arith.AndIOp(arith.ShRUIOp(bits, _iconst(23)).result, _iconst(0xFF)).result,
                            _iconst(126)).result
    mant = arith.BitcastOp(x.type, arith.OrIOp(arith.AndIOp(bits, _iconst(0x807FFFFF)).result,
                                               _iconst(0x3F000000)).result).result   # in [0.5, 1)
    e = arith.SubFOp(arith.SIToFPOp(x.type, exponent).result, bias).result
    small = arith.CmpFOp(P.OLT, mant, _const(x, _SQRTHF)).result
    e = arith.SelectOp(small, arith.SubFOp(e, _const(x, 1.0)).result, e).result
    m = arith.SubFOp(arith.SelectOp(small, arith.AddFOp(mant, mant).result, mant).result, _const(x, 1.0)).result
    z = vmath.mul(m, m)
    y = vmath.mul(vmath.mul(m, z), vmath.horner(m, _LOG_P))
    y = vmath.add(y, vmath.mul(e, _const(x, -2.12194440e-4)))
    y = vmath.sub(y, vmath.mul(z, _const(x, 0.5)))
    r = vmath.add(vmath.add(m, y), vmath.mul(e, _const(x, 0.693359375)))
    r = _select(P.OEQ, x, _const(x, float("inf")), x, r)
    r = _select(P.OEQ, x, _const(x, 0.0), _const(x, float("-inf")), r)
    return _select(P.ULT, x, _const(x, 0.0), _const(x, float("nan")), r)   # x < 0, or x is NaN


def powf(x: ir.Value, y: ir.Value) -> ir.Value:
    """x^y = exp(y·log|x|); negative x: an integral y gives the sign of (-1)^y, any other y NaN (C's powf).
    x = 0 follows from log(0) = -inf: 0 for y > 0, inf for y < 0; y = 0 gives 1 for every x."""
    P = arith.CmpFPredicate
    r = vmath.exp(arith.MulFOp(y, log(_intrinsic("fabs", x))).result)
    integral = arith.CmpFOp(P.OEQ, _intrinsic("floor", y), y).result
    half = arith.MulFOp(y, _const(y, 0.5)).result
    odd = arith.AndIOp(integral, arith.CmpFOp(P.ONE, _intrinsic("floor", half), half).result).result
    negative = arith.CmpFOp(P.OLT, x, _const(x, 0.0)).result
    signed = arith.SelectOp(odd, arith.NegFOp(r).result, r).result
    r = arith.SelectOp(negative, arith.SelectOp(integral, signed, _const(x, float("nan"))).result, r).result
    return _select(P.OEQ, y, _const(y, 0.0), _const(x, 1.0), r)


_F32 = {
    "math.exp": lambda op: vmath.exp(op.operands[0]),
    "math.tanh": lambda op: vmath.tanh(op.operands[0]),
    "math.erf": lambda op: vmath.erf(op.operands[0]),
    "math.log": lambda op: log(op.operands[0]),
    "math.log2": lambda op: arith.MulFOp(log(op.operands[0]), _const(op.operands[0], 1 / _pymath.log(2.0))).result,
    "math.exp2": lambda op: _intrinsic("exp2", op.operands[0]),
    "math.powf": lambda op: powf(op.operands[0], op.operands[1]),
}
_ANY_FLOAT = {
    "math.sqrt": lambda op: _intrinsic("sqrt", op.operands[0]),
    "math.rsqrt": lambda op: arith.DivFOp(_const(op.operands[0], 1.0), _intrinsic("sqrt", op.operands[0])).result,
    "math.absf": lambda op: _intrinsic("fabs", op.operands[0]),
    "math.floor": lambda op: _intrinsic("floor", op.operands[0]),
    "math.ceil": lambda op: _intrinsic("ceil", op.operands[0]),
    "math.fma": lambda op: _intrinsic("fma", *op.operands),
    "math.copysign": lambda op: _intrinsic("copysign", *op.operands),
}
_F64 = {
    "math.exp": lambda op: f64_math.exp(op.operands[0]),
    "math.exp2": lambda op: f64_math.exp2(op.operands[0]),
    "math.log": lambda op: f64_math.log(op.operands[0]),
    "math.log2": lambda op: f64_math.log2(op.operands[0]),
    "math.erf": lambda op: f64_math.erf(op.operands[0]),
    "math.tanh": lambda op: f64_math.tanh(op.operands[0]),
    "math.powf": lambda op: f64_math.powf(*op.operands),
}


def _lower(op) -> ir.Value:
    name = op.operation.name
    if name == "math.absi":
        x = op.operands[0]
        return arith.MaxSIOp(x, arith.SubIOp(arith.ConstantOp(x.type, 0).result, x).result).result
    t = op.results[0].type
    narrow = isinstance(t, (ir.F16Type, ir.BF16Type))
    if isinstance(t, ir.F64Type) and name in {**_F64, **_ANY_FLOAT}:
        return {**_F64, **_ANY_FLOAT}[name](op)
    if not (isinstance(t, ir.F32Type) or narrow) or name not in {**_F32, **_ANY_FLOAT}:
        raise LoweringError(op, f"'{name}' on {t} has no GPU lowering yet (f32, f16 and bf16 have exp, exp2, "
                                f"log, log2, tanh, erf, pow, sqrt, rsqrt; f64 those and abs, floor, ceil)")
    if not narrow:
        return {**_F32, **_ANY_FLOAT}[name](op)
    f32 = ir.F32Type.get()
    wide = [arith.ExtFOp(f32, o).result for o in op.operands]
    widened = ir.Operation.create(name, results=[f32], operands=wide)
    result = _lower(widened.opview)
    widened.erase()
    return arith.TruncFOp(t, result).result


def _mul_extended(op, mulhi: str) -> list[ir.Value]:
    a, b = op.operands
    return [arith.MulIOp(a, b).result, llvm.CallIntrinsicOp(a.type, mulhi, [a, b], [], []).result]


def _is_i32(t: ir.Type) -> bool:
    return isinstance(t, ir.IntegerType) and ir.IntegerType(t).width == 32


def run(module, mulhi: str | None = None) -> None:
    """Rewrites every math op under `module` (an ``ir.Module`` or any operation) as the docstring says, and,
    given `mulhi` (the name of the target's intrinsic for the high word of an unsigned 32-bit product), every
    scalar i32 arith.mului_extended."""
    op = module.operation if isinstance(module, ir.Module) else module
    todo = []

    def visit(o):
        for region in o.regions:
            for block in region.blocks:
                for inner in block.operations:
                    name = inner.operation.name
                    if name.startswith("math.") or (mulhi and name == "arith.mului_extended"
                                                    and _is_i32(inner.operands[0].type)):
                        todo.append(inner)
                    visit(inner)

    visit(op)
    for m in todo:
        with m.location, ir.InsertionPoint(m):
            results = _mul_extended(m, mulhi) if m.operation.name == "arith.mului_extended" else [_lower(m)]
        for old, new in zip(m.results, results):
            old.replace_all_uses_with(new)
        m.operation.erase()
