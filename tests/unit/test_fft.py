"""The operator algebra's Fourier transforms compiled (passes/fourier.py, passes/tod_lower.py): op.fft / op.ifft
applied to real vectors, stacks of columns, Kronecker products and spectral filters, against numpy.fft (norm=
"ortho": the transforms are unitary) and the reference interpreter, on the CPU, on SPIR-V run by the OpenCL CPU
runtime, and compiled (ptxas-assembled) for ptx and amdgpu. Complex results are numpy complex arrays.

Sizes that are powers of two take the FFT (passes/fft.py: Stockham stages), others from 16 to 2^28 Bluestein's
chirp-z on those stages (passes/fft.py), the rest the DFT as GEMMs.

Tolerances, relative to the largest reference magnitude: f32 1e-5 · log2(n) (the DFT as GEMMs: twiddles within
an ulp, each output a sum of n f32 products, observed ~1e-7; the FFT observed at most 2.4e-7 up to n = 2^20);
f64 1e-12 · log2(n) (products and row sums), the FFT's large sizes 1e-12 (observed at most 6.2e-16)."""

import math
import pathlib

import numpy as np
import pytest

from tessera import compiler, executor, image, tessera_frontend_compile
from tessera.backends.ptx import ptxas
from tessera.diagnostics import CompileError
from tessera.options import CompileOptions

from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "graph"
RNG = np.random.default_rng(2718)

SOURCE = """
@function
def transform(x: tensor[f32, 12]):
    return op.fft(12, dtype=f32) @ x, op.ifft(12, dtype=f32) @ x

@function
def columns(X: tensor[f32, 2, 16, 3]):
    F = op.fft(16, dtype=f32)
    return F @ X, op.adjoint(F) @ (F @ X)

@function
def two_d(x: tensor[f32, 48]):
    return op.kronecker(op.fft(6, dtype=f32), op.fft(8, dtype=f32)) @ x

@function
def filtered(h: tensor[f32, 32], x: tensor[f32, 32]):
    F = op.fft(32, dtype=f32)
    return (op.adjoint(F) @ op.diag(F @ h) @ F) @ x, (F + 2.0 * op.eye(32, dtype=f32)) @ x

@function
def twiddles(E: tensor[f32, 12, 12]):
    return op.fft(12, dtype=f32) @ E

@function
def transform64(X: tensor[f64, 10, 2], E: tensor[f64, 7, 7]):
    return op.fft(10, dtype=f64) @ X, op.ifft(7, dtype=f64) @ E
"""


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


ARGS = {
    "transform": lambda: (randn(12),),
    "columns": lambda: (randn(2, 16, 3),),
    "two_d": lambda: (randn(48),),
    "filtered": lambda: (randn(32), randn(32)),
    "twiddles": lambda: (np.eye(12, dtype=np.float32),),
    "transform64": lambda: (randn(10, 2, dtype=np.float64), np.eye(7)),
}


def numpy_reference(name, *args):
    """What numpy.fft computes for each function of SOURCE (in f64)."""
    a = [np.asarray(x, np.float64) for x in args]
    if name == "transform":
        return np.fft.fft(a[0], norm="ortho"), np.fft.ifft(a[0], norm="ortho")
    if name == "columns":
        return np.fft.fft(a[0], axis=1, norm="ortho"), a[0]
    if name == "two_d":
        return (np.fft.fft2(a[0].reshape(6, 8), norm="ortho").ravel(),)
    if name == "filtered":   # the convolution theorem: F* diag(F h) F x = (h ⊛ x) / √n
        h, x = a
        conv = np.array([sum(h[j] * x[(i - j) % 32] for j in range(32)) for i in range(32)])
        return conv / math.sqrt(32), np.fft.fft(x, norm="ortho") + 2 * x
    if name == "twiddles":
        return (np.fft.fft(a[0], axis=0, norm="ortho"),)
    return np.fft.fft(a[0], axis=0, norm="ortho"), np.fft.ifft(a[1], axis=0, norm="ortho")


def sizes(name):
    return {"transform": 12, "columns": 16, "two_d": 48, "filtered": 32, "twiddles": 12, "transform64": 10}[name]


