"""Flash attention forward on an NVIDIA GPU: Tessera's sm_90a kernel (or, with --arch sm_80, its mma.sync
kernel) against PyTorch's scaled_dot_product_attention, in the same process, on the same tensors.

    python bench/attention_gpu.py [--image attention.tessera] [--shape 4,16,4096]
    python bench/attention_gpu.py --fp8 --image attention.tessera [--shape 4,16,4096]
    python bench/attention_gpu.py --build-image attention.tessera   # where the compiler is
    python bench/attention_gpu.py --arch sm_80 --build-image attention_sm80.tessera
    python bench/attention_gpu.py --arch sm_80 --image attention_sm80.tessera

--arch sm_80: the image's kernels are backends/ptx/attention_sm80.py's (FlashAttention-2's schedule on
mma.sync; the compiler's default on sm_80 … sm_90, off with TESSERA_ATTENTION_SM80=0), and SDPA runs with
its FlashAttention-2 backend forced (torch.nn.attention.sdpa_kernel(SDPBackend.FLASH_ATTENTION)), the same
class of instructions; without it SDPA picks its own backend.

Ours are the functions of examples/gpu/attention.py (bf16 [B, H, S, D], D = 128 and 64, causal and not),
launched as their launch plans say on a Tessera stream through libtessera. Each side runs 10 calls back to
back, then waits; the best of 5 interleaved rounds counts. FLOPs: 4·B·H·S²·D, half of it when causal.

--fp8: the example's fp8_d128 and causal_fp8_d128 (op.flash_attention_fp8 on bf16 inputs: the amax, quantize
and Vᵀ kernels, then the e4m3 attention), called whole through tessera.executor on torch's tensors, against
our bf16 kernel and SDPA in bf16 on the same inputs; the FLOPs counted are the attention's, as above.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import attention_setup, interleaved_best, launcher, report_row  # noqa: E402
EXAMPLE = os.path.join(HERE, os.pardir, "examples", "gpu", "attention.py")
CASES = [("attention_d128", 128, False), ("causal_d128", 128, True), ("attention_d64", 64, False),
         ("causal_d64", 64, True)]


def main() -> None:
    mod, functions, s, (B, H, S), env, args = attention_setup(
        __doc__, EXAMPLE, {"--fp8": "op.flash_attention_fp8 against our bf16 kernel and SDPA (needs --image)"})

    import contextlib

    import torch
    import torch.nn.functional as F

    if args.fp8:
        if not args.image:
            raise SystemExit("--fp8 needs --image (the image the executor loads too)")
        return fp8(args.image, mod, functions, s, (B, H, S), env)
    peer, backend = "sdpa", contextlib.nullcontext
    if args.arch != "sm_90a":   # the mma.sync kernel against FlashAttention-2's
        from torch.nn.attention import SDPBackend, sdpa_kernel
        peer, backend = "sdpa-fa2", lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)
    for name, D, causal in CASES:
        scale = D ** -0.5
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        o = torch.empty_like(q)
        step = functions[name].steps[0]
        if len(functions[name].steps) != 1:
            raise SystemExit(f"{name}: the image runs attention as {len(functions[name].steps)} kernels, not one "
                             "(an sm_80 image built with TESSERA_ATTENTION_SM80=0?)")
        ours = launcher(mod, step, env, [x.view(B * H, S, D) for x in (q, k, v, o)], s)

        def sdpa():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)

        with backend():
            best = interleaved_best({"tessera": (ours, s.synchronize), peer: (sdpa, torch.cuda.synchronize)})
            err = (o.float() - sdpa().float()).abs().max().item()
        flops = 4 * B * H * S * S * D / (2 if causal else 1)
        report_row(f"{name} S={S}" + ("" if args.arch == "sm_90a" else f" {args.arch}"), best, "TFLOP/s",
                   flops / 1e12, shape=(B, H, S, D), dtype="bf16", bytes=4 * 2 * B * H * S * D,  # Q, K, V, O
                   note=f"max |difference| {err:.1e}")



def fp8(image: str, mod, functions, s, shape, env) -> None:
    import torch
    import torch.nn.functional as F

    from tessera import executor

    prog = executor.load(image, mod.context)
    B, H, S = shape
    D = 128
    for name, bf16_name, causal in (("fp8_d128", "attention_d128", False), ("causal_fp8_d128", "causal_d128", True)):
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        o = torch.empty_like(q)
        ours_bf16 = launcher(mod, functions[bf16_name].steps[0], env, [x.view(B * H, S, D) for x in (q, k, v, o)], s)
        fn = getattr(prog, name)

        def ours_fp8():
            return fn(q, k, v, stream=s)

        def sdpa():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=D ** -0.5)

        best = interleaved_best({"fp8": (ours_fp8, s.synchronize), "bf16": (ours_bf16, s.synchronize),
                                 "sdpa": (sdpa, torch.cuda.synchronize)})
        out = torch.as_tensor(ours_fp8(), device="cuda").view(torch.bfloat16)
        s.synchronize()
        exact = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal, scale=D ** -0.5)
        err = ((out.float() - exact).pow(2).mean().sqrt() / exact.pow(2).mean().sqrt()).item()
        flops = 4 * B * H * S * S * D / (2 if causal else 1)
        report_row(f"{name} S={S}", {"tessera fp8": best["fp8"], "tessera bf16": best["bf16"],
                                     "sdpa bf16": best["sdpa"]}, "TFLOP/s", flops / 1e12, shape=(B, H, S, D),
                   dtype="fp8", bytes=4 * 2 * B * H * S * D,   # bf16 Q, K, V read, O written
                   note=f"rms error vs f32 attention {err:.1e}; the whole function: amax, quantize, Vt kernels")


if __name__ == "__main__":
    sys.exit(main())
