"""Pipelined collectives: a matmul feeding an all_reduce runs in row chunks, each chunk's all_reduce
overlapping the next chunk's GEMM (``tessera-pipeline-collectives`` in tessera-opt, the canonical stage's
last pass).

A tensor-parallel MLP (W1 split by columns, W2 by rows) ends in ``all_reduce(H @ W2)``: the all_reduce of the
[T, D] partial products can start only when the whole GEMM has finished, and nothing overlaps it. Split into k
chunks of rows (Megatron's and PyTorch async-TP's "collective matmul"), chunk i's all_reduce runs on the
communication stream while chunk i+1's GEMM computes, and only the last chunk's all_reduce is exposed. A row
range of the product is the GEMM of that row range of the lhs, so each chunk is the same kernel on a part of
the lhs and of the result: nothing is recomputed, no partial product is stored apart.

This pass marks each eligible all_reduce with ``tessera.chunks = k``; graph lowering (passes/graph_lowering.py)
lowers its matmul's GEMM once and launches it per chunk on aliases at row offsets (docs/image-format.md,
"Alias step"). Eligible: an all_reduce whose operand is a `ttensor.matmul` result that nothing else reads
(its GEMM group then has no epilogue: the whole result goes to the all_reduce), whose lhs is stored row-major
(not a `ttensor.transpose`, which the schedule stage would fold into the matmul: a row range of a transposed
lhs is not contiguous) with the rhs a matrix (batch axes of the lhs alone fold into the rows; a batched
product is not one row space), reducing in the communicator's order (a deterministic or tree-ordered one is
left whole: chunks would change nothing there but the launches), and alone in its gradient bucket
(passes/bucketize.py: a bucket's all_reduces already run as one, overlapping the backward). `chunks` is the
compile option ``collective_chunks`` (tessera/options.py): 4 on GPU targets, 1 (nothing marked) on the CPU,
whose collectives run on the threads the GEMMs would use. An all_reduce's own ``op.all_reduce(chunks=k)``
overrides it (1: whole); asking chunks of one that must run whole is an error at the op, saying why.
Either may be a tuple of weights instead of a count (uneven chunks, ``tessera.chunk_weights`` beside
``tessera.chunks``; `chunk_bounds`): a smaller last chunk leaves less all_reduce exposed after the last GEMM.

Rows back to the inputs. Chunking only that GEMM leaves the first GEMM and the gelu of the MLP whole before
it, and each chunk's all_reduce only a quarter of the second GEMM to hide behind. The rows of the all_reduce's
operand depend row by row on the function's inputs through matmuls (of a row-major lhs and a matrix rhs) and
elementwise ops, so the pass walks back from the matmul's lhs and marks each op on the way
``tessera.chunk_rows = k`` (dialects/tdist.py ROWS_OF): a matmul as above (its lhs carries the rows), a unary
op or cast (its operand), a binary op whose other operand broadcasts along the rows (rank 0 or 1: a bias),
while the value reached is read by the next op alone; it stops at an argument or any other op. Graph lowering
then runs the marked ops' kernels per chunk too, on aliases of their rows, before that chunk's GEMM: chunk i's
first GEMM, gelu and second GEMM, then its all_reduce on the communication stream while chunk i+1 computes, so
only the last chunk's all_reduce is exposed. A row of a GEMM's result is computed from that row of its lhs
alone, with the same kernel and K order, so the chunked function's results are the whole one's, bit for bit
(where the reduction's own order does not change with a message's size: MPI's at three ranks may).
"""

from __future__ import annotations

from ..diagnostics import LoweringError
from ..dialects.tdist import CHUNK_WEIGHTS, CHUNKS, ROWS_OF, chunk_spec
from ..mlir import ir
from .bucketize import BUCKET
from .schedule_ir import graph_ops
# rows of a chunk are a multiple of this: the GEMMs' M tile (128 on every target), so that each chunk starts
# at a tile boundary and only the last one has a partial tile
ROW_ALIGN = 128


