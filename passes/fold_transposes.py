"""``tessera-fold-transposes``: a matmul reads a transposed operand in place instead of through a copy.

A matmul's backward multiplies by transposes (dA = dC·Bᵀ, dB = Aᵀ·dC: passes/autodiff.py), and a
`ttensor.transpose` is a kernel of its own that writes a transposed copy (a "layout" group). A GEMM reads
its operands while packing (CPU) or staging (GPU) them anyway, and can read them in either layout; so where
the target's GEMMs can (`TargetFacts.gemm_transposes`: the operand element types they can do it for), a
transpose swapping the last two axes that feeds a
matmul operand is folded into the matmul: the matmul takes the transpose's input and the unit attribute
`tessera.transpose_a` / `tessera.transpose_b` (dialects/ttensor.py). The transpose stays for its other
users; with none left it is erased.

`attention`: where the target's fused attention kernel reads Q, K, V and writes O laid out [..., S, H, D]
(`TargetFacts.attention_seq_heads`), the head split `transpose(x, (…, -2, -3, -1))` of a model that keeps
[..., S, H, D] and attends over [..., H, S, D] is folded likewise: the flash_attention takes the
transposes' inputs and the unit attribute `tessera.seq_heads`, and its result, now [..., S, H, D], replaces
the transposes that merged the heads back (others get a transpose of it).

Runs in the schedule stage (compiler.make_schedule), after attention's decomposition (whose `Q·Kᵀ` is such
a product) and before the schedule phase, so that every later phase sees the folded matmul. Not folded:
  * the matmuls of an attention chain on a target with a fused attention kernel (fusion.attention_chains:
    the fused kernel takes Kᵀ from its transpose);
  * a transposed lhs with batch axes the rhs lacks: those axes fold into the GEMM's rows, which the stored
    transpose [..., K, M] does not lay out contiguously.
"""

from __future__ import annotations

from ..dialects import ttensor
from ..dialects.support import create
from ..dialects.ttensor import SEQ_HEADS, TRANSPOSE_A, TRANSPOSE_B, matmul_transposes
from ..mlir import ir
from . import fusion, graph_shapes
from .kernelgen import element_dtype
from .schedule_ir import graph_ops, swapped_input, transpose_perm


def _heads_swap(rank: int) -> list[int]:
    return list(range(rank - 3)) + [rank - 2, rank - 3, rank - 1]


def heads_swapped_input(v: ir.Value):
    """The input of the `ttensor.transpose` defining `v` when it swaps exactly the two axes before the last,
    else None."""
    perm = transpose_perm(v)
    return v.owner.operands[0] if perm is not None and len(perm) >= 3 and perm == _heads_swap(len(perm)) else None


def attention(fn, dtypes) -> int:
    """Folds head split and merge transposes into the flash_attentions of `fn` whose element type is in
    `dtypes` and whose Q, K and V all come from such transposes; returns how many were folded. One whose Q is
    also an operand of attention_lse or attention_grad (its training residuals and backward, which read the
    [..., H, S, D] layout) is left as it is."""
    folded = 0
    for op in [x for x in graph_ops(fn) if x.operation.name == "ttensor.flash_attention"]:  # others get erased
        if SEQ_HEADS in op.attributes or element_dtype(op.operands[0]) not in dtypes:
            continue
        srcs = [heads_swapped_input(x) for x in op.operands]
        if any(x is None for x in srcs) or any(
                use.owner.operation.name in ("ttensor.attention_lse", "ttensor.attention_grad")
                for use in op.operands[0].uses):
            continue
        q, v = (ir.RankedTensorType(x.type) for x in (srcs[0], srcs[2]))
        shape = [ir.ShapedType.get_dynamic_size() if q.is_dynamic_dim(i) else q.get_dim_size(i)
                 for i in range(q.rank - 1)] + [ir.RankedTensorType(op.results[0].type).get_dim_size(q.rank - 1)]
        with ir.InsertionPoint(op), op.location:
            new = create(ttensor.FlashAttentionOp, *srcs, causal=op.attributes["causal"],
                         scale=op.attributes["scale"], result=ir.RankedTensorType.get(shape, v.element_type))
            for name in list(op.attributes):   # the schedule's hints, the source's location names
                if name not in new.attributes:
                    new.attributes[name] = op.attributes[name]
            new.attributes[SEQ_HEADS] = ir.UnitAttr.get()
        merges = [use.owner for use in op.results[0].uses if use.owner.operation.name == "ttensor.transpose"
                  and heads_swapped_input(use.owner.results[0]) is not None]
        for merge in {m.results[0]: m for m in merges}.values():   # one user per use: a value once
            merge.results[0].replace_all_uses_with(new.result)
            merge.operation.erase()
        if any(True for _ in op.results[0].uses):   # other users read [..., H, S, D]
            with ir.InsertionPoint(op), op.location:
                back = ttensor.TransposeOp(new.result, perm=ir.ArrayAttr.get(
                    [ir.IntegerAttr.get(ir.IntegerType.get_signless(64), p) for p in _heads_swap(q.rank)]),
                    result=op.results[0].type)
            op.results[0].replace_all_uses_with(back.result)
        splits = [x.owner for x in op.operands]
        op.operation.erase()
        for split in {s.results[0]: s for s in splits}.values():
            if not any(True for _ in split.results[0].uses):
                split.operation.erase()
        folded += 1
    return folded


def run(fn, dtypes=None, fused_attention: bool = False) -> int:
    """Folds the transposes of one function's matmul operands whose element type is in `dtypes` (names such
    as "f32"; None: any); returns how many operands were folded. `fused_attention`: the target fuses
    attention chains (their matmuls are left as they are)."""
    keep = set()
    if fused_attention:
        for chain in fusion.attention_chains(fn, graph_shapes.infer(fn)):
            keep.update(op.operation for op in chain)
    folded = 0
    transposed = set()   # the folded transposes' results (values compare equal across bindings; ops do not)
    for op in graph_ops(fn):
        if op.operation.name != "ttensor.matmul" or op.operation in keep or \
                dtypes is not None and element_dtype(op.operands[0]) not in dtypes:
            continue
        lhs_rank, rhs_rank = (ir.RankedTensorType(v.type).rank for v in list(op.operands)[:2])
        for i, (name, already) in enumerate(zip((TRANSPOSE_A, TRANSPOSE_B), matmul_transposes(op))):
            src = swapped_input(op.operands[i])
            if src is None or already or i == 0 and lhs_rank > 2 and rhs_rank == 2:
                continue
            transposed.add(op.operands[i])
            op.operation.operands[i] = src
            op.attributes[name] = ir.UnitAttr.get()
            folded += 1
    for op in graph_ops(fn):
        if op.operation.name == "ttensor.transpose" and op.results[0] in transposed and \
                not any(True for _ in op.results[0].uses):
            op.operation.erase()
    return folded
