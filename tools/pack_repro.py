"""tessera-pack-repro: bundles a crash capture into a self-contained, replayable archive.

    tessera-pack-repro CRASH_DIR [-o BUNDLE.tar.gz] [--log FILE ...]

CRASH_DIR is a directory libtessera wrote under $TESSERA_CRASH_DIR when a launch failed (docs/runtime.md,
"Crash capture"). The bundle holds everything in it — the image, its IR snapshot, the kernel's metadata, the
launch and the memory its tensors pointed to, the runtime's log — plus the extra logs given with --log (a
metrics log, the program's output), env.json (the environment and its hash) and replay.py, which re-runs the
launch through libtessera:

    tar xzf BUNDLE.tar.gz && python BUNDLE/replay.py     # exit 0: the failure reproduced

replay.py rebuilds the memory (device allocations of the recorded sizes, with the tensors at their recorded
offsets, filled with the captured bytes), launches the kernel with the recorded shape and arguments on a
context like the original (same backend, debug mode), and compares the status with the recorded one. It also
says whether the environment hash matches: a different machine or library may behave differently.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import io
import json
import os
import platform
import sys
import tarfile
import time
from pathlib import Path

from . import overwrite
from .errors import ToolError, check_writable, tool_main

CAPTURE_FILES = ("image.tessera", "kernel.json", "launch.json", "log.txt")


def environment() -> dict:
    """What the behavior of a launch may depend on, and its hash (over everything but the hash)."""
    # lazy: only the environment record needs numpy's and libtessera's versions
    import numpy
    from tessera import _runtime

    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        cpu = platform.processor()
    env = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "numpy": numpy.__version__,
        "libtessera": ".".join(map(str, _runtime.version())),
        "abi": ".".join(map(str, _runtime.abi_version())),
        "backends": sorted(_runtime.backends()),
        "variables": {k: v for k, v in sorted(os.environ.items()) if k.startswith("TESSERA_")},
    }
    env["hash"] = hashlib.sha256(json.dumps(env, sort_keys=True).encode()).hexdigest()
    return env


REPLAY = '''"""Replays the failed launch of this bundle (written by tessera-pack-repro): python replay.py [--dump DIR]

