"""Host overhead of one call of a 10-step @function from C (tsrFunctionCall) on the CPU backend, against the
same kernels launched directly with tsrLaunch, and Python's executor call of the same function, side by side.

    python bench/function_call_c.py

The function below compiles to ten launches on 16x16 f32 tensors (kernel time is a few microseconds). The C
program (function_call_c.c, built here with the C compiler against libtessera via tessera-config) times, best
of 30 rounds of 100 calls after a warm-up, one tsrFunctionCall and the plan's launches issued directly with
tsrLaunch on buffers of its own (the launches are read from the plan here, as the executor resolves them).
Overhead per call = call time - direct launches' time: what the executor adds (argument checks, extent
evaluation, intermediates from the pool). Then both on a stream, 100 queued back to back and one synchronize
per round (per call: what a call that does not wait for its stream costs while the stream's thread runs the
kernels).
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

HERE = os.path.dirname(os.path.abspath(__file__))

SOURCE = """
@function
def chain(X: tensor[f32, 16, 16], W: tensor[f32, 16, 16]):
    h = op.relu(X @ W)
    h = op.softmax(h)
    h = op.relu(h @ W)
    h = op.softmax(h)
    h = op.relu(h @ W)
    h = op.softmax(h)
    h = op.relu(h @ W)
    h = op.softmax(h)
    h = op.relu(h @ W)
    return op.softmax(h)
"""


def dimension_args(records, shapes) -> list[str]:
    """The dimension arguments a launch derives from its tensors' shapes (as tessera.runtime.Kernel does)."""
    from tessera.abi import DIM
    dims = {}
    for a, shape in zip(records, shapes):
        for d, extent in zip(a.dims, shape or ()):
            if d < 0:
                dims[-d - 1] = extent
    return [f"I {dims[i]}" for i, a in enumerate(records) if a.kind == DIM]


def launches(p, units: int, kernels) -> tuple[list[str], list[str], list[str]]:
    """(values, the call's tensors, launches) as function_call_c.c reads them, from plan `p` (static extents:
    ArgsSteps without batch or alternatives, and ViewSteps, as this function has) and the module's `kernels`
    (tessera.runtime.Kernel, for their dimension arguments)."""
    from tessera import plan as plans
    env: dict[str, int] = {}
    ids = {vid: i for i, vid in enumerate(p.values)}
    shapes = {vid: [plans.evaluate(d, env) for d in v.dims] for vid, v in p.values.items()}
    values = [str(int(np.prod(s, dtype=np.int64)) * 4) for s in shapes.values()]
    tensors = [f"{ids[v]} {len(shapes[v])} {' '.join(map(str, shapes[v]))}" for v in (*p.args, *p.results)]
    out = []
    for step in p.steps:
        if isinstance(step, plans.ArgsStep):
            if step.batch is not None or step.prefer:
                raise SystemExit(f"step {step.kernel}: batched or alternative steps are not replayed here")
            scope = dict(env, DEVICE_UNITS=units)
            local = dict(scope, **{k: plans.evaluate(e, scope) for k, e in step.env.items()})
            args = [f"T {ids[a.value]}" if isinstance(a, plans.TensorArg) else
                    f"F {a.f32!r}" if isinstance(a, plans.F32Arg) else f"I {plans.evaluate(a.i64, local)}"
                    for a in step.args]
            seen = [[plans.evaluate(d, local) for d in a.shape] if isinstance(a, plans.TensorArg) else None
                    for a in step.args]
            smem = step.smem
        elif isinstance(step, plans.ViewStep):
            R, C, B = (plans.evaluate(e, env) for e in (step.R, step.C, step.B))
            local = dict(env, R=R, C=C, B=B)
            args = [f"T {ids[t.value]}" for t in step.tensors]
            args += [f"I {plans.evaluate(e, env)}" for e in step.scalars]
            views = {"matrix": (R, C), "cols": (C,), "rows": (R,), "bmn": (B, R, C), "bnm": (B, C, R)}
            seen = [list(views[t.view]) if t.view != "scalar" else [int(np.prod(shapes[t.value]))]
                    for t in step.tensors] + [None] * len(step.scalars)
            smem = 0
        else:
            raise SystemExit(f"a {type(step).__name__} is not replayed here")
        args += dimension_args(kernels[step.kernel].record.args, seen)
        grid = [plans.evaluate(g, local) for g in step.grid]
        out.append(f"{step.kernel} {' '.join(map(str, grid))} {' '.join(map(str, step.block))} {smem} {len(args)} "
                   + " ".join(args))
    return values, tensors, out


