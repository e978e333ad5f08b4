"""``tessera-strict-math``: the `strict` numerics profile's math (tessera/numerics/profiles.py) in the kernels
the CPU and SPIR-V backends generate, and its refusal on the GPU targets whose math is approximate.

`run` (CPU, SPIR-V: before their math lowering) computes each f32 exp, exp2, log, log2, erf, tanh, sqrt,
rsqrt, powf and division (scalar or vector) in f64 and rounds the result once to f32, and drops every fast-math
flag (`contract` and the rest), so no multiply and add are fused either:

- a quotient or square root of f32 values computed in f64 (correctly rounded there) and rounded to f32 is the
  correctly rounded f32 result (53 ≥ 2·24 + 2 bits: the double rounding is innocuous). OpenCL's f32 division
  and sqrt may be 2.5 and 3 ulp off, and libmvec's vector functions a few ulp: neither is used for f32 here;
- a transcendental computed by libm (CPU) or OpenCL's f64 builtins (SPIR-V) is within a few f64 ulp of the
  exact value, 2^-29 of an f32 ulp, so rounding it to f32 gives the correctly rounded f32 result except where
  the exact value lies that close to the midpoint of two f32 values (about one argument in 10^8): the CPU and
  SPIR-V agree bit for bit on everything else.

`refuse` (ptx, amdgpu: before passes/gpu_math.py) reports the first f32 or f64 exp, exp2, log, log2, erf, tanh
or powf of a kernel: those targets compute them by approximation (gpu_math.py; f64 ones not at all). The
compiler asks `graph_refusal` first, which finds the Graph IR op that needs one, to report it at the user's
line; `refuse` names the generated kernel's source line for anything else (and a @kernel's own math).
Their sqrt and division are already correctly rounded (NVPTX's sqrt.rn/div.rn; AMDGPU's correctly rounded
expansions), and neither LLVM backend contracts without fast-math flags, which the kernels do not carry (the
strict profile keeps the GEMM epilogues' inline approximations out of them: passes/fusion.py).
"""

from __future__ import annotations

from ..diagnostics import LoweringError
from ..mlir import arith, ir

APPROXIMATE_TARGETS = ("ptx", "amdgpu")
TRANSCENDENTAL = ("math.exp", "math.exp2", "math.log", "math.log2", "math.erf", "math.tanh", "math.powf")
WIDENED = (*TRANSCENDENTAL, "math.sqrt", "math.rsqrt", "arith.divf")


def _ops(root: ir.Operation) -> list:
    """The ops nested in `root`, in order (collected before any is rewritten)."""
    out = []
    for region in root.regions:
        for block in region.blocks:
            for op in block.operations:
                out.append(op.operation)
                out.extend(_ops(op.operation))
    return out


def _is_f32(t: ir.Type) -> bool:
    return t == ir.F32Type.get() or isinstance(t, ir.VectorType) and ir.VectorType(t).element_type == ir.F32Type.get()


def _f64_like(t: ir.Type) -> ir.Type:
    f64 = ir.F64Type.get()
    return ir.VectorType.get(ir.VectorType(t).shape, f64) if isinstance(t, ir.VectorType) else f64


def run(root) -> int:
    """Widens the f32 ops of `root` (a module or operation) as the module docstring says; returns how many."""
    root = root.operation
    widened = 0
    for op in _ops(root):
        if "fastmath" in op.attributes:   # arith's and math's flags, one attribute
            op.attributes["fastmath"] = ir.Attribute.parse("#arith.fastmath<none>")
        if op.name not in WIDENED or len(op.results) != 1 or not _is_f32(op.results[0].type):
            continue
        t = op.results[0].type
        with ir.InsertionPoint(op), op.location:
            wide = [arith.ExtFOp(_f64_like(t), x).result for x in op.operands]
            exact = ir.Operation.create(op.name, results=[_f64_like(t)], operands=wide)
            op.results[0].replace_all_uses_with(arith.TruncFOp(t, exact.results[0]).result)
        op.erase()
        widened += 1
    return widened


# Graph IR ops whose kernels compute an exp, log, erf or tanh (layernorm's rsqrt is exact everywhere)
_GRAPH_UNARY = {"gelu", "gelu_tanh", "silu", "sigmoid", "tanh", "exp", "log", "erf"}
_GRAPH_OPS = {"ttensor.softmax", "ttensor.log_softmax", "ttensor.flash_attention", "ttensor.attention_lse",
              "ttensor.attention_grad"}


def graph_refusal(root):
    """The first Graph IR op of `root` whose kernels compute a transcendental, or None."""
    for op in _ops(root.operation):
        if op.name in _GRAPH_OPS or op.name == "ttensor.unary" and \
                ir.StringAttr(op.attributes["fn"]).value in _GRAPH_UNARY or op.name == "ttensor.binary" and \
                ir.StringAttr(op.attributes["fn"]).value == "pow":
            return op
    return None


def message(fn: str, target: str) -> str:
    return (f"the 'strict' numerics profile asks for exact {fn}, and {target} computes it only by approximation "
            f"(passes/gpu_math.py): compile with the 'deterministic' profile, or for cpu or spirv")


def refuse(root, target: str) -> None:
    """LoweringError at the first transcendental of `root`: `target` computes it only by approximation."""
    for op in _ops(root.operation):
        if op.name in TRANSCENDENTAL:
            raise LoweringError(op, message(op.name.split(".")[1], target))