def close(got, want, n, double=False):
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape, (g.shape, w.shape)
        tol = (1e-12 if double else 1e-5) * math.log2(n) * float(np.abs(w).max())
        np.testing.assert_allclose(g, w, rtol=0, atol=tol)


@pytest.fixture(scope="module")
def built():
    return compiler.compile_source(SOURCE, "fft.py")


@pytest.fixture(scope="module")
def cpu(built):
    return executor.load(built.image)


@pytest.fixture(scope="module")
def reference():
    return tessera_frontend_compile(SOURCE, {"filename": "fft.py"})


@pytest.mark.parametrize("name", sorted(ARGS))
def test_transforms_match_numpy_fft(cpu, name):
    args = ARGS[name]()
    got = getattr(cpu, name)(*args)
    got = got if isinstance(got, tuple) else (got,)
    close(got, numpy_reference(name, *args), sizes(name), double=name == "transform64")


def test_complex_results_are_numpy_complex_arrays(cpu, reference):
    x = ARGS["transform"]()
    got, ref = cpu.transform(*x), reference.interpret("transform", *x)
    assert [g.dtype for g in got] == [np.complex64, np.complex64] == [np.asarray(r).dtype for r in ref]
    h, x = ARGS["filtered"]()
    conv, shifted = cpu.filtered(h, x)
    assert conv.dtype == shifted.dtype == np.complex64
    got64 = cpu.transform64(*ARGS["transform64"]())
    assert [g.dtype for g in got64] == [np.complex128, np.complex128]


@pytest.mark.parametrize("name", sorted(ARGS))
def test_transforms_match_the_interpreter(cpu, reference, name):
    args = ARGS[name]()
    got = getattr(cpu, name)(*args)
    want = reference.interpret(name, *args)
    close(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,), sizes(name),
          double=name == "transform64")


def test_twiddles_are_within_an_ulp():
    """F applied to the identity is F itself, every product exact (by 1 or 0): the twiddle kernel's entries,
    computed from j·k mod n by a reduction to the nearest quarter turn and Taylor polynomials, within three ulps
    of the largest entry 1/√n of cos and −sin / √n in long double (an entry near 0 is not held to its own tiny ulp;
    the roundings of the angle, the polynomial and the product by 1/√n; f64 measured 2.3 ulps, f32 0.5)."""
    src = """
@function
def f32_(E: tensor[f32, 12, 12]):
    return op.fft(12, dtype=f32) @ E

@function
def f64_(E: tensor[f64, 12, 12]):
    return op.fft(12, dtype=f64) @ E
"""
    program = executor.load(compiler.compile_source(src, "tw.py").image)
    jk = np.outer(np.arange(12), np.arange(12)) % 12
    angle = 2 * np.pi * jk.astype(np.longdouble) / 12
    exact = {np.real: np.cos(angle) / np.sqrt(np.longdouble(12)), np.imag: -np.sin(angle) / np.sqrt(np.longdouble(12))}
    for got, dt in ((program.f32_(np.eye(12, dtype=np.float32)), np.float32), (program.f64_(np.eye(12)), np.float64)):
        for part, want in exact.items():
            ulp = np.longdouble(np.spacing(dt(1 / math.sqrt(12))))
            assert np.abs(part(got).astype(np.longdouble) - want).max() <= 3 * ulp, dt


def fourier_kernels(plan) -> list[str]:
    """The kinds of a plan's Fourier kernels, told by their sources (passes/fourier.py, passes/fft.py)."""
    kinds = []
    for s in plan["steps"]:
        if "__fourier" in s.get("kernel", ""):
            src = s["source"]
            kinds.append("stage" if "a0r = " in src else "twiddle" if "q = (8 * m" in src
                         else "part" if "X[2 * i +" in src else "interleave")
    return kinds


