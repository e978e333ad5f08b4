"""Decompositions of Graph IR ops a target runs as several kernels.

`flash_attention` on the CPU: rewritten as ``softmax(Q Kᵀ · scale) V`` (the softmax masked for `causal`,
top-left aligned: query i sees keys 0..i), with f32 scores and probabilities rounded to V's type for the
second product, as FlashAttention does. In f32 the fusion phase groups the chain back into one attention
kernel (backends/cpu/attention.py) that never writes the probabilities; in other types it runs as two GEMMs
(the packed, multi-threaded ones) and a row softmax.

`attention_lse` and `attention_grad` (attention's backward, passes/autodiff_attention.py) on a target without
fused kernels for them (`TargetFacts.fused_attention_backward` lacks Q's dtype): the fallback. The gradients
recompute the probabilities P = softmax(scale · Q Kᵀ) as the forward's decomposition does and take
dV = Pᵀ dO, dS = P ∘ (dO Vᵀ − delta), dQ = scale · dS K, dK = scale · dSᵀ Q as GEMMs and elementwise ops: the
S×S matrices P, dO Vᵀ and dS are materialised. The gradients of one attention (same operands) share one P
and one dS. With P recomputed the lse is unused and goes; one that something else reads is rewritten too.

`flash_attention_fp8` where the target has no fp8 attention kernel: `attention_fp8`.

`quantize` and `dequantize` on every target: rewritten as the elementwise ops of their definition, so that
the fusion phase joins them with their neighbours (a requantizing epilogue is one kernel) and every
backend's elementwise path runs them. The scale is divided in broadcast: as is per tensor, reshaped to
[1, .., C, .., 1] per channel, and per block both sides reshaped so that a block is a trailing axis of its own
([..., N/B, B] against [..., N/B, 1]) and the result reshaped back (reshapes are views, no copies).
quantize to i8 = cast(round(min(max(f32(x) / s, -128), 127))): clamped first, so the rounding (half to
even) is exact and the cast converts an integer; to fp8 = cast(f32(x) / s), the cast rounding to the grid
and saturating. dequantize = f32(q) * s, cast to the result type.
"""

from __future__ import annotations

from ..dialects import ttensor
from ..dialects.support import create
from ..mlir import ir
from . import fp8_fallback, graph_shapes
from .schedule_ir import graph_ops

# The largest finite f32: probabilities times it are >= 1 wherever they are normal numbers (the keys a
# causal row sees), 0 where masked.
_F32_MAX = 3.4028234663852886e38
# Below every score: a masked key's stand-in in the row maximum.
_MASKED = -1e30


def _i64(v: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), v)


def _shape(t) -> list[int]:
    t = ir.RankedTensorType(t)
    return [t.get_dim_size(i) if not t.is_dynamic_dim(i) else ir.ShapedType.get_dynamic_size()
            for i in range(t.rank)]


def _elt(v):
    return ir.RankedTensorType(v.type).element_type


def _swap_last(x) -> ir.Value:
    s = _shape(x.type)
    rank = len(s)
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    return ttensor.TransposeOp(x, perm=ir.ArrayAttr.get([_i64(p) for p in perm]),
                               result=ir.RankedTensorType.get([s[p] for p in perm], _elt(x))).result


def _to(x, element) -> ir.Value:
    """x converted to `element` (no op when it has it), accumulating in f32 as attention does."""
    if _elt(x) == element:
        return x
    acc = element if isinstance(element, ir.FloatType) and ir.FloatType(element).width >= 32 else ir.F32Type.get()
    return create(ttensor.CastOp, x, accum=ir.TypeAttr.get(acc),
                  result=ir.RankedTensorType.get(_shape(x.type), element)).result


def _const(value: float, element) -> ir.Value:
    return ttensor.ConstantOp(value=ir.FloatAttr.get(element, value), result=ir.RankedTensorType.get([], element)
                              ).result


def _bin(fn: str, a, b) -> ir.Value:
    return ttensor.BinaryOp(a, b, fn=ir.StringAttr.get(fn), result=a.type).result


def _matmul(a, b, result_element) -> ir.Value:
    sa, sb = _shape(a.type), _shape(b.type)
    return ttensor.MatmulOp(a, b, accum=ir.TypeAttr.get(ir.F32Type.get()) if ir.FloatType(result_element).width
                            < 64 else ir.TypeAttr.get(result_element),
                            result=ir.RankedTensorType.get(sa[:-1] + sb[-1:], result_element)).result


