"""``tmem``: the memory dialect — allocations with a scope and an alignment, placement hints, aliasing views,
and the padding and swizzle layouts that keep shared memory free of bank conflicts.

Memory is a builtin ``memref``. Its scope is also its memory space, written as the GPU dialect's address
spaces so that Tile IR stays portable (spec: shared memory = LDS on AMD = SLM on Intel):

    scope      memref memory space
    global     none, or #gpu.address_space<global>
    shared     #gpu.address_space<workgroup>
    private    #gpu.address_space<private>
    register   #gpu.address_space<private>   (per-thread storage the lowering must keep in registers)

so any op can tell where a memref lives from its type alone. The layout ops `tmem.pad` and `tmem.swizzle`
work on tensors, before memory exists: they ask the memory-planning phase to lay out the buffer that will hold
the value that way; the plan is written on the `tmem.alloc` it creates.

The memory-planning phase of the Graph IR states its plan with two decision ops that stand right before the
Graph IR op they are about (as `tsched.schedule` does, for the same reason): `tmem.slot`, the buffer its result
lives in, and `tmem.stage`, a staging buffer its kernel allocates.

Optional attributes (``pad``, ``swizzle``, ``fraction``) are not parameters of the Python builders
(dialects.ext has no optional attributes): set them on the built op.
"""

# No `from __future__ import annotations` here: ext reads the annotations as live types.
import re
from collections.abc import Sequence

from ..mlir import ext, ir
from .support import (Invalid, attribute, int_attribute, ints_attribute, is_power_of_two, positional_groups,
                      str_attribute, verifier)
from .tsched import decided_op

SCOPES = ("global", "shared", "private", "register")
_SPACE_OF_SCOPE = {"global": "global", "shared": "workgroup", "private": "private", "register": "private"}
L2_POLICIES = ("persist", "normal", "stream")
# Swizzles permute the 16-byte chunks of each 128-byte line (TMA's and CUTLASS's 32B/64B/128B patterns).
SWIZZLES = (32, 64, 128)
SWIZZLE_CHUNK = 16
SWIZZLE_LINE = 128


class TMem(ext.Dialect, name="tmem"):
    pass


# -- what the types say (also used by ttile) ----------------------------------------------------------------

def memory_space(t: ir.MemRefType) -> str:
    """'global', 'workgroup' or 'private': where a memref lives (see the table above)."""
    space = t.memory_space
    if space is None:
        return "global"
    m = re.fullmatch(r"#gpu\.address_space<(\w+)>", str(space))
    if m is None:
        raise Invalid(f"memory space must be a #gpu.address_space (Tile IR is target-neutral), got {space}")
    return m.group(1)


def element_bytes(t: ir.Type) -> int | None:
    """Bytes one element takes in memory: integers and floats round up to a power-of-two byte count, as LLVM
    stores them (i1 → 1, tf32 → 4); a vector is its elements. None for index and other types of no set size."""
    if isinstance(t, ir.VectorType):
        inner = element_bytes(t.element_type)
        if inner is None or not t.has_static_shape:
            return None
        count = 1
        for d in t.shape:
            count *= d
        return count * inner
    if isinstance(t, (ir.IntegerType, ir.FloatType)):
        size = 1
        while size * 8 < t.width:
            size *= 2
        return size
    return None


def strides(t: ir.MemRefType) -> tuple[list[int | None], int | None]:
    """Element strides and offset of a strided memref, None for each one that is dynamic."""
    try:
        values, offset = t.get_strides_and_offset()
    except RuntimeError:
        raise Invalid(f"needs a strided layout, got {t}") from None
    known = [None if t.is_dynamic_stride_or_offset(s) else s for s in values]
    return known, None if t.is_dynamic_stride_or_offset(offset) else offset


def footprint_bytes(t: ir.MemRefType) -> int | None:
    """Bytes from the buffer's start through the last byte the memref can address (strides and offset
    included); None when a size, stride or the offset is dynamic."""
    size = element_bytes(t.element_type)
    steps, offset = strides(t)
    if size is None or not t.has_static_shape or offset is None or None in steps:
        return None
    if 0 in t.shape:
        return 0
    return (offset + sum((d - 1) * s for d, s in zip(t.shape, steps)) + 1) * size


