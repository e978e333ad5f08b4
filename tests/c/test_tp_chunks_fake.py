"""The tensor-parallel MLP in whole-MLP row chunks (tessera-pipeline-collectives, rows back to the inputs) on
the fake CUDA driver and NCCL: the call's stream launches every chunk's two GEMMs back to back, never waiting
for an earlier chunk's all_reduce (no step of a later chunk touches the rows being reduced: its X rows, its H
rows and its result rows are other windows), while the communication stream reduces chunk i after waiting for
chunk i's second GEMM alone. A false wait there would serialize the pipeline whatever the GPU does."""

import pytest

from hostutil import run_chunked_on_fakes

MLP = '''
from tessera import bf16, dist, f32, function, op, tensor

mesh = dist.Mesh(axes=["tp"], devices=range(2))


@function
def tp(X: tensor[bf16, "T", 256], W1: tensor[bf16, 256, 512], W2: tensor[bf16, 512, 256]):
    H = op.cast(op.gelu(op.matmul(X, W1, out_dtype=f32)), bf16)
    return op.all_reduce(op.matmul(H, W2), mesh=mesh)
'''

# what each child process starts with: the image's "tp" function, a stream; MLP_ARGS: the MLP's operands
PRELUDE = r"""
import sys
import numpy as np
from tessera import comm, executor, runtime, stream
ctx = runtime.select_backend("cuda")
prog = executor.load(open(sys.argv[1], "rb").read(), ctx).function("tp")
s = stream.new(context=ctx)
"""
MLP_ARGS = r"""X = runtime.DeviceArray((1024, 256), np.uint16, ctx)
W1, W2 = runtime.DeviceArray((256, 512), np.uint16, ctx), runtime.DeviceArray((512, 256), np.uint16, ctx)
"""

CALL = PRELUDE + MLP_ARGS + r"""
c = comm.Communicator.create(2, 1, comm.unique_id("nccl", ctx), backend="nccl", timeout=5, context=ctx)
s.synchronize()
with open(sys.argv[2], "a") as log:
    print("call", file=log)
prog(X, W1, W2, comm=c, stream=s)
s.synchronize()
c.close()
"""


def test_the_chunks_launch_without_waiting_for_earlier_chunks(fake_driver, fake_nccl, tmp_path):
    nccl, lines = run_chunked_on_fakes(MLP, CALL, tmp_path, fake_driver(), fake_nccl, unset=("TESSERA_GEMM_GRID",))
    reduces = [line.split() for line in nccl if line.startswith("ncclAllReduce")]
    # four chunks of 256 rows of the [1024, 256] result, each reduced in place on the communication stream
    assert [r[1:] for r in reduces] == [["count=65536", "type=9", "op=0", "inplace", reduces[0][-1]]] * 4, reduces
    side = reduces[0][-1]
    lines = lines[lines.index("call") + 1:]
    launches = [line for line in lines if line.startswith("cuLaunchKernel")]
    assert len(launches) == 8, launches   # two GEMMs per chunk
    main = launches[0].split()[-1]
    assert main != side

    order = [(line.split()[0], line.split()[-1]) for line in lines
             if line.startswith(("cuLaunchKernel", "cuStreamWaitEvent")) and line.split()[-1] in (main, side)]
    # per chunk: its two GEMMs on the call's stream, then the communication stream waits for them (and its
    # all_reduce is queued there); no wait of the call's stream until every chunk is launched, then one per chunk
    chunk = [("cuLaunchKernel", main), ("cuLaunchKernel", main), ("cuStreamWaitEvent", side)]
    assert order == chunk * 4 + [("cuStreamWaitEvent", main)] * 4, order


# One GEMM per chunk, N at the launch: each chunk's grid is min(tiles, DEVICE_UNITS) (sm_90a, persistent).
TP_N = '''
from tessera import bf16, dist, function, op, tensor

mesh = dist.Mesh(axes=["tp"], devices=range(2))


@function
def tp(X: tensor[bf16, "T", 128], W: tensor[bf16, 128, "N"]):
    return op.all_reduce(op.matmul(X, W), mesh=mesh)
'''

