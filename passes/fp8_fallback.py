"""fp8 on targets that do not compute it (portability guide §5, normative): e4m3 and e5m2 tensors are computed
in f32, with every fp8 value rounded exactly as fp8 would round it, and stored one byte wide where the
generated elementwise kernels are what reads them (`read_by_kernels`: their loads and stores convert, the
kernels' fp8 memory type, passes/fp8_convert.py), else in f16 — the fallback, recorded.

Why f16, and why no scale factor: f16 holds every value of both formats exactly — e4m3 has 3 fraction bits,
values down to 2^-9 and up to 448; e5m2 is f16 with its low 8 bits dropped (the same exponent range, 2
fraction bits) — so storing an fp8 value in f16 loses nothing, and a "range scaling" factor would only add
roundings. What keeps the fp8 semantics is where values become fp8: a cast to fp8 (or an elementwise op
with an fp8 result) rounds its f32 value to the fp8 grid, ties to even, and saturates at the format's
largest finite value (±448, ±57344), as the reference interpreter does (numerics/rounding.py). The result
then is bit-for-bit the interpreter's, on every target that takes this fallback.

The quantize phase (graph_phases.quantize) calls `legalize` after fusion, where a target's native dtypes
lack fp8; kernelgen writes the rounding into the fused elementwise kernels with `round_source`. An fp8
parameter that another kernel reads is taken as f32 from the caller and rounded on entry (one more elementwise kernel),
so that the caller's values are rounded once, from their own precision, as the interpreter rounds them; the
argument keeps its declared dtype (`tessera.declared`), which the launch plan records for the executor.

A matmul whose operands both hold fp8 values is marked (`tessera.fp8_operands`: the two formats), so that a
backend with fp8 tensor cores can multiply them there: the sm_90a GEMM packs the containers to one-byte
elements and runs wgmma's fp8 kinds (backends/ptx/gemm_lowering.py), exactly, since every value is fp8.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..diagnostics import LoweringError
from ..dialects import ttensor
from ..mlir import ir

CONTAINER = "f16"
DECLARED = "tessera.declared"  # the arg attribute holding an fp8 parameter's own dtype, once it is taken as f32


@dataclass(frozen=True)
class Fp8Format:
    name: str           # the dtype's name: "fp8_e4m3"
    mantissa_bits: int
    min_exponent: int   # of the smallest normal number
    max_exponent: int   # of the largest binade
    max_value: float    # largest finite value: out-of-range values saturate to it


FORMATS = {"f8E4M3FN": Fp8Format("fp8_e4m3", 3, -6, 8, 448.0),
           "f8E5M2": Fp8Format("fp8_e5m2", 2, -14, 15, 57344.0)}
BY_NAME = {f.name: f for f in FORMATS.values()}

# Ops whose fused kernel expression can take the rounding; any other op's fp8 result is written in f32 and
# rounded by a cast of its own.
ELEMENTWISE = ("ttensor.cast", "ttensor.unary", "ttensor.binary", "ttensor.bias_add", "ttensor.broadcast",
               "ttensor.dropout", "ttensor.mask_blocks")
# Ops that move fp8 values without making new ones: their results are containers as their inputs are.
MOVES = ("ttensor.transpose", "ttensor.reshape")


def format_of(t: ir.Type) -> Fp8Format | None:
    """The fp8 format of a tensor type's elements, or None."""
    if not isinstance(t, ir.RankedTensorType):
        return None
    return FORMATS.get(str(t.element_type))


def round_source(x: str, name: str) -> str:
    """Kernel source rounding the value of expression `x` (f32 or f64) to fp8 format `name`, as an f32: the
    kernel language's conversion (tessera/frontend/kernel.py, FP8: ties to even, saturating, NaN a NaN), which
    each target spells out (passes/fp8_convert.py: cvt on ptx sm_90+, integer arithmetic elsewhere)."""
    return f"{name}({x})"


def _with_element(t: ir.RankedTensorType, elem: ir.Type) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(t.shape, elem, t.encoding)


def _rows_of_16_bytes(mm) -> bool:
    """Whether the one-byte GEMM can read `mm`'s operands, as far as the compiler knows: TMA reads their rows
    in 16-byte units, so a static K must be a multiple of 16. A plain product of another static K stays in
    the containers, whose packing pads K; a stored transpose (the scaled GEMM's Bᵀ) has no such path, and its
    GEMM refuses the K at the user's line."""
    a = ir.RankedTensorType(mm.operands[0].type)
    transposed = "tessera.transpose_a" in mm.attributes or "tessera.transpose_b" in mm.attributes
    k = a.rank - (2 if "tessera.transpose_a" in mm.attributes else 1)
    return transposed or a.is_dynamic_dim(k) or a.get_dim_size(k) % 16 == 0


def one_byte_parameters(fn) -> set:
    """The fp8 parameters of `fn` that only matmuls read, as operands of matmuls whose two operands are such
    parameters: on a target whose GEMM reads one-byte fp8 (TargetFacts.scaled_fp8_gemm) they stay one byte
    wide, from the caller's memory to the tensor cores."""
    kept = {a for a in fn.entry_block.arguments if format_of(a.type) is not None and list(a.uses) and
            all(u.owner.name == "ttensor.matmul" and u.operand_number < 2 and _rows_of_16_bytes(u.owner)
                for u in a.uses)}
    while True:   # a matmul with an operand that is not kept reads containers: its parameters are not kept
        mixed = {a for a in kept for u in a.uses if not all(o in kept for o in list(u.owner.operands)[:2])}
        if not mixed:
            return kept
        kept -= mixed


