"""GEMM fusion groups of Graph IR functions as a SIMT kernel any GPU target compiles: generated as Tessera
source, one work-item per element of C, its K loop scalar FMAs (the SPIR-V driver vectorizes the
work-items). It is the SPIR-V backend's GEMM, the AMDGPU backend's, ptx's for integer operands before
sm_90a and the CPU's for tf32 ones (`taking`), ptx's tensor-core GEMMs' for rows not a multiple of 16 bytes
(`planar`), and the strict numerics profile's everywhere (`strict`). It uses no matrix unit: on AMDGPU and on
SPIR-V `--arch xe-hpc` bf16/f16 GEMMs run on backends/matrix_gemm.py's kernel instead, which falls back to
this one for the others.

A group is a matmul and its epilogue (bias along the last axis, one activation, a scale by a constant, a
residual add: the CPU's groups, backends/cpu/gemm_lowering.py), applied in the program's order in the
accumulator's type before one rounding to the result's dtype. Batches: a 2-D rhs takes the lhs's batch axes
as more rows; a batched rhs runs the batch as more work-groups, an lhs of the same batch axes read per entry and a 2-D
lhs broadcast to every entry (its batch count 1: the kernel reads entry min(z, count − 1)). Float operands
of any dtype are widened to f32 as they are loaded (f64 stays f64; tf32 operands, f32 words, are multiplied
as f32: the quantize phase records "tf32 computed in f32"; fp8 operands, e4m3 and e5m2, each its own format,
are one-byte tensors of the kernel language, whose loads widen them exactly), so accumulation is f32 for every input
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
from .gemm_epilogue import epilogue as _epilogue

BLOCK = (32, 4, 1)
FLOATS = ("f32", "f64", "f16", "bf16", "tf32", "fp8_e4m3", "fp8_e5m2")
FP8 = ("fp8_e4m3", "fp8_e5m2")   # the two may mix: A's format and B's
INTEGERS = ("i8",)             # operand types of the integer GEMM (TargetFacts.integer_matmul)
ACCUMULATORS = ("i32", "i64")  # its result types


def _load(expr: str, dtype: str, acc: str) -> str:
    return expr if dtype == acc else f"{acc}({expr})"


def source(name: str, dtype: str, out_dtype: str, steps: list, extras: list, batched: bool = True,
           trans: tuple = (False, False), b_dtype: str = "") -> str:
    """The kernel's source: C[Z, M, N] = epilogue(A[Z', M, K] @ B[Z, K, N]), entry z of A min(z, Z' − 1).
    Not `batched`: C[M, N] = epilogue(A[M, K] @ B[K, N]), the form of the ptx GEMMs' plan steps (their batch
    runs one launch an entry), A stored [K, M] where `trans`[0], B [N, K] where `trans`[1] (sm_90a's
    tessera.transpose_a/_b). `b_dtype`: B's, where it differs (fp8 formats)."""
    # f32 words holding tf32 values are multiplied as f32
    dtype, b_dtype = ("f32" if d == "tf32" else d for d in (dtype, b_dtype or dtype))
    acc_dt = out_dtype if out_dtype in ACCUMULATORS else kernelgen.compute_dtype(dtype)
    za, z = ('"ZA", ', '"Z", ') if batched else ("", "")
    ia, iz = ("za, ", "z, ") if batched else ("", "")
    a_dims, a_at = ('"K", "M"', "k, r") if trans[0] else ('"M", "K"', "r, k")
    b_dims, b_at = ('"N", "K"', "c, k") if trans[1] else ('"K", "N"', "k, c")
    params = [f"A: tensor[{dtype}, {za}{a_dims}]", f"B: tensor[{b_dtype}, {z}{b_dims}]",
              f'C: tensor[{out_dtype}, {z}"M", "N"]']
    more, body = epilogue(steps, extras, acc_dt, z, iz)
    params += more
    m, n_ = ("C.shape[1]", "C.shape[2]") if batched else ("C.shape[0]", "C.shape[1]")
    k = f"A.shape[{1 if batched else 0}]" if trans[0] else f"A.shape[{2 if batched else 1}]"
    # this work-group's column block, row block and batch entry from its number (the plan's `grid`)
    ids = [f"    g = {kernelgen.folded_block(0, 1, 2)}",
           f"    nc = ({n_} + {BLOCK[0] - 1}) // {BLOCK[0]}",
           "    gz = g // nc",
           f"    c = (g - gz * nc) * {BLOCK[0]} + launch.local_id(0)"]
    if batched:
        ids += [f"    nr = ({m} + {BLOCK[1] - 1}) // {BLOCK[1]}",
                "    z = gz // nr",
                f"    r = (gz - z * nr) * {BLOCK[1]} + launch.local_id(1)",
                f"    if c < {n_} and r < {m} and z < C.shape[0]:",
                "        za = min(z, A.shape[0] - 1)"]
    else:   # row blocks past the last return at the guard
        ids += [f"    r = gz * {BLOCK[1]} + launch.local_id(1)",
                f"    if c < {n_} and r < {m}:"]
    return "\n".join([
        "import math", "", "",
        "@kernel",
        f"def {name}({', '.join(params)}):",
        *ids,
        f"        acc = {acc_dt}(0)",
        f"        for k in range({k}):",
        f"            acc += {_load(f'A[{ia}{a_at}]', dtype, acc_dt)} * {_load(f'B[{iz}{b_at}]', b_dtype, acc_dt)}",
        *body,
        f"        C[{iz}r, c] = {_load('acc', acc_dt, out_dtype)}", ""])


