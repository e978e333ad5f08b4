"""Autotuned schedules against the cost model's on an NVIDIA GPU (sm_90a), as a search split across two
machines (docs/pipeline.md "A search split across two machines"): candidates compiled where the compiler is,
timed where the GPU is by the runtime alone, records imported back.

    python bench/autotune_gpu.py --build DIR             # where the compiler is: DIR/<row>/candidates, model.tessera
    python bench/autotune_gpu.py --run DIR --out OUT     # where the GPU is (libtessera, no compiler):
                                                         # OUT/records-<row>.json and the table's rows
    tessera-tune --import OUT/records-<row>.json         # where the compiler is: the fastest stored

Rows: bf16 GEMMs C = A·B (M = N = K, static; the search space is BM × BN × stages of the wgmma kernel,
backends/ptx/gemm_sm90.py) and bf16 flash attentions [4, 16, 4096, D] (D = 128 and 64, and causal D = 128;
the space is the fused kernel's keys per block BN × stages, backends/ptx/attention_sm90.py). Candidates the
kernels refuse (shared memory) are left out at the export.

Per row on the GPU: `python -m tessera.tune_run`'s timing of every candidate (tessera/tune_run.py: calls back
to back for a millisecond, then a wait; the best of --repeat; the three fastest timed again in turn), then the
cost model's image (compiled with `CompileOptions(tuned=False)`) and the chosen candidate's timed again in
alternation, best of --rounds, so that their ratio is not the search's own pick of a lucky run; their outputs
are compared (bf16: rtol 2e-2). The docs/performance.md table was measured before the confirming round
existed (the pass alone chose).
`ratio` is the model's time over the tuned one's: above 1, tuning found a faster schedule than the model.
"""

import argparse
import json
import os
import pathlib
import sys
import types

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import parse_args, record_row, set_gpu_machine  # noqa: E402

GEMMS = (2048, 3072, 4096)
ATTENTIONS = (("attention_d128", 128, False), ("attention_d64", 64, False), ("causal_d128", 128, True))
BATCH, HEADS, SEQ = 4, 16, 4096
GEMM_SPACE = {"BM": [64, 128], "BN": [128, 256], "stages": [3, 4, 5, 6]}
ATTENTION_SPACE = {"BN": [64, 128, 192, 256], "stages": [2, 3, 4]}


def source() -> str:
    out = ["from tessera import bf16, function, op, tensor\n"]
    for n in GEMMS:
        out.append(f"@function\ndef gemm{n}(A: tensor[bf16, {n}, {n}], B: tensor[bf16, {n}, {n}]):\n"
                   f"    return op.matmul(A, B)\n")
    for name, d, causal in ATTENTIONS:
        t = f"tensor[bf16, {BATCH}, {HEADS}, {SEQ}, {d}]"
        out.append(f"@function\ndef {name}(Q: {t}, K: {t}, V: {t}):\n"
                   f"    return op.flash_attention(Q, K, V, scale={d ** -0.5!r}, causal={causal})\n")
    return "\n\n".join(out)


def rows() -> list[str]:
    return [f"gemm{n}" for n in GEMMS] + [name for name, _, _ in ATTENTIONS]


def build(directory: pathlib.Path, arch: str) -> None:
    from tessera import autotune, compiler
    from tessera.options import CompileOptions
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "tuned_programs.py"
    path.write_text(source())
    for name in rows():
        space = GEMM_SPACE if name.startswith("gemm") else ATTENTION_SPACE
        found = autotune.export_candidates(types.SimpleNamespace(filename=str(path), name=name), space,
                                           directory / name / "candidates", target="ptx", arch=arch, repeat=5)
        model = compiler.compile_file(str(path), CompileOptions(kernels=(name,), target="ptx", arch=arch,
                                                                tuned=False)).image
        (directory / name / "model.tessera").write_bytes(model)
        print(f"{name}: {len(found['candidates'])} candidates, {len(found['refused'])} refused", flush=True)


def _blocking(image: bytes) -> str:
    """The tile and stages the image's first kernel records (the cost model's choice, for the table)."""
    from tessera.image import read_image
    k = read_image(image).kernels[0].props
    return f"{k['tile.M']}x{k['tile.N']}x{k['tile.K']} stages={k['pipeline.stages']}"


def run(directory: pathlib.Path, out: pathlib.Path, rounds: int) -> None:
    from tessera import executor, tune_run
    out.mkdir(parents=True, exist_ok=True)
    ctx = tune_run.context("ptx")
    props = ctx.properties
    set_gpu_machine(props["name"], props["arch"], props["compute_units"])
    print(f"# {props['name']} ({props['arch']}, {props['compute_units']} SMs)", flush=True)
    for name in rows():
        cands = directory / name / "candidates"
        records = tune_run.run(cands, progress=False)
        (out / f"records-{name}.json").write_text(json.dumps(records, indent=1, sort_keys=True) + "\n")
        best = tune_run.fastest(records["trials"])
        model_image = (directory / name / "model.tessera").read_bytes()
        tuned_image = (cands / best["image"]).read_bytes()
        fns = [executor.load(image, ctx).function(name) for image in (model_image, tuned_image)]
        arrays = tune_run.stored(fns[0], tune_run.inputs(fns[0].plan, 0, 0))
        outputs = [np.asarray(fn(*arrays), np.float32) for fn in fns]
        np.testing.assert_allclose(outputs[1], outputs[0], rtol=2e-2, atol=2e-2)
        times = [float("inf")] * 2
        for _ in range(rounds):
            for i, fn in enumerate(fns):
                times[i] = min(times[i], tune_run.time_function(fn, arrays, 3, ctx))
        t_model, t_tuned = times
        config = tune_run.show(best["config"])
        flops = 2.0 * int(name[4:]) ** 3 if name.startswith("gemm") else \
            _attention_flops(name, arrays[0].shape)
        record_row(name, {"tuned": t_tuned, "model": t_model}, "TFLOP/s", flops / 1e12,
                   shape=[list(a.shape) for a in arrays], dtype="bf16",
                   note=f"tuned {config}; model {_blocking(model_image)}; {len(records['trials'])} candidates")
        print(f"{name:<15} model {t_model * 1e3:8.3f} ms ({_blocking(model_image):<24})  tuned {t_tuned * 1e3:8.3f} "
              f"ms ({config:<20})  ratio {t_model / t_tuned:5.2f}x  ({len(records['trials'])} candidates; "
              f"search's best {best.get('confirmed', best['seconds']) * 1e3:.3f} ms)", flush=True)


def _attention_flops(name: str, shape) -> float:
    b, h, s, d = shape
    flops = 4.0 * b * h * s * s * d
    return flops / 2 if name.startswith("causal") else flops


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", metavar="DIR", help="export the candidates and the cost model's images to DIR")
    p.add_argument("--run", metavar="DIR", help="time DIR's candidates on this machine's GPU")
    p.add_argument("--out", default="autotune_gpu", help="with --run: where the records go")
    p.add_argument("--arch", default="sm_90a")
    p.add_argument("--rounds", type=int, default=5)
    a = parse_args(p)
    if bool(a.build) == bool(a.run):
        p.error("give --build DIR (where the compiler is) or --run DIR (where the GPU is)")
    if a.build:
        build(pathlib.Path(a.build), a.arch)
    else:
        run(pathlib.Path(a.run), pathlib.Path(a.out), a.rounds)


if __name__ == "__main__":
    main()
