"""A C host runs whole `@function`s of compiled images through tsrFunctionCall (DLPack tensors in and out, on the
CPU backend) and its outputs equal tessera.executor's on the same inputs bit for bit; bad calls return their
status with a message naming the function and argument, and a malformed plan refuses the module."""
import re
import subprocess

import numpy as np
import pytest

from hostutil import REPO, run, run_host_function

RNG = np.random.default_rng(14)

BATCH_ALIAS = """
@function
def bmm(A: tensor[f32, 2, 4, 8], B: tensor[f32, 2, 8, 3]):
    return op.softmax(op.reshape(op.relu(A @ B), (8, 3)))
"""


@pytest.fixture(scope="module")
def compiler():
    try:
        from tessera import compiler as c
        return c
    except ImportError as e:
        pytest.skip(f"the compiler is not importable: {e}")


def call_from_c(build_host, image, name, inputs, out_shapes, tmp_path, bad=False):
    """Runs `name` of `image` in the C host on `inputs` (arrays as the plan stores them); returns its output
    files' bytes and the host's stdout. The host also runs it on strided views of the inputs and outputs
    (--strided: transposed, sliced, reversed, broadcast) and checks them against its compact call bit for bit."""
    return run_host_function(build_host("host_function.c"), image, name, inputs, out_shapes, tmp_path,
                             ["--strided"] + (["--bad"] if bad else []))


def fp8_bits(x, dtype):
    """A one-byte fp8 tensor as C passes it: its bytes (the Python executor takes and returns float32 values)."""
    from tessera.numerics.rounding import fp8_bits as bits
    return bits(np.asarray(x, np.float64), dtype).astype(np.uint8)


def round_to(x, dtype):
    from tessera.numerics.rounding import round_to as rounded
    return rounded(x, dtype)


def bf16_bits(x):
    """float32 values rounded to bf16 (as tessera.executor takes them), as their uint16 bit patterns."""
    from tessera.executor import _to_storage
    return _to_storage(x.astype(np.float32), "bf16")


def test_mlp_block_from_c_equals_the_python_executor(build_host, compiler, tmp_path):
    from tessera import executor
    source = REPO / "examples" / "graph" / "mlp.py"
    image = compiler.compile_source(source.read_text(), str(source)).image
    prog = executor.load(image)
    T = 13
    X = bf16_bits(RNG.standard_normal((T, 256)))
    W1 = bf16_bits(RNG.standard_normal((256, 1024)) * 0.05)
    b1 = bf16_bits(RNG.standard_normal(1024))
    W2 = bf16_bits(RNG.standard_normal((1024, 256)) * 0.05)
    b2 = bf16_bits(RNG.standard_normal(256))
    gamma = bf16_bits(RNG.standard_normal(256))
    ins = [X, W1, b1, W2, b2, gamma]
    want = prog.function("mlp_block")(*ins)  # bf16 bit patterns in: float32 values out
    got, out = call_from_c(build_host, image, "mlp_block", ins, [(T, 256)], tmp_path, bad=True)
    assert "functions: mlp_block swiglu" in out and "in X: bf16[T, 256] (DLPack code 4, 16 bits)" in out
    np.testing.assert_array_equal(np.frombuffer(got[0], np.uint16).reshape(T, 256), bf16_bits(want))

    Xs = RNG.standard_normal((5, 24)).astype(np.float32)
    Wg, Wu = RNG.standard_normal((24, 40)).astype(np.float32), RNG.standard_normal((24, 40)).astype(np.float32)
    Wd = RNG.standard_normal((40, 24)).astype(np.float32)
    want = prog.function("swiglu")(Xs, Wg, Wu, Wd)
    got, _ = call_from_c(build_host, image, "swiglu", [Xs, Wg, Wu, Wd], [(5, 24)], tmp_path)
    assert got[0] == want.tobytes()


def test_batch_and_alias_steps_from_c(build_host, compiler, tmp_path):
    from tessera import executor
    r = compiler.compile_source(BATCH_ALIAS, "bmm.py")
    steps = r.metadata["plans"]["bmm"]["steps"]
    assert any("batch" in s for s in steps) and any("alias" in s for s in steps)
    prog = executor.load(r.image)
    A = RNG.standard_normal((2, 4, 8)).astype(np.float32)
    B = RNG.standard_normal((2, 8, 3)).astype(np.float32)
    want = prog.bmm(A, B)
    got, _ = call_from_c(build_host, r.image, "bmm", [A, B], [(8, 3)], tmp_path, bad=True)
    assert got[0] == want.tobytes()


