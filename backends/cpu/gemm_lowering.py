"""GEMM fusion groups of Graph IR functions as CPU GEMM kernels (gemm.py) and their launch-plan steps.

A group is a matmul and its epilogue (bias along the last axis, one activation, a scale by a constant or by
a 0-d tensor, a residual add, a subtraction from a tensor, a product with gelu'(Z)), in the order the program applies them. The lhs may carry batch axes that the rhs does not
(`X[B, T, D] @ W[D, F]`): they fold into the GEMM's rows; operands with equal batch axes run one GEMM
per batch entry (the plan step's `batch`). An operand the matmul reads transposed (`tessera.transpose_a/_b`,
passes/fold_transposes.py) is passed as stored, and the kernel packs it from that layout. The blocking is what the schedule phase recorded
(`tsched.schedule`: the cost model's choice for the static extents, or the function's hints).
"""

from __future__ import annotations

import dataclasses

from ... import plan
from ...diagnostics import LoweringError
from ...dialects.ttensor import as_read, matmul_transposes
from ...passes import fusion, graph_shapes, schedule_ir
from ...passes import kernelgen
from ...passes.kernelgen import element_dtype
from ..gemm_epilogue import epilogue as _epilogue
from . import gemm, gemm_bf16, gemm_i8
from .gemm_schedule import K_UNROLL, CostModel, Schedule, vector_isa
from .target import HostTarget, cache_sizes, host

# Nominal extent for symbolic dimensions when choosing cache blocks: a mid-size problem.
_NOMINAL = 1024


def _without_derivatives(ops: list) -> list:
    """The group's ops less those computing a gelu'(Z) that a product with the accumulator reads (fusion
    joined them): the epilogue step computes it from Z."""
    inner = set()
    for op in ops:
        if op.operation.name == "ttensor.binary":
            for o in op.operands:
                found = fusion.gelu_derivative(o)
                inner |= {m.results[0] for m in found[2]} if found else set()
    return [op for op in ops if op.results[0] not in inner]


