"""A bf16 transformer block on an NVIDIA Hopper GPU (issue 19 item 5): Tessera's one @function (layernorm, Q/K/V
projections, causal attention over heads of 128, output projection, residual, layernorm, MLP with gelu,
residual), compiled for sm_90a and called through tessera.executor on torch tensors, against PyTorch eager and
torch.compile of the same block, in the same process, on the same tensors.

    python bench/transformer_block_gpu.py --build-image block.tessera [--shape 4,2048,4096]   # where the compiler is
    python bench/transformer_block_gpu.py --image block.tessera [--shape 4,2048,4096]          # on the GPU
    python bench/transformer_block_gpu.py --cpu                    # the check alone, CPU image, shape 2,64,256

The shape is B,S,D (T = B·S tokens, D/128 heads, MLP width 4·D); the image is compiled for it (static extents:
each GEMM gets the cost model's tile for its own size). Every tensor is bf16, as in PyTorch's bf16 block; the
kernels compute in f32 inside (wgmma accumulators, the norms' statistics, the softmax). Before timing, the
result is checked against the block in f32 on the same (bf16) weights: its relative error (Frobenius) must be
at most 2e-2 and at most 3× eager PyTorch's own plus 1e-3. Sides run 10 calls back to back, then wait; 9
interleaved rounds (the next multiple of the number of sides), the order rotating (common.interleaved_rounds):
the throughput is each side's best round, and beside each ratio "paired M (LO-HI)" is the median and range of
the ratio taken round by round (common.paired_ratio; the sides of a round are timed back to back). TFLOP/s: the GEMMs' 24·T·D² and causal attention's 2·B·S²·D.
--profile prints where each side's GPU time goes (torch.profiler around three calls: it records our kernels
too) and the wall time not covered by kernels.
"""

import argparse
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import PAIRED_ROUNDS, cuda_context, interleaved_best, paired_text, parse_args, record_row  # noqa: E402

HEAD = 128
PROGRAM = """
from tessera import bf16, function, op, tensor

@function
def block(X: tensor[bf16, {T}, {D}], g1: tensor[bf16, {D}], c1: tensor[bf16, {D}], Wq: tensor[bf16, {D}, {D}],
          Wk: tensor[bf16, {D}, {D}], Wv: tensor[bf16, {D}, {D}], Wo: tensor[bf16, {D}, {D}],
          g2: tensor[bf16, {D}], c2: tensor[bf16, {D}], W1: tensor[bf16, {D}, {F}], b1: tensor[bf16, {F}],
          W2: tensor[bf16, {F}, {D}], b2: tensor[bf16, {D}]) -> tensor[bf16, {T}, {D}]:
    H = op.layernorm(X, gamma=g1, beta=c1, eps=1e-5)
    Q = op.transpose(op.reshape(H @ Wq, ({B}, {S}, {NH}, {HEAD})), (0, 2, 1, 3))
    K = op.transpose(op.reshape(H @ Wk, ({B}, {S}, {NH}, {HEAD})), (0, 2, 1, 3))
    V = op.transpose(op.reshape(H @ Wv, ({B}, {S}, {NH}, {HEAD})), (0, 2, 1, 3))
    A = op.flash_attention(Q, K, V, causal=True, scale={SCALE})
    X1 = X + op.reshape(op.transpose(A, (0, 2, 1, 3)), ({T}, {D})) @ Wo
    N = op.layernorm(X1, gamma=g2, beta=c2, eps=1e-5)
    M = op.gelu(op.bias_add(N @ W1, b1))
    return X1 + op.bias_add(M @ W2, b2)
"""
NAMES = ("X", "g1", "c1", "Wq", "Wk", "Wv", "Wo", "g2", "c2", "W1", "b1", "W2", "b2")


