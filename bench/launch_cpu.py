"""The fixed cost of one kernel call from Python on the CPU backend: tessera.runtime.Kernel.__call__ (its C++
fast path, runtime/python/launch_plan.cpp) against the Python launcher it replaced (Kernel.pack, then the
packed slots through _runtime.Kernel.launch), and torch.add on CPU tensors where torch is installed, in the
same process; and tsrLaunch alone from C (bench/launch_c.c, built here against libtessera), the floor. Then the
same for a function: tessera.executor's call of a one-kernel @function (relu(X + Y) on 4 f32) with numpy arrays
(its quick path, tessera._runtime.Function.call_plain) and with DeviceArrays (the general path, results
allocated from the context's pool), against the binding's tsrFunctionCall alone on preallocated results.

    python bench/launch_cpu.py

A 1-element saxpy (examples/saxpy.py; grid 1, block 32), so that the time is the launch's: best of 7 rounds of
20,000 calls after a warm-up.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import timeit

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import machine, parse_args, record_row  # noqa: E402

EXAMPLE = os.path.join(os.path.dirname(__file__), os.pardir, "examples", "saxpy.py")
FUNCTION = """
@function
def f(X: tensor[f32, 4], Y: tensor[f32, 4]):
    return op.relu(X + Y)
"""


def per_call(fn, number: int = 20000) -> float:
    for _ in range(1000):
        fn()
    return min(timeit.repeat(fn, number=number, repeat=7)) / number


def main() -> None:
    parse_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    import tessera
    from tessera import executor, runtime
    print(f"machine: {machine()}")
    with open(EXAMPLE, encoding="utf-8") as f:
        image = tessera.compile(f.read(), EXAMPLE, target="cpu")
    mod = runtime.load(image)
    k = mod.saxpy
    a = 1.5
    x = np.ones(1, np.float32)
    o = np.empty_like(x)

    def python_launcher():  # what Kernel.__call__ did before the fast path
        k._native.launch(runtime._dim3(1, "grid"), runtime._dim3(32, "block"), 0, k.pack((a, x, x, o)), None,
                         0.0, 0.0)

    rows = [("tessera Kernel.__call__", per_call(lambda: k(a, x, x, o, grid=1, block=32))),
            ("Python launcher (pack + launch)", per_call(python_launcher))]
    f = executor.load(tessera.compile(FUNCTION, "launch_cpu.py", target="cpu")).f
    X, Y, R = np.ones(4, np.float32), np.ones(4, np.float32), np.empty(4, np.float32)
    Xd, Yd = runtime.DeviceArray.from_numpy(X), runtime.DeviceArray.from_numpy(Y)
    rows += [("executor call, numpy arrays", per_call(lambda: f(X, Y))),
             ("executor call, DeviceArrays", per_call(lambda: f(Xd, Yd))),
             ("_runtime.Function.call alone", per_call(lambda: f._native.call((X, Y), (R,), None, 0)))]
    try:
        import torch
        tx, to = torch.ones(1), torch.empty(1)
        rows.append(("torch.add(out=), CPU tensors", per_call(lambda: torch.add(tx, tx, alpha=a, out=to))))
    except ImportError:
        pass
    with tempfile.TemporaryDirectory() as d:
        exe, path = os.path.join(d, "launch_c"), os.path.join(d, "saxpy.tessera")
        with open(path, "wb") as f:
            f.write(image)
        flags = subprocess.run(["tessera-config", "--cflags", "--libs"], check=True, capture_output=True,
                               text=True).stdout.split()
        subprocess.run([os.environ.get("CC", "cc"), "-O2", "-std=c11", os.path.join(os.path.dirname(__file__),
                        "launch_c.c"), "-o", exe, *flags], check=True)
        env = dict(os.environ, TESSERA_BACKEND="cpu")
        out = subprocess.run([exe, path], check=True, capture_output=True, text=True, env=env).stdout.split()
        rows.append(("tsrLaunch alone, from C", float(out[1]) * 1e-6))
    r = record_row("one call, n=1", dict(rows), shape=(1,), dtype="f32", note="time per call")
    for side in (r["ours"], *r["peers"]):
        print(f"one call, n=1: {side['name']:<34} {side['time_s'] * 1e6:7.2f} us   "
              f"/tessera {side['time_s'] / r['ours']['time_s']:6.2f}")


if __name__ == "__main__":
    main()
