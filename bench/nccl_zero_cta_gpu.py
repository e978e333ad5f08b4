"""NCCL's zero-CTA collectives beside GEMMs (issue 16's overlap question), a prototype outside Tessera.

NCCL 2.28 runs AllGather and AlltoAll on the copy engines, with no CTA of its own, when the communicator is
created with ncclConfig_t.CTAPolicy = NCCL_CTA_POLICY_ZERO and both buffers are ncclMemAlloc memory registered
as symmetric windows (ncclCommWindowRegister, NCCL_WIN_COLL_SYMMETRIC; one node; CUDA 12.5 and later; never
the legacy NULL stream, which cudaMemcpyBatchAsync refuses). An all_reduce has no such form (a sum needs SMs),
but all_gather + a local sum, or alltoall + a local sum of 1/N + all_gather, is one. This script measures,
with torch's GEMMs and libnccl through ctypes (the copy PyTorch loaded), whether that leaves the GEMMs their
SMs, and what a tensor-parallel MLP pipelined in row chunks gains from it:

    NCCL_NVLS_ENABLE=0 python -m torch.distributed.run --nproc_per_node N bench/nccl_zero_cta_gpu.py

- alone: a 2048x8192x4096 bf16 GEMM (a chunk's second GEMM), NCCL's all_reduce of its 16 MiB result (uncapped
  and at 4 CTAs), all_gather on the copy engines and as kernels, alltoall of 416 MiB on the copy engines;
- beside: 20 GEMMs on one stream while the collective runs back to back on another, the GEMM's slowdown;
- the MLP Y = all_reduce(gelu(X.W1).W2), T=8192 D=4096 F=8192 per GPU, in row chunks (each chunk's
  collective on a second stream while the next chunk computes): "nccl" (all_reduce), "ce" (all_gather on the
  copy engines, then torch.sum of the N partials) and "cers" (alltoall, sum of 1/N, all_gather), each with its
  efficiency t1 / tN against the same chunks without collectives; the results are checked against the whole
  all_reduce.
Event timings, best of 5 rounds, the slowest rank's. Figures: docs/performance.md, "Collectives" (session 34).
"""

