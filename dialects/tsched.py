"""``tsched``: Schedule IR — how a piece of the program is tiled, pipelined, split across warps and fused.

Schedule IR computes nothing new. Its ops wrap ops of the level above (``ttensor`` ops on tensors, or the
same program after bufferization) in regions and record the decisions of the pipeline's "tiling &
scheduling" and "fusion" phases (architecture §3.3) for the lowering to Tile IR to carry out. Inlining a
schedule op's body in its place leaves a program that computes the same values: the attributes say *how*,
never *what*.

Region ops share one shape. A body is one block that ends in `tsched.yield` and uses values from above
directly, as ``scf.execute_region``'s does (the lowering collects them as the region's inputs). A region op
has at most one result: the value its yield returns. (IRDL, which backs Python-defined ops, binds every value
of a variadic group to one type, so a list of values of different types cannot be declared; one result is
what a Graph IR op produces, and a bufferized body yields nothing.)

Attributes that are optional, or whose names have dots (``tile.shape``), are not parameters of the Python
builders (dialects.ext declares neither): set them on the built op, ``op.attributes["tile.shape"] = …``.
"""

# No `from __future__ import annotations` here: ext reads the annotations as live types.
import typing
from typing import Optional

from ..mlir import ext, ir
from .support import (Invalid, constant_int, int_attribute, ints_attribute, is_power_of_two, positional_groups,
                      strs_attribute, verifier)

# Elementwise ops a tile may apply to its accumulator before the store, named after the ttensor ops that
# express them: bias = ttensor.bias_add, scale = multiplication by a scalar, residual = addition of a tensor
# of the output's shape, dropout = ttensor.dropout, the others = ttensor.unary with that `fn`.
EPILOGUES = ("bias", "scale", "residual", "relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh", "dropout")
# Each pipeline stage holds its own copy of the operand panels in shared memory; beyond 8 they never fit.
MAX_STAGES = 8
_REGION_OPS = ("tsched.tile", "tsched.fusion_group", "tsched.warp_specialize", "tsched.pipeline")


class TSched(ext.Dialect, name="tsched"):
    pass


def _enclosing(op, name: str):
    """The nearest op named `name` that holds `op` in one of its regions, or None."""
    parent = op.operation.parent
    while parent is not None and parent.name != name:
        parent = parent.parent
    return parent


def _enclosing_int(op, name: str, attr: str) -> int | None:
    """Integer attribute `attr` of the nearest enclosing `name` op, when both exist (that op verifies it)."""
    holder = _enclosing(op, name)
    value = holder.attributes[attr] if holder is not None and attr in holder.attributes else None
    return value.value if isinstance(value, ir.IntegerAttr) else None


def _check_stages(stages: int, name: str) -> None:
    if not 1 <= stages <= MAX_STAGES:
        raise Invalid(f"{name} must be between 1 and {MAX_STAGES}, got {stages}")


def _body(op, arg_types: list | None = None, what: str = ""):
    """The single block of `op`'s body, after checking its arguments: none (the body uses values from above),
    or `arg_types`, described by `what`."""
    blocks = list(op.operation.regions[0].blocks)
    if len(blocks) != 1:
        raise Invalid(f"body must be one block, got {len(blocks)}")
    args = [a.type for a in blocks[0].arguments]
    if arg_types is None and args:
        raise Invalid(f"body must take no arguments (it uses values from above), got ({_types(args)})")
    if arg_types is not None and args != arg_types:
        raise Invalid(f"body arguments ({_types(args)}) must be {what} ({_types(arg_types)})")
    return blocks[0]


def _check_yield(block, expected: list, what: str) -> None:
    ops = block.operations
    term = ops[len(ops) - 1] if len(ops) else None
    if term is None or term.operation.name != "tsched.yield":
        raise Invalid("body must end in 'tsched.yield'")
    got = [v.type for v in term.operation.operands]
    if got != expected:
        raise Invalid(f"yields ({_types(got)}) but {what} ({_types(expected)})")


def _types(types) -> str:
    return ", ".join(str(t) for t in types)


class _RegionOp(TSched.Operation):
    """Base of the ops whose body runs once and yields the op's result, if any."""

    output: Optional[ext.Result[typing.Any]] = None
    body: ext.Region

    @verifier
    def verify_region_invariants(self):
        block = _body(self)
        _check_yield(block, [r.type for r in self.operation.results], "the op's result is")
        self._check_body(block)

    def _check_body(self, block) -> None:
        """Rules about what the body holds, for ops that have them."""


