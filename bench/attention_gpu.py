"""Flash attention forward on an NVIDIA GPU: Tessera's sm_90a kernel (or, with --arch sm_80, its mma.sync
kernel) against PyTorch's scaled_dot_product_attention, in the same process, on the same tensors.

    python bench/attention_gpu.py [--image attention.tessera] [--shape 4,16,4096]
    python bench/attention_gpu.py --fp8 --image attention.tessera [--shape 4,16,4096]
    python bench/attention_gpu.py --build-image attention.tessera   # where the compiler is
    python bench/attention_gpu.py --arch sm_80 --build-image attention_sm80.tessera
    python bench/attention_gpu.py --arch sm_80 --image attention_sm80.tessera

--arch sm_80: the image's kernels are backends/ptx/attention_sm80.py's (FlashAttention-2's schedule on
mma.sync; the compiler's default on sm_80 … sm_90, off with TESSERA_ATTENTION_SM80=0), and SDPA runs with
its FlashAttention-2 backend forced (torch.nn.attention.sdpa_kernel(SDPBackend.FLASH_ATTENTION)), the same
class of instructions; without it SDPA picks its own backend.

Ours are the functions of examples/gpu/attention.py (bf16 [B, H, S, D], D = 128 and 64, causal and not),
launched as their launch plans say on a Tessera stream through libtessera. Each side runs 10 calls back to
back (at least 20 ms), then waits; 9 interleaved rounds (the next multiple of the number of sides), the order
rotating (common.interleaved_rounds). The throughput is each side's best round; beside each ratio (of the best
rounds) "paired M (LO-HI)" is the median and range of the ratio taken round by round, the sides of a round timed
back to back so that the GPU's clock changes between rounds cancel (common.paired_ratio; every row, --fp8's too).
FLOPs: 4·B·H·S²·D, half of it when causal.

--control (bf16 runs, with --image): our image loaded a second time (a module of its own) and timed as the side
"control" in the same rounds; its row, printed first for each function, is the run's noise floor (the same kernel
against itself: paired 1.00 expected; its best-of ratio shows how far apart best-of puts identical sides).

--variant NAME=IMAGE (repeatable, sm_90a): further images of the same example, built with other blockings
(attention_sm90.ENV, e.g. TESSERA_SM90_ATTENTION="64:block_m=128,block_n=192" TESSERA_CACHE=0 ... --build-image
old.tessera), timed in the same rounds as --image and SDPA: each printed with its ratio to SDPA.
--check: before timing, every image's four functions against torch's float32 attention of the same bf16
inputs at shapes that are not multiples of the blocks (S != T, causal too) and with more query tiles than SMs
(SHAPES), O poisoned with NaN first;
exits non-zero past 2^-7 of the largest |value|.
--backends: also SDPA with each backend forced (flash, efficient, cuDNN), and the kernels SDPA's own choice
launched (torch.profiler), so that the record says which backend the "sdpa" column is.

--fp8: the example's fp8_d128 and causal_fp8_d128 (op.flash_attention_fp8 on bf16 inputs: the amax, quantize
and Vᵀ kernels, then the e4m3 attention), called whole through tessera.executor on torch's tensors, against
our bf16 kernel and SDPA in bf16 on the same inputs; the FLOPs counted are the attention's, as above. Each of
the four kernels is also launched alone (the call's time split by kernel), and with --variant NAME=IMAGE the
other images' fp8 functions (and their attention kernels alone; their amax, quantize and Vt kernels are
--image's) are timed in the same rounds, their one-byte tensors, descales and outputs compared bit for bit
with --image's (exits 1 where they differ; a variant with other arithmetic, poly_every or early_rescale,
differs by design: its rms error is printed). The "fp8 inputs" row: op.flash_attention_fp8(Q8, K8, V8,
scale=(sq, sk, sv)) on tensors already e4m3 (quantized once by torch outside the timed loop, as the op's amax
step does: s = max(amax, 2^-126) / 448, x / s rounded to e4m3), so the call timed is the Vt kernel and the
attention kernel (no amax, no quantize); its functions (FP8_INPUTS below) are a second image, IMAGE with
.fp8_inputs.tessera for .tessera, which --build-image writes beside the first (sm_90a); each --variant image's
beside it is timed in the same rounds too ("NAME fp8 inputs"). Its output is compared bit for bit with the same
image's whole op on the same inputs (the same e4m3 values and descales: the same bits expected).
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import PAIRED_ROUNDS, attention_setup, interleaved_best, launcher, pick, report_row  # noqa: E402
EXAMPLE = os.path.join(HERE, os.pardir, "examples", "gpu", "attention.py")
CASES = [("attention_d128", 128, False), ("causal_d128", 128, True), ("attention_d64", 64, False),
         ("causal_d64", 64, True)]


# The pre-quantized form (issue 17 item 1): one-byte e4m3 Q, K, V and their f32 descales, bf16 O.
FP8_INPUTS = """
from tessera import function, op, tensor, bf16, f32, fp8_e4m3