def _reduce(kind: str, x, keepdims: bool) -> ir.Value:
    s = _shape(x.type)
    rank = len(s)
    return create(ttensor.ReduceOp, x, kind=ir.StringAttr.get(kind), axes=ir.ArrayAttr.get([_i64(rank - 1)]),
                  keepdims=ir.BoolAttr.get(keepdims),
                  result=ir.RankedTensorType.get(s[:-1] + [1] if keepdims else s[:-1], _elt(x))).result


def probabilities(q, k, causal: bool, scale: float, rows: str, element) -> tuple[ir.Value, ir.Value]:
    """(scale · Q Kᵀ, softmax of it masked for `causal`), in `element`, at the current insertion point and
    location. `rows` names the query count SQ (a symbol or digits): the kernels' causal softmax takes each
    row's query index as the row's number modulo SQ."""
    scores = _matmul(q, _swap_last(k), element)
    scaled = _bin("mul", scores, _const(scale, element))
    soft = ttensor.SoftmaxOp(scaled, axis=_i64(len(_shape(scores.type)) - 1), result=scores.type)
    if causal:
        soft.attributes["tessera.causal"] = ir.StringAttr.get(rows)
    return scaled, soft.result


def _attrs(op) -> tuple[bool, float]:
    return ir.BoolAttr(op.attributes["causal"]).value, ir.FloatAttr(op.attributes["scale"]).value


def record(fn, note: str) -> None:
    """Adds `note` to the fallbacks `fn` took (`tessera.fallbacks`: the plan's and its kernels' metadata)."""
    recorded = [ir.StringAttr(x).value for x in ir.ArrayAttr(fn.attributes["tessera.fallbacks"])] \
        if "tessera.fallbacks" in fn.attributes else []
    if note not in recorded:
        fn.attributes["tessera.fallbacks"] = ir.ArrayAttr.get([ir.StringAttr.get(x) for x in recorded + [note]])


def _kept(op, dims: dict, kernels: frozenset) -> bool:
    """Whether the target's fused attention kernels take Q's (element type, head dimension) (`kernels`:
    TargetFacts.attention_kernels)."""
    q = op.operands[0]
    return (str(_elt(q)), dims[q][-1]) in kernels


def attention(fn, fallback: bool = False, keep: frozenset = frozenset()) -> int:
    """Rewrites each flash_attention of `fn` but those of (element type, head dimension) pairs in `keep`;
    returns how many. `fallback`: the target runs the GEMMs and the softmax as they are (no kernel joins them
    back), recorded in the function's `tessera.fallbacks`."""
    ops = [op for op in graph_ops(fn) if op.operation.name == "ttensor.flash_attention"]
    if not ops:
        return 0
    dims = graph_shapes.infer(fn)
    targets = [op for op in ops if not _kept(op, dims, keep)]
    for op in targets:
        if fallback:
            record(fn, f"flash_attention ({_elt(op.operands[0])}) as two GEMMs and a softmax (the probabilities "
                       "materialised)")
        _rewrite(op, dims)
    return len(targets)


def _rewrite(op, dims: dict) -> None:
    q, k, v = op.operands[0], op.operands[1], op.operands[2]
    f32 = ir.F32Type.get()
    with op.location, ir.InsertionPoint(op):
        _, probs = probabilities(q, k, *_attrs(op), dims[q][-2], f32)
        probs = _to(probs, _elt(v))
        out = ttensor.MatmulOp(probs, v, accum=ir.TypeAttr.get(f32), result=op.results[0].type).result
    op.results[0].replace_all_uses_with(out)
    op.operation.erase()


