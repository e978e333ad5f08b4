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
from . import schedule_ir

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


def _rows_of_16_bytes(mm, proven: bool = False) -> bool:
    """Whether the one-byte GEMM can read `mm`'s operands, as far as the compiler knows: TMA reads their rows
    in 16-byte units, so K must be a multiple of 16. A symbolic K is checked at the launch (as
    torch._scaled_mm checks it), unless `proven` asks for a static K: a plain product of another K stays in
    the containers, whose packing pads K. A stored transpose (the scaled GEMM's Bᵀ) has no such path (the
    containers' GEMM reads no transposed operand), so it is always read as bytes."""
    a = ir.RankedTensorType(mm.operands[0].type)
    transposed = "tessera.transpose_a" in mm.attributes or "tessera.transpose_b" in mm.attributes
    k = a.rank - (2 if "tessera.transpose_a" in mm.attributes else 1)
    if transposed:
        return True
    if a.is_dynamic_dim(k):
        return not proven
    return a.get_dim_size(k) % 16 == 0


def _in_group(op, kind: str) -> bool:
    return "tessera.group_kind" in op.attributes and ir.StringAttr(op.attributes["tessera.group_kind"]).value == kind


def _in_elementwise_kernel(op) -> bool:
    return _in_group(op, "elementwise")


def read_by_kernels(v: ir.Value) -> bool:
    """Whether only generated elementwise kernels (kernelgen.elementwise, whose loads widen one-byte fp8) and
    the function's return read `v`: then it can stay one byte wide."""
    uses = list(v.uses)
    return bool(uses) and all(u.owner.name == "func.return" or _in_elementwise_kernel(u.owner) for u in uses)


def _moves_bytes(op) -> bool:
    """A transpose in a layout kernel of its own (kernelgen.transpose: its tensors are the kernel language's
    fp8 memory type, so it copies the bytes exactly) or a reshape (a view of the same buffer)."""
    return op.name == "ttensor.reshape" or op.name == "ttensor.transpose" and _in_group(op, "layout")


def one_byte_values(fn, gemm: str = "") -> set:
    """The fp8 values of `fn` that stay one byte wide in memory: parameters and results of ops that store
    bytes — an elementwise kernel's fp8 result (rounded in the kernel), a transpose's or reshape's of a
    one-byte value, and any other op's fp8 result (rounded by a cast kernel of its own that `legalize` adds)
    — whose every reader reads bytes: the function's return, an elementwise kernel, a transpose or reshape
    whose result stays one byte, and a matmul both of whose operands stay one byte where the target's GEMM
    reads bytes (`gemm`): "widen" (TargetFacts.fp8_gemm_widens: the CPU's packing, the SIMT GEMM of SPIR-V and
    AMDGPU, which load the bytes and widen them to f32 exactly, as elementwise kernels do), or "wgmma"
    (TargetFacts.scaled_fp8_gemm: sm_90a's e4m3/e5m2 kinds read the bytes as they are, in TMA rows of 16
    bytes: `_rows_of_16_bytes`, a symbolic K only where both operands are the caller's — kernel-made
    operands were multiplied whatever K, so they keep the containers' padded K there), and the e4m3 Q, K, V of
    a flash_attention_fp8 with descales (kept only where the target has its one-byte kernel, sm_90a's:
    passes/decompose.attention_fp8). Other attention and row kernels (and mma.sync's GEMM before sm_90a, whose
    copies to shared memory cannot widen) read the f16 container."""
    block = fn.entry_block
    made = [r for op in block.operations if op.operation.name.startswith("ttensor.") for r in op.results]
    params = set(block.arguments)
    # an unused parameter too (nothing reads it; a rounding kernel of it would have no output)
    kept = {v for v in [*block.arguments, *made] if format_of(v.type) is not None and (list(v.uses) or v in params)}
    for v in list(kept):   # an elementwise op fused into another kind of kernel (a GEMM's epilogue) writes f16
        owner = v.owner
        if isinstance(owner, ir.OpView) and owner.operation.name in ELEMENTWISE and \
                not _in_elementwise_kernel(owner):
            kept.discard(v)

    def reads_bytes(u) -> bool:
        user = u.owner
        if user.name == "func.return" or _in_elementwise_kernel(user):
            return True
        if _moves_bytes(user):
            return user.results[0] in kept
        if user.name == "ttensor.flash_attention_fp8":   # its e4m3 Q, K, V (with descales): the kernel reads
            return u.operand_number < 3                  # bytes (the op survives only where it has one)
        if user.name == "ttensor.matmul" and gemm and u.operand_number < 2:
            ab = list(user.operands)[:2]
            return all(o in kept for o in ab) and \
                (gemm == "widen" or _rows_of_16_bytes(user, not all(o in params for o in ab)))
        return False
    while True:
        dropped = {v for v in kept if not all(reads_bytes(u) for u in v.uses)}
        dropped |= {v for v in kept if isinstance(v.owner, ir.OpView) and _moves_bytes(v.owner.operation)
                    and v.owner.operands[0] not in kept}
        if not dropped:
            return kept
        kept -= dropped


