"""``tessera-fold-transposes``: a matmul reads a transposed operand in place instead of through a copy.

A matmul's backward multiplies by transposes (dA = dC·Bᵀ, dB = Aᵀ·dC: passes/autodiff.py), and a
`ttensor.transpose` is a kernel of its own that writes a transposed copy (a "layout" group). A GEMM reads
its operands while packing (CPU) or staging (GPU) them anyway, and can read them in either layout; so where
the target's GEMMs can (`TargetFacts.gemm_transposes`: the operand element types they can do it for), a
transpose swapping the last two axes that feeds a
matmul operand is folded into the matmul: the matmul takes the transpose's input and the unit attribute
`tessera.transpose_a` / `tessera.transpose_b` (dialects/ttensor.py). The transpose stays for its other
users; with none left it is erased.

Runs in the schedule stage (compiler.make_schedule), after attention's decomposition (whose `Q·Kᵀ` is such
a product) and before the schedule phase, so that every later phase sees the folded matmul. Not folded:
  * the matmuls of an attention chain on a target with a fused attention kernel (fusion.attention_chains:
    the fused kernel takes Kᵀ from its transpose);
  * a transposed lhs with batch axes the rhs lacks: those axes fold into the GEMM's rows, which the stored
    transpose [..., K, M] does not lay out contiguously.
"""

from __future__ import annotations

from ..dialects.ttensor import TRANSPOSE_A, TRANSPOSE_B, matmul_transposes
from ..mlir import ir
from . import fusion, graph_shapes
from .kernelgen import element_dtype
from .schedule_ir import graph_ops


def swapped_input(v: ir.Value):
    """The input of the `ttensor.transpose` defining `v` when it swaps exactly the last two axes, else None."""
    owner = v.owner
    if not isinstance(owner, ir.OpView) or owner.operation.name != "ttensor.transpose":
        return None
    perm = [ir.IntegerAttr(p).value for p in ir.ArrayAttr(owner.attributes["perm"])]
    rank = len(perm)
    return owner.operands[0] if rank >= 2 and perm == list(range(rank - 2)) + [rank - 1, rank - 2] else None


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
