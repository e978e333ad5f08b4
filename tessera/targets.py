"""What the compiler knows of a target: the facts a backend states and the Graph IR phases plan with.

A leaf: it imports nothing of Tessera's, so the passes (which plan with the facts) and the backends (which
state them) both depend on it and on nothing of each other's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class TargetFacts:
    """A target as the pipeline sees it. Every field that changes generated code is part of the backend's
    hash (and so of the compile cache's key), because the backend derives the facts from its options."""

    name: str                 # the backend's registered name: "cpu", "ptx", …
    vector_bits: int          # widest vector registers: 128 for SSE/NEON, 256 for AVX2, 512 for AVX-512
    warp_size: int            # lanes of a warp (wave, subgroup) in generated SIMT kernels
    native_dtypes: frozenset  # element types the target computes in directly
    cores: int                # parallel units a grid spreads over: CPU worker threads, GPU multiprocessors
    matrix_units: frozenset = frozenset()   # element types a matrix unit multiplies (tensor cores, MFMA, AMX)
    shared_memory: int = 0    # bytes of block-shared memory (0: none, as on the CPU)
    cache_sizes: tuple[tuple[int, int], ...] = ()   # (level, bytes) of the data caches a schedule fits, CPU only
    # The target's GEMM cost model: (M, N, K) with None for symbolic extents -> schedule attributes
    matmul_schedule: Callable[[int | None, int | None, int | None], dict] | None = field(default=None,
                                                                                        compare=False)
    decompose_attention: bool = False   # run flash_attention as GEMMs and a softmax (passes/decompose.py)
    # A matmul schedule's tile-local staging buffers: name -> (shape, copies) (the memory phase records them)
    staging_buffers: Callable[[dict], dict] | None = field(default=None, compare=False)
    fused_attention: bool = False       # a kernel for attention groups (passes/fusion.py)
    # Element types of Q for which the target has fused kernels for attention's backward: attention_lse
    # written by the forward's kernel (its "attention" group) and attention_grad's "attention_bwd" groups.
    # Others take the fallback (passes/decompose.py: GEMMs, the S×S probabilities materialised).
    fused_attention_backward: frozenset = frozenset()
    # Element types of Q whose "attention_bwd" groups compute delta = rowsum(dO∘O) themselves (one
    # preprocessing kernel reading dO and O once): the fusion phase joins the vjp's casts, product and row
    # sum (passes/autodiff_attention.py) to the group instead of giving them kernels of their own.
    attention_delta: frozenset = frozenset()
    # Element types of the operands whose GEMMs read an operand stored transposed in place (passes/
    # fold_transposes.py folds the transposes of their matmul operands into the matmul:
    # `tessera.transpose_a` / `tessera.transpose_b`).
    gemm_transposes: frozenset = frozenset()
    # GEMM epilogue steps the target's GEMM kernels take beyond bias, the activations, a constant scale and a
    # residual add (passes/fusion.py joins those ops to a GEMM only where listed): "scale_by" (times a 0-d
    # tensor read at run time) and "sub_from" (a tensor minus the product): an SGD update W − lr·g in the GEMM
    # that computes g; "gelu_grad" and "gelu_tanh_grad" (the product times the GELU's derivative at a tensor
    # Z): a backward's dZ = dH ∘ gelu'(Z) in the GEMM that computes dH.
    gemm_epilogue: frozenset = frozenset()
    # Integer element types of matmul operands the target has a kernel for (i8 x i8 accumulating in i32);
    # the quantize phase refuses an integer matmul of any other at the user's line.
    integer_matmul: frozenset = frozenset()
    # The target's GEMM multiplies one-byte fp8 tensors with per-tensor scales in its epilogue (sm_90a's wgmma
    # e4m3/e5m2 kinds): dequantize(a, sa) @ dequantize(b, sb) is rewritten so (passes/decompose.py), and an
    # fp8 parameter only such GEMMs read stays one byte wide (passes/fp8_fallback.py).
    scaled_fp8_gemm: bool = False
    # The target's GEMMs load one-byte fp8 operands and widen them to f32 as they load them (the CPU's packing,
    # the SIMT GEMM of SPIR-V and AMDGPU): fp8 values they read stay one byte (passes/fp8_fallback.py), as
    # sm_90a's (scaled_fp8_gemm) do; elsewhere (mma.sync before sm_90a) they read the f16 container.
    fp8_gemm_widens: bool = False
    # Element types of Q (and the result) for which the target has a kernel of flash_attention_fp8 (head
    # dimension 128: sm_90a's wgmma e4m3, backends/ptx/attention_fp8_sm90.py); elsewhere it takes the fallback
    # (passes/decompose.attention_fp8).
    fused_attention_fp8: frozenset = frozenset()
    # (Q's element type, head dimension) pairs the fused flash_attention kernels take, forward and backward
    # (sm_90a's: bf16 and f16 by 64 and 128). Where the target does not decompose attention, one of another
    # type or head dimension (a symbolic one included) is decomposed (passes/decompose.py), a recorded fallback.
    attention_kernels: frozenset = frozenset()
    # Element types of Q whose fused flash_attention kernel also reads Q, K, V and writes O laid out
    # [..., S, H, D] (sm_90a's TMA maps, sm_80's kernel): passes/fold_transposes.attention folds the head
    # split and merge transposes around such an attention into it.
    attention_seq_heads: frozenset = frozenset()
    # The fused flash_attention kernel takes its keys per block and K/V stages from the schedule phase (hints, a
    # stored autotuning result: passes/graph_phases.py ATTENTION_KEYS), so a search may tune them (sm_90a's)
    attention_blocking: bool = False

    def matches(self, key: str, value: str) -> bool:
        """Whether an `op.specialize(when={key: value})` condition holds for this target."""
        aliases = {"cpu": {"cpu", "x86", "host"}, "ptx": {"ptx", "cuda", "nvidia"}}
        if key == "backend":
            return value in aliases.get(self.name, {self.name})
        return False
