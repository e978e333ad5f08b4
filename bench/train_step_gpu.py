"""An MLP training step in bf16 on an NVIDIA Hopper GPU: Tessera's `sgd_step` (forward, MSE loss,
value_and_grad, SGD update: one @function, one image for sm_90a) against PyTorch eager (autograd, then the
update in place) of the same step, in the same process, on the same tensors.

    python bench/train_step_gpu.py [--image train_step.tessera] [--shape 8192,4096,16384]
    python bench/train_step_gpu.py --build-image train_step.tessera     # where the compiler is
    python bench/train_step_gpu.py --cpu [--shape 256,128,512]          # the same step on the CPU image

The step (T tokens, width D, hidden F): H = gelu(X·W1 + b1), E = H·W2 + b2 − Y, loss = mean(E²), then
W ← W − 0.1·∂loss/∂W for W1, b1, W2, b2. X, W1 and W2 are bf16, the GEMMs accumulate in f32 (wgmma), b1, b2, Y
and the loss are f32; the backward GEMMs multiply bf16 (docs/language.md, "Derivatives"). PyTorch's peer is
the usual bf16 step: the same tensors with requires_grad, its GEMMs cuBLAS's bf16 ones (bf16 results, which it
then adds the f32 biases to in f32); it clones the parameters first, as ours returns new ones (the copy of
W1 and W2, 256 MB, is some 2 % of its step). Both sides run 10 steps back to back from the same parameters, then wait;
10 interleaved rounds (9 rounded up to a multiple of the 2 sides), the order rotating (common.interleaved_rounds):
the throughput is each side's best round, and beside the ratio "paired M (LO-HI)" is the median and range of
the ratio taken round by round (common.paired_ratio). TFLOP/s count the step's GEMMs: 2·T·D·F each, two forward and three
backward (dW2, dH, dW1; X takes no gradient), 10·T·D·F in all. Before timing, one step of each is compared:
the loss (rtol 1e-2), the biases' updates (f32; within 5e-2 of their largest) and the updated weights (within
2^-7 of their largest: bf16 rounding of W − 0.1·g, where 0.1·g is far below W's last bit at this scale).

--cpu compiles the program for the CPU and compares it with PyTorch on the CPU the same way, at a small shape:
the check that the reference and the comparison are right, where there is no GPU.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import (PAIRED_ROUNDS, cuda_context, interleaved_best, machine, paired_text, parse_args,  # noqa: E402
                    record_row, torch_sgd)

PROGRAM = """
from tessera import bf16, f32, function, op, tensor, value_and_grad

@function
def loss(X: tensor[bf16, "T", "D"], Y: tensor[f32, "T", "D"], W1: tensor[bf16, "D", "F"], b1: tensor[f32, "F"],
         W2: tensor[bf16, "F", "D"], b2: tensor[f32, "D"]):
    H = op.gelu(op.bias_add(op.matmul(X, W1, out_dtype=f32), b1))
    E = op.bias_add(op.matmul(op.cast(H, bf16), W2, out_dtype=f32), b2) - Y
    return op.mean(E * E)

loss_and_grads = value_and_grad(loss, argnums=(2, 3, 4, 5))

@function
def sgd_step(X: tensor[bf16, "T", "D"], Y: tensor[f32, "T", "D"], W1: tensor[bf16, "D", "F"], b1: tensor[f32, "F"],
             W2: tensor[bf16, "F", "D"], b2: tensor[f32, "D"]):
    value, gW1, gb1, gW2, gb2 = loss_and_grads(X, Y, W1, b1, W2, b2)
    return value, W1 - 0.1 * gW1, b1 - 0.1 * gb1, W2 - 0.1 * gW2, b2 - 0.1 * gb2
"""
LR = 0.1


def compile_program(target: str) -> bytes:
    import tessera
    if target == "cpu":
        return tessera.compile(PROGRAM, "train_step_gpu.py")
    return tessera.compile(PROGRAM, "train_step_gpu.py", target="ptx", arch="sm_90a")


def inputs(T: int, D: int, F: int, device: str):
    """X, Y, W1, b1, W2, b2 as torch tensors on `device`: a regression of a fixed function of X."""
    import torch
    g = torch.Generator(device="cpu").manual_seed(0)
    X = torch.randn(T, D, generator=g)
    Y = torch.tanh(X * torch.roll(X, 1, dims=1))
    W1, W2 = torch.randn(D, F, generator=g) / D ** 0.5, torch.randn(F, D, generator=g) / F ** 0.5
    bf = torch.bfloat16
    return [t.to(device) for t in (X.to(bf), Y, W1.to(bf), torch.zeros(F), W2.to(bf), torch.zeros(D))]


def torch_step(X, Y, W1, b1, W2, b2):
    """PyTorch eager's bf16 step: new parameters (the inputs untouched), the loss."""
    import torch
    W1, b1, W2, b2 = (p.detach().clone().requires_grad_() for p in (W1, b1, W2, b2))
    H = torch.nn.functional.gelu((X @ W1).float() + b1)
    E = (H.to(torch.bfloat16) @ W2).float() + b2 - Y
    return torch_sgd((E * E).mean(), (W1, b1, W2, b2), LR)


