"""``tessera-strict-math``: the `strict` numerics profile's math (tessera/numerics/profiles.py) in the kernels
every backend generates: each f32 exp, exp2, log, log2, erf, tanh, rsqrt and powf (scalar or vector), and on
the CPU and SPIR-V also each sqrt and division, is computed in f64 and rounded once to f32, and every fast-math
flag (`contract` and the rest) is dropped, so no multiply and add are fused either:

- a quotient or square root of f32 values computed in f64 (correctly rounded there) and rounded to f32 is the
  correctly rounded f32 result (53 ≥ 2·24 + 2 bits: the double rounding is innocuous). OpenCL's f32 division
  and sqrt may be 2.5 and 3 ulp off, and libmvec's vector functions a few ulp: neither is used for f32 here.
  PTX's div.rn.f32 and sqrt.rn.f32 and AMDGPU's expansions of f32 division and sqrt are correctly rounded
  already, the same bits: `run(gpu=True)` leaves them in f32. rsqrt is widened everywhere (the GPUs' f32
  1/sqrt(x) rounds twice);
- a transcendental computed by libm (CPU), OpenCL's f64 builtins (SPIR-V) or passes/f64_math.py (ptx, amdgpu,
  through passes/gpu_math.py) is within a few f64 ulp of the exact value, 2^-29 of an f32 ulp, so rounding it
  to f32 gives the correctly rounded f32 result except where the exact value lies that close to the midpoint
  of two f32 values (about one argument in 10^8; for f64_math's erf about one in 10^7, its pow weaker near
  f32's range ends): the backends agree bit for bit on everything else.

On the GPUs f16 and bf16 operands of those functions are widened too and the result rounded to f32 and then to
their type (both roundings innocuous: 24 ≥ 2·11 + 2), instead of gpu_math's f32 approximations. Neither LLVM
backend contracts without fast-math flags (NVPTX writes mul.rn and add.rn, which ptxas does not fuse either),
and the strict profile keeps the GEMM epilogues' inline approximations out of the kernels (passes/fusion.py).
"""

from __future__ import annotations

from ..mlir import arith, ir

TRANSCENDENTAL = ("math.exp", "math.exp2", "math.log", "math.log2", "math.erf", "math.tanh", "math.powf")
WIDENED = (*TRANSCENDENTAL, "math.sqrt", "math.rsqrt", "arith.divf")
GPU_WIDENED = (*TRANSCENDENTAL, "math.rsqrt")


def _ops(root: ir.Operation) -> list:
    """The ops nested in `root`, in order (collected before any is rewritten)."""
    out = []
    for region in root.regions:
        for block in region.blocks:
            for op in block.operations:
                out.append(op.operation)
                out.extend(_ops(op.operation))
    return out


def _element(t: ir.Type) -> ir.Type:
    return ir.VectorType(t).element_type if isinstance(t, ir.VectorType) else t


def _like(t: ir.Type, element: ir.Type) -> ir.Type:
    return ir.VectorType.get(ir.VectorType(t).shape, element) if isinstance(t, ir.VectorType) else element


def run(root, gpu: bool = False) -> int:
    """Widens the ops of `root` (a module or operation) as the module docstring says (`gpu`: for ptx and
    amdgpu); returns how many."""
    root = root.operation
    f32, f64 = ir.F32Type.get(), ir.F64Type.get()
    narrow = (f32, ir.F16Type.get(), ir.BF16Type.get()) if gpu else (f32,)
    widened = 0
    for op in _ops(root):
        if "fastmath" in op.attributes:   # arith's and math's flags, one attribute
            op.attributes["fastmath"] = ir.Attribute.parse("#arith.fastmath<none>")
        if op.name not in (GPU_WIDENED if gpu else WIDENED) or len(op.results) != 1 or \
                _element(op.results[0].type) not in narrow:
            continue
        t = op.results[0].type
        with ir.InsertionPoint(op), op.location:
            wide = [arith.ExtFOp(_like(t, f64), x).result for x in op.operands]
            exact = ir.Operation.create(op.name, results=[_like(t, f64)], operands=wide).results[0]
            result = arith.TruncFOp(_like(t, f32), exact).result
            if _element(t) != f32:
                result = arith.TruncFOp(t, result).result
            op.results[0].replace_all_uses_with(result)
        op.erase()
        widened += 1
    return widened
