"""GEMM fusion groups of Graph IR functions as a SIMT kernel any GPU target compiles: generated as Tessera
source, one work-item per element of C, its K loop scalar FMAs (the SPIR-V driver vectorizes the
work-items). It is the SPIR-V backend's GEMM, the AMDGPU backend's, ptx's for integer operands before
sm_90a and the CPU's for tf32 ones (`taking`), and the strict numerics profile's everywhere (`strict`). It uses no matrix unit, even where the
target has one (SPIR-V `--arch xe-hpc`, MFMA/WMMA): only tile.mma fragments do (passes/tile_mma.py).

A group is a matmul and its epilogue (bias along the last axis, one activation, a scale by a constant, a
residual add: the CPU's groups, backends/cpu/gemm_lowering.py), applied in the program's order in the
accumulator's type before one rounding to the result's dtype. Batches: a 2-D rhs takes the lhs's batch axes
as more rows; a batched rhs runs the batch as more work-groups, an lhs of the same batch axes read per entry and a 2-D
lhs broadcast to every entry (its batch count 1: the kernel reads entry min(z, count − 1)). Float operands
of any dtype are widened to f32 as they are loaded (f64 stays f64; tf32 operands, f32 words, are multiplied
as f32: the quantize phase records "tf32 computed in f32"), so accumulation is f32 for every input
precision (portability guide §5); i8 × i8 accumulates exactly in the result's integer type (i32, or i64
by `accum=`), wrapping as the interpreter's sum wrapped to it does.

Work-items run 32 along N (a subgroup reads consecutive columns of B and C) and 4 along M per work-group;
K is reduced in ascending order, one product and one sum per step, the order tessera.interpret and numpy's
naive loop use. Work-groups are numbered column block first, then row block, then batch entry, across grid x,
y and z of at most 65535 each (kernelgen.split_grid/folded_block, as the generated kernels): a tall C (more
than 65535 blocks of 4 rows) or a long batch never passes a target's grid limit. Not a loop over blocks: that
raised the generated kernels' register counts on ptx.
"""

from __future__ import annotations

from .. import plan
from ..diagnostics import LoweringError
from ..passes import graph_shapes, kernelgen
from ..passes.kernelgen import element_dtype
from .cpu.gemm_lowering import _epilogue

BLOCK = (32, 4, 1)
FLOATS = ("f32", "f64", "f16", "bf16", "tf32")
INTEGERS = ("i8",)             # operand types of the integer GEMM (TargetFacts.integer_matmul)
ACCUMULATORS = ("i32", "i64")  # its result types


def _load(expr: str, dtype: str, acc: str) -> str:
    return expr if dtype == acc else f"{acc}({expr})"


def source(name: str, dtype: str, out_dtype: str, steps: list, extras: list) -> str:
    """The kernel's source: C[Z, M, N] = epilogue(A[Z', M, K] @ B[Z, K, N]), entry z of A min(z, Z' − 1)."""
    dtype = "f32" if dtype == "tf32" else dtype   # f32 words holding tf32 values, multiplied as f32
    acc_dt = out_dtype if out_dtype in ACCUMULATORS else kernelgen.compute_dtype(dtype)
    params = [f'A: tensor[{dtype}, "ZA", "M", "K"]', f'B: tensor[{dtype}, "Z", "K", "N"]',
              f'C: tensor[{out_dtype}, "Z", "M", "N"]']
    body = []
    extra = iter(extras)
    for n, step in enumerate(steps):
        kind = step[0]
        if kind == "bias":
            _, v = next(extra)
            params.append(f'bias{n}: tensor[{element_dtype(v)}, "N"]')
            body.append(f"        acc = acc + {_load(f'bias{n}[c]', element_dtype(v), acc_dt)}")
        elif kind == "scale":
            next(extra)
            params.append(f"alpha{n}: f32")
            body.append(f"        acc = acc * {_load(f'alpha{n}', 'f32', acc_dt)}")
        elif kind == "add":
            _, v = next(extra)
            params.append(f'residual{n}: tensor[{element_dtype(v)}, "Z", "M", "N"]')
            body.append(f"        acc = acc + {_load(f'residual{n}[z, r, c]', element_dtype(v), acc_dt)}")
        else:
            body.append(f"        acc = {kernelgen.UNARY[kind].format(x='acc')}")
    return "\n".join([
        "import math", "", "",
        "@kernel",
        f"def {name}({', '.join(params)}):",
        # this work-group's column block, row block and batch entry from its number (the plan's `grid`)
        f"    g = {kernelgen.folded_block(0, 1, 2)}",
        f"    nc = (C.shape[2] + {BLOCK[0] - 1}) // {BLOCK[0]}",
        f"    nr = (C.shape[1] + {BLOCK[1] - 1}) // {BLOCK[1]}",
        "    gz = g // nc",
        "    z = gz // nr",
        f"    c = (g - gz * nc) * {BLOCK[0]} + launch.local_id(0)",
        f"    r = (gz - z * nr) * {BLOCK[1]} + launch.local_id(1)",
        "    if c < C.shape[2] and r < C.shape[1] and z < C.shape[0]:",
        "        za = min(z, A.shape[0] - 1)",
        f"        acc = {acc_dt}(0)",
        "        for k in range(A.shape[2]):",
        f"            acc += {_load('A[za, r, k]', dtype, acc_dt)} * {_load('B[z, k, c]', dtype, acc_dt)}",
        *body,
        f"        C[z, r, c] = {_load('acc', acc_dt, out_dtype)}", ""])