def test_transforms_are_gemms_and_fourier_kernels(built):
    """Not a power of two (12, 6, 10, 7): two twiddle kernels per size and dtype in a function, GEMMs for the f32
    transforms (none for f64), one interleaving kernel per complex result. A power of two: log₄ n radix-4 stages
    (a radix-2 one last where log₂ n is odd), no GEMM, and a returned result is the last stage's pairs (no
    interleaving); an inverse applied to a transform reads its pairs (no parts)."""
    plans = built.metadata["plans"]
    kinds = {name: [s["kernel"].split("__")[1] for s in p["steps"] if "kernel" in s] for name, p in plans.items()}
    assert sorted(fourier_kernels(plans["transform"])) == ["interleave"] * 2 + ["twiddle"] * 2
    assert sum(k.startswith("gemm") for k in kinds["transform"]) == 4
    assert fourier_kernels(plans["columns"]) == ["stage"] * 4           # F X: 2 stages, F* (F X): 2 more
    assert not any(k.startswith("gemm") for k in kinds["columns"])
    # F₆ ⊗ F₈: F₈'s 2 stages (their parts the transposes read), F₆'s twiddles, the result interleaved
    assert sorted(fourier_kernels(plans["two_d"])) == ["interleave", "part", "part", "stage", "stage", "twiddle",
                                                       "twiddle"]
    assert sum(k.startswith("gemm") for k in kinds["transform64"]) == 0
    filtered = fourier_kernels(plans["filtered"])   # F h, F x: 3 stages each (32 = 4·4·2), F* of the product 3
    assert filtered.count("stage") == 9 and "twiddle" not in filtered


def test_opencl_runs_the_transforms(opencl):  # noqa: F811
    program = executor.load(compiler.compile_source(SOURCE, "fft.py", CompileOptions(target="spirv")).image, opencl)
    for name in ("transform", "columns", "two_d", "filtered", "transform64"):
        args = ARGS[name]()
        got = getattr(program, name)(*args)
        close(got if isinstance(got, tuple) else (got,), numpy_reference(name, *args), sizes(name),
              double=name == "transform64")


@pytest.mark.skipif(ptxas.find() is None, reason="ptxas (CUDA's PTX assembler) is not installed (the CUDA toolkit)")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx_kernels_assemble(arch):
    data = compiler.compile_source(SOURCE, "fft.py", CompileOptions(target="ptx", arch=arch)).image
    kernels = image.read_image(data).kernels
    fourier = [k for k in kernels if "__fourier" in k.name]
    assert fourier and all(k.regs > 0 for k in fourier)


@pytest.mark.parametrize("arch", ["gfx942", "gfx1100"])
def test_amdgpu_compiles_the_transforms(arch):
    plans = compiler.compile_source(SOURCE, "fft.py", CompileOptions(target="amdgpu", arch=arch)).metadata["plans"]
    assert any("__fourier" in s.get("kernel", "") for s in plans["transform64"]["steps"])


@pytest.mark.parametrize("line, expect", [
    ("op.abs(op.fft(8, dtype=f32) @ x)", "4:12: error: 'ttensor.unary' of a complex tensor has no kernel lowering "
                                         "on cpu"),
    ("op.fft(300000001, dtype=f32) @ y", "4:12: error: 'tod.fft' has no kernel lowering yet on cpu: a Fourier "
                                     "transform of size 300000001 is larger than the 4096 its DFT as GEMMs takes (the "
                                     "FFT takes powers of two, Bluestein's other sizes up to 268435456, both of "
                                     "tensors of static extents with at most 536870912 entries once padded)"),
    ("op.fft(8192, dtype=f32) @ w", "4:12: error: 'tod.fft' has no kernel lowering yet on cpu: a Fourier "
                                    "transform of size 8192 is larger than the 4096 its DFT as GEMMs takes (the "
                                    "FFT takes powers of two, Bluestein's other sizes up to 268435456, both of tensors "
                                    "of static extents with at most 536870912 entries once padded)"),
])
def test_refusals_at_the_users_line(line, expect):
    src = ("\n@function\ndef f(z: tensor[c64, 8], x: tensor[f32, 8], y: tensor[f32, 300000001], "
           "w: tensor[f32, 8192, \"K\"]):\n"
           f"    return {line}\n")
    with pytest.raises(CompileError) as e:
        compiler.compile_source(src, "user.py")
    assert "user.py:" + expect in str(e.value)


