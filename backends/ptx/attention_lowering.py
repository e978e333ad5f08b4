"""Attention groups of Graph IR functions as the flash-attention kernels and their launch-plan steps:
``ttensor.flash_attention`` (with the ``attention_lse`` of the same Q, K when autodiff asked for it) as the
forward kernel (attention_sm90.py on sm_90a; attention_sm80.py, mma.sync, on sm_80 … sm_90, whose backward
is decomposed, so that no attention_lse reaches it), and on sm_90a an "attention_bwd" group (the ``attention_grad`` ops of one
attention) as the backward kernels (attention_bwd_sm90.py). The batch axes fold into one (BH); queries, keys
and values keep their own lengths (SQ, SK); the head dimension is static. A forward with `tessera.seq_heads`
(passes/fold_transposes.attention) takes [..., S, H, D] tensors, its leading axes folded into B."""

from __future__ import annotations

from ... import plan
from ...diagnostics import LoweringError
from ...dialects.ttensor import SEQ_HEADS
from ...mlir import ir
from ...passes import graph_shapes, schedule_ir
from ...passes.kernelgen import element_dtype
from . import attention_bwd_sm90, attention_fp8_sm90, attention_sm80, attention_sm90, generated


def _attrs(op) -> tuple[bool, float]:
    causal = ir.BoolAttr(op.attributes["causal"]).value if "causal" in op.attributes else False
    return causal, ir.FloatAttr(op.attributes["scale"]).value


def _batch(shape: list, seq_heads: bool) -> list:
    """The batch axes of an attention operand's extents (the heads among them where `seq_heads`)."""
    return shape[:-3] + shape[-2:-1] if seq_heads else shape[:-2]


def _check(op, what: str, dims: dict, q, k, v, others=()) -> tuple[str, int]:
    """(dtype, head dimension) of Q, K, V (and the tensors `others`, in their dtype and Q's shape), or a
    located refusal. Architectures without the kernels decompose attention and its backward
    (TargetFacts.decompose_attention, fused_attention_backward; passes/decompose.py)."""
    dq, dk, dv = dims[q], dims[k], dims[v]
    dt = element_dtype(q)
    if {element_dtype(x) for x in (k, v, *others)} != {dt}:
        raise LoweringError(op, f"the ptx {what} takes Q, K, V and {'the result' if len(others) == 1 else 'dO'} in "
                                f"one dtype, not {dt}, {element_dtype(k)}, {element_dtype(v)}, "
                                f"{', '.join(element_dtype(x) for x in others)}")
    d = dq[-1]
    if not (isinstance(d, int) or str(d).isdigit()) or dk[-1] != d or dv[-1] != d:
        raise LoweringError(op, f"the ptx {what} needs one static head dimension for Q, K and V, "
                                f"not {dq[-1]}, {dk[-1]}, {dv[-1]}")
    sh = SEQ_HEADS in op.attributes
    bq, bk, bv = (_batch(x, sh) for x in (dq, dk, dv))
    if bq != bk or bk != bv:
        raise LoweringError(op, f"the ptx {what} takes Q, K and V with the same batch axes "
                                f"({bq}, {bk}, {bv}); broadcast them first")
    return dt, int(d)


def _forward(ctx, op, what: str, make) -> tuple:
    """A forward attention op's (Q, K, V, result, dtype, head dimension, causal, kernel spec): the spec from
    `make(dtype, D, causal, scale)`, its refusals located at the op."""
    q, k, v = op.operands
    out = op.results[0]
    dt, D = _check(op, what, ctx.dims, q, k, v, (out,))
    causal, scale = _attrs(op)
    try:
        return q, k, v, out, dt, D, causal, make(dt, D, causal, scale)
    except ValueError as e:
        raise LoweringError(op, str(e)) from None


