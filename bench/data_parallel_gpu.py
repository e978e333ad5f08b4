"""Overlap of a data-parallel step's gradient all-reduces with its backward (issue 16, "Overlap"), on GPUs
through NCCL, one process per GPU:

    python bench/data_parallel_gpu.py --build-image DIR --worlds 2,4      # where the compiler is
    tessera-run -n 4 --backend nccl bench/data_parallel_gpu.py --image DIR

The model is an MLP of --layers layers (default 8): width D in and out, hidden width F (the first layer D×F, the
middle ones F×F, the last F×D, each with a bias, gelu between), its products multiplying bf16 of the f32 master
weights (f32 results); the loss is the mean squared error against Y on the rank's T rows. The step is
value_and_grad, a mean all_reduce of every gradient over the mesh's data axis in 25 MiB buckets (DDP's
default), SGD. The backward produces the last layer's gradients first, so each bucket can be reduced while the
layers before it are differentiated; the first layer's gradient comes last and can only be reduced after the
backward (nothing is left to hide it behind), hence the depth, and a first layer (D×F) smaller than the middle
ones (F×F). A model of two layers hides at most the second layer's reduction.

Four functions of the program on one Tessera stream, with DeviceArrays (no host copies), timed by events on
that stream: `grads` (forward and backward alone), `local` (the step without its all_reduces: forward, backward
and the SGD update of the rank's own gradients), `reduce` (the step's bucketed all_reduces alone, of the
gradients `grads` gave) and `step` (the whole step: each bucket runs on the call's communication stream while
the backward goes on). Without overlap a step would take local + reduce; the communication hidden is
(local + reduce − step) / reduce (before, grads stood for local, which counted the update's kernels — three
passes over every weight, its gradient and the result — as exposed communication). Best of --rounds rounds of
--iters calls after --warmup; rank 0 prints the GPU and, for each rank, the times and that fraction. Images are
built for sm_90a, one per world (the mesh's size is the program's) and shape.

The torch peer, in the same processes on the same GPUs (torch imported before Tessera, so both use PyTorch's
libnccl; NCCL_NVLS_ENABLE=0 for both; torch.distributed's process group on a port rank 0 sends over Tessera's
communicator, as bench/tp_mlp_gpu.py): the same model written in torch (f32 master weights, each product of
bf16 casts, bias, exact gelu and the loss in f32; the same T rows per rank), its `local` (forward, backward and
torch.optim.SGD, no communication), `reduce` (the gradients' mean all_reduce alone, torch.distributed.all_reduce
of flat buffers bucketed as DDP buckets them: the gradients in the backward's order, a bucket closed once it
holds 25 MiB or more, the first 1 MiB) and `step` (torch.nn.parallel.DistributedDataParallel,
bucket_cap_mb=25, gradient_as_bucket_view=True: forward, backward and SGD), timed the same way (events on
torch's stream, best of --rounds rounds of --iters calls), and its hidden fraction by the same formula. Before
timing, two checks: the torch model's gradients on the rank's rows against Tessera's `grads` (same weights,
same rows), and DDP's reduced gradients against the torch model's on one GPU over the whole batch (every
rank's rows); each within 2^-5 of the gradient's largest (bf16 products). A failed check is printed and the
run exits 1 after the timings. --no-torch leaves the peer out.

Host issue: each function's host time inside its calls (perf_counter around each call, the best round's mean):
a call that returns in much less than its device time leaves the host ahead of the GPU; one whose issue takes
as long as the GPU's work (or longer) makes the GPU wait for the host. --timeline PATH sets
TESSERA_STEP_TIMELINE=PATH.rankR.jsonl for this rank (function.c, "the step timeline": every call then waits for
its stream before it returns, so the device and host times of its lines share an origin; use few --iters):
per step and bucket the device time its event completed and the host time it was issued.
"""

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from allreduce_gpu import fail, free_port, launched  # noqa: E402  (sets NCCL_NVLS_ENABLE=0)
from common import parse_args as parse_with_json, record_row, set_gpu_machine  # noqa: E402