@pytest.mark.parametrize("target", ["cpu", "spirv"])
def test_spectral_examples_circular_convolution(target, request):
    """examples/graph/spectral.py's FFT convolution (f64): the circulant and F* diag(√n F h) F, both h ⊛ x, the
    second complex with a zero imaginary part, against the interpreter and numpy."""
    path = EXAMPLES / "spectral.py"
    ctx = request.getfixturevalue("opencl") if target == "spirv" else None
    built = compiler.compile_source(path.read_text(), str(path),
                                    CompileOptions(target=target, kernels=("circular_convolution",)))
    program = executor.load(built.image, *([ctx] if ctx else []))
    h, x = randn(64, dtype=np.float64), randn(64, dtype=np.float64)
    got = program.circular_convolution(h, x)
    want = tessera_frontend_compile(path.read_text(), {"filename": str(path)}).interpret("circular_convolution", h, x)
    assert got[1].dtype == np.complex128
    close(got, want, 64, double=True)
    conv = np.array([sum(h[j] * x[(i - j) % 64] for j in range(64)) for i in range(64)])
    close(got, (conv, conv), 64, double=True)


COMPLEX_PARAMETERS = """
@function
def inverse(z: tensor[c64, 2, 12, 3], d: tensor[c128, 10], x: tensor[f64, 10]):
    return op.ifft(12, dtype=f32) @ z, (op.ifft(10, dtype=f64) @ op.diag(d) @ op.fft(10, dtype=f64)) @ x
"""


@pytest.mark.parametrize("target", ["cpu", "spirv"])
def test_complex_parameters(target, request):
    """Complex arguments (numpy complex64/complex128 arrays) are read as their halves (ttensor.part kernels): the
    inverse transform of a batch of spectra, and a complex spectral filter applied to a real signal."""
    ctx = request.getfixturevalue("opencl") if target == "spirv" else None
    program = executor.load(compiler.compile_source(COMPLEX_PARAMETERS, "z.py", CompileOptions(target=target)).image,
                            *([ctx] if ctx else []))
    z = (randn(2, 12, 3) + 1j * randn(2, 12, 3)).astype(np.complex64)
    d, x = randn(10, dtype=np.float64) + 1j * randn(10, dtype=np.float64), randn(10, dtype=np.float64)
    a, b = program.inverse(z, d, x)
    assert (a.dtype, b.dtype) == (np.complex64, np.complex128)
    close([a], [np.fft.ifft(z.astype(np.complex128), axis=1, norm="ortho")], 12)
    close([b], [np.fft.ifft(d * np.fft.fft(x, norm="ortho"), norm="ortho")], 10, double=True)


def test_an_inverse_pair_is_the_identity_with_complex_results():
    """ifft ∘ fft is rewritten to the identity (tessera-tod-canonicalize); the apply stays complex-typed, so the
    real action gets a zero imaginary part."""
    src = "\n@function\ndef f(x: tensor[f32, 8]):\n    return (op.ifft(8, dtype=f32) @ op.fft(8, dtype=f32)) @ x\n"
    x = randn(8)
    got = executor.load(compiler.compile_source(src, "u.py").image).f(x)
    assert got.dtype == np.complex64
    np.testing.assert_array_equal(got, x.astype(np.complex64))


TILE_KERNEL = """
@kernel
def {name}(X: tensor[{dt}, {r}, {n}], Re: tensor[{dt}, {r}, {n}], Im: tensor[{dt}, {r}, {n}],
           Back: tensor[{dt}, {r}, {n}]):
    re, im = tile.fft(X)
    Re[:] = re
    Im[:] = im
    back, _ = tile.fft(re, im, inverse=True)
    Back[:] = back
"""
TILE_SHAPES = {"spectrum": ((8, 12), np.float32), "stages": ((8, 64), np.float32), "stages64": ((4, 2048), np.float64)}
TILE = "from tessera import f32, f64, kernel, tensor, tile\n" + "".join(
    TILE_KERNEL.format(name=name, dt="f32" if dt == np.float32 else "f64", r=r, n=n)
    for name, ((r, n), dt) in TILE_SHAPES.items())


def run_tile(program, reference=None):
    """tile.fft against numpy.fft (unnormalized) in f64, relative to the largest magnitude: f32 within 1e-5·log2 n
    (observed ~6e-8), f64 within 1e-12 (observed ~2e-15); and against the reference interpreter likewise."""
    for name, (shape, dt) in TILE_SHAPES.items():
        x = randn(*shape, dtype=dt)
        outs = getattr(program, name)(x, *(np.zeros(shape, dt) for _ in range(3)))
        want = np.fft.fft(x.astype(np.float64), axis=1)
        close([outs[0] + 1j * outs[1], outs[2]], [want, x], shape[1], double=dt == np.float64)
        if reference is not None:
            ref = reference.interpret(name, x, *(np.zeros(shape, dt) for _ in range(3)))
            close(outs, ref, shape[1], double=dt == np.float64)


