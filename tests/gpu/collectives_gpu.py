"""Compiled collectives on GPUs (test_collectives_gpu.py): the program, its expected values, and one rank.

The program is test_collectives_mpi's (tests/unit/collectives_worker.py: every tdist op over a one-axis mesh and
both axes of a two-axis one) with its tensor-parallel MLP in bf16 (the ptx GEMMs take bf16, not f32): X·W1
column-sharded, gelu, rounded to bf16, ·W2 row-sharded, f32 partials, one deterministic all_reduce. It is
compiled for each world of WORLDS (the mesh's size is the program's) and for sm_80 and sm_90a (wgmma GEMMs).
The interpreter (which needs MLIR) does not run on the GPU machine, so `build` writes, beside the images, what
tessera.interpret gives each rank.

    python collectives_gpu.py IMAGE OUT     # one rank, started by tessera-run -n N --backend nccl
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
import collectives_worker as W  # noqa: E402

WORLDS = (2, 4)
ARCHS = ("sm_80", "sm_90a")
TM, DM, HM = 64, 64, 256   # the MLP's rows, width and hidden units (whole; each rank has HM / world, 64 at 4)
NAMES = W.FUNCTIONS + ("mlp", "mlp_partial")

MLP = f'''

@function
def mlp_partial(X: tensor[bf16, "T", {DM}], W1: dist.shard(tensor[bf16, {DM}, {HM}], mesh, axis="tp", dim=1),
                W2: dist.shard(tensor[bf16, {HM}, {DM}], mesh, axis="tp", dim=0)):
    H = op.cast(op.gelu(op.matmul(X, W1, out_dtype=f32)), bf16)
    return op.matmul(H, W2, out_dtype=f32)


@function
def mlp(X: tensor[bf16, "T", {DM}], W1: dist.shard(tensor[bf16, {DM}, {HM}], mesh, axis="tp", dim=1),
        W2: dist.shard(tensor[bf16, {HM}, {DM}], mesh, axis="tp", dim=0)):
    return op.all_reduce(mlp_partial(X, W1, W2), mesh=mesh, deterministic=True)
'''


def source(world: int) -> str:
    """collectives_worker's program for `world` devices without its f32 MLP, and the bf16 one."""
    collectives = W.source(world).split("\n\n@function\ndef mlp(")[0]
    return collectives + MLP


def image_name(world: int, arch: str) -> str:
    return f"collectives_gpu.n{world}.{arch}.tessera"


def expected_name(world: int) -> str:
    return f"collectives_gpu.n{world}.expected.npz"


def mlp_inputs() -> list[np.ndarray]:
    """X, W1, W2 whole, as bf16 values in float32 (every rank has X and slices the weights)."""
    from tessera.numerics.rounding import round_to  # lazy: numpy only, but not needed to import this module
    rng = np.random.default_rng(5)
    whole = [rng.standard_normal((TM, DM)), rng.standard_normal((DM, HM)) / 8, rng.standard_normal((HM, DM)) / 8]
    return [round_to(x.astype(np.float32), "bf16").astype(np.float32) for x in whole]


def args(world: int, rank: int, name: str) -> list[np.ndarray]:
    if name.startswith("mlp"):
        X, W1, W2 = mlp_inputs()
        return [X, W.shard(W1, world, rank, 1), W.shard(W2, world, rank, 0)]
    return W.inputs(rank, name)


def expected(world: int) -> dict[str, np.ndarray]:
    """tessera.interpret's result of every collective on each of `world` ranks, as "<name>:<rank>" (needs the
    compiler)."""
    from tessera import tessera_frontend_compile  # lazy: the compiler, where the images are built
    module = tessera_frontend_compile(source(world), {"filename": "collectives_gpu.py"})
    out = {}
    for name in W.FUNCTIONS:
        for rank, value in enumerate(module.interpret(name, [args(world, r, name)[0] for r in range(world)],
                                                      world=world)):
            out[f"{name}:{rank}"] = np.asarray(value, np.float32)
    return out


def build(out: str) -> None:
    """The images (one per world and arch) and the interpreter's values (one file per world) into `out`
    (tests/gpu/build_images.py)."""
    import tessera  # lazy: the compiler, where the images are built
    for world in WORLDS:
        for arch in ARCHS:
            with open(os.path.join(out, image_name(world, arch)), "wb") as f:
                f.write(tessera.compile(source(world), "collectives_gpu.py", target="ptx", arch=arch))
            print(f"{image_name(world, arch)} ({arch})")
        np.savez(os.path.join(out, expected_name(world)), **expected(world))
        print(expected_name(world))


def start_rank(image: str):
    """This rank's CUDA context, NCCL communicator and loaded image (a rank tessera-run started)."""
    # Tessera's CUDA context drives GPU 0 of the process: this rank's GPU must be the only one it sees, before
    # CUDA starts (tessera-run leaves CUDA_VISIBLE_DEVICES as it was).
    local = int(os.environ["LOCAL_RANK"])
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = visible.split(",")[local].strip() if visible else str(local)
    from tessera import comm, executor, runtime  # lazy: after the GPU is chosen

    ctx = runtime.select_backend("cuda")
    c = comm.Communicator.from_env(backend="nccl", timeout=120, context=ctx)
    return ctx, c, executor.load(Path(image).read_bytes(), ctx)


def main(image: str, out: str) -> None:
    ctx, c, prog = start_rank(image)
    np.savez(os.path.join(out, f"rank{c.rank}.npz"),
             **W.call_all(prog, c, NAMES, lambda name: args(c.size, c.rank, name)))
    c.close()


if __name__ == "__main__":
    main(*sys.argv[1:])
