"""Flash attention backward on an NVIDIA Hopper GPU: Tessera's sm_90a backward kernels against PyTorch's
scaled_dot_product_attention backward, in the same process, on the same tensors.

    python bench/attention_bwd_gpu.py [--image attention_bwd.tessera] [--shape 4,16,4096]
    python bench/attention_bwd_gpu.py --build-image attention_bwd.tessera   # where the compiler is
    TESSERA_ATTENTION_FUSED_DQ=0 python bench/attention_bwd_gpu.py --build-image apart.tessera   # dQ's own kernel

Ours are the vjp functions of examples/gpu/attention_backward.py (bf16 [B, H, S, D], D = 128 and 64, causal
and not; causal_d64 is f16): their launch plans' backward steps (dK and dV, then dQ) launched on a Tessera
stream through libtessera (by default the dK/dV kernel adds dQ by bulk reductions into an f32 accumulator,
zeroed before and rounded after by two small kernels; in an image built with TESSERA_ATTENTION_FUSED_DQ=0 dQ
has a kernel of its own), with LSE
from the plan's own forward step and delta = rowsum(dO·O) computed once beforehand (the plan computes it with
small elementwise and row kernels: timed apart, "delta"). The peer is
torch.autograd.grad of SDPA's output, which runs its backward kernels with their own preprocessing. Each side
runs 10 calls back to back, then waits; the best of 5 interleaved rounds counts. FLOPs: 2.5 times the
forward's 4·B·H·S²·D (half of it when causal), as FlashAttention counts the backward.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import attention_setup, interleaved_best, launcher  # noqa: E402
EXAMPLE = os.path.join(HERE, os.pardir, "examples", "gpu", "attention_backward.py")
CASES = [("vjp_attn_d128", 128, False), ("vjp_causal_d128", 128, True), ("vjp_attn_d64", 64, False),
         ("vjp_causal_d64", 64, True)]


def main() -> None:
    mod, functions, s, (B, H, S), env = attention_setup(__doc__, EXAMPLE)

    import torch
    import torch.nn.functional as F

    for name, D, causal in CASES:
        dtype = torch.float16 if name == "vjp_causal_d64" else torch.bfloat16
        steps = functions[name].steps
        fwd = next(st for st in steps if getattr(st, "kernel", "").endswith("__attention0"))
        bwd = [st for st in steps if "__attention_bwd" in getattr(st, "kernel", "")]
        scale = D ** -0.5
        q, k, v, do = (torch.randn(B, H, S, D, device="cuda", dtype=dtype) for _ in range(4))
        o, dq, dk, dv = (torch.empty_like(q) for _ in range(4))
        lse = torch.empty(B * H, S, device="cuda")
        v3 = {n: x.view(B * H, S, D) for n, x in (("Q", q), ("K", k), ("V", v), ("dO", do), ("O", o), ("dQ", dq),
                                                  ("dK", dk), ("dV", dv))}
        v3["LSE"] = lse
        v3["dQacc"] = torch.empty(B * H, S, D, device="cuda")

        def launch(step, names):
            return launcher(mod, step, env, [v3[n] for n in names], s)

        launch(fwd, ("Q", "K", "V", "O", "LSE"))()
        s.synchronize()
        delta = (do.float() * o.float()).sum(-1).view(B * H, S)
        v3["Delta"] = delta
        fused = any(st.kernel.endswith("_dq_zero") for st in bwd)
        rows = ("Q", "K", "V", "dO", "LSE", "Delta")
        names = {"_dq_zero": ("dQacc",), "_dq_cast": ("dQacc", "dQ"), "_dq": rows + ("dQ",)}
        launches = [launch(st, next((v for k, v in names.items() if st.kernel.endswith(k)),
                                    rows + ("dK", "dV") + (("dQacc",) if fused else ()))) for st in bwd]

        def ours():
            for f in launches:
                f()

        qr, kr, vr = (x.detach().clone().requires_grad_() for x in (q, k, v))
        out = F.scaled_dot_product_attention(qr, kr, vr, is_causal=causal, scale=scale)

        def sdpa():
            return torch.autograd.grad(out, (qr, kr, vr), do, retain_graph=True)

        def rowsum():
            return (do.float() * o.float()).sum(-1)

        sides = {"tessera": (ours, s.synchronize), "sdpa": (sdpa, torch.cuda.synchronize),
                 "delta": (rowsum, torch.cuda.synchronize)}
        best = interleaved_best(sides)
        ours(), s.synchronize()
        err = max(((a.float() - b.float()).abs().max() / b.float().abs().max()).item()
                  for a, b in zip((dq, dk, dv), sdpa()))
        flops = 2.5 * 4 * B * H * S * S * D / (2 if causal else 1)
        print(f"{name:16s} B={B} H={H} S={S} D={D} {str(dtype)[6:]}: tessera {flops / best['tessera'] / 1e12:5.0f} "
              f"TFLOP/s  sdpa {flops / best['sdpa'] / 1e12:5.0f}   ratio {best['sdpa'] / best['tessera']:.3f}   "
              f"(delta {best['delta'] * 1e3:.3f} ms; max |difference| {err:.1e} of the largest)")


if __name__ == "__main__":
    sys.exit(main())