def test_tile_fft_is_numpy_fft_of_the_rows():
    """tile.fft(x): numpy.fft.fft along the last axis (unnormalized), as (re, im); inverse=True: numpy.fft.ifft.
    Compiled for the CPU and interpreted (ttensor.fft_stage, twiddle and part in tessera/interpret/fourier_ops)."""
    run_tile(executor.load(compiler.compile_source(TILE, "tile_fft.py").image),
             tessera_frontend_compile(TILE, {"filename": "tile_fft.py"}))


def test_tile_fft_on_opencl(opencl):  # noqa: F811
    run_tile(executor.load(compiler.compile_source(TILE, "tile_fft.py", CompileOptions(target="spirv")).image,
                           opencl))


def test_tile_fft_of_a_power_of_two_is_stages():
    """n = 64: three radix-4 Stockham stages a transform (no twiddle matrix, no GEMM), 2048: five radix-4 and one
    radix-2; n = 12: the DFT as GEMMs (the cos and sin twiddle kernels, shared by both transforms)."""
    plans = compiler.compile_source(TILE, "tile_fft.py").metadata["plans"]
    assert fourier_kernels(plans["stages"]).count("stage") == 2 * 3
    assert fourier_kernels(plans["stages64"]).count("stage") == 2 * 6
    assert "twiddle" not in fourier_kernels(plans["stages"]) + fourier_kernels(plans["stages64"])
    assert not any("gemm" in s.get("kernel", "") for n in ("stages", "stages64") for s in plans[n]["steps"])
    assert fourier_kernels(plans["spectrum"]).count("twiddle") == 2   # one cos, one sin: shared by both


@pytest.mark.parametrize("target, arch", [("ptx", "sm_80"), ("ptx", "sm_90a"), ("amdgpu", "gfx942")])
def test_tile_fft_compiles_for_gpus(target, arch):
    data = compiler.compile_source(TILE, "tile_fft.py", CompileOptions(target=target, arch=arch)).image
    kernels = image.read_image(data).kernels
    names = [k.name for k in kernels]
    assert sum("spectrum__fourier" in k for k in names) == 2, names
    assert sum("stages__fourier" in k for k in names) >= 6, names
    if target == "ptx" and ptxas.find() is not None:
        assert all(k.regs > 0 for k in kernels if "__fourier" in k.name)


@pytest.mark.parametrize("call, expect", [
    ("tile.fft(H)", "tile.fft takes f32 or f64 tiles of one shape and dtype (op.cast first)"),
    ("tile.fft(X, X, X)", "tile.fft(x) takes a tile, or the real and imaginary tiles tile.fft(re, im)"),
    ("tile.fft(X, norm='ortho')", "tile.fft takes inverse=True or False and nothing else"),
    ("tile.fft(L)", "tile.fft transforms a static last axis of at most 4096 elements or a power of two of a tile "
                    "of static extents, got 5000"),
])
def test_tile_fft_refusals(call, expect):
    src = ("from tessera import f16, f32, kernel, tensor, tile\n\n@kernel\n"
           "def k(X: tensor[f32, 4, 8], H: tensor[f16, 4, 8], L: tensor[f32, 2, 5000], O: tensor[f32, 4, 8]):\n"
           f"    re, im = {call}\n    O[:] = re\n")
    with pytest.raises(CompileError) as e:
        compiler.compile_source(src, "t.py")
    assert "t.py:5:" in str(e.value) and expect in str(e.value)


def test_the_examples_matrix_compares_complex_results():
    """tools/examples_matrix's comparison takes |compiled − interpreted| of complex results (they were compared
    for equality, so examples/graph/fourier.py read 'DIFFERS')."""
    from tessera.tools import examples_matrix as em
    want = np.array([1 + 2j, -3j], np.complex64)
    assert em._close("r", "f32", want + np.complex64(1e-5j), want) is None
    assert "beyond the f32 tolerance" in em._close("r", "f32", want + np.complex64(1e-2j), want)