def softmax_axes(fn) -> int:
    """Rewrites each softmax and log_softmax of `fn` along an axis other than the last, which the generated
    row kernels normalize: X [..., N, ...] seen as [P, N, Q] (a reshape, a view), its last two axes swapped,
    normalized along N, swapped back and seen as X's shape again. Returns how many."""
    ops = [op for op in graph_ops(fn) if op.operation.name in ("ttensor.softmax", "ttensor.log_softmax")
           and (ir.IntegerAttr(op.attributes["axis"]).value + 1) % len(_shape(op.operands[0].type)) != 0]
    if not ops:
        return 0
    dims = graph_shapes.infer(fn)
    for op in ops:
        x = op.operands[0]
        d = dims[x]
        k = ir.IntegerAttr(op.attributes["axis"]).value % len(d)
        seen = [graph_shapes.product(d[:k]), d[k], graph_shapes.product(d[k + 1:])]
        with op.location, ir.InsertionPoint(op):
            t = _swap_last(_reshape(x, [int(e) if e.isdigit() else ir.ShapedType.get_dynamic_size() for e in seen],
                                    seen))
            y = (ttensor.SoftmaxOp if op.operation.name == "ttensor.softmax" else ttensor.LogSoftmaxOp)(
                t, axis=_i64(2), result=t.type).result
            out = _reshape(_swap_last(y), _shape(x.type), d)
        op.results[0].replace_all_uses_with(out)
        op.operation.erase()
    return len(ops)


def attention_fp8(fn, fused: frozenset) -> int:
    """The fallback of flash_attention_fp8 where the target has no fp8 attention kernel for it (`fused`:
    TargetFacts.fused_attention_fp8, the result's element types with one; head dimension 128 only): Q, K and V
    quantized to e4m3 with their amax-dynamic scales and dequantized back to their own type, then a
    flash_attention of those — the same e4m3 inputs, but P is not rounded to e4m3. The form with descales
    (e4m3 Q, K, V and f32 sq, sk, sv operands) dequantizes them with those to the result's type (bf16).
    Recorded in the function's `tessera.fallbacks`; returns how many were rewritten."""
    dims = graph_shapes.infer(fn)
    ops = [op for op in graph_ops(fn) if op.operation.name == "ttensor.flash_attention_fp8"
           and not (str(_elt(op.results[0])) in fused and dims[op.operands[0]][-1] == "128")]
    f32, e4m3 = ir.F32Type.get(), ir.Type.parse("f8E4M3FN")
    kw = dict(granularity=ir.StringAttr.get("tensor"), axis=_i64(0), block=_i64(0))
    for op in ops:
        operands = list(op.operands)
        out_t = op.results[0].type
        with op.location, ir.InsertionPoint(op):
            ins = []
            if len(operands) == 6:   # e4m3 with their descales
                for x, s in zip(operands[:3], operands[3:]):
                    t = ir.RankedTensorType.get(_shape(x.type), ir.RankedTensorType(out_t).element_type)
                    ins.append(ttensor.DequantizeOp(x, s, **kw, result=t).result)
            for x in operands if len(operands) == 3 else ():
                rank, t = len(_shape(x.type)), ir.RankedTensorType(x.type)
                a = ttensor.UnaryOp(x, fn=ir.StringAttr.get("abs"), result=x.type).result
                amax = create(ttensor.ReduceOp, a, kind=ir.StringAttr.get("max"),
                              axes=ir.ArrayAttr.get([_i64(i) for i in range(rank)]), keepdims=ir.BoolAttr.get(False),
                              result=ir.RankedTensorType.get([], t.element_type)).result
                scale = _bin("div", _bin("max", _to(amax, f32), _const(2.0 ** -126, f32)), _const(448.0, f32))
                x8 = ttensor.QuantizeOp(x, scale, **kw, result=ir.RankedTensorType.get(_shape(x.type), e4m3)).result
                ins.append(ttensor.DequantizeOp(x8, scale, **kw, result=x.type).result)
            out = create(ttensor.FlashAttentionOp, *ins, causal=op.attributes["causal"], scale=op.attributes["scale"],
                         result=out_t).result
        if len(operands) == 6:
            note = (f"flash_attention_fp8 (e4m3 with descales, head dimension {dims[operands[0]][-1]}) as "
                    f"flash_attention of its Q, K, V dequantized to {_elt(op.results[0])} (P not rounded to e4m3)")
        else:
            note = (f"flash_attention_fp8 ({_elt(operands[0])}, head dimension {dims[operands[0]][-1]}) as "
                    "flash_attention of its dequantized e4m3 Q, K, V (P not rounded to e4m3)")
        record(fn, note)
        op.results[0].replace_all_uses_with(out)
        op.operation.erase()
    return len(ops)