def whole_because(op, buckets: dict[int, int]) -> str | None:
    """Why all_reduce `op` must run whole (module docstring), None where it may run in chunks of its
    matmul's rows; `buckets`: the number of all_reduces of each gradient bucket."""
    a = op.attributes
    if ir.BoolAttr(a["deterministic"]).value or ir.StringAttr(a["algo"]).value in ("tree", "binary_tree"):
        return "it reduces in the interpreter's tree order (deterministic, or algo tree/binary_tree)"
    if BUCKET in a and buckets[ir.IntegerAttr(a[BUCKET]).value] > 1:
        return "it shares a gradient bucket with other all_reduces, which run as one"
    x = op.operands[0]
    mm = x.owner
    if isinstance(mm, ir.Block) or mm.operation.name != "ttensor.matmul":
        return "no matmul produces its operand"
    if len(list(x.uses)) != 1:
        return "another op also reads the matmul's result"
    lhs, rhs = mm.operands[0], mm.operands[1]
    if ir.RankedTensorType(rhs.type).rank != 2 or ir.RankedTensorType(lhs.type).rank < 2:
        return "the matmul's rhs is not a matrix (a batched product is not one space of rows)"
    if not isinstance(lhs.owner, ir.Block) and lhs.owner.operation.name == "ttensor.transpose":
        return "the matmul's lhs is a transpose (a row range of it is not contiguous)"
    return None


def row_input(op):
    """The operand whose rows are `op`'s result's rows where `op` may run in row chunks with the ops after it
    (module docstring, "Rows back to the inputs"), else None: a matmul of a matrix rhs whose lhs is stored
    row-major (its lhs), an elementwise unary op or cast (its operand), a binary op whose other operand
    broadcasts along the rows (rank 0 or 1, or a scalar constant: the operand of the result's shape)."""
    name = op.operation.name
    if name == "ttensor.matmul":
        lhs, rhs = op.operands[0], op.operands[1]
        if ir.RankedTensorType(rhs.type).rank != 2 or ir.RankedTensorType(lhs.type).rank < 2:
            return None
        if not isinstance(lhs.owner, ir.Block) and lhs.owner.operation.name == "ttensor.transpose":
            return None
        return lhs
    if name in ("ttensor.unary", "ttensor.cast"):
        return op.operands[0]
    if name == "ttensor.binary":
        result = ir.RankedTensorType(op.results[0].type)
        same = [o for o in op.operands if ir.RankedTensorType(o.type).shape == result.shape]
        other = [o for o in op.operands if o not in same]
        if len(same) == 1 and len(other) == 1 and ir.RankedTensorType(other[0].type).rank <= 1:
            return same[0]
    return None


def row_chain(op) -> list:
    """The ops before all_reduce `op`'s matmul that run in its row chunks (marked ROWS_OF by `mark`), first
    to last, the matmul not included."""
    chain = []
    x = row_input(op.operands[0].owner)
    while x is not None and not isinstance(x.owner, ir.Block) and ROWS_OF in x.owner.attributes:
        chain.insert(0, x.owner)
        x = row_input(x.owner)
    return chain


def _mark_rows(op, k: int) -> int:
    """Marks the ops whose rows lead to chunked all_reduce `op`'s matmul's lhs, walking back while each value
    on the way has no other reader and its producer keeps rows (`_row_input`); returns how many."""
    marked = 0
    x = row_input(op.operands[0].owner)
    while x is not None and not isinstance(x.owner, ir.Block) and len(list(x.uses)) == 1 and x.owner.results[0] == x \
            and len(x.owner.results) == 1 and ROWS_OF not in x.owner.attributes:
        producer = x.owner
        nxt = row_input(producer)
        if nxt is None or [int(d) for d in ir.RankedTensorType(nxt.type).shape[:-1]] != \
                [int(d) for d in ir.RankedTensorType(x.type).shape[:-1]]:
            break
        producer.attributes[ROWS_OF] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), k)
        marked += 1
        x = nxt
    return marked


