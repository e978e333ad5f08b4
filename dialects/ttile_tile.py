"""The tile-level part of ``ttile`` (one dialect with the SIMT part in ``ttile.py``, which imports this module):
fragments and tensor-core MMA, fragment loads and stores, async copies into shared memory, barriers,
reductions over lanes and cooperative groups (architecture §3.4, execution model §2 and §5, portability
guide §4 and §6).

Collective ops (mma, ldmatrix, store_fragment, the reductions, group_sync) are not Pure even where they do
not touch memory: every thread of the warp or group must reach them together, and MLIR has no "convergent"
trait to stop a pass from sinking a Pure op into a branch that only some lanes take.

The optional ``transpose`` of `ttile.ldmatrix` is not a parameter of its Python builder (dialects.ext has no
optional attributes): set it on the built op.
"""

# No `from __future__ import annotations` here: ext reads the annotations as live types.
import typing
from collections.abc import Sequence

from ..mlir import ext, ir
from . import tmem
from .support import (Invalid, attribute, constant_int, int_attribute, ints_attribute, is_power_of_two,
                      positional_groups, str_attribute, verifier)
from .ttile import TTile

FRAGMENT_ROLES = ("a", "b", "acc")
REDUCE_KINDS = ("sum", "max", "min")
ASYNC_CHUNKS = (4, 8, 16)  # the sizes one cp.async instruction copies


class FragmentType(TTile.Type, name="fragment"):
    """``!ttile.fragment<[rows, cols], elem, role>``: a rows×cols matrix held collectively by the registers of
    one warp — MMA operand A ("a"), operand B ("b") or accumulator ("acc"). Which lane holds which elements
    is the target's choice (an mma.sync layout, an MFMA layout, a vector on the CPU), so the IR never
    depends on the warp size."""

    shape: ir.ArrayAttr
    elem: ir.TypeAttr
    role: ir.StringAttr


class AsyncTokenType(TTile.Type, name="async_token"):
    """``!ttile.async_token``: an asynchronous copy in flight, or a committed group of them."""


class GroupType(TTile.Type, name="group"):
    """``!ttile.group<size>``: a partition of the thread block into groups of `size` consecutive threads."""

    size: ir.IntegerAttr


# -- checks shared by the ops -------------------------------------------------------------------------------

def _fragment(value, what: str, role: str | None = None) -> tuple[int, int, ir.Type]:
    """(rows, cols, element type) of a well-formed fragment `value`, of role `role` when given. (Types
    defined in Python have no verifier of their own, so the ops that use them check them.)"""
    t = value.type
    if not isinstance(t, FragmentType):
        raise Invalid(f"{what} must be a !ttile.fragment, got {t}")
    shape = [a.value if isinstance(a, ir.IntegerAttr) else None for a in ir.ArrayAttr(t.shape)]
    if len(shape) != 2 or None in shape or min(shape) <= 0:
        raise Invalid(f"{what} must have a shape of two positive sizes [rows, cols], got {t}")
    got = ir.StringAttr(t.role).value
    if got not in FRAGMENT_ROLES:
        raise Invalid(f"{what} has role '{got}'; fragment roles are {', '.join(FRAGMENT_ROLES)}")
    if role is not None and got != role:
        raise Invalid(f"{what} must be a fragment of role '{role}', got {t}")
    return shape[0], shape[1], ir.TypeAttr(t.elem).value


def _group_size(value) -> int:
    t = value.type
    if not isinstance(t, GroupType):
        raise Invalid(f"operand must be a !ttile.group, got {t}")
    size = t.size.maybe_downcast()
    if not isinstance(size, ir.IntegerAttr) or not is_power_of_two(size.value):
        # A power of two never straddles a warp unevenly on any target: a smaller group divides the warp,
        # a larger one is whole warps.
        raise Invalid(f"group size must be a positive power of two, got {t}")
    return size.value


def _scalar_reduction(op) -> None:
    """The rules both lane reductions share."""
    str_attribute(op, "kind", REDUCE_KINDS)
    value, result = op.operation.operands[0].type, op.operation.results[0].type
    if not isinstance(value, (ir.IntegerType, ir.FloatType)):
        raise Invalid(f"reduces scalar integers or floats, got {value}")
    if result != value:
        raise Invalid(f"result type {result} must equal the reduced value's type {value}")


