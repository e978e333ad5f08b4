"""Convolutions as GEMMs, on every target.

`ttensor.conv` (op.conv1d / op.conv2d: input [N, C, *S], weight [O, C, *K]) is rewritten at the schedule
stage, before anything plans it, as

    cols = im2col(x)                  [N·P, C·K]   P = the output positions, K = the kernel taps
    y    = cols @ reshape(w, [O, C·K])ᵀ   [N·P, O]     the target's GEMM (a view, then a folded transpose)
    out  = reshape(transpose(reshape(y, [N, P, O])), [N, O, *out])

so that what every target already compiles — its GEMM, a generated gather kernel and a transpose of the last
two axes — runs it, with the GEMM's routing and refusals (a target without a GEMM for the dtype refuses the
conv at the user's line, the matmul carrying its location). The GEMM's rows are output positions, so a
bias over the output channels, and the activation after it, are its column epilogue: a conv whose one user
is ``bias_add(axis=1)``, followed by epilogue activations each the only user of the one before, has them
moved onto y before the transpose, where the fusion phase joins them to the GEMM (so are activations
straight after a conv).

The im2col kernel (`window_kernel`) is one thread per element of cols: its row gives the image and output
position, its column the channel and tap, each axis' input index ``i·stride − lo + j·dilation``; outside the
input the element is 0 (the zero padding). Its adjoint col2im (the input gradient, passes/autodiff_conv.py)
is one thread per image element, summing over the taps the patch elements that read it. Every extent but N
is static (the frontend requires it), so the kernels' arithmetic is on literals.
"""

from __future__ import annotations

import math

from ..dialects import ttensor
from ..dialects.support import create
from ..mlir import ir
from . import fusion, graph_shapes, kernelgen
from .schedule_ir import graph_ops

WINDOW_BLOCK = 256


def _i64s(vals) -> ir.ArrayAttr:
    return ir.ArrayAttr.get([ir.IntegerAttr.get(ir.IntegerType.get_signless(64), v) for v in vals])


def _ints(attr) -> list[int]:
    return [ir.IntegerAttr(a).value for a in ir.ArrayAttr(attr)]


def _shape(v) -> list[int]:
    t = ir.RankedTensorType(v.type)
    return [ir.ShapedType.get_dynamic_size() if t.is_dynamic_dim(i) else t.get_dim_size(i) for i in range(t.rank)]


def _reshape(x, shape: list, named: list) -> ir.Value:
    """x viewed as `shape`, `named` naming every extent for the plan (N may be known only at run time)."""
    r = ttensor.ReshapeOp(x, result=ir.RankedTensorType.get(shape, ir.RankedTensorType(x.type).element_type))
    r.attributes["tessera.result_dims"] = ir.ArrayAttr.get([ir.StringAttr.get(str(d)) for d in named])
    return r.result


def _transpose(x, perm: list) -> ir.Value:
    s = _shape(x)
    return ttensor.TransposeOp(x, perm=_i64s(perm), result=ir.RankedTensorType.get(
        [s[p] for p in perm], ir.RankedTensorType(x.type).element_type)).result


def _epilogue(conv) -> list:
    """The bias_add over the channels (axis 1) that is the conv's one user, and the epilogue activations
    after it (or after the conv), each its predecessor's one user: the ops that move onto the GEMM's [N·P, O]
    result."""
    chain, v = [], conv.results[0]
    while True:
        users = [u.owner for u in v.uses]
        if len(users) != 1:
            return chain
        user = users[0]
        name = user.operation.name
        rank = ir.RankedTensorType(v.type).rank
        if not chain and name == "ttensor.bias_add" and user.operands[0] == v and \
                ir.IntegerAttr(user.attributes["axis"]).value % rank == 1:
            chain.append(user)
        elif name == "ttensor.unary" and ir.StringAttr(user.attributes["fn"]).value in fusion.EPILOGUE_UNARY:
            chain.append(user)
        else:
            return chain
        v = user.results[0]


def im2col(x, kernel: list, stride, padding, dilation, result, circular: bool = False, flip: bool = False):
    """ttensor.im2col of x (`stride`, `padding` and `dilation` array attributes), at the insertion point."""
    return create(ttensor.Im2colOp, x, kernel=_i64s(kernel), stride=stride, padding=padding, dilation=dilation,
                  circular=ir.BoolAttr.get(circular), flip=ir.BoolAttr.get(flip), result=result).result


