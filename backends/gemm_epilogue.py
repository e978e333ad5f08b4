"""A GEMM fusion group's epilogue as steps: what the CPU, SIMT, matrix-unit and PTX GEMM lowerings all read.

Here, not in backends/cpu/gemm_lowering.py, so that a GPU compile does not import the CPU GEMM's kernel
builders (backends/cpu/gemm*.py) to read it (tests/unit/test_compile_imports.py).
"""

from __future__ import annotations

from ..diagnostics import LoweringError
from ..mlir import ir
from ..passes import fusion


def epilogue(ops: list) -> tuple[list, list]:
    """(steps, extra operands in step order) of the ops after the matmul."""
    steps, extras = [], []
    acc = ops[0].results[0]
    for op in ops[1:]:
        name = op.operation.name
        if name == "ttensor.bias_add":
            steps.append(("bias",))
            extras.append(("bias", op.operands[1]))
        elif name == "ttensor.unary":
            steps.append((ir.StringAttr(op.attributes["fn"]).value,))
        elif name == "ttensor.binary":
            other = op.operands[1] if op.operands[0] == acc else op.operands[0]
            fn = ir.StringAttr(op.attributes["fn"]).value
            if fusion.is_scalar_constant(other):
                attr = other.owner.attributes["value"]
                steps.append(("scale",))
                extras.append(("alpha", ir.FloatAttr(attr).value))
            elif fn == "mul" and (found := fusion.gelu_derivative(other)):   # acc ∘ gelu'(Z)
                steps.append((found[0],))
                extras.append(("z", found[1]))
            elif fn == "mul":   # by a 0-d tensor (fusion's "scale_by")
                steps.append(("scale_by",))
                extras.append(("factor", other))
            elif fn == "sub":   # other − acc (fusion's "sub_from")
                steps.append(("sub_from",))
                extras.append(("minuend", other))
            else:
                steps.append(("add",))
                extras.append(("residual", other))
        elif name != "ttensor.cast":   # a cast is the store's conversion (a target's `cast` epilogue step)
            raise LoweringError(op, f"'{name}' cannot run in a CPU GEMM epilogue")
        acc = op.results[0]
    return steps, extras