def _window(mem: ir.MemRefType, indices, extents: list[int], what: str) -> None:
    """Checks that the box of `extents` over `mem`'s innermost dimensions, starting at `indices`, lies inside
    `mem` as far as extents and indices are known when compiling."""
    if len(indices) != mem.rank:
        raise Invalid(f"needs {mem.rank} indices for the {what}, got {len(indices)}")
    first = mem.rank - len(extents)
    for dim, extent in enumerate(extents, start=first):
        size = None if mem.is_dynamic_dim(dim) else mem.get_dim_size(dim)
        start = constant_int(indices[dim])
        if size is not None and extent > size:
            raise Invalid(f"extent {extent} does not fit dimension {dim} ({size}) of the {what}")
        if size is not None and start is not None and not 0 <= start <= size - extent:
            raise Invalid(f"{start}..{start + extent - 1} is out of bounds of dimension {dim} ({size}) of "
                          f"the {what}")


def _contiguous_rows(mem: ir.MemRefType, what: str) -> None:
    steps, _ = tmem.strides(mem)
    if steps[-1] not in (None, 1):
        raise Invalid(f"the {what}'s innermost dimension must be contiguous (stride 1), got {mem}")


def _fragment_memory(op, fragment_value, mem_index: int, what: str) -> tuple[ir.MemRefType, list[int]]:
    """Rules ldmatrix and store_fragment share: the memory's rank and element type. Returns the memref type
    and the fragment's [rows, cols]."""
    rows, cols, elem = _fragment(fragment_value, "the fragment")
    mem = tmem.memref_of(op.operation.operands[mem_index], f"the {what}")
    if mem.rank < 2:
        raise Invalid(f"the {what} must have rank 2 or more (a fragment covers its two innermost "
                      f"dimensions), got {mem}")
    if mem.element_type != elem:
        raise Invalid(f"element types differ: the fragment holds {elem}, the {what} {mem.element_type}")
    return mem, [rows, cols]


# -- fragments and MMA --------------------------------------------------------------------------------------

class MmaOp(TTile.Operation, name="mma"):
    """``D = A × B + C`` on warp fragments: A is M×K (role "a"), B is K×N ("b"), C and D are M×N ("acc").
    `shape = [m, n, k]` is the tensor-core instruction the product is issued as (the kernel metadata's
    ``fragments.mma``); M, N and K are multiples of it. Inputs are bf16, f16, tf32 or fp8 (f8E4M3FN and
    f8E5M2, which may be mixed) with an f32 accumulator, or i8 with an i32 one. Targets without the
    instruction compute the same product with vector FMAs (portability guide §4.1)."""

    a: ext.Operand[FragmentType]
    b: ext.Operand[FragmentType]
    c: ext.Operand[FragmentType]
    shape: ir.ArrayAttr
    result: ext.Result[FragmentType]

    @verifier
    def verify_invariants(self):
        a, b, c = self.operation.operands
        m, k, ta = _fragment(a, "A", "a")
        kb, n, tb = _fragment(b, "B", "b")
        mc, nc, tc = _fragment(c, "C", "acc")
        if self.operation.results[0].type != c.type:
            raise Invalid(f"result type {self.operation.results[0].type} must equal C's type {c.type}")
        if kb != k:
            raise Invalid(f"A is {m}x{k} but B is {kb}x{n}: A's columns must equal B's rows")
        if (mc, nc) != (m, n):
            raise Invalid(f"C must be {m}x{n} (A's rows by B's columns), got {mc}x{nc}")
        instr = ints_attribute(self, "shape")
        if len(instr) != 3 or min(instr) <= 0:
            raise Invalid(f"shape must be three positive sizes [m, n, k], got {instr}")
        if m % instr[0] or n % instr[1] or k % instr[2]:
            raise Invalid(f"M x N x K = {m}x{n}x{k} is not a multiple of the instruction shape {instr}")
        fp8 = (ir.Float8E4M3FNType, ir.Float8E5M2Type)
        floats = (ir.BF16Type, ir.F16Type, ir.FloatTF32Type) + fp8
        int8 = isinstance(ta, ir.IntegerType) and ta.width == 8
        if not (isinstance(ta, floats) or int8):
            raise Invalid(f"inputs must be bf16, f16, tf32, f8E4M3FN, f8E5M2 or i8, got {ta}")
        if tb != ta and not (isinstance(ta, fp8) and isinstance(tb, fp8)):
            raise Invalid(f"A and B must have one element type (only the fp8 kinds mix), got {ta} and {tb}")
        want = ir.IntegerType.get_signless(32, tc.context) if int8 else ir.F32Type.get(tc.context)
        if tc != want:
            raise Invalid(f"{ta} inputs accumulate in {want}, got {tc}")