def decompose(fn) -> int:
    """Rewrites every ttensor.conv of `fn` as im2col, a GEMM and layout views (see the module's docstring);
    returns how many."""
    convs = [op for op in graph_ops(fn) if op.operation.name == "ttensor.conv"]
    if not convs:
        return 0
    dims = graph_shapes.infer(fn)
    batches = [dims[op.operands[0]][0] for op in convs]   # before a rewrite replaces a later conv's input
    for op, n_name in zip(convs, batches):
        x, w = op.operands[0], op.operands[1]
        sx, sw, so = _shape(x), _shape(w), _shape(op.results[0])
        n, (o, c), kernel, out = sx[0], sw[:2], sw[2:], so[2:]
        p, ck = math.prod(out), c * math.prod(kernel)
        dyn = ir.ShapedType.get_dynamic_size()
        rows = dyn if n == dyn else n * p
        elt = ir.RankedTensorType(x.type).element_type
        acc = elt if str(elt) == "f64" else ir.F32Type.get()
        chain = _epilogue(op)
        last = chain[-1] if chain else op
        with op.location, ir.InsertionPoint(last):
            cols = im2col(x, kernel, op.attributes["stride"], op.attributes["padding"], op.attributes["dilation"],
                          ir.RankedTensorType.get([rows, ck], elt))
            wt = _transpose(_reshape(w, [o, ck], [o, ck]), [1, 0])
            y = ttensor.MatmulOp(cols, wt, accum=ir.TypeAttr.get(acc),
                                 result=ir.RankedTensorType.get([rows, o], elt)).result
            for e in chain:   # the bias over O is y's column bias; the activations are elementwise
                with e.location:
                    if e.operation.name == "ttensor.bias_add":
                        y = ttensor.BiasAddOp(y, e.operands[1], axis=ir.IntegerAttr.get(
                            ir.IntegerType.get_signless(64), 1), result=y.type).result
                    else:
                        y = ttensor.UnaryOp(y, fn=e.attributes["fn"], result=y.type).result
            t = _transpose(_reshape(y, [n, p, o], [n_name, p, o]), [0, 2, 1])
            res = _reshape(t, [n, o, *out], [n_name, o, *out])
        last.results[0].replace_all_uses_with(res)
        for e in reversed([op, *chain]):
            e.operation.erase()
    return len(convs)


def window_kernel(name: str, op, dims: dict) -> tuple[str, dict]:
    """The source of the kernel computing ttensor.im2col or ttensor.col2im `op` (see the module's docstring)
    and its plan step's launch: env, block, grid and argument shapes (the image [N, C, *S] as [N, C·S], the
    patches as [N·P, C·K])."""
    gather = op.operation.name == "ttensor.im2col"
    image, patches = (op.operands[0], op.results[0]) if gather else (op.results[0], op.operands[0])
    dt = kernelgen.element_dtype(image)
    si = _shape(image)
    c, length = si[1], si[2:]
    kernel, stride, pad, dil = (_ints(op.attributes[a]) for a in ("kernel", "stride", "padding", "dilation"))
    out = [ttensor.conv_extent(n, k, s, pad[2 * i], pad[2 * i + 1], d)
           for i, (n, k, s, d) in enumerate(zip(length, kernel, stride, dil))]
    p, taps, size = math.prod(out), math.prod(kernel), math.prod(length)
    ck = c * taps
    if gather:
        body = _im2col_body(kernel, stride, pad, dil, out, length, p, taps, ck, dt,
                            *(ir.BoolAttr(op.attributes[a]).value for a in ("circular", "flip")))
    else:
        body = _col2im_body(kernel, stride, pad, dil, out, length, p, taps, c * size, dt)
    params = [f"X: tensor[{dt}, \"XN\", \"XE\"]", f"Y: tensor[{dt}, \"YR\", \"YC\"]"]
    src = "\n".join(["@kernel", f"def {name}({', '.join(params if gather else params[::-1])}):",
                     "    i = launch.thread_id(0)", *body, ""])
    rows = graph_shapes.product([dims[image][0], str(p)])
    env = {"XN": dims[image][0], "XE": str(c * size), "YR": rows, "YC": str(ck)}
    threads = "(YR*YC)" if gather else "(XN*XE)"   # one thread an element of what the kernel writes
    step = {"env": env, "block": [WINDOW_BLOCK, 1, 1], "grid": [f"ceil({threads}/{WINDOW_BLOCK})", "1", "1"],
            "args": [{"value": image, "shape": ["XN", "XE"]}, {"value": patches, "shape": ["YR", "YC"]}]}
    if not gather:
        step["args"].reverse()
    return src, step


