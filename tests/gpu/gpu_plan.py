"""Runs a Graph IR function's launch plan on a GPU (tessera.executor's steps, with the tensors in device
memory): the GPU tests' counterpart of the CPU executor. A module of its own, not conftest.py, because test
modules import it by name and every test folder has a conftest."""

import numpy as np


def run_plan(module, name: str, *arrays):
    """Runs Graph IR function `name` of a loaded image on DeviceArrays (tessera.executor's steps, with the
    tensors in device memory); returns its results as numpy arrays."""
    from tessera import plan as plans
    from tessera.runtime import DeviceArray

    section = module.image.section(plans.SECTION)
    p = plans.decode(section)[name]
    env, store = {}, {}
    for vid, a in zip(p["args"], arrays):
        for d, n in zip(p["values"][vid]["dims"], a.shape):
            if not d.isdigit():
                env[d] = n
        store[vid] = DeviceArray.from_numpy(a, module.context)
    for step in p["steps"]:
        if "alias" in step:
            spec = p["values"][step["alias"]]
            store[step["alias"]] = store[step["of"]].reshape([plans.evaluate(d, env) for d in spec["dims"]])
            continue
        R, C = plans.evaluate(step["R"], env), plans.evaluate(step["C"], env)
        B = plans.evaluate(step.get("B", "1"), env)
        local = dict(env, R=R, C=C, B=B)
        tensors = []
        for t in step["tensors"]:
            vid = t["value"]
            if vid not in store:
                spec = p["values"][vid]
                dtype = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": np.uint16}[spec["dtype"]]
                store[vid] = DeviceArray([plans.evaluate(d, env) for d in spec["dims"]], dtype, module.context)
            a = store[vid]
            view = {"matrix": (R, C), "cols": (C,), "rows": (R,), "scalar": (int(np.prod(a.shape)),),
                    "bmn": (B, R, C), "bnm": (B, C, R)}[t["view"]]
            tensors.append(a.reshape(view))
        scalars = [np.int64(plans.evaluate(e, local)) for e in step.get("scalars", [])]
        grid = tuple(plans.evaluate(g, local) for g in step["grid"])
        module.kernel(step["kernel"])(*tensors, *scalars, grid=grid, block=tuple(step["block"]))
    return [store[v].numpy() for v in p["results"]]
