"""Small dense matrix algorithms as ONE kernel each, with loops: the singular value decomposition, the symmetric
eigendecomposition and the spectral radius of an operator's matrix (passes/tod_lower.py calls these for
op.spectral, op.truncate, op.reconstruct, op.pseudoinverse, op.norm and op.spectral_radius).

The Graph IR has no control flow and every step of an unrolled algorithm is planned kernel by kernel
(passes/matrix_functions.py: 53 squarings made a 16×16 plan take minutes), so an iterative algorithm is not a
graph of steps here but the loop of one kernel, `ttensor.linalg`, run by one thread (one CPU thread, one GPU
thread of one block): the sizes operator programs factorize are small, and the loops end when the data say so.
The result is one packed matrix [rows, n] that the factors are sliced from (`ttensor.slice`):

- `svd` of A [m, n], m ≥ n (a wider A is factorized transposed, passes/tod_lower.py): one-sided Jacobi
  (Hestenes; Demmel & Veselić 1992), W = A / max|A|, V = I, cyclic sweeps over the column pairs (p, q): with
  α = ‖w_p‖², β = ‖w_q‖², γ = w_pᵀw_q, the pair is rotated where |γ| > tol·√α·√β (tol = √m·ε) by the
  rotation that makes it orthogonal, applied to W's and V's columns together; the sweeps end when one rotates
  no pair. Then σ_j = ‖w_j‖, the columns sorted by descending σ (the first on ties), u_j = w_j / σ_j (0 where
  σ_j = 0), each column pair's sign set so that U's largest entry (V's for the transposed A; the first on
  ties) is positive, as the interpreter normalizes, and σ scaled back by max|A|.
  Packed: rows [0, m) U, [m, m + n) V, row m + n the singular values.
- `eigh` of a self-adjoint A [n, n]: cyclic two-sided Jacobi on B = (A + Aᵀ)/2 / max|A| (Golub & Van Loan,
  §8.5): the pair (p, q) is rotated where |b_pq| > u·‖B‖_F (u the unit roundoff), b_pq set to 0; V
  accumulates the rotations; eigenvalues sorted by descending |λ|, then descending λ (the interpreter's
  order). An A that is not self-adjoint within √ε·max(1, max|A|) (the interpreter's promise check, which
  raises there) gives NaN. Packed: rows [0, n) V (= U), [n, 2n) B (scratch), row 2n the eigenvalues.
- `spectral_radius` of A [n, n] (any real A): Gelfand's formula ρ = lim ‖A^(2^k)‖^(2^-k), by normalized
  repeated squaring: B ← (B/c)² with c = max|B|, log ρ ≈ Σ_k 2^-k log c_k. After K squarings (60 in f64, 30 in
  f32) the limit is reached within log(C)/2^K, C = ‖A^(2^K)‖/ρ^(2^K) (at most n for a normal A, polynomial in
  2^K for a defective one): below the rounding. The interpreter's max|eigvals(A)| is the same number; the
  squarings' rounding (n·u·max|B|² per product) weighs as the matrix is far from normal. ρ = 0 where B
  becomes 0 within ⌈log₂ n⌉ + 1 squarings (nilpotent); where it underflows to 0 later (a defective A, whose
  powers' entries outgrow the exponent range: a 16×16 Jordan block after 44 squarings), the estimate so far,
  within 2^-k·ln(2^2100) of ρ after k squarings, from k = 44 (f64) / 24 (f32) on, else NaN. Packed: rows
  [0, n) B, [n, 2n) B² (scratch), entry [2n, 0] ρ.

Non-convergence within the sweep limit, and a NaN or infinite entry of A, make every entry of the result NaN:
never a wrong number. One thread means the work is O(sweeps·n²·m) sequential operations, so the sizes are
bounded (MAX_SMALL, MAX_LARGE below); larger ones are refused at the user's line.
"""

from __future__ import annotations

import math

# numpy: imported where used (a compile that never gets there does not load it, 60-70 ms)

from ..dialects import ttensor
from ..dialects.support import create
from ..mlir import ir
from . import kernelgen
from .decompose import _elt, _i64, _shape

