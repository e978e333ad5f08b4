"""Vectorized f32 transcendental functions built from arith ops, target-independent: the CPU backend's
generated kernels (their GEMM epilogues) and GPU math (gpu_math.py) inline them.

The CPU pipeline sends vector math ops to glibc's libmvec (passes/cpu_vector_math.py): one call per vector,
and a call clobbers every vector register (the SysV ABI preserves none). A GEMM epilogue holds a whole
register tile live and applies gelu to a dozen independent vectors; inline approximations keep the tile in
registers and let the dozen evaluations interleave. They are a few multiply-adds, a division and some
selects per vector, plain SIMD instructions on every target, with no dependence on the C library.

Each function takes and returns an f32 value (scalar or vector) and must be called under an insertion
point. The accuracies below were measured in float32 against float64 references over the whole range:

    exp   ≤ 1e-7 relative on [-87.3, 88.3]; 0 below, +inf above (the input range of the activations)
    tanh  ≤ 4e-7 relative (Eigen's rational approximation; |x| clamped to 7.9, where tanh rounds to 1)
    erf   ≤ 5e-7 absolute (Eigen's rational approximation; |x| clamped to 4, where erf rounds to 1)
"""

from __future__ import annotations

import math as _pymath

from ..mlir import arith, ir

# Polynomial evaluations may fuse multiply and add where the target has FMA; both spellings are accurate.
_CONTRACT = "#arith.fastmath<contract>"


def _const(like: ir.Value, value: float) -> ir.Value:
    t = like.type
    f32 = ir.F32Type.get()
    if isinstance(t, ir.VectorType):
        return arith.ConstantOp(t, ir.DenseElementsAttr.get_splat(t, ir.FloatAttr.get(f32, value))).result
    return arith.ConstantOp(t, ir.FloatAttr.get(f32, value)).result


def _int_type(like: ir.Value) -> ir.Type:
    i32 = ir.IntegerType.get_signless(32)
    t = like.type
    return ir.VectorType.get(t.shape, i32) if isinstance(t, ir.VectorType) else i32


def _iconst(like: ir.Value, value: int) -> ir.Value:
    t = _int_type(like)
    i32 = ir.IntegerType.get_signless(32)
    if isinstance(t, ir.VectorType):
        return arith.ConstantOp(t, ir.DenseElementsAttr.get_splat(t, ir.IntegerAttr.get(i32, value))).result
    return arith.ConstantOp(t, ir.IntegerAttr.get(i32, value)).result


def _fm():
    return ir.Attribute.parse(_CONTRACT)


def mul(a, b):
    return arith.MulFOp(a, b, fastmath=_fm()).result


def add(a, b):
    return arith.AddFOp(a, b, fastmath=_fm()).result


def sub(a, b):
    return arith.SubFOp(a, b).result


def div(a, b):
    return arith.DivFOp(a, b).result


def clamp(x, lo: float, hi: float):
    # maximumf/minimumf propagate NaN, so NaN inputs stay NaN through every function here.
    return arith.MinimumFOp(arith.MaximumFOp(x, _const(x, lo)).result, _const(x, hi)).result


def horner(x, coefficients):
    """c[0]·x^(n-1) + … + c[n-1], highest degree first."""
    acc = _const(x, coefficients[0])
    for c in coefficients[1:]:
        acc = add(mul(acc, x), _const(x, c))
    return acc


def _select(cond_pred, x, bound: float, value, otherwise):
    cond = arith.CmpFOp(cond_pred, x, _const(x, bound)).result
    return arith.SelectOp(cond, value, otherwise).result


_EXP_HI = 88.3762626647949     # largest x with round(x·log2 e) ≤ 127, so 2^n stays a normal float
_EXP_LO = -87.3365447505531    # ln(FLT_MIN): below it the result would be subnormal; we return 0


