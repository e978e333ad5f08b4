"""A tensor-parallel MLP across GPUs, weak scaling (issue 16): Y = all_reduce(gelu(X·W1) · W2) in bf16, W1
column-sharded and W2 row-sharded over the ranks (dist.shard), one all_reduce of the [T, D] partial products,
against torch's equivalent (the same matmuls, gelu and torch.distributed's all_reduce over NCCL) in the same
processes, on the same tensors. One process per GPU:

    python bench/tp_mlp_gpu.py --build-image tp_images [--chunks 1,4]   # where the compiler is: per N, chunks
    tessera-run -n 2 --backend nccl bench/tp_mlp_gpu.py --image tp_images [--chunks 1,4]
    tessera-run -n 2 bench/tp_mlp_gpu.py --cpu                     # the same on the CPU through MPI, small

Weak scaling: every rank holds an [D, F] column block of W1 and an [F, D] row block of W2 whatever the number
of GPUs N (the whole hidden width is F·N), so each GPU's GEMM work, 4·T·D·F flops, is the same at every N, and
only the all_reduce grows. In one launch of N ranks both steps are timed: the 1-GPU step (each rank alone, on
its GPU, with a communicator of itself: the image for a mesh of one device, whose all_reduce is a copy; torch's
without an all_reduce) and the N-GPU step; efficiency = t1 / tN, for each side (and, "best t1/tN", against the launch's best Tessera t1).
Each step's result is checked
against torch's once (within 2^-5 of its largest: bf16 partials, summed in bf16 by either side's NCCL).
--chunks 1,4 times two Tessera sides: the all_reduce whole after the second GEMM, and the MLP in four row chunks
(tessera-pipeline-collectives: each chunk's first GEMM, gelu and second GEMM on its rows, then its all_reduce on
the communication stream while the next chunk computes). With TESSERA_COMM_UNITS=16 in the environment NCCL
takes at most 16 SMs and the GEMMs launched while a chunk is reduced leave up to those free, as many as cost them
no round of tiles, and the last chunk's all_reduce (no GEMM beside it) runs uncapped (comm.h, units): without it
the persistent GEMM holds every SM. --units 0,4,16 adds, for each chunk count, an N-GPU side whose communicator
has that many units (a communicator of its own, created with units=; 0: the launch's default), its efficiency
against the same chunk count's one-GPU step (units change nothing without peers).

Method: each side's step is called --iters times back to back between two device synchronizations, after a
barrier; a round's time is the slowest rank's; the best of --rounds rounds counts, after --warm untimed calls of
each side, the order of the sides rotating by one each round (as common.interleaved_best, which a multi-rank
step cannot use: its warm-up runs for a time, a count that may differ between ranks). --chunks 4,6:6:3:1: uneven
chunks of those weights (collective_chunks=(6, 6, 3, 1)), image files ...c6-6-3-1.tessera. Rank
r drives GPU LOCAL_RANK (CUDA_VISIBLE_DEVICES narrowed before CUDA starts) and NCCL_NVLS_ENABLE=0 (set on
import of allreduce_gpu, before either side starts NCCL).
"""

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from allreduce_gpu import fail, free_port, launched  # noqa: E402  (sets NCCL_NVLS_ENABLE=0)
from common import machine, parse_args as parse_with_json, record_row, set_gpu_machine  # noqa: E402
from train_step_gpu import as_torch  # noqa: E402


def program(world: int, f_shard: int) -> str:
    """The MLP over a mesh of `world` devices, each holding `f_shard` of the hidden units (T, D symbolic)."""
    return f'''
from tessera import bf16, dist, f32, function, op, tensor

mesh = dist.Mesh(axes=["tp"], devices=range({world}))


@function
def tp_mlp(X: tensor[bf16, "T", "D"], W1: dist.shard(tensor[bf16, "D", {f_shard * world}], mesh, axis="tp", dim=1),
           W2: dist.shard(tensor[bf16, {f_shard * world}, "D"], mesh, axis="tp", dim=0)):
    H = op.cast(op.gelu(op.matmul(X, W1, out_dtype=f32)), bf16)
    return op.all_reduce(op.matmul(H, W2), mesh=mesh)
'''


