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

`tsched.schedule` is the Graph IR phases' form: a decision op that stands right before the Graph IR op it
schedules (see ScheduleOp for why it does not wrap it).

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
# Ops that record a Graph IR phase's decisions about the Graph IR op after them (this dialect's and tmem's).
DECISION_OPS = ("tsched.schedule", "tmem.stage", "tmem.slot")
# The decisions of `tsched.schedule`, all sizes but `at_launch` (0 or 1) and `stages` (1..MAX_STAGES).
SCHEDULE_KEYS = ("block_x", "rows_per_block", "MB", "NC", "KC", "MC", "MR", "NR", "stages", "at_launch",
                 "lanes", "warp")


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


def decided_op(op, same=lambda other: True):
    """The Graph IR op that decision op `op` is about: the first op after it in its block that is not a
    decision op. Raises Invalid when that is not a `ttensor` op, or when a decision op of `op`'s name for
    which `same(other)` holds stands between them (an op has one decision of each kind)."""
    ops = list(op.operation.block.operations)
    here = next(i for i, o in enumerate(ops) if o.operation == op.operation)
    name = op.operation.name
    for other in ops[here + 1:]:
        other_name = other.operation.name
        if other_name == name and same(other):
            raise Invalid("is given twice for one op")
        if other_name not in DECISION_OPS:
            if not other_name.startswith("ttensor."):
                raise Invalid(f"must stand right before the Graph IR op it decides for, not before '{other_name}'")
            return other
    raise Invalid("must stand right before the Graph IR op it decides for, not end its block")


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


class ScheduleOp(TSched.Operation, name="schedule"):
    """The schedule phase's launch geometry for the Graph IR op after it (other decision ops of that op,
    DECISION_OPS, may stand between them). Each attribute is one decision, an integer:
    - ``block_x``: threads per block of an elementwise or masked-blocks kernel, each covering a row segment;
    - ``rows_per_block``: rows (a warp each) per block of a row kernel (softmax, norms, reductions);
    - a matmul's blocking, in the target GEMM's terms: ``MB``×``NC`` output tile per block or task, ``KC``
      reduction chunk, ``MC`` rows of a packed A block, ``MR``×``NR`` micro-tile, ``stages`` (1..8) copies
      of what is staged ahead of the compute; ``at_launch`` = 1 when the tile is the cost model's guess for
      extents known only at run time (a backend may choose again at launch);
    - set by the vectorize phase: ``lanes`` per vector and ``warp``, the lane count of the warps generated
      kernels shuffle within.

    A decision op names no value: wrapping the op in a region (as `tsched.tile` does) would give its result
    a new SSA value, and the Graph IR consumers (shape inference, fusion, the kernel lowering) key on the
    op's own; an operand would add a use, and fusion decides by counting uses."""

    @verifier
    def verify_invariants(self):
        for name in self.operation.attributes:
            if name not in SCHEDULE_KEYS:
                raise Invalid(f"has no decision '{name}' (it takes {', '.join(SCHEDULE_KEYS)})")
            value = int_attribute(self, name)
            if name == "at_launch":
                if value not in (0, 1):
                    raise Invalid(f"at_launch must be 0 or 1, got {value}")
            elif name == "stages":
                _check_stages(value, "stages")
            elif value <= 0:
                raise Invalid(f"{name} must be positive, got {value}")
        decided_op(self)


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