def _fold_byte_transposes(fn, kept: set) -> None:
    """sm_90a: a one-byte matmul operand that is a transpose (of the last two axes, in a layout kernel of its
    own, read by nothing else) of a one-byte value is read in place instead (`tessera.transpose_a/_b`, as
    passes/fold_transposes.py folds bf16/f16 ones in the schedule stage, which cannot know yet which fp8
    operands stay one byte): wgmma reads a stored Bᵀ [N, K] as it is, where the transpose kernel and the
    GEMM's copy back to [N, K] would move B twice. The transpose and its decisions are erased."""
    for op in list(fn.entry_block.operations):
        if op.operation.name != "ttensor.matmul" or not all(v in kept for v in list(op.operands)[:2]):
            continue
        lhs_rank, rhs_rank = (ir.RankedTensorType(v.type).rank for v in list(op.operands)[:2])
        for i, name in enumerate((ttensor.TRANSPOSE_A, ttensor.TRANSPOSE_B)):
            t = op.operands[i]
            src = schedule_ir.swapped_input(t)
            if src is None or name in op.attributes or src not in kept or len(list(t.uses)) != 1 or \
                    not _in_group(t.owner, "layout") or i == 0 and lhs_rank > 2 and rhs_rank == 2:
                continue
            op.operation.operands[i] = src
            op.attributes[name] = ir.UnitAttr.get()
            transpose = t.owner.operation
            for d in schedule_ir.decisions(t.owner):
                d.operation.erase()
            transpose.erase()


def legalize(fn, target_name: str, one_byte: bool = False, widens: bool = False) -> list[str]:
    """Rewrites `fn`'s fp8 tensors that other kernels than the generated elementwise ones read to the f16
    container (see the module's docstring); returns the fallback notes for the kernel metadata. The values
    `one_byte_values` finds (GEMM operands too with `one_byte`, sm_90a's wgmma, or `widens`, a target whose
    GEMMs widen one-byte fp8 as they load it)
    keep their type: one byte an element in memory (the kernels' fp8 memory type, every target), and at the
    call (uint8 bit patterns, or float32 values the executor rounds and encodes); an fp8 result of another
    kind of kernel among them is written in f32 and rounded to its bytes by a cast kernel. Raises
    LoweringError at an op that cannot produce its fp8 result in f32 instead."""
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

    def round_into_container(v, f: Fp8Format, where, elem=f16) -> None:
        """An elementwise group of its own after `where` (an insertion point) rounds f32 value `v` to `f`
        into the f16 container (or, `elem` the format itself, its bytes); every other use of `v` reads it."""
        nonlocal next_group
        with where:
            cast = ttensor.CastOp(v, accum=ir.TypeAttr.get(f32), result=_with_element(v.type, elem))
        cast.attributes["tessera.round_to"] = ir.StringAttr.get(f.name)
        cast.attributes["tessera.group"] = ir.IntegerAttr.get(i32, next_group)
        cast.attributes["tessera.group_kind"] = ir.StringAttr.get("elementwise")
        holds[cast.result] = f.name
        next_group += 1
        for use in list(v.uses):
            if use.owner != cast.operation:
                use.owner.operands[use.operand_number] = cast.result
    arg_attrs = [ir.DictAttr(a) for a in ir.ArrayAttr(fn.attributes["arg_attrs"])]
    kept = one_byte_values(fn, "wgmma" if one_byte else "widen" if widens else "")
    for arg in list(block.arguments):
        f = format_of(arg.type)
        if f is None:
            continue
        if arg in kept:
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
            if r in kept and op.operation.name in ELEMENTWISE + MOVES:
                holds[r] = f.name   # one byte: the kernel rounds its value (a move copies it) and stores the byte
                if op.operation.name in ELEMENTWISE:
                    op.attributes["tessera.round_to"] = ir.StringAttr.get(f.name)
                continue
            if r not in kept:
                note(f)
            if op.operation.name in MOVES + ELEMENTWISE:
                r.set_type(_with_element(r.type, f16))
                holds[r] = f.name
                if op.operation.name in ELEMENTWISE:
                    op.attributes["tessera.round_to"] = ir.StringAttr.get(f.name)
                continue
            # Any other kernel (GEMM, attention, a row op) writes its f32 result; a rounding cast follows.
            elem = ir.RankedTensorType(r.type).element_type if r in kept else f16
            r.set_type(_with_element(r.type, f32))
            with op.location:
                round_into_container(r, f, ir.InsertionPoint.after(op), elem)
            if not op.verify():
                raise LoweringError(op, f"an {f.name} result of '{op.operation.name}' has no {target_name} "
                                        f"fallback (the target computes no fp8): produce f32 and op.cast it")
    for op in ops:
        if op.operation.name == "ttensor.matmul" and all(v in holds for v in list(op.operands)[:2]):
            op.attributes["tessera.fp8_operands"] = ir.ArrayAttr.get(
                [ir.StringAttr.get(holds[v]) for v in list(op.operands)[:2]])
    if one_byte:
        _fold_byte_transposes(fn, kept)
    fn.attributes["arg_attrs"] = ir.ArrayAttr.get(arg_attrs)
    if holds:
        ret = list(block.operations)[-1]
        fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
            [a.type for a in block.arguments], [v.type for v in ret.operands]))
    return list(taken)
