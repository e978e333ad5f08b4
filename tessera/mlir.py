"""The one door to MLIR.

Tessera uses the upstream MLIR Python bindings as shipped in the ``torch-mlir`` wheel. Every other module
imports MLIR through here, so moving to another distribution of the same bindings is a one-file change.

The Python modules of the ``llvm`` and ``spirv`` dialects are the largest (their generated op classes take a
third of the import of MLIR: 20 and 45 ms of a 0.5 s compile), and most compilations build none of their ops
(a PTX GEMM none at all): they are imported at the first use of one of their names, `_Lazy`. The bindings
import a dialect's module themselves where they hand out one of its ops, so nothing else depends on when.
"""

import importlib
import types

from torch_mlir import ir, passmanager, rewrite  # noqa: F401
from torch_mlir.dialects import (  # noqa: F401
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
from torch_mlir._mlir_libs._mlirDialectsLLVM import translate_module_to_llvmir  # noqa: F401


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


llvm = _Lazy("tessera.mlir.llvm")
spirv = _Lazy("tessera.mlir.spirv")

__all__ = [
    "ir", "passmanager", "rewrite", "ext", "arith", "builtin", "func", "gpu", "llvm", "math", "memref", "scf",
    "spirv", "vector", "translate_module_to_llvmir",
]
