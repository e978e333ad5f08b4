"""Attention groups of Graph IR functions (``ttensor.flash_attention``) as the sm_90a flash-attention kernel
(attention_sm90.py) and its launch-plan step. The batch axes fold into one (BH); queries, keys and values
keep their own lengths (SQ, SK); the head dimension is static."""

from __future__ import annotations

from ... import plan
from ...diagnostics import LoweringError
from ...mlir import ir
from ...passes import graph_shapes
from ...passes.kernelgen import element_dtype
from . import attention_sm90, generated


def lower(arch: str, ctx, kname: str, ops: list) -> list[plan.ArgsStep]:
    """The plan step of a flash_attention on `arch`; its kernel is declared in the module (`ctx`: a
    passes.lowering_context.LoweringContext)."""
    (op,) = ops
    dims = ctx.dims
    if arch != "sm_90a":
        raise LoweringError(op, f"flash_attention on the ptx target needs --arch sm_90a (its tensor-core "
                                f"kernel), not {arch}")
    q, k, v = op.operands
    out = op.results[0]
    dq, dk, dv = dims[q], dims[k], dims[v]
    dt = element_dtype(q)
    if {element_dtype(k), element_dtype(v), element_dtype(out)} != {dt}:
        raise LoweringError(op, "the ptx flash attention takes Q, K, V and the result in one dtype, not "
                                f"{dt}, {element_dtype(k)}, {element_dtype(v)} -> {element_dtype(out)}")
    d = dq[-1]
    if not (isinstance(d, int) or str(d).isdigit()) or dk[-1] != d or dv[-1] != d:
        raise LoweringError(op, f"the ptx flash attention needs one static head dimension for Q, K and V, "
                                f"not {dq[-1]}, {dk[-1]}, {dv[-1]}")
    if dq[:-2] != dk[:-2] or dk[:-2] != dv[:-2]:
        raise LoweringError(op, "the ptx flash attention takes Q, K and V with the same batch axes "
                                f"({dq[:-2]}, {dk[:-2]}, {dv[:-2]}); broadcast them first")
    causal = ir.BoolAttr(op.attributes["causal"]).value if "causal" in op.attributes else False
    scale = ir.FloatAttr(op.attributes["scale"]).value
    try:
        spec = attention_sm90.Sm90AttentionSpec(kname, head_dim=int(d), causal=causal, scale=scale, dtype=dt)
    except ValueError as e:
        raise LoweringError(op, str(e)) from None
    D = int(d)
    params = [("Q", dt, ("BH", "SQ", D)), ("K", dt, ("BH", "SK", D)), ("V", dt, ("BH", "SK", D)),
              ("O", dt, ("BH", "SQ", D))]
    with op.location:
        generated.declare(ctx.module, kname, params, attention_sm90.generate(spec), [3], {
            "ptx.tensor_maps": spec.tensor_maps, "tile.M": str(attention_sm90.BM), "tile.N": str(spec.block_n),
            "tile.K": str(D), "pipeline.stages": str(spec.stages), "attention.causal": str(causal).lower()})
    env = {"BH": graph_shapes.product(dq[:-2]), "SQ": dq[-2], "SK": dk[-2]}
    args = tuple(plan.TensorArg(ctx.record(x), ("BH", s, str(D))) for x, s in ((q, "SQ"), (k, "SK"), (v, "SK"),
                                                                              (out, "SQ")))
    return [plan.ArgsStep(kname, env=env, args=args, block=(spec.threads, 1, 1), smem=spec.smem_bytes,
                          grid=(f"ceil(SQ/{attention_sm90.BM})", "BH", "1"))]
