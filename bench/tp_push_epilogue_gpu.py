"""A push epilogue for the tensor-parallel MLP (issue 16's overlap question), a prototype outside Tessera.

Y = all_reduce(gelu(X.W1).W2) per rank, T=8192 D=4096 F=8192 per GPU, bf16. Instead of an all_reduce beside or
after the second GEMM, the second GEMM (a Triton kernel) stores each output tile into slot `rank` of every rank's
receive buffer (its own by a local store, the peers' by remote stores over NVLink into torch's symmetric memory),
then one cross-GPU barrier (the symmetric memory handle's), then a sum of the N slots (torch.sum, or a Triton sum
in slot order). The receive buffers alternate between two sets, so that one barrier per step suffices: a rank
pushes into a set again only after every peer passed the barrier of the step in between, which it reaches after
its sum of that set. The first GEMM and gelu are torch's on every side.

    NCCL_NVLS_ENABLE=0 python -m torch.distributed.run --nproc_per_node N bench/tp_push_epilogue_gpu.py

Sides timed in one process (each step's time: cuda events over --reps steps, every round each side once in an
order that rotates, the slowest rank's; best and median of the rounds): torch t1 (torch's second GEMM), triton
t1 (the same Triton GEMM storing only locally), triton+nccl (dist.all_reduce after it), torch+nccl, push
(push GEMM + barrier + torch.sum), push tsum (push GEMM + barrier + Triton sum); and the parts alone: each
second GEMM, the barrier, the sums, NCCL's all_reduce of Y. Efficiency t1/tN against the side's own t1 and the
best t1. The push result is checked against triton+nccl's. Figures: docs/performance.md, "Collectives" (session 34).
"""

import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import parse_args as parse_with_json, record_row, set_gpu_machine  # noqa: E402

CONFIGS = {  # name: (BM, BN, BK, GROUP, warps, stages)
    "128x256x64w8s3": (128, 256, 64, 8, 8, 3),
    "128x256x64w8s4": (128, 256, 64, 8, 8, 4),
    "128x128x64w4s4": (128, 128, 64, 8, 4, 4),
    "256x128x64w8s3": (256, 128, 64, 8, 8, 3),
    "128x128x64w4s3": (128, 128, 64, 8, 4, 3),   # 96 KiB of shared memory: two CTAs per SM (--variants' c2)
}