class FillOp(TTile.Operation, name="fill", traits=[ext.Pure]):
    """A fragment with every element `value` (the zero accumulator before the first `ttile.mma`)."""

    value: ext.Operand[typing.Any]
    result: ext.Result[FragmentType]

    @verifier
    def verify_invariants(self):
        _, _, elem = _fragment(self.operation.results[0], "the result")
        value = self.operation.operands[0].type
        if value != elem:
            raise Invalid(f"value of type {value} must have the fragment's element type {elem}")


@positional_groups
class LdmatrixOp(TTile.Operation, name="ldmatrix"):
    """Warp-collective load of a fragment from shared memory: element (i, j) comes from
    ``source[..., r + i, c + j]`` where `indices` = [..., r, c] (leading indices pick, e.g., the pipeline
    stage of a multi-buffered panel). With the unit attribute `transpose` it comes from
    ``source[..., r + j, c + i]`` (a K-major B panel). NVIDIA: ``ldmatrix``; AMD: LDS reads; Intel: SLM block
    reads; CPU: vector loads."""

    source: ext.Operand[ir.MemRefType]
    indices: Sequence[ext.Operand[ir.IndexType]]
    result: ext.Result[FragmentType]

    @verifier
    def verify_invariants(self):
        mem, box = _fragment_memory(self, self.operation.results[0], 0, "source")
        if tmem.memory_space(mem) != "workgroup":
            raise Invalid(f"loads from shared memory (#gpu.address_space<workgroup>), got {mem}")
        _contiguous_rows(mem, "source")
        transposed = attribute(self, "transpose", ir.UnitAttr, "a unit attribute", required=False) is not None
        _window(mem, list(self.operation.operands[1:]), box[::-1] if transposed else box, "source")


@positional_groups
class StoreFragmentOp(TTile.Operation, name="store_fragment"):
    """Warp-collective store of a fragment: element (i, j) goes to ``dest[..., r + i, c + j]`` where
    `indices` = [..., r, c]. The destination is global or shared memory: a fragment is held by a whole warp,
    so no one thread's private memory can take it."""

    value: ext.Operand[FragmentType]
    dest: ext.Operand[ir.MemRefType]
    indices: Sequence[ext.Operand[ir.IndexType]]

    @verifier
    def verify_invariants(self):
        mem, box = _fragment_memory(self, self.operation.operands[0], 1, "destination")
        if tmem.memory_space(mem) == "private":
            raise Invalid(f"stores to global or shared memory, not to private memory: {mem}")
        _window(mem, list(self.operation.operands[2:]), box, "destination")


# -- asynchronous copies ------------------------------------------------------------------------------------