def attention_backward(fn, fused: frozenset, kernels: frozenset = frozenset()) -> int:
    """The fallback: rewrites `fn`'s attention_grad and attention_lse ops whose Q's element type is not in
    `fused` (the dtypes the target has fused kernels for) or, where `kernels` (TargetFacts.attention_kernels)
    lists pairs, whose (element type, head dimension) is not among them; returns how many ops it rewrote."""
    ops = [op for op in graph_ops(fn) if op.operation.name in ("ttensor.attention_grad", "ttensor.attention_lse")]
    if not ops:
        return 0
    dims = graph_shapes.infer(fn)
    ops = [op for op in ops if str(_elt(op.operands[0])) not in fused or (kernels and not _kept(op, dims, kernels))]
    if not ops:
        return 0
    grads: dict = {}   # (operands, causal, scale) -> the attention_grad ops of one attention
    lses = []
    for op in ops:
        if op.operation.name == "ttensor.attention_grad":
            grads.setdefault((tuple(op.operands), *_attrs(op)), []).append(op)
        else:
            lses.append(op)
    for group in grads.values():
        record(fn, f"attention's backward ({_elt(group[0].operands[0])}) as GEMMs (P and dS materialised)")
        _rewrite_grads(group, dims)
    for op in lses:   # after the gradients, which read them
        _rewrite_lse(op, dims)
    return len(ops)


def _rewrite_grads(group: list, dims: dict) -> None:
    first = group[0]
    q, k, v, do, lse, delta = first.operands
    causal, scale = _attrs(first)
    f32 = ir.F32Type.get()
    with first.location, ir.InsertionPoint(first):
        _, p = probabilities(q, k, causal, scale, dims[q][-2], f32)
        ds = None
        for op in group:
            wrt = ir.StringAttr(op.attributes["wrt"]).value
            out_t = op.results[0].type
            if wrt == "v":   # dV = Pᵀ dO, P rounded to dO's type as the forward rounds it to V's
                out = ttensor.MatmulOp(_swap_last(_to(p, _elt(do))), do, accum=ir.TypeAttr.get(f32),
                                       result=out_t).result
            else:
                if ds is None:   # scale · P ∘ (dO Vᵀ − delta), delta broadcast along the keys
                    dp = _matmul(_to(do, _elt(v)), _swap_last(v), f32)
                    rows = _shape(delta.type) + [1]
                    col = ttensor.ReshapeOp(delta, result=ir.RankedTensorType.get(rows, f32)).result
                    if any(d == ir.ShapedType.get_dynamic_size() for d in rows):
                        col.owner.attributes["tessera.result_dims"] = ir.ArrayAttr.get(
                            [ir.StringAttr.get(d) for d in dims[delta] + ["1"]])
                    ds = _bin("mul", _bin("mul", p, ttensor.BinaryOp(dp, col, fn=ir.StringAttr.get("sub"),
                                                                     result=dp.type).result), _const(scale, f32))
                if wrt == "q":   # dQ = dS K
                    out = ttensor.MatmulOp(_to(ds, _elt(k)), k, accum=ir.TypeAttr.get(f32), result=out_t).result
                else:            # dK = dSᵀ Q
                    out = ttensor.MatmulOp(_swap_last(_to(ds, _elt(q))), q, accum=ir.TypeAttr.get(f32),
                                           result=out_t).result
            op.results[0].replace_all_uses_with(out)
    for op in group:
        op.operation.erase()


def _rewrite_lse(op, dims: dict) -> None:
    if not any(True for _ in op.results[0].uses):
        op.operation.erase()   # the gradients' fallback recomputes P: nothing reads it
        return
    q, k = op.operands
    f32 = ir.F32Type.get()
    with op.location, ir.InsertionPoint(op):
        # lse = m − log(max P), m the row's largest score among the keys it sees (P = exp(s − lse), so
        # max P = exp(m − lse) >= 1/SK: its log is exact where a sum of exps of masked rows is not expressible)
        s, p = probabilities(q, k, *_attrs(op), dims[q][-2], f32)
        seen = _bin("min", _bin("mul", p, _const(_F32_MAX, f32)), _const(1.0, f32))   # 1 seen, 0 masked
        masked = _bin("add", _bin("mul", s, seen),
                      _bin("mul", _bin("sub", seen, _const(1.0, f32)), _const(-_MASKED, f32)))
        m = _reduce("max", masked, False)
        big = ttensor.UnaryOp(_reduce("max", p, False), fn=ir.StringAttr.get("log"),
                              result=ir.RankedTensorType.get(_shape(m.type), f32)).result
        out = _bin("sub", m, big)
    op.results[0].replace_all_uses_with(out)
    op.operation.erase()


