"""The strict numerics profile on a GPU against the CPU (kernels.py's strict_golden, compiled with
numerics="strict" for ptx sm_80 and for the CPU): the same program gives the same bits on both — exp, erf,
tanh, log and pow computed in f64 and rounded once (passes/strict_math.py; passes/f64_math.py on the GPU,
glibc on the CPU), division and sqrt correctly rounded, a*b + c not contracted, row, column and whole-tensor
sums and maxima in the one order of the generated kernels, softmax and layernorm, and the GEMM as the SIMT
kernel of one product and one sum per k, ascending (with a bias and gelu epilogue). The elementwise results
are also numpy's f64 results rounded to f32 (correctly rounded). NaN compares equal to NaN whatever its
payload (the CPU's and the GPU's default NaNs differ in sign)."""

import math

import numpy as np
import pytest

NAME = "strict_golden"


@pytest.fixture(scope="module")
def both(cuda, image_of, cpu_image_of):
    from tessera import executor
    return executor.load(image_of(NAME), cuda), executor.load(cpu_image_of(NAME))


def _differences(what: str, gpu, cpu) -> list[str]:
    """What differs between `gpu` and `cpu` (arrays of f32), bit for bit (any NaN equal to any NaN)."""
    gpu, cpu = np.asarray(gpu, np.float32), np.asarray(cpu, np.float32)
    if gpu.shape != cpu.shape:
        return [f"{what}: shapes {gpu.shape} and {cpu.shape}"]
    same = (gpu.view(np.uint32) == cpu.view(np.uint32)) | (np.isnan(gpu) & np.isnan(cpu))
    if same.all():
        return []
    where = np.argwhere(~same)[:4]
    ulps = np.abs(gpu.view(np.int32).astype(np.int64) - cpu.view(np.int32).astype(np.int64))[~same]
    return [f"{what}: {(~same).sum()} of {same.size} differ (up to {ulps.max()} ulp), e.g. at "
            f"{[tuple(int(i) for i in w) for w in where]}: gpu {gpu[tuple(where.T)]} cpu {cpu[tuple(where.T)]}"]


def _compare(name: str, gpu_out, cpu_out) -> None:
    gpu_out = gpu_out if isinstance(gpu_out, tuple) else (gpu_out,)
    cpu_out = cpu_out if isinstance(cpu_out, tuple) else (cpu_out,)
    problems = [p for i, (g, c) in enumerate(zip(gpu_out, cpu_out, strict=True))
                for p in _differences(f"{name}[{i}]", g, c)]
    assert not problems, "\n".join(problems)


RNG = np.random.default_rng(26)


def _inputs(n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    X = (RNG.standard_normal((n, d)) * 3).astype(np.float32)
    Y = (RNG.standard_normal((n, d)) * 2).astype(np.float32)
    edges = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 88.7, -103.0, 1e-20, 4.0, -3.9])
    X.flat[:edges.size] = edges
    Y.flat[:3] = [0.0, 3.0, -2.0]
    return X, Y


def test_the_images_are_strict(image_of, cpu_image_of):
    from tessera import image
    gpu, cpu = image.read_image(image_of(NAME)), image.read_image(cpu_image_of(NAME))
    assert {k.props["numerics"] for k in gpu.kernels + cpu.kernels} == {"strict"}
    ptx = gpu.section(".tessera.code.ptx").decode()
    for inexact in ("approx", "fma.rn.f32", "div.full", ".ftz"):
        assert inexact not in ptx, inexact


def test_elementwise_math_is_the_cpus_and_correctly_rounded(both):
    gpu, cpu = both
    X, Y = _inputs(513, 1000)
    got, want = gpu.maths(X, Y), cpu.maths(X, Y)
    _compare("maths", got, want)
    x, y = X.astype(np.float64), Y.astype(np.float64)
    with np.errstate(all="ignore"):
        exact = (np.exp(x), np.vectorize(math.erf)(x), np.tanh(x), x / y, np.log(np.abs(x)), np.sqrt(np.abs(x)))
    _compare("maths vs numpy", tuple(got[:6]), tuple(e.astype(np.float32) for e in exact))
    # X * Y + Y with two roundings (no fma)
    _compare("a*b + c", got[6], (X * Y) + Y)


def test_reductions_softmax_layernorm_are_the_cpus(both):
    gpu, cpu = both
    X, _ = _inputs(257, 1000)
    X[~np.isfinite(X)] = 1.0   # finite rows, so the sums say something
    g, b = RNG.standard_normal(1000).astype(np.float32), RNG.standard_normal(1000).astype(np.float32)
    _compare("rows", gpu.rows(X, g, b), cpu.rows(X, g, b))
    W = (RNG.standard_normal((4099, 300)) * 10).astype(np.float32)
    _compare("whole", gpu.whole(W), cpu.whole(W))


def test_gemm_is_the_cpus_and_the_sequential_loop(both):
    gpu, cpu = both
    A = RNG.standard_normal((300, 700)).astype(np.float32)
    B = RNG.standard_normal((700, 257)).astype(np.float32)
    b = RNG.standard_normal(257).astype(np.float32)
    got = gpu.gemm(A, B, b)
    _compare("gemm", got, cpu.gemm(A, B, b))
    loop = np.zeros((300, 257), np.float32)
    for k in range(700):   # one product and one sum per k, each rounded to f32
        loop = loop + A[:, k:k + 1] * B[k:k + 1, :]
    _compare("gemm vs the loop", got[0], loop)


def test_runs_repeat_bitwise(both):
    gpu, _ = both
    X, Y = _inputs(64, 333)
    _compare("repeat", gpu.maths(X, Y), gpu.maths(X, Y))