Exit status 0 when the replay ends with the recorded status (the failure reproduced), 1 when it does not,
2 when the launch cannot be rebuilt. --dump DIR writes the memory regions as they are after the replay.
"""
import argparse
import hashlib
import json
import os
import platform
import struct
import sys

import numpy as np

from tessera import _runtime

HERE = os.path.dirname(os.path.abspath(__file__))


{environment}


def host_buffer(size):
    """A 64-byte aligned host buffer of `size` bytes and its address."""
    raw = np.zeros(size + 64, np.uint8)
    offset = -raw.ctypes.data % 64
    return raw[offset:offset + size], raw.ctypes.data + offset


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dump", help="write the memory regions after the replay into this directory")
    ns = parser.parse_args()
    if ns.dump and os.path.isdir(ns.dump) and os.path.samefile(ns.dump, HERE):
        print("replay.py: error: --dump would overwrite the captured memory: give another directory")
        return 2
    launch = json.load(open(os.path.join(HERE, "launch.json")))
    recorded = json.load(open(os.path.join(HERE, "env.json")))
    now = environment()
    print(f"environment hash {{now['hash'][:16]}}: " + ("matches the capture's" if now["hash"] == recorded["hash"]
          else f"differs from the capture's {{recorded['hash'][:16]}} (see env.json)"))

    ctx = _runtime.Context(launch["backend"], launch["debug"])
    module = ctx.load_module(open(os.path.join(HERE, "image.tessera"), "rb").read())
    kernel = module.kernel(launch["kernel"])

    regions = {{}}  # id -> (address, host buffer or None)
    for r in launch["regions"]:
        if r["file"] is None:
            continue
        data = np.fromfile(os.path.join(HERE, r["file"]), np.uint8)
        if r["memory"] == "device":
            address, buffer = ctx.alloc(r["bytes"]), None
            if r["bytes"]:
                ctx.copy_to_device(address, data)
        else:
            buffer, address = host_buffer(r["bytes"])
            buffer[:] = data
        regions[r["id"]] = address, buffer

    slots = []
    for a in launch["args"][:launch["nargs"]]:
        if a.get("missing"):
            print(f"cannot replay: argument {{a['index']}} ('{{a['name']}}') was missing from the launch")
            return 2
        value = bytes.fromhex(a["value_hex"])
        if a["kind"] == "tensor" and int(a["address"], 16):
            if a.get("region") not in regions:
                print(f"cannot replay: the memory of tensor '{{a['name']}}' was not captured")
                return 2
            value = struct.pack("<Q", regions[a["region"]][0] + a["offset"])
        slots.append(value)
    slots += [bytes(8)] * (launch["nargs"] - len(slots))

    stream = _runtime.Stream(ctx) if launch["stream"] else None
    status, message = "TSR_SUCCESS", ""
    try:
        kernel.launch(tuple(launch["grid"]), tuple(launch["block"]), launch["smem_bytes"], slots, stream)
        if stream is not None:
            stream.synchronize()
    except _runtime.Error as e:
        status, message = e.status_name, str(e)
    print(f"recorded: {{launch['status']}}: {{launch['message']}}")
    print(f"replayed: {{status}}: {{message}}")
    if ns.dump:
        os.makedirs(ns.dump, exist_ok=True)
        for r in launch["regions"]:
            if r["id"] not in regions:
                continue
            address, buffer = regions[r["id"]]
            if buffer is None:
                buffer = np.empty(r["bytes"], np.uint8)
                if r["bytes"]:
                    ctx.copy_to_host(buffer, address)
            buffer.tofile(os.path.join(ns.dump, r["file"]))
    reproduced = status == launch["status"]
    print("reproduced" if reproduced else "NOT reproduced")
    return 0 if reproduced else 1


if __name__ == "__main__":
    sys.exit(main())
'''


def replay_script() -> str:
    return REPLAY.format(environment=inspect.getsource(environment))


def pack(capture: Path, out: Path, logs: list[Path]) -> Path:
    missing = [name for name in CAPTURE_FILES if not (capture / name).is_file()]
    if missing:
        raise SystemExit(f"tessera-pack-repro: {capture} is not a crash capture (missing {', '.join(missing)})")
    root = out.name.removesuffix(".tar.gz").removesuffix(".tgz")
    launch = json.loads((capture / "launch.json").read_text())
    generated = {
        "env.json": json.dumps(environment(), indent=2, sort_keys=True) + "\n",
        "replay.py": replay_script(),
        "README.txt": f"Replay of a failed launch of kernel '{launch['kernel']}' ({launch['status']}).\n"
                      f"Packed {time.strftime('%Y-%m-%d %H:%M:%S')} from {capture}.\n\n"
                      f"    python replay.py            # exit 0: the failure reproduced\n"
                      f"    python replay.py --dump out # also write the memory after the replay\n",
    }
    with tarfile.open(out, "w:gz") as tar:
        for path in sorted(capture.iterdir()):
            if path.is_file():
                tar.add(path, arcname=f"{root}/{path.name}")
        for log in logs:
            tar.add(log, arcname=f"{root}/logs/{log.name}")
        for name, text in generated.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{root}/{name}")
            info.size, info.mtime, info.mode = len(data), int(time.time()), 0o755 if name.endswith(".py") else 0o644
            tar.addfile(info, io.BytesIO(data))
    return out


@tool_main("tessera-pack-repro")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tessera-pack-repro", description=__doc__.splitlines()[0])
    parser.add_argument("capture", type=Path, help="a crash capture directory (under $TESSERA_CRASH_DIR)")
    parser.add_argument("-o", "--output", type=Path, help="the archive to write (default: CAPTURE.repro.tar.gz)")
    parser.add_argument("--log", type=Path, action="append", default=[], help="another log to bundle")
    ns = parser.parse_args(argv)
    for log in ns.log:
        if not log.is_file():
            parser.error(f"--log {log}: no such file")
    out = ns.output or ns.capture.with_name(ns.capture.name + ".repro.tar.gz")
    # the archive must not replace what it bundles, nor grow inside the directory it reads
    inputs = {f"--log {log}": str(log) for log in ns.log}
    if ns.capture.is_dir():
        inputs.update({f"{p.name} of the capture": str(p) for p in ns.capture.iterdir()})
    problem = overwrite.clash(inputs, {"-o": str(out)})
    if not problem and overwrite.inside(str(out), str(ns.capture)):
        problem = f"-o {out} lies inside the capture directory {ns.capture}, which the archive bundles"
    if problem:
        raise ToolError(problem)
    if not ns.capture.is_dir():
        raise ToolError(f"{ns.capture}: not a crash capture directory")
    check_writable(str(out), "-o")
    print(pack(ns.capture, out, ns.log))
    return 0


if __name__ == "__main__":
    sys.exit(main())