def program(world: int, layers: int, d: int, f: int) -> str:
    """The model's loss, value_and_grad, and the functions grads, reduce and step over a mesh of `world`
    devices."""
    dims = [d] + [f] * (layers - 1) + [d]
    weights = ", ".join(f"W{i}, b{i}" for i in range(layers))
    grads = ", ".join(f"gW{i}, gb{i}" for i in range(layers))
    params = ", ".join(f"W{i}: tensor[f32, {dims[i]}, {dims[i + 1]}], b{i}: tensor[f32, {dims[i + 1]}]"
                       for i in range(layers))
    gparams = ", ".join(f"gW{i}: tensor[f32, {dims[i]}, {dims[i + 1]}], gb{i}: tensor[f32, {dims[i + 1]}]"
                        for i in range(layers))
    data = f'X: tensor[f32, "T", {d}], Y: tensor[f32, "T", {d}]'
    forward = "".join(f"    H = op.gelu(op.bias_add(op.matmul(op.cast(H, bf16), op.cast(W{i}, bf16), out_dtype=f32), "
                      f"b{i}))\n" for i in range(layers - 1))
    last = layers - 1
    reduce = "".join(f'    g{w}{i} = op.all_reduce(g{w}{i}, mesh=mesh, op="mean", bucket="25MiB")\n'
                     for i in range(layers) for w in ("W", "b"))
    update = ", ".join(f"W{i} - lr * gW{i}, b{i} - lr * gb{i}" for i in range(layers))
    return f'''
from tessera import bf16, dist, f32, function, op, tensor, value_and_grad

mesh = dist.Mesh(axes=["dp"], devices=range({world}))


@function
def loss({data}, {params}):
    H = X
{forward}    E = op.bias_add(op.matmul(op.cast(H, bf16), op.cast(W{last}, bf16), out_dtype=f32), b{last}) - Y
    return op.mean(E * E)


loss_and_grads = value_and_grad(loss, argnums={tuple(range(2, 2 + 2 * layers))})


@function
def grads({data}, {params}):
    value, {grads} = loss_and_grads(X, Y, {weights})
    return {grads}


@function
def reduce({gparams}):
{reduce}    return {grads}


@function
def local({data}, {params}, lr: f32):
    value, {grads} = loss_and_grads(X, Y, {weights})
    return value, {update}


@function
def step({data}, {params}, lr: f32):
    value, {grads} = loss_and_grads(X, Y, {weights})
{reduce}    return value, {update}
'''


def torch_model(torch, weights):
    """The program's model in torch: `weights` [W0, b0, W1, b1, ...] (f32 tensors, the parameters' values),
    registered in layer order; forward(X, Y) is the loss."""
    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = len(weights) // 2
            for i in range(self.layers):   # layer order: DDP's first buckets (reversed) hold the last layers
                self.register_parameter(f"W{i}", torch.nn.Parameter(weights[2 * i].clone()))
                self.register_parameter(f"b{i}", torch.nn.Parameter(weights[2 * i + 1].clone()))

        def forward(self, X, Y):
            H = X
            for i in range(self.layers):
                W, b = getattr(self, f"W{i}"), getattr(self, f"b{i}")
                Z = torch.matmul(H.to(torch.bfloat16), W.to(torch.bfloat16)).float() + b
                H = torch.nn.functional.gelu(Z) if i < self.layers - 1 else Z
            E = H - Y
            return (E * E).mean()
    return MLP()


def torch_gradients(torch, model, X, Y) -> list:
    """The loss's gradients of `model` (its parameters' order) on rows X, Y."""
    model.zero_grad(set_to_none=True)
    model(X, Y).backward()
    return [p.grad.detach().clone() for p in model.parameters()]


def worst(torch, got: list, want: list) -> float:
    """The largest of |got - want| / max |want| over the tensors."""
    return max(((g.float() - w.float()).abs().max() / w.float().abs().max().clamp_min(1e-30)).item()
               for g, w in zip(got, want))


TOLERANCE = 2 ** -5


def buckets(torch, params: list, cap: int, first: int) -> list:
    """Flat f32 buffers for the gradients of `params` as DDP buckets them once it has seen a backward
    (reducer.cpp's compute_bucket_assignment_by_size over the gradients in the order they are ready, here the
    parameters reversed): each gradient joins the open bucket, which closes once it holds `cap` bytes or more
    (the first: `first`)."""
    out, size, limit = [0], 0, first
    for p in reversed(params):
        out[-1] += p.numel()
        size += p.numel() * 4
        if size >= limit:
            out.append(0)
            size, limit = 0, cap
    return [torch.zeros(n, dtype=torch.float32, device=params[0].device) for n in out if n]