GRIDS = PRELUDE + r"""
X = runtime.DeviceArray((2048, 128), np.uint16, ctx)
for units in (4, 16):
    c = comm.Communicator.create(2, 1, comm.unique_id("nccl", ctx), backend="nccl", timeout=5, context=ctx,
                                 units=units)
    for n in (16384, 8448, 12800):
        W = runtime.DeviceArray((128, n), np.uint16, ctx)
        s.synchronize()
        with open(sys.argv[2], "a") as log:
            print("call", units, n, file=log)
        prog(X, W, comm=c, stream=s)
        s.synchronize()
    c.close()
"""


def test_units_never_cost_a_gemm_round(fake_driver, fake_nccl, tmp_path, monkeypatch):
    """comm.h, units (function.c, spare_units): a persistent GEMM launched while a chunk's all_reduce is in flight
    leaves min(units, slack) SMs free, slack = SMs - ceil(tiles / rounds), rounds = ceil(tiles / SMs). On 132 SMs
    (the fake device told so) with chunks of 512 rows: N=16384 is 256 or 512 tiles (2 or 4 rounds of 128: slack
    4), N=8448 132 or 264 (1 or 2 rounds of 132: slack 0), N=12800 200 or 400 (2 or 4 rounds of 100: slack 32),
    whichever tile the launch picks; so units=4 leaves 4, 0, 4 free and units=16 4, 0, 16. The first chunk
    launches with nothing in flight: all 132. Leaving `units` free whatever the tiles (the rule before) gives 128
    and 116 for every N."""
    monkeypatch.setenv("FAKE_CUDA_SMS", "132")
    _, lines = run_chunked_on_fakes(TP_N, GRIDS, tmp_path, fake_driver(), fake_nccl, unset=("TESSERA_GEMM_GRID",))
    at = [i for i, line in enumerate(lines) if line.startswith("call ")] + [len(lines)]
    grids = {tuple(int(v) for v in lines[a].split()[1:]): [int(line.rsplit(" ", 1)[1]) for line in lines[a:b]
                                                           if line.startswith("params:")]
             for a, b in zip(at, at[1:])}
    free = {(4, 16384): 4, (4, 8448): 0, (4, 12800): 4, (16, 16384): 4, (16, 8448): 0, (16, 12800): 16}
    assert grids == {k: [132] + [132 - f] * 3 for k, f in free.items()}, grids


TAIL = PRELUDE + MLP_ARGS + r"""
for units in (4, 0):
    c = comm.Communicator.create(2, 1, comm.unique_id("nccl", ctx), backend="nccl", timeout=5, context=ctx,
                                 units=units)
    prog(X, W1, W2, comm=c, stream=s)
    s.synchronize()
    c.all_reduce(X, out=X, dtype="bf16", stream=s)  # a direct operation: never alone
    s.synchronize()
    c.close()
"""