def defining(value, name: str):
    """The op named `name` that defines `value`, or None (a block argument, another op)."""
    owner = value.owner
    return owner if isinstance(owner, ir.OpView) and owner.operation.name == name else None


def memref_of(value, what: str) -> ir.MemRefType:
    if not isinstance(value.type, ir.MemRefType):
        raise Invalid(f"{what} must be a memref, got {value.type}")
    return value.type


def _ranked_tensor(value, what: str) -> ir.RankedTensorType:
    if not isinstance(value.type, ir.RankedTensorType):
        raise Invalid(f"{what} must be a ranked tensor, got {value.type}")
    return value.type


def _check_pad(pad: list[int], rank: int) -> None:
    if len(pad) != rank:
        raise Invalid(f"padding must have one entry per dimension ({rank}), got {pad}")
    if any(p < 0 for p in pad):
        raise Invalid(f"padding must be non-negative, got {pad}")


def _check_swizzle_rows(swizzle: int, inner_extent: int, elem: int) -> None:
    if swizzle not in SWIZZLES:
        raise Invalid(f"swizzle must be 32, 64 or 128 bytes, got {swizzle}")
    if inner_extent * elem % SWIZZLE_CHUNK:
        raise Invalid(f"swizzling moves {SWIZZLE_CHUNK}-byte chunks, but a row is {inner_extent * elem} bytes")


# -- ops ----------------------------------------------------------------------------------------------------

@positional_groups
class AllocOp(TMem.Operation, name="alloc"):
    """A new buffer of the result's memref type in `scope` (global | shared | private | register), its
    start aligned to `align` bytes; `dynamic_sizes` give the `?` extents in order (global scope only).

    Optional layout, as the memory planner decides it:
    - ``pad = [p0, p1, …]`` elements after each dimension: row strides are those of the padded extents, so
      the result must carry them (``memref<64x64xbf16, strided<[72, 1]>, …>`` for ``pad = [0, 8]``);
    - ``swizzle = 32 | 64 | 128``: within each 128-byte line of a shared buffer, 16-byte chunk c of line l is
      stored at chunk ``c xor (l mod (swizzle / 16))``.

    Storage of every scope but global ends with the kernel (shared: with the thread block); only global
    buffers are freed, by `tmem.dealloc`."""

    dynamic_sizes: Sequence[ext.Operand[ir.IndexType]]
    scope: ir.StringAttr
    align: ir.IntegerAttr
    memref: ext.Result[ir.MemRefType]

    @verifier
    def verify_invariants(self):
        t = memref_of(self.operation.results[0], "result")
        scope = str_attribute(self, "scope", SCOPES)
        space = memory_space(t)
        if space != _SPACE_OF_SCOPE[scope]:
            raise Invalid(f"'{scope}' allocations live in #gpu.address_space<{_SPACE_OF_SCOPE[scope]}>, but the "
                          f"result's memory space is {t.memory_space}")
        if scope != "global" and not t.has_static_shape:
            raise Invalid(f"{scope} allocations must have a static shape (their size is fixed when the kernel "
                          f"is compiled), got {t}")
        dynamic = sum(t.is_dynamic_dim(i) for i in range(t.rank))
        given = len(self.operation.operands)
        if given != dynamic:
            raise Invalid(f"needs one size operand per dynamic dimension: {dynamic}, got {given}")
        size = element_bytes(t.element_type)
        if size is None:
            raise Invalid(f"element type must be an integer, a float or a vector of them, got {t.element_type}")
        align = int_attribute(self, "align")
        if not is_power_of_two(align):
            raise Invalid(f"alignment must be a power of two, got {align}")
        if align < size:
            raise Invalid(f"alignment {align} is less than the {size}-byte element size")
        pad = ints_attribute(self, "pad", required=False)
        if pad is not None:
            _check_pad(pad, t.rank)
        self._check_layout(t, pad)
        swizzle = int_attribute(self, "swizzle", required=False)
        if swizzle is not None:
            if scope != "shared":
                raise Invalid(f"swizzle applies to shared memory banks, not to '{scope}' allocations")
            _check_swizzle_rows(swizzle, t.shape[-1] if t.rank else 1, size)
            total = footprint_bytes(t)
            if total % SWIZZLE_LINE:
                raise Invalid(f"a swizzled allocation must be whole {SWIZZLE_LINE}-byte lines, got {total} bytes")

    @staticmethod
    def _check_layout(t: ir.MemRefType, pad: list[int] | None) -> None:
        """A new buffer is dense: its layout is the identity, or with padding the strides of the padded shape."""
        identity = isinstance(t.layout, ir.AffineMapAttr) and t.layout.value == ir.AffineMap.get_identity(t.rank, t.context)
        if not t.has_static_shape:
            if pad is not None:
                raise Invalid("padding needs a static shape")
            if not identity:
                raise Invalid(f"a dynamically shaped allocation must have the identity layout, got {t}")
            return
        expected, stride = [], 1
        for extent, p in reversed(list(zip(t.shape, pad or [0] * t.rank))):
            expected.insert(0, stride)
            stride *= extent + p
        got, offset = strides(t)
        if got != expected or offset != 0:
            padded = f"with pad = {pad} " if pad else ""
            raise Invalid(f"{padded}the result must have strides {expected} and offset 0, got {t}")


