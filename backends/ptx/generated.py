"""Kernels generated whole as LLVM IR (gemm_sm90.py, attention_sm90.py) enter the module at the kernels stage
as bodiless ``func.func`` declarations: the launch signature (``tessera.kernel``, each parameter's
``tessera.name`` and ``tessera.dims``), the IR (``tessera.llvm_ir``), the arguments the kernel writes
(``tessera.writes``: there is no body to find stores in) and its metadata properties
(``tessera.kernel_props``). The PTX backend links the IR in at its ``llir`` stage (compiler.py)."""

from __future__ import annotations

from ... import dtypes
from ...mlir import func, ir


def declare(module: ir.Module, name: str, params: list, llvm_ir: str, writes: list[int], props: dict) -> None:
    """`params`: (name, dtype, shape) with shape None for a scalar, else a tuple of dimension symbols and
    static extents."""
    types, attrs = [], []
    for pname, dt, shape in params:
        elem = ir.Type.parse(dtypes.BY_NAME[dt].mlir)
        types.append(elem if shape is None else
                     ir.MemRefType.get([ir.ShapedType.get_dynamic_size()] * len(shape), elem))
        d = {"tessera.name": ir.StringAttr.get(pname)}
        if shape is not None:
            d["tessera.dims"] = ir.ArrayAttr.get([
                ir.StringAttr.get(x) if isinstance(x, str) else ir.IntegerAttr.get(ir.IntegerType.get_signless(64), x)
                for x in shape])
        attrs.append(ir.DictAttr.get(d))
    with ir.InsertionPoint(module.body):
        fn = func.FuncOp(name, ir.FunctionType.get(types, []), visibility="private")
    fn.arg_attrs = ir.ArrayAttr.get(attrs)
    fn.attributes["tessera.kernel"] = ir.UnitAttr.get()
    fn.attributes["tessera.writes"] = ir.DenseI64ArrayAttr.get(writes)
    fn.attributes["tessera.llvm_ir"] = ir.StringAttr.get(llvm_ir)
    fn.attributes["tessera.kernel_props"] = ir.DictAttr.get({k: ir.StringAttr.get(v) for k, v in props.items()})
