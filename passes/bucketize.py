"""Gradient buckets: a function's all_reduces grouped by size and issued as soon as their tensors exist.

A data-parallel training step takes gradients (`value_and_grad`) and all_reduces each over the mesh's data
axis before the update. Written that way, every all_reduce follows the whole backward pass; this pass (the
canonical stage's last, ``tessera-bucketize`` in tessera-opt) makes them overlappable, as PyTorch DDP's
reducer does: the all_reduces whose operand another op of the body produces are taken in the order their
operands are produced (the backward produces the last layer's gradients first: DDP's reverse parameter
order), and consecutive ones that agree in mesh, axis, reduction, algorithm, determinism and element type
fill a bucket until it holds `bucket_bytes` (25 MiB by default, DDP's ``bucket_cap_mb``; the compile option
``bucket_bytes`` sets it, and an op's own ``bucket=`` overrides it for the bucket it opens). Each bucket's all_reduces move to right after the op that
produces the bucket's last tensor, so they start while the rest of the backward still runs, and carry
``tessera.bucket`` (the bucket's index in issue order), which the launch plan keeps (docs/image-format.md).

A tensor with a dynamic extent has no size here: it is a bucket of its own, moved like the others. A bucket
also closes before a tensor whose arrival would move it past a reader of an earlier member's result
(an update written between the all_reduces): moving a collective never moves it past its readers.

Before grouping, each reduced tensor is produced as early as the backward allows: a layer's backward writes its
input gradient's GEMM (dX = dY·Wᵀ, which the layer before needs) ahead of its weight gradient's (dW = Xᵀ·dY,
which only the all_reduce reads), so the bucket would wait for both. Where a matmul that the tensor does not
depend on stands between the previous reduced tensor's producer and this one's, the ops computing this tensor
there (its GEMM, the transpose and casts feeding it) move to before the first such matmul: the bucket then starts
one GEMM earlier and dX's GEMM runs beside it. Only pure ``ttensor`` ops move, never past another reduced
tensor's producer or any other op, so the order in which gradients are produced, and with it every bucket's
members and order, is unchanged; independent ops in another order compute the same values bit for bit.
"""

from __future__ import annotations

from ..mlir import ir
from ..options import DEFAULT_BUCKET_BYTES
from .schedule_ir import graph_ops

BUCKET = "tessera.bucket"

_BYTES = {"f64": 8, "f32": 4, "i64": 8, "i32": 4, "bf16": 2, "f16": 2, "i16": 2, "i8": 1, "i1": 1}


def _size(value) -> int | None:
    """Bytes of a statically shaped tensor; None where an extent is dynamic or the element type unknown."""
    t = ir.RankedTensorType(value.type)
    width = _BYTES.get(str(t.element_type))
    if width is None or not t.has_static_shape:
        return None
    n = width
    for d in t.shape:
        n *= d
    return n


def _key(op) -> tuple:
    a = op.attributes
    return tuple(str(a[k]) for k in ("mesh_axes", "mesh_shape", "axis", "op", "algo", "deterministic")) + \
        (str(ir.RankedTensorType(op.operands[0].type).element_type),)


def _limit(op, default: int) -> int:
    own = ir.IntegerAttr(op.attributes["bucket_bytes"]).value if "bucket_bytes" in op.attributes else 0
    return own or default


def _reduced(fn) -> list:
    """The all_reduces of `fn` whose operand another op of its body produces, in body order."""
    ops = graph_ops(fn)
    body = {op.operation for op in ops}
    return [op for op in ops if op.operation.name == "tdist.all_reduce"
            and not isinstance(op.operands[0].owner, ir.Block) and op.operands[0].owner.operation in body]