def compile_image(world: int, f_shard: int, cpu: bool, chunks) -> bytes:
    """`chunks`: the all_reduce's row chunks (collective_chunks; 0: the target's default, 4 on ptx; a tuple of
    weights: uneven chunks)."""
    import tessera  # lazy: the compiler is needed only where the image is built
    if cpu:
        return tessera.compile(program(world, f_shard), "tp_mlp_gpu.py", collective_chunks=chunks)
    return tessera.compile(program(world, f_shard), "tp_mlp_gpu.py", target="ptx", arch="sm_90a",
                           collective_chunks=chunks)


def chunks_name(chunks) -> str:
    """A --chunks entry as written: a count, or weights joined by ':'."""
    return ":".join(map(str, chunks)) if isinstance(chunks, tuple) else str(chunks)


def image_file(folder: str, world: int, f_shard: int, chunks) -> str:
    return os.path.join(folder, f"tp_mlp.n{world}.f{f_shard}.c{chunks_name(chunks).replace(':', '-')}.tessera")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--image", metavar="DIR", help="the sm_90a images built beforehand with --build-image DIR")
    p.add_argument("--build-image", metavar="DIR", help="only write the sm_90a images (one per N of --worlds)")
    p.add_argument("--worlds", default="1,2,4,8", help="with --build-image: the N to build for (default 1,2,4,8)")
    p.add_argument("--shape", help="T,D,F: tokens, width, hidden units per GPU (default 8192,4096,8192; with "
                                   "--cpu 128,64,128)")
    p.add_argument("--chunks", default="0", help="comma-separated collective_chunks to compare, each a Tessera side "
                                                 "(0: the target's default, 4 on ptx; 1: one whole all_reduce after "
                                                 "the GEMM; weights joined by ':', 6:6:3:1, uneven chunks); default 0")
    p.add_argument("--units", default="0", help="comma-separated communicator units for the N-GPU Tessera sides "
                                                "(0: the launch's communicator, TESSERA_COMM_UNITS or none); "
                                                "default 0")
    p.add_argument("--cpu", action="store_true", help="CPU images through MPI (tessera-run -n N without --backend)")
    p.add_argument("--iters", type=int, default=10, help="timed steps per round (default 10)")
    p.add_argument("--rounds", type=int, default=5, help="timings per side, the order rotating by one side each "
                                                         "round; the best counts")
    p.add_argument("--warm", type=int, default=100, help="untimed calls of each side before the rounds (default 100)")
    args = parse_with_json(p)
    args.T, args.D, args.F = (int(x) for x in (args.shape or ("128,64,128" if args.cpu else "8192,4096,8192"))
                              .split(","))
    try:
        args.chunks = [int(c) if ":" not in c else tuple(int(w) for w in c.split(":")) for c in args.chunks.split(",")]
    except ValueError:
        p.error(f"--chunks: counts or weights joined by ':', comma-separated, not {args.chunks!r}")
    args.units = [int(u) for u in args.units.split(",")]
    if min(args.iters, args.rounds) < 1 or min(min(c) if isinstance(c, tuple) else c for c in args.chunks) < 0 or \
            min(w for c in args.chunks if isinstance(c, tuple) for w in (*c, 1)) < 1 or min(args.units) < 0:
        p.error("--iters and --rounds must be at least 1, --chunks and --units at least 0, weights at least 1")
    return args


