"""Draws the charts of docs/performance.md from the benchmarks' JSON (`--json PATH`, bench/README.md's schema).

    python bench/charts.py RESULTS.json [MORE.json ...] [--out docs/figures]

For each file NAME.json, `NAME_ratios.png`: a bar per row and peer, the ratio peer time / Tessera time (above 1.0,
Tessera is faster), the 1.0 line, and the issues' speed target where one names that row and peer (TARGETS). For
the files measured on a GPU together, `<gpu>_roofline.png`: each row that counts both FLOPs and bytes is a point
at its arithmetic intensity (FLOPs / byte, the minimal traffic the bench counts) and Tessera's throughput, under
the GPU's ceilings (PEAKS). Each chart's title names the machine and commit its numbers came from.

matplotlib is an optional dependency (`pip install 'tessera[charts]'`); without it the script says so and exits
with status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

SCHEMA = "tessera-bench/1"

# NVIDIA H200 SXM's dense peaks (no 2:4 sparsity), from NVIDIA's H200 product page and datasheet
# (nvidia.com/en-us/data-center/h200: "FP8 Tensor Core 3,958 TFLOPS", "BF16 1,979", "TF32 989", "INT8 3,958 TOPS"
# are with sparsity, half of that dense; "FP32 67 TFLOPS", "GPU memory bandwidth 4.8 TB/s"). TFLOP/s (TOPS for
# int8) by the row's dtype; the memory ceiling in TB/s.
PEAKS = {"gpu": "NVIDIA H200 SXM", "memory_tb_s": 4.8,
         "compute_tflop_s": {"bf16": 989.0, "f16": 989.0, "fp8": 1979.0, "i8": 1979.0, "tf32": 494.0, "f32": 67.0}}

# The issues' speed targets: (bench, workload pattern, peer pattern, target ratio); 19's table unless marked.
# Only where an issue names the row and the peer; the bars of other rows have none.
TARGETS = [
    ("gemm_cpu", r"", r"^XLA", 1.0),
    ("graph_cpu", r"^(attention|causal|softmax\+dropout)", r"^XLA", 1.2),   # the first match counts
    ("graph_cpu", r"", r"^XLA", 1.0),
    ("bf16_gemm_cpu", r"^bf16 gemm", r"^XLA", 1.0),
    ("saxpy_gpu", r"^saxpy n=(67108864|268435456) ", r"^torch$", 0.95),
    ("attention_gpu", r"^(attention|causal)_d64 ", r"^sdpa$", 1.0),
    ("attention_gpu", r"^(attention|causal)_d128 ", r"^sdpa$", 1.1),
    ("attention_gpu", r" sm_80$", r"^sdpa-fa2$", 0.9),   # issue 18: the mma.sync kernel vs SDPA's FA2 backend
    ("gemm_gpu", r"^bf16 gemm (2048|3072|4096|8192)$", r"^torch$", 1.0),
    ("gemm_gpu", r"^f32 gemm 4096 fma ", r"^torch allow_tf32=False$", 0.8),   # issue 18
    ("gemm_gpu", r"^f32 gemm 4096 tf32 ", r"^torch allow_tf32=True$", 0.9),   # issue 18
    ("gemm_gpu", r"^fp8 e4m3 scaled \d+ function$", r"^torch._scaled_mm$", 1.0),   # issue 17: end to end
]


class Error(Exception):
    """A results file that cannot be charted; the message names it."""


def load(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise Error(f"{path}: {e}") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise Error(f"{path}: not a benchmark result of schema {SCHEMA} (bench/README.md)")
    return doc


def target(bench: str, workload: str, peer: str) -> float | None:
    for b, w, p, t in TARGETS:
        if b == bench and re.search(w, workload) and re.search(p, peer):
            return t
    return None


def ratio_bars(doc: dict) -> list[tuple[str, str, float, float | None]]:
    """(workload, peer, peer time / our time, the issue's target or None) for each row and peer of `doc`."""
    return [(row["workload"], peer["name"], peer["ratio"], target(doc["bench"], row["workload"], peer["name"]))
            for row in doc["rows"] for peer in row["peers"]]


def roofline_points(docs: list[dict]) -> list[dict]:
    """A point per GPU row that counts FLOPs and bytes: its label, dtype, arithmetic intensity (FLOPs / byte)
    and Tessera's throughput in TFLOP/s, with the compute ceiling PEAKS gives its dtype and the roof at its
    intensity, min(that ceiling, intensity x memory bandwidth) (both None for a dtype PEAKS lacks)."""
    points = []
    for doc in docs:
        if doc["machine"].get("kind") != "gpu":
            continue
        for row in doc["rows"]:
            if not row.get("flops") or not row.get("bytes"):
                continue
            intensity, peak = row["flops"] / row["bytes"], PEAKS["compute_tflop_s"].get(row["dtype"])
            points.append({"label": f"{row['workload']} ({row['ours']['name']})", "dtype": row["dtype"],
                           "intensity": intensity, "tflop_s": row["flops"] / row["ours"]["time_s"] / 1e12,
                           "peak": peak, "roof": min(peak, intensity * PEAKS["memory_tb_s"]) if peak else None})
    return points


def _sources(docs: list) -> list[str]:
    """One line per machine and commit the files came from, with the span of their times (one bench run
    writes a file per benchmark: naming each would repeat the machine for every file)."""
    runs = {}
    for d in docs:
        runs.setdefault(describe(d).rsplit(", ", 1)[0], []).append(d["time"])
    return [f"{k}, {min(t)}" + (f" to {max(t)}" if len(t) > 1 else "") for k, t in sorted(runs.items())]


def describe(doc: dict) -> str:
    """The machine and commit a file's numbers came from, as the charts and docs/performance.md name them."""
    m = doc["machine"]
    if m.get("kind") == "gpu":
        where = f"{m['count']}x {m['gpu']} ({m['arch']})"
    else:
        where = f"{m['cpu']}, {m['cores']} cores, load average {m['load_average']} at the start"
    return f"{where}; commit {doc.get('commit') or 'unknown'}, {doc['time']}"


def command(doc: dict) -> str:
    """The benchmark's command line, less --json and its file."""
    argv = doc["argv"]
    kept = [a for i, a in enumerate(argv)
            if a != "--json" and not a.startswith("--json=") and (i == 0 or argv[i - 1] != "--json")]
    return " ".join([f"bench/{doc['bench']}.py", *kept])


def draw_ratios(doc: dict, path: str) -> None:
    import matplotlib  # lazy: optional; main() checks for it first
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    bars = ratio_bars(doc)
    labels = [f"{w}  vs {p}" for w, p, _, _ in bars]
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.32 * len(bars)))
    y = list(range(len(bars)))[::-1]
    ratios = [r for _, _, r, _ in bars]
    colours = ["tab:green" if r >= 1.0 else "tab:orange" for r in ratios]
    ax.barh(y, ratios, color=colours, height=0.7)
    ax.axvline(1.0, color="black", linewidth=1)
    targets = [(yy, t) for yy, (_, _, _, t) in zip(y, bars) if t is not None]
    if targets:
        ax.scatter([t for _, t in targets], [yy for yy, _ in targets], marker="|", s=300, color="tab:red",
                   zorder=3, label="the issue's target")
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    for yy, r in zip(y, ratios):
        ax.text(r, yy, f" {r:.2f}x", va="center", fontsize=8)
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_xlabel("peer time / Tessera time (above 1: Tessera faster)")
    top = max(ratios + [t for _, t in targets] + [1.0])
    if top / min(ratios + [1.0]) > 20:   # numpy's integer matmul is thousands of times slower: a log axis
        ax.set_xscale("log")
        ax.set_xlabel("peer time / Tessera time, log scale (above 1: Tessera faster)")
        ax.set_xlim(min(ratios + [1.0]) / 1.5, top * 3)
    else:
        ax.set_xlim(0, top * 1.18)
    where, _, when = describe(doc).partition("; ")
    ax.set_title(f"{command(doc)}\n{where}\n{when}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def draw_roofline(docs: list[dict], path: str) -> None:
    import matplotlib  # lazy: optional; main() checks for it first
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    points = roofline_points(docs)
    bw = PEAKS["memory_tb_s"]
    fig, ax = plt.subplots(figsize=(11, 6.5))
    lo = min([p["intensity"] for p in points] + [1.0]) / 2
    hi = max([p["intensity"] for p in points] + [2 * max(PEAKS["compute_tflop_s"].values()) / bw]) * 2
    ceilings = {}   # peak -> the dtypes that share it (bf16 and f16, fp8 and int8)
    for dtype, peak in PEAKS["compute_tflop_s"].items():
        ceilings.setdefault(peak, []).append(dtype)
    colour = {}
    for i, (peak, dtypes) in enumerate(sorted(ceilings.items())):
        c = f"C{i}"
        colour.update(dict.fromkeys(dtypes, c))
        ax.plot([lo, peak / bw, hi], [lo * bw, peak, peak], color=c, linewidth=1, alpha=0.7)   # the ridge at peak/bw
        ax.text(hi, peak, f"{'/'.join(dtypes)} {peak:g} ", va="bottom", ha="right", fontsize=7, color=c)
    ax.text(1.0, bw, f"memory {bw} TB/s ", rotation=28, fontsize=7, va="bottom", ha="right")
    for i, p in enumerate(points, 1):
        ax.scatter(p["intensity"], p["tflop_s"], color=colour.get(p["dtype"], "black"), zorder=3, s=22,
                   label=f"{i}. {p['label']}: {p['tflop_s']:.4g}"
                         + (f" ({p['tflop_s'] / p['roof']:.0%} of the {p['dtype']} roof there)" if p["roof"] else ""))
        ax.annotate(str(i), (p["intensity"], p["tflop_s"]), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOPs or integer ops per byte of minimal traffic)")
    ax.set_ylabel("TFLOP/s (TOPS for int8)")
    sources = "\n".join(_sources([d for d in docs if d["machine"].get("kind") == "gpu"]))
    ax.set_title(f"Tessera's GPU kernels against {PEAKS['gpu']}'s dense peaks (memory {bw} TB/s)\n{sources}",
                 fontsize=8)
    ax.grid(True, which="both", alpha=0.2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", nargs="+", help="JSON files the benchmarks wrote with --json")
    p.add_argument("--out", default=os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                  os.pardir, "docs", "figures")),
                   help="the folder the PNGs go to (default docs/figures)")
    args = p.parse_args(argv)
    try:
        import matplotlib  # noqa: F401  # lazy: optional, checked before any work
    except ImportError:
        print("bench/charts.py needs matplotlib, an optional dependency: pip install 'tessera[charts]' "
              "(or pip install matplotlib)", file=sys.stderr)
        return 2
    try:
        docs = [load(path) for path in args.results]   # charts named after their files: gemm_gpu_fp8.json's too
    except Error as e:
        print(f"bench/charts.py: {e}", file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    for source, doc in zip(args.results, docs):
        if any(row["peers"] for row in doc["rows"]):
            path = os.path.join(args.out, f"{os.path.splitext(os.path.basename(source))[0]}_ratios.png")
            draw_ratios(doc, path)
            print(path)
    gpus = {d["machine"]["gpu"] for d in docs if d["machine"].get("kind") == "gpu"}
    if roofline_points(docs):
        name = re.sub(r"[^a-z0-9]+", "_", " ".join(sorted(gpus)).lower()).strip("_")
        path = os.path.join(args.out, f"{name}_roofline.png")
        draw_roofline(docs, path)
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