# Powers of two take the FFT (passes/fft.py): sizes from 2 to 2^17, an odd and an even number of radix-2 factors
# (a radix-2 stage last where log2 n is odd), beyond the DFT's old 4096, batched as stacks of columns, real and
# complex inputs, forward and inverse.
LARGE = """
@function
def small32(a: tensor[f32, 2], b: tensor[f32, 3, 8, 5], c: tensor[c64, 4, 2]):
    return op.fft(2, dtype=f32) @ a, op.ifft(8, dtype=f32) @ b, op.fft(4, dtype=f32) @ c

@function
def large32(x: tensor[f32, 3, 8192, 1], z: tensor[c64, 2, 131072, 1]):
    return op.fft(8192, dtype=f32) @ x, op.ifft(131072, dtype=f32) @ z, op.fft(131072, dtype=f32) @ z

@function
def large64(x: tensor[f64, 2048, 3], z: tensor[c128, 2, 65536, 1]):
    return op.ifft(2048, dtype=f64) @ x, op.fft(65536, dtype=f64) @ z, op.ifft(65536, dtype=f64) @ z
"""


def large_args(name):
    def c(*shape, dtype):
        return (randn(*shape, dtype=np.float64) + 1j * randn(*shape, dtype=np.float64)).astype(dtype)
    if name == "small32":
        return randn(2), randn(3, 8, 5), c(4, 2, dtype=np.complex64)
    if name == "large32":
        return randn(3, 8192, 1), c(2, 131072, 1, dtype=np.complex64)
    return randn(2048, 3, dtype=np.float64), c(2, 65536, 1, dtype=np.complex128)


def large_reference(name, *args):
    a = [np.asarray(x, np.complex128) for x in args]
    f = lambda x, axis: np.fft.fft(x, axis=axis, norm="ortho")    # noqa: E731
    i = lambda x, axis: np.fft.ifft(x, axis=axis, norm="ortho")   # noqa: E731
    if name == "small32":
        return f(a[0], 0), i(a[1], 1), f(a[2], 0)
    if name == "large32":
        return f(a[0], 1), i(a[1], 1), f(a[1], 1)
    return i(a[0], 0), f(a[1], 1), i(a[1], 1)


def check_large(program, name):
    """Each result against numpy.fft (in f64): f32 within 1e-5·log2 n of the largest magnitude, f64 within 1e-12
    of it (not scaled by log n)."""
    args = large_args(name)
    got = getattr(program, name)(*args)
    want = large_reference(name, *args)
    sizes = {"small32": (2, 8, 4), "large32": (8192, 131072, 131072), "large64": (2048, 65536, 65536)}[name]
    for g, w, n in zip(got, want, sizes):
        assert g.shape == w.shape and g.dtype == (np.complex128 if name == "large64" else np.complex64)
        tol = (1e-12 if name == "large64" else 1e-5 * math.log2(n)) * float(np.abs(w).max())
        np.testing.assert_allclose(g, w, rtol=0, atol=tol)


@pytest.fixture(scope="module")
def large_source():
    return compiler.compile_source(LARGE, "large.py")


@pytest.mark.parametrize("name", ["small32", "large32", "large64"])
def test_power_of_two_transforms_match_numpy_fft(large_source, name):
    check_large(executor.load(large_source.image), name)


def test_power_of_two_transforms_on_opencl(opencl):  # noqa: F811
    program = executor.load(compiler.compile_source(LARGE, "large.py", CompileOptions(target="spirv")).image, opencl)
    for name in ("small32", "large32", "large64"):
        check_large(program, name)


def test_power_of_two_transforms_are_stages(large_source):
    """log4 n radix-4 stages (one radix-2 last where log2 n is odd) and nothing else Fourier: no twiddle
    matrix, no GEMM; the complex parameter read as its pairs (no parts), the results its last stages' pairs
    (no interleaving). 2 + 8 + 4: 1 + 2 + 1 stages; 8192 + 2·131072: 7 + 9 + 9."""
    plans = large_source.metadata["plans"]
    assert fourier_kernels(plans["small32"]) == ["stage"] * 4
    assert fourier_kernels(plans["large32"]) == ["stage"] * 25
    assert fourier_kernels(plans["large64"]) == ["stage"] * 22
    assert not any("gemm" in s.get("kernel", "") for p in plans.values() for s in p["steps"])