@function
def fp8_inputs_d128(Q: tensor[fp8_e4m3, "B", "H", "S", 128], K: tensor[fp8_e4m3, "B", "H", "T", 128],
                    V: tensor[fp8_e4m3, "B", "H", "T", 128], sq: tensor[f32], sk: tensor[f32],
                    sv: tensor[f32]) -> tensor[bf16, "B", "H", "S", 128]:
    return op.flash_attention_fp8(Q, K, V, scale=(sq, sk, sv))


@function
def causal_fp8_inputs_d128(Q: tensor[fp8_e4m3, "B", "H", "S", 128], K: tensor[fp8_e4m3, "B", "H", "T", 128],
                           V: tensor[fp8_e4m3, "B", "H", "T", 128], sq: tensor[f32], sk: tensor[f32],
                           sv: tensor[f32]) -> tensor[bf16, "B", "H", "S", 128]:
    return op.flash_attention_fp8(Q, K, V, scale=(sq, sk, sv), causal=True)
"""


def fp8_inputs_image(path: str) -> str:
    """Where the FP8_INPUTS image of the image at `path` lies: beside it, .fp8_inputs.tessera for .tessera."""
    root = path[:-len(".tessera")] if path.endswith(".tessera") else path
    return root + ".fp8_inputs.tessera"


def _option(name: str, default: str | None = None) -> str | None:
    """The value of command-line option `name` (--name VALUE or --name=VALUE), read before argparse runs."""
    argv = sys.argv[1:]
    for i, a in enumerate(argv):
        if a == name and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(name + "="):
            return a.partition("=")[2]
    return default


def build_fp8_inputs(path: str) -> None:
    """Compiles FP8_INPUTS for sm_90a into the image at `path` (where the compiler is)."""
    import tessera
    with open(path, "wb") as f:
        f.write(tessera.compile(FP8_INPUTS, "attention_gpu_fp8_inputs.py", target="ptx", arch="sm_90a"))
    print(f"wrote {path} (op.flash_attention_fp8 on e4m3 inputs, sm_90a)", flush=True)


def _variants() -> list[tuple[str, str]]:
    """--variant NAME=IMAGE options, taken out of sys.argv before attention_setup parses the rest."""
    out, rest, argv = [], [], sys.argv[1:]
    while argv:
        a = argv.pop(0)
        if a == "--variant" or a.startswith("--variant="):
            v = a.partition("=")[2] if "=" in a and a.startswith("--variant=") else argv.pop(0)
            name, _, path = v.partition("=")
            if not path:
                raise SystemExit(f"--variant {v}: NAME=IMAGE")
            out.append((name, path))
        else:
            rest.append(a)
    sys.argv[1:] = rest
    return out


def _load(path: str, ctx):
    from tessera import image as images, plan as plans, runtime
    with open(path, "rb") as f:
        data = f.read()
    return runtime.load(data), plans.decode(images.read_image(data).section(plans.SECTION))


SDPA_KERNELS = (("cudnn", "cuDNN"), ("flash", "flash"), ("fmha", "efficient"), ("efficient", "efficient"),
                ("mem_eff", "efficient"))   # the first key a kernel's name holds names its backend


def sdpa_backend(call) -> str:
    """Which backend SDPA's own choice ran, from the names of the kernels one call launched (torch.profiler):
    the backends, then the first kernel names."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    names = [e.key for e in prof.key_averages() if "CUDA" in str(e.device_type)]
    kinds = sorted({next((label for key, label in SDPA_KERNELS if key in n.lower()), "other") for n in names})
    return f"{'/'.join(kinds) or 'no kernel seen'}: " + "; ".join(n[:100] for n in names[:3])