def _in_elementwise_kernel(op) -> bool:
    return "tessera.group_kind" in op.attributes and \
        ir.StringAttr(op.attributes["tessera.group_kind"]).value == "elementwise"


def read_by_kernels(v: ir.Value) -> bool:
    """Whether only generated elementwise kernels (kernelgen.elementwise, whose loads widen one-byte fp8) and
    the function's return read `v`: then it can stay one byte wide."""
    uses = list(v.uses)
    return bool(uses) and all(u.owner.name == "func.return" or _in_elementwise_kernel(u.owner) for u in uses)


def legalize(fn, target_name: str, one_byte: bool = False) -> list[str]:
    """Rewrites `fn`'s fp8 tensors that other kernels than the generated elementwise ones read to the f16
    container (see the module's docstring); returns the fallback notes for the kernel metadata. Made by an
    elementwise kernel, or a parameter, and read only by elementwise kernels or returned (read_by_kernels),
    an fp8 tensor keeps its type: one byte an element in memory (the kernels' fp8 memory type, every
    target), and at the call (uint8 bit patterns, or float32 values the executor rounds and encodes). With
    `one_byte` (a target whose GEMM reads one-byte fp8), so do the parameters `one_byte_parameters` finds.
    Raises LoweringError at an op that cannot produce its fp8 result in f32 instead."""
    f16, f32 = ir.F16Type.get(), ir.F32Type.get()
    taken: dict[str, None] = {}
    holds: dict = {}  # container value -> the fp8 format of its values

    def note(f: Fp8Format) -> None:
        taken[f"{f.name} stored as f16 (exact; rounded to {f.name} and saturated at ±{f.max_value:g})"] = None

    block = fn.entry_block
    ops = [op for op in block.operations if op.operation.name.startswith("ttensor.")]
    groups = [ir.IntegerAttr(op.attributes["tessera.group"]).value for op in ops if "tessera.group" in op.attributes]
    next_group = max(groups, default=-1) + 1
    i32 = ir.IntegerType.get_signless(32)
    first = next(iter(block.operations))

    def round_into_container(v, f: Fp8Format, where) -> None:
        """An elementwise group of its own after `where` (an insertion point) rounds f32 value `v` to `f`
        into the f16 container; every other use of `v` reads the container."""
        nonlocal next_group
        with where:
            cast = ttensor.CastOp(v, accum=ir.TypeAttr.get(f32), result=_with_element(v.type, f16))
        cast.attributes["tessera.round_to"] = ir.StringAttr.get(f.name)
        cast.attributes["tessera.group"] = ir.IntegerAttr.get(i32, next_group)
        cast.attributes["tessera.group_kind"] = ir.StringAttr.get("elementwise")
        holds[cast.result] = f.name
        next_group += 1
        for use in list(v.uses):
            if use.owner != cast.operation:
                use.owner.operands[use.operand_number] = cast.result
    arg_attrs = [ir.DictAttr(a) for a in ir.ArrayAttr(fn.attributes["arg_attrs"])]
    kept = one_byte_parameters(fn) if one_byte else set()
    for arg in list(block.arguments):
        f = format_of(arg.type)
        if f is None:
            continue
        if arg in kept or read_by_kernels(arg):
            holds[arg] = f.name
            continue
        note(f)
        arg.set_type(_with_element(arg.type, f32))
        # the caller still passes what the parameter declares (the executor checks it): keep its dtype
        attrs = {na.name: na.attr for na in arg_attrs[arg.arg_number]}
        arg_attrs[arg.arg_number] = ir.DictAttr.get({**attrs, DECLARED: ir.StringAttr.get(f.name)})
        with first.location:
            round_into_container(arg, f, ir.InsertionPoint(first))
    for op in ops:
        for r in op.results:
            f = format_of(r.type)
            if f is None:
                continue
            if op.operation.name in ELEMENTWISE and _in_elementwise_kernel(op) and read_by_kernels(r):
                holds[r] = f.name   # one byte: the kernel rounds its value and stores the byte
                op.attributes["tessera.round_to"] = ir.StringAttr.get(f.name)
                continue
            note(f)
            if op.operation.name in MOVES + ELEMENTWISE:
                r.set_type(_with_element(r.type, f16))
                holds[r] = f.name
                if op.operation.name in ELEMENTWISE:
                    op.attributes["tessera.round_to"] = ir.StringAttr.get(f.name)
                continue
            # Any other kernel (GEMM, attention, a row op) writes its f32 result; a rounding cast follows.
            r.set_type(_with_element(r.type, f32))
            with op.location:
                round_into_container(r, f, ir.InsertionPoint.after(op))
            if not op.verify():
                raise LoweringError(op, f"an {f.name} result of '{op.operation.name}' has no {target_name} "
                                        f"fallback (the target computes no fp8): produce f32 and op.cast it")
    for op in ops:
        if op.operation.name == "ttensor.matmul" and all(v in holds for v in list(op.operands)[:2]):
            op.attributes["tessera.fp8_operands"] = ir.ArrayAttr.get(
                [ir.StringAttr.get(holds[v]) for v in list(op.operands)[:2]])
    fn.attributes["arg_attrs"] = ir.ArrayAttr.get(arg_attrs)
    if holds:
        ret = list(block.operations)[-1]
        fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
            [a.type for a in block.arguments], [v.type for v in ret.operands]))
    return list(taken)
