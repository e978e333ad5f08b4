"""The check every backend makes before translating to LLVM IR: the module is fully lowered.

Translating a module with ops outside the LLVM dialect (and its target's intrinsics dialect) reports an
error and then crashes the process; a GPU module declaring an external function (libdevice's __nv_expf,
ROCm's __ocml_*) would leave code no driver links. Both are compiler bugs, reported at the user's line.
"""

from __future__ import annotations

from ..diagnostics import LoweringError
from ..mlir import ir


def check_fully_lowered(mod: ir.Module, dialects: tuple[str, ...], target: str,
                        externals_from: str | None = None) -> None:
    """Every op is in one of `dialects` ("llvm." …), the IR `target` names ("LLVM", "NVVM"). With
    `externals_from` (the backend's name), function declarations are refused too."""
    if externals_from is not None:
        for op in mod.body.operations:
            if op.operation.name == "llvm.func" and not op.regions[0].blocks:
                name = ir.StringAttr(op.attributes["sym_name"]).value
                raise LoweringError(op, f"internal compiler error: the kernels call '{name}', which the "
                                        f"{externals_from} backend does not provide")

    def visit(op):
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    if not inner.operation.name.startswith(dialects):
                        raise LoweringError(inner, f"internal compiler error: '{inner.operation.name}' was not "
                                                   f"lowered to {target}")
                    visit(inner)

    visit(mod.operation)