import argparse
import ctypes
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import parse_args as parse_with_json, record_row, set_gpu_machine  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parse_with_json(p)
    import torch  # lazy: --help needs neither torch nor a GPU
    import torch.distributed as dist
    import torch.nn.functional as F

    rank, n, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    # cudaMemcpyBatchAsync (NCCL's CE path) refuses the legacy NULL stream
    torch.cuda.set_stream(torch.cuda.Stream())
    dist.init_process_group("gloo")
    nccl = ctypes.CDLL("libnccl.so.2")
    ver = ctypes.c_int(); nccl.ncclGetVersion(ctypes.byref(ver))
    UNDEF = -2147483648

    class UID(ctypes.Structure):
        _fields_ = [("internal", ctypes.c_char * 128)]

    class Config(ctypes.Structure):
        _fields_ = [("size", ctypes.c_size_t), ("magic", ctypes.c_uint), ("version", ctypes.c_uint),
                    ("blocking", ctypes.c_int), ("cgaClusterSize", ctypes.c_int), ("minCTAs", ctypes.c_int),
                    ("maxCTAs", ctypes.c_int), ("netName", ctypes.c_char_p), ("splitShare", ctypes.c_int),
                    ("trafficClass", ctypes.c_int), ("commName", ctypes.c_char_p), ("collnetEnable", ctypes.c_int),
                    ("CTAPolicy", ctypes.c_int), ("shrinkShare", ctypes.c_int), ("nvlsCTAs", ctypes.c_int),
                    ("nChannelsPerNetPeer", ctypes.c_int), ("nvlinkCentricSched", ctypes.c_int)]

    def check(rc, what):
        if rc != 0:
            raise RuntimeError(f"{what}: nccl {rc}")

    def new_comm(policy=UNDEF, max_ctas=UNDEF):
        uid = UID()
        if rank == 0:
            check(nccl.ncclGetUniqueId(ctypes.byref(uid)), "uid")
        t = torch.tensor(list(bytes(uid)), dtype=torch.uint8)
        dist.broadcast(t, 0)
        uid = UID.from_buffer_copy(bytes(t.tolist()))
        cfg = Config(ctypes.sizeof(Config), 0xcafebeef, ver.value, 1, UNDEF, UNDEF, max_ctas, None, UNDEF, UNDEF, None,
                     UNDEF, policy, UNDEF, UNDEF, UNDEF, UNDEF)
        comm = ctypes.c_void_p()
        check(nccl.ncclCommInitRankConfig(ctypes.byref(comm), n, uid, rank, ctypes.byref(cfg)), "init")
        return comm

    class CAI:
        def __init__(self, ptr, shape):
            self.__cuda_array_interface__ = {"shape": shape, "typestr": "<i2", "data": (ptr, False), "version": 3}

    def window(comm, shape):
        ptr = ctypes.c_void_p()
        nbytes = 2
        for s in shape:
            nbytes *= s
        check(nccl.ncclMemAlloc(ctypes.byref(ptr), ctypes.c_size_t(nbytes)), "memalloc")
        win = ctypes.c_void_p()
        check(nccl.ncclCommWindowRegister(comm, ptr, ctypes.c_size_t(nbytes), ctypes.byref(win), 1), "winreg")
        return torch.as_tensor(CAI(ptr.value, shape), device="cuda").view(torch.bfloat16)

    BF16 = 9
    def stream_h(s):
        return ctypes.c_void_p(s.cuda_stream)
    def allreduce(comm, t, s):
        check(nccl.ncclAllReduce(ctypes.c_void_p(t.data_ptr()), ctypes.c_void_p(t.data_ptr()),
                                 ctypes.c_size_t(t.numel()),
                                 BF16, 0, comm, stream_h(s)), "allreduce")
    def allgather(comm, src, dst, s):
        check(nccl.ncclAllGather(ctypes.c_void_p(src.data_ptr()), ctypes.c_void_p(dst.data_ptr()),
                                 ctypes.c_size_t(src.numel()), BF16, comm, stream_h(s)), "allgather")
    def alltoall(comm, src, dst, s):
        check(nccl.ncclAlltoAll(ctypes.c_void_p(src.data_ptr()), ctypes.c_void_p(dst.data_ptr()),
                                ctypes.c_size_t(src.numel() // n), BF16, comm, stream_h(s)), "alltoall")

    def timed(fn, reps=20, rounds=5):
        best = 1e9
        for _ in range(rounds):
            torch.cuda.synchronize(); dist.barrier()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(); [fn() for _ in range(reps)]; b.record(); b.synchronize()
            best = min(best, a.elapsed_time(b) / reps)
        out = torch.tensor([best]); dist.all_reduce(out, op=dist.ReduceOp.MAX)
        return out.item()

    def say(*a):
        if rank == 0:
            print(*a, flush=True)

    say(f"nccl {ver.value} n={n} {torch.cuda.get_device_name()}")
    props = torch.cuda.get_device_properties(local)
    set_gpu_machine(props.name, f"sm_{props.major}{props.minor}", props.multi_processor_count)
    default = new_comm()
    zero = new_comm(policy=2)
    capped = new_comm(max_ctas=4)
    T, D, Fh, C = 8192, 4096, 8192, 4
    rows = T // C
    torch.manual_seed(rank)
    X = torch.randn(T, D, device="cuda", dtype=torch.bfloat16)
    W1 = torch.randn(D, Fh, device="cuda", dtype=torch.bfloat16) / 64
    W2 = torch.randn(Fh, D, device="cuda", dtype=torch.bfloat16) / 90
    H = torch.randn(rows, Fh, device="cuda", dtype=torch.bfloat16)
    P = torch.empty(rows, D, device="cuda", dtype=torch.bfloat16)
    send = [window(zero, (rows, D)) for _ in range(C)]
    recv = [window(zero, (n, rows, D)) for _ in range(C)]
    plain_recv = torch.empty(n, rows, D, device="cuda", dtype=torch.bfloat16)
    big = 416 * 2**20 // 2  # bf16 elements of 416 MiB: the data-parallel step's gradients
    a2a_src, a2a_dst = window(zero, (n, big // n)), window(zero, (n, big // n))
    s_comp, s_comm = torch.cuda.Stream(), torch.cuda.Stream()
    cur = torch.cuda.current_stream()

    # correctness of the CE all-gather
    send[0].fill_(rank + 1); allgather(zero, send[0], recv[0], cur); torch.cuda.synchronize()
    ok = all(recv[0][r].float().mean().item() == r + 1 for r in range(n))
    say("CE allgather correct:", ok)

    g2 = lambda: torch.matmul(H, W2, out=P)
    ar = lambda: allreduce(default, P, cur)
    arc = lambda: allreduce(capped, P, cur)
    agce = lambda: allgather(zero, send[0], recv[0], cur)
    agk = lambda: allgather(default, P, plain_recv, cur)
    a2a = lambda: alltoall(zero, a2a_src, a2a_dst, cur)
    alone = {k: timed(f) for k, f in [("gemm2 chunk", g2), ("allreduce 16MiB", ar), ("allreduce 16MiB 4 CTAs", arc),
                                       ("allgather CE 16MiB", agce), ("allgather kernel 16MiB", agk),
                                       (f"alltoall CE {big*2>>20}MiB", a2a)]}
    for k, v in alone.items():
        say(f"alone  {k:28s} {v*1000:8.1f} us")

    # beside: 20 GEMMs on s_comp, K collectives on s_comm, started together
    def beside(coll, k):
        best_g, best_c = 1e9, 1e9
        for _ in range(5):
            torch.cuda.synchronize(); dist.barrier()
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
            start = torch.cuda.Event(); start.record(cur)
            s_comp.wait_event(start); s_comm.wait_event(start)
            with torch.cuda.stream(s_comp):
                ev[0].record(); [torch.matmul(H, W2, out=P) for _ in range(20)]; ev[1].record()
            with torch.cuda.stream(s_comm):
                ev[2].record(); [coll(s_comm) for _ in range(k)]; ev[3].record()
            torch.cuda.synchronize()
            best_g, best_c = min(best_g, ev[0].elapsed_time(ev[1]) / 20), min(best_c, ev[2].elapsed_time(ev[3]) / k)
        out = torch.tensor([best_g, best_c]); dist.all_reduce(out, op=dist.ReduceOp.MAX)
        return out.tolist()
    Q = torch.empty(rows, D, device="cuda", dtype=torch.bfloat16)
    for name, coll, k in [("allreduce", lambda s: allreduce(default, Q, s), 12),
                          ("allreduce 4 CTAs", lambda s: allreduce(capped, Q, s), 12),
                          ("allgather CE", lambda s: allgather(zero, send[1], recv[1], s), 12),
                          ("allgather kernel", lambda s: allgather(default, Q, plain_recv, s), 12),
                          ("alltoall CE 416MiB", lambda s: alltoall(zero, a2a_src, a2a_dst, s), 2)]:
        g, c = beside(coll, k)
        g0 = alone["gemm2 chunk"]
        say(f"beside {name:20s} gemm {g*1000:7.1f} us (alone {g0*1000:.1f}, x{g/g0:.3f})  coll {c*1000:7.1f} us")


    # the MLP in row chunks, torch's GEMMs; ce: all_gather (copy engines) + sum; cers: alltoall (copy engines),
    # sum of 1/N, all_gather (copy engines)
    Y = torch.empty(T, D, device="cuda", dtype=torch.bfloat16)
    Hfull = torch.empty(T, Fh, device="cuda", dtype=torch.bfloat16)
    maxr = 8192
    wsend = [window(zero, (maxr, D)) for _ in range(6)]
    wrecv = [window(zero, (n, maxr, D)) for _ in range(6)]
    wred = [window(zero, (maxr // n, D)) for _ in range(6)]
    wgat = [window(zero, (n, maxr // n, D)) for _ in range(6)]
    def mlp(chunks, kind):
        r0 = 0
        for c, r in enumerate(chunks):
            xs, hs, ys = X[r0:r0+r], Hfull[r0:r0+r], Y[r0:r0+r]
            torch.matmul(xs, W1, out=hs); hs.copy_(F.gelu(hs, approximate="tanh"))
            if kind in ("ce", "cers"):
                out = wsend[c][:r]
                torch.matmul(hs, W2, out=out)
            else:
                torch.matmul(hs, W2, out=ys)
            r0 += r
            if kind == "t1":
                continue
            e = torch.cuda.Event(); e.record(cur); s_comm.wait_event(e)
            if kind == "nccl":
                allreduce(default, ys, s_comm)
            elif kind == "ce":
                rv = wrecv[c].view(-1)[: n * r * D].view(n, r, D)
                allgather(zero, out, rv, s_comm)
                with torch.cuda.stream(s_comm):
                    torch.sum(rv, 0, out=ys)
            else:
                rv = wrecv[c].view(-1)[: r * D].view(n, r // n, D)
                alltoall(zero, out, rv, s_comm)
                red = wred[c][: r // n]
                gat = wgat[c].view(-1)[: r * D].view(n, r // n, D)
                with torch.cuda.stream(s_comm):
                    torch.sum(rv, 0, out=red)
                allgather(zero, red, gat, s_comm)
                with torch.cuda.stream(s_comm):
                    ys.copy_(gat.view(r, D))
        if kind != "t1":
            e = torch.cuda.Event(); e.record(s_comm); cur.wait_event(e)
    best_t1 = None
    for chunks in ([8192], [2048] * 4, [2560, 2560, 2048, 1024], [3072, 2048, 2048, 1024],
                   [2048, 2048, 2048, 1536, 512], [3072, 3072, 1536, 512]):
        t1 = timed(lambda: mlp(chunks, "t1"), reps=10)
        best_t1 = t1 if best_t1 is None else min(best_t1, t1)
        line, times = f"chunks {chunks}: t1 {t1:.3f}", {}
        for kind in ("ce", "nccl", "cers"):
            if kind == "cers" and any(r % n for r in chunks):
                continue
            times[kind] = timed(lambda: mlp(chunks, kind), reps=10) / 1e3
            line += f" | {kind} {times[kind] * 1e3:.3f} ({t1 / 1e3 / times[kind]:.3f})"
        say(line)
        if rank == 0:
            record_row(f"tp mlp N={n} chunks {':'.join(map(str, chunks))}", times, "TFLOP/s", 4 * T * D * Fh / 1e12,
                       shape=(T, D, Fh), dtype="bf16", note=f"t1 {t1:.3f} ms, chunks without collectives")
    say(f"best t1 {best_t1:.3f}")
    for kind in ("ce", "cers"):
        mlp([2560, 2560, 2048, 1024], kind); torch.cuda.synchronize(); ref = Y.clone()
        mlp([8192], "nccl"); torch.cuda.synchronize()
        err = ((ref.float() - Y.float()).abs().max() / Y.float().abs().max()).item()
        say(kind, "vs whole allreduce max|diff|/max|ref|:", err)
    dist.barrier()


if __name__ == "__main__":
    main()