def test_the_last_chunk_s_all_reduce_runs_uncapped(fake_driver, fake_nccl, tmp_path, monkeypatch):
    """comm_nccl.c, `wide`: a communicator with units splits, beside its capped blocking communicator, an
    uncapped one of the same ranks (color 0, keyed by rank, no maxCTAs); the whole-MLP chunks' all_reduces run on
    the capped one but the last's, which no kernel step follows (function.c, run_reduced: alone), and which runs
    on the uncapped one; a direct all_reduce stays capped. Release destroys all three. Without units there is one
    communicator, uncapped."""
    monkeypatch.setenv("FAKE_NCCL_LOG_CTAS", "1")
    nccl, _ = run_chunked_on_fakes(MLP, TAIL, tmp_path, fake_driver(), fake_nccl, unset=("TESSERA_GEMM_GRID",))
    first = nccl.index("ncclCommInitRankConfig nranks=2 rank=1 id=fake-nccl-id-1 magic=0xcafebeef version=21700 "
                       "blocking=0 NCCL_NVLS_ENABLE=0 maxCTAs=4")
    second = next(i for i, line in enumerate(nccl) if i > first and line.startswith("ncclCommInitRankConfig"))
    assert "maxCTAs" not in nccl[second], nccl[second]
    assert nccl[first + 1:first + 3] == ["ncclCommSplit color=0 key=1 blocking=1 maxCTAs=4 NCCL_RUNTIME_CONNECT=0",
                                         "ncclCommSplit color=0 key=1 blocking=1 NCCL_RUNTIME_CONNECT=0"], nccl
    assert [line for line in nccl[second:] if line.startswith("ncclCommSplit")] == \
        ["ncclCommSplit color=0 key=1 blocking=1 NCCL_RUNTIME_CONNECT=0"], nccl
    reduces = [line.split() for line in nccl if line.startswith("ncclAllReduce")]
    side, direct = reduces[0][-1], reduces[4][-1]
    chunk = ["count=65536", "type=9", "op=0", "inplace"]
    assert [r[1:] for r in reduces] == \
        [chunk + ["maxCTAs=4", side]] * 3 + [chunk + ["uncapped", side]] + \
        [["count=262144", "type=9", "op=0", "inplace", "maxCTAs=4", direct]] + \
        [chunk + ["uncapped", side]] * 4 + [["count=262144", "type=9", "op=0", "inplace", "uncapped", direct]], reduces
    assert nccl[second - 4:second] == ["ncclCommDestroy rank=1"] * 3 + ["ncclGetUniqueId"] and nccl[-2:] == ["ncclCommDestroy rank=1"] * 2
    assert not [line for line in nccl if line.startswith("refused") or "Abort" in line], nccl


FAULT = PRELUDE + "import os, time\n" + MLP_ARGS + r"""
c = comm.Communicator.create(2, 1, comm.unique_id("nccl", ctx), backend="nccl", timeout=1, context=ctx, units=4)
os.environ["FAKE_NCCL_HANG"] = "MODE"  # read by the fake at each call (run_chunked_on_fakes unsets it)
try:
    prog(X, W1, W2, comm=c, stream=s)
    s.synchronize()
    c.all_reduce(X, out=X, dtype="bf16", stream=s)
    s.synchronize()
except Exception as e:
    print("failed:", e)
for _ in range(500):  # until the communicator reports the fault (the monitor may see it after the calls return)
    try:
        c.check()
    except Exception as e:
        print("fault:", e)
        break
    time.sleep(0.01)
else:
    sys.exit("no fault reported")
c.close()
"""


@pytest.mark.parametrize("mode", ["gpu", "async"])
def test_a_fault_aborts_the_uncapped_communicator_too(fake_driver, fake_nccl, tmp_path, mode):
    """A peer that stops (gpu: NCCL's kernels spin until the monitor aborts at the deadline) or NCCL's
    asynchronous error (async) aborts all three NCCL communicators of a communicator with units: the capped
    blocking one, its uncapped sibling and their non-blocking parent; none is destroyed (which could wait for
    the peer)."""
    nccl, _ = run_chunked_on_fakes(MLP, FAULT.replace("MODE", mode), tmp_path, fake_driver(), fake_nccl, unset=("TESSERA_GEMM_GRID",))
    assert [line for line in nccl if line.startswith("ncclCommSplit")] == \
        ["ncclCommSplit color=0 key=1 blocking=1 maxCTAs=4 NCCL_RUNTIME_CONNECT=0",
         "ncclCommSplit color=0 key=1 blocking=1 NCCL_RUNTIME_CONNECT=0"], nccl
    assert nccl.count("ncclCommAbort rank=1") == 3 and not [line for line in nccl if "Destroy" in line], \
        "\n".join(nccl)
