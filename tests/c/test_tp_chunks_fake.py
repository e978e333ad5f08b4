"""The tensor-parallel MLP in whole-MLP row chunks (tessera-pipeline-collectives, rows back to the inputs) on
the fake CUDA driver and NCCL: the call's stream launches every chunk's two GEMMs back to back, never waiting
for an earlier chunk's all_reduce (no step of a later chunk touches the rows being reduced: its X rows, its H
rows and its result rows are other windows), while the communication stream reduces chunk i after waiting for
chunk i's second GEMM alone. A false wait there would serialize the pipeline whatever the GPU does."""

from hostutil import run_chunked_on_fakes

MLP = '''
from tessera import bf16, dist, f32, function, op, tensor

mesh = dist.Mesh(axes=["tp"], devices=range(2))


@function
def tp(X: tensor[bf16, "T", 256], W1: tensor[bf16, 256, 512], W2: tensor[bf16, 512, 256]):
    H = op.cast(op.gelu(op.matmul(X, W1, out_dtype=f32)), bf16)
    return op.all_reduce(op.matmul(H, W2), mesh=mesh)
'''

CALL = r"""
import sys
import numpy as np
from tessera import comm, executor, runtime, stream
ctx = runtime.select_backend("cuda")
prog = executor.load(open(sys.argv[1], "rb").read(), ctx).function("tp")
s = stream.new(context=ctx)
X = runtime.DeviceArray((1024, 256), np.uint16, ctx)
W1, W2 = runtime.DeviceArray((256, 512), np.uint16, ctx), runtime.DeviceArray((512, 256), np.uint16, ctx)
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
