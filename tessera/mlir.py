"""The one door to MLIR.

Tessera uses the upstream MLIR Python bindings as shipped in the ``torch-mlir`` wheel. Every other module
imports MLIR through here, so moving to another distribution of the same bindings is a one-file change.

The Python modules of the ``llvm`` and ``spirv`` dialects are the largest (their generated op classes take a
third of the import of MLIR: 20 and 45 ms of a 0.5 s compile), and most compilations build none of their ops
(a PTX GEMM none at all): they are imported at the first use of one of their names, `_Lazy`. The bindings
import a dialect's module themselves where they hand out one of its ops, so nothing else depends on when.

The bindings' ``ir`` module imports numpy, where it is installed, for four attribute builders (dense
elements of f64, i32, i64 and index from a list): 60-70 ms of a 0.6 s PTX compile that never builds one.
`_import_ir` imports it with numpy hidden and registers the same four builders, which import numpy when
one is called.
"""

import importlib
import sys
import types


def _import_ir():
    """torch_mlir.ir without importing numpy (its F64/I32/I64/IndexElementsAttr builders registered here, the
    same as its own but importing numpy when called); as it is where numpy is already imported."""
    if "numpy" in sys.modules or "torch_mlir.ir" in sys.modules:
        import torch_mlir.ir  # noqa: F401
        return
    sys.modules["numpy"] = None   # `import numpy` raises ImportError: torch_mlir.ir skips those builders
    try:
        import torch_mlir.ir as mlir_ir
    finally:
        if "numpy" in sys.modules and sys.modules["numpy"] is None:
            del sys.modules["numpy"]

    def elements(kind: str, dtype: str, element_type):
        @mlir_ir.register_attribute_builder(kind, allow_existing=True)
        def build(x, context):
            import numpy as np
            return mlir_ir.DenseElementsAttr.get(np.array(x, dtype=getattr(np, dtype)),
                                                 type=element_type(context), context=context)
    elements("F64ElementsAttr", "float64", lambda c: mlir_ir.F64Type.get(context=c))
    elements("I32ElementsAttr", "int32", lambda c: mlir_ir.IntegerType.get_signless(32, context=c))
    elements("I64ElementsAttr", "int64", lambda c: mlir_ir.IntegerType.get_signless(64, context=c))
    elements("IndexElementsAttr", "int64", lambda c: mlir_ir.IndexType.get(context=c))


_import_ir()
from torch_mlir import ir, passmanager, rewrite  # noqa: E402,F401
from torch_mlir.dialects import (  # noqa: E402,F401
    arith,
    builtin,
    ext,
    func,
    gpu,
    math,
    memref,
    scf,
    vector,
)
from torch_mlir._mlir_libs._mlirDialectsLLVM import translate_module_to_llvmir  # noqa: E402,F401


class _Lazy(types.ModuleType):
    """Stands for ``torch_mlir.dialects.<name>``: the first attribute read imports it and copies its names in
    (later reads find them without this hook)."""

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        module = importlib.import_module(f"torch_mlir.dialects.{self.__name__.rpartition('.')[2]}")
        self.__dict__.update({k: v for k, v in vars(module).items() if not k.startswith("__")})
        try:
            return self.__dict__[attr]
        except KeyError:
            raise AttributeError(f"module {module.__name__!r} has no attribute {attr!r}") from None


def claim_dialect_namespaces(names) -> None:
    """Answers the bindings' lookup of a Python module for each of these (Python-defined) dialects.

    For every op they hand out (a block's operations, an op's owner) the bindings look for
    ``torch_mlir.dialects.<namespace>`` and do not remember a miss: each Tessera op read from IR cost a failed
    import, 2.6 million of them (three quarters of the time) compiling examples/graph/spectral.py. An empty
    module answers once, and the bindings keep it; the ops' classes are found as before."""
    for name in names:
        sys.modules.setdefault(f"torch_mlir.dialects.{name}", types.ModuleType(f"torch_mlir.dialects.{name}"))


def _answer_lookups_unimported(names) -> None:
    """Answers the bindings' lookup of ``torch_mlir.dialects.<name>`` for these upstream dialects with an empty
    module, without importing theirs (until something uses it, as `_Lazy` does).

    The bindings import a dialect's Python module the first time they hand out one of its ops or types: a
    PTX compile hands out `!llvm.ptr<1>` (simt_to_gpu's kernel parameters) and, checking the lowered kernels
    (backends/lowered.py), llvm and nvvm ops, which imported the llvm and nvvm modules (22 and 15 ms of a
    0.55 s compile); a GEMM's compile builds none of their ops through their classes (simt_to_gpu's memref
    descriptors are built by name). The bindings remember a namespace once a module answers, so the empty one is
    asked through a search prefix of its own that is removed again (other namespaces are looked up as
    before). Nothing is lost: the op classes register themselves in the bindings when their module is
    imported (`tessera.mlir.llvm`'s first use), and are found from then on; ops handed out before that are
    generic OpViews (names, attributes, regions); the types' casters come from the C extension
    (`_mlirDialectsLLVM`, imported above), not from the Python module."""
    names = [n for n in names if f"torch_mlir.dialects.{n}" not in sys.modules]
    if not names:
        return
    stub = types.ModuleType("tessera.mlir._answered")
    stub.__path__ = []
    sys.modules[stub.__name__] = stub
    for name in names:
        sys.modules[f"{stub.__name__}.{name}"] = types.ModuleType(f"{stub.__name__}.{name}")
    g = ir._globals
    search = list(g.dialect_search_modules)
    g.dialect_search_modules = [stub.__name__, *search]
    try:
        for name in names:
            g._check_dialect_module_loaded(name)
    finally:
        g.dialect_search_modules = search
        for name in names:
            del sys.modules[f"{stub.__name__}.{name}"]
        del sys.modules[stub.__name__]


_answer_lookups_unimported(("llvm", "nvvm"))
llvm = _Lazy("tessera.mlir.llvm")
spirv = _Lazy("tessera.mlir.spirv")

__all__ = [
    "ir", "passmanager", "rewrite", "ext", "arith", "builtin", "func", "gpu", "llvm", "math", "memref", "scf",
    "spirv", "vector", "translate_module_to_llvmir", "claim_dialect_namespaces",
]