def torch_peer(torch, dist, args, host: list, device, theirs_grads=None):
    """The torch side on this rank's `host` arrays [X, Y, W0, b0, ...]: the checks, then local, reduce and step
    timed. `theirs_grads`: Tessera's `grads` on the same arrays (numpy), or None. Returns ({side: ms},
    [failed checks])."""
    import copy  # lazy: the torch peer only
    world = dist.get_world_size()
    cuda = device != "cpu"
    X, Y, *weights = (torch.from_numpy(a.astype(np.float32)).to(device) for a in host)
    model = torch_model(torch, weights).to(device)
    failed = []
    mine = torch_gradients(torch, model, X, Y)
    if theirs_grads is not None:
        err = worst(torch, mine, [torch.from_numpy(g).to(device) for g in theirs_grads])
        print(f"rank {dist.get_rank()}: torch's gradients against Tessera's grads (same rows, same weights): "
              f"largest difference {err:.2e} of the gradient's largest", flush=True)
        if not err <= TOLERANCE:
            failed.append(f"torch's gradients differ from Tessera's by {err:.2e} of the largest")
    del mine
    ddp_model = copy.deepcopy(model)
    ddp = torch.nn.parallel.DistributedDataParallel(ddp_model, device_ids=[0] if cuda else None, bucket_cap_mb=25,
                                                    gradient_as_bucket_view=True)   # rank 0's weights
    reduced = torch_gradients(torch, ddp, X, Y)
    rows = [torch.empty(world * a.shape[0], a.shape[1], dtype=a.dtype, device=device) for a in (X, Y)]
    for whole, part in zip(rows, (X, Y)):
        if cuda:
            dist.all_gather_into_tensor(whole, part)
        else:   # gloo
            dist.all_gather(list(whole.chunk(world)), part)
    one = torch_model(torch, [p.detach() for p in ddp.module.parameters()]).to(device)
    err = worst(torch, reduced, torch_gradients(torch, one, *rows))
    print(f"rank {dist.get_rank()}: DDP's reduced gradients against the model's on one GPU over the whole batch "
          f"({world} x {X.shape[0]} rows): largest difference {err:.2e} of the gradient's largest", flush=True)
    if not err <= TOLERANCE:
        failed.append(f"DDP's gradients differ from the whole batch's by {err:.2e} of the largest")
    del one, rows, reduced
    lr = 1e-3
    local_opt = torch.optim.SGD(model.parameters(), lr=lr)
    ddp_opt = torch.optim.SGD(ddp.parameters(), lr=lr)
    flat = buckets(torch, list(model.parameters()), 25 * 2 ** 20, 2 ** 20)

    def local():
        local_opt.zero_grad(set_to_none=True)
        model(X, Y).backward()
        local_opt.step()

    def reduce():
        for b in flat:   # DDP's default hook: divide by the world, sum
            b.div_(world)
            dist.all_reduce(b)

    def step():
        ddp_opt.zero_grad(set_to_none=True)
        ddp(X, Y).backward()
        ddp_opt.step()

    calls = {"local": local, "reduce": reduce, "step": step}
    best = {name: float("inf") for name in calls}
    for _ in range(args.rounds):
        for name, call in calls.items():
            for _ in range(args.warmup):
                call()
            if cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()
                start.record()
            t0 = time.perf_counter()
            for _ in range(args.iters):
                call()
            if cuda:
                end.record()
                end.synchronize()
                ms = start.elapsed_time(end)
            else:
                ms = (time.perf_counter() - t0) * 1e3
            best[name] = min(best[name], ms / args.iters)
    return best, failed


def image_file(folder: str, world: int, args) -> str:
    return os.path.join(folder, f"data_parallel.n{world}.l{args.layers}.d{args.width}.f{args.hidden}.sm_90a.tessera")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--image", metavar="DIR", help="the images built beforehand with --build-image DIR")
    p.add_argument("--build-image", metavar="DIR", help="only write the sm_90a images (one per N of --worlds)")
    p.add_argument("--worlds", default="2,4,8", help="with --build-image: the N to build for (default 2,4,8)")
    p.add_argument("--layers", type=int, default=8, help="layers of the MLP (default 8)")
    p.add_argument("--width", type=int, default=1024, help="D, the model's input and output width (default 1024)")
    p.add_argument("--hidden", type=int, default=4096, help="F, the hidden width (default 4096)")
    p.add_argument("--tokens", type=int, default=4096, help="T, rows of each rank's batch (default 4096)")
    p.add_argument("--warmup", type=int, default=3, help="untimed calls before each timing (default 3)")
    p.add_argument("--iters", type=int, default=10, help="timed calls per round (default 10)")
    p.add_argument("--rounds", type=int, default=3, help="rounds; the best is kept (default 3)")
    p.add_argument("--timeline", metavar="PATH", help="write each call's step timeline to PATH.rankR.jsonl "
                   "(TESSERA_STEP_TIMELINE; calls then wait for their stream: the times are not the step's)")
    p.add_argument("--only", default="grads,local,reduce,step", help="the functions to time (default all four)")
    p.add_argument("--no-torch", action="store_true", help="leave out the torch peer (DDP)")
    args = parse_with_json(p)
    if args.layers < 2:
        p.error("--layers must be at least 2")
    if min(args.width, args.hidden, args.tokens, args.iters, args.rounds) < 1 or args.warmup < 0:
        p.error("--width, --hidden, --tokens, --iters and --rounds must be at least 1, --warmup at least 0")
    return args


