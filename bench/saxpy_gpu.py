"""SAXPY on an NVIDIA GPU: Tessera's PTX kernel through libtessera's CUDA backend against PyTorch, in the
same process, on the same tensors.

    python bench/saxpy_gpu.py [--image saxpy.tessera] [--sizes 1048576,16777216,67108864,268435456]

Without --image the example is compiled with `tessera-cc --target ptx`. Both sides are timed the same way:
wall time of one call until the GPU is done (our launch waits for its kernel; PyTorch's call is followed by
torch.cuda.synchronize()), best of 20 after warm-up, so small sizes show launch overhead and large ones memory
bandwidth. PyTorch's peer is one kernel with the same traffic: torch.add(Y, X, alpha=a, out=Out).
Bandwidth counts 12 bytes per element (read X and Y, write Out).
"""

import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from common import best_time, report  # noqa: E402

EXAMPLE = os.path.join(os.path.dirname(__file__), os.pardir, "examples", "saxpy.py")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--image", help="a compiled examples/saxpy.py for the ptx target")
    p.add_argument("--sizes", default="1048576,16777216,67108864,268435456")
    p.add_argument("--block", type=int, default=256)
    args = p.parse_args()

    import torch
    from tessera import runtime

    ctx = runtime.select_backend("cuda")
    props = ctx.properties
    print(f"GPU: {props['name']} ({props['arch']}, {props['compute_units']} SMs, "
          f"{props['total_memory_bytes'] / 2**30:.0f} GiB); PyTorch {torch.__version__} sees "
          f"{torch.cuda.get_device_name(0)}")
    if args.image:
        mod = runtime.load(args.image)
    else:
        with tempfile.TemporaryDirectory() as d:
            image = os.path.join(d, "saxpy.tessera")
            subprocess.run(["tessera-cc", EXAMPLE, "--target", "ptx", "-o", image], check=True, cwd=os.sep)
            mod = runtime.load(image)
    a = 1.5
    for n in (int(s) for s in args.sizes.split(",")):
        X = torch.randn(n, device="cuda")
        Y = torch.randn(n, device="cuda")
        Out, Ref = torch.empty_like(X), torch.empty_like(X)
        grid = (n + args.block - 1) // args.block

        def ours():
            mod.saxpy(a, X, Y, Out, grid=grid, block=args.block)

        def peer():
            torch.add(Y, X, alpha=a, out=Ref)
            torch.cuda.synchronize()

        t_ours, t_peer = best_time(ours), best_time(peer)
        # PyTorch may fuse the multiply-add (one rounding); ours rounds twice, as written
        torch.testing.assert_close(Out, Ref, rtol=1e-6, atol=1e-6)
        report(f"saxpy n={n}", t_ours, t_peer, "torch", "GB/s", 12 * n / 1e9)
        del X, Y, Out, Ref


if __name__ == "__main__":
    main()
