"""``tessera-fp8-convert``: a kernel's fp8 conversions spelled out for its target.

A SIMT kernel stores fp8 (e4m3, e5m2) tensors as bytes (tessera/frontend/kernel.py, FP8): a load is
``arith.extf`` of the byte bitcast to ``f8E4M3FN`` / ``f8E5M2``, a store ``arith.truncf`` to the format bitcast
back to the byte, the truncation rounding to nearest even and saturating at the format's largest finite value
(±448, ±57344; NaN stays NaN), as the interpreter rounds (tessera/numerics/rounding.py, fp8_bits). No LLVM or
SPIR-V lowering knows those types, so this pass rewrites each conversion into i8 ↔ f32 before the upstream
conversions run:

    native    ptx sm_90+: cvt.rn.satfinite.{e4m3,e5m2}x2.f32 and cvt.rn.f16x2.{e4m3,e5m2}x2 (LLVM's
              llvm.nvvm.ff.to.*x2.rn / llvm.nvvm.*x2.to.f16x2.rn; on sm_89 LLVM and ptxas both want PTX ISA
              8.1 for them, and sm_89 images say 8.0, so sm_89 takes the software path),
              the NaN byte put right by a select (the interpreter writes the positive quiet NaN of the
              format whatever the input NaN's sign).
    software  everywhere else: integer arithmetic on the f32's bits, exact round-to-nearest-even (the
              subnormal range's variable shift included): about 40 integer operations a store, 15 a load,
              cheap beside the memory traffic they save, so every target keeps fp8 one byte wide.

An f64 is first rounded to f32: round to nearest twice is the same as once when the first precision has more
than twice the second's bits plus two (24 ≥ 2·4 + 2), and f32's range holds fp8's.
"""

from __future__ import annotations

from ..mlir import arith, ir, llvm

# per format: mantissa bits, exponent bias, the bits of its largest finite value as an f32, its NaN byte
FORMATS = {"f8E4M3FN": (3, 7, 0x43E00000, 0x7F), "f8E5M2": (2, 15, 0x47600000, 0x7E)}
_NATIVE = {"f8E4M3FN": "e4m3x2", "f8E5M2": "e5m2x2"}


def _i32(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IntegerType.get_signless(32), value).result


def _f32(value: float) -> ir.Value:
    return arith.ConstantOp(ir.F32Type.get(), value).result


def _sel(cond, a, b):
    return arith.SelectOp(cond, a, b).result


def _cmp(pred: str, a, b):
    return arith.CmpIOp(getattr(arith.CmpIPredicate, pred), a, b).result


def _shaped(elem: ir.Type, like: ir.Value) -> ir.Type:
    """`elem`, or a vector of it shaped as `like` when `like` is a vector."""
    return ir.VectorType.get(like.type.shape, elem) if isinstance(like.type, ir.VectorType) else elem


def _splat(t: ir.Type, value) -> ir.Value:
    """A constant of scalar or vector type `t`."""
    elem = t.element_type if isinstance(t, ir.VectorType) else t
    attr = ir.FloatAttr.get(elem, value) if isinstance(elem, ir.F32Type) else ir.IntegerAttr.get(elem, value)
    return arith.ConstantOp(t, ir.DenseElementsAttr.get_splat(t, attr) if t != elem else attr).result


def widen(byte: ir.Value, fmt: str) -> ir.Value:
    """The f32 value of fp8 byte `byte` (i8, or a vector of them: the CPU GEMM widens while packing) of `fmt`,
    by integer arithmetic: a normal number's bits are the byte's magnitude shifted into f32's fields and
    rebiased; a subnormal's fraction times its spacing (exact); e4m3's S.1111.111 is NaN, e5m2's exponent 31
    infinity or NaN."""
    m, bias, _, _ = FORMATS[fmt]
    i32, f32 = _shaped(ir.IntegerType.get_signless(32), byte), _shaped(ir.F32Type.get(), byte)
    c = lambda value: _splat(i32, value)  # noqa: E731
    b = arith.ExtUIOp(i32, byte).result
    sign = arith.ShLIOp(arith.AndIOp(b, c(0x80)).result, c(24)).result
    mag = arith.AndIOp(b, c(0x7F)).result
    normal = arith.AddIOp(arith.ShLIOp(mag, c(23 - m)).result, c((127 - bias) << 23)).result
    frac = arith.AndIOp(mag, c((1 << m) - 1)).result
    sub = arith.MulFOp(arith.SIToFPOp(f32, frac).result, _splat(f32, 2.0 ** (1 - bias - m))).result
    bits = _sel(_cmp("ult", mag, c(1 << m)), arith.BitcastOp(i32, sub).result, normal)
    if fmt == "f8E4M3FN":
        bits = _sel(_cmp("eq", mag, c(0x7F)), c(0x7FC00000), bits)
    else:
        bits = _sel(_cmp("uge", mag, c(0x7C)), _sel(_cmp("eq", mag, c(0x7C)), c(0x7F800000), c(0x7FC00000)), bits)
    return arith.BitcastOp(f32, arith.OrIOp(bits, sign).result).result