@positional_groups
class TileOp(_RegionOp, name="tile"):
    """One kernel's worth of computation and how to tile it.

    Attributes, with the spec's names (architecture §3.2, §10):
    - ``tile.shape = [M, N, K]`` (1 to 3 positive sizes): each thread block computes an M×N tile of the
      output, stepping through the reduction K elements at a time;
    - ``pipeline.stages`` (1..8, optional): shared-memory buffers of the K loop, so that loads for later steps
      are in flight while one step computes (1: no pipelining);
    - ``warps`` (a power of two, optional): warps per thread block;
    - ``vector`` (a power of two ≥ 8, optional): bits per memory access (128: 16-byte loads and stores);
    - ``swizzle`` (≥ 1, optional): thread blocks are launched in groups of `swizzle` rows of tiles, so
      neighbouring blocks share operand panels in L2 (1: row-major order);
    - ``epilogue`` (names from EPILOGUES, optional): the body's elementwise ops, in order, that are applied to
      the accumulator in registers before the one store of the output.
    """

    @verifier
    def verify_invariants(self):
        shape = ints_attribute(self, "tile.shape")
        if not 1 <= len(shape) <= 3 or any(s <= 0 for s in shape):
            raise Invalid(f"tile.shape must be 1 to 3 positive sizes [M, N, K], got {shape}")
        stages = int_attribute(self, "pipeline.stages", required=False)
        if stages is not None:
            _check_stages(stages, "pipeline.stages")
        warps = int_attribute(self, "warps", required=False)
        if warps is not None and not is_power_of_two(warps):
            raise Invalid(f"warps must be a positive power of two, got {warps}")
        vector = int_attribute(self, "vector", required=False)
        if vector is not None and not (vector >= 8 and is_power_of_two(vector)):
            raise Invalid(f"vector must be a power-of-two number of bits, at least 8, got {vector}")
        swizzle = int_attribute(self, "swizzle", required=False)
        if swizzle is not None and swizzle < 1:
            raise Invalid(f"swizzle must be at least 1, got {swizzle}")
        strs_attribute(self, "epilogue", EPILOGUES, required=False)


@positional_groups
class FusionGroupOp(_RegionOp, name="fusion_group"):
    """Ops to emit as one fused computation: the values passed between them stay in registers or shared
    memory and are never written to global memory (the spec's softmax + dropout + V of attention)."""


@positional_groups
class WarpSpecializeOp(_RegionOp, name="warp_specialize"):
    """Dedicated loader warps and compute warps (architecture §5). Of the `tsched.pipeline` in the body, the
    `producer_warps` run the memory side — the loads from global memory into the pipeline's stage buffers —
    and the `consumer_warps` everything else; each stage's buffer is handed over through a barrier."""

    # Keyword-only: the optional result inherited from _RegionOp comes first in the builder's signature.
    producer_warps: ir.IntegerAttr = ext.attribute(kw_only=True)
    consumer_warps: ir.IntegerAttr = ext.attribute(kw_only=True)

    @verifier
    def verify_invariants(self):
        producers = int_attribute(self, "producer_warps")
        consumers = int_attribute(self, "consumer_warps")
        if producers < 1 or consumers < 1:
            raise Invalid(f"needs at least one warp on each side, got {producers} producer and {consumers} "
                          f"consumer warps")
        warps = _enclosing_int(self, "tsched.tile", "warps")
        if warps is not None and producers + consumers != warps:
            raise Invalid(f"splits {producers} + {consumers} warps, but the enclosing 'tsched.tile' has "
                          f"warps = {warps}")

    def _check_body(self, block) -> None:
        if not any(op.operation.name == "tsched.pipeline" for op in block.operations):
            raise Invalid("body must hold a 'tsched.pipeline' for the producer warps to run ahead in")


@positional_groups
class PipelineOp(TSched.Operation, name="pipeline"):
    """``for iv = lower_bound; iv < upper_bound; iv += step``, as ``scf.for`` with at most one carried value:
    `init` enters the first iteration as the body's second argument, each iteration's yield enters the next,
    and the last one's is the result.

    `stages` (1..8) is the software-pipelining depth: the lowering issues the memory side of up to
    `stages - 1` later iterations while one iteration computes, each stage in its own buffers. The values
    computed are those of the plain loop, which is also a valid lowering."""

    lower_bound: ext.Operand[ir.IndexType]
    upper_bound: ext.Operand[ir.IndexType]
    step: ext.Operand[ir.IndexType]
    stages: ir.IntegerAttr
    init: Optional[ext.Operand[typing.Any]] = None
    output: Optional[ext.Result[typing.Any]] = None
    body: ext.Region

    @verifier
    def verify_invariants(self):
        stages = int_attribute(self, "stages")
        _check_stages(stages, "stages")
        bound = _enclosing_int(self, "tsched.tile", "pipeline.stages")
        if bound is not None and stages > bound:
            raise Invalid(f"stages = {stages} exceeds the enclosing tile's pipeline.stages = {bound}, "
                          f"which sizes its buffers")
        step = constant_int(self.operation.operands[2])
        if step is not None and step <= 0:
            raise Invalid(f"step must be positive, got {step}")

    @verifier
    def verify_region_invariants(self):
        carried = [v.type for v in self.operation.operands[3:]]
        results = [r.type for r in self.operation.results]
        if results != carried:
            raise Invalid(f"result ({_types(results)}) must have the type of the carried value ({_types(carried)})")
        index = ir.IndexType.get(self.operation.context)
        block = _body(self, [index] + carried, "the index and the carried value")
        _check_yield(block, carried, "the carried value is")


@positional_groups
class YieldOp(TSched.Operation, name="yield", traits=[ir.IsTerminatorTrait]):
    """Ends a Schedule IR body: `value` becomes the region op's result (in a pipeline, the next iteration's
    carried value)."""

    value: Optional[ext.Operand[typing.Any]] = None

    @verifier
    def verify_invariants(self):
        parent = self.operation.parent
        if parent is None or parent.name not in _REGION_OPS:
            raise Invalid(f"must end the body of a tsched region op, not of '{parent.name if parent else None}'")