class DeallocOp(TMem.Operation, name="dealloc"):
    """Frees a global buffer made by `tmem.alloc`. It must not be used afterwards."""

    memref: ext.Operand[ir.MemRefType]

    @verifier
    def verify_invariants(self):
        value = self.operation.operands[0]
        space = memory_space(memref_of(value, "operand"))
        if space != "global":
            raise Invalid(f"frees only global memory; {space} storage ends with the kernel")
        if defining(value, "tmem.alias") is not None:
            raise Invalid("frees a view made by 'tmem.alias'; free the allocation it views instead")


class PlaceOp(TMem.Operation, name="place"):
    """A hint for the accesses to a global buffer that follow it in the kernel: `l2` = persist (keep the lines
    in L2: evict last), stream (read once: evict first) or normal; `fraction` (in (0, 1], default 1) of the
    buffer gets the policy, as CUDA's access-policy windows and PTX's fractional L2 policies allow. A target
    without L2 controls ignores it."""

    memref: ext.Operand[ir.MemRefType]
    l2: ir.StringAttr

    @verifier
    def verify_invariants(self):
        space = memory_space(memref_of(self.operation.operands[0], "operand"))
        if space != "global":
            raise Invalid(f"only global memory is cached in L2; the operand is in {space} memory")
        str_attribute(self, "l2", L2_POLICIES)
        fraction = attribute(self, "fraction", ir.FloatAttr, "a float", required=False)
        if fraction is not None and not 0 < fraction.value <= 1:
            raise Invalid(f"fraction must be in (0, 1], got {fraction.value}")


class AliasOp(TMem.Operation, name="alias", traits=[ext.Pure]):
    """A view of `source`'s storage as the result's memref type, starting `offset` bytes in: how the memory
    planner carves stage buffers out of one allocation, or lets buffers whose lifetimes do not overlap share
    storage. Reads and writes through either see the same bytes."""

    source: ext.Operand[ir.MemRefType]
    offset: ir.IntegerAttr
    result: ext.Result[ir.MemRefType]

    @verifier
    def verify_invariants(self):
        source = memref_of(self.operation.operands[0], "source")
        view = memref_of(self.operation.results[0], "result")
        if memory_space(source) != memory_space(view):
            raise Invalid(f"a view stays in its source's memory space: {source} cannot be viewed as {view}")
        offset = int_attribute(self, "offset")
        if offset < 0:
            raise Invalid(f"offset must be non-negative, got {offset}")
        elem = element_bytes(view.element_type)
        if elem is None:
            raise Invalid(f"element type must be an integer, a float or a vector of them, got {view.element_type}")
        if offset % elem:
            raise Invalid(f"offset {offset} is not a multiple of the view's {elem}-byte element size")
        view_bytes, source_bytes = footprint_bytes(view), footprint_bytes(source)
        if view_bytes is None or source_bytes is None:
            raise Invalid("source and result must have static shapes and strides, so the view's bounds are known")
        if offset + view_bytes > source_bytes:
            raise Invalid(f"the view's {view_bytes} bytes at offset {offset} overrun the source's {source_bytes} "
                          f"bytes")