SWEEPS = 40          # Jacobi sweeps at most (LAPACK's dgesvj: 30); each ends early once nothing rotates
SQUARINGS = {"f64": 60, "f32": 30}
# B underflowing to 0 after squaring k > ⌈log₂ n⌉ + 1 (A is not nilpotent: the powers' entries outgrew the
# exponent range, a far from normal A): the estimate so far is within 2^-k·ln(range²) of ρ (range 2^2100 in
# f64, 2^277 in f32), kept from squaring EARLIEST on (8.3e-11 in f64, 1.1e-5 in f32), NaN before
EARLIEST = {"f64": 44, "f32": 24}
MAX_SMALL = 64       # the smaller extent of a factorized matrix, and n of eigh and spectral_radius
MAX_LARGE = 4096     # the larger extent of an svd's matrix
ONE_BLOCK = 1        # the launch: one block of one thread, guarded by `t < 1`. `if t == 0:` ran wrong on the
                     # OpenCL CPU runtime through SPIR-V (results unwritten, heap corruption), not for the guard's
                     # sake: intel-opencl-rt miscompiled the computed global id (WorkgroupId·WorkgroupSize +
                     # LocalInvocationId) under an OpIEqual guard when another kernel of the module used
                     # OpSLessThan. The id is the GlobalInvocationId built-in now (backends/spirv/compiler.py
                     # _global_ids, d21aee0; docs/portability.md), so either guard runs right; `t < 1` is kept


def _eps(dt: str) -> float:
    import numpy as np
    return float(np.finfo(np.float64 if dt == "f64" else np.float32).eps)


def packed_shape(fn: str, m: int, n: int) -> list[int]:
    """The packed result's extents of `fn` on an [m, n] matrix."""
    return [m + n + 1, n] if fn == "svd" else [2 * n + 1, n]


def linalg(fn: str, a: ir.Value, transposed: bool = False) -> ir.Value:
    """ttensor.linalg `fn` of matrix `a` (f32 or f64) at the insertion point: its packed result."""
    m, n = _shape(a.type)
    op = create(ttensor.LinalgOp, a, fn=ir.StringAttr.get(fn), transposed=ir.BoolAttr.get(transposed),
                          result=ir.RankedTensorType.get(packed_shape(fn, m, n), _elt(a)))
    return op.result


def slice2d(x: ir.Value, row: int, col: int, rows: int, cols: int) -> ir.Value:
    """x[row:row + rows, col:col + cols] of a 2-D x."""
    return ttensor.SliceOp(x, offsets=ir.ArrayAttr.get([_i64(row), _i64(col)]),
                           result=ir.RankedTensorType.get([rows, cols], _elt(x))).result


def kernel(name: str, op) -> tuple[str, dict]:
    """The source of the kernel computing ttensor.linalg or ttensor.slice `op` and its plan step's launch
    (env, block, grid, argument shapes), as passes/fourier.kernel's."""
    result = op.results[0]
    dt = kernelgen.element_dtype(result)
    x = op.operands[0]
    m, n = _shape(x.type)
    r, c = _shape(result.type)
    if op.operation.name == "ttensor.slice":
        r0, c0 = (ir.IntegerAttr(a).value for a in ir.ArrayAttr(op.attributes["offsets"]))
        src = "\n".join(["@kernel", f"def {name}(X: tensor[{dt}, \"XR\", \"XC\"], Y: tensor[{dt}, \"YR\", \"YC\"]):",
                         "    i = launch.thread_id(0)", f"    if i < {r * c}:",
                         f"        Y[i // {c}, i % {c}] = X[i // {c} + {r0}, i % {c} + {c0}]", ""])
        env = {"XR": str(m), "XC": str(n), "YR": str(r), "YC": str(c)}
        block = 256
        step = {"env": env, "block": [block, 1, 1], "grid": [f"ceil({r * c}/{block})", "1", "1"],
                "args": [{"value": x, "shape": ["XR", "XC"]}, {"value": result, "shape": ["YR", "YC"]}]}
        return src, step
    fn = ir.StringAttr(op.attributes["fn"]).value
    transposed = ir.BoolAttr(op.attributes["transposed"]).value
    body = {"svd": _svd, "eigh": _eigh, "spectral_radius": _spectral_radius}[fn](dt, m, n, transposed)
    src = "\n".join(["@kernel", f"def {name}(A: tensor[{dt}, \"XR\", \"XC\"], F: tensor[{dt}, \"YR\", \"YC\"]):",
                     "    t = launch.thread_id(0)", "    if t < 1:",
                     *("        " + line for line in body), ""])
    env = {"XR": str(m), "XC": str(n), "YR": str(r), "YC": str(c)}
    step = {"env": env, "block": [ONE_BLOCK, 1, 1], "grid": ["1", "1", "1"],
            "args": [{"value": x, "shape": ["XR", "XC"]}, {"value": result, "shape": ["YR", "YC"]}]}
    return src, step