def lower(arch: str, ctx, kname: str, ops: list) -> list[plan.ArgsStep]:
    """The plan step of a flash_attention for `arch`, with (sm_90a) an attention_lse of the same Q, K, causal
    and scale in its group written by the same kernel; the kernel is declared in the module (`ctx`: a
    passes.lowering_context.LoweringContext)."""
    attn = [op for op in ops if op.operation.name == "ttensor.flash_attention"]
    lse = [op for op in ops if op.operation.name == "ttensor.attention_lse"]
    if not attn:   # autodiff's rule emits the lse beside the forward, whose O delta needs: not seen alone
        raise LoweringError(lse[0], "the ptx target computes attention_lse only with the flash_attention of "
                                    "the same Q and K (its kernel writes both)")
    (op,) = attn
    if arch != "sm_90a":
        return _lower_sm80(arch, ctx, kname, op)
    dims = ctx.dims
    sh = SEQ_HEADS in op.attributes
    # the schedule phase's keys per block and stages (hints or a stored autotuning result), else TUNED's
    blocking = schedule_ir.schedule_of(op)
    q, k, v, out, dt, D, causal, spec = _forward(ctx, op, "flash attention", lambda dt, D, causal, scale:
                                                 attention_sm90.Sm90AttentionSpec(kname, head_dim=D, causal=causal,
                                                                                  scale=scale, dtype=dt,
                                                                                  lse=bool(lse), seq_heads=sh,
                                                                                  block_n=blocking.get("NC", 0),
                                                                                  stages=blocking.get("stages", 0)))
    layout, rows, env = _layout(op, dims, D)
    params = [(n, dt, tuple(int(x) if x.isdigit() else x for x in layout(s)))
              for n, s in (("Q", "SQ"), ("K", "SK"), ("V", "SK"), ("O", "SQ"))] + \
        ([("LSE", "f32", rows)] if lse else [])
    with op.location:
        generated.declare(ctx.module, kname, params, attention_sm90.generate(spec), [3, 4] if lse else [3], {
            "ptx.tensor_maps": spec.tensor_maps, "tile.M": str(spec.bm), "tile.N": str(spec.block_n),
            "tile.K": str(D), "pipeline.stages": str(spec.stages), "attention.causal": str(causal).lower(),
            **({"attention.persistent": "true"} if spec.looping else {})})
    args = tuple(plan.TensorArg(ctx.record(x), layout(s)) for x, s in ((q, "SQ"), (k, "SK"), (v, "SK"),
                                                                        (out, "SQ")))
    args += tuple(plan.TensorArg(ctx.record(x.results[0]), rows) for x in lse[:1])
    return [plan.ArgsStep(kname, env=env, args=args, block=(spec.threads, 1, 1), smem=spec.smem_bytes,
                          grid=_grid(spec, sh))]


def _grid(spec, sh: bool) -> tuple:
    """The sm_90a forward's grid: a CTA a query tile of a (batch, head), or where its CTAs loop over tiles
    (spec.looping) one a tile up to attention_sm90.SMS."""
    if spec.looping:
        return (f"min(ceil(SQ/{spec.bm})*{'H*B' if sh else 'BH'}, {attention_sm90.SMS})", "1", "1")
    return (f"ceil(SQ/{spec.bm})",) + (("H", "B") if sh else ("BH", "1"))


def _layout(op, dims: dict, D) -> tuple:
    """A forward's (tensor shape by its sequence symbol, LSE's shape, env): [B, S, H, D] with `tessera.seq_heads`
    (the heads inside the sequence), else [BH, S, D]."""
    dq, dk = dims[op.operands[0]], dims[op.operands[1]]
    if SEQ_HEADS in op.attributes:
        return (lambda s: ("B", s, "H", str(D))), ("B", "H", "SQ"), \
            {"B": graph_shapes.product(dq[:-3]), "SQ": dq[-3], "H": dq[-2], "SK": dk[-3]}
    return (lambda s: ("BH", s, str(D))), ("BH", "SQ"), \
        {"BH": graph_shapes.product(dq[:-2]), "SQ": dq[-2], "SK": dk[-2]}


def _lower_sm80(arch: str, ctx, kname: str, op) -> list[plan.ArgsStep]:
    """The plan step of a flash_attention as attention_sm80.py's kernel (no attention_lse: before sm_90a the
    backward is decomposed, passes/decompose.attention_backward, and recomputes the probabilities)."""
    q, k, v, out, dt, D, causal, spec = _forward(ctx, op, "flash attention", lambda dt, D, causal, scale:
                                                 attention_sm80.Sm80AttentionSpec(kname, head_dim=D, causal=causal,
                                                                                  scale=scale, dtype=dt, arch=arch,
                                                                                  seq_heads=SEQ_HEADS in op.attributes))
    layout, _, env = _layout(op, ctx.dims, D)
    params = [(n, dt, tuple(int(x) if x.isdigit() else x for x in layout(s)))
              for n, s in (("Q", "SQ"), ("K", "SK"), ("V", "SK"), ("O", "SQ"))]
    with op.location:
        generated.declare(ctx.module, kname, params, attention_sm80.generate(spec), [3], {
            "tile.M": str(spec.block_m), "tile.N": str(spec.block_n), "tile.K": str(D), "pipeline.stages": "2",
            "attention.causal": str(causal).lower()})
    args = tuple(plan.TensorArg(ctx.record(x), layout(s)) for x, s in ((q, "SQ"), (k, "SK"), (v, "SK"), (out, "SQ")))
    return [plan.ArgsStep(kname, env=env, args=args, block=(spec.threads, 1, 1), smem=spec.smem_bytes,
                          grid=(f"ceil(SQ/{spec.block_m})", "B*H" if spec.seq_heads else "BH", "1"))]


