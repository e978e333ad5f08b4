"""f64 exp, exp2, log, log2, erf, tanh and pow as plain f64 arithmetic, for the GPU targets (passes/gpu_math.py),
which have no libm: accurate to a few f64 ulp (pow: see `powf`), so that the `strict` numerics profile's f32
math computed in f64 and rounded once (passes/strict_math.py) gives the same f32 bits as the CPU's glibc
and OpenCL's f64 builtins, except where the exact value lies within a few f64 ulp of the midpoint of two f32
values (about one f32 argument in 10^7 for erf, far fewer for the rest).

Every op is a separate multiply or add, rounded once, with no fast-math flags: the evaluation order is the
one written here, so every GPU computes the same bits. Scalars only (GPU kernels compute one element per
thread). Methods:

    exp     x = k·ln 2 + r (Cody and Waite's two-part ln 2, k·LN2_HI exact), |r| ≤ ln2/2, e^r by its Taylor
            polynomial to degree 14 (truncation below 2^-58), times 2^k built in two exponent fields
    exp2    the same with k = round(x) and r = (x - k)·ln 2
    log     x = m·2^e with m in [√½, √2), log m = 2·atanh(s), s = (m - 1)/(m + 1), by its odd series to
            s^23 (|s| ≤ 0.172), plus e·ln 2 in two parts; subnormal x scaled by 2^54 first
    log2    e + log(m)/ln 2
    tanh    |x| < 0.55: expm1(2|x|)/(expm1(2|x|) + 2), expm1 by its Taylor polynomial to degree 19;
            else 1 - 2/(e^(2|x|) + 1); the sign of x
    erf     |x| < 6: (2/√π)·e^(-x²)·Σ 2ⁿ x^(2n+1)/(1·3·…·(2n+1)) (Kummer's series: every term positive, so
            no cancellation; 97 terms reach 2^-56 at |x| = 6), x² as an exact pair by fma; else ±1
    pow     exp(y·log|x|): the product carries log's relative error times |y·log x|, so a result near
            f32's range ends (|y·log x| ≈ 88) may be off by about 2^-45 relatively; C's signs and special
            cases for negative, zero, infinite and NaN operands
"""

from __future__ import annotations

import math as _pymath

from ..mlir import arith, ir, llvm

P = arith.CmpFPredicate
LN2_HI = 6.93147180369123816490e-01   # 0x3fe62e42fee00000: 32 trailing zero bits, so k·LN2_HI is exact
LN2_LO = 1.90821492927058770002e-10
_ROUND = 6755399441055744.0           # 1.5·2^52: adding and subtracting it rounds an f64 to an integer


def _c(value: float) -> ir.Value:
    f64 = ir.F64Type.get()
    return arith.ConstantOp(f64, ir.FloatAttr.get(f64, value)).result


def _i(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IntegerType.get_signless(64), value).result


def _mul(a, b):
    return arith.MulFOp(a, b).result


def _add(a, b):
    return arith.AddFOp(a, b).result


def _sub(a, b):
    return arith.SubFOp(a, b).result


def _div(a, b):
    return arith.DivFOp(a, b).result


def _sel(pred, a, b, then, otherwise):
    return arith.SelectOp(arith.CmpFOp(pred, a, b).result, then, otherwise).result


def _intrinsic(name: str, *args: ir.Value) -> ir.Value:
    return llvm.CallIntrinsicOp(args[0].type, f"llvm.{name}.f64", list(args), [], []).result


def _horner(x, coefficients):
    """c[0]·x^(n-1) + … + c[n-1], highest degree first."""
    acc = _c(coefficients[0])
    for c in coefficients[1:]:
        acc = _add(_mul(acc, x), _c(c))
    return acc


def _round(x):
    """x rounded to the nearest integer (ties to even), for |x| < 2^51."""
    return _sub(_add(x, _c(_ROUND)), _c(_ROUND))


def _clamp(x, lo: float, hi: float):
    """x within [lo, hi]; NaN becomes lo (callers select NaN's result themselves)."""
    return _sel(P.OLT, x, _c(hi), _sel(P.OGT, x, _c(lo), x, _c(lo)), _c(hi))


def _pow2(k):
    """2^k for an integral f64 k in [-1100, 1100], as two factors whose exponent fields are normal."""
    i64 = ir.IntegerType.get_signless(64)
    ki = arith.FPToSIOp(i64, k).result
    half = arith.ShRSIOp(ki, _i(1)).result
    f64 = ir.F64Type.get()

    def field(e):
        return arith.BitcastOp(f64, arith.ShLIOp(arith.AddIOp(e, _i(1023)).result, _i(52)).result).result
    return field(half), field(arith.SubIOp(ki, half).result)


_EXP_TAYLOR = [1.0 / _pymath.factorial(n) for n in range(14, -1, -1)]


def _exp_reduced(r, k):
    """e^r · 2^k for |r| ≤ ln2/2 (one rounding per step; the scaling is exact unless the result is subnormal)."""
    a, b = _pow2(k)
    return _mul(_mul(_horner(r, _EXP_TAYLOR), a), b)


def _exp_specials(x, y, overflow: float, underflow: float):
    y = _sel(P.OGT, x, _c(overflow), _c(float("inf")), y)
    y = _sel(P.OLT, x, _c(underflow), _c(0.0), y)
    return _sel(P.UNO, x, x, x, y)   # NaN stays NaN


def exp(x):
    xc = _clamp(x, -760.0, 720.0)
    k = _round(_mul(xc, _c(1 / _pymath.log(2.0))))
    r = _sub(_sub(xc, _mul(k, _c(LN2_HI))), _mul(k, _c(LN2_LO)))
    return _exp_specials(x, _exp_reduced(r, k), 709.782712893384, -745.1332191019412)


