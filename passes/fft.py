"""Fast Fourier transforms of power-of-two sizes as kernels: Stockham radix-4 (and one radix-2) stages.

``tod.fft(n)`` / ``tod.ifft(n)`` applied to columns X [..., n, k] (passes/tod_lower.py) lower here when n is a
power of two (n ≥ 2) and the extents are static; other n keep the DFT as GEMMs (passes/fourier.py). The
transform is the self-sorting Stockham FFT: log₄ n radix-4 stages (a radix-2 one first where log₂ n is odd),
each a ``ttensor.fft_stage`` op and a kernel of its own, so O(n log n) work and no bit reversal. With r the
stage's radix, s its stride (1, then the product of the earlier radices) and q = i mod s, the stage reads
a_m = x[i + m·n/r] (0 ≤ i < n/r, m < r) and writes

    y[r·(i − q) + q + j·s] = w^(j·(i − q)) · Σ_m a_m · ω_r^(j·m)        w = exp(∓2πi/n), ω_r = exp(∓2πi/r)

(+ for the inverse); after the last stage y is the DFT in natural order, which the last stage scales by 1/√n
(the unitary transform, numpy's norm="ortho", as the DFT path). Each thread computes one butterfly of one
column: its r inputs, the r-point DFT (additions only), and the twiddles w^(j·e), each from its integer
exponent j·e < n as the DFT path's twiddle kernels do: reduced exactly to the nearest quarter turn and a
remainder |φ| ≤ π/4, whose cosine and sine are Taylor polynomials (fourier._TERMS), so no table is stored in
the image and no target needs a sine instruction; every twiddle is within an ulp or two, and the error grows as
log n (f32 observed ~1e-7·log₂ n of the largest output).

Data between stages are pairs [..., n, k, 2] (real and imaginary part side by side, numpy's complex storage),
so a returned transform is its last stage's result viewed as complex<T> (no interleaving kernel) and a later
transform of it reads the pairs directly; where a real tensor op reads a part, ``ttensor.part`` takes it. The
first stage reads the real part (and an imaginary part if there is one) as separate tensors.
"""

from __future__ import annotations

import math

from ..dialects import ttensor
from ..dialects.support import create
from ..mlir import ir
from . import kernelgen
from .fourier import _TERMS, KERNEL_BLOCK, Pair, _poly

# the most complex elements one transform's tensor may hold: the kernels index in 32-bit integers (2·count < 2³¹)
MAX_ELEMENTS = 1 << 29


def applies(n: int, x) -> bool:
    """Does the FFT take the transform of size `n` of `x` (a real tensor or a Pair): n a power of two, at least
    2, and x of static extents with at most MAX_ELEMENTS entries?"""
    t = ir.RankedTensorType((x.re if isinstance(x, Pair) else x).type)
    return n >= 2 and not n & (n - 1) and t.has_static_shape and math.prod(t.shape) <= MAX_ELEMENTS