def lower(ctx, kname: str, ops: list, model: CostModel | None = None,
          int8_path: str = "auto", bf16_path: str = "auto") -> list[plan.ArgsStep]:
    """The plan steps of one GEMM group; its kernels are added to the module (`ctx`: a
    passes.lowering_context.LoweringContext). `model`, the target's cost model, gives a GEMM whose M or N is
    known only at run time other blockings to choose from at launch (_launch_alternatives). An int8 matmul
    runs on gemm_i8.py's kernel, on `int8_path` ("auto": the fastest the CPU has); a bf16 one without
    epilogue or transposed operand on gemm_bf16.py's, on `bf16_path` (plain: this f32 GEMM, widening)."""
    if element_dtype(ops[0].operands[0]) == "i8":
        return _lower_i8(ctx, kname, ops, model, int8_path)
    ops = _without_derivatives(ops)
    mm = ops[0]
    a, b = mm.operands[0], mm.operands[1]
    trans_a, trans_b = matmul_transposes(mm)
    da, db = (as_read(ctx.dims[v], t) for v, t in ((a, trans_a), (b, trans_b)))  # as the product reads them
    batched = len(db) > 2
    if trans_a and len(da) > 2 and not batched:   # fold_transposes leaves these unfolded
        raise LoweringError(mm, "a transposed lhs cannot take batch axes the rhs lacks into the GEMM's rows")
    if batched and len(da) != len(db):
        raise LoweringError(mm, "the CPU backend multiplies batches of equal rank only (yet), not "
                                f"{da[:-2]} by {db[:-2]}")  # equal extents are checked at the launch
    out = ops[-1].results[0]
    out_dtype = element_dtype(out)
    if element_dtype(a) not in gemm.INPUT_DTYPES or out_dtype not in ("f32", "bf16", "f16"):
        raise LoweringError(mm, f"CPU GEMMs take {'/'.join(gemm.INPUT_DTYPES)} inputs and give f32, bf16 or "
                                f"f16 results, not {element_dtype(a)} -> {out_dtype}")
    steps, extras = _epilogue(ops)
    # A batched rhs runs one GEMM per batch entry; a 2-D rhs takes the lhs' batch axes as more rows.
    M = da[-2] if batched else graph_shapes.product(da[:-1])
    K, N = da[-1], db[-1]
    lead = ["BATCH"] if batched else []
    bf16 = _bf16_spec(kname, ops, (M, N, K), model, bf16_path) if element_dtype(a) == "bf16" else None
    b_dtype = element_dtype(b) if element_dtype(b) != element_dtype(a) else ""   # fp8 formats may mix
    try:
        spec = gemm.GemmSpec(kname, dtype=element_dtype(a), b_dtype=b_dtype, epilogue=tuple(steps),
                             schedule=_schedule(mm), trans_a=trans_a, trans_b=trans_b)
    except ValueError as e:
        raise LoweringError(mm, str(e)) from None
    with mm.location:
        if bf16 is None:
            gemm.build_gemm(ctx.module, spec)
        else:
            gemm_bf16.build(ctx.module, bf16)
    # The GEMM accumulates and stores f32; a narrower result is rounded by a second, elementwise kernel.
    result = ctx.record(out)
    c = result if out_dtype == "f32" else ctx.temporary(result, "f32")
    a_dims, b_dims = gemm.operand_dims(spec)
    args = [plan.TensorArg(ctx.record(a), (*lead, *a_dims)), plan.TensorArg(ctx.record(b), (*lead, *b_dims)),
            plan.TensorArg(c, (*lead, "M", "N"))]
    steps = []

    def convert(src: str, dst: str, src_dtype: str, dst_dtype: str, rows: str) -> None:
        cname = f"{kname}_{src_dtype}_to_{dst_dtype}_{len(steps)}"
        ctx.build(kernelgen.convert(cname, src_dtype, dst_dtype), f"<tessera:{cname}>")
        steps.append(plan.ArgsStep(cname, env={"M": M, "N": N, "ROWS": rows}, block=(128, 1, 1),
                                   args=(plan.TensorArg(src, ("ROWS", "N")), plan.TensorArg(dst, ("ROWS", "N"))),
                                   grid=("ceil(N/128)", "ROWS", "1")))

    for role, v in extras:  # in the kernel's parameter order: the epilogue's steps, in order
        if role == "alpha":
            args.append(plan.F32Arg(v))
            continue
        if role == "factor":   # 0-d f32 (fusion checks) as [1], one value for every batch entry
            args.append(plan.TensorArg(ctx.record(v), ("ONE",)))
            continue
        vid, rows = ctx.record(v), ("1" if role == "bias" else graph_shapes.product(da[:-1]))
        if element_dtype(v) != "f32":  # epilogue operands enter the f32 accumulator's arithmetic as f32
            wide = ctx.temporary(vid, "f32")
            convert(vid, wide, element_dtype(v), "f32", rows)
            vid = wide
        args.append(plan.TensorArg(vid, ("N",) if role == "bias" else (*lead, "M", "N")))
    s = spec.schedule
    env = {"M": M, "K": K, "N": N, **({"BATCH": graph_shapes.product(da[:-2])} if batched else {}),
           **({"ONE": "1"} if any(role == "factor" for role, _ in extras) else {})}
    prefer = (_launch_alternatives(ctx, mm, spec, (M, N, K), model)
              if model is not None and not batched and bf16 is None else ())
    grid = _grid(s) if bf16 is None else gemm_bf16.grid(bf16)
    steps.append(plan.ArgsStep(kname, env=env, args=tuple(args), block=(1, 1, 1), grid=grid,
                               batch="BATCH" if batched else None, prefer=prefer))
    if out_dtype != "f32":
        convert(c, result, "f32", out_dtype, graph_shapes.product(da[:-1]))
    return steps


