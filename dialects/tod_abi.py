"""``tod`` ops of operators crossing the ABI (spec Part VI §6.2, chapter 29; ABI spec §5.3).

    %A = tod.descriptor %M {repr = "dense", tag = "none", flags = ["recursion"], frame_bytes = 64, depth = 3,
                            name = "A"} : (tensor<16x16xf32>) -> !tod.operator<16, 16, f32, f32>
    tod.export %B {name = "B"} : !tod.operator<...>

`tod.descriptor` is the operator a TessOperatorDesc describes — its representation (`repr`) applied to its
payload tensors, conjugate-transposed when its flags hold "adjoint":

    dense        payload M [Dout, Din]                     M
    factor       payload U [Dout, r], S [r], V [Din, r]     U diag(S) V*
    implicit     tag "diag": payload d [N]                  diag(d)
                 tag "conv1d": payload h [m], m <= N         circular convolution on length-N vectors
    blocksparse  payload blocks [nnz, b, b], rows, cols     Σ_k E_{rows[k], cols[k]} ⊗ blocks[k] (i32 coordinates
                 [nnz] of i32                               of b×b blocks; extents static multiples of b)

When every payload tensor is a parameter of the function, the descriptor is an operator parameter of its
signature; `tod.export` makes one an operator result (the function returns its payload tensors). The flags
"unitary", "self_adjoint", "normal" are promises the caller makes (or the function makes, of a result).

Verifier rules besides the extents: the payload count and tag of each representation, and the ABI spec's
§5.3 contracts — a spectral (factor) operator declares its `decomposition` (svd, eig, eigh), and nothing
else does; an adjoint crosses the ABI as a descriptor carrying the "adjoint" flag (`tod.export` of a
`tod.adjoint` is refused); a recursion operator (flag "recursion") declares `frame_bytes`, its stack frame per
recursion level (at least one Din vector of its entries), and `depth` ≥ 1 — the most times the function
applies it (each application, unrolled, is one level) — and nothing else does.
"""

# No `from __future__ import annotations` here: ext reads the annotations as live types.
import typing

from ..mlir import ext, ir
from .support import Invalid, attribute, int_attribute, str_attribute, verifier
from .tod import (TOD, OperatorType, _TodOp, _dims, _is_entry_type, _tensor, _width, component, operator_sig,
                  same, show)

REPRS = {"dense": 1, "factor": 3, "implicit": 1, "blocksparse": 3}
TAGS = {"dense": ("none",), "factor": ("none",), "implicit": ("diag", "conv1d"), "blocksparse": ("none",)}
FLAGS = ("unitary", "self_adjoint", "normal", "adjoint", "recursion")
DECOMPOSITIONS = ("svd", "eig", "eigh")


def flags_of(op) -> tuple[str, ...]:
    attr = attribute(op, "flags", ir.ArrayAttr, "a list of flag names")
    names = [ir.StringAttr(a).value if isinstance(a, ir.StringAttr) else None for a in attr]
    for n in names:
        if n not in FLAGS:
            raise Invalid(f"flag {n!r} is not one of {', '.join(FLAGS)}")
    if names != sorted(set(names), key=FLAGS.index):
        raise Invalid(f"flags {names} repeat a flag or come out of the order {', '.join(FLAGS)}")
    return tuple(names)