def main() -> None:
    parse_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    from tessera import compiler, executor, image as images, plan as plans, runtime
    print(f"machine: {machine()}")
    image = compiler.compile_source(SOURCE, "function_call_c.py").image
    p = plans.decode(images.read_image(image).section(plans.SECTION))["chain"]
    units = runtime.default_context().properties["compute_units"]
    mod = runtime.load(image)
    values, tensors, steps = launches(p, units, {name: mod.kernel(name) for name in mod.kernel_names})
    flags = subprocess.run(["tessera-config", "--cflags", "--libs"], check=True, capture_output=True,
                           text=True).stdout.split()
    with tempfile.TemporaryDirectory() as d:
        exe, image_path, spec = (os.path.join(d, n) for n in ("bench", "chain.tessera", "launches.txt"))
        subprocess.run([os.environ.get("CC", "cc"), "-O2", "-std=c11", os.path.join(HERE, "function_call_c.c"),
                        "-o", exe, *flags], check=True)
        with open(image_path, "wb") as f:
            f.write(image)
        with open(spec, "w") as f:
            f.write(f"{len(values)} {' '.join(values)}\n{len(p.args)} {len(p.results)}\n" + "\n".join(tensors)
                    + f"\n{len(steps)}\n" + "\n".join(steps) + "\n")
        run = subprocess.run([exe, image_path, "chain", spec], capture_output=True, text=True)
        if run.returncode:
            raise SystemExit(f"function_call_c failed: {run.stderr}")
        line = run.stdout.split()
    n, call, direct, stream_call, stream_direct = int(line[1]), *map(float, line[3:10:2])
    prog = executor.load(image)
    rng = np.random.default_rng(0)
    X, W = (rng.standard_normal((16, 16), dtype=np.float32) * 0.1 for _ in range(2))
    prog.chain(X, W)
    py = min(timeit.repeat(lambda: prog.chain(X, W), number=100, repeat=30)) / 100 * 1e6
    note = "time per call"
    r = record_row(f"{n}-step @function, one call", {"tsrFunctionCall": call * 1e-6, "direct tsrLaunch": direct * 1e-6,
                                                      "Python executor call": py * 1e-6}, shape=(16, 16), dtype="f32",
                   note=note)
    call, direct, py = (s["time_s"] * 1e6 for s in (r["ours"], *r["peers"]))
    r = record_row(f"{n}-step @function, 100 on a stream", {"tsrFunctionCall": stream_call * 1e-6,
                                                              "direct tsrLaunch": stream_direct * 1e-6},
                   shape=(16, 16), dtype="f32", note=note)
    stream_call, stream_direct = (s["time_s"] * 1e6 for s in (r["ours"], *r["peers"]))
    print(f"{n}-step @function, CPU backend, one call from C:")
    print(f"  tsrFunctionCall {call:8.2f} us   direct tsrLaunch x{n} {direct:8.2f} us   "
          f"overhead {call - direct:6.2f} us per call (target <= 5 us)   call/direct {call / direct:5.3f}")
    print(f"  on a stream, 100 queued then one synchronize: tsrFunctionCall {stream_call:8.2f} us   "
          f"direct tsrLaunch x{n} {stream_direct:8.2f} us   call/direct {stream_call / stream_direct:5.3f}")
    print(f"  Python executor call (tessera.executor) {py:8.2f} us   Python/C {py / call:5.2f}x")


if __name__ == "__main__":
    main()