def exp(x):
    """Cephes' expf: x = n·ln 2 + r with |r| ≤ ln2/2, e^r by a degree-7 polynomial, 2^n built in the exponent."""
    xc = clamp(x, _EXP_LO, _EXP_HI)
    # Round x·log2(e) to the nearest integer by adding 1.5·2^23: the float's low mantissa bits then hold n.
    magic = _const(x, 12582912.0)
    shifted = arith.AddFOp(arith.MulFOp(xc, _const(x, 1.0 / _pymath.log(2.0))).result, magic).result
    n = arith.SubFOp(shifted, magic).result
    ni = arith.SubIOp(arith.BitcastOp(_int_type(x), shifted).result,
                      arith.BitcastOp(_int_type(x), magic).result).result
    # ln 2 in two parts (the first exact in 9 bits) keeps r exact to a few ulp.
    r = sub(xc, arith.MulFOp(n, _const(x, 0.693359375)).result)
    r = sub(r, arith.MulFOp(n, _const(x, -2.12194440e-4)).result)
    p = horner(r, [1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1,
                   5.0000001201e-1])
    y = add(add(mul(mul(p, r), r), r), _const(x, 1.0))
    biased = arith.ShLIOp(arith.AddIOp(ni, _iconst(x, 127)).result, _iconst(x, 23)).result
    y = arith.MulFOp(y, arith.BitcastOp(x.type, biased).result).result
    y = _select(arith.CmpFPredicate.OGT, x, _EXP_HI, _const(x, float("inf")), y)
    return _select(arith.CmpFPredicate.OLT, x, _EXP_LO, _const(x, 0.0), y)


def _odd_rational(x, bound: float, num, den):
    """x·P(x²)/Q(x²) on x clamped to ±bound: the form of Eigen's float tanh and erf."""
    xc = clamp(x, -bound, bound)
    x2 = mul(xc, xc)
    return div(mul(xc, horner(x2, num)), horner(x2, den))


def tanh(x):
    return _odd_rational(x, 7.90531110763549805,
                         [-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11,
                          5.12229709037114e-08, 1.48572235717979e-05, 6.37261928875436e-04,
                          4.89352455891786e-03],
                         [1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03,
                          4.89352518554385e-03])


def erf(x):
    return _odd_rational(x, 4.0,
                         [-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
                          -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
                          -1.60960333262415e-02],
                         [-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
                          -7.37332916720468e-03, -1.42647390514189e-02])


def sigmoid(x):
    return div(_const(x, 1.0), arith.AddFOp(_const(x, 1.0), exp(arith.NegFOp(x).result)).result)


def silu(x):
    return arith.MulFOp(x, sigmoid(x)).result


def gelu(x):
    """0.5·x·(1 + erf(x/√2)), the exact GELU."""
    e = erf(arith.MulFOp(x, _const(x, _pymath.sqrt(0.5))).result)
    return arith.MulFOp(arith.MulFOp(x, _const(x, 0.5)).result, arith.AddFOp(e, _const(x, 1.0)).result).result


def gelu_tanh(x):
    """0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), GELU's tanh approximation."""
    x3 = arith.MulFOp(arith.MulFOp(x, x).result, x).result
    inner = arith.MulFOp(add(x, mul(x3, _const(x, 0.044715))), _const(x, _pymath.sqrt(2.0 / _pymath.pi))).result
    t = tanh(inner)
    return arith.MulFOp(arith.MulFOp(x, _const(x, 0.5)).result, arith.AddFOp(t, _const(x, 1.0)).result).result


def gelu_grad(x):
    """gelu'(x) = Φ(x) + x·φ(x), autodiff's formula for the exact GELU (passes/autodiff.py _d_gelu)."""
    cdf = arith.MulFOp(arith.AddFOp(erf(arith.MulFOp(x, _const(x, _pymath.sqrt(0.5))).result),
                                    _const(x, 1.0)).result, _const(x, 0.5)).result
    pdf = arith.MulFOp(exp(arith.MulFOp(arith.MulFOp(x, x).result, _const(x, -0.5)).result),
                       _const(x, 1.0 / _pymath.sqrt(2.0 * _pymath.pi))).result
    return add(cdf, arith.MulFOp(x, pdf).result)


def gelu_tanh_grad(x):
    """gelu_tanh'(x) = (1 + t)/2 + x/2·(1 − t²)·c·(1 + 3k·x²), t = tanh(c·(x + k·x³)), c = √(2/π), k = 0.044715:
    autodiff's formula (passes/autodiff.py _d_gelu_tanh)."""
    c, k = _pymath.sqrt(2.0 / _pymath.pi), 0.044715
    x2 = arith.MulFOp(x, x).result
    t = tanh(arith.MulFOp(arith.MulFOp(x, add(mul(x2, _const(x, k)), _const(x, 1.0))).result, _const(x, c)).result)
    du = arith.MulFOp(add(mul(x2, _const(x, 3 * k)), _const(x, 1.0)), _const(x, c)).result
    sech2 = sub(_const(x, 1.0), arith.MulFOp(t, t).result)
    half = arith.MulFOp(arith.AddFOp(t, _const(x, 1.0)).result, _const(x, 0.5)).result
    return add(half, arith.MulFOp(arith.MulFOp(x, _const(x, 0.5)).result, arith.MulFOp(sech2, du).result).result)