def exp2(x):
    xc = _clamp(x, -1100.0, 1100.0)
    k = _round(xc)
    return _exp_specials(x, _exp_reduced(_mul(_sub(xc, k), _c(_pymath.log(2.0))), k), 1024.0, -1075.0)


_ATANH = [1.0 / (2 * n + 1) for n in range(11, 0, -1)]   # (atanh(s)/s - 1)/s², in s²: 1/23 … 1/3


def _log_parts(x):
    """(e, log m) with x = m·2^e, m in [√½, √2), for finite positive x."""
    i64 = ir.IntegerType.get_signless(64)
    f64 = ir.F64Type.get()
    tiny = arith.CmpFOp(P.OLT, x, _c(2.2250738585072014e-308)).result
    xs = _mul(x, arith.SelectOp(tiny, _c(2.0 ** 54), _c(1.0)).result)
    bits = arith.BitcastOp(i64, xs).result
    e = arith.SIToFPOp(f64, arith.SubIOp(arith.AndIOp(arith.ShRUIOp(bits, _i(52)).result, _i(0x7FF)).result,
                                         _i(1023)).result).result
    e = _sub(e, arith.SelectOp(tiny, _c(54.0), _c(0.0)).result)
    m = arith.BitcastOp(f64, arith.OrIOp(arith.AndIOp(bits, _i(0x000FFFFFFFFFFFFF)).result,
                                         _i(0x3FF0000000000000)).result).result   # in [1, 2)
    big = arith.CmpFOp(P.OGT, m, _c(_pymath.sqrt(2.0))).result
    m = arith.SelectOp(big, _mul(m, _c(0.5)), m).result
    e = arith.SelectOp(big, _add(e, _c(1.0)), e).result
    s = _div(_sub(m, _c(1.0)), _add(m, _c(1.0)))
    two_s = _add(s, s)
    log_m = _add(two_s, _mul(two_s, _mul(_mul(s, s), _horner(_mul(s, s), _ATANH))))
    return e, log_m


def _log_specials(x, y):
    y = _sel(P.OEQ, x, _c(float("inf")), x, y)
    y = _sel(P.OEQ, x, _c(0.0), _c(float("-inf")), y)
    return _sel(P.ULT, x, _c(0.0), _c(float("nan")), y)   # x < 0, or NaN


def log(x):
    e, log_m = _log_parts(x)
    return _log_specials(x, _add(_mul(e, _c(LN2_HI)), _add(_mul(e, _c(LN2_LO)), log_m)))


def log2(x):
    e, log_m = _log_parts(x)
    return _log_specials(x, _add(e, _mul(log_m, _c(1 / _pymath.log(2.0)))))


_EXPM1_TAYLOR = [1.0 / _pymath.factorial(n) for n in range(19, 0, -1)]


def tanh(x):
    a = _intrinsic("fabs", x)
    z = _add(a, a)
    em = _mul(z, _horner(z, _EXPM1_TAYLOR))
    small = _div(em, _add(em, _c(2.0)))
    large = _sub(_c(1.0), _div(_c(2.0), _add(exp(z), _c(1.0))))
    return _intrinsic("copysign", _sel(P.OLT, a, _c(0.55), small, large), x)


_ERF_TERMS = 97


def erf(x):
    a = _intrinsic("fabs", x)
    ac = _sel(P.OLT, a, _c(6.0), a, _c(6.0))
    hi = _mul(ac, ac)
    lo = _intrinsic("fma", ac, ac, arith.NegFOp(hi).result)   # ac² = hi + lo exactly
    two_x2 = _add(hi, hi)
    # Σ from the innermost term out: s = 1 + (2x²/(2n+1))·s
    s = _c(1.0)
    for n in range(_ERF_TERMS, 0, -1):
        s = _add(_c(1.0), _mul(_mul(two_x2, _c(1.0 / (2 * n + 1))), s))
    damp = _mul(exp(arith.NegFOp(hi).result), _sub(_c(1.0), lo))   # e^(-hi-lo) to within lo² < 2^-100
    y = _mul(_mul(_mul(ac, s), damp), _c(2 / _pymath.sqrt(_pymath.pi)))
    y = _sel(P.OLT, a, _c(6.0), y, _c(1.0))
    return _sel(P.UNO, x, x, x, _intrinsic("copysign", y, x))


def powf(x, y):
    """x^y as C's pow: exp(y·log|x|), with x's sign (-0's and -inf's too) for odd integral y, NaN for a finite
    negative x and a non-integral y; y = 0 or x = 1 give 1 whatever the other is, x = -1 with an infinite y gives 1."""
    r = exp(_mul(y, log(_intrinsic("fabs", x))))
    integral = arith.CmpFOp(P.OEQ, _intrinsic("floor", y), y).result
    half = _mul(y, _c(0.5))
    odd = arith.AndIOp(integral, arith.CmpFOp(P.ONE, _intrinsic("floor", half), half).result).result
    r = arith.SelectOp(odd, _intrinsic("copysign", r, x), r).result   # x's sign, -0 included
    # a finite negative x (not -inf, whose powers are ±0 or ±inf for every y, nor -0)
    negative = arith.AndIOp(arith.CmpFOp(P.OLT, x, _c(0.0)).result,
                            arith.CmpFOp(P.OGT, x, _c(float("-inf"))).result).result
    r = arith.SelectOp(negative, arith.SelectOp(integral, r, _c(float("nan"))).result, r).result
    r = _sel(P.OEQ, _intrinsic("fabs", y), _c(float("inf")), _sel(P.OEQ, x, _c(-1.0), _c(1.0), r), r)
    r = _sel(P.OEQ, x, _c(1.0), _c(1.0), r)
    return _sel(P.OEQ, y, _c(0.0), _c(1.0), r)
