"""Overlap of a data-parallel step's gradient all-reduces with its backward (issue 16, "Overlap"), on GPUs
through NCCL, one process per GPU:

    tessera-run -n 2 --backend nccl bench/data_parallel_gpu.py [--tokens 8192] [--iters 10]

The program is tests/gpu/data_parallel_gpu.py's at width 4096 and hidden width 16384 (W1's and W2's gradients
256 MiB of f32 each, 25 MiB buckets: each its own), compiled for sm_90a (here where the compiler is installed,
else $TESSERA_GPU_IMAGES/data_parallel_gpu.bench.sm_90a.tessera from tests/gpu/build_images.py). Three
functions of it on one Tessera stream, with DeviceArrays (no host copies), timed by events on that stream:
`grads` (forward and backward alone), `reduce` (the step's bucketed all-reduces alone, of the gradients `grads`
gave) and `step` (the whole step: W2's bucket runs on the call's communication stream while W1's gradient is
computed). Without overlap a step would take about grads + reduce (+ the update's few elementwise kernels);
the communication hidden is (grads + reduce − step) / reduce. Best of --rounds rounds of --iters calls after
--warmup; rank 0 prints the GPU and, for each rank, the three times and that fraction. Not yet run on GPUs.
"""

import argparse
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "gpu"))
import data_parallel_gpu as G  # noqa: E402

os.environ["NCCL_NVLS_ENABLE"] = "0"   # before anything starts NCCL: no NVLink multicast


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, default=8192, help="rows of each rank's batch (default 8192)")
    p.add_argument("--warmup", type=int, default=3, help="untimed calls before each timing (default 3)")
    p.add_argument("--iters", type=int, default=10, help="timed calls per round (default 10)")
    p.add_argument("--rounds", type=int, default=3, help="rounds; the best is kept (default 3)")
    args = p.parse_args()
    if args.tokens < 1 or min(args.iters, args.rounds) < 1 or args.warmup < 0:
        p.error("--tokens, --iters and --rounds must be at least 1, --warmup at least 0")
    return args


def image() -> bytes:
    prebuilt = os.environ.get("TESSERA_GPU_IMAGES")
    if prebuilt:
        return (Path(prebuilt) / G.BENCH_IMAGE).read_bytes()
    import tessera  # lazy: only where no prebuilt image is given
    return tessera.compile(G.source(*G.BENCH, bucket="25MiB"), "data_parallel_gpu.py", target="ptx", arch="sm_90a")


def main() -> int:
    args = parse_args()
    if "RANK" not in os.environ or "TESSERA_RENDEZVOUS" not in os.environ:
        print("start it with `tessera-run -n 2 --backend nccl bench/data_parallel_gpu.py`", file=sys.stderr)
        return 2
    local = int(os.environ.get("LOCAL_RANK", os.environ["RANK"]))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = visible.split(",")[local].strip() if visible else str(local)
    from tessera import comm, executor, runtime, stream  # lazy: after the GPU is chosen

    ctx = runtime.select_backend("cuda")
    c = comm.Communicator.from_env(backend="nccl", timeout=300, context=ctx)
    prog = executor.load(image(), ctx)
    d, f = G.BENCH
    rng = np.random.default_rng(c.rank)
    host = [rng.standard_normal((args.tokens, d)), rng.standard_normal((args.tokens, d)),
            rng.standard_normal((d, f)) / 64, rng.standard_normal(f) / 64, rng.standard_normal((f, d)) / 128,
            rng.standard_normal(d) / 128]
    dev = [runtime.DeviceArray.from_numpy(a.astype(np.float32), ctx) for a in host]
    lr = np.float32(1e-3)
    s = stream.new(context=ctx)
    gradients = prog.grads(*dev, stream=s)
    calls = {"grads": lambda: prog.grads(*dev, stream=s),
             "reduce": lambda: prog.reduce(*gradients, comm=c, stream=s),
             "step": lambda: prog.step(*dev, lr, comm=c, stream=s)}
    best = {name: float("inf") for name in calls}
    for _ in range(args.rounds):
        for name, call in calls.items():
            for _ in range(args.warmup):
                call()
            start, end = stream.Event(ctx), stream.Event(ctx)
            start.record(s)
            for _ in range(args.iters):
                call()
            end.record(s)
            end.synchronize()
            best[name] = min(best[name], start.elapsed_ms(end) / args.iters)
    mine = np.array([best["grads"], best["reduce"], best["step"]], np.float32)
    every = np.zeros(3 * c.size, np.float32)
    c.all_gather(mine, every)
    if c.rank == 0:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i",
                              os.environ["CUDA_VISIBLE_DEVICES"]], capture_output=True, text=True).stdout.strip()
        print(f"{gpu or 'GPU'} x{c.size}; T={args.tokens} rows per rank, D={d}, F={f}; ms per call, best of "
              f"{args.rounds} rounds of {args.iters}")
        for r, (grads, reduce, step) in enumerate(every.reshape(c.size, 3)):
            print(f"rank {r}: grads {grads:.3f}  reduce {reduce:.3f}  step {step:.3f}  grads+reduce "
                  f"{grads + reduce:.3f}  communication hidden {(grads + reduce - step) / reduce:.0%}")
    c.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