def epilogue(steps: list, extras: list, acc_dt: str, z: str, iz: str, indent: int = 8) -> tuple[list, list]:
    """The epilogue's kernel parameters and source lines (`acc` of C's element r, c, batch entry `iz`, in
    `acc_dt`), in the program's order: bias along N, a scale by a constant, a residual add, activations."""
    pad = " " * indent
    params, body = [], []
    extra = iter(extras)
    for n, step in enumerate(steps):
        kind = step[0]
        if kind == "bias":
            _, v = next(extra)
            params.append(f'bias{n}: tensor[{element_dtype(v)}, "N"]')
            body.append(f"{pad}acc = acc + {_load(f'bias{n}[c]', element_dtype(v), acc_dt)}")
        elif kind == "scale":
            next(extra)
            params.append(f"alpha{n}: f32")
            body.append(f"{pad}acc = acc * {_load(f'alpha{n}', 'f32', acc_dt)}")
        elif kind == "add":
            _, v = next(extra)
            params.append(f'residual{n}: tensor[{element_dtype(v)}, {z}"M", "N"]')
            body.append(f"{pad}acc = acc + {_load(f'residual{n}[{iz}r, c]', element_dtype(v), acc_dt)}")
        else:
            body.append(f"{pad}acc = {kernelgen.UNARY[kind].format(x='acc')}")
    return params, body


def _same_kind(a: str, b: str) -> bool:
    """Operand dtypes this kernel multiplies together: one dtype, or two fp8 formats."""
    return a == b or a in FP8 and b in FP8


def takes(ops: list) -> bool:
    """Whether this kernel computes the group (float operands of one dtype; bias, scale, residual and the
    kernels' activations in its epilogue): a target's GEMM kernel may fall back to it (ptx's `planar`)."""
    mm = ops[0]
    dt = element_dtype(mm.operands[0])
    return dt in FLOATS and _same_kind(dt, element_dtype(mm.operands[1])) and \
        element_dtype(ops[-1].results[0]) in FLOATS \
        and all(s[0] in ("bias", "scale", "add") or s[0] in kernelgen.UNARY for s in _epilogue(ops)[0])


def planar(ctx, kname: str, ops: list, trans: tuple = (False, False)) -> dict:
    """Builds the group's kernel in its non-batched form (`source`) for a plan step of another GEMM kernel's
    arguments (A, B, C, then the epilogue's, over the step's M, K and N); returns how that step launches it
    (kernel, block, grid). Only where `takes(ops)`."""
    steps, extras = _epilogue(ops)
    text = source(kname, element_dtype(ops[0].operands[0]), element_dtype(ops[-1].results[0]), steps, extras,
                  batched=False, trans=trans, b_dtype=element_dtype(ops[0].operands[1]))
    ctx.build(text, f"<tessera:{kname}>")
    return {"kernel": kname, "block": BLOCK,
            "grid": kernelgen.split_grid(f"ceil(N/{BLOCK[0]})*ceil(M/{BLOCK[1]})", 3)}


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
    elif dt not in FLOATS or not _same_kind(dt, element_dtype(b)) or out_dt not in FLOATS:
        raise LoweringError(mm, f"the {target} SIMT GEMM takes float operands of one dtype (or two fp8 formats) "
                                f"or i8 ones, not {dt} @ {element_dtype(b)} -> {out_dt}")
    batched = len(db) > 2
    if batched and len(da) > 2 and len(da) != len(db):   # the frontend has checked equal ranks' extents
        raise LoweringError(mm, f"the {target} GEMM multiplies batches of equal rank or a 2-D lhs by a batch, "
                                f"not {da[:-2]} by {db[:-2]}")
    steps, extras = _epilogue(ops)
    text = source(kname, dt, out_dt, steps, extras, b_dtype=element_dtype(b))
    ctx.build(text, f"<tessera:{kname}>")
    return [gemm_step(ctx, kname, text, ops, extras, BLOCK, BLOCK[0], BLOCK[1])]


def gemm_step(ctx, kname: str, text: str, ops: list, extras: list, block: tuple, bn: int, bm: int) -> plan.ArgsStep:
    """The plan step launching a GEMM group's kernel `text` over blocks of bm x bn results (this module's
    kernel and backends/matrix_gemm.py's take the same arguments)."""
    mm = ops[0]
    a, b, out = mm.operands[0], mm.operands[1], ops[-1].results[0]
    da, db = ctx.dims[a], ctx.dims[b]
    batched = len(db) > 2
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
    return plan.ArgsStep(kname, source=text, env={"Z": Z, "ZA": ZA, "M": M, "K": da[-1], "N": db[-1]},
                         args=tuple(args), block=block,
                         grid=kernelgen.split_grid(f"ceil(N/{bn})*ceil(M/{bm})*Z", 3))
