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
from .support import Diagnose, guard_verifiers, int_attr
from .ttensor import compatible, ranked, shape_of

ALGOS = ("ring", "tree", "binary_tree", "auto")
REDUCTIONS = ("sum", "max", "min", "mean", "prod")


class TDist(ext.Dialect, name="tdist"):
    pass


class _Collective(TDist.Operation):
    def _mesh(self, diag: Diagnose):
        axes = [ir.StringAttr(a).value for a in ir.ArrayAttr(self.attributes["mesh_axes"])]
        shape = [int_attr(a) for a in ir.ArrayAttr(self.attributes["mesh_shape"])]
        if not axes or len(axes) != len(shape):
            diag.fail(f"mesh_axes {axes} and mesh_shape {shape} must be non-empty and of equal length")
            return None
        if any(n < 1 for n in shape) or len(set(axes)) != len(axes):
            diag.fail(f"mesh axes must be distinct with positive sizes, got {dict(zip(axes, shape))}")
            return None
        axis = ir.StringAttr(self.attributes["axis"]).value
        if axis not in axes:
            diag.fail(f"axis '{axis}' is not an axis of the mesh {axes}")
            return None
        if "algo" in self.attributes and ir.StringAttr(self.attributes["algo"]).value not in ALGOS:
            diag.fail(f"algo must be one of {', '.join(ALGOS)}, got '{ir.StringAttr(self.attributes['algo']).value}'")
            return None
        if "bucket_bytes" in self.attributes and int_attr(self.attributes["bucket_bytes"]) < 0:
            diag.fail("bucket_bytes must be non-negative")
            return None
        return shape[axes.index(axis)]

    def _io(self, diag: Diagnose):
        x, r = ranked(self.operands[0]), ranked(self.results[0])
        if x is None or r is None:
            diag.fail("operand and result must be ranked tensors")
            return None
        if x.element_type != r.element_type:
            diag.fail(f"the element type must be kept: {x.element_type} -> {r.element_type}")
            return None
        return x, r

    def _reduction(self, diag: Diagnose) -> bool:
        op = ir.StringAttr(self.attributes["op"]).value
        if op not in REDUCTIONS:
            return diag.fail(f"reduction must be one of {', '.join(REDUCTIONS)}, got '{op}'")
        return True


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

    def verify_invariants(self) -> bool:
        diag = Diagnose(self)
        if self._mesh(diag) is None or not self._reduction(diag):
            return False
        io = self._io(diag)
        if io is None:
            return False
        if io[0] != io[1]:
            return diag.fail(f"result type {io[1]} must equal the input type {io[0]}")
        return True


class _Concatenating(_Collective):
    """all_gather and reduce_scatter change one tensor axis by the mesh axis' size."""

    def _verify_axis_scaling(self, grow: bool) -> bool:
        diag = Diagnose(self)
        n = self._mesh(diag)
        if n is None:
            return False
        io = self._io(diag)
        if io is None:
            return False
        x, r = io
        d = int_attr(self.attributes["dim"])
        if not 0 <= d < x.rank or r.rank != x.rank:
            return diag.fail(f"dim {d} must be an axis of the rank-{x.rank} tensor, kept in the result")
        sx, sr = shape_of(x), shape_of(r)
        want = list(sx)
        if sx[d] is not None:
            if not grow and sx[d] % n:
                return diag.fail(f"extent {sx[d]} of dim {d} is not divisible by the {n} devices of the axis")
            want[d] = sx[d] * n if grow else sx[d] // n
        if not compatible(sr, want):
            return diag.fail(f"result shape {sr} must be {want}")
        return True


class AllGatherOp(_Concatenating, name="all_gather", traits=[ext.Pure]):
    """Concatenates the devices' tensors along tensor axis `dim`, in device order."""

    input: ext.Operand[typing.Any]
    mesh_axes: ir.ArrayAttr
    mesh_shape: ir.ArrayAttr
    axis: ir.StringAttr
    dim: ir.IntegerAttr
    result: ext.Result[typing.Any]

    def verify_invariants(self) -> bool:
        return self._verify_axis_scaling(grow=True)


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

    def verify_invariants(self) -> bool:
        return self._reduction(Diagnose(self)) and self._verify_axis_scaling(grow=False)


class BroadcastOp(_Collective, name="broadcast", traits=[ext.Pure]):
    """Every device gets device `root`'s tensor (root is an index along the mesh axis)."""

    input: ext.Operand[typing.Any]
    mesh_axes: ir.ArrayAttr
    mesh_shape: ir.ArrayAttr
    axis: ir.StringAttr
    root: ir.IntegerAttr
    result: ext.Result[typing.Any]

    def verify_invariants(self) -> bool:
        diag = Diagnose(self)
        n = self._mesh(diag)
        if n is None:
            return False
        root = int_attr(self.root)
        if not 0 <= root < n:
            return diag.fail(f"root {root} is not a device of the axis (0..{n - 1})")
        io = self._io(diag)
        if io is None:
            return False
        if io[0] != io[1]:
            return diag.fail(f"result type {io[1]} must equal the input type {io[0]}")
        return True


guard_verifiers(globals())