@pytest.mark.parametrize("target, arch", [("ptx", "sm_80"), ("ptx", "sm_90a"), ("amdgpu", "gfx942"),
                                          ("amdgpu", "gfx1100")])
def test_power_of_two_transforms_compile_for_gpus(target, arch):
    data = compiler.compile_source(LARGE, "large.py", CompileOptions(target=target, arch=arch)).image
    kernels = image.read_image(data).kernels
    assert sum("__fourier" in k.name for k in kernels) == 4 + 25 + 22
    if target == "ptx" and ptxas.find() is not None:
        assert all(k.regs > 0 for k in kernels if "__fourier" in k.name)


# Not powers of two: below 16 the DFT as GEMMs (3, 5, 7, 12), from 16 up to 2^28 Bluestein (passes/fft.py): 100,
# 1000, 4097, 6000, 10007 (a prime) and 100003 (a prime; j² past 2³¹), f32 and f64, forward and inverse, real and
# complex, single and batched.
BLUESTEIN = """
@function
def small(a: tensor[f32, 3], b: tensor[c64, 5, 2], c: tensor[f64, 7], d: tensor[c128, 2, 12, 1]):
    return op.fft(3, dtype=f32) @ a, op.ifft(5, dtype=f32) @ b, op.fft(7, dtype=f64) @ c, op.ifft(12, dtype=f64) @ d

@function
def mid32(a: tensor[f32, 100], b: tensor[c64, 2, 100, 3], c: tensor[f32, 1000]):
    return op.fft(100, dtype=f32) @ a, op.ifft(100, dtype=f32) @ b, op.fft(1000, dtype=f32) @ c

@function
def mid64(a: tensor[f64, 100], c: tensor[c128, 1000, 2]):
    return op.ifft(100, dtype=f64) @ a, op.fft(1000, dtype=f64) @ c

@function
def large32(a: tensor[f32, 4097], b: tensor[c64, 6000], c: tensor[f32, 10007]):
    return op.fft(4097, dtype=f32) @ a, op.ifft(6000, dtype=f32) @ b, op.fft(10007, dtype=f32) @ c

@function
def large64(a: tensor[f64, 4097], b: tensor[c128, 10007], c: tensor[f64, 100003]):
    return op.ifft(4097, dtype=f64) @ a, op.fft(10007, dtype=f64) @ b, op.fft(100003, dtype=f64) @ c
"""

# (size, axis, inverse) of each result
BLUESTEIN_RESULTS = {"small": [(3, 0, False), (5, 0, True), (7, 0, False), (12, 1, True)],
                     "mid32": [(100, 0, False), (100, 1, True), (1000, 0, False)],
                     "mid64": [(100, 0, True), (1000, 0, False)],
                     "large32": [(4097, 0, False), (6000, 0, True), (10007, 0, False)],
                     "large64": [(4097, 0, True), (10007, 0, False), (100003, 0, False)]}


def bluestein_args(name):
    def c(*shape, dtype):
        return (randn(*shape, dtype=np.float64) + 1j * randn(*shape, dtype=np.float64)).astype(dtype)
    return {"small": lambda: (randn(3), c(5, 2, dtype=np.complex64), randn(7, dtype=np.float64),
                              c(2, 12, 1, dtype=np.complex128)),
            "mid32": lambda: (randn(100), c(2, 100, 3, dtype=np.complex64), randn(1000)),
            "mid64": lambda: (randn(100, dtype=np.float64), c(1000, 2, dtype=np.complex128)),
            "large32": lambda: (randn(4097), c(6000, dtype=np.complex64), randn(10007)),
            "large64": lambda: (randn(4097, dtype=np.float64), c(10007, dtype=np.complex128),
                                randn(100003, dtype=np.float64))}[name]()