def main() -> int:
    args = parse_args()
    if args.build_image:
        os.makedirs(args.build_image, exist_ok=True)
        for n in (int(w) for w in args.worlds.split(",")):
            for k in args.chunks:
                path = image_file(args.build_image, n, args.F, k)
                with open(path, "wb") as f:
                    f.write(compile_image(n, args.F, False, k))
                print(path)
        return 0
    if not args.cpu:
        launched()   # before CUDA starts: this rank's GPU only
    try:
        import torch  # lazy: before Tessera looks for a libnccl, so both use PyTorch's
        import torch.distributed as dist
        import torch.nn.functional as tf
    except ImportError as e:
        fail(f"PyTorch is needed for the torch peer: {e}")
    from tessera import comm, executor, runtime, stream  # lazy: after the GPU is chosen

    if args.cpu:
        ctx, device, backend = None, "cpu", "mpi"
    else:
        if not torch.cuda.is_available():
            fail(f"PyTorch sees no GPU (CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']})")
        ctx, device, backend = runtime.select_backend("cuda"), "cuda", "nccl"
        torch.cuda.set_device(0)
    world_comm = comm.Communicator.from_env(backend=backend, timeout=300, context=ctx)
    rank, world = world_comm.rank, world_comm.size
    # N=1: each rank alone, on a communicator of itself
    comms = {1: world_comm.split(color=rank) if world > 1 else world_comm, world: world_comm}
    # the N-GPU communicators with units of their own (--units), on an id rank 0 makes and sends
    unit_comms = {}
    for u in (u for u in args.units if u and world > 1):
        uid = np.frombuffer(comm.unique_id(backend, ctx), np.uint8).copy() if rank == 0 else \
            np.zeros(len(comm.unique_id(backend, ctx)), np.uint8)
        uid = world_comm.broadcast(uid if args.cpu else runtime.DeviceArray.from_numpy(uid, ctx))
        uid = (uid if args.cpu else uid.numpy()).tobytes()
        unit_comms[u] = comm.Communicator.create(world, rank, uid, backend=backend, timeout=300, context=ctx, units=u)
    programs = {}   # (N, chunks) -> the function
    for n in comms:
        for k in args.chunks:
            if args.image:
                path = image_file(args.image, n, args.F, k)
                if not os.path.exists(path):
                    fail(f"no {path}: build it with --build-image {args.image} --worlds {n} --chunks {chunks_name(k)} (and the "
                         f"same --shape F)")
                data = open(path, "rb").read()
            else:
                data = compile_image(n, args.F, args.cpu, k)
            programs[n, k] = executor.load(data, ctx).function("tp_mlp")
    # torch's store on a port rank 0 picks and sends over Tessera's communicator (TESSERA_RENDEZVOUS's port served
    # Tessera's ids and may still be held)
    port = np.array([free_port() if rank == 0 else 0], np.int64)
    port = world_comm.broadcast(port if args.cpu else runtime.DeviceArray.from_numpy(port, ctx))
    port = int((port if args.cpu else port.numpy())[0])
    host = os.environ.get("TESSERA_RENDEZVOUS", "127.0.0.1:0").rsplit(":", 1)[0]
    dist.init_process_group("gloo" if args.cpu else "nccl", init_method=f"tcp://{host}:{port}", rank=rank,
                            world_size=world)

    T, D, F = args.T, args.D, args.F
    g = torch.Generator().manual_seed(0)
    X = torch.randn(T, D, generator=g).to(torch.bfloat16)   # the same on every rank
    g.manual_seed(1 + rank)                                  # this rank's blocks of W1 and W2
    W1 = (torch.randn(D, F, generator=g) / D ** 0.5).to(torch.bfloat16)
    W2 = (torch.randn(F, D, generator=g) / (F * world) ** 0.5).to(torch.bfloat16)
    X, W1, W2 = (t.to(device) for t in (X, W1, W2))
    if args.cpu:   # the executor takes numpy on the CPU: bf16 as float32 values
        ours_args, s = [t.float().numpy() for t in (X, W1, W2)], None
        sync = (lambda: None)
    else:
        ours_args, s = (X, W1, W2), stream.new(context=ctx)
        sync = s.synchronize
        torch.cuda.synchronize()
    torch_sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def theirs(n: int):
        Y = tf.gelu(X @ W1) @ W2
        if n > 1:
            dist.all_reduce(Y)
        return Y

    def slowest(t: float) -> float:
        x = torch.tensor([t], dtype=torch.float64, device=device)
        dist.all_reduce(x, op=dist.ReduceOp.MAX)
        return x.item()

    def timed(call, wait) -> float:
        call(), wait()
        dist.barrier(**({"device_ids": [0]} if device == "cuda" else {}))   # start together
        t0 = time.perf_counter()
        for _ in range(args.iters):
            call()
        wait()
        return slowest((time.perf_counter() - t0) / args.iters)

    flops = 4.0 * T * D * F
    unit, scale = ("TFLOP/s", 1e12) if device == "cuda" else ("GFLOP/s", 1e9)
    if rank == 0:
        if ctx:
            set_gpu_machine(ctx.properties["name"], ctx.properties["arch"], ctx.properties["compute_units"], world)
        where = f"one {ctx.properties['name']} each, PyTorch {torch.__version__}, NCCL_NVLS_ENABLE=0" if ctx \
            else f"CPU: {machine()}, PyTorch {torch.__version__} (gloo), Tessera over MPI"
        print(f"tensor-parallel MLP, weak scaling: T={T} D={D}, F={F} hidden units per GPU (F*N in all), bf16; "
              f"{world} rank(s), {where}")
        print(f"best of {args.rounds} rounds of {args.iters} steps, the slowest rank's time; per-GPU {unit} count "
              f"4*T*D*F")
        print(f"{'N':>3} {'side':<24} {'ms/step':>9} {unit + '/GPU':>12} {'eff t1/tN':>10} {'best t1/tN':>11} {'torch/ours':>11}")
    best = {}   # N -> side -> seconds per step
    for n in comms:
        sides = {"torch": (lambda n=n: theirs(n), torch_sync)}
        for k in args.chunks:
            run = programs[n, k]
            ours_once = run(*ours_args, comm=comms[n], stream=s)
            sync()
            ref = theirs(n)
            got, want = as_torch(ours_once, ref).float(), ref.float()
            err = (got - want).abs().max().item()
            if not err <= 2 ** -5 * want.abs().max().item():
                fail(f"N={n}, chunks={chunks_name(k)}: the result differs from torch's by {err} (largest "
                     f"{want.abs().max().item()})")
            sides[f"tessera c={chunks_name(k)}"] = (lambda n=n, run=run: run(*ours_args, comm=comms[n], stream=s), sync)
            for u, cu in (unit_comms.items() if n > 1 else ()):
                out = run(*ours_args, comm=cu, stream=s)
                sync()
                got = as_torch(out, ref).float()
                if not (got - want).abs().max().item() <= 2 ** -5 * want.abs().max().item():
                    fail(f"N={n}, chunks={chunks_name(k)}, units={u}: the result differs from torch's")
                sides[f"tessera c={chunks_name(k)} u={u}"] = (lambda run=run, cu=cu: run(*ours_args, comm=cu, stream=s), sync)
        times = {k: float("inf") for k in sides}
        names = list(sides)
        for name in names:   # warm (GPU clocks settle under load): a fixed count, the same on every rank
            for _ in range(args.warm):
                sides[name][0]()
            sides[name][1]()
        for r in range(args.rounds):   # the order rotates by one side each round (as common.interleaved_best)
            for name in names[r % len(names):] + names[:r % len(names)]:
                call, wait = sides[name]
                times[name] = min(times[name], timed(call, wait))
        best[n] = times
    if rank == 0:
        for n, times in best.items():
            ours_first = {name: times[name] for name in sorted(times, key=lambda name: name == "torch")}
            r = record_row(f"tensor-parallel mlp N={n}", ours_first, unit, flops / scale, shape=(T, D, F),
                           dtype="bf16", note="weak scaling: F hidden units per GPU; per-GPU throughput")
            for side in (r["ours"], *r["peers"]):
                name, sec = side["name"], side["time_s"]
                eff = f"{best[1][name.split(' u=')[0]] / sec:10.3f}"   # a units side: its chunks' t1
                # against the launch's best Tessera one-GPU step (torch's against its own)
                t1 = best[1]["torch"] if name == "torch" else min(t for k, t in best[1].items() if k != "torch")
                eff_best = f"{t1 / sec:11.3f}"
                ratio = f"{times['torch'] / sec:10.3f}x" if name != "torch" else ""
                print(f"{n:>3} {name:<24} {sec * 1e3:9.3f} {side['throughput']:12.1f} {eff} {eff_best} {ratio:>11}", flush=True)
    dist.destroy_process_group()
    for c in {id(c): c for c in [*comms.values(), *unit_comms.values()]}.values():
        c.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
