"""Flash attention forward on an NVIDIA Hopper GPU: Tessera's sm_90a kernel against PyTorch's
scaled_dot_product_attention, in the same process, on the same tensors.

    python bench/attention_gpu.py [--image attention.tessera] [--shape 4,16,4096]
    python bench/attention_gpu.py --build-image attention.tessera   # where the compiler is

Ours are the functions of examples/gpu/attention.py (bf16 [B, H, S, D], D = 128 and 64, causal and not),
launched as their launch plans say on a Tessera stream through libtessera. Each side runs 10 calls back to
back, then waits; the best of 5 interleaved rounds counts. FLOPs: 4·B·H·S²·D, half of it when causal.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import attention_setup, interleaved_best, launcher  # noqa: E402
EXAMPLE = os.path.join(HERE, os.pardir, "examples", "gpu", "attention.py")
CASES = [("attention_d128", 128, False), ("causal_d128", 128, True), ("attention_d64", 64, False),
         ("causal_d64", 64, True)]


def main() -> None:
    mod, functions, s, (B, H, S), env = attention_setup(__doc__, EXAMPLE)

    import torch
    import torch.nn.functional as F

    for name, D, causal in CASES:
        scale = D ** -0.5
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        o = torch.empty_like(q)
        ours = launcher(mod, functions[name].steps[0], env, [x.view(B * H, S, D) for x in (q, k, v, o)], s)

        def sdpa():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)

        best = interleaved_best({"tessera": (ours, s.synchronize), "sdpa": (sdpa, torch.cuda.synchronize)})
        err = (o.float() - sdpa().float()).abs().max().item()
        flops = 4 * B * H * S * S * D / (2 if causal else 1)
        print(f"{name:15s} B={B} H={H} S={S} D={D}: tessera {flops / best['tessera'] / 1e12:5.0f} TFLOP/s  "
              f"sdpa {flops / best['sdpa'] / 1e12:5.0f}   ratio {best['sdpa'] / best['tessera']:.3f}   "
              f"(max |difference| {err:.1e})")


if __name__ == "__main__":
    sys.exit(main())