def test_a_malformed_plan_refuses_the_module(build_host, compiler, tmp_path):
    r = compiler.compile_source(BATCH_ALIAS, "bmm.py")
    # the first step's kernel name becomes a number, padded with blanks to the same length: still JSON
    m = re.search(rb'"kernel": "[^"]*"', r.image)
    bad = r.image[:m.start()] + b'"kernel": 1'.ljust(m.end() - m.start()) + r.image[m.end():]
    path = tmp_path / "bad.tessera"
    path.write_bytes(bad)
    (tmp_path / "shapes.txt").write_text("")
    p = subprocess.run([str(build_host("host_function.c")), str(path), "bmm", str(tmp_path)], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 2 and "TSR_ERROR_BAD_IMAGE" in p.stdout, p.stdout + p.stderr
    assert "bad image: launch plan: function 'bmm'" in p.stdout, p.stdout


def test_a_truncated_plan_refuses_the_module(build_host, compiler, tmp_path):
    from tessera.image import read_image
    r = compiler.compile_source(BATCH_ALIAS, "bmm.py")
    (section,) = [s for s in read_image(r.image).sections if s.name == ".tessera.plan"]
    end = section.offset + section.size
    bad = r.image[:end - 40] + b" " * 40 + r.image[end:]  # the document stops 40 bytes early
    path = tmp_path / "bad.tessera"
    path.write_bytes(bad)
    p = subprocess.run([str(build_host("host_function.c")), str(path), "bmm", str(tmp_path)], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 2 and "TSR_ERROR_BAD_IMAGE: bad image: launch plan" in p.stdout, p.stdout + p.stderr


def test_plans_of_another_version_leave_the_kernels_and_say_why(build_host, compiler, tmp_path):
    """The versioning rule (docs/image-format.md, "Versions"): the module loads for its kernels; looking up a
    function is TSR_ERROR_BAD_IMAGE naming both plan versions."""
    import struct
    from tessera.image import read_image
    from tessera.image.format import NOTE_NAME, NT_TESSERA_IR_VERSION
    r = compiler.compile_source(BATCH_ALIAS, "bmm.py")
    note = next(s for s in read_image(r.image).sections if s.name == ".note.tessera")
    header = struct.pack("<III", len(NOTE_NAME), 16, NT_TESSERA_IR_VERSION) + NOTE_NAME
    at = note.offset + note.data.index(header) + len(header)
    bad = bytearray(r.image)
    struct.pack_into("<I", bad, at + 12, 99)   # the plan version, the note's fourth word
    path = tmp_path / "v99.tessera"
    path.write_bytes(bytes(bad))
    p = subprocess.run([str(build_host("host_function.c")), str(path), "bmm", str(tmp_path)], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 2 and "functions:\n" in p.stdout, p.stdout + p.stderr   # loaded, no functions
    assert "TSR_ERROR_BAD_IMAGE" in p.stdout and "launch plans are version 99" in p.stdout, p.stdout


def _example_functions():
    """(example, function) of every `@function` program of examples/ (compiled in the test: the CPU target)."""
    out = []
    for path in sorted((REPO / "examples").rglob("*.py")):
        text = path.read_text()
        if "@function" in text:
            out += [(str(path.relative_to(REPO)), name) for name in re.findall(r"@function[^\n]*\n(?:@[^\n]*\n)*def (\w+)", text)]
    return out


_IMAGES: dict = {}


def _inputs(fn, extent):
    """Random inputs for a plan function, every symbolic extent `extent`, as its parameters take them."""
    from tessera import plan as plans
    from tessera.executor import numpy_dtype
    arrays = []
    for vid in fn.plan.args:
        spec = fn.plan.values[vid]
        shape = [int(d) if d.isdigit() else plans.evaluate(d, {}) if not any(c.isalpha() for c in d) else extent
                 for d in spec.dims]
        dt = numpy_dtype(spec)
        if dt.kind == "f":
            x = RNG.standard_normal(shape).astype(dt) * 0.5
            # as the C host passes them: bf16 and one-byte fp8 as their bits, tf32 as f32 words holding tf32
            # values (the Python executor rounds f32 values to tf32; C passes the words as they are)
            arrays.append(bf16_bits(x) if spec.dtype == "bf16" else
                          fp8_bits(x, spec.dtype) if spec.dtype.startswith("fp8") else
                          round_to(x, "tf32").astype(np.float32) if spec.dtype == "tf32" else x)
        elif dt.kind in "iu":
            arrays.append(RNG.integers(0, 7, shape).astype(dt))
        else:
            return None
    return arrays


@pytest.mark.parametrize("example,name", _example_functions())
def test_every_example_function_from_c_equals_the_python_executor(build_host, compiler, tmp_path, example, name):
    """Each `@function` of examples/, on the CPU, from C and from Python on the same inputs: the same bits
    (tile programs' outputs, same_extents, batch and alias steps included)."""
    from tessera import executor
    if example not in _IMAGES:
        source = REPO / example
        try:
            _IMAGES[example] = compiler.compile_source(source.read_text(), str(source)).image
        except Exception as e:  # noqa: BLE001 — a program the CPU target refuses is not this test's subject
            _IMAGES[example] = e
    image = _IMAGES[example]
    if isinstance(image, Exception):
        pytest.skip(f"{example} does not compile for the CPU: {image}")
    prog = executor.load(image)
    if name not in prog.functions:
        pytest.skip(f"{name} has no plan")
    fn = prog.function(name)
    for extent in (32, 64, 128):
        ins = _inputs(fn, extent)
        if ins is None:
            pytest.skip(f"{name} takes a dtype this test does not generate")
        kept = [x.copy() for x in ins]  # a tile program writes its outputs into its inputs
        try:
            want = fn(*ins)
            break
        except (ValueError, TypeError):
            continue
    else:
        pytest.skip(f"{name}: no extent of 32, 64, 128 suits it")
    want = want if isinstance(want, tuple) else (want,)
    dtypes = [fn.plan.values[v].dtype for v in fn.plan.results]
    stored = [bf16_bits(w) if dt == "bf16" else fp8_bits(w, dt) if dt.startswith("fp8") else np.asarray(w)
              for w, dt in zip(want, dtypes)]
    got, _ = call_from_c(build_host, image, name, kept, [w.shape for w in stored], tmp_path)
    for g, w in zip(got, stored):
        assert g == np.ascontiguousarray(w).tobytes()