def narrow(x: ir.Value, fmt: str) -> ir.Value:
    """The fp8 byte (i8) of `fmt` nearest f32 `x`, by integer arithmetic on its bits: the magnitude clamped to
    the largest finite value (saturation; infinities too), then rounded to nearest even — where the result is
    normal by adding just under half a unit of the dropped bits plus the kept lowest bit (a carry moves into
    the exponent, as it should), where it is subnormal by a shift that depends on the exponent with the
    remainder compared with the half; the sign bit put back; NaN the format's NaN byte."""
    m, bias, top, nan = FORMATS[fmt]
    i32 = ir.IntegerType.get_signless(32)
    bits = arith.BitcastOp(i32, x).result
    sign = arith.AndIOp(arith.ShRUIOp(bits, _i32(24)).result, _i32(0x80)).result
    a = arith.AndIOp(bits, _i32(0x7FFFFFFF)).result
    is_nan = _cmp("ugt", a, _i32(0x7F800000))
    a = _sel(_cmp("ugt", a, _i32(top)), _i32(top), a)
    drop = 23 - m
    lsb = arith.AndIOp(arith.ShRUIOp(a, _i32(drop)).result, _i32(1)).result
    up = arith.AddIOp(a, arith.AddIOp(_i32((1 << (drop - 1)) - 1), lsb).result).result
    normal = arith.SubIOp(arith.ShRUIOp(up, _i32(drop)).result, _i32((127 - bias) << m)).result
    # below the smallest normal, 2^(1-bias): the value in units of the subnormal spacing 2^(1-bias-m) is the
    # 24-bit significand shifted right by (drop + 1 - bias) - (exponent - 127), 31 at most (then it is 0)
    expo = arith.ShRUIOp(a, _i32(23)).result
    mant = arith.OrIOp(arith.AndIOp(a, _i32(0x7FFFFF)).result, _i32(0x800000)).result
    shift = arith.SubIOp(_i32(drop + 1 - bias + 127), expo).result
    shift = _sel(_cmp("ugt", shift, _i32(31)), _i32(31), shift)
    q = arith.ShRUIOp(mant, shift).result
    rem = arith.AndIOp(mant, arith.SubIOp(arith.ShLIOp(_i32(1), shift).result, _i32(1)).result).result
    half = arith.ShLIOp(_i32(1), arith.SubIOp(shift, _i32(1)).result).result
    odd = _cmp("ne", arith.AndIOp(q, _i32(1)).result, _i32(0))
    round_up = arith.OrIOp(_cmp("ugt", rem, half), arith.AndIOp(_cmp("eq", rem, half), odd).result).result
    sub = arith.AddIOp(q, arith.ExtUIOp(i32, round_up).result).result
    code = _sel(_cmp("ult", a, _i32((128 - bias) << 23)), sub, normal)
    code = _sel(is_nan, _i32(nan), arith.OrIOp(code, sign).result)
    return arith.TruncIOp(ir.IntegerType.get_signless(8), code).result


def _native_narrow(x: ir.Value, fmt: str) -> ir.Value:
    i16, i8 = ir.IntegerType.get_signless(16), ir.IntegerType.get_signless(8)
    pair = llvm.CallIntrinsicOp(i16, f"llvm.nvvm.ff.to.{_NATIVE[fmt]}.rn", [_f32(0.0), x], [], []).result
    byte = arith.TruncIOp(i8, pair).result    # the second operand's byte is the low one
    nan = arith.CmpFOp(arith.CmpFPredicate.UNO, x, x).result
    return _sel(nan, arith.ConstantOp(i8, FORMATS[fmt][3]).result, byte)


def _native_widen(byte: ir.Value, fmt: str) -> ir.Value:
    i16, f16 = ir.IntegerType.get_signless(16), ir.F16Type.get()
    pair = llvm.CallIntrinsicOp(ir.VectorType.get([2], f16), f"llvm.nvvm.{_NATIVE[fmt]}.to.f16x2.rn",
                                [arith.ExtUIOp(i16, byte).result], [], []).result
    low = llvm.ExtractElementOp(pair, llvm.ConstantOp(ir.IntegerType.get_signless(32),
                                                      ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 0)).result)
    return arith.ExtFOp(ir.F32Type.get(), low.result).result


