"""Helpers the C-host tests import by name (conftest.py is not importable by name once several test folders
have one)."""

import subprocess
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