def kernels():
    """The Triton kernels (built at run time: --help needs no triton)."""
    import triton
    import triton.language as tl

    @triton.jit
    def gemm_store(a, b, d0, d1, d2, d3, M, N, K, sam, sak, sbk, sbn, sdm,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr, NDEST: tl.constexpr,
                   ROT: tl.constexpr = False):
        """C = A.B (bf16 in, f32 accumulation), each tile stored to the NDEST destinations d0.. in turn (the same
        strides): one (local) for the plain GEMM, the N ranks' slots for the push GEMM; with ROT, tile `pid`
        starts at destination pid % NDEST (spreading the tiles' first remote stores over the links)."""
        pid = tl.program_id(0)
        num_m = tl.cdiv(M, BM)
        num_n = tl.cdiv(N, BN)
        width = GROUP * num_n
        first_m = (pid // width) * GROUP
        gs = tl.minimum(num_m - first_m, GROUP)
        pid_m = first_m + (pid % width) % gs
        pid_n = (pid % width) // gs
        rm = pid_m * BM + tl.arange(0, BM)
        rn = pid_n * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        pa = a + rm[:, None] * sam + rk[None, :] * sak
        pb = b + rk[:, None] * sbk + rn[None, :] * sbn
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for _ in range(0, K, BK):   # K % BK == 0, M % BM == 0, N % BN == 0 (checked by the caller)
            acc = tl.dot(tl.load(pa), tl.load(pb), acc)
            pa += BK * sak
            pb += BK * sbk
        c = acc.to(d0.dtype.element_ty)
        offs = rm[:, None] * sdm + rn[None, :]
        if ROT:
            for i in tl.static_range(NDEST):
                j = (pid + i) % NDEST
                if j == 0:
                    tl.store(d0 + offs, c)
                if NDEST > 1:
                    if j == 1:
                        tl.store(d1 + offs, c)
                if NDEST > 2:
                    if j == 2:
                        tl.store(d2 + offs, c)
                if NDEST > 3:
                    if j == 3:
                        tl.store(d3 + offs, c)
        else:
            tl.store(d0 + offs, c)
            if NDEST > 1:
                tl.store(d1 + offs, c)
            if NDEST > 2:
                tl.store(d2 + offs, c)
            if NDEST > 3:
                tl.store(d3 + offs, c)

    @triton.jit
    def sum_slots(src, dst, numel, NS: tl.constexpr, BLOCK: tl.constexpr):
        """dst = sum over s of src[s] (f32 accumulation, slot order 0..NS-1: the same result on every rank)."""
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for s in tl.static_range(NS):
            acc += tl.load(src + s * numel + offs).to(tl.float32)
        tl.store(dst + offs, acc.to(dst.dtype.element_ty))

    return gemm_store, sum_slots


class PeerBuffer:
    """A peer's bf16 buffer [.., T, D] by its address (what Triton takes for a pointer argument: data_ptr and
    dtype); [s, r] gives slot r of set s."""

    def __init__(self, ptr, shape):
        self.ptr, self.shape = ptr, shape
        import torch
        self.dtype = torch.bfloat16

    def data_ptr(self):
        return self.ptr

    def __getitem__(self, ij):
        s, r = ij
        _, n, T, D = self.shape
        return PeerBuffer(self.ptr + ((s * n + r) * T * D) * 2, (T, D))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", default="8192,4096,8192", help="T,D,F (F per GPU)")
    p.add_argument("--rounds", type=int, default=18, help="timed rounds (rounded up to a multiple of the sides)")
    p.add_argument("--reps", type=int, default=20, help="steps per timed block")
    p.add_argument("--warm", type=int, default=100, help="untimed steps of each side before timing")
    p.add_argument("--variants", action="store_true",
                   help="also time: the push GEMM storing its N copies into our own buffer (no NVLink), the push "
                        "GEMM rotating its destinations by tile, and the 128x128x64w4s3 config (two CTAs per SM), "
                        "as parts and (the latter two) as push + Triton sum steps")
    p.add_argument("--configs", default=",".join(CONFIGS), help="Triton GEMM configs to try (the fastest plain "
                                                                 "one is used for both Triton sides)")
    args = parse_with_json(p)
    import torch  # lazy: --help needs neither torch nor a GPU
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem
    import torch.nn.functional as tf
    import triton

    rank, n, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    group = dist.group.WORLD

    def say(*a):
        if rank == 0:
            print(*a, flush=True)

    props = torch.cuda.get_device_properties(local)
    set_gpu_machine(props.name, f"sm_{props.major}{props.minor}", props.multi_processor_count)
    say(f"{n}x {props.name} ({props.multi_processor_count} SMs); torch {torch.__version__}, triton "
        f"{triton.__version__}, nccl {torch.cuda.nccl.version()}, "
        f"NCCL_NVLS_ENABLE={os.environ.get('NCCL_NVLS_ENABLE')}")
    gemm_store, sum_slots = kernels()
    T, D, Fh = (int(x) for x in args.shape.split(","))
    g = torch.Generator(device="cuda")
    g.manual_seed(0)
    X = torch.randn(T, D, device="cuda", dtype=torch.bfloat16, generator=g)   # replicated input
    g.manual_seed(1 + rank)
    W1 = (torch.randn(D, Fh, device="cuda", generator=g) / D ** 0.5).to(torch.bfloat16)
    W2 = (torch.randn(Fh, D, device="cuda", generator=g) / Fh ** 0.5).to(torch.bfloat16)
    H = torch.empty(T, Fh, device="cuda", dtype=torch.bfloat16)
    Y = torch.empty(T, D, device="cuda", dtype=torch.bfloat16)

    # symmetric receive buffers: 2 sets x N slots x T x D
    if hasattr(symm_mem, "enable_symm_mem_for_group"):
        try:
            symm_mem.enable_symm_mem_for_group(group.group_name)
        except Exception as e:  # noqa: BLE001  (deprecated in newer torch; the rendezvous below decides)
            say("enable_symm_mem_for_group:", e)
    recv = symm_mem.empty(2, n, T, D, dtype=torch.bfloat16, device=f"cuda:{local}")
    try:
        hdl = symm_mem.rendezvous(recv, group)
    except Exception:  # noqa: BLE001  (older signature: the group's name)
        hdl = symm_mem.rendezvous(recv, group.group_name)
    say("handle:", [a for a in dir(hdl) if not a.startswith("_")])
    say("buffer_ptrs:", [hex(x) for x in hdl.buffer_ptrs])
    try:
        peers = [hdl.get_buffer(q, (2, n, T, D), torch.bfloat16) for q in range(n)]
    except Exception as e:  # noqa: BLE001  (no get_buffer: the peers' base addresses, as Triton takes pointers)
        say("get_buffer:", e, "- using buffer_ptrs")
        peers = [PeerBuffer(hdl.buffer_ptrs[q], (2, n, T, D)) for q in range(n)]
    peers[rank] = recv
    # the push GEMM's destinations for set s: slot `rank` of the next ranks' buffers, then our own (last)
    dests = [[peers[(rank + 1 + i) % n][s, rank] for i in range(n)] for s in range(2)]

    def launch(cfg, dst, A, B, rot=False):
        BM, BN, BK, G, w, st = CONFIGS[cfg]
        M, K = A.shape
        N = B.shape[1]
        assert M % BM == 0 and N % BN == 0 and K % BK == 0
        d = list(dst) + [dst[0]] * (4 - len(dst))
        gemm_store[((M // BM) * (N // BN),)](A, B, *d, M, N, K, A.stride(0), A.stride(1), B.stride(0),
                                             B.stride(1), N, BM=BM, BN=BN, BK=BK, GROUP=G, NDEST=len(dst), ROT=rot,
                                             num_warps=w, num_stages=st)

    def tsum(s):
        numel = T * D
        sum_slots[(numel // 4096,)](recv[s], Y, numel, NS=n, BLOCK=4096, num_warps=8)

    def sync_all():
        torch.cuda.synchronize()
        dist.barrier()
        torch.cuda.synchronize()

    def timed_rounds(sides, rounds, reps, warm):
        """{name: [ms per call, per round, the slowest rank's]}: the same sequence of calls on every rank."""
        names = list(sides)
        for nm in names:
            for _ in range(warm):
                sides[nm]()
        sync_all()
        count = -(-max(rounds, len(names)) // len(names)) * len(names)
        mine = {nm: [] for nm in names}
        for r in range(count):
            for nm in names[r % len(names):] + names[:r % len(names)]:
                sync_all()
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                for _ in range(reps):
                    sides[nm]()
                e1.record()
                e1.synchronize()
                mine[nm].append(e0.elapsed_time(e1) / reps)
        flat = torch.tensor([t for nm in names for t in mine[nm]], dtype=torch.float64, device="cuda")
        dist.all_reduce(flat, op=dist.ReduceOp.MAX)
        flat = flat.tolist()
        return {nm: flat[i * count:(i + 1) * count] for i, nm in enumerate(names)}

    # 1. the Triton config: the fastest plain second GEMM (the slowest rank's), used for both Triton sides
    Hr = torch.randn(T, Fh, device="cuda", dtype=torch.bfloat16, generator=g) / 4
    cfg_sides = {}
    for c in args.configs.split(","):
        try:
            launch(c, [Y], Hr, W2)
            torch.cuda.synchronize()
            cfg_sides[c] = (lambda c=c: launch(c, [Y], Hr, W2))
        except Exception as e:  # noqa: BLE001  (a config that does not compile or fit is left out; said)
            say(f"config {c}: {type(e).__name__}: {str(e)[:200]}")
    ok = torch.tensor([len(cfg_sides)], device="cuda")
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    assert ok.item() == len(cfg_sides) > 0, "configs differ between ranks"
    cfg_sides["torch"] = lambda: torch.matmul(Hr, W2, out=Y)
    ct = timed_rounds(cfg_sides, 4, 10, 20)
    flops2 = 2.0 * T * Fh * D
    for c, ts in ct.items():
        say(f"second GEMM {c:18s} {min(ts):.4f} ms  {flops2 / min(ts) / 1e9:7.1f} TFLOP/s")
    cfg = min((c for c in ct if c != "torch"), key=lambda c: min(ct[c]))
    say("Triton config:", cfg)

    # 2. correctness of the push path against triton + NCCL's all_reduce (and of the whole against torch)
    def gemm1():
        torch.matmul(X, W1, out=H)
        return tf.gelu(H, approximate="tanh")

    Hg = gemm1()
    launch(cfg, [Y], Hg, W2)
    local_triton = Y.clone()
    ref_local = torch.matmul(Hg, W2)
    dist.all_reduce(Y)
    ref_b = Y.clone()
    ref_d = ref_local.clone()
    dist.all_reduce(ref_d)
    recv.zero_()
    sync_all()
    launch(cfg, dests[0], Hg, W2)
    hdl.barrier()
    got_c = recv[0].sum(dim=0)
    tsum(0)
    got_t = Y.clone()
    torch.cuda.synchronize()
    scale = ref_b.float().abs().max().item()
    errs = {"push torch.sum vs triton+nccl": (got_c.float() - ref_b.float()).abs().max().item() / scale,
            "push triton sum vs triton+nccl": (got_t.float() - ref_b.float()).abs().max().item() / scale,
            "own slot vs local triton": (recv[0, rank].float() - local_triton.float()).abs().max().item(),
            "triton+nccl vs torch+nccl": (ref_b.float() - ref_d.float()).abs().max().item() / scale}
    e = torch.tensor(list(errs.values()), device="cuda", dtype=torch.float64)
    dist.all_reduce(e, op=dist.ReduceOp.MAX)
    errs = dict(zip(errs, e.tolist()))
    for k, v in errs.items():
        say(f"check {k}: max|diff| / max|ref| = {v:.3e}" if "own" not in k else f"check {k}: max|diff| = {v:.3e}")
    tol = 2.0 ** -6   # two bf16 ulps of the largest value: the sums round in another order (N=4: NCCL's ring)
    checked = (errs["own slot vs local triton"] == 0.0 and errs["push torch.sum vs triton+nccl"] <= tol
               and errs["push triton sum vs triton+nccl"] <= tol)
    # a wrong result is said (and kept in the JSON's notes) but the timings still run: a device call is scarce
    say(f"push results equal triton+nccl's within {tol} of the largest value (own slot: exactly): "
        f"{'OK' if checked else 'FAILED'}")

    # 3. the steps and their parts
    state = {"s": 0}

    def push_step(triton_sum, c=None, rot=False):
        def step():
            s = state["s"]
            launch(c or cfg, dests[s], gemm1(), W2, rot)
            hdl.barrier()
            if triton_sum:
                tsum(s)
            else:
                torch.sum(recv[s], dim=0, out=Y)
            state["s"] = 1 - s
        return step

    def push_only(c=None, to=None, rot=False):
        def call():
            s = state["s"]
            launch(c or cfg, (to or dests)[s], Hr, W2, rot)
            state["s"] = 1 - s
        return call

    steps = {
        "torch t1": lambda: torch.matmul(gemm1(), W2, out=Y),
        "triton t1": lambda: launch(cfg, [Y], gemm1(), W2),
        "torch+nccl": lambda: (torch.matmul(gemm1(), W2, out=Y), dist.all_reduce(Y)),
        "triton+nccl": lambda: (launch(cfg, [Y], gemm1(), W2), dist.all_reduce(Y)),
        "push": push_step(False),
        "push tsum": push_step(True),
    }
    parts = {
        "gemm2 torch": lambda: torch.matmul(Hr, W2, out=Y),
        "gemm2 triton": lambda: launch(cfg, [Y], Hr, W2),
        "gemm2 push": push_only(),
        "gemm1+gelu": gemm1,
        "barrier": lambda: hdl.barrier(),
        "sum torch": lambda: torch.sum(recv[0], dim=0, out=Y),
        "sum triton": lambda: tsum(0),
        "nccl all_reduce Y": lambda: dist.all_reduce(Y),
    }
    c2 = "128x128x64w4s3"
    if args.variants:
        try:   # a variant that fails to compile or run is said and left out; the main sides still run
            # our own slots, in the order of slot indices of the peers' stores: the stores' cost without NVLink
            own_dests = [[recv[s, (rank + 1 + i) % n] for i in range(n)] for s in range(2)]
            parts["gemm2 push local"] = push_only(to=own_dests)
            parts["gemm2 push rot"] = push_only(rot=True)
            parts["gemm2 triton c2"] = lambda: launch(c2, [Y], Hr, W2)
            parts["gemm2 push c2"] = push_only(c=c2)
            steps["triton t1 c2"] = lambda: launch(c2, [Y], gemm1(), W2)
            steps["push tsum rot"] = push_step(True, rot=True)
            steps["push tsum c2"] = push_step(True, c=c2)
            for name, c, rot in (("rot", cfg, True), ("c2", c2, False)):   # their results, as the main check's
                recv.zero_()
                sync_all()
                launch(c, dests[0], Hg, W2, rot)
                hdl.barrier()
                tsum(0)
                torch.cuda.synchronize()
                e = torch.tensor([(Y.float() - ref_b.float()).abs().max().item() / scale], device="cuda",
                                 dtype=torch.float64)
                dist.all_reduce(e, op=dist.ReduceOp.MAX)
                say(f"check push {name} triton sum vs triton+nccl: max|diff| / max|ref| = {e.item():.3e} "
                    f"({'OK' if e.item() <= tol else 'FAILED'})")
                checked = checked and e.item() <= tol
        except Exception as e:  # noqa: BLE001
            say(f"variants left out: {type(e).__name__}: {str(e)[:300]}")
            args.variants = False
            for k in ("gemm2 push local", "gemm2 push rot", "gemm2 triton c2", "gemm2 push c2"):
                parts.pop(k, None)
            for k in ("triton t1 c2", "push tsum rot", "push tsum c2"):
                steps.pop(k, None)
    st = timed_rounds(steps, args.rounds, args.reps, args.warm)
    pt = timed_rounds(parts, args.rounds, args.reps, args.warm)
    best = {k: min(v) for k, v in {**st, **pt}.items()}
    med = {k: statistics.median(v) for k, v in {**st, **pt}.items()}
    for k in st:
        say(f"step  {k:14s} best {best[k]:.4f} ms  median {med[k]:.4f} ms")
    for k in pt:
        say(f"part  {k:18s} best {best[k] * 1e3:8.1f} us  median {med[k] * 1e3:8.1f} us")
    mib = T * D * 2 / 2 ** 20
    moved = (n + 1) * T * D * 2 / 1e9   # GB read (N slots) and written (Y) by a sum
    say(f"sum of {n} slots of {mib:.0f} MiB: torch {moved / best['sum torch'] * 1e3:.0f} GB/s, triton "
        f"{moved / best['sum triton'] * 1e3:.0f} GB/s")
    say(f"push GEMM slowdown vs plain Triton GEMM: x{best['gemm2 push'] / best['gemm2 triton']:.3f} "
        f"(+{(best['gemm2 push'] - best['gemm2 triton']) * 1e3:.1f} us); Triton plain vs torch GEMM: "
        f"x{best['gemm2 triton'] / best['gemm2 torch']:.3f}")
    for k, base in (("gemm2 push local", "gemm2 triton"), ("gemm2 push rot", "gemm2 triton"),
                    ("gemm2 push c2", "gemm2 triton c2"), ("gemm2 triton c2", "gemm2 triton")):
        if k in best:
            say(f"{k} vs {base}: x{best[k] / best[base]:.3f} (+{(best[k] - best[base]) * 1e3:.1f} us)")
    t1_best = min(best["torch t1"], best["triton t1"])
    own = {"torch+nccl": "torch t1", "triton+nccl": "triton t1", "push": "triton t1", "push tsum": "triton t1"}
    if args.variants:
        own.update({"push tsum rot": "triton t1", "push tsum c2": "triton t1 c2"})
        t1_best = min(t1_best, best["triton t1 c2"])
    for k, base in own.items():
        say(f"eff   {k:14s} tN {best[k]:.4f} ms   own t1 ({base}) {best[base]:.4f}: {best[base] / best[k]:.3f}   "
            f"best t1 {t1_best:.4f}: {t1_best / best[k]:.3f}   (medians: {med[base] / med[k]:.3f})")
    rounds = {**st, **pt}
    shape = (T, D, Fh)
    for k, base in own.items():
        record_row(f"tp mlp N={n} {k}", {k: best[k] / 1e3, base: best[base] / 1e3}, shape=shape, dtype="bf16",
                   note=f"efficiency t1/tN = ratio; Triton config {c2 if 'c2' in k else cfg}; push check "
                        f"{'OK' if checked else 'FAILED'}",
                   rounds={k: [t / 1e3 for t in rounds[k]], base: [t / 1e3 for t in rounds[base]]})
    record_row(f"second GEMM N={n} push", {"gemm2 push": best["gemm2 push"] / 1e3,
                                           "gemm2 triton": best["gemm2 triton"] / 1e3,
                                           "gemm2 torch": best["gemm2 torch"] / 1e3}, "TFLOP/s", flops2 / 1e12,
               shape=(T, D, Fh), dtype="bf16", note=f"push to {n} slots; Triton config {cfg}")
    sync_all()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
