"""A kernel the CPU backend generates (backends/cpu/gemm.py, attention.py) compiled on its own into a `.tessera`
image, through the normal stages: for tessera-gemm, the generators' tests and the benchmarks.

The generators only build MLIR; compiling is the driver's (a backend never imports it).
"""

from __future__ import annotations

from typing import Callable

from ..backends.cpu import attention, attention_bwd, gemm
from ..compiler import CompileOptions, CompileResult, compile_module
from ..dialects import make_context
from ..mlir import ir


def compile_built(build: Callable[[ir.Module], object], options: CompileOptions | None = None,
                  metadata: dict | None = None, **kwargs) -> CompileResult:
    """Compiles the module `build(module)` fills (`kwargs`: compile_module's `stop_after`, `on_stage`)."""
    with make_context(), ir.Location.unknown():
        module = ir.Module.create()
        build(module)
        return compile_module(module, options or CompileOptions(), metadata=metadata, **kwargs)


def compile_gemm(spec: gemm.GemmSpec, options: CompileOptions | None = None) -> bytes:
    """An image holding the GEMM kernel `spec` (`options`: default for this host)."""
    return compile_built(lambda m: gemm.build_gemm(m, spec), options, gemm.image_metadata(spec)).image


def compile_attention(spec: attention.AttentionSpec, options: CompileOptions | None = None) -> bytes:
    """An image holding the fused attention kernel `spec`."""
    return compile_built(lambda m: attention.build_attention(m, spec), options).image


def compile_attention_bwd(spec: attention_bwd.AttentionBwdSpec, options: CompileOptions | None = None) -> bytes:
    """An image holding the fused attention backward kernel `spec`."""
    return compile_built(lambda m: attention_bwd.build_attention_bwd(m, spec), options).image