def buckets(fn, bucket_bytes: int = DEFAULT_BUCKET_BYTES) -> list[list]:
    """The buckets of `fn`'s all_reduces, each a list of the ops in issue order, without moving anything."""
    ops = graph_ops(fn)
    position = {op.operation: i for i, op in enumerate(ops)}

    def produced(op) -> int:
        return position[op.operands[0].owner.operation]

    def first_read(op) -> int:
        return min((position[u.owner.operation] for u in op.results[0].uses
                    if u.owner.operation in position), default=len(ops))

    reduces = sorted(_reduced(fn), key=produced)
    done: list[list] = []
    open_: dict[tuple, tuple[list, int, int]] = {}   # key -> (members, bytes so far, its limit)
    for op in reduces:
        key, size = _key(op), _size(op.operands[0])
        if key in open_:
            members, total, limit = open_[key]
            anchor = max(produced(m) for m in members + [op])
            if size is None or any(first_read(m) <= anchor for m in members + [op]):
                done.append(members)
                del open_[key]
        if key not in open_:
            open_[key] = ([], 0, _limit(op, bucket_bytes))
        members, total, limit = open_[key]
        members.append(op)
        total += size or 0
        if size is None or total >= limit:
            done.append(members)
            del open_[key]
        else:
            open_[key] = (members, total, limit)
    done.extend(members for members, _, _ in open_.values())
    done.sort(key=lambda b: max(produced(m) for m in b))
    return done


def _hoist(fn, producer, barriers: set) -> None:
    """Moves `producer` and the ops computing its operands since the last barrier (another reduced tensor's
    producer, or any op but a pure ttensor one) to before the first matmul among those ops that it does not
    depend on (module docstring)."""
    ops = graph_ops(fn)
    window = []   # latest first
    for op in reversed(ops[:[op.operation for op in ops].index(producer.operation)]):
        if op.operation in barriers or not op.operation.name.startswith("ttensor."):
            break
        window.append(op)
    needed = {producer.operation}
    for op in window:   # an op is needed where a needed op reads one of its results
        if any(u.owner.operation in needed for r in op.results for u in r.uses):
            needed.add(op.operation)
    free = [i for i, op in enumerate(window) if op.operation not in needed and op.operation.name == "ttensor.matmul"]
    if free:
        first = window[free[-1]]
        for op in [op for op in reversed(window[:free[-1]]) if op.operation in needed] + [producer]:
            op.operation.move_before(first.operation)


def _produce_early(fn) -> None:
    """Each reduced tensor's producer moved ahead of the matmuls it does not depend on (module docstring), the
    earliest produced first."""
    position = {op.operation: i for i, op in enumerate(graph_ops(fn))}
    producers = {op.operands[0].owner.operation: op.operands[0].owner for op in _reduced(fn)}
    for p in sorted(producers, key=position.__getitem__):
        _hoist(fn, producers[p], set(producers) - {p})


def bucketize(fn, bucket_bytes: int = DEFAULT_BUCKET_BYTES) -> int:
    """Groups and moves one function's all_reduces (module docstring); returns the number of buckets."""
    _produce_early(fn)
    found = buckets(fn, bucket_bytes)
    position = {op.operation: i for i, op in enumerate(graph_ops(fn))}
    placed: dict = {}   # a producer -> the last collective placed after it (buckets sharing it keep their order)
    for i, members in enumerate(found):
        anchor = max((m.operands[0].owner.operation for m in members), key=position.__getitem__)
        after = placed.get(anchor, anchor)
        for m in members:
            m.operation.move_after(after)
            m.attributes[BUCKET] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), i)
            after = m.operation
        placed[anchor] = after
    return len(found)


def run(module, bucket_bytes: int = DEFAULT_BUCKET_BYTES) -> None:
    """Bucketizes every `tessera.function` of `module` (an Operation)."""
    if bucket_bytes <= 0:
        raise ValueError(f"tessera-bucketize: bucket-bytes must be positive, got {bucket_bytes}")
    for fn in module.regions[0].blocks[0].operations:
        if fn.operation.name == "func.func" and "tessera.function" in fn.attributes and fn.regions[0].blocks:
            bucketize(fn, bucket_bytes)
