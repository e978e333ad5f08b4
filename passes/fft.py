"""Fast Fourier transforms as kernels: Stockham radix-4 (and one radix-2) stages for power-of-two sizes,
Bluestein's chirp-z on those stages for the others.

``tod.fft(n)`` / ``tod.ifft(n)`` applied to columns X [..., n, k] (passes/tod_lower.py) lower here when n is a
power of two (n ≥ 2) and the extents are static (`transform`), or when n is another size from BLUESTEIN_MIN
(16, measured) to MAX_BLUESTEIN (`bluestein`, below); other n (below 16, n = 1, extents known only at run
time) keep the DFT as GEMMs (passes/fourier.py). The frontend's tile.fft of a power of two builds the same
stages (dialects/ttensor.fft_stages, the one stage builder). The
transform is the self-sorting Stockham FFT: log₄ n radix-4 stages (a radix-2 one last where log₂ n is odd),
each a ``ttensor.fft_stage`` op and a kernel of its own, so O(n log n) work and no bit reversal. With r the
stage's radix, s its stride (1, then the product of the earlier radices) and q = i mod s, the stage reads
a_m = x[i + m·n/r] (0 ≤ i < n/r, m < r) and writes

    y[r·(i − q) + q + j·s] = w^(j·(i − q)) · Σ_m a_m · ω_r^(j·m)        w = exp(∓2πi/n), ω_r = exp(∓2πi/r)

(+ for the inverse); after the last stage y is the DFT in natural order, which the last stage scales by 1/√n
(the unitary transform, numpy's norm="ortho", as the DFT path). Each thread computes one butterfly of one
column: its r inputs, the r-point DFT (additions only), and the twiddles w^(j·e), each from its integer
exponent j·e < n as the DFT path's twiddle kernels do: reduced exactly to the nearest quarter turn and a
remainder |φ| ≤ π/4, whose cosine and sine are Taylor polynomials (complex_pairs._TERMS), so no table is stored in
the image and no target needs a sine instruction. Measured against numpy.fft (in f64) for n = 2^5 … 2^20: the
largest error at most 2.4e-7 of the largest output in f32, 6.2e-16 in f64.

The first stage reads x's real and imaginary parts as they are (a real x: no imaginary part; a complex
parameter or an earlier transform: its pairs); the stages between write planes [2, ..., n, k] (the real
parts, then the imaginary parts); the last writes pairs [..., n, k, 2] (real and imaginary part side by side,
numpy's complex storage), so a returned transform is the last stage's result viewed as complex<T> (no
interleaving kernel) and a later transform of it reads the pairs directly; where a real tensor op reads a
part, ``ttensor.part`` takes it. On the CPU a warp's threads are vector lanes, and an access is a contiguous
vector load or store only where its index is a warp-uniform value plus the thread index (passes/
simt_to_warps.py): so for one column a signal (k = 1) the kernels launch a second axis over the signals and,
where the stride s is at least a warp, run the first axis over q (the group p, and with it the twiddles,
uniform in a warp: computed once), else over the butterfly index i (contiguous loads, strided stores).
"""

from __future__ import annotations

import math

from ..dialects import ttensor
from ..dialects.support import create
from ..mlir import ir
from . import kernelgen
from .complex_pairs import _TERMS, KERNEL_BLOCK, Pair, _poly

# the most complex elements one transform's tensor may hold. Not an indexing limit (every target lowers index
# to 64 bits): a cap on memory, 8 GiB of f64 pairs a plane, with the stages holding two planes at once.
MAX_ELEMENTS = 1 << 29


def applies(n: int, x) -> bool:
    """Does the FFT take the transform of size `n` of `x` (a real tensor or a Pair): n a power of two, at least
    2, and x of static extents with at most MAX_ELEMENTS entries?"""
    t = ir.RankedTensorType((x.re if isinstance(x, Pair) else x).type)
    return n >= 2 and not n & (n - 1) and t.has_static_shape and math.prod(t.shape) <= MAX_ELEMENTS


