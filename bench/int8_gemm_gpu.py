"""int8 GEMM on an NVIDIA Hopper GPU: Tessera's sm_90a s8 wgmma kernel against torch._int_mm (cuBLAS), in the
same process, on the same tensors.

    python bench/int8_gemm_gpu.py [--image int8.tessera] [--sizes 4096,8192]
    python bench/int8_gemm_gpu.py --build-image int8.tessera   # where the compiler is, for a GPU machine

Ours is `mm` below (C = A @ B, i8 operands, i32 accumulation and result), whose launch plan runs two kernels:
B [K,N] copied transposed to [N,K] (wgmma reads 8-bit operands K-major only), then the GEMM (the tile shape
the plan takes for the size, a persistent grid of at most one CTA per SM). Timed: the GEMM alone on a B
already [N,K] ("kernel"), and both steps ("whole", what the function runs on a row-major B). The peer is
torch._int_mm(A, B) on the same row-major B, and on B as the transpose of a contiguous [N,K] ("torch Bt",
the layout cuBLAS's int8 kernels read directly). Each side runs 20 products back to back, then waits; the
best of 5 such rounds counts, rounds interleaved. TOPS counts 2·M·N·K operations.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import cuda_context, interleaved_best  # noqa: E402

SOURCE = '''
from tessera import function, tensor, i8

@function
def mm(A: tensor[i8, "M", "K"], B: tensor[i8, "K", "N"]):
    return A @ B
'''


def build(path: str) -> None:
    import tessera
    with open(path, "wb") as f:
        f.write(tessera.compile(SOURCE, "int8_gemm.py", target="ptx", arch="sm_90a"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--image", help="the program built beforehand with --build-image")
    p.add_argument("--build-image", metavar="PATH", help="only write the image to PATH")
    p.add_argument("--sizes", default="4096,8192")
    args = p.parse_args()
    if args.build_image:
        return build(args.build_image)

    import tempfile

    import torch
    from tessera import image as images, plan as plans, runtime, stream

    ctx = cuda_context()
    if not args.image:
        args.image = os.path.join(tempfile.mkdtemp(), "int8.tessera")
        build(args.image)
    with open(args.image, "rb") as f:
        data = f.read()
    mod = runtime.load(data)
    pack, planned = plans.decode(images.read_image(data).section(plans.SECTION))["mm"].steps
    s = stream.new(context=ctx)
    for n in (int(x) for x in args.sizes.split(",")):
        env = {"M": n, "N": n, "K": n, "KP": n, "DEVICE_UNITS": ctx.properties["compute_units"]}
        step = plans.chosen(planned, env)  # the tile shape the plan takes for this size, as the executor does
        gemm, grid = mod.kernel(step.kernel), plans.evaluate(step.grid[0], env)
        packer, pgrid = mod.kernel(pack.kernel), tuple(plans.evaluate(g, env) for g in pack.grid)
        A = torch.randint(-128, 128, (n, n), device="cuda", dtype=torch.int8)
        B = torch.randint(-128, 128, (n, n), device="cuda", dtype=torch.int8)
        Bt = B.t().contiguous()
        Bp = torch.empty_like(Bt)
        C = torch.empty(n, n, device="cuda", dtype=torch.int32)

        def kernel(b=Bt):
            gemm(A, b, C, grid=grid, block=step.block, smem_bytes=step.smem, stream=s)

        def whole():
            packer(B, Bp, grid=pgrid, block=pack.block, smem_bytes=pack.smem, stream=s)
            kernel(Bp)

        whole(), s.synchronize()
        assert torch.equal(Bp, Bt), "the copy of B changed values"
        ref = torch._int_mm(A, B)
        assert torch.equal(C, ref), "the int8 GEMM differs from torch._int_mm"
        C.fill_(0)
        kernel(), s.synchronize()
        assert torch.equal(C, ref), "the int8 GEMM on a packed B differs from torch._int_mm"
        sides = {"kernel": (kernel, s.synchronize), "whole": (whole, s.synchronize),
                 "torch": (lambda: torch._int_mm(A, B), torch.cuda.synchronize),
                 "torch Bt": (lambda: torch._int_mm(A, Bt.t()), torch.cuda.synchronize)}
        best = interleaved_best(sides, calls=20)
        tops = {k: 2 * n ** 3 / v / 1e12 for k, v in best.items()}
        print(f"int8 {n}x{n}x{n} ({step.kernel}): tessera kernel {tops['kernel']:6.0f} TOPS  whole {tops['whole']:6.0f}"
              f"  torch._int_mm {tops['torch']:6.0f}  (Bt {tops['torch Bt']:6.0f})   ratio vs torch: kernel "
              f"{best['torch'] / best['kernel']:.3f}  whole {best['torch'] / best['whole']:.3f}   (exact)")


if __name__ == "__main__":
    sys.exit(main())
