"""Fourier transforms and complex values as real Graph IR, on every target.

The operator algebra's ``tod.fft(n)`` is the unitary DFT F[j, k] = exp(−2πi·jk/n) / √n and ``tod.ifft(n)`` its
adjoint. With C = cos(2π·jk/n) / √n and S = sin(2π·jk/n) / √n (symmetric matrices), F = C − iS and F* = C + iS,
so F applied to a complex x = xr + i·xi is the four real GEMMs

    Re(F x) = C xr + S xi        Im(F x) = C xi − S xr          (F*: S's sign flipped)

(two when x is real): a DFT as GEMMs, O(n²) work on each target's GEMM, exact to the GEMM's rounding
(no twiddle recurrence). It is the path of sizes below fft.BLUESTEIN_MIN that are not powers of two, of n = 1
and of extents known only at run time (at most MAX_DFT); powers of two are FFTs and other sizes Bluestein's
chirp-z on them (passes/fft.py), which use this module's pairs and polynomials. C and S are ``ttensor.twiddle``
ops, each written by a kernel of its own from j·k mod n: the angle is reduced exactly in integers to the
nearest quarter turn q and a remainder |φ| ≤ π/4, whose cosine and sine are Taylor polynomials (to φ¹⁷ in f64,
φ¹¹ in f32: below half an ulp of the result), and the quarter turn picks sign and part. No table is stored in
the image and no target needs a sine instruction (the GPU math lowerings have none).

Complex values exist only inside the lowering of an operator program (passes/tod_lower.py), as pairs of real
tensors. Where one leaves it — a complex ``tod.apply`` result the function returns — ``ttensor.interleave``
writes the pair as numpy stores a complex array, real and imaginary part side by side, and a reshape views
that storage as ``complex<T>`` (so a compiled function returns numpy complex64/complex128 arrays, as the
interpreter does, and C callers get a DLPack complex tensor). A complex parameter enters the other way: a
reshape views it as pairs and ``ttensor.part`` kernels take each half.
"""

from __future__ import annotations

import math

from ..dialects import ttensor
from ..mlir import ir
from . import fft, kernelgen
from .complex_pairs import _TERMS, KERNEL_BLOCK, Pair, _poly  # noqa: F401   (Pair: tod_lower's import)

MAX_DFT = ttensor.TWIDDLE_MAX   # the largest n a DFT as GEMMs takes


def twiddle(n: int, part: str, element: ir.Type) -> ir.Value:
    """The [n, n] matrix `part` ("cos" or "sin") of the unitary DFT of size n, at the insertion point."""
    return ttensor.TwiddleOp(part=ir.StringAttr.get(part), result=ir.RankedTensorType.get([n, n], element)).result


def interleave(pair: Pair) -> ir.Value:
    """`pair` as one complex tensor: its parts side by side, viewed as complex<T>. Parts of one pairs tensor (an
    FFT's result: passes/fft.py) are that tensor viewed, with no kernel."""
    t = ir.RankedTensorType(pair.re.type)
    shape = [t.get_dim_size(i) for i in range(t.rank)]
    both = fft.pairs_of(pair, view=False)
    if both is None:
        both = ttensor.InterleaveOp(pair.re, pair.im,
                                    result=ir.RankedTensorType.get(shape + [2], t.element_type)).result
    return ttensor.ReshapeOp(both, result=ir.RankedTensorType.get(shape, ir.ComplexType.get(t.element_type))).result


def parts(value: ir.Value) -> Pair:
    """Complex tensor `value` (a parameter) as its Pair: its storage viewed as pairs, each half by a kernel."""
    t = ir.RankedTensorType(value.type)
    shape, part = [t.get_dim_size(i) for i in range(t.rank)], ir.ComplexType(t.element_type).element_type
    pairs = ttensor.ReshapeOp(value, result=ir.RankedTensorType.get(shape + [2], part)).result
    return Pair(*(ttensor.PartOp(pairs, part=ir.StringAttr.get(p), result=ir.RankedTensorType.get(shape, part)).result
                  for p in ("re", "im")))


