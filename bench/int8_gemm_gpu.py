"""int8 GEMM on an NVIDIA Hopper GPU: Tessera's sm_90a s8 wgmma kernel against torch._int_mm (cuBLAS), in the
same process, on the same tensors.

    python bench/int8_gemm_gpu.py [--image int8.tessera] [--sizes 4096,8192]
    python bench/int8_gemm_gpu.py --build-image int8.tessera   # where the compiler is, for a GPU machine

Ours are `mm` and `nt` below (i8 operands, i32 accumulation and result). wgmma reads 8-bit operands K-major
only, so `mm` (C = A @ B, B row-major [K,N]) runs two kernels: B copied transposed to [N,K], then the GEMM;
`nt` (C = A @ Bᵀ of a stored Bᵀ [N,K]) runs the GEMM alone on it. Each launches as its plan says (the tile
shape the plan takes for the size, a persistent grid of at most one CTA per SM). The peer is
torch._int_mm(A, B) on the same row-major B, and on B as the transpose of a contiguous [N,K] ("torch Bt").
Each side runs 20 products back to back, then waits; 12 rounds (9 rounded up to a multiple of the 4 sides),
the order rotating (common.interleaved_rounds): TOPS is each side's best round, and beside each ratio
"paired M (LO-HI)" is the median and range of the ratio taken round by round (common.paired_ratio).
TOPS counts 2·M·N·K operations; every result is checked equal to torch's.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import PAIRED_ROUNDS, cuda_context, interleaved_best, launcher, parse_args, pick, report_row  # noqa: E402

SOURCE = '''
from tessera import function, op, tensor, i8

@function
def mm(A: tensor[i8, "M", "K"], B: tensor[i8, "K", "N"]):
    return A @ B

@function
def nt(A: tensor[i8, "M", "K"], Bt: tensor[i8, "N", "K"]):
    return A @ op.transpose(Bt)
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
    args = parse_args(p)
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
    functions = plans.decode(images.read_image(data).section(plans.SECTION))
    s = stream.new(context=ctx)
    for n in (int(x) for x in args.sizes.split(",")):
        env = {"M": n, "N": n, "K": n, "KP": n, "DEVICE_UNITS": ctx.properties["compute_units"]}
        A = torch.randint(-128, 128, (n, n), device="cuda", dtype=torch.int8)
        B = torch.randint(-128, 128, (n, n), device="cuda", dtype=torch.int8)
        Bt = B.t().contiguous()
        Bp = torch.empty_like(Bt)
        C, Ct = (torch.empty(n, n, device="cuda", dtype=torch.int32) for _ in range(2))
        pack, planned = functions["mm"].steps
        step = plans.chosen(planned, env)  # the tile shape the plan takes for this size, as the executor does
        (nt_step,) = functions["nt"].steps
        nt_step = plans.chosen(nt_step, env)
        copy_b = launcher(mod, pack, env, (B, Bp), s)
        gemm = launcher(mod, step, env, (A, Bp, C), s)

        def whole():
            copy_b(), gemm()

        sides = {"mm": (whole, s.synchronize), "nt": (launcher(mod, nt_step, env, (A, Bt, Ct), s), s.synchronize),
                 "torch": (lambda: torch._int_mm(A, B), torch.cuda.synchronize),
                 "torch Bt": (lambda: torch._int_mm(A, Bt.t()), torch.cuda.synchronize)}
        for fn, wait in sides.values():
            fn(), wait()
        ref = torch._int_mm(A, B)
        assert torch.equal(Bp, Bt), "the copy of B changed values"
        assert torch.equal(C, ref) and torch.equal(Ct, ref), "the int8 GEMM differs from torch._int_mm"
        rounds = {}
        best = interleaved_best(sides, PAIRED_ROUNDS, calls=20, rounds_out=rounds)
        for ours, what in (("mm", "A@B"), ("nt", "A@Bt")):   # mm: the copy of B, then the GEMM
            times, paired = pick(best, rounds, {f"tessera {what}": ours, "torch._int_mm": "torch",
                                                "torch._int_mm Bt": "torch Bt"})
            report_row(f"int8 gemm {what} {n}", times, "TOPS", 2 * n ** 3 / 1e12,
                       shape=(n, n, n), dtype="i8", bytes=2 * n * n + 4 * n * n,   # i8 A, B read; i32 C written
                       note=f"{step.kernel}; exact", rounds=paired)

if __name__ == "__main__":
    sys.exit(main())
