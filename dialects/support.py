"""Helpers shared by the dialect definitions: verifier diagnostics and attribute reading."""

from __future__ import annotations

import contextlib
import functools

from ..mlir import ext, ir


def int_attr(attr) -> int:
    return ir.IntegerAttr(attr).value


def constant_int(value) -> int | None:
    """The integer an SSA value is known to hold when an ``arith.constant`` defines it, else None."""
    owner = value.owner
    if isinstance(owner, ir.OpView) and owner.operation.name == "arith.constant":
        attr = owner.attributes["value"]
        return attr.value if isinstance(attr, ir.IntegerAttr) else None
    return None


def create(op_cls, *args, **kwargs):
    """Builds a Python-defined op. ext's builders drop attribute values that are falsy in Python, which a
    false ``BoolAttr`` is; such attributes are set after creation instead."""
    falsy = {k: v for k, v in kwargs.items() if isinstance(v, ir.BoolAttr) and not v.value}
    kwargs.update({k: ir.BoolAttr.get(True) for k in falsy})
    op = op_cls(*args, **kwargs)
    for k, v in falsy.items():
        op.attributes[k] = v
    return op


# -- verifiers ---------------------------------------------------------------------------------------------
# A verifier with many rules reads best as straight-line checks. Rules raise `Invalid`; `@verifier` turns
# that into an error at the op's location (which the frontend set to the user's file:line:col), naming the
# op: ``kernel.py:7:9: error: 'ttile.thread_id' axis must be …``. (A plain Python exception escaping a
# verifier would lose the location, and dialects.ext runs `verify_invariants` before IRDL has checked that
# declared attributes exist or operands have the declared types, so the readers below check presence and kind
# themselves, and `declared_attributes` guards rules that read attributes directly.)

class Invalid(Exception):
    """A verifier rule the op breaks; the message completes "'<op name>' …"."""


def verifier(rules):
    """Decorates a ``verify_invariants`` or ``verify_region_invariants`` written to raise `Invalid`. The rules
    run only on an op with as many operands, results and regions as it declares, so they may index them;
    IRDL reports a wrong count after them."""

    @functools.wraps(rules)
    def verify(self) -> bool:
        if not _counts_fit(self):
            return True
        try:
            rules(self)
        except Invalid as e:
            self.location.emit_error(f"'{self.operation.name}' {e}")
            return False
        return True

    return verify


def _counts_fit(op) -> bool:
    fields = getattr(type(op), "_fields")  # ext's record of the declared fields
    for kind, count in ((ext.OperandDef, len(op.operation.operands)), (ext.ResultDef, len(op.operation.results))):
        kinds = [f.variadicity for f in fields if isinstance(f, kind)]
        single = kinds.count(ext.Variadicity.single)
        most = None if ext.Variadicity.variadic in kinds else single + kinds.count(ext.Variadicity.optional)
        if count < single or most is not None and count > most:
            return False
    return len(op.operation.regions) == sum(isinstance(f, ext.RegionDef) for f in fields)


def attribute(op, name: str, kind, what: str, required: bool = True):
    """The attribute `name` of `op` when it is an instance of `kind`; None when absent and not `required`.
    `what` describes a valid value for the message ("an integer")."""
    attrs = op.operation.attributes
    if name not in attrs:
        if required:
            raise Invalid(f"needs attribute '{name}' ({what})")
        return None
    attr = attrs[name]
    if not isinstance(attr, kind):
        raise Invalid(f"attribute '{name}' must be {what}, got {attr}")
    return attr


def int_attribute(op, name: str, required: bool = True) -> int | None:
    attr = attribute(op, name, ir.IntegerAttr, "an integer", required)
    return None if attr is None else attr.value


def ints_attribute(op, name: str, required: bool = True) -> list[int] | None:
    attr = attribute(op, name, ir.ArrayAttr, "a list of integers like [16, 8]", required)
    if attr is None:
        return None
    if not all(isinstance(a, ir.IntegerAttr) for a in attr):
        raise Invalid(f"attribute '{name}' must be a list of integers like [16, 8], got {attr}")
    return [a.value for a in attr]


