"""GEMM fusion groups of Graph IR functions as SPIR-V kernels: a SIMT kernel generated as Tessera source,
one work-item per element of C, its K loop in f32 vector FMAs' stead (the driver vectorizes the
work-items). These kernels do not use cooperative matrices even with `--arch xe-hpc`: only tile.mma
fragments do (passes/tile_mma.py), and no Graph IR GEMM is lowered to fragments yet.

A group is a matmul and its epilogue (bias along the last axis, one activation, a scale by a constant, a
residual add: the CPU's groups, backends/cpu/gemm_lowering.py), applied in the program's order in f32
before one rounding to the result's dtype. The lhs's batch axes fold into its rows; a batched rhs is
refused (yet). Operands of any float dtype are widened to f32 as they are loaded, so accumulation is f32
for every input precision (portability guide §5).

Work-items run 32 along N (a subgroup reads consecutive columns of B and C) and 4 along M per work-group;
K is reduced in ascending order, one product and one sum per step, the order tessera.interpret and numpy's
naive loop use.
"""

from __future__ import annotations

from ... import plan
from ...diagnostics import LoweringError
from ...passes import graph_shapes, kernelgen
from ...passes.kernelgen import element_dtype
from ..cpu.gemm_lowering import _epilogue

BLOCK = (32, 4, 1)
FLOATS = ("f32", "f64", "f16", "bf16")


def _load(expr: str, dtype: str) -> str:
    return expr if dtype == "f32" else f"f32({expr})"


def source(name: str, dtype: str, out_dtype: str, steps: list, extras: list) -> str:
    """The kernel's source: C[M, N] = epilogue(A[M, K] @ B[K, N])."""
    params = [f'A: tensor[{dtype}, "M", "K"]', f'B: tensor[{dtype}, "K", "N"]', f'C: tensor[{out_dtype}, "M", "N"]']
    body = []
    extra = iter(extras)
    for n, step in enumerate(steps):
        kind = step[0]
        if kind == "bias":
            _, v = next(extra)
            params.append(f'bias{n}: tensor[{element_dtype(v)}, "N"]')
            body.append(f"        acc = acc + {_load(f'bias{n}[c]', element_dtype(v))}")
        elif kind == "scale":
            next(extra)
            params.append(f"alpha{n}: f32")
            body.append(f"        acc = acc * alpha{n}")
        elif kind == "add":
            _, v = next(extra)
            params.append(f'residual{n}: tensor[{element_dtype(v)}, "M", "N"]')
            body.append(f"        acc = acc + {_load(f'residual{n}[r, c]', element_dtype(v))}")
        else:
            body.append(f"        acc = {kernelgen.UNARY[kind].format(x='acc')}")
    store = "acc" if out_dtype == "f32" else f"{out_dtype}(acc)"
    return "\n".join([
        "import math", "", "",
        "@kernel",
        f"def {name}({', '.join(params)}):",
        "    c = launch.thread_id(0)",
        "    r = launch.thread_id(1)",
        "    if c < C.shape[1] and r < C.shape[0]:",
        "        acc = 0.0",
        "        for k in range(A.shape[1]):",
        f"            acc += {_load('A[r, k]', dtype)} * {_load('B[k, c]', dtype)}",
        *body,
        f"        C[r, c] = {store}", ""])


def strict(native):
    """The strict numerics profile's GEMM lowering on the CPU and ptx: float GEMMs as this SIMT kernel (one
    product and one sum per k, ascending, so every backend gives the same bits), integer ones by `native`, the
    target's own (exact in i32, so its order gives the same result)."""
    def lower_strict(ctx, kname: str, ops: list) -> list[plan.ArgsStep]:
        return (lower if element_dtype(ops[0].operands[0]) in FLOATS else native)(ctx, kname, ops)
    return lower_strict


def lower(ctx, kname: str, ops: list) -> list[plan.ArgsStep]:
    """The plan step of one GEMM group; its kernel is added to the module (`ctx`: a
    passes.lowering_context.LoweringContext)."""
    mm = ops[0]
    a, b = mm.operands[0], mm.operands[1]
    da, db = ctx.dims[a], ctx.dims[b]
    if len(db) > 2:
        raise LoweringError(mm, "the spirv GEMM multiplies by a 2-D rhs only (yet); batch axes of the lhs "
                                "fold into its rows")
    out = ops[-1].results[0]
    dt, out_dt = element_dtype(a), element_dtype(out)
    if dt not in FLOATS or element_dtype(b) != dt or out_dt not in FLOATS:
        raise LoweringError(mm, f"the spirv GEMM takes float operands of one dtype, not {dt} @ "
                                f"{element_dtype(b)} -> {out_dt}")
    steps, extras = _epilogue(ops)
    if dt == "f64":
        raise LoweringError(mm, "the spirv GEMM accumulates in f32: f64 operands would lose precision")
    text = source(kname, dt, out_dt, steps, extras)
    ctx.build(text, f"<tessera:{kname}>")
    args = [plan.TensorArg(ctx.record(a), ("M", "K")), plan.TensorArg(ctx.record(b), ("K", "N")),
            plan.TensorArg(ctx.record(out), ("M", "N"))]
    for role, v in extras:
        if role == "alpha":
            args.append(plan.F32Arg(v))
        else:
            args.append(plan.TensorArg(ctx.record(v), ("N",) if role == "bias" else ("M", "N")))
    M, K, N = graph_shapes.product(da[:-1]), da[-1], db[-1]
    return [plan.ArgsStep(kname, source=text, env={"M": M, "K": K, "N": N}, args=tuple(args), block=BLOCK,
                          grid=(f"ceil(N/{BLOCK[0]})", f"ceil(M/{BLOCK[1]})", "1"))]