def _fp8(t: ir.Type, vectors: bool = False) -> str | None:
    """The fp8 format of type `t` (with `vectors`, of a vector's elements too), or None."""
    s = str(t.element_type if vectors and isinstance(t, ir.VectorType) else t)
    return s if s in FORMATS else None


def _op(owner) -> ir.Operation | None:
    """A value's owner or a use's user as an Operation (None for a block argument's block)."""
    if isinstance(owner, ir.OpView):
        return owner.operation
    return owner if isinstance(owner, ir.Operation) else None


def _byte_of(v: ir.Value) -> ir.Value:
    """The i8 an f8 value was bitcast from (the frontend's loads), else a bitcast of it."""
    owner = _op(v.owner)
    i8 = _shaped(ir.IntegerType.get_signless(8), v)
    if owner is not None and owner.name == "arith.bitcast" and owner.operands[0].type == i8:
        return owner.operands[0]
    return arith.BitcastOp(i8, v).result


def _ops(root, *names: str) -> list:
    """The operations named `names` under `root` (a module or op), in order."""
    out = []

    def visit(op):
        op = op.operation if hasattr(op, "operation") else op
        if op.name in names:
            out.append(op)
        return ir.WalkResult.ADVANCE
    (root.operation if hasattr(root, "operation") else root).walk(visit)
    return out


def run(root, native: bool = False) -> int:
    """Rewrites every extf from and truncf to an fp8 type under `root` (a module or op); `native`: ptx sm_90+'s
    cvt instructions, else integer arithmetic. Returns how many conversions it rewrote."""
    found = [op for op in _ops(root, "arith.extf", "arith.truncf")   # vectors: widenings only (the CPU GEMM's)
             if (_fp8(op.operands[0].type, True) if op.name == "arith.extf" else _fp8(op.results[0].type))]
    for op in found:   # a value of the format narrowed to it again (a rounded result stored) is itself
        source = _op(op.operands[0].owner)
        if op.name == "arith.truncf" and source is not None and source.name == "arith.extf" and \
                source.operands[0].type == op.results[0].type:
            op.results[0].replace_all_uses_with(source.operands[0])
    for op in found:
        if not any(list(r.uses) for r in op.results):
            _erase_dead(op)
            continue
        with ir.InsertionPoint(op), op.location:
            if op.name == "arith.extf":
                fmt = _fp8(op.operands[0].type, True)
                vec = isinstance(op.operands[0].type, ir.VectorType)
                value = (_native_widen if native and not vec else widen)(_byte_of(op.operands[0]), fmt)
                if op.results[0].type != value.type:   # an f64 (or f16) result: exact from the f32
                    cls = arith.ExtFOp if str(op.results[0].type) == "f64" else arith.TruncFOp
                    value = cls(op.results[0].type, value).result
                op.results[0].replace_all_uses_with(value)
            else:
                fmt = _fp8(op.results[0].type)
                x = op.operands[0]
                if str(x.type) != "f32":   # f64 rounded to f32 first (see the module's docstring), f16 exact
                    x = (arith.TruncFOp if str(x.type) == "f64" else arith.ExtFOp)(ir.F32Type.get(), x).result
                byte = (_native_narrow if native else narrow)(x, fmt)
                # the frontend's stores bitcast the f8 to its byte: they take the byte itself
                for use in list(op.results[0].uses):
                    user = _op(use.owner)
                    if user.name == "arith.bitcast" and str(user.results[0].type) == "i8":
                        user.results[0].replace_all_uses_with(byte)
                        user.erase()
                if list(op.results[0].uses):
                    op.results[0].replace_all_uses_with(arith.BitcastOp(op.results[0].type, byte).result)
        _erase_dead(op)
    for o in _ops(root, "arith.bitcast"):   # what the folding left: a byte bitcast to the format and back
        inner = _op(o.operands[0].owner)
        if str(o.results[0].type) == "i8" and inner is not None and inner.name == "arith.bitcast" and \
                str(inner.operands[0].type) == "i8":
            o.results[0].replace_all_uses_with(inner.operands[0])
            o.erase()
            if not list(inner.results[0].uses):
                inner.erase()
    return len(found)


def _erase_dead(op) -> None:
    """Erases `op` and the bitcast that made its operand, once nothing uses them."""
    operands = [o for o in (_op(v.owner) for v in op.operands) if o is not None]
    if not any(list(r.uses) for r in op.results):
        op.erase()
    for o in operands:
        if o.name == "arith.bitcast" and not list(o.results[0].uses):
            o.erase()
