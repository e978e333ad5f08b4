"""``tessera-cpu-vector-math``: vector math (exp, erf, tanh, log, …) as calls to glibc's vector math library.

LLVM scalarizes ``llvm.exp.v32f32`` into 32 calls of ``expf``, which makes gelu, softmax and friends run at
scalar speed. glibc's libmvec has vector variants with the x86-64 / AArch64 vector-function ABI names
(``_ZGVdN8v_expf``: AVX2, 8 lanes, one vector argument; ``e``: AVX-512, 16 lanes; ``b``: SSE, 4; ``n``: NEON,
4), accurate to a few ulp. This pass splits each f32 math op on ``vector<W x f32>`` into chunks of the
library's width and calls the variant for the host's ISA; ops it cannot map are left for the scalar path.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

from ..mlir import arith, func, ir, vector

# math op -> libm base name
FUNCTIONS = {"math.exp": "expf", "math.log": "logf", "math.erf": "erff", "math.tanh": "tanhf",
             "math.sin": "sinf", "math.cos": "cosf", "math.log1p": "log1pf", "math.expm1": "expm1f",
             "math.exp2": "exp2f", "math.log2": "log2f"}

# (ISA letter, lanes) by preference for each host architecture
_VARIANTS = {"x86_64": [("avx512f", "e", 16), ("avx2", "d", 8), ("sse2", "b", 4)],
             "aarch64": [("neon", "n", 4)]}


@functools.cache
def _libmvec():
    name = ctypes.util.find_library("mvec")
    try:
        return ctypes.CDLL(name or "libmvec.so.1")
    except OSError:
        return None


def variant(arch: str, features: str) -> tuple[str, int] | None:
    """(ISA letter, lanes) of the libmvec variants this host can call, or None."""
    if _libmvec() is None:
        return None
    feats = {f[1:] for f in features.split(",") if f.startswith("+")}
    for feat, letter, lanes in _VARIANTS.get(arch, []):
        if feat in feats or (arch == "aarch64" and feat == "neon"):
            return letter, lanes
    return None


def symbol(letter: str, lanes: int, base: str) -> str | None:
    name = f"_ZGV{letter}N{lanes}v_{base}"
    lib = _libmvec()
    return name if lib is not None and hasattr(lib, name) else None


def run(module, arch: str, features: str) -> int:
    """Rewrites the module's eligible math ops in place; returns how many it rewrote."""
    v = variant(arch, features)
    if v is None:
        return 0
    letter, lanes = v
    body = module.body if isinstance(module, ir.Module) else module.regions[0].blocks[0]
    declared: dict[str, ir.Type] = {}
    targets = []

    def visit(op):
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    name = inner.operation.name
                    if name in FUNCTIONS and len(inner.results) == 1:
                        t = inner.results[0].type
                        if (isinstance(t, ir.VectorType) and t.rank == 1 and t.shape[0] % lanes == 0
                                and t.element_type == ir.F32Type.get()
                                and symbol(letter, lanes, FUNCTIONS[name]) is not None):
                            targets.append(inner)
                    visit(inner)

    visit(module.operation if isinstance(module, ir.Module) else module)
    if not targets:
        return 0
    with targets[0].location:  # type construction wants a location for its diagnostics
        chunk_t = ir.VectorType.get([lanes], ir.F32Type.get())
    for op in targets:
        sym = symbol(letter, lanes, FUNCTIONS[op.operation.name])
        if sym not in declared:
            with ir.InsertionPoint.at_block_begin(body), op.location:
                decl = func.FuncOp(sym, ir.FunctionType.get([chunk_t], [chunk_t]), visibility="private")
            declared[sym] = decl
        with ir.InsertionPoint(op), op.location:
            x = op.operands[0]
            width = x.type.shape[0]
            out = None
            for k in range(0, width, lanes):
                part = vector.ExtractStridedSliceOp(chunk_t, x, [k], [lanes], [1]).result
                y = func.CallOp([chunk_t], ir.FlatSymbolRefAttr.get(sym), [part]).result
                out = y if width == lanes else vector.InsertStridedSliceOp(
                    y, out if out is not None else _zeros(x.type), [k], [1]).result
            op.results[0].replace_all_uses_with(out)
        op.operation.erase()
    return len(targets)


def _zeros(t: ir.VectorType) -> ir.Value:
    return arith.ConstantOp(t, ir.DenseElementsAttr.get_splat(t, ir.FloatAttr.get(t.element_type, 0.0))).result