class PadOp(TMem.Operation, name="pad", traits=[ext.Pure]):
    """The value of `source`, with a request: the buffer that holds it gets `pad = [p0, p1, …]` elements after
    each dimension (the +1/+2 row padding of architecture §7), so that column accesses hit distinct banks."""

    source: ext.Operand[ir.RankedTensorType]
    pad: ir.ArrayAttr
    result: ext.Result[ir.RankedTensorType]

    @verifier
    def verify_invariants(self):
        t = _ranked_tensor(self.operation.operands[0], "source")
        if self.operation.results[0].type != t:
            raise Invalid(f"result type {self.operation.results[0].type} must equal the source type {t}")
        _check_pad(ints_attribute(self, "pad"), t.rank)


class SwizzleOp(TMem.Operation, name="swizzle", traits=[ext.Pure]):
    """The value of `source`, with a request: the shared buffer that holds it is swizzled with `bytes` = 32,
    64 or 128 (the pattern of `tmem.alloc`'s ``swizzle``)."""

    source: ext.Operand[ir.RankedTensorType]
    bytes: ir.IntegerAttr
    result: ext.Result[ir.RankedTensorType]

    @verifier
    def verify_invariants(self):
        t = _ranked_tensor(self.operation.operands[0], "source")
        if self.operation.results[0].type != t:
            raise Invalid(f"result type {self.operation.results[0].type} must equal the source type {t}")
        if t.rank < 1 or t.is_dynamic_dim(t.rank - 1):
            raise Invalid(f"needs a static innermost dimension to swizzle rows of, got {t}")
        elem = element_bytes(t.element_type)
        if elem is None:
            raise Invalid(f"element type must be an integer, a float or a vector of them, got {t.element_type}")
        _check_swizzle_rows(int_attribute(self, "bytes"), t.shape[-1], elem)


class SlotOp(TMem.Operation, name="slot"):
    """The intermediate buffer that the result of the Graph IR op after it lives in: `slot` (≥ 0). Values whose
    lifetimes do not overlap share a slot; the launch plan sizes each slot for the largest value it holds."""

    slot: ir.IntegerAttr

    @verifier
    def verify_invariants(self):
        slot = int_attribute(self, "slot")
        if slot < 0:
            raise Invalid(f"slot must be non-negative, got {slot}")
        decided_op(self)


class StageOp(TMem.Operation, name="stage"):
    """A tile-local staging buffer that the kernel of the `ttensor.matmul` after it allocates: `copies` (≥ 1)
    rotating copies of `shape` f32 elements, named `buffer` after its role in the target's GEMM (the CPU's
    ``a_block`` and ``b_panel``): `stages` copies of what is staged ahead of the compute, the multi-buffering
    the schedule chose."""

    buffer: ir.StringAttr
    shape: ir.ArrayAttr
    copies: ir.IntegerAttr

    @verifier
    def verify_invariants(self):
        name = attribute(self, "buffer", ir.StringAttr, "a string").value
        shape = ints_attribute(self, "shape")
        if not shape or any(d <= 0 for d in shape):
            raise Invalid(f"shape must be positive sizes, got {shape}")
        copies = int_attribute(self, "copies")
        if copies < 1:
            raise Invalid(f"copies must be at least 1, got {copies}")
        matmul = decided_op(self, lambda other: "buffer" in other.attributes
                             and ir.StringAttr(other.attributes["buffer"]).value == name)
        if matmul.operation.name != "ttensor.matmul":
            raise Invalid(f"stages a matmul's operands, not those of '{matmul.operation.name}'")
