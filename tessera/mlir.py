"""The one door to MLIR.

Tessera uses the upstream MLIR Python bindings as shipped in the ``torch-mlir`` wheel. Every other module
imports MLIR through here, so moving to another distribution of the same bindings is a one-file change.
"""

from torch_mlir import ir, passmanager, rewrite  # noqa: F401
from torch_mlir.dialects import (  # noqa: F401
    arith,
    builtin,
    ext,
    func,
    gpu,
    llvm,
    math,
    memref,
    scf,
    spirv,
    vector,
)
from torch_mlir.dialects.llvm import translate_module_to_llvmir  # noqa: F401

__all__ = [
    "ir", "passmanager", "rewrite", "ext", "arith", "builtin", "func", "gpu", "llvm", "math", "memref", "scf",
    "spirv", "vector", "translate_module_to_llvmir",
]
