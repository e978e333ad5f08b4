"""Helpers the C-host tests import by name (conftest.py is not importable by name once several test folders
have one)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def run(cmd, **kw):
    """Runs a command; on failure, fails the test with its output."""
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if p.returncode != 0:
        pytest.fail(f"{' '.join(map(str, cmd))} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def allocation_streams(lines):
    """The CUDA backend's allocation streams in a fake driver's log (cuda_backend.c, ALLOC_STREAM): non-blocking
    streams ("flags=1") that never capture a graph, where only the memory pool's allocations are queued and
    waited for (a wait there waits for no kernel)."""
    created = {line.split()[1] for line in lines
               if line.startswith("cuStreamCreateWithPriority") and " flags=1 " in line}
    return created - {line.split()[1] for line in lines if line.startswith("cuStreamBeginCapture")}


def without_allocation_waits(lines, every=None):
    """`lines` without the waits for the allocation streams of `every` (default `lines`), the full log."""
    streams = allocation_streams(every if every is not None else lines)
    return [line for line in lines if not (line.startswith("cuStreamSynchronize") and line.split()[1] in streams)]


def run_host_function(exe, image, name, inputs, out_shapes, tmp_path, args=()):
    """Runs function `name` of `image` (bytes) in host_function.c (`exe`) on `inputs` (numpy arrays as the plan
    stores them) with extra `args` (--bad, --backend NAME); returns its output files' bytes and its stdout."""
    import numpy as np  # lazy: the other helpers need no numpy
    lines = [f"in {x.ndim} {' '.join(map(str, x.shape))}" for x in inputs]
    lines += [f"out {len(s)} {' '.join(map(str, s))}" for s in out_shapes]
    (tmp_path / "shapes.txt").write_text("\n".join(lines) + "\n")
    for i, x in enumerate(inputs):
        (tmp_path / f"in{i}.bin").write_bytes(np.ascontiguousarray(x).tobytes())
    path = tmp_path / "image.tessera"
    path.write_bytes(image)
    p = subprocess.run([str(exe), str(path), name, str(tmp_path), *args], capture_output=True, text=True, timeout=300)
    failed = [line for line in p.stdout.splitlines() if line.startswith("FAIL")]
    assert p.returncode == 0 and not failed and p.stdout.rstrip().endswith("0 failed"), p.stdout + p.stderr
    return [(tmp_path / f"out{i}.bin").read_bytes() for i in range(len(out_shapes))], p.stdout


def run_chunked_on_fakes(source, script, tmp_path, driver_dir, nccl_lib, unset=()):
    """Compiles `source` (function `tp`) for sm_90a with collective_chunks=4 and runs `script` on the image
    against the fake CUDA driver in `driver_dir` and the fake NCCL `nccl_lib`, with the variables that would
    change what they log unset; fails the test if the script fails. Returns the NCCL and CUDA logs' lines."""
    compiler = pytest.importorskip("tessera.compiler")
    image = tmp_path / "tp.tessera"
    image.write_bytes(compiler.compile_source(source, "tp.py", compiler.CompileOptions(
        target="ptx", arch="sm_90a", collective_chunks=4)).image)
    log, cuda_log = tmp_path / "nccl.log", tmp_path / "cuda.log"
    env = dict(os.environ, LD_LIBRARY_PATH=str(driver_dir), TESSERA_NCCL_LIBRARY=str(nccl_lib),
               FAKE_NCCL_LOG=str(log), FAKE_CUDA_LOG=str(cuda_log))
    for name in ("TESSERA_BACKEND", "TESSERA_COMM_BACKEND", "FAKE_NCCL_HANG", "TESSERA_COMM_UNITS", *unset):
        env.pop(name, None)
    p = subprocess.run([sys.executable, "-c", script, str(image), str(cuda_log)], capture_output=True, text=True,
                       timeout=120, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    return log.read_text().splitlines(), cuda_log.read_text().splitlines()