def compile_image(world: int, args) -> bytes:
    import tessera  # lazy: the compiler, only where images are built
    return tessera.compile(program(world, args.layers, args.width, args.hidden), "data_parallel_gpu.py",
                           target="ptx", arch="sm_90a")


def main() -> int:
    args = parse_args()
    if args.build_image:
        os.makedirs(args.build_image, exist_ok=True)
        for n in (int(w) for w in args.worlds.split(",")):
            path = image_file(args.build_image, n, args)
            with open(path, "wb") as f:
                f.write(compile_image(n, args))
            print(path)
        return 0
    launched()   # before CUDA starts: this rank's GPU only
    if args.timeline:  # read by libtessera at its first call
        os.environ["TESSERA_STEP_TIMELINE"] = f"{args.timeline}.rank{os.environ['RANK']}.jsonl"
    torch = dist = None
    if not args.no_torch:
        try:
            import torch  # lazy: before Tessera looks for a libnccl, so both use PyTorch's
            import torch.distributed as dist
        except ImportError as e:
            fail(f"PyTorch is needed for the torch peer (--no-torch leaves it out): {e}")
    from tessera import comm, executor, runtime, stream  # lazy: after the GPU is chosen

    ctx = runtime.select_backend("cuda")
    if torch is not None:   # as bench/tp_mlp_gpu.py: after Tessera's context
        if not torch.cuda.is_available():
            fail(f"PyTorch sees no GPU (CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']})")
        torch.cuda.set_device(0)
    c = comm.Communicator.from_env(backend="nccl", timeout=300, context=ctx)
    if args.image:
        path = image_file(args.image, c.size, args)
        if not os.path.exists(path):
            fail(f"no {path}: build it with --build-image {args.image} --worlds {c.size} and the same --layers, "
                 f"--width, --hidden")
        data = open(path, "rb").read()
    else:
        data = compile_image(c.size, args)
    prog = executor.load(data, ctx)
    dims = [args.width] + [args.hidden] * (args.layers - 1) + [args.width]
    rng = np.random.default_rng(c.rank)
    host = [rng.standard_normal((args.tokens, args.width)), rng.standard_normal((args.tokens, args.width))]
    for i in range(args.layers):   # scaled so that activations stay of order 1 through the layers
        host += [rng.standard_normal((dims[i], dims[i + 1])) / np.sqrt(dims[i]), rng.standard_normal(dims[i + 1]) / 8]
    dev = [runtime.DeviceArray.from_numpy(a.astype(np.float32), ctx) for a in host]
    host_arrays = host   # (`host` is the timing's below)
    lr = np.float32(1e-3)
    s = stream.new(context=ctx)
    gradients = prog.grads(*dev, stream=s)
    s.synchronize()
    ours_grads = None if args.no_torch else [g.numpy() for g in gradients]   # the torch peer's check
    calls = {"grads": lambda: prog.grads(*dev, stream=s),
             "local": lambda: prog.local(*dev, lr, stream=s),
             "reduce": lambda: prog.reduce(*gradients, comm=c, stream=s),
             "step": lambda: prog.step(*dev, lr, comm=c, stream=s)}
    names = list(calls)
    only = set(args.only.split(","))
    if not only <= set(names):
        fail(f"--only: {sorted(only - set(names))} not among {names}")
    best = {name: float("nan") if name not in only else float("inf") for name in calls}
    issue = dict(best)   # host ms inside a call, the best round's mean
    for _ in range(args.rounds):
        for name, call in calls.items():
            if name not in only:
                continue
            for _ in range(args.warmup):
                call()
            start, end = stream.Event(ctx), stream.Event(ctx)
            start.record(s)
            host = 0.0
            for _ in range(args.iters):
                t0 = time.perf_counter()
                call()
                host += time.perf_counter() - t0
            end.record(s)
            end.synchronize()
            s.synchronize()   # untimed: the stream lets go of the calls' results (else every call's 416 MiB
            # stays held and the next calls allocate from the driver)
            if start.elapsed_ms(end) / args.iters < best[name]:
                best[name], issue[name] = start.elapsed_ms(end) / args.iters, host * 1e3 / args.iters
    peer, failed = {"local": float("nan"), "reduce": float("nan"), "step": float("nan")}, []
    if not args.no_torch:
        # torch's store on a port rank 0 picks and sends over Tessera's communicator (TESSERA_RENDEZVOUS's port
        # served Tessera's ids and may still be held)
        port = c.broadcast(runtime.DeviceArray.from_numpy(np.array([free_port() if c.rank == 0 else 0], np.int64),
                                                          ctx))
        address = os.environ.get("TESSERA_RENDEZVOUS", "127.0.0.1:0").rsplit(":", 1)[0]
        dist.init_process_group("nccl", init_method=f"tcp://{address}:{int(port.numpy()[0])}", rank=c.rank,
                                world_size=c.size)
        del dev, gradients, calls   # Tessera's arrays: room for torch's
        peer, failed = torch_peer(torch, dist, args, host_arrays, "cuda", ours_grads)
    mine = np.array([best[n] for n in names] + [issue[n] for n in names] + [peer[n] for n in peer], np.float32)
    every = np.zeros(11 * c.size, np.float32)
    c.all_gather(mine, every)
    if c.rank == 0:
        import subprocess  # lazy: rank 0 names the GPU
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i",
                              os.environ["CUDA_VISIBLE_DEVICES"]], capture_output=True, text=True).stdout.strip()
        megabytes = sum(dims[i] * dims[i + 1] + dims[i + 1] for i in range(args.layers)) * 4 / 2 ** 20
        print(f"{gpu or 'GPU'} x{c.size}; {args.layers}-layer MLP, T={args.tokens} rows per rank, D={args.width}, "
              f"F={args.hidden}, {megabytes:.0f} MiB of f32 gradients in 25 MiB buckets; ms per call, best of "
              f"{args.rounds} rounds of {args.iters}")
        set_gpu_machine(gpu or ctx.properties["name"], ctx.properties["arch"], ctx.properties["compute_units"],
                        c.size)
        if not args.no_torch:
            print(f"torch peer: PyTorch {torch.__version__}, DistributedDataParallel (bucket_cap_mb=25, "
                  f"gradient_as_bucket_view=True), NCCL_NVLS_ENABLE={os.environ.get('NCCL_NVLS_ENABLE')}")
        for r, times in enumerate(every.reshape(c.size, 11)):
            grads, local, reduce, step = (float(t) for t in times[:4])
            t_local, t_reduce, t_step = (float(t) for t in times[8:])
            theirs = f"rank {r}: torch DDP local {t_local:.3f}  reduce {t_reduce:.3f}  step {t_step:.3f}  " \
                     f"local+reduce {t_local + t_reduce:.3f}  communication hidden " \
                     f"{(t_local + t_reduce - t_step) / t_reduce:.0%}"
            print(f"rank {r}: host issue ms per call: " + "  ".join(f"{n} {float(t):.3f}" for n, t in
                                                                   zip(names, times[4:])))
            if not all(np.isfinite(times[:4])):  # --only: the timed ones, no fraction
                print(f"rank {r}: device ms per call: " + "  ".join(f"{n} {float(t):.3f}" for n, t in
                                                                  zip(names, times[:4]) if np.isfinite(t)))
                if not args.no_torch:
                    print(theirs)
                continue
            record_row(f"data-parallel step, rank {r}", {"step": step / 1e3, "local+reduce": (local + reduce) / 1e3,
                                                         "grads": grads / 1e3, "local": local / 1e3,
                                                         "reduce": reduce / 1e3},
                       shape=(args.layers, args.tokens, args.width, args.hidden), dtype="bf16",
                       note=f"{c.size} GPUs; the step overlaps its all-reduces with the backward")
            if not args.no_torch:
                record_row(f"data-parallel step, torch DDP, rank {r}",
                           {"step": t_step / 1e3, "local+reduce": (t_local + t_reduce) / 1e3,
                            "local": t_local / 1e3, "reduce": t_reduce / 1e3},
                           shape=(args.layers, args.tokens, args.width, args.hidden), dtype="bf16",
                           note=f"{c.size} GPUs; torch DDP's step, the same model")
            print(f"rank {r}: grads {grads:.3f}  local {local:.3f}  reduce {reduce:.3f}  step {step:.3f}  "
                  f"local+reduce {local + reduce:.3f}  communication hidden {(local + reduce - step) / reduce:.0%}"
                  f"  (by grads {(grads + reduce - step) / reduce:.0%})")
            if not args.no_torch:
                print(theirs)
    if not args.no_torch:
        dist.destroy_process_group()
    c.close()
    for message in failed:
        print(f"rank {c.rank}: CHECK FAILED: {message}", file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
