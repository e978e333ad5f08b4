"""The launch signature of a kernel: which argument slots `tsrLaunch` takes, in which order.

Parameters come first in source order; then one dimension argument per distinct symbolic extent, in order of
first appearance (docs/image-format.md, "Launch arguments"). The frontend records each tensor's extents in
the ``tessera.dims`` argument attribute; this module turns that into the table every consumer shares: the
image metadata, the CPU entry wrapper, the generated C header and the Python launcher.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import dtypes

SCALAR, TENSOR, DIM = 0, 1, 2
KIND_NAMES = {SCALAR: "scalar", TENSOR: "tensor", DIM: "dim"}


@dataclass(frozen=True)
class Arg:
    name: str
    kind: int
    dtype: dtypes.DType
    dims: tuple = ()          # tensor: per axis, a static int or the index of a DIM argument (as ("arg", i))
    readonly: bool = False

    @property
    def rank(self) -> int:
        return len(self.dims)


@dataclass(frozen=True)
class Signature:
    name: str
    args: tuple[Arg, ...]

    @property
    def params(self) -> tuple[Arg, ...]:
        return tuple(a for a in self.args if a.kind != DIM)


def _written_args(fn) -> set[int]:
    """Indices of memref parameters some store writes to: the others are read-only. A kernel generated whole
    as LLVM IR has no body to look into and lists them (``tessera.writes``)."""
    # lazy: the runtime and tessera-objdump read records without MLIR
    from .mlir import ir
    if "tessera.writes" in fn.attributes:
        return set(ir.DenseI64ArrayAttr(fn.attributes["tessera.writes"]))
    written: set[int] = set()
    block_args = list(fn.entry_block.arguments) if fn.regions[0].blocks else []

    def visit(op):
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    if inner.operation.name in ("memref.store", "vector.maskedstore", "vector.scatter",
                                                "vector.store"):
                        target = inner.operands[1] if inner.operation.name == "memref.store" else inner.operands[0]
                        for i, a in enumerate(block_args):
                            if a == target:
                                written.add(i)
                    visit(inner)

    visit(fn.operation)
    return written


def signature_of(fn) -> Signature:
    """The launch signature of a ``func.func`` marked ``tessera.kernel`` (before or after lowering)."""
    # lazy: the runtime and tessera-objdump read records without MLIR
    from .mlir import ir
    name = ir.StringAttr(fn.attributes["sym_name"]).value
    arg_attrs = list(ir.ArrayAttr(fn.attributes["arg_attrs"])) if "arg_attrs" in fn.attributes else []
    inputs = list(ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value).inputs)
    written = _written_args(fn)
    params: list[Arg] = []
    dim_names: list[str] = []
    pending: list[tuple[int, list]] = []
    for i, attrs in enumerate(arg_attrs):
        attrs = ir.DictAttr(attrs)
        if "tessera.name" not in attrs:
            continue  # launch-geometry arguments a lowering appended
        pname = ir.StringAttr(attrs["tessera.name"]).value
        t = inputs[i]
        if isinstance(t, ir.MemRefType):
            dims = []
            for d in ir.ArrayAttr(attrs["tessera.dims"]):
                if isinstance(d, ir.StringAttr):
                    if d.value not in dim_names:
                        dim_names.append(d.value)
                    dims.append(("dim", d.value))
                else:
                    dims.append(ir.IntegerAttr(d).value)
            pending.append((len(params), dims))
            # a u8 tensor's memref holds i8 (frontend/kernel.py storage_type); its attribute names the dtype
            dt = dtypes.BY_NAME[ir.StringAttr(attrs["tessera.dtype"]).value] if "tessera.dtype" in attrs else \
                dtypes.of_ir_type(t.element_type)
            params.append(Arg(pname, TENSOR, dt, (), readonly=i not in written))
        else:
            params.append(Arg(pname, SCALAR, dtypes.of_ir_type(t)))
    n = len(params)
    for pos, dims in pending:
        resolved = tuple(("arg", n + dim_names.index(d[1])) if isinstance(d, tuple) else d for d in dims)
        p = params[pos]
        params[pos] = Arg(p.name, p.kind, p.dtype, resolved, p.readonly)
    index = dtypes.BY_NAME["index"]
    return Signature(name, tuple(params) + tuple(Arg(d, DIM, index) for d in dim_names))


def signature_of_record(record) -> Signature:
    """The signature a kernel record of an image describes (docs/image-format.md)."""
    args = []
    for a in record.args:
        dims = tuple(d if d >= 0 else ("arg", -d - 1) for d in a.dims)
        args.append(Arg(a.name, a.kind, dtypes.BY_CODE[a.dtype], dims, readonly=bool(a.flags & 1)))
    return Signature(record.name, tuple(args))


def to_json(sig: Signature) -> dict:
    return {"name": sig.name, "args": [{"name": a.name, "kind": a.kind, "dtype": a.dtype.name,
                                        "dims": [d if isinstance(d, int) else d[1] for d in a.dims],
                                        "dim_args": [isinstance(d, tuple) for d in a.dims],
                                        "readonly": a.readonly} for a in sig.args]}


def from_json(doc: dict) -> Signature:
    args = []
    for a in doc["args"]:
        dims = tuple(("arg", d) if is_arg else d for d, is_arg in zip(a["dims"], a["dim_args"]))
        args.append(Arg(a["name"], a["kind"], dtypes.BY_NAME[a["dtype"]], dims, a["readonly"]))
    return Signature(doc["name"], tuple(args))
