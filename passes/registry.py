"""Tessera's own passes by name, so tools and textual pipelines can mix them with upstream MLIR passes.

``tessera-opt --pass-pipeline='builtin.module(canonicalize,tessera-simt-to-warps{warp-size=32},cse)'``
runs upstream elements through MLIR's parser and ours as Python passes in the same PassManager.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from ..diagnostics import LoweringError
from ..mlir import passmanager
from ..options import parse_chunks
from . import autodiff, bucketize, fold_transposes, fp8_convert, gpu_math, inline_functions, pipeline_collectives, simt_coarsen, simt_to_gpu, simt_to_warps, simt_vector_access, strict_math, tod_lower, tod_rewrites
from .to_llvm import CPU_TO_LLVM


@dataclass(frozen=True)
class PassInfo:
    name: str
    summary: str
    run: Callable[..., None] | None   # run(op: ir.Operation, **options), or None for a pipeline alias
    options: dict[str, type]
    pipeline: str = ""                # an upstream textual pipeline this name stands for


def _flag(value: str) -> bool:
    if value not in ("true", "false", "1", "0"):
        raise ValueError(f"expected true or false, not '{value}'")
    return value in ("true", "1")


def _simt_to_warps(op, warp_size: int = 32, bounds_checks: bool = False) -> None:
    simt_to_warps.run(op, warp_size, bounds_checks)


def _cpu_vector_math(op, arch: str = "x86_64", features: str = "+avx2") -> None:
    from . import cpu_vector_math  # lazy: a CPU pass (ctypes, libmvec), which a GPU compile never runs
    cpu_vector_math.run(op, arch, features)


def _simt_coarsen(op) -> None:
    simt_coarsen.run(op)


def _simt_to_gpu(op, warp_size: int = 32) -> None:
    simt_to_gpu.run(op, warp_size)


def _fold_transposes(op, dtypes: str = "", fused_attention: bool = False, attention: str = "") -> None:
    for fn in op.regions[0].blocks[0].operations:
        if fn.operation.name == "func.func" and len(fn.regions[0].blocks):
            fold_transposes.run(fn, frozenset(dtypes.split(",")) if dtypes else None, fused_attention)
            if attention:
                fold_transposes.attention(fn, frozenset(attention.split(",")))


def _tod_lower(op, target: str = "cpu") -> None:
    for fn in op.regions[0].blocks[0].operations:
        if fn.operation.name == "func.func" and len(fn.regions[0].blocks):
            tod_lower.run(fn, target)


def _tile_mma(op, wave: int = 64, matrix: str = "") -> None:
    if matrix not in ("", "mfma", "wmma", "coopmat"):
        raise ValueError(f"tessera-tile-mma: unknown matrix unit '{matrix}' (mfma, wmma, coopmat, or none: FMAs)")
    from . import tile_mma  # lazy: the AMD/SPIR-V warp-fragment lowering, which most compiles never run
    tile_mma.run(op, tile_mma.Target(wave, matrix))


PASSES: dict[str, PassInfo] = {
    "tessera-simt-to-warps": PassInfo(
        "tessera-simt-to-warps", "SIMT kernels to per-block functions running each warp as one vector (CPU)",
        _simt_to_warps, {"warp-size": int, "bounds-checks": _flag}),
    "tessera-cpu-vector-math": PassInfo(
        "tessera-cpu-vector-math", "f32 math on vectors as calls to glibc's libmvec variants (CPU)",
        _cpu_vector_math, {"arch": str, "features": str}),
    "tessera-simt-coarsen": PassInfo(
        "tessera-simt-coarsen", "elementwise SIMT kernels do 128 bits of consecutive elements per thread (NVIDIA, "
        "AMD; before tessera-simt-to-gpu)", _simt_coarsen, {}),
    "tessera-simt-vector-access": PassInfo(
        "tessera-simt-vector-access", "a thread's 16 bytes of consecutive loads or stores as one 16-byte access "
        "where aligned at run time (NVIDIA; before tessera-simt-to-gpu)", lambda op: simt_vector_access.run(op), {}),
    "tessera-simt-to-gpu": PassInfo(
        "tessera-simt-to-gpu", "SIMT kernels to gpu.func kernels taking their launch signature (NVIDIA, AMD)",
        _simt_to_gpu, {"warp-size": int}),
    "tessera-tile-mma": PassInfo(
        "tessera-tile-mma", "warp fragments (fill, ldmatrix, mma, store_fragment) as MFMA/WMMA (matrix=mfma, "
        "wmma), cooperative matrices (matrix=coopmat) or vector FMAs on waves of `wave` lanes (AMD, SPIR-V)",
        _tile_mma, {"wave": int, "matrix": str}),
    "tessera-gpu-math": PassInfo(
        "tessera-gpu-math", "math ops as arithmetic and PTX-native intrinsics, without libdevice (NVIDIA)",
        gpu_math.run, {}),
    "tessera-fp8-convert": PassInfo(
        "tessera-fp8-convert", "a kernel's one-byte fp8 loads and stores (extf from, truncf to f8E4M3FN/f8E5M2) as "
        "integer arithmetic on the f32's bits (every target), or native=true as ptx's cvt (sm_90+)",
        lambda op, native=False: fp8_convert.run(op, native=native), {"native": _flag}),
    "tessera-tod-canonicalize": PassInfo(
        "tessera-tod-canonicalize", "the operator algebra's rewrite laws (adjoint, compose, fft, projector …)",
        tod_rewrites.run, {}),
    "tessera-tod-lower": PassInfo(
        "tessera-tod-lower", "each tod.apply as its operator's action in ttensor ops (dense: GEMM, diag and scale: "
        "elementwise, compose: a GEMM chain, kronecker: reshapes and batched GEMMs); the first step of the schedule "
        "stage. A tod op left is refused, naming it and `target`", _tod_lower, {"target": str}),
    "tessera-autodiff": PassInfo(
        "tessera-autodiff", "the bodies of declared derivatives (`g = grad(f)`, vjp, jvp) from their primal's ops "
        "and each op's differentiation rule (before tessera-inline-functions)", autodiff.run, {}),
    "tessera-inline-functions": PassInfo(
        "tessera-inline-functions", "calls of one @function by another replaced by the callee's body, callees "
        "first (the first pass of the canonical stage)", inline_functions.run, {}),
    "tessera-bucketize": PassInfo(
        "tessera-bucketize", "a function's all_reduces grouped into buckets of bucket-bytes (default 25 MiB) in "
        "the order their tensors are produced, each bucket moved to right after its last tensor's producer "
        "(tessera.bucket), so that gradient all_reduces overlap the rest of the backward",
        bucketize.run, {"bucket-bytes": int}),
    "tessera-pipeline-collectives": PassInfo(
        "tessera-pipeline-collectives", "an all_reduce of a matmul's result that nothing else reads marked to run "
        "in `chunks` row chunks (tessera.chunks; default 1: none marked), each chunk's all_reduce overlapping the "
        "next chunk's GEMM; chunks=6:6:3:1: uneven chunks of those weights (tessera.chunk_weights)",
        pipeline_collectives.run, {"chunks": parse_chunks}),
    "tessera-fold-transposes": PassInfo(
        "tessera-fold-transposes", "a transpose of a matmul operand's last two axes folded into the matmul "
        "(tessera.transpose_a/_b: the GEMM reads it in place; the schedule stage, on targets whose GEMMs can); "
        "dtypes=f32,bf16 limits it to those operand types; attention=bf16,f16 also folds head split and merge "
        "transposes into flash_attentions of those types (tessera.seq_heads: Q, K, V, O as [..., S, H, D])",
        _fold_transposes, {"dtypes": str, "fused-attention": _flag, "attention": str}),
    "tessera-strict-math": PassInfo(
        "tessera-strict-math", "the strict numerics profile's math: f32 exp, exp2, log, log2, erf, tanh, sqrt, "
        "rsqrt, powf and division computed in f64 and rounded once to f32; fast-math flags dropped (CPU, SPIR-V); "
        "gpu=true: the ptx and amdgpu form (sqrt and division stay f32, f16 and bf16 widened too)",
        lambda op, gpu=False: strict_math.run(op, gpu=gpu), {"gpu": _flag}),
    "tessera-cpu-to-llvm": PassInfo(
        "tessera-cpu-to-llvm", "warp-vectorized kernels to the LLVM dialect (upstream conversions, in order)",
        None, {}, CPU_TO_LLVM),
}


def _parse_options(info: PassInfo, text: str) -> dict:
    opts = {}
    for item in filter(None, (t.strip() for t in text.split(" "))):
        key, _, value = item.partition("=")
        if key not in info.options:
            raise ValueError(f"pass '{info.name}' has no option '{key}' (options: {', '.join(info.options)})")
        opts[key.replace("-", "_")] = info.options[key](value)
    return opts


def _split_top_level(s: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch in "({":
            depth += 1
        elif ch in ")}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def build_pass_manager(pipeline: str) -> passmanager.PassManager:
    """A PassManager for ``builtin.module(...)`` (or a bare comma list) mixing upstream and Tessera passes."""
    m = re.fullmatch(r"\s*builtin\.module\((.*)\)\s*", pipeline, re.S)
    elements = _split_top_level(m.group(1) if m else pipeline)
    pm = passmanager.PassManager("builtin.module")
    for el in elements:
        name, _, rest = el.partition("{")
        info = PASSES.get(name.strip())
        if info is None:
            pm.add(el)
            continue
        opts = _parse_options(info, rest.rstrip("}"))
        if info.pipeline:
            pm.add(info.pipeline)
            continue

        def run(op, pass_, info=info, opts=opts):
            try:
                info.run(op, **opts)
            except LoweringError as e:  # a located lowering failure becomes an MLIR diagnostic at its op
                e.location.emit_error(e.message)
                pass_.signal_pass_failure()
            except Exception as e:  # any other failure of the pass, at the op it ran on
                op.location.emit_error(str(e))
                pass_.signal_pass_failure()

        pm.add(run, name=info.name, argument=info.name, description=info.summary)
    return pm