def source(fn: str, dt: str, m: int, n: int, transposed: bool = False) -> str:
    """The kernel body of `fn` alone (tests run it in Python, as tessera.interpret runs kernels)."""
    return "\n".join({"svd": _svd, "eigh": _eigh, "spectral_radius": _spectral_radius}[fn](dt, m, n, transposed))


def _lit(dt: str, x: float) -> str:
    return f"{dt}({kernelgen.float_literal(x)})"


def _scan(dt: str, m: int, n: int) -> list[str]:
    """big = max|A|; bad = 1 where A holds a NaN or an infinity."""
    import numpy as np
    return [f"big = {_lit(dt, 0.0)}", "bad = 0",
            f"for i in range({m}):",
            f"    for j in range({n}):",
            "        x = A[i, j]",
            "        if x != x:",
            "            bad = 1",
            "        if abs(x) > big:",
            "            big = abs(x)",
            f"if big > {_lit(dt, float(np.finfo(np.float64 if dt == 'f64' else np.float32).max))}:",
            "    bad = 1",
            f"scale = {_lit(dt, 1.0)}",
            f"if big > {_lit(dt, 0.0)}:",
            "    scale = big"]


def _rotation(dt: str, zeta: str) -> list[str]:
    """c, s of the Jacobi rotation for ζ: t = sign(ζ)/(|ζ| + √(1 + ζ²)) (1/(2ζ) where ζ² would overflow)."""
    one = _lit(dt, 1.0)
    return [f"tt = {one} / (abs({zeta}) + math.sqrt({one} + {zeta} * {zeta}))",
            f"if abs({zeta}) > {_lit(dt, 1e150 if dt == 'f64' else 1e18)}:",
            f"    tt = {_lit(dt, 0.5)} / abs({zeta})",
            f"if {zeta} < {_lit(dt, 0.0)}:",
            "    tt = -tt",
            f"c = {one} / math.sqrt({one} + tt * tt)",
            "s = c * tt"]


def _sort(dt: str, key_row: int, rows: int, n: int, by_magnitude: bool) -> list[str]:
    """Selection sort of the columns by row `key_row` descending (by |x| then x where `by_magnitude`; the first
    on ties), swapping rows [0, rows) and the key row."""
    better = ("(abs(F[{r}, k]) > abs(F[{r}, best]) or (abs(F[{r}, k]) == abs(F[{r}, best]) and "
              "F[{r}, k] > F[{r}, best]))" if by_magnitude else "F[{r}, k] > F[{r}, best]").format(r=key_row)
    return [f"for j in range({n - 1}):",
            "    best = j",
            f"    for k in range(j + 1, {n}):",
            f"        if {better}:",
            "            best = k",
            "    if best != j:",
            f"        for i in range({rows}):",
            "            x = F[i, j]", "            F[i, j] = F[i, best]", "            F[i, best] = x",
            f"        x = F[{key_row}, j]", f"        F[{key_row}, j] = F[{key_row}, best]",
            f"        F[{key_row}, best] = x"]


