"""The programs tests/c/host_programs.c runs (examples/graph's mlp_block and transformer_block): their images'
headers, random inputs as the plans take them, what tessera.executor gives for them, and running the host.
Shared by tests/c/test_program_hosts.py (the CPU) and tests/gpu (the CUDA backend)."""

import os
import subprocess
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SOURCE = REPO / "tests" / "c" / "host_programs.c"
# (image file stem, the function the host runs)
PROGRAMS = (("mlp", "mlp_block"), ("transformer_block", "transformer_block"))


def bf16_bits(x):
    """float32 values rounded to bf16 (as tessera.executor takes them), as their uint16 bit patterns."""
    from tessera.executor import _to_storage
    return _to_storage(np.asarray(x, np.float32), "bf16")


def inputs(fn, extents, rng):
    """Random inputs of plan function `fn`, each symbolic extent bound by `extents`, as the plan stores them:
    f32 arrays, bf16 as bit patterns. Weights are scaled by 1/sqrt(their rows) so that the blocks' values stay
    O(1)."""
    from tessera.executor import numpy_dtype
    out = []
    for vid in fn.plan.args:
        spec = fn.plan.values[vid]
        shape = [int(d) if d.isdigit() else extents[d] for d in spec.dims]
        fan_in = int(spec.dims[0]) if len(shape) == 2 and spec.dims[0].isdigit() else 1   # a weight's rows
        x = (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)
        assert numpy_dtype(spec).kind == "f" and spec.dtype in ("f32", "bf16"), spec
        out.append(bf16_bits(x) if spec.dtype == "bf16" else x)
    return out


def expected(fn, ins):
    """tessera.executor's results of `fn` on `ins`, as the plan stores them (bf16 as bit patterns)."""
    want = fn(*ins)
    want = want if isinstance(want, tuple) else (want,)
    return [np.ascontiguousarray(bf16_bits(w) if fn.plan.values[v].dtype == "bf16" else np.asarray(w))
            for w, v in zip(want, fn.plan.results)]


def write_headers(images: dict, out: Path) -> None:
    """STEM.h for each image STEM, as tessera-cc --emit-header writes it, from the image alone."""
    from tessera.cheader import image_header
    for stem, image in images.items():
        (out / f"{stem}.h").write_text(image_header(image, f"{stem}.tessera", f"{stem}.h"))


def run_host(exe, backend: str, images: dict, programs: dict, extents: dict, work: Path, rng, env=None):
    """Runs the host on `images` (stem -> bytes) and `programs` (stem -> a tessera.executor program loaded from
    that image); returns {function: (the host's outputs, tessera.executor's)} as bytes, and the host's stdout."""
    results = {}
    for stem, name in PROGRAMS:
        (work / f"{stem}.tessera").write_bytes(images[stem])
        fn = programs[stem].function(name)
        ins = inputs(fn, extents, rng)
        for i, x in enumerate(ins):
            (work / f"{name}.in{i}.bin").write_bytes(np.ascontiguousarray(x).tobytes())
        results[name] = [w.tobytes() for w in expected(fn, [x.copy() for x in ins])]
    p = subprocess.run([str(exe), backend, str(work / "mlp.tessera"), str(work / "transformer_block.tessera"),
                        str(work), *(f"{k}={v}" for k, v in extents.items())], capture_output=True, text=True,
                       timeout=600, env=dict(os.environ, **(env or {})))
    failed = [line for line in p.stdout.splitlines() if line.startswith("FAIL")]
    assert p.returncode == 0 and not failed and p.stdout.rstrip().endswith("0 failed"), p.stdout + p.stderr
    return {name: ([(work / f"{name}.out{i}.bin").read_bytes() for i in range(len(want))], want)
            for name, want in results.items()}, p.stdout