def as_torch(x, like):
    """A result of ours (a DeviceArray, bf16 as its bit patterns, or a numpy array) as a torch tensor of
    `like`'s dtype and device."""
    import numpy as np
    import torch
    if isinstance(x, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(x)).to(like.dtype).to(like.device)
    t = torch.from_dlpack(x)
    return t.view(torch.bfloat16) if like.dtype == torch.bfloat16 and t.dtype != torch.bfloat16 else t


def check(ours, theirs, params) -> None:
    """One step of each from the same parameters agrees (see the module's docstring for the tolerances)."""
    import torch
    ours = [as_torch(o, t) for o, t in zip(ours, theirs)]
    torch.testing.assert_close(ours[0].float().reshape(()), theirs[0].float(), rtol=1e-2, atol=0)
    for o, t, p in zip(ours[1:], theirs[1:], params):
        o, t, p = o.float(), t.float(), p.float()
        if o.ndim == 1:   # the f32 biases: their update itself
            torch.testing.assert_close(o - p, t - p, rtol=0, atol=5e-2 * (t - p).abs().max().item())
        else:
            torch.testing.assert_close(o, t, rtol=0, atol=2 ** -7 * t.abs().max().item())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--image", help="the sm_90a image built beforehand with --build-image")
    p.add_argument("--build-image", metavar="PATH", help="only write the sm_90a image to PATH")
    p.add_argument("--shape", help="T,D,F (default 8192,4096,16384; with --cpu 256,128,512)")
    p.add_argument("--cpu", action="store_true", help="the CPU image against PyTorch on the CPU")
    args = parse_args(p)
    if args.build_image:
        with open(args.build_image, "wb") as f:
            f.write(compile_program("ptx"))
        return

    import torch
    from tessera import executor, stream

    T, D, F = (int(x) for x in (args.shape or ("256,128,512" if args.cpu else "8192,4096,16384")).split(","))
    if args.cpu:
        print(f"CPU: {machine()}; PyTorch {torch.__version__}")
        prog, device, ctx = executor.load(compile_program("cpu")), "cpu", None
    else:
        ctx = cuda_context()
        if args.image:
            with open(args.image, "rb") as f:
                data = f.read()
        else:
            data = compile_program("ptx")
        prog, device = executor.load(data, ctx), "cuda"
    step = prog.function("sgd_step")
    params = inputs(T, D, F, device)
    print(f"MLP training step: T={T} D={D} F={F}, bf16 GEMMs")

    if args.cpu:
        # the executor takes numpy on the CPU: bf16 as float32 values
        host = [t.float().numpy() for t in params]
        ours_once = step(*host)
        s, wait = None, (lambda: None)

        def ours():
            step(*host)
    else:
        torch.cuda.synchronize()
        s = stream.new(context=ctx)
        ours_once = step(*params, stream=s)
        s.synchronize()
        wait = s.synchronize

        def ours():
            step(*params, stream=s)
    check(ours_once, torch_step(*params), params[2:])
    print("one step agrees with PyTorch's (loss rtol 1e-2, biases' updates 5e-2, weights 2^-7 of their largest)")

    def theirs():
        torch_step(*params)

    sides = {"tessera": (ours, wait),
             "torch eager": (theirs, torch.cuda.synchronize if device == "cuda" else (lambda: None))}
    rounds = {}
    best = interleaved_best(sides, PAIRED_ROUNDS, rounds_out=rounds)
    flops = 10.0 * T * D * F
    unit, scale = ("TFLOP/s", 1e12) if device == "cuda" else ("GFLOP/s", 1e9)
    r = record_row(f"mlp train step {T}x{D}x{F}", best, unit, flops / scale, shape=(T, D, F), dtype="bf16",
                   rounds=rounds)
    (t_ours, f_ours), (t_torch, f_torch) = ((s["time_s"], s["throughput"]) for s in (r["ours"], *r["peers"]))
    print(f"tessera      {t_ours * 1e3:9.3f} ms/step  {f_ours:8.1f} {unit}")
    print(f"torch eager  {t_torch * 1e3:9.3f} ms/step  {f_torch:8.1f} {unit}"
          f"   ratio (torch time / tessera time) {r['ratio']:.3f}" + paired_text(r["peers"][0]))


if __name__ == "__main__":
    sys.exit(main())