class DescriptorOp(_TodOp, name="descriptor"):
    """The operator a TessOperatorDesc of representation `repr` describes (the module docstring's table).
    Not Pure: an operator parameter the function never applies is still part of its signature, so
    canonicalization must not erase it before tessera-tod-lower records it."""

    # three operands of their own (each its own type), not one variadic of one type
    payload0: ext.Operand[typing.Any]
    result: ext.Result[OperatorType]
    payload1: typing.Optional[ext.Operand[typing.Any]] = None
    payload2: typing.Optional[ext.Operand[typing.Any]] = None

    @verifier
    def verify_invariants(self):
        attribute(self, "name", ir.StringAttr, "a string")
        repr_ = str_attribute(self, "repr", tuple(REPRS))
        tag = str_attribute(self, "tag", TAGS[repr_])
        flags = flags_of(self)
        payload = list(self.operation.operands)
        if len(payload) != REPRS[repr_]:
            raise Invalid(f"a {repr_} descriptor carries {REPRS[repr_]} payload tensor(s), got {len(payload)}")
        decomposition = str_attribute(self, "decomposition", DECOMPOSITIONS, required=False)
        if repr_ == "factor" and decomposition is None:
            raise Invalid("is a spectral (factor) operator: it must declare its decomposition (svd, eig or eigh), "
                          "ABI spec §5.3")
        if repr_ != "factor" and decomposition is not None:
            raise Invalid(f"declares a decomposition, which only a factor operator has (this one is {repr_})")
        din, dout, elem = self._described(repr_, tag, payload)
        if "adjoint" in flags:
            din, dout = dout, din
        r = self._expect(din, dout, elem)
        self._recursion("recursion" in flags, r)

    def _described(self, repr_: str, tag: str, payload: list) -> tuple:
        """(Din, Dout, entry type) of the operator the payload describes, before any adjoint."""
        r = operator_sig(self.result.type, "result")
        if repr_ == "dense":
            m = self._entries(payload[0], "matrix", 2)
            rows, cols = _dims(m)
            return cols, rows, m.element_type
        if repr_ == "factor":
            u, s, v = (self._entries(p, w, n) for p, w, n in zip(payload, ("U", "S", "V"), (2, 1, 2)))
            (du, ru), (rs,), (dv, rv) = _dims(u), _dims(s), _dims(v)
            if not (same(ru, rs) and same(rs, rv)):
                raise Invalid(f"U, S and V must have one rank r (U [Dout, r], S [r], V [Din, r]), got "
                              f"{show(ru)}, {show(rs)}, {show(rv)}")
            if v.element_type != u.element_type or component(s.element_type) != component(u.element_type):
                raise Invalid(f"U and V must have one entry type and S its precision, got {u.element_type}, "
                              f"{s.element_type}, {v.element_type}")
            return dv, du, u.element_type
        if repr_ == "implicit":
            p = self._entries(payload[0], "diagonal" if tag == "diag" else "kernel", 1)
            (n,) = _dims(p)
            if tag == "diag":
                return n, n, p.element_type
            self._static(r)
            if n is not None and n > r.din:
                raise Invalid(f"kernel of length {n} is longer than the signal length {r.din}")
            return r.din, r.din, p.element_type
        blocks = self._entries(payload[0], "blocks", 3)
        nnz, bh, bw = _dims(blocks)
        for what, coords in zip(("rows", "cols"), payload[1:]):
            t = _tensor(coords, what, 1)
            if t.element_type != ir.IntegerType.get_signless(32) or not same(_dims(t)[0], nnz):
                raise Invalid(f"{what} must be a tensor of {show(nnz)} i32 block coordinates, got {t}")
        self._static(r)
        if bh is None or bh != bw or r.din % bh or r.dout % bh:
            raise Invalid(f"blocks must be square and static, dividing the extents {r.din} -> {r.dout}, got "
                          f"{show(bh)}x{show(bw)}")
        if "adjoint" in flags_of(self):   # r is the result, the adjoint's extents
            return r.dout, r.din, blocks.element_type
        return r.din, r.dout, blocks.element_type

    @staticmethod
    def _entries(value, what: str, rank: int) -> ir.RankedTensorType:
        t = _tensor(value, what, rank)
        if not _is_entry_type(t.element_type):
            raise Invalid(f"{what} entries must be float or complex, got {t.element_type}")
        return t

    def _recursion(self, recursion: bool, r) -> None:
        frame = int_attribute(self, "frame_bytes", required=False)
        depth = int_attribute(self, "depth", required=False)
        if not recursion:
            if frame is not None or depth is not None:
                raise Invalid("declares frame_bytes or depth, which only a recursion operator (flag 'recursion') has")
            return
        if frame is None or depth is None:
            raise Invalid("is a recursion operator: it must declare its stack-frame size (frame_bytes) and its depth, "
                          "ABI spec §5.3")
        if depth < 1:
            raise Invalid(f"depth must be at least 1, got {depth}")
        applied = sum(u.owner.name == "tod.apply" for u in self.result.uses)
        if applied > depth:   # each application is one recursion level: the frames declared must hold them
            raise Invalid(f"is applied {applied} times, more than its declared recursion depth {depth}")
        need = None if r.din is None else r.din * _width(r.elem) * (2 if isinstance(r.elem, ir.ComplexType) else 1) // 8
        if frame < 1 or need is not None and frame < need:
            raise Invalid(f"frame_bytes {frame} cannot hold one level's vector of {show(r.din)} {r.elem} entries"
                          + (f" ({need} bytes)" if need is not None else ""))


class ExportOp(_TodOp, name="export"):
    """Operator `operator` crosses the ABI as a result named `name`: the function returns its descriptor's
    payload tensors."""

    operator: ext.Operand[OperatorType]

    @verifier
    def verify_invariants(self):
        attribute(self, "name", ir.StringAttr, "a string")
        src = self.operator.owner
        src_name = src.name if isinstance(src, ir.Operation) else src.operation.name \
            if hasattr(src, "operation") else None
        if src_name == "tod.adjoint":
            raise Invalid("exports an adjoint: an adjoint crosses the ABI as its operand's descriptor carrying the "
                          "'adjoint' flag (ABI spec §5.3), not as tod.adjoint")
        if src_name != "tod.descriptor":
            raise Invalid(f"operator must be a tod.descriptor (the payload a caller reads), got "
                          f"{src_name or 'a block argument'}")