def kernel(name: str, op) -> tuple[str, dict]:
    """The source of the kernel computing ttensor.twiddle, interleave, part or fft_stage (passes/fft.py) `op`
    and its plan step's launch (env, block, grid, argument shapes), as convolution.window_kernel's: one thread an
    element written (a butterfly, for fft_stage)."""
    if op.operation.name == "ttensor.fft_stage":
        return fft.kernel(name, op)
    if op.operation.name in fft.BLUESTEIN_OPS:
        return fft.chirp_kernel(name, op)
    result = op.results[0]
    dt = kernelgen.element_dtype(result)
    lit = (lambda x: kernelgen.float_literal(x)) if dt == "f32" else (lambda x: f"f64({kernelgen.float_literal(x)})")
    if op.operation.name == "ttensor.twiddle":
        n = ir.RankedTensorType(result.type).get_dim_size(0)
        terms = _TERMS[dt]
        cos = _poly("x2", [(-1) ** k / math.factorial(2 * k) for k in range(terms)], lit)
        sin = _poly("x2", [(-1) ** k / math.factorial(2 * k + 1) for k in range(terms)], lit)
        # cos θ, sin θ at θ = q·π/2 + φ, by the quarter turn q
        picks = ({1: "-s", 2: "-c", 3: "s"} if ir.StringAttr(op.attributes["part"]).value == "cos"
                 else {1: "c", 2: "-s", 3: "-c"})
        first = "c" if ir.StringAttr(op.attributes["part"]).value == "cos" else "s"
        body = ["    if i < Y.shape[0] * Y.shape[1]:",
                f"        m = ((i // {n}) * (i % {n})) % {n}",
                f"        q = (8 * m + {n}) // {2 * n}",        # the nearest quarter turn, 0..4
                f"        x = {dt}(4 * m - q * {n}) * {lit(math.pi / 2 / n)}",   # φ, |φ| ≤ π/4
                "        x2 = x * x",
                f"        c = {cos}", f"        s = x * {sin}",
                f"        v = {first}",
                *[line for q, e in picks.items() for line in (f"        if q % 4 == {q}:", f"            v = {e}")],
                f"        Y[i // {n}, i % {n}] = v * {lit(1 / math.sqrt(n))}"]
        src = "\n".join(["@kernel", f"def {name}(Y: tensor[{dt}, \"YR\", \"YC\"]):",
                         "    i = launch.thread_id(0)", *body, ""])
        env = {"YR": str(n), "YC": str(n)}
        threads = f"{n * n}"
        args = [{"value": result, "shape": ["YR", "YC"]}]
    elif op.operation.name == "ttensor.part":
        count = math.prod(ir.RankedTensorType(result.type).shape)
        half = 0 if ir.StringAttr(op.attributes["part"]).value == "re" else 1
        src = "\n".join(["@kernel", f"def {name}(X: tensor[{dt}, \"N2\"], Y: tensor[{dt}, \"N\"]):",
                         "    i = launch.thread_id(0)", "    if i < Y.shape[0]:",
                         f"        Y[i] = X[2 * i + {half}]", ""])
        env = {"N": str(count), "N2": str(2 * count)}
        threads = f"{count}"
        args = [{"value": op.operands[0], "shape": ["N2"]}, {"value": result, "shape": ["N"]}]
    else:
        count = math.prod(ir.RankedTensorType(op.operands[0].type).shape)
        src = "\n".join(["@kernel",
                         f"def {name}(R: tensor[{dt}, \"N\"], I: tensor[{dt}, \"N\"], Y: tensor[{dt}, \"N2\"]):",
                         "    i = launch.thread_id(0)", "    if i < Y.shape[0]:",
                         "        if i % 2 == 0:", "            Y[i] = R[i // 2]",
                         "        else:", "            Y[i] = I[i // 2]", ""])
        env = {"N": str(count), "N2": str(2 * count)}
        threads = f"{2 * count}"
        args = [{"value": op.operands[0], "shape": ["N"]}, {"value": op.operands[1], "shape": ["N"]},
                {"value": result, "shape": ["N2"]}]
    step = {"env": env, "block": [KERNEL_BLOCK, 1, 1], "grid": [f"ceil({threads}/{KERNEL_BLOCK})", "1", "1"],
            "args": args}
    return src, step