radices = ttensor.fft_radices   # the stages' radices for size n (dialects/ttensor.py)


def _shape(v) -> list[int]:
    return list(ir.RankedTensorType(v.type).shape)


def _reshape(v, shape: list[int]) -> ir.Value:
    return ttensor.ReshapeOp(v, result=ir.RankedTensorType.get(shape, ir.RankedTensorType(v.type).element_type)).result


source = ttensor.part_source   # (pairs, part) of a part seen through reshapes (dialects/ttensor.py)


def pairs_of(pair: Pair, view: bool = True) -> ir.Value | None:
    """The pairs tensor whose real and imaginary parts `pair` is, viewed at pair's shape [..., 2] (as it is,
    unless `view`); else None."""
    re, im = source(pair.re), source(pair.im)
    if re is None or im is None or re[0] != im[0] or (re[1], im[1]) != ("re", "im"):
        return None
    shape = _shape(pair.re) + [2]
    return re[0] if not view or _shape(re[0]) == shape else _reshape(re[0], shape)


def _operand(x) -> tuple[ir.Value, ir.Value | None, str]:
    """x (a real tensor or a Pair) as a first stage reads it: (value, imaginary part or None, layout) — the
    pairs its parts are parts of, else its parts."""
    pairs = pairs_of(x) if isinstance(x, Pair) else None
    return ((pairs, None, "pairs") if pairs is not None
            else (x.re, x.im, "parts") if isinstance(x, Pair) else (x, None, "parts"))


stages = ttensor.fft_stages   # a transform's Stockham stages (dialects/ttensor.py; the frontend's tile.fft's too)


def _parts(pairs: ir.Value, like: ir.Type) -> Pair:
    return Pair(*(ttensor.PartOp(pairs, part=ir.StringAttr.get(p), result=like).result for p in ("re", "im")))


def transform(x, n: int, inverse: bool) -> Pair:
    """F x (F* x where `inverse`) for the unitary DFT F of size n, along axis −2 of x [..., n, k] (a real tensor
    or a Pair): the Stockham stages at the insertion point, the result as its parts. The first stage reads x's
    parts (or the pairs they are parts of), the stages between write planes, the last one pairs."""
    real = x.re if isinstance(x, Pair) else x
    value, imag, layout = _operand(x)
    pairs = stages(value, imag, layout, _shape(real), ir.RankedTensorType(real.type).element_type, inverse,
                   1 / math.sqrt(n))
    return _parts(pairs, real.type)


# Bluestein (chirp-z) for sizes that are not powers of two: with w_j = exp(∓πi·j²/n), jk = (j² + k² − (k − j)²)/2
# turns the DFT into a convolution, X_k = w_k · Σ_j (x_j w_j) · conj(w)_(k−j), computed circularly with power-of-two
# FFTs of size m ≥ 2n − 1. MAX_BLUESTEIN: m at most 2^29 (MAX_ELEMENTS); j² mod 2n is exact in the kernels' 64-bit
# index arithmetic (every target lowers index to 64 bits).
MAX_BLUESTEIN = ttensor.CHIRP_MAX
# Below this size the DFT as GEMMs is faster on the CPU than Bluestein's three size-m FFTs (bench/fft_cpu.py,
# docs/performance.md); from it up, Bluestein takes every size that is not a power of two.
BLUESTEIN_MIN = 16
BLUESTEIN_OPS = ("ttensor.chirp_mul", "ttensor.chirp", "ttensor.spectrum_mul")   # kernels of chirp_kernel


def padded(n: int) -> int:
    """Bluestein's FFT size for n: the smallest power of two at least 2n − 1."""
    return 1 << max(2 * n - 2, 1).bit_length()