def radices(n: int) -> list[int]:
    """The stages' radices for size n = 2^m: a radix-2 stage where m is odd, then radix-4 ones."""
    m = n.bit_length() - 1
    return [2] * (m % 2) + [4] * (m // 2)


def _shape(v) -> list[int]:
    return list(ir.RankedTensorType(v.type).shape)


def _reshape(v, shape: list[int]) -> ir.Value:
    return ttensor.ReshapeOp(v, result=ir.RankedTensorType.get(shape, ir.RankedTensorType(v.type).element_type)).result


def source(v) -> tuple[ir.Value, str] | None:
    """(pairs, part) when real tensor `v` is part `part` ("re"/"im") of the pairs tensor `pairs`, seen through
    reshapes (a part of a reshape is the reshape of the part: both keep row-major order); else None."""
    while isinstance(v.owner, ir.OpView) and v.owner.operation.name == "ttensor.reshape":
        v = v.owner.operands[0]
    owner = v.owner
    if isinstance(owner, ir.OpView) and owner.operation.name == "ttensor.part":
        return owner.operands[0], ir.StringAttr(owner.attributes["part"]).value
    return None


def pairs_of(pair: Pair, view: bool = True) -> ir.Value | None:
    """The pairs tensor whose real and imaginary parts `pair` is, viewed at pair's shape [..., 2] (as it is,
    unless `view`); else None."""
    re, im = source(pair.re), source(pair.im)
    if re is None or im is None or re[0] != im[0] or (re[1], im[1]) != ("re", "im"):
        return None
    shape = _shape(pair.re) + [2]
    return re[0] if not view or _shape(re[0]) == shape else _reshape(re[0], shape)


def transform(x, n: int, inverse: bool) -> Pair:
    """F x (F* x where `inverse`) for the unitary DFT F of size n, along axis −2 of x [..., n, k] (a real tensor
    or a Pair): the Stockham stages at the insertion point, the result as its parts."""
    real = x.re if isinstance(x, Pair) else x
    shape, element = _shape(real), ir.RankedTensorType(real.type).element_type
    out = ir.RankedTensorType.get(shape + [2], element)
    pairs = pairs_of(x) if isinstance(x, Pair) else None
    value, imag = (pairs, None) if pairs is not None else (x.re, x.im) if isinstance(x, Pair) else (x, None)
    stride, stages = 1, radices(n)
    for k, radix in enumerate(stages):
        scale = 1 / math.sqrt(n) if k == len(stages) - 1 else 1.0
        value = create(ttensor.FftStageOp, value, stride=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), stride),
                       radix=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), radix),
                       inverse=ir.BoolAttr.get(inverse), scale=ir.FloatAttr.get(ir.F64Type.get(), scale),
                       result=out, imag=imag).result
        stride, imag = stride * radix, None
    return Pair(*(ttensor.PartOp(value, part=ir.StringAttr.get(p), result=real.type).result for p in ("re", "im")))


def _dft_lines(radix: int, inverse: bool) -> list[str]:
    """The r-point DFT of the loaded a{m}r/a{m}i as b{j}r/b{j}i (additions only)."""
    if radix == 2:
        return ["b0r = a0r + a1r", "b0i = a0i + a1i", "b1r = a0r - a1r", "b1i = a0i - a1i"]
    # ω₄ = ∓i: b1 = t1 ∓ i·t3, b3 = t1 ± i·t3
    sign = "-" if inverse else "+"
    other = "+" if inverse else "-"
    return ["t0r = a0r + a2r", "t0i = a0i + a2i", "t1r = a0r - a2r", "t1i = a0i - a2i",
            "t2r = a1r + a3r", "t2i = a1i + a3i", "t3r = a1r - a3r", "t3i = a1i - a3i",
            "b0r = t0r + t2r", "b0i = t0i + t2i", "b2r = t0r - t2r", "b2i = t0i - t2i",
            f"b1r = t1r {sign} t3i", f"b1i = t1i {other} t3r", f"b3r = t1r {other} t3i", f"b3i = t1i {sign} t3r"]


def _twiddle_lines(j: int, n: int, dt: str, lit) -> list[str]:
    """c{j} + i·s{j} = exp(2πi·E/n) for the integer E = j·e (< n): the quarter turn h nearest to it, cosine and
    sine polynomials of the remainder φ = 2π·E/n − h·π/2 (|φ| ≤ π/4), h picking sign and part."""
    terms = _TERMS[dt]
    cos = _poly(f"z{j}", [(-1) ** k / math.factorial(2 * k) for k in range(terms)], lit)
    sin = _poly(f"z{j}", [(-1) ** k / math.factorial(2 * k + 1) for k in range(terms)], lit)
    return [f"m{j} = {j} * e" if j > 1 else "m1 = e",
            f"h{j} = (8 * m{j} + {n}) // {2 * n}",
            f"x{j} = {dt}(4 * m{j} - h{j} * {n}) * {lit(math.pi / 2 / n)}",
            f"z{j} = x{j} * x{j}",
            f"p{j} = {cos}", f"q{j} = x{j} * {sin}",
            f"c{j} = p{j}", f"s{j} = q{j}",
            f"if h{j} % 4 == 1:", f"    c{j} = -q{j}", f"    s{j} = p{j}",
            f"if h{j} % 4 == 2:", f"    c{j} = -p{j}", f"    s{j} = -q{j}",
            f"if h{j} % 4 == 3:", f"    c{j} = q{j}", f"    s{j} = -p{j}"]


