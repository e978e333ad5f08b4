"""All-reduce between GPUs over NCCL (issue 16): Tessera's communicator (tessera.comm, NCCL backend, DeviceArray
buffers, queued on a Tessera stream; and the deterministic mode, TSR_COMM_DETERMINISTIC, as its own row) against
torch.distributed's all_reduce (ProcessGroupNCCL), in the same processes, on the same GPUs, bf16 and f32 sums of
1 MiB to 1 GiB. One process per GPU:

    tessera-run -n 2 --backend nccl bench/allreduce_gpu.py             # 2 GPUs
    tessera-run -n 4 --backend nccl bench/allreduce_gpu.py             # 4 GPUs
    tessera-run -n 2 --backend nccl bench/allreduce_gpu.py --sizes-mib 1024 --dtypes bf16

Rank r drives GPU LOCAL_RANK (the script narrows CUDA_VISIBLE_DEVICES to it before CUDA starts, as Tessera's
CUDA context drives its process's GPU 0). NCCL_NVLS_ENABLE=0 (no NVLink multicast) is set before either side
starts NCCL, so both run the same NCCL algorithms; torch is imported first, so both use PyTorch's libnccl
(Tessera takes a libnccl.so.2 already loaded; $TESSERA_NCCL_LIBRARY overrides), and the script prints which
files are mapped.

Method (nccl-tests'): each side's result is checked once per size and dtype (rank r contributes r + 1 + (i mod 8),
so every rank knows the exact sum), then `--warmup` calls, then `--iters` in-place calls back to back (torch's
all_reduce is in place) between two device synchronizations, timed on the host; the time per call is averaged
over the ranks (nccl-tests' default) and the best of `--rounds` rounds is kept, the sides alternating each round.
algbw = bytes / time, busbw = algbw · 2(n−1)/n (GB/s, 10^9). Rank 0 prints the GPUs, a row per size, dtype and
side, and Tessera's busbw over torch's.
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import parse_args as parse_with_json, record_row, set_gpu_machine  # noqa: E402

from tessera import comm, runtime, stream  # noqa: E402

# Before anything can start NCCL (torch's process group, Tessera's communicator): no NVLink multicast.
os.environ["NCCL_NVLS_ENABLE"] = "0"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes-mib", default="1,4,16,64,256,1024",
                   help="buffer sizes in MiB, comma-separated (default 1,4,16,64,256,1024)")
    p.add_argument("--dtypes", default="bf16,f32", help="bf16, f32 or both (default)")
    p.add_argument("--warmup", type=int, default=5, help="untimed calls before each timing (default 5)")
    p.add_argument("--iters", type=int, default=20, help="timed calls per round (default 20)")
    p.add_argument("--rounds", type=int, default=3, help="timings per side, alternating; the best is kept")
    p.add_argument("--det-iters", type=int, default=3,
                   help="timed calls of the deterministic mode per round (it gathers every rank's buffer and "
                        "combines on the host: slow; default 3); 0 leaves its rows out")
    p.add_argument("--timeout", type=float, default=300, help="the Tessera communicators' timeout, seconds")
    args = parse_with_json(p)
    args.sizes = [int(s) for s in args.sizes_mib.split(",")]
    args.dtypes = args.dtypes.split(",")
    if not args.sizes or min(args.sizes) < 1:
        p.error(f"--sizes-mib takes positive integers, got {args.sizes_mib!r}")
    if not set(args.dtypes) <= {"bf16", "f32"}:
        p.error(f"--dtypes takes bf16 and/or f32, got {','.join(args.dtypes)!r}")
    if min(args.warmup, args.det_iters) < 0 or min(args.iters, args.rounds) < 1:
        p.error("--iters and --rounds must be at least 1, --warmup and --det-iters at least 0")
    return args


def fail(message: str) -> None:
    rank = os.environ.get("RANK", "?")
    print(f"{os.path.basename(sys.argv[0])} (rank {rank}): {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def launched():
    """(rank, world size, local rank) from tessera-run's environment; narrows CUDA_VISIBLE_DEVICES to this rank's
    GPU (the LOCAL_RANK-th of those visible) before CUDA starts."""
    missing = [v for v in ("RANK", "WORLD_SIZE", "TESSERA_RENDEZVOUS") if v not in os.environ]
    if missing:
        fail(f"{', '.join(missing)} not set: start it with `tessera-run -n N --backend nccl {sys.argv[0]}`, "
             f"one rank per GPU")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        devices = [d.strip() for d in visible.split(",") if d.strip()]
        if local >= len(devices):
            fail(f"LOCAL_RANK={local} but CUDA_VISIBLE_DEVICES={visible!r} shows {len(devices)} GPU(s): one GPU "
                 f"per rank is needed")
        os.environ["CUDA_VISIBLE_DEVICES"] = devices[local]
    else:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(local)
    return rank, world, local


def nccl_files() -> list[str]:
    """The libnccl files mapped into this process (one, if Tessera shares PyTorch's)."""
    with open("/proc/self/maps") as f:
        return sorted({line.split(None, 5)[5].strip() for line in f
                       if len(line.split(None, 5)) == 6 and "libnccl" in line})


def main() -> int:
    args = parse_args()
    rank, world, _ = launched()
    try:
        import torch  # lazy: loads PyTorch's libnccl before Tessera looks for one
        import torch.distributed as dist
    except ImportError as e:
        fail(f"PyTorch with CUDA is needed for the torch.distributed peer: {e}")
    if not torch.cuda.is_available():
        fail(f"PyTorch sees no GPU (CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']}; torch "
             f"{torch.__version__}, CUDA {torch.version.cuda})")
    try:
        ctx = runtime.select_backend("cuda")
    except runtime.Error as e:
        fail(f"Tessera has no CUDA context here: {e}")
    try:
        native = comm.Communicator.from_env(backend="nccl", timeout=args.timeout, context=ctx)
        det = comm.Communicator.from_env(backend="nccl", deterministic=True, timeout=args.timeout, context=ctx) \
            if args.det_iters else None
    except runtime.Error as e:
        fail(f"Tessera's NCCL communicator: {e}")
    s = stream.new(context=ctx)
    torch.cuda.set_device(0)
    # torch's store on a port rank 0 picks now and sends over Tessera's communicator: TESSERA_RENDEZVOUS's port
    # served Tessera's ids and may still be held.
    port = np.array([free_port() if rank == 0 else 0], np.int64)
    port = native.broadcast(runtime.DeviceArray.from_numpy(port, ctx)).numpy()
    host = os.environ["TESSERA_RENDEZVOUS"].rsplit(":", 1)[0]
    dist.init_process_group("nccl", init_method=f"tcp://{host}:{int(port[0])}", rank=rank, world_size=world)
    if rank == 0:
        set_gpu_machine(ctx.properties["name"], ctx.properties["arch"], ctx.properties["compute_units"], world)
        version = torch.cuda.nccl.version()  # a tuple; an int before PyTorch 1.13
        version = ".".join(map(str, version)) if isinstance(version, tuple) else str(version)
        print(f"{world} x {ctx.properties['name']} (one GPU per rank); PyTorch {torch.__version__}, CUDA "
              f"{torch.version.cuda}, NCCL {version} (PyTorch's); NCCL_NVLS_ENABLE=0")
        print(f"libnccl mapped (rank 0): {', '.join(nccl_files()) or 'none'}")
        print(f"in place, {args.iters} calls per timing after {args.warmup} ({args.det_iters} after 1 "
              f"deterministic), best of {args.rounds}; time averaged over the ranks; busbw = algbw * 2(n-1)/n")
        print(f"{'size':>9} {'dtype':>5} {'side':<22} {'time us':>11} {'algbw GB/s':>11} {'busbw GB/s':>11}"
              f" {'vs torch':>9}")

    def avg_over_ranks(t: float) -> float:
        x = torch.tensor([t], dtype=torch.float64, device="cuda")
        dist.all_reduce(x)
        return x.item() / world

    def timed(call, sync, warmup: int, iters: int) -> float:
        for _ in range(warmup):
            call()
        sync()
        dist.barrier(device_ids=[0])  # start together
        t0 = time.perf_counter()
        for _ in range(iters):
            call()
        sync()
        return avg_over_ranks((time.perf_counter() - t0) / iters)

    for dtype in args.dtypes:
        for mib in args.sizes:
            nbytes = mib << 20
            count = nbytes // (2 if dtype == "bf16" else 4)
            host, want = contributions(rank, world, count, dtype)
            x = runtime.DeviceArray.from_numpy(host, ctx)
            t = torch.from_numpy(host.view(np.int16) if dtype == "bf16" else host).cuda()
            if dtype == "bf16":
                t = t.view(torch.bfloat16)
            tag = "bf16" if dtype == "bf16" else None
            # (call, wait for it, warm-up calls, timed calls); the deterministic mode is about a second per GiB
            sides = {"tessera (NCCL, stream)": (lambda: native.all_reduce(x, out=x, dtype=tag, stream=s),
                                                s.synchronize, args.warmup, args.iters),
                     "torch.distributed": (lambda: dist.all_reduce(t), torch.cuda.synchronize, args.warmup,
                                           args.iters)}
            if det is not None:
                sides["tessera deterministic"] = (lambda: det.all_reduce(x, out=x, dtype=tag, stream=s),
                                                  s.synchronize, min(args.warmup, 1), args.det_iters)
            # Checked once per side, from the same contributions (each check re-uploads them).
            for name, (call, sync, _, _) in sides.items():
                if name != "torch.distributed":
                    x.copy_from(host)
                call(), sync()
                if name != "torch.distributed":
                    got = x.numpy()
                elif dtype == "bf16":  # numpy has no bf16: its bits, as `want` holds them
                    got = t.view(torch.int16).cpu().numpy().view(np.uint16)
                else:
                    got = t.cpu().numpy()
                check(got, want, f"{name} {dtype} {mib} MiB", rank)
            best = {name: float("inf") for name in sides}
            for _ in range(args.rounds):
                for name, (call, sync, warmup, iters) in sides.items():
                    best[name] = min(best[name], timed(call, sync, warmup, iters))
            if rank == 0:
                bus = 2 * (world - 1) / world
                r = record_row(f"all_reduce {dtype} {mib} MiB", best, "GB/s", nbytes * bus / 1e9, shape=(count,),
                               dtype=dtype, note=f"{world} GPUs, in place; busbw")
                for side in (r["ours"], *r["peers"]):
                    sec, torch_s = side["time_s"], best["torch.distributed"]
                    ratio = f"{torch_s / sec:8.3f}x" if side["name"] != "torch.distributed" else ""
                    print(f"{mib:>5} MiB {dtype:>5} {side['name']:<22} {sec * 1e6:11.1f} "
                          f"{side['throughput'] / bus:11.2f} {side['throughput']:11.2f} {ratio:>9}", flush=True)
    dist.destroy_process_group()
    s.synchronize()
    for c in (native, det):
        if c is not None:
            c.close()
    return 0


def contributions(rank: int, world: int, count: int, dtype: str):
    """(this rank's buffer, the exact sum over the ranks): rank r gives r + 1 + (i mod 8), small integers that
    bf16 and f32 hold exactly, as they do every partial sum; bf16 as uint16 bits (tessera.comm's convention).
    Tiled from 8 elements (count is a multiple of 8): a GiB costs one array, not several temporaries."""
    block = np.arange(8, dtype=np.float32)
    mine, want = block + np.float32(rank + 1), block * np.float32(world) + np.float32(world * (world + 1) // 2)
    if dtype == "bf16":
        mine, want = ((v.view(np.uint32) >> 16).astype(np.uint16) for v in (mine, want))
    return np.tile(mine, count // 8), np.tile(want, count // 8)


def check(got, want, what: str, rank: int) -> None:
    if not np.array_equal(got, want):
        bad = np.flatnonzero(got != want)
        fail(f"{what}: {bad.size} of {want.size} elements wrong on rank {rank} (first at {bad[0]}: "
             f"{got[bad[0]]} instead of {want[bad[0]]}, raw)")


def free_port() -> int:
    import socket  # lazy: rank 0 only
    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


if __name__ == "__main__":
    sys.exit(main())
