"""SAXPY on an NVIDIA GPU: Tessera's PTX kernel through libtessera's CUDA backend against PyTorch, in the
same process, on the same tensors.

    python bench/saxpy_gpu.py [--image saxpy.tessera] [--sizes 1048576,…] [--blocks 256]
    python bench/saxpy_gpu.py --build-image saxpy.tessera     # where the compiler is, for a GPU machine

Without --image the kernels are compiled for the ptx target first: examples/saxpy.py as written (one element
per thread, which the compiler coarsens to four) and saxpy_x4 below (four per thread by hand). Both sides are timed the same way:
wall time of one call until the GPU is done (our launch waits for its kernel; PyTorch's call is followed by
torch.cuda.synchronize()), best of 20 after warm-up, so small sizes show launch overhead and large ones memory
bandwidth. PyTorch's peer is one kernel with the same traffic: torch.add(Y, X, alpha=a, out=Out).
Bandwidth counts 12 bytes per element (read X and Y, write Out).
"""

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from common import best_time, parse_args, record_row, report, set_gpu_machine  # noqa: E402

EXAMPLE = os.path.join(os.path.dirname(__file__), os.pardir, "examples", "saxpy.py")

# The same SAXPY with four elements per thread written by hand, all loads issued before the first store: the
# peer of the one-element kernel as written, which the compiler coarsens itself (passes/simt_coarsen.py: four
# consecutive elements a thread, 128-bit loads and stores); this one it leaves alone (it reads block_dim).
SAXPY_X4 = """
@kernel
def saxpy_x4(a: float, X: tensor[float, "N"], Y: tensor[float, "N"], Out: tensor[float, "N"]):
    bd = launch.block_dim()
    i = launch.block_id() * bd * 4 + launch.local_id()
    n = X.shape[0]
    if i + 3 * bd < n:
        x0 = X[i]
        x1 = X[i + bd]
        x2 = X[i + 2 * bd]
        x3 = X[i + 3 * bd]
        y0 = Y[i]
        y1 = Y[i + bd]
        y2 = Y[i + 2 * bd]
        y3 = Y[i + 3 * bd]
        Out[i] = a * x0 + y0
        Out[i + bd] = a * x1 + y1
        Out[i + 2 * bd] = a * x2 + y2
        Out[i + 3 * bd] = a * x3 + y3
    else:
        for k in range(4):
            j = i + k * bd
            if j < n:
                Out[j] = a * X[j] + Y[j]
"""


def build_image(path: str) -> None:
    """Both kernels in one image for the ptx target (needs the compiler; the GPU machine may lack it)."""
    import tessera
    with open(EXAMPLE, encoding="utf-8") as f:
        source = f.read() + SAXPY_X4
    with open(path, "wb") as f:
        f.write(tessera.compile(source, "saxpy_gpu.py", target="ptx"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--image", help="the kernels, built beforehand with --build-image (default: compile them now)")
    p.add_argument("--build-image", metavar="PATH", help="only write the kernels' image to PATH")
    p.add_argument("--sizes", default="1048576,16777216,67108864,268435456")
    p.add_argument("--blocks", default="256", help="threads per block to time ours with, comma-separated")
    args = parse_args(p)
    if args.build_image:
        build_image(args.build_image)
        return

    import torch
    from tessera import runtime

    ctx = runtime.select_backend("cuda")
    props = ctx.properties
    print(f"GPU: {props['name']} ({props['arch']}, {props['compute_units']} SMs, "
          f"{props['total_memory_bytes'] / 2**30:.0f} GiB); PyTorch {torch.__version__} sees "
          f"{torch.cuda.get_device_name(0)}")
    set_gpu_machine(props["name"], props["arch"], props["compute_units"])
    if args.image:
        mod = runtime.load(args.image)
    else:
        with tempfile.TemporaryDirectory() as d:
            image = os.path.join(d, "saxpy.tessera")
            build_image(image)
            mod = runtime.load(image)
    a = 1.5
    # The fixed cost of one call, launch to completion (Python, driver, synchronization): a 1-element saxpy.
    x1 = torch.ones(1, device="cuda")
    o1 = torch.empty_like(x1)
    r = record_row("one call, n=1", {"tessera": best_time(lambda: mod.saxpy(a, x1, x1, o1, grid=1, block=32)),
                                     "torch": best_time(lambda: (torch.add(x1, x1, alpha=a, out=o1),
                                                                 torch.cuda.synchronize()))},
                   shape=(1,), dtype="f32", note="launch to completion")
    t_ours, t_peer = r["ours"]["time_s"], r["peers"][0]["time_s"]
    print(f"one call, n=1: tessera {t_ours * 1e6:.1f} us   torch {t_peer * 1e6:.1f} us   "
          f"tessera/torch {t_ours / t_peer:.2f} (target <= 1)")
    for n in (int(s) for s in args.sizes.split(",")):
        X = torch.randn(n, device="cuda")
        Y = torch.randn(n, device="cuda")
        Out, Ref = torch.empty_like(X), torch.empty_like(X)

        def peer():
            torch.add(Y, X, alpha=a, out=Ref)
            torch.cuda.synchronize()

        t_peer = best_time(peer)
        for block in (int(b) for b in args.blocks.split(",")):
            def ours(block=block):
                mod.saxpy(a, X, Y, Out, grid=(n + block - 1) // block, block=block)

            def ours_x4(block=block):
                mod.saxpy_x4(a, X, Y, Out, grid=(n + 4 * block - 1) // (4 * block), block=block)

            for name, fn in (("saxpy", ours), ("saxpy_x4", ours_x4)):
                Out.zero_()
                t_ours = best_time(fn)
                # PyTorch may fuse the multiply-add (one rounding); ours rounds twice, as written
                torch.testing.assert_close(Out, Ref, rtol=1e-6, atol=1e-6)
                report(f"{name} n={n} block={block}", t_ours, t_peer, "torch", "GB/s", 12 * n / 1e9, shape=(n,),
                       dtype="f32", flops=2 * n)
        del X, Y, Out, Ref


if __name__ == "__main__":
    main()
