"""bf16 GEMM on an NVIDIA Hopper GPU: Tessera's sm_90a kernel against torch.matmul (cuBLAS) and a Triton
matmul, in the same process, on the same tensors.

    python bench/gemm_gpu.py [--image gemm.tessera] [--sizes 4096,8192]
    python bench/gemm_gpu.py --build-image gemm.tessera   # where the compiler is, for a GPU machine
    python bench/gemm_gpu.py --compile-time               # where the compiler is: a fresh tessera-cc
    python bench/gemm_gpu.py --fp8 --image gemm.tessera [--sizes 4096,8192]   # scaled e4m3 vs torch._scaled_mm
    python bench/gemm_gpu.py --f32 --build-image f32.tessera --sizes 4096   # where the compiler is, then
    python bench/gemm_gpu.py --f32 --image f32.tessera --sizes 4096   # f32: FMA vs torch TF32 off, tf32 vs on

Ours is `gemm_bf16` of examples/gpu/gemm.py (C = A @ B, bf16 in and out, fp32 accumulation), launched as its
launch plan says (the tile shape its cost model takes for the size — the plan carries 128×256 and 128×128
kernels, its extents being symbolic — a persistent grid of at most one CTA per SM, 384 threads, the stage
ring's dynamic shared memory) on a Tessera stream, through libtessera's CUDA backend, which encodes the TMA tensor maps at each
launch. The Triton peer is the matmul of Triton's tutorial (03-matrix-multiplication), autotuned over the
tutorial's CUDA configurations. Each side runs 20 products back to back (at least 20 ms), then waits; rounds of
the sides interleaved, the order rotating (common.interleaved_rounds), 9 rounds or the next multiple of the
number of sides. The throughput is each side's best round; beside each ratio (peer time / ours, of the best
rounds) "paired M (LO-HI)" is the median, and the range, of the ratio taken round by round (the sides of a round
are timed back to back, so the GPU's clock changes between rounds cancel; common.paired_ratio). The bf16, --fp8
and --f32 rows all carry it (the JSON's paired_ratio, paired_range).

--control (with --image; bf16 and --fp8) times our image a second time, loaded again as a separate module (and,
with --fp8, a separate executor program), as a side named "control" in the same rounds: its row, printed first
for each size, is the run's noise floor (the same kernel against itself: its paired ratio should be 1.00, and
its best-of ratio says how far apart best-of can put two identical sides).

--fp8 times `gemm_fp8_scaled` (one-byte e4m3 A [M,K] and Bt [N,K], per-tensor f32 scales, bf16 result) against
torch._scaled_mm(A, Bt.t(), scale_a, scale_b, out_dtype=bf16) (cuBLAS's fp8 GEMM) on the same tensors: end to
end, the executor's call of the function on the torch tensors' bytes (DLPack, uint8 views), which is one
wgmma kernel with the scales in its epilogue: "function" drops each call's result at once (libtessera frees a
result's device memory with cuMemFree, which waits for the device, so host and GPU take turns), "results
kept" holds a round's results and frees them at the next round's untimed call (what torch's caching
allocator gives _scaled_mm); and that kernel launched alone.

--f32 times f32 GEMMs of its own image (K static, one pair of functions a size): on FMA units
(backends/ptx/gemm_fma.py) against torch.matmul with torch.backends.cuda.matmul.allow_tf32 = False, and with
input_precision="tf32" (wgmma's tf32 kind on Cᵀ = Bᵀ·Aᵀ, backends/ptx/gemm_sm90_tf32.py: A and B read as
stored, no copy) against torch.matmul with allow_tf32 = True: the function through the executor (results kept
for the round, as torch's allocator keeps its own) and the GEMM kernel alone, on the same tensors.

--variant PATH (repeatable) times another image of examples/gpu/gemm.py beside the first, in the same rounds: one built
with backend overrides the compile cache does not key on, e.g. the bf16 GEMM in clusters of two CTAs with B
multicast to both (`TESSERA_CACHE=0 TESSERA_SM90_GEMM_CLUSTER=2 python bench/gemm_gpu.py --build-image
cluster.tessera`, backends/ptx/gemm_lowering.py), its ratio to cuBLAS printed beside ours. With --fp8 the
variant's gemm_fp8_scaled runs end to end through the executor too, beside ours: e.g. the fp8 GEMM in 128x128
tiles (`TESSERA_SM90_GEMM_FP8_BN=128 python bench/gemm_gpu.py --build-image fp8narrow.tessera`, then `--fp8
--image gemm.tessera --variant fp8narrow.tessera`; the default is 128x256 tiles promoted by halves of N, and
=256rs the same with A read into registers). Compare each pair in both orders: the side timed first in a round
ran faster at 8192³ on an H200 (docs/performance.md).

--compile-time times `tessera-cc` compiling the one GEMM for sm_90a in a fresh process with the cache off,
against Triton (where it is installed: `pip install triton`, no GPU needed) compiling one configuration of
its matmul for sm_90 with a fresh cache in a fresh process, rounds alternating (compile_time). The GPU run
prints Triton's time to compile its kernel at the first launch too (one configuration, fresh cache).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import (PAIRED_ROUNDS, build_example_image, gpu_program, interleaved_best, paired_ratio,  # noqa: E402
                    parse_args, pick, record_row, report_row)
EXAMPLE = os.path.join(HERE, os.pardir, "examples", "gpu", "gemm.py")
SOURCE = '''
from tessera import function, op, tensor, bf16

@function
def gemm_bf16(A: tensor[bf16, {m}, {k}], B: tensor[bf16, {k}, {n}]) -> tensor[bf16, {m}, {n}]:
    return op.matmul(A, B)
'''


def _fresh_process(argv: list[str], env: dict) -> tuple[float, float, str]:
    """Seconds a fresh process running `argv` takes, start to exit; the CPU seconds it and its children (ptxas)
    used, which a busy machine inflates less; and what it printed."""
    import resource
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(argv, check=True, env=env, stdout=subprocess.PIPE, text=True).stdout
    took = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return took, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, out


def triton_compile_once() -> None:
    """A fresh process's cold compile of one configuration of the Triton peer's matmul (the 128x256x64 tile,
    3 stages, 8 warps that a 4096^3 product takes), its cache an empty directory: Triton's frontend, its MLIR
    passes, LLVM and ptxas to a cubin. For sm_90 (Triton's Hopper target, wgmma) whether or not a GPU is
    present: triton.compile with an explicit GPUTarget needs no driver. Prints the seconds from the first
    `triton.compile` call to its return (what the GPU run's launch-time figure measured) and the PTX's size."""
    with tempfile.TemporaryDirectory() as cache:
        os.environ["TRITON_CACHE_DIR"] = cache
        os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")   # its default; unset, 3.9 warns
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        _, kernel = triton_matmul()
        sig = dict(zip(kernel.arg_names, ["*bf16"] * 3 + ["i32"] * 9 + ["constexpr"] * 4))
        attrs = {(i,): [["tt.divisibility", 16]] for i in range(12)}   # what the launch's specialization gives
        t0 = time.perf_counter()
        compiled = triton.compile(ASTSource(kernel, sig, {"BM": 128, "BN": 256, "BK": 64, "GM": 8}, attrs),
                                  target=GPUTarget("cuda", 90, 32), options={"num_warps": 8, "num_stages": 3})
        took = time.perf_counter() - t0
        ptx = compiled.asm["ptx"]
        print(f"{took:.4f} {triton.__version__} {len(compiled.asm['cubin'])} {'wgmma' in ptx}")


def compile_time(rounds: int, baseline: str | None = None) -> None:
    """Our compile against Triton's, each side a fresh process, rounds alternating so that the load of this
    (shared) machine hits all alike; the best and the range of the rounds count.

    Ours: tessera-cc compiling the GEMM for sm_90a, the cache off. Static extents compile one kernel (what one
    Triton configuration is); symbolic ones two, the plan choosing between the tile shapes at launch. Triton:
    triton_compile_once. Both sides read Python bytecode from a private cache (PYTHONPYCACHEPREFIX, filled by
    an untimed first round), as an installed package reads the bytecode pip compiled; the last row is ours in
    the caller's environment unchanged (with PYTHONDONTWRITEBYTECODE=1, as in a development venv, an editable
    checkout's modules are compiled from source on every run). `baseline`: another tessera-cc (an older tree's,
    installed apart) whose static and symbolic compiles run in the same rounds, for a before/after in one run."""
    try:
        import triton  # noqa: F401
    except ImportError:
        triton = None
        print("triton is not installed: only tessera-cc is timed (pip install triton adds the peer)")
    with tempfile.TemporaryDirectory() as d:
        bytecode = dict(os.environ, TESSERA_CACHE="0", PYTHONPYCACHEPREFIX=os.path.join(d, "pycache"))
        bytecode.pop("PYTHONDONTWRITEBYTECODE", None)
        as_is = dict(os.environ, TESSERA_CACHE="0")
        sides = {}
        for what, extents in (("static", ("4096",) * 3), ("symbolic", ('"M"', '"K"', '"N"'))):
            src = os.path.join(d, f"gemm_{what}.py")
            with open(src, "w") as f:
                f.write(SOURCE.format(m=extents[0], k=extents[1], n=extents[2]))
            sides[what] = (["tessera-cc", src, "--target", "ptx", "--arch", "sm_90a", "-o",
                            os.path.join(d, f"{what}.tessera")], bytecode)
            if baseline:
                sides[f"baseline {what}"] = ([baseline, *sides[what][0][1:-1], os.path.join(d, f"b_{what}.tessera")],
                                             bytecode)
        if triton is not None:
            sides["triton"] = ([sys.executable, os.path.abspath(__file__), "--triton-compile-once"], bytecode)
        sides["static, environment as is"] = (sides["static"][0], as_is)
        times = {name: [] for name in sides}
        cpu = {name: [] for name in sides}
        triton_compile = []
        for r in range(rounds + 1):   # round 0 fills the bytecode cache, untimed
            for name, (argv, env) in sides.items():
                took, used, out = _fresh_process(argv, env)
                if r == 0:
                    continue
                times[name].append(took)
                cpu[name].append(used)
                if name == "triton":
                    secs, version, cubin, wgmma = out.split()
                    triton_compile.append(float(secs))
        load = os.getloadavg()
        print(f"{rounds} rounds, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, {os.cpu_count()} CPUs")
        labels = {"static": "tessera-cc, one sm_90a GEMM kernel (static 4096^3)",
                  "symbolic": "tessera-cc, a GEMM of symbolic extents (a kernel per tile shape the launch may take)",
                  "triton": f"Triton {version if triton else ''}, one configuration (whole process)",
                  "static, environment as is": "tessera-cc static, environment as is "
                                               f"(PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')})",
                  "baseline static": "baseline tessera-cc, static", "baseline symbolic": "baseline tessera-cc, symbolic"}
        for name, ts in times.items():
            print(f"{labels[name]:<72} best {min(ts):.3f} s  range {min(ts):.3f}-{max(ts):.3f} s  "
                  f"CPU best {min(cpu[name]):.3f} s")
        if triton is None:
            return
        print(f"{'Triton: triton.compile alone (in its process, imports done)':<72} best {min(triton_compile):.3f} s"
              f"  range {min(triton_compile):.3f}-{max(triton_compile):.3f} s  (cubin {cubin} bytes, wgmma {wgmma})")
        for name in ("static", "symbolic", "static, environment as is") + (("baseline static", "baseline symbolic")
                                                                         if baseline else ()):
            ours = min(times[name])
            record_row(f"compile {name}", {"tessera-cc": ours, "triton process": min(times["triton"]),
                                           "triton.compile": min(triton_compile)}, note="best of each")
            print(f"ours ({name}) / Triton: {ours / min(times['triton']):.2f} of its process, "
                  f"{ours / min(triton_compile):.2f} of triton.compile alone; CPU time "
                  f"{min(cpu[name]) / min(cpu['triton']):.2f} of its process's")


def triton_matmul():
    import triton
    import triton.language as tl

    configs = [triton.Config({"BM": 128, "BN": 256, "BK": 64, "GM": 8}, num_stages=3, num_warps=8),
               triton.Config({"BM": 64, "BN": 256, "BK": 32, "GM": 8}, num_stages=4, num_warps=4),
               triton.Config({"BM": 128, "BN": 128, "BK": 32, "GM": 8}, num_stages=4, num_warps=4),
               triton.Config({"BM": 128, "BN": 64, "BK": 32, "GM": 8}, num_stages=4, num_warps=4),
               triton.Config({"BM": 64, "BN": 128, "BK": 32, "GM": 8}, num_stages=4, num_warps=4),
               triton.Config({"BM": 128, "BN": 32, "BK": 32, "GM": 8}, num_stages=4, num_warps=4)]

    @triton.jit
    def kernel(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn, BM: tl.constexpr, BN: tl.constexpr,
               BK: tl.constexpr, GM: tl.constexpr):
        pid = tl.program_id(0)
        npm, npn = tl.cdiv(M, BM), tl.cdiv(N, BN)
        group = pid // (GM * npn)
        first = group * GM
        size = min(npm - first, GM)
        pm = first + (pid % (GM * npn)) % size
        pn = (pid % (GM * npn)) // size
        rm = (pm * BM + tl.arange(0, BM)) % M
        rn = (pn * BN + tl.arange(0, BN)) % N
        rk = tl.arange(0, BK)
        pa = a + rm[:, None] * sam + rk[None, :] * sak
        pb = b + rk[:, None] * sbk + rn[None, :] * sbn
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            x = tl.load(pa, mask=rk[None, :] < K - k * BK, other=0.0)
            y = tl.load(pb, mask=rk[:, None] < K - k * BK, other=0.0)
            acc = tl.dot(x, y, acc)
            pa += BK * sak
            pb += BK * sbk
        cm, cn = pm * BM + tl.arange(0, BM), pn * BN + tl.arange(0, BN)
        tl.store(c + scm * cm[:, None] + scn * cn[None, :], acc.to(tl.bfloat16),
                 mask=(cm[:, None] < M) & (cn[None, :] < N))

    tuned = triton.autotune(configs=configs, key=["M", "N", "K"])(kernel)

    def run(A, B, C, fn=tuned, **meta):
        M, K = A.shape
        N = B.shape[1]
        grid = lambda m: (triton.cdiv(M, m["BM"]) * triton.cdiv(N, m["BN"]),)  # noqa: E731
        fn[grid](A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1), C.stride(0), C.stride(1),
                 **meta)
    return run, kernel


def _tile_n(image_path: str, kernel: str) -> str:
    """The tile width (`tile.N`) of `kernel` in the image at `image_path`."""
    from tessera import image as images
    with open(image_path, "rb") as f:
        return {k.name: k for k in images.read_image(f.read()).kernels}[kernel].props.get("tile.N", "?")


def fp8(ctx, mod, image_path, plan, sizes, variants=(), control=False) -> None:
    """gemm_fp8_scaled end to end (the executor's call on one-byte tensors, scales and all) and its one kernel
    launched alone, against torch._scaled_mm(A, Bt.t(), scale_a, scale_b, out_dtype=bf16); each of `variants`
    ((name, module, its gemm_fp8_scaled plan, its image's path), --variant) has its kernel launched alone and its
    function called through the executor beside ours, in the same rounds; `control`: our function through a
    second executor program of the same image too, its row (the noise floor) printed first."""
    import torch
    from tessera import executor, plan as plans, stream
    [mm] = plan.steps
    kernel = mod.kernel(mm.kernel)
    prog = executor.load(image_path, ctx)
    vprogs = {name: executor.load(path, ctx) for name, _, _, path in variants}
    cprog = executor.load(image_path, ctx) if control else None
    s = stream.new(context=ctx)
    sa, sb = torch.tensor(0.75, device="cuda"), torch.tensor(1.5, device="cuda")

    def bf16_of(out):   # bf16 comes back as its bit patterns (uint16)
        return torch.from_numpy(out.numpy().view("int16")).view(torch.bfloat16).cuda()
    for n in sizes:
        env = {"M": n, "N": n, "K": n, "ONE": 1, "DEVICE_UNITS": ctx.properties["compute_units"]}
        A8 = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
        Bt8 = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)   # the weight as [N, K]
        A, Bt = A8.view(torch.uint8), Bt8.view(torch.uint8)              # their bit patterns (DLPack)
        C = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
        grid = tuple(plans.evaluate(g, env) for g in mm.grid)

        def alone():
            kernel(A, Bt, C, sa.reshape(1), sb.reshape(1), grid=grid, block=mm.block, smem_bytes=mm.smem, stream=s)

        def call():
            return prog.gemm_fp8_scaled(A, Bt, sa, sb, stream=s)
        kept = []

        def call_kept():   # results freed at the next round's untimed first call, not one by one
            if len(kept) > 20:
                kept.clear()
            kept.append(call())
        sides = {"function": (call, s.synchronize), "kept": (call_kept, s.synchronize),
                 "kernel": (alone, s.synchronize),
                 "torch": (lambda: torch._scaled_mm(A8, Bt8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16),
                           torch.cuda.synchronize)}
        launched = {}
        for name, vmod, vplan, path in variants:
            [vmm] = vplan.steps
            vkernel, vgrid, Cv = vmod.kernel(vmm.kernel), tuple(plans.evaluate(g, env) for g in vmm.grid), \
                torch.empty_like(C)
            launched[name] = (vmm, vgrid, Cv, path)
            sides[f"{name} kernel"] = (
                lambda vkernel=vkernel, vgrid=vgrid, vmm=vmm, Cv=Cv: vkernel(
                    A, Bt, Cv, sa.reshape(1), sb.reshape(1), grid=vgrid, block=vmm.block, smem_bytes=vmm.smem,
                    stream=s), s.synchronize)
            sides[f"{name} function"] = (lambda vprog=vprogs[name]: vprog.gemm_fp8_scaled(A, Bt, sa, sb, stream=s),
                                         s.synchronize)
        if cprog is not None:
            sides["control"] = (lambda: cprog.gemm_fp8_scaled(A, Bt, sa, sb, stream=s), s.synchronize)
        rounds = {}
        best = interleaved_best(sides, PAIRED_ROUNDS, calls=20, rounds_out=rounds)
        if cprog is not None:
            times, paired = pick(best, rounds, {"tessera function": "function", "control": "control"})
            report_row(f"fp8 e4m3 scaled {n} control", times, "TFLOP/s", 2 * n ** 3 / 1e12, shape=(n, n, n),
                       dtype="fp8", rounds=paired,
                       note="noise floor: the same function through a second executor program of the same image")
        out = call()
        s.synchronize()
        got = bf16_of(out)
        ref = torch._scaled_mm(A8, Bt8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.float32)
        err = ((got.float() - ref).abs().max() / ref.abs().max()).item()
        kept.clear()
        for name, (vmm, vgrid, Cv, path) in launched.items():
            verr = ((Cv.float() - ref).abs().max() / ref.abs().max()).item()
            vout = vprogs[name].gemm_fp8_scaled(A, Bt, sa, sb, stream=s)
            s.synchronize()
            vferr = ((bf16_of(vout).float() - ref).abs().max() / ref.abs().max()).item()
            times, paired = pick(best, rounds, {f"{name} kernel": f"{name} kernel", "tessera kernel": "kernel",
                                                "torch._scaled_mm": "torch"})
            report_row(f"fp8 e4m3 scaled {n} {name}", times, "TFLOP/s", 2 * n ** 3 / 1e12, shape=(n, n, n),
                       dtype="fp8", bytes=4 * n * n, rounds=paired,
                       note=f"{vmm.kernel} grid {vgrid[0]}, 128x{_tile_n(path, vmm.kernel)} tiles (ours "
                            f"128x{_tile_n(image_path, mm.kernel)}); max error {verr:.1e} of max |C|")
            times, paired = pick(best, rounds, {f"{name} function": f"{name} function",
                                                "tessera function": "function", "torch._scaled_mm": "torch"})
            report_row(f"fp8 e4m3 scaled {n} {name} function", times, "TFLOP/s", 2 * n ** 3 / 1e12, shape=(n, n, n),
                       dtype="fp8", bytes=4 * n * n, rounds=paired,
                       note=f"max error {vferr:.1e} of max |C|")
        for ours in ("function", "kept", "kernel"):   # the kernel alone is the roofline's point
            times, paired = pick(best, rounds, {f"tessera {ours}": ours, "torch._scaled_mm": "torch"})
            report_row(f"fp8 e4m3 scaled {n} {ours}", times, "TFLOP/s", 2 * n ** 3 / 1e12, shape=(n, n, n),
                       dtype="fp8", bytes=2 * n * n + 2 * n * n, rounds=paired,
                       note=f"max error {err:.1e} of max |C|")   # e4m3 A, Bt read, bf16 C written


F32_SOURCE = '''
@function
def f32_{k}(A: tensor[f32, "M", {k}], B: tensor[f32, {k}, "N"]) -> tensor[f32, "M", "N"]:
    return op.matmul(A, B)


@function(input_precision="tf32")
def tf32_{k}(A: tensor[f32, "M", {k}], B: tensor[f32, {k}, "N"]) -> tensor[f32, "M", "N"]:
    return op.matmul(A, B)
'''


def build_f32_image(path: str, sizes) -> None:
    """The f32 GEMMs for sm_90a, K static (each size's own pair of functions): the tf32 one is then the wgmma
    kernel of Cᵀ = Bᵀ·Aᵀ (a K known only at the launch takes the mma.sync kernel)."""
    import tessera
    source = "from tessera import function, op, tensor, f32\n" + "".join(F32_SOURCE.format(k=n) for n in sizes)
    with open(path, "wb") as f:
        f.write(tessera.compile(source, "gemm_f32.py", target="ptx", arch="sm_90a"))


def f32(ctx, mod, functions, image_path, sizes) -> None:
    """f32 GEMMs: `f32_K` (FMA units) against torch.matmul with TF32 off, and `tf32_K` (tf32 tensor cores) against
    torch.matmul with allow_tf32=True: each function as the executor runs it (tf32: the wgmma kernel, with
    no copy of B), and the GEMM kernel alone as its plan launches it."""
    import torch
    from tessera import executor, plan as plans, stream
    s = stream.new(context=ctx)
    prog = executor.load(image_path, ctx)
    matmul = torch.backends.cuda.matmul

    def torch_mm(A, B, tf32):
        def run():
            matmul.allow_tf32 = tf32   # read at each call: the two torch sides interleave
            torch.matmul(A, B)
        return run
    for n in sizes:
        A, B = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
        env = {"M": n, "N": n, "K": n, "DEVICE_UNITS": ctx.properties["compute_units"]}
        ref = torch.matmul(A.double(), B.double())
        for fn, tf32, label in ((f"f32_{n}", False, "fma"), (f"tf32_{n}", True, "tf32")):
            step = plans.chosen(functions[fn].steps[-1], env)   # the GEMM (after a copy of B, where there is one)
            kernel, grid = mod.kernel(step.kernel), plans.evaluate(step.grid[0], env)
            copied = len(functions[fn].steps) > 1   # tf32 with B copied to [N, K] (N static, not a multiple of 4)
            Bk = B.t().contiguous() if copied else B    # what the GEMM kernel reads: B, or the copy [N, K]
            C = torch.empty_like(A)
            call = getattr(prog, fn)
            kept = []

            def function():   # results kept for the round (freed at the next round's untimed call)
                if len(kept) > 10:
                    kept.clear()
                kept.append(call(A, B, stream=s))

            def alone():
                kernel(A, Bk, C, grid=grid, block=step.block, smem_bytes=step.smem, stream=s)
            sides = {"function": (function, s.synchronize), "kernel": (alone, s.synchronize)}
            if copied:   # the plan's two kernels without the call: B's copy to [N, K], then the GEMM
                pack = functions[fn].steps[0]
                pack_kernel, Bt = mod.kernel(pack.kernel), torch.empty_like(B)
                pack_grid = tuple(plans.evaluate(g, dict(env, KP=n)) for g in pack.grid)

                def kernels():
                    pack_kernel(B, Bt, grid=pack_grid, block=pack.block, stream=s)
                    kernel(A, Bt, C, grid=grid, block=step.block, smem_bytes=step.smem, stream=s)
                sides["kernels"] = (kernels, s.synchronize)
            peer = f"torch allow_tf32={tf32}"
            sides[peer] = (torch_mm(A, B, tf32), torch.cuda.synchronize)
            rounds = {}
            best = interleaved_best(sides, PAIRED_ROUNDS, calls=10, rounds_out=rounds)
            kept.clear()
            out = torch.from_numpy(call(A, B, stream=s).numpy()).cuda()
            s.synchronize()
            for what, got in (("function", out), ("kernel", C), *((("kernels", C),) if copied else ())):
                err = ((got.double() - ref).abs().max() / ref.abs().max()).item()
                times, paired = pick(best, rounds, {f"tessera {what}": what, peer: peer})
                report_row(f"f32 gemm {n} {label} {what}", times, "TFLOP/s", 2 * n ** 3 / 1e12, shape=(n, n, n),
                           bytes=3 * 4 * n * n, rounds=paired,
                           dtype="tf32" if tf32 else "f32",   # the roofline's ceiling: tf32 494, f32 67 TFLOP/s
                           note=f"{step.kernel}; max error {err:.1e} of max |C|")
    matmul.allow_tf32 = False


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--image", help="examples/gpu/gemm.py built beforehand with --build-image")
    p.add_argument("--build-image", metavar="PATH", help="only write the image to PATH")
    p.add_argument("--compile-time", action="store_true",
                   help="only time tessera-cc on one GEMM, against Triton compiling one configuration if installed")
    p.add_argument("--rounds", type=int, default=5, help="--compile-time: alternating rounds (default 5)")
    p.add_argument("--baseline-cc", metavar="TESSERA_CC",
                   help="--compile-time: also time this tessera-cc (another tree's) in the same rounds")
    p.add_argument("--triton-compile-once", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--variant", metavar="PATH", action="append", default=[],
                   help="another image (built with overrides) timed beside --image; may be given several times")
    p.add_argument("--sizes", default="2048,3072,4096,8192")
    p.add_argument("--fp8", action="store_true", help="the fp8 GEMM against torch._scaled_mm")
    p.add_argument("--control", action="store_true",
                   help="(needs --image; bf16 and --fp8) also time --image a second time, loaded apart, as the side "
                        "'control': its paired ratio to ours, printed first, is the run's noise floor")
    p.add_argument("--f32", action="store_true", help="f32 GEMMs (FMA units; tf32 tensor cores) against torch.matmul "
                                                     "with TF32 off and on")
    args = parse_args(p)
    if args.build_image:
        if args.f32:
            return build_f32_image(args.build_image, [int(x) for x in args.sizes.split(",")])
        return build_example_image(EXAMPLE, args.build_image)
    if args.triton_compile_once:
        return triton_compile_once()
    if args.compile_time:
        return compile_time(args.rounds, args.baseline_cc)

    if args.control and (not args.image or args.f32):
        p.error("--control needs --image (loaded a second time), and is for the bf16 and --fp8 runs")
    import torch
    from tessera import plan as plans, stream

    ctx, mod, functions = gpu_program(args.image, EXAMPLE)
    variants = []   # (name, module, plans, path) of each --variant
    for path in args.variant:
        from tessera import image as images, runtime
        with open(path, "rb") as f:
            data = f.read()
        variants.append((os.path.splitext(os.path.basename(path))[0], runtime.load(data),
                         plans.decode(images.read_image(data).section(plans.SECTION)), path))
    if args.fp8:
        if not args.image:
            p.error("--fp8 needs --image (the image the executor loads too)")
        return fp8(ctx, mod, args.image, functions["gemm_fp8_scaled"], [int(x) for x in args.sizes.split(",")],
                   [(name, vmod, vplans["gemm_fp8_scaled"], path) for name, vmod, vplans, path in variants],
                   args.control)
    if args.f32:
        if not args.image:
            p.error("--f32 needs --image (built beforehand by --build-image PATH --f32 --sizes ...)")
        return f32(ctx, mod, functions, args.image, [int(x) for x in args.sizes.split(",")])
    props = ctx.properties
    planned = functions["gemm_bf16"].steps[0]
    variant_steps = [(name, vmod, vplans["gemm_bf16"].steps[0]) for name, vmod, vplans, _ in variants]
    if args.control:   # our image loaded again: a module of its own, timed as one more side
        from tessera import runtime
        with open(args.image, "rb") as f:
            control = (runtime.load(f.read()), planned)
    triton_run, triton_kernel = triton_matmul()
    import triton
    with tempfile.TemporaryDirectory() as cache:
        os.environ["TRITON_CACHE_DIR"] = cache
        A = torch.randn(512, 512, device="cuda", dtype=torch.bfloat16)
        t0 = time.perf_counter()
        triton_run(A, A, torch.empty_like(A), fn=triton_kernel, BM=128, BN=256, BK=64, GM=8, num_stages=3,
                   num_warps=8)
        torch.cuda.synchronize()
        print(f"Triton {triton.__version__}: compile of one matmul configuration, fresh cache: "
              f"{time.perf_counter() - t0:.2f} s")
    s = stream.new(context=ctx)
    for n in (int(x) for x in args.sizes.split(",")):
        A = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        B = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        C, Ct = torch.empty_like(A), torch.empty_like(A)
        env = {"M": n, "N": n, "K": n, "DEVICE_UNITS": props["compute_units"]}
        step = plans.chosen(planned, env)  # the tile shape the plan takes for this size, as the executor does
        kernel, grid = mod.kernel(step.kernel), plans.evaluate(step.grid[0], env)

        def ours():
            kernel(A, B, C, grid=grid, block=step.block, smem_bytes=step.smem, stream=s)

        sides = {"tessera": (ours, s.synchronize), "torch": (lambda: torch.matmul(A, B), torch.cuda.synchronize),
                 "triton": (lambda: triton_run(A, B, Ct), torch.cuda.synchronize)}
        launched = {}
        if args.control:
            cmod, cplan = control
            cstep = plans.chosen(cplan, env)
            ckernel, cgrid, Cc = cmod.kernel(cstep.kernel), plans.evaluate(cstep.grid[0], env), torch.empty_like(A)
            sides["control"] = (lambda: ckernel(A, B, Cc, grid=cgrid, block=cstep.block, smem_bytes=cstep.smem,
                                                stream=s), s.synchronize)
        for name, vmod, vplan in variant_steps:
            vstep = plans.chosen(vplan, env)
            vkernel, vgrid = vmod.kernel(vstep.kernel), plans.evaluate(vstep.grid[0], env)
            Cv = torch.empty_like(A)
            launched[name] = (vstep, vgrid, Cv)
            sides[f"variant {name}"] = (
                lambda vkernel=vkernel, vgrid=vgrid, vstep=vstep, Cv=Cv: vkernel(
                    A, B, Cv, grid=vgrid, block=vstep.block, smem_bytes=vstep.smem, stream=s), s.synchronize)
        rounds = {}
        best = interleaved_best(sides, PAIRED_ROUNDS, calls=20, rounds_out=rounds)
        ref = torch.matmul(A, B).float()
        err = ((C.float() - ref).abs().max() / ref.abs().max()).item()
        if args.control:   # the noise floor first: the same kernel against itself
            cerr = ((Cc.float() - ref).abs().max() / ref.abs().max()).item()
            report_row(f"bf16 gemm {n} control", {"tessera": best["tessera"], "control": best.pop("control")},
                       "TFLOP/s", 2 * n ** 3 / 1e12, shape=(n, n, n), dtype="bf16", bytes=3 * 2 * n * n,
                       rounds={"tessera": rounds["tessera"], "control": rounds.pop("control")},
                       note=f"noise floor: our image loaded a second time; max error {cerr:.1e} of max |C|")
        note = f"{step.kernel}; max error {err:.1e} of max |C|"
        for name, (vstep, vgrid, Cv) in launched.items():
            verr = ((Cv.float() - ref).abs().max() / ref.abs().max()).item()
            v, vr = best.pop(f"variant {name}"), rounds.pop(f"variant {name}")
            vs_torch, vs_ours = paired_ratio(rounds["torch"], vr), paired_ratio(rounds["tessera"], vr)
            note += (f"; variant {name}: {vstep.kernel} (grid {vgrid}) {best['torch'] / v:.3f}x torch "
                     f"(paired {vs_torch[0]:.3f} ({vs_torch[1]:.3f}-{vs_torch[2]:.3f})), {best['tessera'] / v:.3f}x "
                     f"ours (paired {vs_ours[0]:.3f} ({vs_ours[1]:.3f}-{vs_ours[2]:.3f})), max error {verr:.1e}")
        report_row(f"bf16 gemm {n}", best, "TFLOP/s", 2 * n ** 3 / 1e12, shape=(n, n, n), dtype="bf16",
                   bytes=3 * 2 * n * n, note=note, rounds=rounds)


if __name__ == "__main__":
    sys.exit(main())