def mark(fn, chunks) -> int:
    """Marks `fn`'s eligible all_reduces with `chunks` (a count, or a tuple of uneven chunks' weights:
    tessera.chunks and tessera.chunk_weights), except those that carry their own (op.all_reduce's chunks=),
    which must be eligible where more than 1 (a LoweringError at the op says why not); returns how many run in
    chunks."""
    default = chunk_spec(chunks)
    ops = [op for op in graph_ops(fn) if op.operation.name == "tdist.all_reduce"]
    buckets: dict[int, int] = {}
    for op in ops:
        if BUCKET in op.attributes:
            b = ir.IntegerAttr(op.attributes[BUCKET]).value
            buckets[b] = buckets.get(b, 0) + 1
    marked = 0
    i64 = ir.IntegerType.get_signless(64)
    for op in ops:
        own = CHUNKS in op.attributes
        k, weights = (chunks_of(op), weights_of(op)) if own else default
        if k == 1:
            continue
        why = whole_because(op, buckets)
        if why is not None and own:
            raise LoweringError(op, f"op.all_reduce(chunks={weights or k}) cannot run in row chunks: {why}")
        if why is None:
            op.attributes[CHUNKS] = ir.IntegerAttr.get(i64, k)
            if weights is not None:
                op.attributes[CHUNK_WEIGHTS] = ir.ArrayAttr.get([ir.IntegerAttr.get(i64, w) for w in weights])
            _mark_rows(op, k)
            marked += 1
    return marked


def chunks_of(op) -> int:
    """The chunk count graph lowering splits all_reduce `op` into (1: whole)."""
    return ir.IntegerAttr(op.attributes[CHUNKS]).value if CHUNKS in op.attributes else 1


def weights_of(op) -> tuple[int, ...] | None:
    """The weights of all_reduce `op`'s uneven chunks (tessera.chunk_weights), None where they are equal."""
    if CHUNK_WEIGHTS not in op.attributes:
        return None
    return tuple(ir.IntegerAttr(w).value for w in ir.ArrayAttr(op.attributes[CHUNK_WEIGHTS]))


def chunk_bounds(M: str, k: int, weights: tuple[int, ...] | None) -> list[str]:
    """The extent expressions of the k + 1 row bounds of k chunks of `M` rows (the first "0", the last M):
    equal chunks of ceil(M/(k*ROW_ALIGN))*ROW_ALIGN rows, or with `weights` chunk i ending at
    ceil(M*(w_0+...+w_i)/(W*ROW_ALIGN))*ROW_ALIGN (W: their sum), each bound clamped to M, so that every chunk
    but the one reaching M is a whole multiple of ROW_ALIGN rows (and those after it empty)."""
    if weights is None:
        step = f"ceil(({M})/{ROW_ALIGN * k})*{ROW_ALIGN}"
        inner = [f"min({i}*{step}, {M})" for i in range(1, k)]
    else:
        total, cum, inner = sum(weights), 0, []
        for w in weights[:-1]:
            cum += w
            inner.append(f"min(ceil((({M})*{cum})/{total * ROW_ALIGN})*{ROW_ALIGN}, {M})")
    return ["0", *inner, M]


def run(module, chunks=1) -> None:
    """Marks the eligible all_reduces of every `tessera.function` of `module` (an Operation); chunks=1 marks
    none but those asking for chunks of their own; a tuple of weights asks uneven chunks."""
    if chunk_spec(chunks) is None:
        raise ValueError(f"tessera-pipeline-collectives: chunks must be positive, got {chunks}"
                         if type(chunks) is int else
                         f"tessera-pipeline-collectives: chunk weights must be positive ints, got {chunks}")
    for fn in module.regions[0].blocks[0].operations:
        if fn.operation.name == "func.func" and "tessera.function" in fn.attributes and fn.regions[0].blocks:
            mark(fn, chunks)