def kernel(name: str, op) -> tuple[str, dict]:
    """The source of the kernel computing ttensor.fft_stage `op` and its plan step's launch (env, block, grid,
    argument shapes): one thread a butterfly of one column, the tensors flat."""
    result = op.results[0]
    dt = kernelgen.element_dtype(result)
    lit = (lambda v: kernelgen.float_literal(v)) if dt == "f32" else (lambda v: f"f64({kernelgen.float_literal(v)})")
    shape = _shape(result)
    n, k = shape[-3], shape[-2]
    radix, stride = (ir.IntegerAttr(op.attributes[a]).value for a in ("radix", "stride"))
    inverse = ir.BoolAttr(op.attributes["inverse"]).value
    scale = ir.FloatAttr(op.attributes["scale"]).value
    pairs = op.operands[0].type == result.type
    imag = len(op.operands) > 1
    quarter = n // radix
    body = ["t = launch.thread_id(0)", f"if t < Y.shape[0] // {2 * radix}:",
            f"    c = t % {k}", f"    u = t // {k}", f"    i = u % {quarter}",
            f"    b = (u // {quarter}) * {n * k} + c", f"    e = i - i % {stride}",
            f"    o = b + ({radix} * e + i % {stride}) * {k}"]   # output j at o + j·s·k
    for m in range(radix):
        at = f"b + (i + {m * quarter}) * {k}"
        if pairs:
            body += [f"    a{m}r = X[2 * ({at})]", f"    a{m}i = X[2 * ({at}) + 1]"]
        else:
            body += [f"    a{m}r = X[{at}]", f"    a{m}i = XI[{at}]" if imag else f"    a{m}i = {lit(0.0)}"]
    body += ["    " + line for line in _dft_lines(radix, inverse)]
    for j in range(radix):
        at = f"o + {j * stride * k}" if j else "o"
        if j == 0:   # w⁰ = 1
            re, im = ("b0r", "b0i") if scale == 1.0 else (f"b0r * {lit(scale)}", f"b0i * {lit(scale)}")
        else:
            body += ["    " + line for line in _twiddle_lines(j, n, dt, lit)]
            if scale != 1.0:
                body += [f"    c{j} = c{j} * {lit(scale)}", f"    s{j} = s{j} * {lit(scale)}"]
            # (br + i·bi)(c ∓ i·s): ∓ the transform's sign (forward e^(−iθ))
            if inverse:
                re, im = f"b{j}r * c{j} - b{j}i * s{j}", f"b{j}r * s{j} + b{j}i * c{j}"
            else:
                re, im = f"b{j}r * c{j} + b{j}i * s{j}", f"b{j}i * c{j} - b{j}r * s{j}"
        body += [f"    Y[2 * ({at})] = {re}", f"    Y[2 * ({at}) + 1] = {im}"]
    params = [f"X: tensor[{dt}, \"NX\"]"] + ([f"XI: tensor[{dt}, \"NX\"]"] if imag else []) + \
             [f"Y: tensor[{dt}, \"NY\"]"]
    src = "\n".join(["@kernel", f"def {name}({', '.join(params)}):", *("    " + line for line in body), ""])
    count = math.prod(shape)
    env = {"NX": str(count if pairs else count // 2), "NY": str(count)}
    args = [{"value": v, "shape": ["NX"]} for v in op.operands] + [{"value": result, "shape": ["NY"]}]
    step = {"env": env, "block": [KERNEL_BLOCK, 1, 1], "grid": [f"ceil(NY/{2 * radix * KERNEL_BLOCK})", "1", "1"],
            "args": args}
    return src, step