def source(B: int, S: int, D: int) -> str:
    if D % HEAD:
        raise SystemExit(f"D = {D} is not a whole number of heads of {HEAD}")
    return PROGRAM.format(B=B, S=S, T=B * S, D=D, F=4 * D, NH=D // HEAD, HEAD=HEAD, SCALE=1 / math.sqrt(HEAD))


def compile_program(shape: tuple, target: str) -> bytes:
    import tessera
    options = {} if target == "cpu" else {"target": "ptx", "arch": "sm_90a"}
    return tessera.compile(source(*shape), "transformer_block_gpu.py", **options)


def inputs(B: int, S: int, D: int, device: str) -> list:
    """The block's arguments in NAMES' order, bf16 torch tensors on `device`."""
    import torch
    g = torch.Generator(device="cpu").manual_seed(0)
    F = 4 * D

    def randn(*shape, scale=1.0, shift=0.0):
        return (torch.randn(*shape, generator=g) * scale + shift).to(torch.bfloat16).to(device)
    return [randn(B * S, D), randn(D, scale=0.1, shift=1.0), randn(D, scale=0.1),
            *(randn(D, D, scale=D ** -0.5) for _ in range(4)), randn(D, scale=0.1, shift=1.0), randn(D, scale=0.1),
            randn(D, F, scale=D ** -0.5), randn(F, scale=0.1), randn(F, D, scale=F ** -0.5), randn(D, scale=0.1)]


def torch_block(B: int, S: int):
    """PyTorch's block over the same arguments (eager; torch.compile compiles this function)."""
    import torch
    import torch.nn.functional as F

    def block(X, g1, c1, Wq, Wk, Wv, Wo, g2, c2, W1, b1, W2, b2):
        T, D = X.shape

        def heads(Y):
            return Y.view(B, S, D // HEAD, HEAD).transpose(1, 2)
        H = F.layer_norm(X, (D,), g1, c1, 1e-5)
        A = F.scaled_dot_product_attention(heads(H @ Wq), heads(H @ Wk), heads(H @ Wv), is_causal=True,
                                           scale=1 / math.sqrt(HEAD))
        X1 = X + A.transpose(1, 2).reshape(T, D) @ Wo
        N = F.layer_norm(X1, (D,), g2, c2, 1e-5)
        return X1 + F.gelu(N @ W1 + b1) @ W2 + b2
    return block


def as_torch(x, like):
    """A result of ours (a DeviceArray holding bf16 bits, or a numpy array of float32 values) as a torch tensor
    of `like`'s dtype and device."""
    import numpy as np
    import torch
    if isinstance(x, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(x)).to(like.dtype).to(like.device)
    t = torch.from_dlpack(x)
    return t.view(torch.bfloat16) if t.dtype != torch.bfloat16 else t


def check(ours, eager, reference) -> str:
    """Ours and eager PyTorch against the f32 reference (see the module's docstring); raises if ours is off."""
    def rel(t):
        return ((t.float() - reference).norm() / reference.norm()).item()
    e_ours, e_eager = rel(ours), rel(eager)
    line = f"relative error against the block in f32: tessera {e_ours:.2e}, torch eager {e_eager:.2e}"
    if not (e_ours <= 2e-2 and e_ours <= 3 * e_eager + 1e-3):
        raise SystemExit(f"transformer block: results differ from PyTorch's: {line}")
    return line


def profile(name: str, fn, wait, rows: int = 14) -> None:
    """Prints the GPU time of each kernel over three calls of `fn` (torch.profiler), per call, and the wall
    time the kernels leave uncovered."""
    import time

    from torch.profiler import ProfilerActivity, profile as torch_profile
    fn(), wait()
    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        for _ in range(3):
            fn()
        wait()
        wall = (time.perf_counter() - t0) / 3
    events = [e for e in prof.key_averages() if e.device_type.name == "CUDA" and e.self_device_time_total > 0]
    events.sort(key=lambda e: -e.self_device_time_total)
    busy = sum(e.self_device_time_total for e in events) / 3e3
    print(f"--- {name}: wall {wall * 1e3:.3f} ms a call (profiled), kernels {busy:.3f} ms, "
          f"uncovered {wall * 1e3 - busy:.3f} ms")
    for e in events[:rows]:
        print(f"  {e.self_device_time_total / 3e3:8.3f} ms  x{e.count // 3:<3} {e.key[:100]}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--image", help="the sm_90a image built beforehand with --build-image (for the same --shape)")
    p.add_argument("--build-image", metavar="PATH", help="only write the sm_90a image to PATH")
    p.add_argument("--shape", help="B,S,D (default 4,2048,4096; with --cpu 2,64,256)")
    p.add_argument("--cpu", action="store_true", help="only the check, on the CPU image against PyTorch on the CPU")
    p.add_argument("--profile", action="store_true", help="also print where each side's GPU time goes")
    p.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    args = parse_args(p)
    shape = tuple(int(x) for x in (args.shape or ("2,64,256" if args.cpu else "4,2048,4096")).split(","))
    if args.build_image:
        with open(args.build_image, "wb") as f:
            f.write(compile_program(shape, "ptx"))
        return

    import torch
    from tessera import executor, stream

    B, S, D = shape
    T = B * S
    device = "cpu" if args.cpu else "cuda"
    if args.cpu:
        prog, ctx = executor.load(compile_program(shape, "cpu")), None
    else:
        ctx = cuda_context()
        if args.image:
            with open(args.image, "rb") as f:
                data = f.read()
        else:
            data = compile_program(shape, "ptx")
        prog = executor.load(data, ctx)
    fn = prog.function("block")
    params = inputs(B, S, D, device)
    eager = torch_block(B, S)
    print(f"transformer block bf16: B={B} S={S} D={D} ({D // HEAD} heads of {HEAD}, MLP {4 * D}), T={T}, causal")

    with torch.no_grad():
        reference = eager(*(t.float() for t in params))
        theirs_out = eager(*params)
    if args.cpu:   # the executor takes numpy on the CPU: bf16 as float32 values
        host = [t.float().numpy() for t in params]
        print(check(as_torch(fn(*host), params[0]), theirs_out, reference))
        return
    s = stream.new(context=ctx)
    torch.cuda.synchronize()
    ours_out = as_torch(fn(*params, stream=s), params[0])
    s.synchronize()
    print(check(ours_out, theirs_out, reference))
    del reference

    def ours():
        fn(*params, stream=s)

    sides = {"tessera": (ours, s.synchronize),
             "torch eager": (lambda: eager(*params), torch.cuda.synchronize)}
    if not args.no_compile:
        compiled = torch.compile(eager)
        with torch.no_grad():
            out = compiled(*params)
        torch.cuda.synchronize()
        print("torch.compile: " + check(out, theirs_out, eager(*(t.float() for t in params))).split(": ", 1)[1])
        sides["torch.compile"] = (lambda: compiled(*params), torch.cuda.synchronize)
    with torch.no_grad():
        rounds = {}
        best = interleaved_best(sides, PAIRED_ROUNDS, rounds_out=rounds)
        if args.profile:
            for name, (call, wait) in sides.items():
                profile(name, call, wait)
    flops = 24.0 * T * D * D + 2.0 * B * S * S * D
    times = {n: best[n] for n in sides}
    if "torch.compile" in times:   # the row's ratio (its first peer) is the issue's: against torch.compile
        times = {"tessera": times["tessera"], "torch.compile": times["torch.compile"],
                 "torch eager": times["torch eager"]}
    r = record_row(f"transformer block {B}x{S}x{D}", times, "TFLOP/s", flops / 1e12, shape=(B, S, D), dtype="bf16",
                   rounds=rounds)
    for side in (r["ours"], *r["peers"]):
        ratio = f"   ratio (its time / tessera's) {side['ratio']:.3f}" + paired_text(side) if "ratio" in side else ""
        print(f"{side['name']:<14} {side['time_s'] * 1e3:8.3f} ms  {side['throughput']:7.1f} TFLOP/s{ratio}")


if __name__ == "__main__":
    sys.exit(main())