def _bf16_spec(kname: str, ops: list, extents: tuple, model: CostModel | None,
               path: str) -> gemm_bf16.Bf16GemmSpec | None:
    """The gemm_bf16 kernel of a bf16 × bf16 group on `path`, or None where the f32 GEMM runs it (the plain
    path; an epilogue or a transposed operand, which gemm.py's kernel takes). An unknown path or one this CPU
    lacks is refused at the matmul, whatever the group."""
    mm = ops[0]
    t = host()   # the build machine, as the float GEMM's register tile
    try:
        chosen = gemm_bf16.choose_path(t, path)
    except ValueError as e:
        raise LoweringError(mm, str(e)) from None
    if (chosen == "plain" or element_dtype(mm.operands[1]) != "bf16" or any(matmul_transposes(mm))
            or any(op.operation.name != "ttensor.cast" for op in ops[1:])):
        return None
    l2 = dict(model.caches)[2] if model is not None else cache_sizes()[2]
    # the int8 kernel's blocks, its B panel's budget counted in two-byte elements
    mb, nb = gemm_i8.choose_blocks(*(int(e) if e.isdigit() else None for e in extents), l2 // 2)
    return gemm_bf16.Bf16GemmSpec(kname, chosen, mb, nb, panel=l2 // 4,
                                  threads=model.threads if model is not None else 1)


def _lower_i8(ctx, kname: str, ops: list, model: CostModel | None, path: str) -> list[plan.ArgsStep]:
    """An i8 × i8 -> i32 matmul (the frontend's result type; the interpreter's exact sum wrapped to i32),
    batched as the float GEMM is: a 2-D rhs takes the lhs' batch axes as rows, equal batches one GEMM each."""
    mm = ops[0]
    if len(ops) > 1:
        raise LoweringError(ops[1], f"'{ops[1].operation.name}' cannot run in a CPU int8 GEMM's epilogue yet")
    a, b = mm.operands[0], mm.operands[1]
    if any(matmul_transposes(mm)):
        raise LoweringError(mm, "the CPU int8 GEMM reads its operands as stored, not transposed")
    if element_dtype(b) != "i8" or element_dtype(mm.results[0]) != "i32":
        raise LoweringError(mm, f"the CPU int8 GEMM multiplies i8 by i8 into i32, not {element_dtype(a)} x "
                                f"{element_dtype(b)} -> {element_dtype(mm.results[0])}")
    da, db = ctx.dims[a], ctx.dims[b]
    batched = len(db) > 2
    if batched and len(da) != len(db):
        raise LoweringError(mm, "the CPU backend multiplies batches of equal rank only (yet), not "
                                f"{da[:-2]} by {db[:-2]}")
    M = da[-2] if batched else graph_shapes.product(da[:-1])
    K, N = da[-1], db[-1]
    t = host()   # the build machine, as the float GEMM's register tile
    try:
        chosen = gemm_i8.choose_path(t, path)
    except ValueError as e:
        raise LoweringError(mm, str(e)) from None
    fallback = "vnni" if "vnni" in gemm_i8.available_paths(t) else "plain"
    l2 = dict(model.caches)[2] if model is not None else cache_sizes()[2]
    mb, nb = gemm_i8.choose_blocks(*(int(e) if e.isdigit() else None for e in (M, N, K)), l2)
    spec = gemm_i8.I8GemmSpec(kname, chosen, mb, nb, fallback, panel=l2 // 2,
                              threads=model.threads if model is not None else 1)
    with mm.location:
        gemm_i8.build(ctx.module, spec)
    lead = ["BATCH"] if batched else []
    args = (plan.TensorArg(ctx.record(a), (*lead, "M", "K")), plan.TensorArg(ctx.record(b), (*lead, "K", "N")),
            plan.TensorArg(ctx.record(mm.results[0]), (*lead, "M", "N")))
    env = {"M": M, "K": K, "N": N, **({"BATCH": graph_shapes.product(da[:-2])} if batched else {})}
    return [plan.ArgsStep(kname, env=env, args=args, block=(1, 1, 1), grid=gemm_i8.grid(spec),
                          batch="BATCH" if batched else None)]


def _grid(s: Schedule) -> tuple[str, str, str]:
    return (f"ceil(N/{s.nc})", f"ceil(M/{s.mb})", "1")


# Nominal extent standing in for a symbolic M or N in the blocking a launch may prefer: half of _NOMINAL.
# (256 gave 266×128 blocks here, 8 of them at 512×512×2048: 10–13 ms against 8.8–9.6 ms for 512's 518×256,
# the fixed-size choice at those extents; 2 cores, load 2.4–2.6.)
_SMALL = 512


def _launch_alternatives(ctx, mm, spec, extents: tuple, model: CostModel) -> tuple[plan.Alternative, ...]:
    """Where M or N is known only at run time (the schedule phase's `at_launch`), the blocking chosen for a
    nominal 1024-sized problem can be one block at small extents (MB=518 rows, NC=512 columns: a 512×512
    product ran on one thread). A second kernel, blocked as the cost model chooses for 512 in place of the
    symbolic extents, is preferred at launch wherever it keeps more threads busy (blocks, up to
    DEVICE_UNITS) than the default. One alternative, not a ladder of them: each is a whole GEMM kernel to
    compile (~1.5 s here)."""
    if schedule_ir.schedule_of(mm).get("at_launch") != 1 or model.threads < 2:
        return ()
    m, n, k = (int(e) if e.isdigit() else None for e in extents)
    s = fitted_schedule(matmul_schedule(model, m or _SMALL, n or _SMALL, k), model.target)
    if (s.mb, s.nc) == (spec.schedule.mb, spec.schedule.nc):
        return ()
    name = f"{spec.name}_{s.mb}x{s.nc}"
    with mm.location:
        gemm.build_gemm(ctx.module, dataclasses.replace(spec, name=name, schedule=s))

    def busy(s: Schedule) -> str:
        return f"min(DEVICE_UNITS, ceil(N/{s.nc})*ceil(M/{s.mb}))"
    return (plan.Alternative(when=f"{busy(s)} - {busy(spec.schedule)}", kernel=name, grid=_grid(s),
                             block=(1, 1, 1)),)


def matmul_schedule(model: CostModel, m: int | None, n: int | None, k: int | None) -> dict:
    """The cost model's blocking for an m×n×k product (None: known only at run time; a mid-size problem
    stands in) — what the schedule phase records on each matmul."""
    s = model.choose(m or _NOMINAL, n or _NOMINAL, k or _NOMINAL)
    return {"MB": s.mb, "NC": s.nc, "MC": s.mc, "KC": s.kc, "MR": s.mr, "NR": s.nr, "stages": s.stages}


def fitted_schedule(d: dict, target: HostTarget) -> Schedule:
    """A schedule phase's decision (the cost model's blocking, overridden by the function's hints or a tile
    program's) as a GEMM schedule `target`'s register tile can run: blocks rounded to whole micro-tiles.
    `d` holds matmul_schedule's blocks, as the schedule phase records them on every matmul."""
    missing = [key for key in ("MB", "NC", "MC", "KC") if key not in d]
    if missing:
        raise ValueError(f"the schedule names no {', '.join(missing)}")
    tile = vector_isa(target)

    def fit(v, step):
        return max(step, v // step * step)
    mc = fit(d["MC"], tile.mr)
    return Schedule(mb=max(fit(d["MB"], tile.mr), mc), nc=fit(d["NC"], tile.nr), mc=mc, kc=max(K_UNROLL, d["KC"]),
                    mr=tile.mr, nr=tile.nr, vector_width=tile.vector_width, fma=tile.fma, k_unroll=K_UNROLL,
                    stages=max(1, d.get("stages", 1)))


def staging_buffers(model: CostModel, d: dict) -> dict:
    """The tile-local buffers a GEMM of schedule `d` stages its operands in, for the memory phase: name ->
    (shape in f32 elements, copies). The packed A block is refilled per MC rows and used at once: one copy;
    the packed B panel has `stages` copies in rotation (gemm.py: the next chunk's is packed during this one's
    micro-kernels)."""
    s = fitted_schedule(d, model.target)
    return {"a_block": ([s.mc, s.kc], 1), "b_panel": ([s.kc, s.nc], s.stages)}


def _schedule(op) -> Schedule:
    """The GEMM schedule of a matmul: the schedule phase's blocking, with the staging buffers the memory
    phase planned (`tmem.stage`: their shapes and copies are what the kernel allocates)."""
    try:
        # the register tile of the machine we run on, as the cost model's (CPUBackend.target_facts)
        s = fitted_schedule(schedule_ir.schedule_of(op), host())
    except ValueError as e:
        raise LoweringError(op, f"the matmul's schedule (tsched.schedule) cannot be run: {e}") from None
    planned = schedule_ir.staging_of(op)
    if planned is None:
        return s
    (mc, kc), _ = planned["a_block"]
    (_, nc), copies = planned["b_panel"]
    try:
        return dataclasses.replace(s, mc=mc, kc=kc, nc=nc, mb=max(s.mb, mc), stages=copies)
    except ValueError as e:
        raise LoweringError(op, f"the planned staging buffers (tmem.stage) cannot be run: {e}") from None
