"""Regression: a kernel's guard on the global thread id, `t == 0` in one kernel and `i < 1` in another of the same
module, on Intel's OpenCL CPU runtime. With the id built as WorkgroupId · WorkgroupSize + LocalInvocationId, the
second kernel wrote nothing (block of 1) or corrupted the host's heap (block of 256); the SPIR-V was spirv-val
clean. The backend now loads the GlobalInvocationId built-in (backends/spirv/compiler.py _global_ids).

The launches run in a child process, so that heap corruption fails this test instead of ending the run.
Results are exact (constants stored)."""

import json
import subprocess
import sys
import textwrap

import pytest

from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)

CHILD = textwrap.dedent('''
    import json, sys
    import numpy as np
    from tessera import compiler, opencl_icd, runtime
    from tessera.options import CompileOptions
    SOURCE = """
    @kernel
    def first(F: tensor[f32, "N"]):
        t = launch.thread_id(0)
        if t == 0:
            F[0] = 7.0

    @kernel
    def below(Y: tensor[f32, "N"], n: i64):
        i = launch.thread_id(0)
        if i < n:
            Y[i] = 5.0

    @kernel
    def below_one(Y: tensor[f32, "N"]):
        i = launch.thread_id(0)
        if i < 1:
            Y[i] = 5.0
    """
    opencl_icd.register()
    ctx = runtime._runtime.Context("opencl")
    mod = runtime.load(compiler.compile_source(SOURCE, "guards.py", CompileOptions(target="spirv")).image, ctx)
    out = {}
    for block in (1, 256):
        Y = runtime.DeviceArray.from_numpy(np.full(600, -1, np.float32), ctx)
        mod.below_one(Y, grid=3, block=block)
        out[f"below_one/{block}"] = Y.numpy().tolist()
        Z = runtime.DeviceArray.from_numpy(np.full(600, -1, np.float32), ctx)
        mod.below(Z, 300, grid=3, block=block)
        out[f"below/{block}"] = Z.numpy().tolist()
        F = runtime.DeviceArray.from_numpy(np.full(600, -1, np.float32), ctx)
        mod.first(F, grid=3, block=block)
        out[f"first/{block}"] = F.numpy().tolist()
    print(json.dumps(out))
''')


def test_equality_and_signed_guards_in_one_module(opencl, tmp_path):  # noqa: F811
    p = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=300,
                       cwd=tmp_path)  # not the checkout, whose tessera/ would shadow the installed package
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    for block in (1, 256):
        assert got[f"below_one/{block}"] == [5.0] + [-1.0] * 599, block
        assert got[f"below/{block}"] == [5.0] * min(300, 3 * block) + [-1.0] * (600 - min(300, 3 * block)), block
        assert got[f"first/{block}"] == [7.0] + [-1.0] * 599, block