@positional_groups
class AsyncCopyOp(TTile.Operation, name="async_copy"):
    """Starts copying a box of `shape` elements (over the innermost dimensions) from global memory at
    ``source[source indices]`` to shared memory at ``dest[dest indices]``; `indices` holds the source's
    indices, then the destination's (as memref.dma_start does). Every thread of the block executes it with
    the same operands; the lowering splits each row of the box into `chunk`-byte pieces (4, 8 or 16, each
    aligned to its size in both memories) spread over the threads: NVIDIA's cp.async, elsewhere a prefetching
    copy.

    The copy is complete only after `ttile.async_commit` and a `ttile.async_wait` covering its group; other
    threads see the data after a `ttile.barrier` that follows the wait."""

    source: ext.Operand[ir.MemRefType]
    dest: ext.Operand[ir.MemRefType]
    indices: Sequence[ext.Operand[ir.IndexType]]
    shape: ir.ArrayAttr
    chunk: ir.IntegerAttr
    token: ext.Result[AsyncTokenType]

    @verifier
    def verify_invariants(self):
        operands = list(self.operation.operands)
        src = tmem.memref_of(operands[0], "source")
        dst = tmem.memref_of(operands[1], "destination")
        if tmem.memory_space(src) != "global":
            raise Invalid(f"copies from global memory, got {src}")
        if tmem.memory_space(dst) != "workgroup":
            raise Invalid(f"copies to shared memory (#gpu.address_space<workgroup>), got {dst}")
        if src.element_type != dst.element_type:
            raise Invalid(f"element types differ: {src.element_type} and {dst.element_type}")
        if len(operands) - 2 != src.rank + dst.rank:
            raise Invalid(f"needs {src.rank} source and {dst.rank} destination indices, got "
                          f"{len(operands) - 2} in all")
        box = ints_attribute(self, "shape")
        if not 1 <= len(box) <= min(src.rank, dst.rank) or min(box) <= 0:
            raise Invalid(f"shape must be 1 to {min(src.rank, dst.rank)} positive sizes, got {box}")
        chunk = int_attribute(self, "chunk")
        if chunk not in ASYNC_CHUNKS:
            raise Invalid(f"chunk must be 4, 8 or 16 bytes, got {chunk}")
        elem = tmem.element_bytes(src.element_type)
        if elem is None:
            raise Invalid(f"element type must be an integer, a float or a vector of them, got {src.element_type}")
        if box[-1] * elem % chunk:
            raise Invalid(f"a row of the box is {box[-1] * elem} bytes, which {chunk}-byte chunks do not divide")
        for mem, indices, what in ((src, operands[2:2 + src.rank], "source"),
                                   (dst, operands[2 + src.rank:], "destination")):
            _contiguous_rows(mem, what)
            self._check_alignment(mem, indices, len(box), elem, chunk, what)
            _window(mem, indices, box, what)
        alloc = tmem.defining(operands[1], "tmem.alloc")
        align = alloc.attributes["align"] if alloc is not None and "align" in alloc.attributes else None
        if isinstance(align, ir.IntegerAttr) and align.value < chunk:
            raise Invalid(f"{chunk}-byte chunks need the destination aligned to {chunk} bytes, but its "
                          f"'tmem.alloc' has align = {align.value}")

    @staticmethod
    def _check_alignment(mem, indices, box_rank: int, elem: int, chunk: int, what: str) -> None:
        """Every chunk starts on a multiple of its size: so must the box's first column and, for a box of
        several rows, the memory's row pitch (padding that breaks it is the usual mistake)."""
        start = constant_int(indices[-1])
        if start is not None and start * elem % chunk:
            raise Invalid(f"the box starts {start * elem} bytes into a row of the {what}, not on a {chunk}-byte "
                          f"boundary")
        steps, _ = tmem.strides(mem)
        if box_rank >= 2 and steps[-2] is not None and steps[-2] * elem % chunk:
            raise Invalid(f"rows of the {what} are {steps[-2] * elem} bytes apart, not a multiple of the "
                          f"{chunk}-byte chunk")


@positional_groups
class AsyncCommitOp(TTile.Operation, name="async_commit"):
    """Closes a group of the calling thread's async copies started so far (cp.async.commit_group); the result
    stands for the group. `copies` names them, so that passes see which copies the group holds."""

    copies: Sequence[ext.Operand[AsyncTokenType]]
    group: ext.Result[AsyncTokenType]

    @verifier
    def verify_invariants(self):
        copies = list(self.operation.operands)
        if not copies:
            raise Invalid("needs at least one copy to commit")
        for i, token in enumerate(copies):
            if tmem.defining(token, "ttile.async_commit") is not None:
                raise Invalid(f"operand {i} is a group; groups hold copies, not other groups")


