"""Flash attention forward on an NVIDIA Hopper GPU: Tessera's sm_90a kernel against PyTorch's
scaled_dot_product_attention, in the same process, on the same tensors.

    python bench/attention_gpu.py [--image attention.tessera] [--shape 4,16,4096]
    python bench/attention_gpu.py --build-image attention.tessera   # where the compiler is

Ours are the functions of examples/gpu/attention.py (bf16 [B, H, S, D], D = 128 and 64, causal and not),
launched as their launch plans say on a Tessera stream through libtessera. Each side runs 10 calls back to
back, then waits; the best of 5 interleaved rounds counts. FLOPs: 4·B·H·S²·D, half of it when causal.
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import build_example_image, gpu_program  # noqa: E402
EXAMPLE = os.path.join(HERE, os.pardir, "examples", "gpu", "attention.py")
CASES = [("attention_d128", 128, False), ("causal_d128", 128, True), ("attention_d64", 64, False),
         ("causal_d64", 64, True)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--image", help="examples/gpu/attention.py built beforehand with --build-image")
    p.add_argument("--build-image", metavar="PATH", help="only write the image to PATH")
    p.add_argument("--shape", default="4,16,4096", help="B,H,S")
    args = p.parse_args()
    if args.build_image:
        return build_example_image(EXAMPLE, args.build_image)

    import torch
    import torch.nn.functional as F
    from tessera import plan as plans, stream

    ctx, mod, functions = gpu_program(args.image, EXAMPLE)
    props = ctx.properties
    B, H, S = (int(x) for x in args.shape.split(","))
    s = stream.new(context=ctx)
    for name, D, causal in CASES:
        step = functions[name].steps[0]
        kernel = mod.kernel(step.kernel)
        scale = D ** -0.5
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        o = torch.empty_like(q)
        env = {"BH": B * H, "SQ": S, "SK": S, "DEVICE_UNITS": props["compute_units"]}
        grid = tuple(plans.evaluate(g, env) for g in step.grid)
        views = [x.view(B * H, S, D) for x in (q, k, v, o)]

        def ours():
            kernel(*views, grid=grid, block=step.block, smem_bytes=step.smem, stream=s)

        def sdpa():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)

        sides = {"tessera": (ours, s.synchronize), "sdpa": (sdpa, torch.cuda.synchronize)}
        best = {n: float("inf") for n in sides}
        for _ in range(5):
            for n, (fn, wait) in sides.items():
                fn(), wait()
                t0 = time.perf_counter()
                for _ in range(10):
                    fn()
                wait()
                best[n] = min(best[n], (time.perf_counter() - t0) / 10)
        err = (o.float() - sdpa().float()).abs().max().item()
        flops = 4 * B * H * S * S * D / (2 if causal else 1)
        print(f"{name:15s} B={B} H={H} S={S} D={D}: tessera {flops / best['tessera'] / 1e12:5.0f} TFLOP/s  "
              f"sdpa {flops / best['sdpa'] / 1e12:5.0f}   ratio {best['sdpa'] / best['tessera']:.3f}   "
              f"(max |difference| {err:.1e})")


if __name__ == "__main__":
    sys.exit(main())