def _im2col_body(kernel, stride, pad, dil, out, length, p, taps, ck, dt, circular, flip) -> list[str]:
    """Thread i writes patch element (r, c) = (i // C·K, i % C·K): the image's element at its window's tap,
    or 0 in the padding (`circular`: the element the index names modulo the extent; `flip`: tap K − 1 − j
    in column j)."""
    lines = ["    if i < Y.shape[0] * Y.shape[1]:",
             f"        r = i // {ck}", f"        c = i % {ck}", f"        n = r // {p}", f"        p = r % {p}",
             f"        ch = c // {taps}", f"        t = c % {taps}"]
    inside, at = [], [f"ch * {math.prod(length)}"]
    for a in range(len(kernel)):
        tap = f"((t // {math.prod(kernel[a + 1:])}) % {kernel[a]})"
        lines.append(f"        i{a} = ((p // {math.prod(out[a + 1:])}) % {out[a]}) * {stride[a]} - {pad[2 * a]} + "
                     f"{f'({kernel[a] - 1} - {tap})' if flip else tap} * {dil[a]}")
        if circular:   # the padding is at most the extent (the verifier's rule): one wrap either way
            lines.append(f"        i{a} = (i{a} + {length[a]}) % {length[a]}")
        inside.append(f"i{a} >= 0 and i{a} < {length[a]}")
        at.append(f"i{a} * {math.prod(length[a + 1:])}")
    zero = kernelgen.float_literal(0.0)
    if circular:
        return lines + [f"        Y[r, c] = X[n, {' + '.join(at)}]"]
    return lines + [f"        if {' and '.join(inside)}:", f"            Y[r, c] = X[n, {' + '.join(at)}]",
                    "        else:", f"            Y[r, c] = {zero if dt in ('f32', 'f64') else f'{dt}({zero})'}"]


def _col2im_body(kernel, stride, pad, dil, out, length, p, taps, cs, dt) -> list[str]:
    """Thread i writes image element (n, e) = (i // C·S, i % C·S), at position m of channel ch: the sum over
    the taps j of the patch element of the output position q / stride, q = m + lo − j·dilation, where q is a
    multiple of the stride inside the output. A gather, so no atomics: every target, deterministic."""
    size = math.prod(length)
    cdt = "f64" if dt == "f64" else "f32"
    load = (lambda e: e) if dt == cdt else (lambda e: f"{cdt}({e})")
    zero = kernelgen.float_literal(0.0)
    lines = ["    if i < X.shape[0] * X.shape[1]:",
             f"        n = i // {cs}", f"        e = i % {cs}", f"        ch = e // {size}", f"        m = e % {size}",
             f"        acc = {zero if cdt == 'f32' else f'f64({zero})'}",
             f"        for t in range({taps}):"]
    inside, at = [], [f"n * {p}"]
    for a in range(len(kernel)):
        lines.append(f"            q{a} = (m // {math.prod(length[a + 1:])}) % {length[a]} + {pad[2 * a]} - "
                     f"((t // {math.prod(kernel[a + 1:])}) % {kernel[a]}) * {dil[a]}")
        inside.append(f"q{a} >= 0 and q{a} % {stride[a]} == 0 and q{a} < {out[a] * stride[a]}")
        at.append(f"(q{a} // {stride[a]}) * {math.prod(out[a + 1:])}")
    row = " + ".join(at)
    return lines + [f"            if {' and '.join(inside)}:",
                    f"                acc += {load(f'Y[{row}, ch * {taps} + t]')}",
                    f"        X[n, e] = {'acc' if dt == cdt else f'{dt}(acc)'}"]