def _signs(dt: str, lo: int, hi: int, n: int, flip_rows: int) -> list[str]:
    """Each column's sign set so that its largest |entry| in rows [lo, hi) (the first on ties) is positive,
    flipping rows [0, flip_rows)."""
    zero = _lit(dt, 0.0)
    return [f"for j in range({n}):",
            f"    piv = {zero}",
            f"    sgn = {_lit(dt, 1.0)}",
            f"    for i in range({lo}, {hi}):",
            "        if abs(F[i, j]) > piv:",
            "            piv = abs(F[i, j])",
            f"            sgn = {_lit(dt, 1.0)}",
            f"            if F[i, j] < {zero}:",
            f"                sgn = {_lit(dt, -1.0)}",
            f"    if sgn < {zero}:",
            f"        for i in range({flip_rows}):",
            "            F[i, j] = -F[i, j]"]


def _nan_if_bad(rows: int, n: int) -> list[str]:
    return ["if bad == 1:", f"    for i in range({rows}):", f"        for j in range({n}):",
            "            F[i, j] = math.nan"]


def _svd(dt: str, m: int, n: int, transposed: bool) -> list[str]:
    zero, one = _lit(dt, 0.0), _lit(dt, 1.0)
    tol = _lit(dt, math.sqrt(m) * _eps(dt))
    key = m + n
    return [*_scan(dt, m, n),
            f"for i in range({m}):",
            f"    for j in range({n}):",
            "        F[i, j] = A[i, j] / scale",
            f"for i in range({n}):",
            f"    for j in range({n}):",
            f"        F[{m} + i, j] = {zero}",
            f"    F[{m} + i, i] = {one}",
            "done = 0",
            f"for sweep in range({SWEEPS}):",
            "    if done == 0:",
            "        rotated = 0",
            f"        for p in range({n - 1}):",
            f"            for q in range(p + 1, {n}):",
            f"                alpha = {zero}", f"                beta = {zero}", f"                gamma = {zero}",
            f"                for i in range({m}):",
            "                    wp = F[i, p]", "                    wq = F[i, q]",
            "                    alpha = alpha + wp * wp", "                    beta = beta + wq * wq",
            "                    gamma = gamma + wp * wq",
            f"                if abs(gamma) > {tol} * math.sqrt(alpha) * math.sqrt(beta):",
            "                    rotated = 1",
            f"                    zeta = (beta - alpha) / ({_lit(dt, 2.0)} * gamma)",
            *("                    " + line for line in _rotation(dt, "zeta")),
            f"                    for i in range({m + n}):",
            "                        wp = F[i, p]", "                        wq = F[i, q]",
            "                        F[i, p] = c * wp - s * wq", "                        F[i, q] = s * wp + c * wq",
            "        if rotated == 0:",
            "            done = 1",
            "if done == 0:",
            "    bad = 1",
            f"for j in range({n}):",
            f"    ss = {zero}",
            f"    for i in range({m}):",
            "        ss = ss + F[i, j] * F[i, j]",
            f"    F[{key}, j] = math.sqrt(ss)",
            *_sort(dt, key, m + n, n, False),
            f"for j in range({n}):",
            f"    sj = F[{key}, j]",
            f"    for i in range({m}):",
            f"        x = {zero}",
            f"        if sj > {zero}:",
            "            x = F[i, j] / sj",
            "        F[i, j] = x",
            f"    F[{key}, j] = sj * scale",
            *_signs(dt, *((m, m + n) if transposed else (0, m)), n, m + n),
            *_nan_if_bad(m + n + 1, n)]


