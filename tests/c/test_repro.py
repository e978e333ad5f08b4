"""Crash capture ($TESSERA_CRASH_DIR) and tessera-pack-repro: a failed launch leaves a directory with the IR
snapshot, the kernel's metadata, the launch and its memory as it was before the launch, and the log; the
bundle's replay script rebuilds the launch, runs it again and gets the same failure."""
import json
import os
import shutil
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import numpy as np
import pytest

import make_image

pytest.importorskip("tessera._runtime", reason="libtessera's Python module is not installed")

# A debug-mode launch of overrun: the kernel writes 1.0 into its 100 floats and 3 more, into the canary slack:
# the fault is found only after the kernel ran, so reproducing it means running it again.
FAULT = """
    import numpy as np, struct
    from tessera import _runtime, runtime
    ctx = _runtime.Context(debug=True)
    mod = runtime.load({image!r}, ctx)
    out = runtime.DeviceArray((100,), np.float32, ctx)
    out.copy_from(np.full(100, 7.0, np.float32))
    try:
        mod.overrun(out, 3, grid=1, block=1)
    except runtime.Error as e:
        print("launch:", e.status_name)
    print("after:", out.numpy()[0])
"""


def python(cwd, script, **env):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=cwd, capture_output=True, text=True,
                          env=dict(os.environ, **{k: str(v) for k, v in env.items()}), timeout=120)


def pack_repro():
    exe = Path(sys.executable).with_name("tessera-pack-repro")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "tessera.tools.pack_repro"]


@pytest.fixture
def capture(tmp_path, test_image):
    crashes = tmp_path / "crashes"
    p = python(tmp_path, FAULT.format(image=str(test_image)), TESSERA_CRASH_DIR=crashes)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "launch: TSR_ERROR_MEMORY_FAULT" in p.stdout and "after: 1.0" in p.stdout
    assert "crash capture in" in p.stderr
    (capture,) = crashes.iterdir()
    return capture


def test_a_failed_launch_leaves_a_capture(capture, test_image):
    assert capture.name.startswith("overrun-")
    names = sorted(p.name for p in capture.iterdir())
    assert names == ["image.tessera", "kernel.json", "launch.json", "log.txt", "ops.mlirbc", "region0.bin"]
    assert (capture / "image.tessera").read_bytes() == test_image.read_bytes()
    assert (capture / "ops.mlirbc").read_bytes() == make_image.OPS  # the image's IR snapshot
    kernel = json.loads((capture / "kernel.json").read_text())
    assert kernel["name"] == "overrun" and kernel["entry"] == "overrun_entry" and kernel["target"] == "cpu"
    assert [a["name"] for a in kernel["args"]] == ["out", "extra", "N"] and kernel["args"][0]["dims"] == [-3]
    launch = json.loads((capture / "launch.json").read_text())
    assert launch["status"] == "TSR_ERROR_MEMORY_FAULT" and "canary" in launch["message"]
    assert launch["debug"] is True and launch["grid"] == [1, 1, 1] and launch["nargs"] == 3
    out, extra, n = launch["args"]
    assert out["region"] == 0 and out["offset"] == 0 and extra["value_hex"] == "0300000000000000"
    assert n["value"] == 100
    (region,) = launch["regions"]
    assert region["memory"] == "device" and region["bytes"] == 400
    before = np.fromfile(capture / "region0.bin", np.float32)
    assert (before == 7.0).all(), "tensors are captured as they were before the launch"
    log = (capture / "log.txt").read_text()
    assert "launch of kernel 'overrun' failed: TSR_ERROR_MEMORY_FAULT" in log and "libtessera 0.2.0" in log


