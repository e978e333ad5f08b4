"""``tdist``: collectives over a device mesh (Graph IR).

A mesh is named by its axes and their sizes (`mesh_axes = ["dp", "tp"]`, `mesh_shape = [4, 2]`); a collective
runs over one axis (`axis = "dp"`), among the devices that differ only in that coordinate. Values are SPMD:
each device holds its own tensor of the type written in the IR.

`algo` picks the reduction tree (`ring`, `tree`, `binary_tree`, `auto`); with `deterministic = true` the
combination order is fixed by the device index (a binary tree), so every run — and every backend — sums in
the same order. `bucket_bytes` is the bucketizer's chunk size (0: the runtime default).
"""

# No `from __future__ import annotations` here: ext reads the annotations as live types.
import typing

from ..mlir import ext, ir
from .support import Invalid, declared_attributes, int_attr, verifier
from .ttensor import compatible, ranked, shape_of

ALGOS = ("ring", "tree", "binary_tree", "auto")
REDUCTIONS = ("sum", "max", "min", "mean", "prod")
# an all_reduce's row chunks (passes/pipeline_collectives.py): op.all_reduce(chunks=) or the pass sets it
CHUNKS = "tessera.chunks"
# on an op before such an all_reduce's matmul (a matmul, elementwise op or cast whose rows lead to the matmul's
# lhs): it runs in the same row chunks, each chunk's rows of it before that chunk's GEMM (the pass sets it)
ROWS_OF = "tessera.chunk_rows"
# beside CHUNKS where the chunks are uneven (op.all_reduce(chunks=(6, 6, 3, 1)), collective_chunks=(…)): each
# chunk's weight, chunk i ending at row ceil(M*(w_0+…+w_i)/(W*128))*128 (clamped to M), W the weights' sum
CHUNK_WEIGHTS = "tessera.chunk_weights"


def chunk_spec(value) -> tuple[int, tuple[int, ...] | None] | None:
    """The chunk count and the uneven weights (None where the chunks are equal) that `value` asks for: a
    positive int k (k equal chunks) or a non-empty sequence of positive int weights (all equal: that many equal
    chunks); None where it is neither."""
    if type(value) is int:
        return (value, None) if value >= 1 else None
    if not isinstance(value, (tuple, list)) or not value or \
            not all(type(w) is int and w >= 1 for w in value):
        return None
    weights = tuple(value)
    return (len(weights), None) if len(set(weights)) == 1 else (len(weights), weights)


class TDist(ext.Dialect, name="tdist"):
    pass


class _Collective(TDist.Operation):
    def _mesh(self) -> int:
        """The size of the mesh axis the collective runs over."""
        axes = [ir.StringAttr(a).value for a in ir.ArrayAttr(self.attributes["mesh_axes"])]
        shape = [int_attr(a) for a in ir.ArrayAttr(self.attributes["mesh_shape"])]
        if not axes or len(axes) != len(shape):
            raise Invalid(f"mesh_axes {axes} and mesh_shape {shape} must be non-empty and of equal length")
        if any(n < 1 for n in shape) or len(set(axes)) != len(axes):
            raise Invalid(f"mesh axes must be distinct with positive sizes, got {dict(zip(axes, shape))}")
        axis = ir.StringAttr(self.attributes["axis"]).value
        if axis not in axes:
            raise Invalid(f"axis '{axis}' is not an axis of the mesh {axes}")
        algo = ir.StringAttr(self.attributes["algo"]).value if "algo" in self.attributes else None
        if algo is not None and algo not in ALGOS:
            raise Invalid(f"algo must be one of {', '.join(ALGOS)}, got '{algo}'")
        if "bucket_bytes" in self.attributes and int_attr(self.attributes["bucket_bytes"]) < 0:
            raise Invalid("bucket_bytes must be non-negative")
        return shape[axes.index(axis)]

    def _io(self):
        x, r = ranked(self.operands[0]), ranked(self.results[0])
        if x is None or r is None:
            raise Invalid("operand and result must be ranked tensors")
        if x.element_type != r.element_type:
            raise Invalid(f"the element type must be kept: {x.element_type} -> {r.element_type}")
        return x, r

    def _reduction(self) -> None:
        op = ir.StringAttr(self.attributes["op"]).value
        if op not in REDUCTIONS:
            raise Invalid(f"reduction must be one of {', '.join(REDUCTIONS)}, got '{op}'")


