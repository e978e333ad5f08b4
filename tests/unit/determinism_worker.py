"""Run by test_determinism.py in a fresh process, so that the worker-thread count it is started with
(TESSERA_NUM_THREADS for the CPU backend's pool and cost model; CL_CONFIG_CPU_TBB_NUM_WORKERS for Intel's OpenCL
CPU runtime) is the one the compiler and the runtime read: compiles PROGRAM for argv[1] ("cpu" or "spirv") under
the profile argv[2], runs it twice on fixed inputs and prints the SHA-256 of each run's results' bytes."""

import hashlib
import sys

import numpy as np

from tessera import compiler, executor, opencl_icd, runtime
from tessera.options import CompileOptions

# A GEMM whose K spans several of the CPU GEMM's K chunks and whose M is known only at launch (the plan picks
# a blocking by the number of threads), row and column sums long enough to split over blocks, a softmax and
# elementwise exp and division.
PROGRAM = """
@function
def prog(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"], X: tensor[f32, "R", "D"]):
    return op.matmul(A, B), op.sum(X, axis=-1), op.sum(X, axis=0), op.softmax(X), op.exp(X) / (X * X + 1.0)
"""


def inputs():
    rng = np.random.default_rng(5)
    return [rng.standard_normal(s).astype(np.float32) for s in ((300, 1500), (1500, 200), (129, 4100))]


def main(target: str, profile: str) -> None:
    context = None
    if target == "spirv":
        opencl_icd.register()
        context = runtime._runtime.Context("opencl")
    image = compiler.compile_source(PROGRAM, "determinism.py", CompileOptions(target=target, numerics=profile)).image
    prog = executor.load(image, context)
    args = inputs()
    for _ in range(2):
        digest = hashlib.sha256()
        for r in prog.prog(*args):
            digest.update(np.ascontiguousarray(r).tobytes())
        print(digest.hexdigest())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