FP8 = ("f8E4M3FN", "f8E5M2")


def _per_tensor_fp8(v):
    """(q, s) when `v` is an f32 `dequantize(q, s)` of fp8 `q` per tensor that nothing else reads, else None."""
    op = v.owner
    if not isinstance(op, ir.OpView) or op.operation.name != "ttensor.dequantize" or len(list(v.uses)) != 1:
        return None
    q, s = op.operands[0], op.operands[1]
    if str(_elt(q)) not in FP8 or str(_elt(v)) != "f32" or len(_shape(q.type)) != 2 or \
            ir.StringAttr(op.attributes["granularity"]).value != "tensor":
        return None
    return q, s


def scaled_fp8_matmuls(fn) -> int:
    """On a target whose GEMM multiplies one-byte fp8 tensors (TargetFacts.scaled_fp8_gemm): every 2-D
    ``dequantize(a, sa) @ transpose(dequantize(bt, sb))`` (or ``@ dequantize(b, sb)``), per-tensor scales, becomes
    ``(a @ btᵀ) · sa · sb``: a matmul of the fp8 tensors themselves (B read as the stored Bᵀ, `tessera.transpose_b`)
    accumulating in f32, then the two scales, which the fusion phase joins into the GEMM's epilogue. The sum
    is the same real number as the definition's (each product of fp8 values is exact, and the scales are
    common factors); only where f32 rounds differs. Returns how many matmuls were rewritten."""
    count = 0
    for mm in [op for op in graph_ops(fn) if op.operation.name == "ttensor.matmul"]:
        if ttensor.TRANSPOSE_A in mm.attributes or ttensor.TRANSPOSE_B in mm.attributes or \
                str(_elt(mm.results[0])) != "f32":
            continue
        lhs, rhs = mm.operands[0], mm.operands[1]
        a = _per_tensor_fp8(lhs)
        stored_t = isinstance(rhs.owner, ir.OpView) and rhs.owner.operation.name == "ttensor.transpose" and \
            len(list(rhs.uses)) == 1
        b = _per_tensor_fp8(rhs.owner.operands[0] if stored_t else rhs)
        if a is None or b is None:
            continue
        with mm.location, ir.InsertionPoint(mm):
            out = ttensor.MatmulOp(a[0], b[0], accum=ir.TypeAttr.get(ir.F32Type.get()), result=mm.results[0].type)
            if stored_t:
                out.attributes[ttensor.TRANSPOSE_B] = ir.UnitAttr.get()
            scaled = out.result
            for s in (a[1], b[1]):   # 0-d: the frontend's per-tensor scales
                scaled = _bin("mul", scaled, s)
        mm.results[0].replace_all_uses_with(scaled)
        dequantized_b = rhs.owner.operands[0].owner if stored_t else rhs.owner
        # users first: the matmul, the transpose, then the two dequantizes, each now unread
        for op in [mm, *([rhs.owner] if stored_t else []), dequantized_b, lhs.owner]:
            op.operation.erase()
        count += 1
    return count


def quantization(fn) -> int:
    """Rewrites every quantize and dequantize of `fn` (see the module's docstring); returns how many."""
    ops = [op for op in graph_ops(fn) if op.operation.name in ("ttensor.quantize", "ttensor.dequantize")]
    dims = graph_shapes.infer(fn) if ops else {}
    # before rewrites replace operands (an i4 one by its bytes)
    named = [(dims[op.operands[0]], dims[op.operands[1]], _is_i4(op.operands[0])) for op in ops]
    _i4_parameters(fn)
    made: list = []   # the function's nibble shift vector, once made

    def shifts() -> ir.Value:
        return _nibble_shifts(fn, made)
    for op, (xdims, sdims, packed) in zip(ops, named):
        with op.location, ir.InsertionPoint(op):
            out = _quantized(op, xdims, sdims, packed, shifts)
        op.results[0].replace_all_uses_with(out)
        op.operation.erase()
    _i4_results(fn)
    return len(ops)