def check_bluestein(got, args, name):
    """Each result against numpy.fft in f64 (norm="ortho"), relative to its largest magnitude: f32 within 1e-6
    (Bluestein observed at most 3.2e-7 up to n = 100003, the DFT as GEMMs ~1e-7), f64 within 1e-14 (observed at
    most 1.1e-15)."""
    for g, a, (n, axis, inverse) in zip(got, args, BLUESTEIN_RESULTS[name]):
        w = (np.fft.ifft if inverse else np.fft.fft)(np.asarray(a, np.complex128), axis=axis, norm="ortho")
        double = a.dtype in (np.float64, np.complex128)
        assert g.shape == w.shape and g.dtype == (np.complex128 if double else np.complex64), (n, g.dtype)
        np.testing.assert_allclose(g, w, rtol=0, atol=(1e-14 if double else 1e-6) * float(np.abs(w).max()))


@pytest.fixture(scope="module")
def bluestein_source():
    return compiler.compile_source(BLUESTEIN, "bluestein.py")


@pytest.mark.parametrize("name", sorted(BLUESTEIN_RESULTS))
def test_other_sizes_match_numpy_fft(bluestein_source, name):
    args = bluestein_args(name)
    check_bluestein(getattr(executor.load(bluestein_source.image), name)(*args), args, name)


@pytest.mark.parametrize("name", ["small", "mid32", "mid64"])
def test_other_sizes_match_the_interpreter(bluestein_source, name):
    """Compiled (DFT or Bluestein) against the reference interpreter's op.fft: f32 within 1e-6 of the largest
    magnitude, f64 within 1e-14."""
    args = bluestein_args(name)
    got = getattr(executor.load(bluestein_source.image), name)(*args)
    want = tessera_frontend_compile(BLUESTEIN, {"filename": "bluestein.py"}).interpret(name, *args)
    for g, w, a in zip(got, want, args):
        double = a.dtype in (np.float64, np.complex128)
        np.testing.assert_allclose(g, w, rtol=0, atol=(1e-14 if double else 1e-6) * float(np.abs(w).max()))


def test_other_sizes_on_opencl(opencl):  # noqa: F811
    program = executor.load(compiler.compile_source(BLUESTEIN, "bluestein.py", CompileOptions(target="spirv")).image,
                            opencl)
    for name in BLUESTEIN_RESULTS:
        args = bluestein_args(name)
        check_bluestein(getattr(program, name)(*args), args, name)


def test_other_sizes_are_bluestein_from_16(bluestein_source):
    """Below 16 twiddle matrices and GEMMs; from 16 up no twiddle matrix and no GEMM: per transform a chirp
    multiply in and out, a spectrum product, two FFTs of m = 2^ceil(log2(2n − 1)) and, once per (n, direction,
    dtype) in a function, the chirp filter and its FFT. 100 → m = 256 (4 stages), 1000 → 2048 (5 radix-4, 1 radix-2)."""
    plans = bluestein_source.metadata["plans"]
    kinds = lambda name: [s["source"] for s in plans[name]["steps"] if "__fourier" in s.get("kernel", "")]  # noqa
    small = kinds("small")
    assert sum("q = (8 * m" in k for k in small) == 8 and not any("e = (j" in k for k in small)
    mid = kinds("mid32")
    assert sum("jj = j" in k for k in mid) == 3             # filters: 100 forward, 100 inverse, 1000 forward
    assert sum("e = (j * j)" in k for k in mid) == 2 * 3    # in and out of each of the three transforms
    assert sum("hr = H[2 * j]" in k for k in mid) == 3
    # stages: the filters' FFTs 4 + 4 + 6, the transforms' 2·4 + 2·4 + 2·6
    assert sum("a0r = " in k for k in mid) == 14 + 28
    assert not any("gemm" in s.get("kernel", "") for s in plans["mid32"]["steps"])


@pytest.mark.parametrize("target, arch", [("ptx", "sm_80"), ("ptx", "sm_90a"), ("amdgpu", "gfx942"),
                                          ("amdgpu", "gfx1100")])
def test_other_sizes_compile_for_gpus(target, arch):
    src = BLUESTEIN.split("@function\ndef large32")[0]
    data = compiler.compile_source(src, "bluestein.py", CompileOptions(target=target, arch=arch)).image
    kernels = image.read_image(data).kernels
    assert sum("__fourier" in k.name for k in kernels) > 0
    if target == "ptx" and ptxas.find() is not None:
        assert all(k.regs > 0 for k in kernels if "__fourier" in k.name)