def strict(native):
    """The strict numerics profile's GEMM lowering on the CPU and ptx: float GEMMs as this SIMT kernel (one
    product and one sum per k, ascending, so every backend gives the same bits), integer ones by `native`, the
    target's own (exact in i32, so its order gives the same result)."""
    def lower_strict(ctx, kname: str, ops: list) -> list[plan.ArgsStep]:
        return (lower if element_dtype(ops[0].operands[0]) in FLOATS else native)(ctx, kname, ops)
    return lower_strict


def taking(dtypes: tuple, native):
    """A target's GEMM lowering whose own kernels do not take operands of `dtypes` (ptx before sm_90a: i8; the
    CPU: tf32): those GEMMs as this SIMT kernel, the others by `native`."""
    def lower_taking(ctx, kname: str, ops: list) -> list[plan.ArgsStep]:
        return (lower if element_dtype(ops[0].operands[0]) in dtypes else native)(ctx, kname, ops)
    return lower_taking


def lower(ctx, kname: str, ops: list) -> list[plan.ArgsStep]:
    """The plan step of one GEMM group; its kernel is added to the module (`ctx`: a
    passes.lowering_context.LoweringContext)."""
    mm = ops[0]
    a, b = mm.operands[0], mm.operands[1]
    da, db = ctx.dims[a], ctx.dims[b]
    target = ctx.target
    out = ops[-1].results[0]
    dt, out_dt = element_dtype(a), element_dtype(out)
    if dt in INTEGERS:
        if element_dtype(b) != dt or out_dt not in ACCUMULATORS:
            raise LoweringError(mm, f"the {target} integer GEMM multiplies i8 by i8 into i32 or i64, not {dt} @ "
                                    f"{element_dtype(b)} -> {out_dt}")
        if len(ops) > 1:
            raise LoweringError(ops[1], f"'{ops[1].operation.name}' cannot run in the {target} integer GEMM's "
                                        f"epilogue yet")
    elif dt not in FLOATS or element_dtype(b) != dt or out_dt not in FLOATS:
        raise LoweringError(mm, f"the {target} SIMT GEMM takes float operands of one dtype or i8 ones, not {dt} @ "
                                f"{element_dtype(b)} -> {out_dt}")
    batched = len(db) > 2
    if batched and len(da) > 2 and len(da) != len(db):   # the frontend has checked equal ranks' extents
        raise LoweringError(mm, f"the {target} GEMM multiplies batches of equal rank or a 2-D lhs by a batch, "
                                f"not {da[:-2]} by {db[:-2]}")
    steps, extras = _epilogue(ops)
    text = source(kname, dt, out_dt, steps, extras)
    ctx.build(text, f"<tessera:{kname}>")
    # A 2-D rhs folds the lhs's batch axes into its rows; a batched one runs its batch as Z.
    Z = graph_shapes.product(db[:-2]) if batched else "1"
    ZA = graph_shapes.product(da[:-2]) if batched else "1"
    M = da[-2] if batched else graph_shapes.product(da[:-1])
    args = [plan.TensorArg(ctx.record(a), ("ZA", "M", "K")), plan.TensorArg(ctx.record(b), ("Z", "K", "N")),
            plan.TensorArg(ctx.record(out), ("Z", "M", "N"))]
    for role, v in extras:
        if role == "alpha":
            args.append(plan.F32Arg(v))
        else:
            args.append(plan.TensorArg(ctx.record(v), ("N",) if role == "bias" else ("Z", "M", "N")))
    return [plan.ArgsStep(kname, source=text, env={"Z": Z, "ZA": ZA, "M": M, "K": da[-1], "N": db[-1]},
                          args=tuple(args), block=BLOCK,
                          grid=kernelgen.split_grid(f"ceil(N/{BLOCK[0]})*ceil(M/{BLOCK[1]})*Z", 3))]
