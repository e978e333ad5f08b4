"""Autotuned schedules against the cost model's on the CPU, in the same process.

    python bench/autotune_cpu.py [--sizes 512,1024,2048] [--attention 1024] [--rounds 6] [--store DIR]

Per row: `autotune.search(..., persist=True)` over BN (the B panel's columns, the schedule's NC) and BK (the K
chunk, KC) stores the fastest schedule in a store of its own (a temporary cache directory unless --store);
then the program is compiled twice — as any later compile is, taking the stored result (its kernel records say
`autotune: stored: …`), and with `CompileOptions(tuned=False)`, the cost model's schedule — and the two are
timed in alternation (best of `rounds`, bench/common.py best_times), so that a busy machine slows both alike.
`ratio` is the model's time over the tuned one's: above 1, tuning found a faster schedule than the model.

Rows: f32 GEMMs C = A·B at M = N = K = size, and f32 attention written as its two products (softmax(Q·Kᵀ/8)·V,
S×64 heads), whose GEMMs take the stored schedule of their own shape and dtype key.
"""

import argparse
import os
import sys
import tempfile
import time
import types

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import best_times, machine, parse_args, record_row  # noqa: E402

from tessera import autotune, compiler, executor  # noqa: E402
from tessera.image import read_image  # noqa: E402
from tessera.options import CompileOptions  # noqa: E402

SPACE = {"BN": [128, 256, 512, 1024], "BK": [128, 256, 512]}


def source(sizes: list[int], seq: int) -> str:
    out = ["from tessera import f32, function, op, tensor\n"]
    for n in sizes:
        out.append(f"@function\ndef gemm{n}(A: tensor[f32, {n}, {n}], B: tensor[f32, {n}, {n}]):\n"
                   f"    return op.matmul(A, B)\n")
    out.append(f"@function\ndef attention{seq}(Q: tensor[f32, {seq}, 64], K: tensor[f32, {seq}, 64], "
               f"V: tensor[f32, {seq}, 64]):\n"
               f"    return op.softmax(Q @ op.transpose(K) * 0.125, axis=-1) @ V\n")
    return "\n\n".join(out)


def row(path: str, name: str, rounds: int) -> None:
    t0 = time.perf_counter()
    found = autotune.search(types.SimpleNamespace(filename=path, name=name), SPACE, repeat=3, persist=True,
                            progress=False)
    searched = time.perf_counter() - t0
    tuned = compiler.compile_file(path, CompileOptions(kernels=(name,))).image
    model = compiler.compile_file(path, CompileOptions(kernels=(name,), tuned=False)).image
    taken = {k.props.get("autotune") for k in read_image(tuned).kernels} - {None}
    assert taken, f"{name}: the tuned compile took no stored schedule"
    fns = [executor.load(image).function(name) for image in (model, tuned)]
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal([int(d) for d in fns[0].plan.values[v].dims]).astype(np.float32)
              for v in fns[0].plan.args]
    np.testing.assert_allclose(fns[1](*inputs), fns[0](*inputs), rtol=1e-3, atol=1e-3)
    t_model, t_tuned = best_times([lambda: fns[0](*inputs), lambda: fns[1](*inputs)], rounds)
    config = " ".join(f"{k}={v}" for k, v in found.best.items())
    r = record_row(name, {"tuned": t_tuned, "model": t_model}, shape=[a.shape for a in inputs], dtype="f32",
                   note=f"tuned {config}; search {searched:.1f} s, {len(found.trials)} schedules")
    print(f"{name:<16} model {r['peers'][0]['time_s'] * 1e3:9.3f} ms   tuned {r['ours']['time_s'] * 1e3:9.3f} ms "
          f"({config:<14})   ratio {r['ratio']:5.2f}x   search {searched:5.1f} s, {len(found.trials)} schedules",
          flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="512,1024,2048")
    p.add_argument("--attention", type=int, default=1024, help="the attention row's sequence length")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--store", help="the cache directory searched results are stored in (default: a new one)")
    a = parse_args(p)
    sizes = [int(s) for s in a.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TESSERA_CACHE_DIR"] = a.store or os.path.join(tmp, "cache")
        os.environ.pop("TESSERA_TUNE_DIR", None)   # the results in that cache directory, none from elsewhere
        path = os.path.join(tmp, "tuned_programs.py")
        with open(path, "w") as f:
            f.write(source(sizes, a.attention))
        print(f"# {machine()}; search space {SPACE}")
        for n in sizes:
            row(path, f"gemm{n}", a.rounds)
        row(path, f"attention{a.attention}", a.rounds)


if __name__ == "__main__":
    main()