def _eigh(dt: str, m: int, n: int, transposed: bool) -> list[str]:
    zero, one, half = _lit(dt, 0.0), _lit(dt, 1.0), _lit(dt, 0.5)
    promise = math.sqrt(_eps(dt))
    u = _eps(dt) / 2
    key = 2 * n
    return [*_scan(dt, n, n),
            f"asym = {zero}",
            f"for i in range({n}):",
            f"    for j in range({n}):",
            "        if abs(A[i, j] - A[j, i]) > asym:",
            "            asym = abs(A[i, j] - A[j, i])",
            f"if asym > {_lit(dt, promise)} * max({one}, big):",
            "    bad = 1",
            f"fro = {zero}",
            f"for i in range({n}):",
            f"    for j in range({n}):",
            f"        x = (A[i, j] + A[j, i]) * {half} / scale",
            f"        F[{n} + i, j] = x",
            "        fro = fro + x * x",
            f"        F[i, j] = {zero}",
            f"    F[i, i] = {one}",
            f"thr = {_lit(dt, u)} * math.sqrt(fro)",
            "done = 0",
            f"for sweep in range({SWEEPS}):",
            "    if done == 0:",
            "        rotated = 0",
            f"        for p in range({n - 1}):",
            f"            for q in range(p + 1, {n}):",
            f"                bpq = F[{n} + p, q]",
            "                if abs(bpq) > thr:",
            "                    rotated = 1",
            f"                    zeta = (F[{n} + q, q] - F[{n} + p, p]) / ({_lit(dt, 2.0)} * bpq)",
            *("                    " + line for line in _rotation(dt, "zeta")),
            f"                    for k in range({n}):",
            f"                        xp = F[{n} + k, p]", f"                        xq = F[{n} + k, q]",
            f"                        F[{n} + k, p] = c * xp - s * xq",
            f"                        F[{n} + k, q] = s * xp + c * xq",
            f"                    for k in range({n}):",
            f"                        xp = F[{n} + p, k]", f"                        xq = F[{n} + q, k]",
            f"                        F[{n} + p, k] = c * xp - s * xq",
            f"                        F[{n} + q, k] = s * xp + c * xq",
            f"                    F[{n} + p, q] = {zero}", f"                    F[{n} + q, p] = {zero}",
            f"                    for k in range({n}):",
            "                        xp = F[k, p]", "                        xq = F[k, q]",
            "                        F[k, p] = c * xp - s * xq", "                        F[k, q] = s * xp + c * xq",
            "        if rotated == 0:",
            "            done = 1",
            "if done == 0:",
            "    bad = 1",
            f"for j in range({n}):",
            f"    F[{key}, j] = F[{n} + j, j] * scale",
            *_sort(dt, key, n, n, True),
            *_signs(dt, 0, n, n, n),
            *_nan_if_bad(2 * n + 1, n)]


def _spectral_radius(dt: str, m: int, n: int, transposed: bool) -> list[str]:
    zero, one, half = _lit(dt, 0.0), _lit(dt, 1.0), _lit(dt, 0.5)
    k = SQUARINGS[dt]
    return [*_scan(dt, n, n),
            f"for i in range({n}):",
            f"    for j in range({n}):",
            "        F[i, j] = A[i, j]",
            f"acc = {zero}", f"w = {one}", "nil = 0", "dead = 0",
            f"for it in range({k + 1}):",
            "    if nil == 0:",
            f"        c = {zero}",
            f"        for i in range({n}):",
            f"            for j in range({n}):",
            "                if abs(F[i, j]) > c:",
            "                    c = abs(F[i, j])",
            f"        if c == {zero}:",
            "            nil = 1",
            "            dead = it",
            "        else:",
            "            acc = acc + w * math.log(c)",
            f"            w = w * {half}",
            f"            for i in range({n}):",
            f"                for j in range({n}):",
            "                    F[i, j] = F[i, j] / c",
            f"            for i in range({n}):",
            f"                for j in range({n}):",
            f"                    x = {zero}",
            f"                    for l in range({n}):",
            "                        x = x + F[i, l] * F[l, j]",
            f"                    F[{n} + i, j] = x",
            f"            for i in range({n}):",
            f"                for j in range({n}):",
            f"                    F[i, j] = F[{n} + i, j]",
            "rho = math.exp(acc)",
            "if nil == 1:",
            f"    if dead <= {max(1, (n - 1).bit_length()) + 1}:",
            f"        rho = {zero}",
            f"    elif dead < {EARLIEST[dt]}:",
            "        rho = math.nan",
            f"if big == {zero}:",
            f"    rho = {zero}",
            f"for i in range({2 * n + 1}):",
            f"    for j in range({n}):",
            f"        F[i, j] = {zero}",
            f"F[{2 * n}, 0] = rho",
            *_nan_if_bad(2 * n + 1, n)]