def _i4_parameters(fn) -> None:
    """An i4 parameter [..., N] crosses the ABI as its bytes, u8 [..., N/2] (numpy has no i4; u8 as fp8's bit
    patterns travel), which its dequantizes unpack as they are (`_unpack_i4`); the argument keeps its
    declared dtype (`tessera.declared`) for the plan, as fp8's does."""
    block = fn.entry_block
    arg_attrs = [ir.DictAttr(a) for a in ir.ArrayAttr(fn.attributes["arg_attrs"])]
    for arg in list(block.arguments):
        if not _is_i4(arg):
            continue
        shape = _shape(arg.type)
        arg.set_type(ir.RankedTensorType.get(shape[:-1] + [shape[-1] // 2], ir.IntegerType.get_unsigned(8)))
        attrs = {na.name: na.attr for na in arg_attrs[arg.arg_number]}
        dims = list(ir.ArrayAttr(attrs["tessera.dims"]))
        dims[-1] = ir.StringAttr.get(str(shape[-1] // 2))
        arg_attrs[arg.arg_number] = ir.DictAttr.get({**attrs, "tessera.dims": ir.ArrayAttr.get(dims),
                                                     fp8_fallback.DECLARED: ir.StringAttr.get("i4")})
    fn.attributes["arg_attrs"] = ir.ArrayAttr.get(arg_attrs)
    fty = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
    fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get([a.type for a in block.arguments],
                                                                         list(fty.results)))


def _i4_results(fn) -> None:
    """An i4 result (its bytes, u8 [..., N/2], once quantize is rewritten) is returned as they are, declared
    i4 in `res_attrs` for the plan."""
    fty = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
    if not any(_is_i4_type(t) for t in fty.results):
        return
    ret = list(fn.entry_block.operations)[-1]
    res_attrs = [ir.DictAttr(a) for a in ir.ArrayAttr(fn.attributes["res_attrs"])] \
        if "res_attrs" in fn.attributes else [ir.DictAttr.get({}) for _ in fty.results]
    for i, t in enumerate(fty.results):
        if _is_i4_type(t):
            attrs = {na.name: na.attr for na in res_attrs[i]}
            res_attrs[i] = ir.DictAttr.get({**attrs, fp8_fallback.DECLARED: ir.StringAttr.get("i4")})
    fn.attributes["res_attrs"] = ir.ArrayAttr.get(res_attrs)
    fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(list(fty.inputs),
                                                                         [v.type for v in ret.operands]))


def _reshape(x, shape: list, named: list | None = None) -> ir.Value:
    """x reshaped to `shape`; `named` gives every extent's expression (graph_shapes' dims), so that a reshape
    with several extents known only at run time can still be planned."""
    r = ttensor.ReshapeOp(x, result=ir.RankedTensorType.get(shape, _elt(x)))
    if named is not None:
        r.attributes["tessera.result_dims"] = ir.ArrayAttr.get([ir.StringAttr.get(str(d)) for d in named])
    return r.result


def _nibble_shifts(fn, made: list) -> ir.Value:
    """The u8 vector [0, 4], each nibble's shift, made once per function at its entry (`made` holds it once
    made): Graph IR's constants are splats, so it is pushed together (ttensor.push of 0 onto a splat of 4),
    three launches of one or two elements."""
    if not made:
        u8 = ir.IntegerType.get_unsigned(8)
        first = next(iter(fn.entry_block.operations))
        two = ir.RankedTensorType.get([2], u8)
        with first.location, ir.InsertionPoint(first):
            v = ttensor.ConstantOp(value=ir.IntegerAttr.get(u8, 0), result=ir.RankedTensorType.get([], u8))
            h = ttensor.ConstantOp(value=ir.IntegerAttr.get(u8, 4), result=two)
            made.append(ttensor.PushOp(v.result, h.result, result=two).result)
    return made[0]


def _pack_i4(q, shape: list, dims: list, shifts) -> ir.Value:
    """i8 `q` [..., N] of values -8..7 as i4 bytes, u8 [..., N/2]: byte j = (q[2j] & 15) | (q[2j+1] << 4),
    summed over a trailing pair axis (the nibbles do not overlap, so the sum is the or). u8, the type a
    parameter's bytes come in, so that a result needs no conversion and unpacking has one form."""
    n = shape[-1]
    nibbles = _to(_bin("and", q, _int(15)), ir.IntegerType.get_unsigned(8))
    pairs = _reshape(nibbles, shape[:-1] + [n // 2, 2], dims[:-1] + [str(n // 2), "2"])
    return _reduce("sum", _bin("shl", pairs, shifts()), False)


def _unpack_i4(b, shape: list, dims: list, shifts) -> ir.Value:
    """i4 bytes `b`, u8 [..., N/2], as i8 [..., N] of values -8..7: ((byte >> [0, 4]) << 4) >> 4, the nibble
    moved down (a logical shift, `pack`'s vector), then to the top of an i8 (a cast wraps) and arithmetically
    back, which sign-extends it: one kernel, which reads a parameter's bytes where they lie."""
    n = shape[-1]
    pairs = _reshape(b, shape[:-1] + [n // 2, 1], dims[:-1] + [str(n // 2), "1"])
    wide = ir.RankedTensorType.get(shape[:-1] + [n // 2, 2], _elt(b))
    t = ttensor.BinaryOp(pairs, shifts(), fn=ir.StringAttr.get("shr"), result=wide).result
    t = _bin("shl", _to(t, ir.IntegerType.get_signless(8)), _int(4))
    return _reshape(_bin("shr", t, _int(4)), shape, dims)


def _is_i4(v) -> bool:
    return _is_i4_type(v.type)


def _is_i4_type(t) -> bool:
    t = ir.RankedTensorType(t).element_type
    return isinstance(t, ir.IntegerType) and ir.IntegerType(t).width == 4


def _int(value: int) -> ir.Value:
    i8 = ir.IntegerType.get_signless(8)
    return ttensor.ConstantOp(value=ir.IntegerAttr.get(i8, value), result=ir.RankedTensorType.get([], i8)).result


def _quantized(op, xdims: list, sdims: list, packed: bool, shifts) -> ir.Value:
    """The ops of one quantize or dequantize; `xdims`, `sdims`: its operands' extents (graph_shapes). A
    dequantize's i4 operand (`packed`) is already bytes (its quantize was rewritten first), so shapes are read
    off the result; `shifts()` is the function's nibble shift vector."""
    x, s = op.operands[0], op.operands[1]
    f32 = ir.F32Type.get()
    granularity = ir.StringAttr(op.attributes["granularity"]).value
    shape = _shape(op.results[0].type)
    rank = len(shape)
    element = ir.RankedTensorType(op.results[0].type).element_type
    i4 = isinstance(element, ir.IntegerType) and ir.IntegerType(element).width == 4
    if op.operation.name == "ttensor.dequantize" and packed:
        x = _unpack_i4(x, shape, xdims, shifts)
    if granularity == "channel":
        axis = ir.IntegerAttr(op.attributes["axis"]).value % rank
        if axis != rank - 1:   # a [C] scale broadcasts along the last axis as it is
            s = _reshape(s, [_shape(s.type)[0] if i == axis else 1 for i in range(rank)])
    elif granularity == "block":
        block = ir.IntegerAttr(op.attributes["block"]).value
        n = shape[-1]
        x = _reshape(x, shape[:-1] + [n // block if n != ir.ShapedType.get_dynamic_size() else n, block],
                     xdims[:-1] + [str(n // block) if str(xdims[-1]).isdigit() else f"({xdims[-1]})//{block}",
                                   str(block)])
        s = _reshape(s, _shape(s.type) + [1], sdims + ["1"])
    t = _to(x, f32)
    if op.operation.name == "ttensor.quantize":
        t = _bin("div", t, s)
        if isinstance(element, ir.IntegerType):
            top = 2.0 ** (ir.IntegerType(element).width - 1)
            t = _bin("min", _bin("max", t, _const(-top, f32)), _const(top - 1, f32))
            t = ttensor.UnaryOp(t, fn=ir.StringAttr.get("round"), result=t.type).result
    else:
        t = _bin("mul", t, s)
    t = _to(t, ir.IntegerType.get_signless(8) if i4 else element)   # i4's values in i8, then packed
    if granularity == "block":
        t = _reshape(t, shape, xdims)
    return _pack_i4(t, shape, xdims, shifts) if i4 else t