class AllReduceOp(_Collective, name="all_reduce", traits=[ext.Pure]):
    """Every device gets the reduction of all devices' tensors along the mesh axis."""

    input: ext.Operand[typing.Any]
    mesh_axes: ir.ArrayAttr
    mesh_shape: ir.ArrayAttr
    axis: ir.StringAttr
    op: ir.StringAttr
    algo: ir.StringAttr
    deterministic: typing.Any  # BoolAttr
    bucket_bytes: ir.IntegerAttr
    result: ext.Result[typing.Any]

    @verifier
    def verify_invariants(self):
        with declared_attributes(self):
            self._mesh()
            self._reduction()
            x, r = self._io()
            if x != r:
                raise Invalid(f"result type {r} must equal the input type {x}")
            if CHUNK_WEIGHTS in self.attributes:
                a = self.attributes[CHUNK_WEIGHTS]
                weights = [w.value for w in a] if isinstance(a, ir.ArrayAttr) and all(
                    isinstance(w, ir.IntegerAttr) for w in a) else None
                k = self.attributes[CHUNKS].value if CHUNKS in self.attributes and \
                    isinstance(self.attributes[CHUNKS], ir.IntegerAttr) else None
                if not weights or any(w < 1 for w in weights) or k != len(weights):
                    raise Invalid(f"{CHUNK_WEIGHTS} must be a non-empty array of positive integers, one per chunk "
                                  f"({CHUNKS} of them), got {a}")


class _Concatenating(_Collective):
    """all_gather and reduce_scatter change one tensor axis by the mesh axis' size."""

    def _axis_scaling(self, grow: bool) -> None:
        n = self._mesh()
        x, r = self._io()
        d = int_attr(self.attributes["dim"])
        if not 0 <= d < x.rank or r.rank != x.rank:
            raise Invalid(f"dim {d} must be an axis of the rank-{x.rank} tensor, kept in the result")
        sx, sr = shape_of(x), shape_of(r)
        want = list(sx)
        if sx[d] is not None:
            if not grow and sx[d] % n:
                raise Invalid(f"extent {sx[d]} of dim {d} is not divisible by the {n} devices of the axis")
            want[d] = sx[d] * n if grow else sx[d] // n
        if not compatible(sr, want):
            raise Invalid(f"result shape {sr} must be {want}")


class AllGatherOp(_Concatenating, name="all_gather", traits=[ext.Pure]):
    """Concatenates the devices' tensors along tensor axis `dim`, in device order."""

    input: ext.Operand[typing.Any]
    mesh_axes: ir.ArrayAttr
    mesh_shape: ir.ArrayAttr
    axis: ir.StringAttr
    dim: ir.IntegerAttr
    result: ext.Result[typing.Any]

    @verifier
    def verify_invariants(self):
        with declared_attributes(self):
            self._axis_scaling(grow=True)


class ReduceScatterOp(_Concatenating, name="reduce_scatter", traits=[ext.Pure]):
    """Reduces across devices, then device i keeps the i-th slice along tensor axis `dim`."""

    input: ext.Operand[typing.Any]
    mesh_axes: ir.ArrayAttr
    mesh_shape: ir.ArrayAttr
    axis: ir.StringAttr
    dim: ir.IntegerAttr
    op: ir.StringAttr
    algo: ir.StringAttr
    deterministic: typing.Any  # BoolAttr
    result: ext.Result[typing.Any]

    @verifier
    def verify_invariants(self):
        with declared_attributes(self):
            self._reduction()
            self._axis_scaling(grow=False)


class BroadcastOp(_Collective, name="broadcast", traits=[ext.Pure]):
    """Every device gets device `root`'s tensor (root is an index along the mesh axis)."""

    input: ext.Operand[typing.Any]
    mesh_axes: ir.ArrayAttr
    mesh_shape: ir.ArrayAttr
    axis: ir.StringAttr
    root: ir.IntegerAttr
    result: ext.Result[typing.Any]

    @verifier
    def verify_invariants(self):
        with declared_attributes(self):
            n = self._mesh()
            root = int_attr(self.root)
            if not 0 <= root < n:
                raise Invalid(f"root {root} is not a device of the axis (0..{n - 1})")
            x, r = self._io()
            if x != r:
                raise Invalid(f"result type {r} must equal the input type {x}")
