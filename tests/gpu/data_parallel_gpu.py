"""A data-parallel training step on GPUs (test_data_parallel_gpu.py): the program, its inputs, and one rank.

The step is tests/unit/data_parallel_worker.py's (value_and_grad of an MLP's mean squared error on the rank's
rows of the batch, a mean all_reduce of each gradient over the mesh's data axis, SGD) with its two products
multiplying bf16 (the f32 master weights cast, f32 results: the ptx GEMMs take no f32 operands), at sizes the
GEMMs tile (each rank's T rows a multiple of 64). `step` lets NCCL reduce (algo auto: on a stream its buckets
run on the call's communication stream, overlapping the backward), `step_det` reduces in the interpreter's tree
order (on the host), `step_whole` is one GPU's step on the whole batch, `grads` the backward alone, `reduce`
the step's bucketed all_reduces alone. Compiled for each world of WORLDS (the mesh's size is the program's;
each rank has T / world rows) and for sm_80 and sm_90a.

    python data_parallel_gpu.py IMAGE OUT     # one rank, started by tessera-run -n N --backend nccl
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
import data_parallel_worker as W  # noqa: E402
from kernels import _bf16_gemms  # noqa: E402

WORLDS = (2, 4)
ARCHS = ("sm_80", "sm_90a")
T, D, F = 256, 128, 256   # the whole batch's rows (64 per rank at 4), model width, hidden width
LR = 0.5

REDUCE = '''

@function
def reduce(gW1: tensor[f32, {d}, {f}], gb1: tensor[f32, {f}], gW2: tensor[f32, {f}, {d}], gb2: tensor[f32, {d}]):
    return (op.all_reduce(gW1, mesh=mesh, op="mean"{how}), op.all_reduce(gb1, mesh=mesh, op="mean"{how}),
            op.all_reduce(gW2, mesh=mesh, op="mean"{how}), op.all_reduce(gb2, mesh=mesh, op="mean"{how}))
'''


def source(world: int) -> str:
    """The program over a mesh of `world` devices, its products multiplying bf16. Its 64 KiB buckets are two:
    the second layer's gradients (b2's, W2's: 128.5 KiB) reduced while the first's are computed."""
    how = ', bucket="64KiB"'
    return _bf16_gemms(W.program(world, D, F)) + REDUCE.format(d=D, f=F, how=how) + W.step("step", D, F, how) + \
        W.step("step_det", D, F, ", deterministic=True")


def image_name(world: int, arch: str) -> str:
    return f"data_parallel_gpu.n{world}.{arch}.tessera"


def whole() -> list[np.ndarray]:
    """The whole batch (X, Y) and the weights (W1, b1, W2, b2)."""
    rng = np.random.default_rng(11)
    return [rng.standard_normal((T, D)).astype(np.float32), rng.standard_normal((T, D)).astype(np.float32),
            (rng.standard_normal((D, F)) / 8).astype(np.float32), (rng.standard_normal(F) / 8).astype(np.float32),
            (rng.standard_normal((F, D)) / 12).astype(np.float32), (rng.standard_normal(D) / 12).astype(np.float32)]


def batch(world: int, rank: int) -> list[np.ndarray]:
    X, Y, *weights = whole()
    return [np.split(X, world)[rank], np.split(Y, world)[rank], *weights]


def build(out: str) -> None:
    """The test's images, one per world and arch, into `out` (tests/gpu/build_images.py)."""
    import tessera  # lazy: the compiler, where the images are built
    for world in WORLDS:
        for arch in ARCHS:
            with open(os.path.join(out, image_name(world, arch)), "wb") as f:
                f.write(tessera.compile(source(world), "data_parallel_gpu.py", target="ptx", arch=arch))
            print(f"{image_name(world, arch)} ({arch})")


def run(prog, c, s, world: int, rank: int) -> dict[str, np.ndarray]:
    """Every variant's results on this rank, as "<variant><i>" (a failure's message as "error:<variant>"):
    step and step_det on stream `s` and on the NULL stream, grads, and step_whole on the whole batch."""
    args, lr = batch(world, rank), np.float32(LR)
    results = {}
    for name, call in (("step_stream", lambda: prog.step(*args, lr, comm=c, stream=s)),
                       ("step", lambda: prog.step(*args, lr, comm=c)),
                       ("step_det_stream", lambda: prog.step_det(*args, lr, comm=c, stream=s)),
                       ("step_det", lambda: prog.step_det(*args, lr, comm=c)),
                       ("grads", lambda: prog.grads(*args[:6])),
                       ("whole", lambda: prog.step_whole(*whole(), lr))):
        try:
            for i, a in enumerate(call()):
                results[f"{name}{i}"] = np.asarray(a)
        except Exception as e:  # noqa: BLE001 — the test reports it
            results[f"error:{name}"] = np.array(f"{type(e).__name__}: {e}")
    return results


def main(image: str, out: str) -> None:
    from collectives_gpu import start_rank  # lazy: a rank's setup (imports the unit tests' collectives worker)
    ctx, c, prog = start_rank(image)
    from tessera import stream  # lazy: after start_rank chose the GPU
    np.savez(os.path.join(out, f"rank{c.rank}.npz"), **run(prog, c, stream.new(context=ctx), c.size, c.rank))
    c.close()


if __name__ == "__main__":
    main(*sys.argv[1:])