class AsyncWaitOp(TTile.Operation, name="async_wait"):
    """Waits until at most `pending` of the calling thread's most recently committed groups are still in
    flight (cp.async.wait_group); `group` names the oldest group that is complete on return — with
    `pending` = 0, the last one committed."""

    group: ext.Operand[AsyncTokenType]
    pending: ir.IntegerAttr

    @verifier
    def verify_invariants(self):
        pending = int_attribute(self, "pending")
        if pending < 0:
            raise Invalid(f"pending must be non-negative, got {pending}")
        if tmem.defining(self.operation.operands[0], "ttile.async_copy") is not None:
            raise Invalid("waits on a group: commit the copy with 'ttile.async_commit' first")


class BarrierOp(TTile.Operation, name="barrier"):
    """Every thread of the block waits here until all have arrived, and shared-memory writes made before it
    are visible to all after it (bar.sync, s_barrier, a work-group barrier)."""


# -- reductions and cooperative groups ----------------------------------------------------------------------

class WarpReduceOp(TTile.Operation, name="warp_reduce"):
    """Every lane gets the `kind` (sum | max | min) of `value` over all lanes of its warp, however many the
    target has. The combining order is a fixed butterfly, so results are reproducible on a target."""

    value: ext.Operand[typing.Any]
    kind: ir.StringAttr
    result: ext.Result[typing.Any]

    @verifier
    def verify_invariants(self):
        _scalar_reduction(self)


class GroupReduceOp(TTile.Operation, name="group_reduce"):
    """Every lane gets the `kind` (sum | max | min) of `value` over its group: the aligned `group_size`
    consecutive lanes it belongs to (lanes 0..7, 8..15, … for 8), combined in a fixed butterfly order.
    `group_size` is a power of two; that it does not exceed the target's warp size is checked when lowering
    for that target."""

    value: ext.Operand[typing.Any]
    kind: ir.StringAttr
    group_size: ir.IntegerAttr
    result: ext.Result[typing.Any]

    @verifier
    def verify_invariants(self):
        _scalar_reduction(self)
        size = int_attribute(self, "group_size")
        if not is_power_of_two(size):
            raise Invalid(f"group_size must be a positive power of two, got {size}")


class CooperativeGroupOp(TTile.Operation, name="cooperative_group", traits=[ext.Pure]):
    """Partitions the thread block into groups of the result type's size, of consecutive threads in linear
    local-id order (execution model §5: ``g = tile.cooperative_group(size=64)``)."""

    group: ext.Result[GroupType]

    @verifier
    def verify_invariants(self):
        _group_size(self.operation.results[0])


class GroupSyncOp(TTile.Operation, name="group_sync"):
    """A barrier among the calling thread's group (``g.sync()``): its threads wait for each other, and their
    shared-memory writes before it are visible to the group after it."""

    group: ext.Operand[GroupType]

    @verifier
    def verify_invariants(self):
        _group_size(self.operation.operands[0])


class ThreadRankOp(TTile.Operation, name="thread_rank", traits=[ext.Pure]):
    """The calling thread's position in its group, in [0, size) (``g.thread_rank()``)."""

    group: ext.Operand[GroupType]
    result: ext.Result[ir.IndexType]

    @verifier
    def verify_invariants(self):
        _group_size(self.operation.operands[0])


# -- atomics and fences -------------------------------------------------------------------------------------
# Orders are C++'s (and PTX's) names; scopes say which threads the order is promised to: those of the calling
# thread's block, of the whole device (every block of the launch, and other kernels on it), or of the system
# (the host and other devices too) — CUDA's thread_scope_block / _device / _system, OpenCL's work_group /
# device / all_svm_devices.

ATOMIC_ORDERS = ("relaxed", "acquire", "release", "acq_rel", "seq_cst")
ATOMIC_SCOPES = ("block", "device", "system")
ATOMIC_KINDS = ("add", "max")