def bluestein_applies(n: int, x) -> bool:
    """Does Bluestein take the transform of size `n` of `x`: n not a power of two, from BLUESTEIN_MIN (or above
    the DFT as GEMMs' largest) to MAX_BLUESTEIN, x of static extents whose padded columns hold at most MAX_ELEMENTS
    entries?"""
    t = ir.RankedTensorType((x.re if isinstance(x, Pair) else x).type)
    return (n & (n - 1) != 0 and (n >= BLUESTEIN_MIN or n > ttensor.TWIDDLE_MAX) and n <= MAX_BLUESTEIN
            and t.has_static_shape and math.prod(t.shape) // n * padded(n) <= MAX_ELEMENTS)


def bluestein(x, n: int, inverse: bool, memo: dict | None = None) -> Pair:
    """F x (F* x where `inverse`) for the unitary DFT F of size n along axis −2 of x [..., n, k] (a real tensor or
    a Pair), by Bluestein's algorithm at the insertion point: the signal chirped and zero-padded to m
    (ttensor.chirp_mul), its FFT, times the FFT of the chirp filter (ttensor.chirp, its FFT scaled by 1/m: made
    once per (n, inverse, element) in `memo`), the inverse FFT, its first n entries chirped and scaled by 1/√n.
    The FFTs are the Stockham stages (`stages`); the result as its parts."""
    real = x.re if isinstance(x, Pair) else x
    shape, element = _shape(real), ir.RankedTensorType(real.type).element_type
    m, i64, f64 = padded(n), ir.IntegerType.get_signless(64), ir.F64Type.get()
    wide = shape[:-2] + [m, shape[-1]]
    memo = {} if memo is None else memo
    key = ("bluestein filter", n, inverse, str(element))
    if key not in memo:
        chirp = create(ttensor.ChirpOp, n=ir.IntegerAttr.get(i64, n), inverse=ir.BoolAttr.get(inverse),
                       result=ir.RankedTensorType.get([2, m, 1], element)).result
        memo[key] = stages(chirp, None, "planes", [m, 1], element, False, 1 / m)

    def chirp_mul(value, imag, into, out, rows, scale):
        res = ir.RankedTensorType.get(rows + [2] if out == "pairs" else [2] + rows, element)
        return create(ttensor.ChirpMulOp, value, n=ir.IntegerAttr.get(i64, n), inverse=ir.BoolAttr.get(inverse),
                      scale=ir.FloatAttr.get(f64, scale), input_layout=ir.StringAttr.get(into),
                      output_layout=ir.StringAttr.get(out), result=res, imag=imag).result

    value, imag, layout = _operand(x)
    a = stages(chirp_mul(value, imag, layout, "planes", wide, 1.0), None, "planes", wide, element, False, 1.0)
    product = ttensor.SpectrumMulOp(a, memo[key], result=ir.RankedTensorType.get([2] + wide, element)).result
    c = stages(product, None, "planes", wide, element, True, 1.0)
    return _parts(chirp_mul(c, None, "pairs", "pairs", shape, 1 / math.sqrt(n)), real.type)


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


WARP = 32      # threads a warp runs together on the CPU (passes/simt_to_warps.py); GPUs' 32 or 64
MAX_GRID_Y = 65535   # the launch's second axis, at most CUDA's limit


def _access(layout: str, at: str, part: int, name: str = "X") -> str:
    """The element `at` (a column element's flat index (l·n + j)·k + c) of part `part` (0 re, 1 im) as stored
    in `layout`: pairs side by side, planes (PLANE elements apart), or parts (separate tensors X and XI)."""
    if layout == "pairs":
        return f"{name}[2 * ({at}) + {part}]" if part else f"{name}[2 * ({at})]"
    if layout == "planes":
        return f"{name}[PLANE + {at}]" if part else f"{name}[{at}]"
    return f"{name}I[{at}]" if part else f"{name}[{at}]"


def kernel(name: str, op) -> tuple[str, dict]:
    """The source of the kernel computing ttensor.fft_stage `op` and its plan step's launch (env, block, grid,
    argument shapes): one thread a butterfly of one column, the tensors flat. For one column a signal (k = 1)
    the launch's second axis runs over the signals, so that the loads (and, where the stride is at least a
    warp, the stores) are contiguous across a warp: the stride's remainder q on the first axis and the
    butterfly's group p (with it the twiddles: computed once a warp) on the second where s ≥ WARP, else the
    butterfly index i on the first. Other shapes: one axis over every butterfly of every column."""
    result = op.results[0]
    dt = kernelgen.element_dtype(result)
    lit = (lambda v: kernelgen.float_literal(v)) if dt == "f32" else (lambda v: f"f64({kernelgen.float_literal(v)})")
    into, out = (ir.StringAttr(op.attributes[a]).value for a in ("input_layout", "output_layout"))
    shape = _shape(result)
    core = shape[:-1] if out == "pairs" else shape[1:]
    n, k, count = core[-2], core[-1], math.prod(core)
    lead = count // (n * k)
    radix, stride = (ir.IntegerAttr(op.attributes[a]).value for a in ("radix", "stride"))
    inverse = ir.BoolAttr(op.attributes["inverse"]).value
    scale = ir.FloatAttr(op.attributes["scale"]).value
    imag = len(op.operands) > 1
    quarter = n // radix
    groups = quarter // stride   # butterfly groups p of a stage: i = p·s + q
    pairs_in = False
    if k == 1 and stride >= WARP and lead * groups <= MAX_GRID_Y:
        body = ["q = launch.thread_id(0)", "g = launch.block_id(1)", f"if q < {stride}:",
                f"    e = (g % {groups}) * {stride}", f"    b = (g // {groups}) * {n}"]
        at_in = lambda m: f"b + e + {m * quarter} + q"   # noqa: E731   uniform + q: contiguous
        at_out = lambda j: f"b + e * {radix} + {j * stride} + q"   # noqa: E731
        block = min(stride, KERNEL_BLOCK)
        grid = [f"ceil({stride}/{block})", str(lead * groups), "1"]
    elif k == 1 and lead <= MAX_GRID_Y and into == "pairs":
        # one thread a float of the pairs, so that the loads are contiguous: a thread and its neighbour (lane
        # xor 1) hold the real and imaginary part of one input, swap them, and both compute the butterfly;
        # each stores its own part (2·n/r threads a signal: the grid is exact, no thread idle)
        pairs_in = True
        body = ["u = launch.thread_id(0)", "l = launch.block_id(1)", "par = u % 2", "i = u // 2",
                f"b = l * {n}", f"e = i - i % {stride}", f"o = b + {radix} * e + i % {stride}"]
        for m in range(radix):
            body += [f"v{m} = X[2 * b + {2 * m * quarter} + u]", f"w{m} = tile.warp_shuffle_xor(v{m}, 1)",
                     f"a{m}r = v{m} if par == 0 else w{m}", f"a{m}i = w{m} if par == 0 else v{m}"]
        body = ["    " + line for line in body]
        at_out = lambda j: f"o + {j * stride}" if j else "o"   # noqa: E731
        block = min(2 * quarter, KERNEL_BLOCK)
        grid = [f"ceil({2 * quarter}/{block})", str(lead), "1"]
    elif k == 1 and lead <= MAX_GRID_Y:
        body = ["i = launch.thread_id(0)", "l = launch.block_id(1)", f"if i < {quarter}:",
                f"    b = l * {n}", f"    e = i - i % {stride}", f"    o = b + {radix} * e + i % {stride}"]
        at_in = lambda m: f"b + {m * quarter} + i"   # noqa: E731
        at_out = lambda j: f"o + {j * stride}" if j else "o"   # noqa: E731
        block = min(quarter, KERNEL_BLOCK)
        grid = [f"ceil({quarter}/{block})", str(lead), "1"]
    else:
        body = ["t = launch.thread_id(0)", f"if t < {lead * quarter * k}:",
                f"    c = t % {k}", f"    u = t // {k}", f"    i = u % {quarter}",
                f"    b = (u // {quarter}) * {n * k} + c", f"    e = i - i % {stride}",
                f"    o = b + ({radix} * e + i % {stride}) * {k}"]   # output j at o + j·s·k
        at_in = lambda m: f"b + (i + {m * quarter}) * {k}"   # noqa: E731
        at_out = lambda j: f"o + {j * stride * k}" if j else "o"   # noqa: E731
        block = KERNEL_BLOCK
        grid = [f"ceil({lead * quarter * k}/{block})", "1", "1"]
    for m in range(radix if not pairs_in else 0):
        body += [f"    a{m}r = {_access(into, at_in(m), 0)}",
                 f"    a{m}i = {_access(into, at_in(m), 1)}" if into != "parts" or imag else f"    a{m}i = {lit(0.0)}"]
    body += ["    " + line for line in _dft_lines(radix, inverse)]
    for j in range(radix):
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
        if pairs_in:   # each thread its own part
            where = (f"Y[2 * ({at_out(j)}) + par]" if out == "pairs" else f"Y[par * PLANE + {at_out(j)}]")
            body += [f"    {where} = ({re}) if par == 0 else ({im})"]
        else:
            body += [f"    {_access(out, at_out(j), 0, 'Y')} = {re}", f"    {_access(out, at_out(j), 1, 'Y')} = {im}"]
    src_len = count * (1 if into == "parts" else 2)
    params = [f"X: tensor[{dt}, \"NX\"]"] + ([f"XI: tensor[{dt}, \"NX\"]"] if imag else []) + \
             [f"Y: tensor[{dt}, \"NY\"]"]
    src = "\n".join(["@kernel", f"def {name}({', '.join(params)}):", *("    " + line for line in body), ""])
    src = src.replace("PLANE", str(count))
    env = {"NX": str(src_len), "NY": str(2 * count)}
    args = [{"value": v, "shape": ["NX"]} for v in op.operands] + [{"value": result, "shape": ["NY"]}]
    step = {"env": env, "block": [block, 1, 1], "grid": grid, "args": args}
    return src, step


def _chirp_lines(j: str, n: int, inverse: bool, conjugate: bool, dt: str, lit) -> list[str]:
    """wr + i·wi = w_j = exp(∓πi·j²/n) (+ where `inverse`; its conjugate where `conjugate`) for the integer j < n:
    the exponent j² mod 2n in (64-bit index) integers, then _twiddle_lines' quarter turn and polynomials."""
    lines = [f"e = ({j} * {j}) % {2 * n}"] + _twiddle_lines(1, 2 * n, dt, lit)
    plus = inverse != conjugate   # c1 + i·s1 = exp(+2πi·e/2n)
    return lines + ["wr = c1", "wi = s1" if plus else "wi = -s1"]


def chirp_kernel(name: str, op) -> tuple[str, dict]:
    """The source and launch of the kernel computing Bluestein's ttensor.chirp_mul, ttensor.chirp or
    ttensor.spectrum_mul `op` (one thread an output element)."""
    result = op.results[0]
    dt = kernelgen.element_dtype(result)
    lit = (lambda v: kernelgen.float_literal(v)) if dt == "f32" else (lambda v: f"f64({kernelgen.float_literal(v)})")
    kind = op.operation.name
    shape = _shape(result)
    if kind == "ttensor.chirp":
        n, inverse, m = ir.IntegerAttr(op.attributes["n"]).value, ir.BoolAttr(op.attributes["inverse"]).value, shape[1]
        body = ["j = launch.thread_id(0)", f"if j < {m}:", "    jj = j", f"    if j >= {n}:", f"        jj = {m} - j",
                f"    yr = {lit(0.0)}", f"    yi = {lit(0.0)}", f"    if jj < {n}:",
                *("        " + line for line in _chirp_lines("jj", n, inverse, True, dt, lit)),
                "        yr = wr", "        yi = wi", "    Y[j] = yr", f"    Y[{m} + j] = yi"]
        params, env, count = [f"Y: tensor[{dt}, \"NY\"]"], {"NY": str(2 * m)}, m
        args = [{"value": result, "shape": ["NY"]}]
    elif kind == "ttensor.spectrum_mul":
        count = math.prod(shape[1:])
        m, k = shape[-2], shape[-1]
        body = ["t = launch.thread_id(0)", f"if t < {count}:",
                f"    j = (t // {k}) % {m}" if k > 1 else f"    j = t % {m}",
                "    xr = X[2 * t]", "    xi = X[2 * t + 1]", "    hr = H[2 * j]", "    hi = H[2 * j + 1]",
                "    Y[t] = xr * hr - xi * hi", f"    Y[{count} + t] = xr * hi + xi * hr"]
        params = [f"X: tensor[{dt}, \"NX\"]", f"H: tensor[{dt}, \"NH\"]", f"Y: tensor[{dt}, \"NY\"]"]
        env = {"NX": str(2 * count), "NH": str(2 * m), "NY": str(2 * count)}
        args = [{"value": op.operands[0], "shape": ["NX"]}, {"value": op.operands[1], "shape": ["NH"]},
                {"value": result, "shape": ["NY"]}]
    else:   # ttensor.chirp_mul
        into, out = (ir.StringAttr(op.attributes[a]).value for a in ("input_layout", "output_layout"))
        n, inverse = ir.IntegerAttr(op.attributes["n"]).value, ir.BoolAttr(op.attributes["inverse"]).value
        scale = ir.FloatAttr(op.attributes["scale"]).value
        x = op.operands[0]
        cin, cout = ttensor._columns(ir.RankedTensorType(x.type), into), shape[:-1] if out == "pairs" else shape[1:]
        nin, nout, k = cin[-2], cout[-2], cout[-1]
        count, count_in = math.prod(cout), math.prod(cin)
        imag = len(op.operands) > 1
        at = "(l * {} + j) * {} + c".format(nin, k) if k > 1 else f"l * {nin} + j"
        load = lambda part: _access(into, at, part).replace("PLANE", str(count_in))   # noqa: E731
        store = lambda part: _access(out, "t", part, "Y").replace("PLANE", str(count))   # noqa: E731
        body = ["t = launch.thread_id(0)", f"if t < {count}:",
                *([f"    c = t % {k}", f"    u = t // {k}"] if k > 1 else ["    u = t"]),
                f"    j = u % {nout}", f"    l = u // {nout}", f"    yr = {lit(0.0)}", f"    yi = {lit(0.0)}",
                f"    if j < {n}:", f"        xr = {load(0)}",
                f"        xi = {load(1)}" if into != "parts" or imag else f"        xi = {lit(0.0)}",
                *("        " + line for line in _chirp_lines("j", n, inverse, False, dt, lit)),
                *([f"        wr = wr * {lit(scale)}", f"        wi = wi * {lit(scale)}"] if scale != 1.0 else []),
                "        yr = xr * wr - xi * wi", "        yi = xr * wi + xi * wr",
                f"    {store(0)} = yr", f"    {store(1)} = yi"]
        src_len = count_in * (1 if into == "parts" else 2)
        params = [f"X: tensor[{dt}, \"NX\"]"] + ([f"XI: tensor[{dt}, \"NX\"]"] if imag else []) + \
                 [f"Y: tensor[{dt}, \"NY\"]"]
        env = {"NX": str(src_len), "NY": str(2 * count)}
        args = [{"value": v, "shape": ["NX"]} for v in op.operands] + [{"value": result, "shape": ["NY"]}]
    src = "\n".join(["@kernel", f"def {name}({', '.join(params)}):", *("    " + line for line in body), ""])
    step = {"env": env, "block": [KERNEL_BLOCK, 1, 1], "grid": [f"ceil({count}/{KERNEL_BLOCK})", "1", "1"],
            "args": args}
    return src, step