# --check's (B, H, SQ, SK): not multiples of the blocks, S != T, and more query tiles than SMs (132), which a
# persistent grid's CTAs (attention_sm90's `persistent`) take several of
SHAPES = ((2, 3, 200, 200), (2, 3, 77, 300), (2, 3, 300, 77), (1, 2, 1000, 1000), (1, 2, 191, 129),
          (1, 1, 4096, 4096), (4, 16, 1000, 1000), (3, 16, 777, 1029))


def check(label: str, mod, functions, s) -> bool:
    """The four functions of one image against torch's float32 attention at awkward shapes: whether every error
    (relative to the largest |value|) is within 2^-7, printed. NaN-poisoned outputs, so an unwritten element
    fails."""
    import torch
    worst = 0.0
    for name, D, causal in CASES:
        for (B, H, SQ, SK) in SHAPES:
            q = torch.randn(B, H, SQ, D, device="cuda", dtype=torch.bfloat16)
            k, v = (torch.randn(B, H, SK, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
            o = torch.full_like(q, float("nan"))
            torch.cuda.synchronize()   # torch's stream has written the inputs before ours reads them
            env = {"BH": B * H, "SQ": SQ, "SK": SK}
            launcher(mod, functions[name].steps[0], env, [q.view(B * H, SQ, D), k.view(B * H, SK, D),
                                                          v.view(B * H, SK, D), o.view(B * H, SQ, D)], s)()
            s.synchronize()
            sc = torch.einsum("bhsd,bhtd->bhst", q.float(), k.float()) * D ** -0.5
            if causal:
                sc = sc.masked_fill(torch.ones(SQ, SK, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
            want = torch.einsum("bhst,bhtd->bhsd", torch.softmax(sc, -1), v.float())
            err = ((o.float() - want).abs().max() / want.abs().max()).item()
            if not err <= 2 ** -7:   # NaN fails too
                print(f"CHECK FAILED {label} {name} B,H,SQ,SK={B},{H},{SQ},{SK}: error {err:.3g}", flush=True)
                return False
            worst = max(worst, err)
    print(f"check {label}: 4 functions x {len(SHAPES)} shapes, worst error {worst:.2e} of the largest |value| (bound 2^-7)",
          flush=True)
    return True


def main() -> None:
    variants = _variants()
    if "--control" in sys.argv[1:] and ("--fp8" in sys.argv[1:] or _option("--image") is None):
        raise SystemExit("--control is for the bf16 runs and needs --image (loaded a second time)")
    try:
        mod, functions, s, (B, H, S), env, args = attention_setup(
            __doc__, EXAMPLE, {"--fp8": "op.flash_attention_fp8 against our bf16 kernel and SDPA (needs --image)",
                               "--check": "every image's results against torch's first, at awkward shapes",
                               "--backends": "also SDPA with each backend forced, and which one SDPA chose",
                               "--control": "(bf16, with --image) time --image a second time, loaded apart, as the "
                                            "side 'control': its paired ratio to ours, printed first, is the noise "
                                            "floor"})
    except SystemExit as e:   # --build-image wrote the example's image: the fp8-inputs image beside it (sm_90a)
        built = _option("--build-image")
        if e.code in (0, None) and built and _option("--arch", "sm_90a") == "sm_90a":
            build_fp8_inputs(fp8_inputs_image(built))
        raise

    import contextlib

    import torch
    import torch.nn.functional as F

    if args.fp8:
        if not args.image:
            raise SystemExit("--fp8 needs --image (the image the executor loads too)")
        return fp8(args.image, mod, functions, s, (B, H, S), env, variants)
    peer, backend = "sdpa", contextlib.nullcontext
    if args.arch != "sm_90a":   # the mma.sync kernel against FlashAttention-2's
        from torch.nn.attention import SDPBackend, sdpa_kernel
        peer, backend = "sdpa-fa2", lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)
    images = [("tessera", mod, functions)] + [(n, *_load(p, None)) for n, p in variants]
    failed = [label for label, m, fns in images if args.check and not check(label, m, fns, s)]
    images = [x for x in images if x[0] not in failed]   # the others are still timed
    control = ("control", *_load(args.image, None)) if args.control and "tessera" not in failed else None
    from torch.nn.attention import SDPBackend, sdpa_kernel
    forced = {"sdpa-flash": SDPBackend.FLASH_ATTENTION, "sdpa-efficient": SDPBackend.EFFICIENT_ATTENTION,
              "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION} if args.backends and args.arch == "sm_90a" else {}
    for name, D, causal in CASES:
        scale = D ** -0.5
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        torch.cuda.synchronize()
        outs, sides = {}, {}
        for label, m, fns in images:
            if len(fns[name].steps) != 1:
                raise SystemExit(f"{name}: the image runs attention as {len(fns[name].steps)} kernels, not one "
                                 "(an sm_80 image built with TESSERA_ATTENTION_SM80=0?)")
            outs[label] = torch.empty_like(q)
            sides[label] = (launcher(m, fns[name].steps[0], env, [x.view(B * H, S, D) for x in (q, k, v, outs[label])],
                                     s), s.synchronize)
        if control is not None:
            label, m, fns = control
            outs[label] = torch.empty_like(q)
            sides[label] = (launcher(m, fns[name].steps[0], env, [x.view(B * H, S, D) for x in (q, k, v, outs[label])],
                                     s), s.synchronize)

        def sdpa():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)

        for label, which in forced.items():
            def run(which=which):
                with sdpa_kernel(which):
                    return sdpa()
            try:
                run()
                torch.cuda.synchronize()
            except RuntimeError as e:   # a backend that does not take this case
                print(f"{name}: {label} unavailable ({str(e).splitlines()[0][:100]})")
                continue
            sides[label] = (run, torch.cuda.synchronize)
        if args.backends:
            try:
                print(f"{name}: SDPA's own choice ran {sdpa_backend(sdpa)}", flush=True)
            except Exception as e:   # the profiler is a report, never a reason to lose the timings
                print(f"{name}: SDPA's backend not read ({type(e).__name__}: {e})", flush=True)
        with backend():
            sides[peer] = (sdpa, torch.cuda.synchronize)
            rounds = {}
            best = interleaved_best(sides, PAIRED_ROUNDS, rounds_out=rounds)
            ref = sdpa().float()
        flops = 4 * B * H * S * S * D / (2 if causal else 1)
        arch = "" if args.arch == "sm_90a" else f" {args.arch}"
        if control is not None:   # the noise floor first: our kernel against itself
            err = (outs["control"].float() - ref).abs().max().item()
            times, paired = pick(best, rounds, {"tessera": "tessera", "control": "control"})
            report_row(f"{name} S={S}{arch} control", times, "TFLOP/s", flops / 1e12, shape=(B, H, S, D),
                       dtype="bf16", bytes=4 * 2 * B * H * S * D, rounds=paired,
                       note=f"noise floor: our image loaded a second time; max |difference| {err:.1e}")
        for label, _, _ in images:
            err = (outs[label].float() - ref).abs().max().item()
            times, paired = pick(best, rounds, {label: label, peer: peer, **{n: n for n in forced if n in best}})
            report_row(f"{name} S={S}{arch}" + ("" if label == "tessera" else f" [{label}]"), times,
                       "TFLOP/s", flops / 1e12, shape=(B, H, S, D), dtype="bf16", bytes=4 * 2 * B * H * S * D,
                       rounds=paired, note=f"max |difference| {err:.1e}")   # Q, K, V, O
    if failed:
        print(f"CHECK FAILED for {', '.join(failed)} (not timed)")
        return 1


# the arguments of each kernel of an fp8 plan (backends/ptx/attention_lowering.lower_fp8), by its name's suffix
FP8_STEPS = {"_amax": ("Q", "K", "V", "P"), "_quant": ("Q", "K", "Q8", "K8", "P", "DS"), "_vt": ("V", "VT", "P", "DS"),
             "": ("Q8", "K8", "VT", "O", "DS")}


def fp8_steps(m, plan, env, bufs, s) -> dict:
    """{suffix: call} launching each kernel of an fp8 plan alone on the tensors `bufs` (by FP8_STEPS' names,
    each viewed at its step's extents): the whole function's time split by kernel."""
    from tessera import plan as plans

    out = {}
    for step in plan.steps:
        suffix = next((x for x in ("_amax", "_quant", "_vt") if step.kernel.endswith(x)), "")
        names = FP8_STEPS[suffix]
        assert len(names) == len(step.args), (step.kernel, step.args)
        views = [bufs[n].view(*(plans.evaluate(d, env) for d in a.shape)) for n, a in zip(names, step.args)]
        out[suffix or "_attn"] = launcher(m, step, env, views, s)
    return out


def fp8(image: str, mod, functions, s, shape, env, variants=()) -> int:
    """The whole fp8 function of each image (--image, then the --variant ones) through the executor, and each of
    its four kernels launched alone, against our bf16 kernel and SDPA; the images' quantized tensors and
    outputs compared bit for bit (identical scales and rounding expected; 1 where they differ)."""
    import torch
    import torch.nn.functional as F

    from tessera import executor

    images = [("tessera", image, mod, functions)] + [(n, p, *_load(p, mod.context)) for n, p in variants]
    progs = {label: executor.load(path, mod.context) for label, path, _, _ in images}
    # each image's fp8-inputs image (beside it), timed in the same rounds: "fp8 inputs" (--image's), "NAME fp8 inputs"
    inputs_progs = {label: executor.load(fp8_inputs_image(path), mod.context) for label, path, _, _ in images
                    if os.path.exists(fp8_inputs_image(path))}
    for label, path, _, _ in images:
        if label not in inputs_progs:
            print(f"no {fp8_inputs_image(path)} (built by --build-image beside the image): {label}'s fp8 inputs row "
                  "is not timed", flush=True)
    B, H, S = shape
    D = 128
    skp = -(-S // 16) * 16
    differs = False
    env8 = dict(env, SKP=skp, NQ=B * H * S * D, NK=B * H * S * D)
    for name, bf16_name, causal in (("fp8_d128", "attention_d128", False), ("causal_fp8_d128", "causal_d128", True)):
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        o = torch.empty_like(q)
        ours_bf16 = launcher(mod, functions[bf16_name].steps[0], env, [x.view(B * H, S, D) for x in (q, k, v, o)], s)
        sides, bufs = {}, {}
        for label, _, m, fns in images:
            fn = getattr(progs[label], name)
            sides[f"{label} fp8"] = ((lambda fn=fn: fn(q, k, v, stream=s)), s.synchronize)
            b = bufs[label] = {"Q": q, "K": k, "V": v, "O": torch.empty_like(q),
                               "Q8": torch.empty(B * H * S * D, dtype=torch.int8, device="cuda"),
                               "K8": torch.empty(B * H * S * D, dtype=torch.int8, device="cuda"),
                               "VT": torch.empty(B * H * D * skp, dtype=torch.int8, device="cuda"),
                               "P": torch.empty(3 * 256, dtype=torch.float32, device="cuda"),
                               "DS": torch.empty(3, dtype=torch.float32, device="cuda")}
            try:
                steps = fp8_steps(m, fns[name], env8, b, s)
                for suffix, call in steps.items():   # once in order: every kernel reads what it reads in a call
                    call()
                s.synchronize()
            except Exception as e:   # the whole call is still timed
                print(f"{label}: the kernels alone not timed: {type(e).__name__}: {e}", flush=True)
                steps = {}
            for suffix, call in steps.items():   # the variants' amax, quantize and Vt kernels are --image's: not timed
                if label == images[0][0] or suffix == "_attn":
                    sides[f"{label} {suffix[1:]}"] = (call, s.synchronize)
        pre = quantized(q, k, v) if inputs_progs else None
        for label, prog in inputs_progs.items():   # e4m3 inputs made once, outside the timed loop: Vt + the kernel
            fn_pre = getattr(prog, name.replace("fp8_d128", "fp8_inputs_d128"))
            sides[_inputs_side(label)] = ((lambda fn=fn_pre: fn(*pre, stream=s)), s.synchronize)
        sides["bf16"] = (ours_bf16, s.synchronize)
        sides["sdpa"] = ((lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=D ** -0.5)),
                         torch.cuda.synchronize)
        rounds = {}
        best = interleaved_best(sides, PAIRED_ROUNDS, rounds_out=rounds)
        exact = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal, scale=D ** -0.5)
        flops = 4 * B * H * S * S * D / (2 if causal else 1)
        first = None
        for label, _, _, _ in images:
            out = torch.as_tensor(sides[f"{label} fp8"][0](), device="cuda").view(torch.bfloat16)
            s.synchronize()
            err = ((out.float() - exact).pow(2).mean().sqrt() / exact.pow(2).mean().sqrt()).item()
            same = ""
            if first is None:
                first = (out, bufs[label])
            else:   # the same bits as the first image's: output, the one-byte tensors and the descales
                diff = [n for n in ("Q8", "K8", "VT", "DS", "O") if not torch.equal(first[1][n], bufs[label][n])
                        and f"{label} attn" in best and f"{images[0][0]} attn" in best]
                differs |= bool(diff) or not torch.equal(first[0], out)
                same = (f"; bit-identical to {images[0][0]}'s" if not diff and torch.equal(first[0], out) else
                        f"; DIFFERS from {images[0][0]}'s in {', '.join(diff) or 'the whole call'}")
            t = {x: best[f"{label} {x}"] for x in ("amax", "quant", "vt", "attn") if f"{label} {x}" in best}
            firsts = {x: best[f"{images[0][0]} {x}"] for x in ("amax", "quant", "vt") if f"{images[0][0]} {x}" in best}
            if list(t) == ["attn"] and len(firsts) == 3:   # a variant: the same amax, quantize, Vt kernels as --image's
                t = {**firsts, **t}
            times, paired = pick(best, rounds, {"tessera fp8": f"{label} fp8", "tessera bf16": "bf16",
                                                "sdpa bf16": "sdpa"})
            report_row(f"{name} S={S} [{label}]", times, "TFLOP/s", flops / 1e12, rounds=paired,
                       shape=(B, H, S, D), dtype="fp8", bytes=4 * 2 * B * H * S * D,   # bf16 Q, K, V read, O written
                       note=f"rms error vs f32 attention {err:.1e}; the whole function: amax, quantize, Vt kernels"
                            + same)
            if len(t) < 4:
                continue
            print(f"  {label}: whole {best[f'{label} fp8'] * 1e6:.1f} us = "
                  + " + ".join(f"{x} {t[x] * 1e6:.1f}" for x in t)
                  + f" + {(best[f'{label} fp8'] - sum(t.values())) * 1e6:.1f} (launch gaps, executor) us; "
                  f"attention kernel alone {flops / t['attn'] / 1e12:.1f} TFLOP/s = "
                  f"{best['bf16'] / t['attn']:.3f}x our bf16, whole {best['bf16'] / best[f'{label} fp8']:.3f}x",
                  flush=True)
        for label in inputs_progs:
            key = _inputs_side(label)
            got = torch.as_tensor(sides[key][0](), device="cuda").view(torch.bfloat16)
            whole = torch.as_tensor(sides[f"{label} fp8"][0](), device="cuda").view(torch.bfloat16)
            s.synchronize()
            err = ((got.float() - exact).pow(2).mean().sqrt() / exact.pow(2).mean().sqrt()).item()
            same = torch.equal(got, whole)
            times, paired = pick(best, rounds, {"tessera fp8 inputs": key, "tessera bf16": "bf16", "sdpa bf16": "sdpa"})
            report_row(f"{name} S={S} fp8 inputs" + ("" if label == images[0][0] else f" [{label}]"), times,
                       "TFLOP/s", flops / 1e12, shape=(B, H, S, D), dtype="fp8", rounds=paired,
                       bytes=5 * B * H * S * D,   # e4m3 Q, K, V read, bf16 O written
                       note=f"rms error vs f32 attention {err:.1e}; e4m3 Q, K, V quantized outside the timed loop: "
                            f"the Vt kernel and the attention; "
                            + ("bit-identical to the whole op's" if same else "DIFFERS from the whole op's output"))
            print(f"  {key} {best[key] * 1e6:.1f} us = {best['bf16'] / best[key]:.3f}x our "
                  f"bf16, {best['sdpa'] / best[key]:.3f}x SDPA; the whole op (bf16 inputs) "
                  f"{best[f'{label} fp8'] * 1e6:.1f} us = {best['bf16'] / best[f'{label} fp8']:.3f}x our bf16",
                  flush=True)
    return 1 if differs else 0


def _inputs_side(label: str) -> str:
    """The side timing an image's fp8-inputs function: "fp8 inputs" for --image's, "NAME fp8 inputs" for a variant's."""
    return "fp8 inputs" if label == "tessera" else f"{label} fp8 inputs"


def quantized(q, k, v) -> tuple:
    """(Q8, K8, V8, sq, sk, sv): bf16 tensors quantized to e4m3 per tensor as op.flash_attention_fp8's amax step
    does (s = max(amax, 2^-126) / 448 in f32, x / s rounded to e4m3, ties to even), the bytes as uint8 views
    (DLPack) and the descales as 0-d f32 tensors."""
    import torch
    out, scales = [], []
    for x in (q, k, v):
        s = torch.clamp(x.float().abs().amax(), min=2.0 ** -126) / 448.0
        out.append((x.float() / s).to(torch.float8_e4m3fn).view(torch.uint8))
        scales.append(s.reshape(()))
    torch.cuda.synchronize()
    return (*out, *scales)


if __name__ == "__main__":
    sys.exit(main())