def _atomic_element(op, mem_at: int, value_types: list, what: str) -> ir.Type:
    """The element type of the accessed memref (operand `mem_at`), checked against the value operands, the
    result and the indices; the memory must be global or shared (another thread can see it)."""
    mem = op.operation.operands[mem_at].type
    if not isinstance(mem, ir.MemRefType):
        raise Invalid(f"accesses a memref, got {mem}")
    mem = ir.MemRefType(mem)
    if tmem.memory_space(mem) == "private":
        raise Invalid(f"an atomic on private memory is shared with no other thread: {mem}")
    indices = len(op.operation.operands) - mem_at - 1
    if indices != mem.rank:
        raise Invalid(f"takes one index per dimension of {mem}: {mem.rank}, got {indices}")
    elem = mem.element_type
    for t in value_types + [op.operation.results[0].type]:
        if t != elem:
            raise Invalid(f"{what} and result must have the memory's element type {elem}, got {t}")
    return elem


def _integer_32_or_64(t: ir.Type) -> bool:
    return isinstance(t, ir.IntegerType) and ir.IntegerType(t).width in (32, 64)


@positional_groups
class AtomicRmwOp(TTile.Operation, name="atomic_rmw"):
    """``old = mem[indices]; mem[indices] = old <kind> value`` as one indivisible step, returning `old`.
    `kind` is add (i32, i64 wrapping; f32) or max (signed i32, i64; f32 as IEEE 754-2019 maximum: a NaN
    wins, -0 < +0 where the target orders zeros, docs/language.md). `order` and `scope` as for
    `ttile.fence`; a relaxed atomic is still indivisible, it only orders nothing else."""

    value: ext.Operand[typing.Any]
    mem: ext.Operand[ir.MemRefType]
    indices: Sequence[ext.Operand[ir.IndexType]]
    kind: ir.StringAttr
    order: ir.StringAttr
    scope: ir.StringAttr
    result: ext.Result[typing.Any]

    @verifier
    def verify_invariants(self):
        kind = str_attribute(self, "kind", ATOMIC_KINDS)
        str_attribute(self, "order", ATOMIC_ORDERS)
        str_attribute(self, "scope", ATOMIC_SCOPES)
        elem = _atomic_element(self, 1, [self.operation.operands[0].type], "value")
        if not (_integer_32_or_64(elem) or isinstance(elem, ir.F32Type)):
            allowed = "i32, i64 or f32"
            raise Invalid(f"atomic {kind} takes {allowed} elements, got {elem}")


@positional_groups
class AtomicCasOp(TTile.Operation, name="atomic_cas"):
    """Compare and swap: ``old = mem[indices]; if old == compare: mem[indices] = value`` as one indivisible
    step, returning `old` (the swap happened iff old == compare). i32 or i64 elements. `order` applies when
    the swap happens; a failed compare is only a load, ordered as acquire where `order` has an acquire part
    (acquire, acq_rel, seq_cst), relaxed otherwise."""

    compare: ext.Operand[typing.Any]
    value: ext.Operand[typing.Any]
    mem: ext.Operand[ir.MemRefType]
    indices: Sequence[ext.Operand[ir.IndexType]]
    order: ir.StringAttr
    scope: ir.StringAttr
    result: ext.Result[typing.Any]

    @verifier
    def verify_invariants(self):
        str_attribute(self, "order", ATOMIC_ORDERS)
        str_attribute(self, "scope", ATOMIC_SCOPES)
        elem = _atomic_element(self, 2, [self.operation.operands[0].type, self.operation.operands[1].type],
                               "compare, value")
        if not _integer_32_or_64(elem):
            raise Invalid(f"compare-and-swap takes i32 or i64 elements, got {elem}")


class FenceOp(TTile.Operation, name="fence"):
    """Orders the calling thread's memory accesses before and after it, as seen by the threads of `scope`
    (block, device, system): `order` acquire (later accesses stay after the loads before it), release
    (earlier accesses stay before the stores after it), acq_rel (both) or seq_cst (both, plus one total order
    of all seq_cst fences and atomics). A relaxed fence orders nothing, so it is refused."""

    order: ir.StringAttr
    scope: ir.StringAttr

    @verifier
    def verify_invariants(self):
        if str_attribute(self, "order", ATOMIC_ORDERS) == "relaxed":
            raise Invalid("a relaxed fence orders nothing; order must be acquire, release, acq_rel or seq_cst")
        str_attribute(self, "scope", ATOMIC_SCOPES)