def test_pack_repro_bundle_replays_the_failure(capture, tmp_path):
    extra_log = tmp_path / "program.log"
    extra_log.write_text("the program's own output\n")
    bundle = tmp_path / "bug.tar.gz"
    p = subprocess.run([*pack_repro(), str(capture), "-o", str(bundle), "--log", str(extra_log)], cwd=tmp_path,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    with tarfile.open(bundle) as tar:
        names = sorted(tar.getnames())
        tar.extractall(tmp_path / "unpacked", filter="data")
    assert {"bug/replay.py", "bug/env.json", "bug/README.txt", "bug/launch.json", "bug/ops.mlirbc",
            "bug/logs/program.log"} <= set(names)
    root = tmp_path / "unpacked" / "bug"
    env = json.loads((root / "env.json").read_text())
    assert len(env["hash"]) == 64 and env["libtessera"] == "0.2.0" and "cpu" in env["backends"]

    elsewhere = tmp_path / "elsewhere"  # the bundle stands alone
    shutil.copytree(root, elsewhere)
    shutil.rmtree(capture.parent)
    p = subprocess.run([sys.executable, "replay.py", "--dump", "after"], cwd=elsewhere, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "replayed: TSR_ERROR_MEMORY_FAULT" in p.stdout and p.stdout.rstrip().endswith("reproduced")
    assert "environment hash" in p.stdout
    after = np.fromfile(elsewhere / "after" / "region0.bin", np.float32)
    assert (after == 1.0).all(), "the replay ran the kernel again (it wrote its 1.0s)"


def test_a_refused_launch_is_captured_and_replays(tmp_path, test_image):
    crashes = tmp_path / "crashes"
    p = python(tmp_path, f"""
        import numpy as np
        from tessera import runtime
        mod = runtime.load({str(test_image)!r})
        try:
            mod.fill_fixed(np.zeros(64, np.float32), 1.0, grid=1, block=32)   # compiled for a block of 64
        except runtime.Error as e:
            print(e.status_name)
    """, TESSERA_CRASH_DIR=crashes)
    assert p.stdout.strip() == "TSR_ERROR_INVALID_VALUE", p.stdout + p.stderr
    (capture,) = crashes.iterdir()
    launch = json.loads((capture / "launch.json").read_text())
    assert "compiled for block (64, 1, 1)" in launch["message"]
    assert launch["regions"][0]["memory"] == "host" and launch["regions"][0]["bytes"] == 256
    bundle = tmp_path / "refused.tar.gz"
    subprocess.run([*pack_repro(), str(capture), "-o", str(bundle)], check=True, capture_output=True)
    with tarfile.open(bundle) as tar:
        tar.extractall(tmp_path, filter="data")
    p = subprocess.run([sys.executable, "replay.py"], cwd=tmp_path / "refused", capture_output=True, text=True)
    assert p.returncode == 0 and "replayed: TSR_ERROR_INVALID_VALUE" in p.stdout, p.stdout + p.stderr


def test_a_compiled_image_gives_its_graph_ir(tmp_path):
    tessera = pytest.importorskip("tessera")
    try:
        from tessera import compiler  # noqa: F401 — needs MLIR and llvmlite
    except ImportError as e:
        pytest.skip(f"the compiler is not importable: {e}")
    from tessera.image import read_image
    image = tessera.compile("""
@kernel
def scale(s: float, X: tensor[float, "N"], Out: tensor[float, "N"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = s * X[i]
""", "scale.py")
    path = tmp_path / "scale.tessera"
    path.write_bytes(image)
    crashes = tmp_path / "crashes"
    p = python(tmp_path, f"""
        import numpy as np
        from tessera import runtime
        x = np.ones(8, np.float32)
        try:
            runtime.load({str(path)!r}).scale(2.0, x, x, grid=1, block=2048)   # over the CPU's 1024 threads
        except runtime.Error as e:
            print(e.status_name)
    """, TESSERA_CRASH_DIR=crashes)
    assert p.stdout.strip() == "TSR_ERROR_INVALID_VALUE", p.stdout + p.stderr
    (capture,) = crashes.iterdir()
    assert (capture / "ops.mlirbc").read_bytes() == read_image(image).ops
    assert (capture / "ops.mlirbc").read_bytes()[:4] == b"ML\xefR"  # MLIR bytecode