def lower_fp8(ctx, kname: str, ops: list) -> list[plan.ArgsStep]:
    """The plan steps of a flash_attention_fp8 (bf16, head dimension 128: the others were decomposed,
    passes/decompose.attention_fp8), four kernels of attention_fp8_sm90.py: partial amaxes of Q, K, V
    (kname + "_amax"), Q and K quantized to e4m3 with their scales (kname + "_quant"), V quantized into its
    permuted transpose (kname + "_vt"), then the attention. The e4m3 tensors, the partials and the three
    descales are plan intermediates. The form with descales (e4m3 Q, K, V, one byte an element, and f32 sq,
    sk, sv) takes two: `_lower_fp8_bytes`."""
    (op,) = ops
    if len(op.operands) == 6:
        return _lower_fp8_bytes(ctx, kname, op)
    dims = ctx.dims
    q, k, v, out, dt, D, causal, spec = _forward(ctx, op, "fp8 flash attention", lambda dt, D, causal, scale:
                                                 attention_fp8_sm90.Sm90AttentionFp8Spec(kname, head_dim=D,
                                                                                         causal=causal, scale=scale))
    if dt != spec.out_dtype:
        raise LoweringError(op, f"the ptx fp8 flash attention takes and writes {spec.out_dtype}, not {dt}")
    dq, dk = dims[q], dims[k]
    skp = f"ceil(({dk[-2]})/16)*16"
    ids = {"Q": ctx.record(q), "K": ctx.record(k), "V": ctx.record(v), "O": ctx.record(out)}
    ids.update(Q8=ctx.temporary(ids["Q"], "i8"), K8=ctx.temporary(ids["K"], "i8"),
               VT=ctx.temporary(ids["V"], "i8", list(dk[:-2]) + [str(D), skp]),
               P=ctx.temporary(ids["Q"], "f32", [str(3 * attention_fp8_sm90.NB)], "amax"),
               DS=ctx.temporary(ids["Q"], "f32", ["3"], "descales"))
    env = {"BH": graph_shapes.product(dq[:-2]), "SQ": dq[-2], "SK": dk[-2], "SKP": skp,
           "NQ": graph_shapes.product(dq), "NK": graph_shapes.product(dk)}
    shapes = {"P": (str(3 * attention_fp8_sm90.NB),), "DS": ("3",), "VT": ("BH", str(D), "SKP"),
              **{n: ("BH", "SQ", str(D)) for n in ("Q", "O")}, **{n: ("BH", "SK", str(D)) for n in ("K", "V")}}
    dtypes_ = {"Q8": "i8", "K8": "i8", "VT": "i8", "P": "f32", "DS": "f32"}

    def step(name: str, names: tuple, text: str, writes: list, grid: tuple, flat: bool = False, **launch):
        """A step of kernel `name` on the tensors `names` (Q, K, V, Q8, K8 flat where `flat`)."""
        shape = {n: (("NQ",) if n in ("Q", "Q8") else ("NK",)) if flat and n in ("Q", "K", "V", "Q8", "K8")
                 else shapes.get(n, shapes.get(n[0])) for n in names}
        return _fp8_step(ctx, op, name, names, shape, {n: dtypes_.get(n, dt) for n in names}, ids, env, text,
                         writes, grid, **launch)

    nb = str(attention_fp8_sm90.NB)
    return [
        step(f"{kname}_amax", ("Q", "K", "V", "P"), attention_fp8_sm90.generate_amax(f"{kname}_amax"), [3],
             (nb, "3", "1"), flat=True),
        step(f"{kname}_quant", ("Q", "K", "Q8", "K8", "P", "DS"), attention_fp8_sm90.generate_quant(f"{kname}_quant"),
             [2, 3, 5], ("ceil(max(NQ, NK)/4096)", "2", "1"), flat=True),
        step(f"{kname}_vt", ("V", "VT", "P", "DS"), attention_fp8_sm90.generate_vt(f"{kname}_vt", D), [1, 3],
             ("ceil(SKP/64)", str(D // 64), "BH")),
        _fp8_attention_step(step, kname, spec),
    ]


def _lower_fp8_bytes(ctx, kname: str, op) -> list[plan.ArgsStep]:
    """The plan steps of a flash_attention_fp8 with descales: its Q, K, V are the caller's e4m3 bytes
    (passes/fp8_fallback.py keeps them one byte), so no amax and no quantization; V is moved into the kernel's
    permuted transpose Vᵀ, the bytes as they are, and the three descales into DS (kname + "_vt8",
    attention_fp8_sm90.generate_vt8), then the attention kernel reads Q, K as they are."""
    dims = ctx.dims
    q, k, v, *scales = op.operands
    out = op.results[0]
    dt = element_dtype(out)
    if {element_dtype(x) for x in (q, k, v)} != {"fp8_e4m3"} or dt != "bf16":
        raise LoweringError(op, f"the ptx fp8 flash attention with descales takes fp8_e4m3 Q, K, V and writes bf16, "
                                f"not {', '.join(element_dtype(x) for x in (q, k, v, out))}")
    dq, dk, dv = dims[q], dims[k], dims[v]
    d = dq[-1]
    if not str(d).isdigit() or dk[-1] != d or dv[-1] != d:
        raise LoweringError(op, f"the ptx fp8 flash attention needs one static head dimension for Q, K and V, "
                                f"not {dq[-1]}, {dk[-1]}, {dv[-1]}")
    if dq[:-2] != dk[:-2] or dk[:-2] != dv[:-2]:
        raise LoweringError(op, f"the ptx fp8 flash attention takes Q, K and V with the same batch axes "
                                f"({dq[:-2]}, {dk[:-2]}, {dv[:-2]}); broadcast them first")
    D = int(d)
    causal, scale = _attrs(op)
    try:
        spec = attention_fp8_sm90.Sm90AttentionFp8Spec(kname, head_dim=D, causal=causal, scale=scale)
    except ValueError as e:
        raise LoweringError(op, str(e)) from None
    skp = f"ceil(({dk[-2]})/16)*16"
    ids = {"Q8": ctx.record(q), "K8": ctx.record(k), "V8": ctx.record(v), "O": ctx.record(out),
           **{n: ctx.record(x) for n, x in zip(("SCQ", "SCK", "SCV"), scales)}}
    ids.update(VT=ctx.temporary(ids["V8"], "i8", list(dk[:-2]) + [str(D), skp]),
               DS=ctx.temporary(ids["Q8"], "f32", ["3"], "descales"))
    env = {"BH": graph_shapes.product(dq[:-2]), "SQ": dq[-2], "SK": dk[-2], "SKP": skp}
    shapes = {"Q8": ("BH", "SQ", str(D)), "O": ("BH", "SQ", str(D)), "K8": ("BH", "SK", str(D)),
              "V8": ("BH", "SK", str(D)), "VT": ("BH", str(D), "SKP"), "DS": ("3",), "SCQ": (), "SCK": (), "SCV": ()}
    dtypes_ = {"Q8": "fp8_e4m3", "K8": "fp8_e4m3", "V8": "fp8_e4m3", "VT": "i8", "O": "bf16", "DS": "f32",
               "SCQ": "f32", "SCK": "f32", "SCV": "f32"}

    def step(name: str, names: tuple, text: str, writes: list, grid: tuple, **launch):
        return _fp8_step(ctx, op, name, names, shapes, dtypes_, ids, env, text, writes, grid, **launch)

    return [
        step(f"{kname}_vt8", ("V8", "SCQ", "SCK", "SCV", "VT", "DS"),
             attention_fp8_sm90.generate_vt8(f"{kname}_vt8", D), [4, 5], ("ceil(SKP/64)", str(D // 64), "BH")),
        _fp8_attention_step(step, kname, spec),
    ]


def _fp8_step(ctx, op, name: str, names: tuple, shapes: dict, dtypes_: dict, ids: dict, env: dict, text: str,
              writes: list, grid: tuple, block: int = 256, smem: int = 0, props: dict | None = None) -> plan.ArgsStep:
    """A step of the fp8 attention's generated kernel `name` (declared in the module with its PTX `text`) on the
    tensors `names`, each of shapes[n] and dtypes_[n], plan values ids[n]; `env` narrowed to the extents used."""
    params = [(n, dtypes_[n], tuple(int(x) if x.isdigit() else x for x in shapes[n])) for n in names]
    with op.location:
        generated.declare(ctx.module, name, params, text, writes, props or {})
    used = {x for n in names for x in shapes[n]}
    return plan.ArgsStep(name, env={s: e for s, e in env.items() if s in used},
                         args=tuple(plan.TensorArg(ids[n], shapes[n]) for n in names), block=(block, 1, 1),
                         grid=grid, smem=smem)


def _fp8_attention_step(step, kname: str, spec) -> plan.ArgsStep:
    """The e4m3 attention kernel's step (both forms of lower_fp8), made by the form's `step`."""
    return step(kname, ("Q8", "K8", "VT", "O", "DS"), attention_fp8_sm90.generate(spec), [3],
                (f"ceil(SQ/{spec.bm})", "BH", "1"), block=spec.threads, smem=spec.smem_bytes,
                props={"ptx.tensor_maps": spec.tensor_maps, "tile.M": str(spec.bm), "tile.N": str(spec.block_n),
                       "tile.K": str(spec.head_dim), "pipeline.stages": str(spec.stages),
                       "attention.causal": str(spec.causal).lower(), "attention.fp8": "e4m3"})


def lower_bwd(fused_dq: str, ctx, kname: str, ops: list) -> list[plan.ArgsStep]:
    """The plan steps of an "attention_bwd" group: the attention_grad ops of one attention (identical
    operands, causal and scale), one per wanted gradient. dK and dV come from one kernel (or the one of them
    wanted), dQ from another (kname + "_dq") — except when all three are wanted and `fused_dq`
    (PTXOptions.fused_dq) is "always", or "faster" at a head dimension of attention_bwd_sm90.FUSED_DQ_HEAD_DIMS:
    then the dK/dV kernel adds dQ's partial products into an f32 accumulator (a plan intermediate) by bulk
    reductions (kernel "dkdvdq", five S×S×D products instead of seven), which kname + "_dq_zero" zeroes first
    and kname + "_dq_cast" rounds to dQ after; the reductions' order varies from run to run, so dQ's bits may.
    Where the group holds delta's ops too (TargetFacts.attention_delta: passes/autodiff_attention.join_delta),
    kname + "_pre" computes delta from dO and O first, and zeroes the accumulator in the same pass."""
    dims = ctx.dims
    grads = [x for x in ops if x.operation.name == "ttensor.attention_grad"]
    op = grads[0]
    q, k, v, do, lse, delta = op.operands
    dt, D = _check(op, "attention backward", dims, q, k, v, (do,))
    causal, scale = _attrs(op)
    wrt = {ir.StringAttr(x.attributes["wrt"]).value: x.results[0] for x in grads}
    # delta = rowsum(cast(A) · cast(B)) of the group (A, B: dO and O), else delta is an input of the group
    red = next((x for x in ops if x.operation.name == "ttensor.reduce"), None)
    factors = [c.owner.operands[0] for c in red.operands[0].owner.operands] if red is not None else []
    factors = [x for x in factors if x != do] + [x for x in factors if x == do]   # the kernel's (O, dO)
    dq = dims[q]
    env = {"BH": graph_shapes.product(dq[:-2]), "SQ": dq[-2], "SK": dims[k][-2]}
    rows = {"Q": "SQ", "K": "SK", "V": "SK", "dO": "SQ", "dQ": "SQ", "dK": "SK", "dV": "SK"}
    values = {"Q": q, "K": k, "V": v, "dO": do, "LSE": lse, "Delta": delta, "dQ": wrt.get("q"), "dK": wrt.get("k"),
              "dV": wrt.get("v")}
    kinds = [kind for kind, want in (("dkdv", "k" in wrt and "v" in wrt), ("dk", "k" in wrt and "v" not in wrt),
                                     ("dv", "v" in wrt and "k" not in wrt), ("dq", "q" in wrt)) if want]
    steps = []
    if kinds == ["dkdv", "dq"] and (fused_dq == "always" or
                                    fused_dq == "faster" and D in attention_bwd_sm90.FUSED_DQ_HEAD_DIMS):
        kinds = ["dkdvdq"]
        rows["dQacc"] = "SQ"
        values["dQacc"] = ctx.temporary(ctx.record(wrt["q"]), "f32")
        if not factors:
            steps.append(_acc_step(ctx, op, f"{kname}_dq_zero", D, dt, scale, env, values))
    if factors:
        steps.append(_pre_step(ctx, op, f"{kname}_pre", D, dt, env, values, factors))
    for kind in kinds:
        name = kname if kind != "dq" or len(kinds) == 1 else f"{kname}_dq"
        try:
            spec = attention_bwd_sm90.Sm90AttentionBwdSpec(name, kind, head_dim=D, causal=causal, scale=scale,
                                                           dtype=dt)
        except ValueError as e:
            raise LoweringError(op, str(e)) from None
        params = [(n, "f32", ("BH", "SQ")) if n in ("LSE", "Delta") else (n, "f32" if n == "dQacc" else dt,
                                                                             ("BH", rows[n], D))
                  for n in spec.params]
        with op.location:
            generated.declare(ctx.module, name, params, attention_bwd_sm90.generate(spec),
                              list(range(6, len(spec.params))), {
                                  "ptx.tensor_maps": spec.tensor_maps, "tile.M": str(attention_bwd_sm90.BM),
                                  "tile.N": str(spec.block_n), "tile.K": str(D), "pipeline.stages": str(spec.stages),
                                  "attention.causal": str(causal).lower(), "attention.backward": kind})
        args = tuple(plan.TensorArg(values[n] if n == "dQacc" else ctx.record(values[n]),
                                    ("BH", "SQ") if n in ("LSE", "Delta")
                                    else ("BH", rows[n], str(D))) for n in spec.params)
        steps.append(plan.ArgsStep(name, env=env, args=args, block=(spec.threads, 1, 1), smem=spec.smem_bytes,
                                   grid=(f"ceil({'SQ' if kind == 'dq' else 'SK'}/{attention_bwd_sm90.BM})", "BH", "1")))
    if "dQacc" in values:
        steps.append(_acc_step(ctx, op, f"{kname}_dq_cast", D, dt, scale, env, values))
    return steps


def _pre_step(ctx, op, name: str, D: int, dt: str, env: dict, values: dict, factors: list) -> plan.ArgsStep:
    """The step writing Delta = rowsum(A ∘ B) of `factors` (dO and O) and, where the plan has dQacc, zeroing
    it (attention_bwd_sm90.generate_pre), with its kernel declared."""
    zero = "dQacc" in values
    params = [("O", dt, ("BH", "SQ", D)), ("dO", dt, ("BH", "SQ", D)), ("Delta", "f32", ("BH", "SQ"))] + \
        ([("dQacc", "f32", ("BH", "SQ", D))] if zero else [])
    with op.location:
        generated.declare(ctx.module, name, params, attention_bwd_sm90.generate_pre(name, D, dt, zero),
                          list(range(2, len(params))), {"attention.backward": "pre"})
    args = (plan.TensorArg(ctx.record(factors[0]), ("BH", "SQ", str(D))),
            plan.TensorArg(ctx.record(factors[1]), ("BH", "SQ", str(D))),
            plan.TensorArg(ctx.record(values["Delta"]), ("BH", "SQ"))) + \
        ((plan.TensorArg(values["dQacc"], ("BH", "SQ", str(D))),) if zero else ())
    return plan.ArgsStep(name, env={k: env[k] for k in ("BH", "SQ")}, args=args, block=(256, 1, 1),
                         grid=(f"ceil(SQ/{2048 // D})", "BH", "1"))


def _acc_step(ctx, op, name: str, D: int, dt: str, scale: float, env: dict, values: dict) -> plan.ArgsStep:
    """The step zeroing dQacc (a name ending "_zero") or writing dQ = scale · dQacc (attention_bwd_sm90.
    generate_acc), with its kernel declared."""
    op_kind = "zero" if name.endswith("_zero") else "cast"
    names = ("dQacc",) if op_kind == "zero" else ("dQacc", "dQ")
    params = [(n, "f32" if n == "dQacc" else dt, ("BH", "SQ", D)) for n in names]
    with op.location:
        generated.declare(ctx.module, name, params,
                          attention_bwd_sm90.generate_acc(name, D, op_kind, dt, scale), [len(names) - 1],
                          {"attention.backward": f"dq_{op_kind}"})
    args = tuple(plan.TensorArg(ctx.record(values["dQ"]) if n == "dQ" else values[n], ("BH", "SQ", str(D)))
                 for n in names)
    return plan.ArgsStep(name, env={k: env[k] for k in ("BH", "SQ")}, args=args, block=(256, 1, 1),
                         grid=(f"ceil(SQ/{1024 // D})", "BH", "1"))
