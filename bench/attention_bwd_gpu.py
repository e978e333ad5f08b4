"""Flash attention backward on an NVIDIA Hopper GPU: Tessera's sm_90a backward kernels against PyTorch's
scaled_dot_product_attention backward, in the same process, on the same tensors.

    python bench/attention_bwd_gpu.py [--image attention_bwd.tessera] [--shape 4,16,4096]
    python bench/attention_bwd_gpu.py --build-image attention_bwd.tessera   # where the compiler is
    TESSERA_ATTENTION_FUSED_DQ=0 python bench/attention_bwd_gpu.py --build-image apart.tessera   # dQ's own kernel

Ours are the vjp functions of examples/gpu/attention_backward.py (bf16 [B, H, S, D], D = 128 and 64, causal
and not; causal_d64 is f16): every step of their launch plans after the forward, launched on a Tessera
stream through libtessera as a call of the function runs them — the whole backward: the preprocessing kernel
(delta = rowsum(dO·O), and zeroing dQ's f32 accumulator), the dK/dV kernel that adds dQ into that accumulator
by bulk reductions, and the kernel rounding it to dQ (in an image built with TESSERA_ATTENTION_FUSED_DQ=0 dQ
has a kernel of its own) — with LSE and O from the plan's own forward step. (An image built before the
preprocessing kernel computes delta with elementwise and row kernels that this harness does not launch: for
it torch's rowsum stands in, and the line says "delta by torch".) The peer is torch.autograd.grad of SDPA's
output, which runs its backward kernels with their own preprocessing. Each side
runs 10 calls back to back, then waits; 9 interleaved rounds (the next multiple of the number of sides), the
order rotating (common.interleaved_rounds): the throughput is each side's best round, and beside the ratio
"paired M (LO-HI)" is the median and range of the ratio taken round by round (common.paired_ratio). FLOPs: 2.5 times the
forward's 4·B·H·S²·D (half of it when causal), as FlashAttention counts the backward.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import PAIRED_ROUNDS, attention_setup, interleaved_best, launcher, report_row  # noqa: E402
EXAMPLE = os.path.join(HERE, os.pardir, "examples", "gpu", "attention_backward.py")
CASES = [("vjp_attn_d128", 128, False), ("vjp_causal_d128", 128, True), ("vjp_attn_d64", 64, False),
         ("vjp_causal_d64", 64, True)]


def main() -> None:
    mod, functions, s, (B, H, S), env, _ = attention_setup(__doc__, EXAMPLE)

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
        v3["Delta"] = torch.empty(B * H, S, device="cuda")
        fused = any(st.kernel.endswith(("_dq_zero", "_dq_cast")) for st in bwd)
        by_torch = not any(st.kernel.endswith("_pre") for st in bwd)
        rows = ("Q", "K", "V", "dO", "LSE", "Delta")
        names = {"_pre": ("O", "dO", "Delta") + (("dQacc",) if fused else ()), "_dq_zero": ("dQacc",),
                 "_dq_cast": ("dQacc", "dQ"), "_dq": rows + ("dQ",)}
        launches = [launch(st, next((v for k, v in names.items() if st.kernel.endswith(k)),
                                    rows + ("dK", "dV") + (("dQacc",) if fused else ()))) for st in bwd]

        def rowsum():
            torch.sum(do.float() * o.float(), -1, out=v3["Delta"].view(B, H, S))

        def ours():
            if by_torch:   # torch's stream is not ordered with ours: waited for before the kernels read it
                rowsum()
                torch.cuda.synchronize()
            for f in launches:
                f()

        qr, kr, vr = (x.detach().clone().requires_grad_() for x in (q, k, v))
        out = F.scaled_dot_product_attention(qr, kr, vr, is_causal=causal, scale=scale)

        def sdpa():
            return torch.autograd.grad(out, (qr, kr, vr), do, retain_graph=True)

        sides = {"tessera": (ours, s.synchronize),
                 "sdpa": (sdpa, torch.cuda.synchronize)}
        rounds = {}
        best = interleaved_best(sides, PAIRED_ROUNDS, rounds_out=rounds)
        ours(), s.synchronize()
        err = max(((a.float() - b.float()).abs().max() / b.float().abs().max()).item()
                  for a, b in zip((dq, dk, dv), sdpa()))
        flops = 2.5 * 4 * B * H * S * S * D / (2 if causal else 1)
        report_row(f"{name} S={S}", best, "TFLOP/s", flops / 1e12, shape=(B, H, S, D), dtype=str(dtype)[6:],
                   bytes=8 * 2 * B * H * S * D + 2 * 4 * B * H * S,   # Q K V O dO read, dQ dK dV written; LSE, delta
                   note=f"{'delta by torch; ' if by_torch else ''}max |difference| {err:.1e} of the largest",
                   rounds=rounds)


if __name__ == "__main__":
    sys.exit(main())