def str_attribute(op, name: str, choices, required: bool = True) -> str | None:
    attr = attribute(op, name, ir.StringAttr, "a string", required)
    if attr is None:
        return None
    if attr.value not in choices:
        raise Invalid(f"{name} must be one of {', '.join(choices)}; got '{attr.value}'")
    return attr.value


def strs_attribute(op, name: str, choices, required: bool = True) -> list[str] | None:
    attr = attribute(op, name, ir.ArrayAttr, 'a list of strings like ["a", "b"]', required)
    if attr is None:
        return None
    if not all(isinstance(a, ir.StringAttr) for a in attr):
        raise Invalid(f'attribute \'{name}\' must be a list of strings like ["a", "b"], got {attr}')
    values = [a.value for a in attr]
    for v in values:
        if v not in choices:
            raise Invalid(f"{name} entry '{v}' is not one of {', '.join(choices)}")
    return values


def is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def positional_groups(cls):
    """Class decorator for an ext op with at most one optional or variadic operand group, and at most one
    such result group.

    dialects.ext builders write ``operandSegmentSizes``/``resultSegmentSizes`` and its accessors read those
    groups through them, but IRDL infers a lone group from the operand count, so IR written by hand leaves
    the sizes out, and the generated accessors then fail. With one group, positions alone say where it lies:
    the accessors here read by position, and built ops drop the sizes, so that text written by hand and IR
    built from Python look and read the same."""
    single = ext.Variadicity.single
    fields = getattr(cls, "_fields")  # ext's record of the fields, in declaration order
    operands = [f for f in fields if isinstance(f, ext.OperandDef)]
    results = [f for f in fields if isinstance(f, ext.ResultDef)]
    for group in (operands, results):
        if sum(f.variadicity != single for f in group) > 1:
            raise TypeError(f"{cls.__name__}: positional_groups takes at most one optional or variadic group")

    def accessor(values: str, group, i):
        after = len(group) - i - 1  # fields after field i, all single when field i is the group
        kind = group[i].variadicity
        if kind == ext.Variadicity.variadic:
            return property(lambda self: getattr(self, values)[i:len(getattr(self, values)) - after])
        if kind == ext.Variadicity.optional:
            return property(lambda self: getattr(self, values)[i] if len(getattr(self, values)) == len(group)
                            else None)
        if all(f.variadicity == single for f in group[:i]):
            return property(lambda self: getattr(self, values)[i])
        return property(lambda self: getattr(self, values)[len(getattr(self, values)) - after - 1])

    for i, f in enumerate(operands):
        setattr(cls, f.name, accessor("operands", operands, i))
        setattr(cls.Adaptor, f.name, accessor("operands", operands, i))
    for i, f in enumerate(results):
        setattr(cls, f.name, accessor("results", results, i))

    build = cls.__init__

    @functools.wraps(build)
    def __init__(self, *args, **kwargs):
        build(self, *args, **kwargs)
        for sizes in ("operandSegmentSizes", "resultSegmentSizes"):
            if sizes in self.operation.attributes:
                del self.operation.attributes[sizes]

    cls.__init__ = __init__
    return cls


@contextlib.contextmanager
def declared_attributes(op):
    """Guards rules that read `op`'s declared attributes directly (``ir.StringAttr(op.kind)``): IRDL checks
    them only after our verifier, so a missing one is reported by name here, and a read of the wrong kind
    (MLIR's casts raise) as such, instead of escaping as a Python exception."""
    declared = [f.name for f in getattr(type(op), "_fields", []) if isinstance(f, ext.AttributeDef)]
    missing = [n for n in declared if n not in op.operation.attributes]
    if missing:
        raise Invalid(f"is missing its attribute{'s' if len(missing) > 1 else ''} "
                      f"{', '.join(repr(n) for n in missing)}")
    try:
        yield
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise Invalid(f"has an attribute of the wrong kind ({e})") from None
