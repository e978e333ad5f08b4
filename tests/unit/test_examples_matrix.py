"""The examples matrix (issue 18 item 5; docs/portability.md "Examples on every target"): every program under
examples/ compiled for cpu, ptx (sm_80, sm_90a), amdgpu (gfx942, gfx1100) and spirv. Each cell either compiles
or is refused by a CompileError at a line of the example that names the target (never another exception); on
the CPU and, through the SPIR-V, on the OpenCL CPU runtime every @function runs on deterministic inputs and
matches the reference interpreter within its result dtype's tolerance, and every file of SIMT @kernels runs
the launches its `launches(rng)` declares against the numpy results and tolerances it states
(tools/examples_matrix.py). The matrix
checked into docs/portability.md must be the one this run produces.

One tools.examples_matrix.Matrix for the module: each (example, target) compiles once; the compile cache
serves the examples other tests compile too (test_training, test_graph_cpu, ...)."""

import numpy as np
import pytest

from tessera.tools import examples_matrix as em

from test_opencl import skip_without_opencl

EXAMPLES = em.examples()
COLUMNS = [t[0] for t in em.TARGETS]


@pytest.fixture(scope="module")
def matrix():
    return em.Matrix()


def test_every_example_directory_is_in_the_matrix():
    names = {em.name_of(p) for p in EXAMPLES}
    for folder in ("examples/graph/", "examples/gpu/", "examples/tile/"):
        assert any(n.startswith(folder) for n in names), folder
    assert "examples/saxpy.py" in names and "examples/run_saxpy.py" not in names  # it defines no program


@pytest.mark.parametrize("column", COLUMNS)
@pytest.mark.parametrize("path", EXAMPLES, ids=em.name_of)
def test_example_compiles_runs_or_is_refused_at_its_line(matrix, path, column):
    cell = matrix.cell(path, column)
    target = next(t[1] for t in em.TARGETS if t[0] == column)
    if cell.status == "refused":
        e = cell.error
        assert e.filename == str(path) and e.line >= 1 and e.col >= 1, str(e)
        assert target in e.message.lower(), f"the refusal does not name the target {target}: {e}"
        return
    assert cell.image
    if column in em.RUN_ON and cell.status == "compiles":
        if column == "spirv" and matrix.context(column) is None:
            skip_without_opencl("no OpenCL runtime to run the SPIR-V on")
        # a file of SIMT @kernels declares its launches (launches_of): "kernels only: not run" is not accepted
        assert cell.reason == "collectives: not run without a communicator" or cell.skipped, cell.text()
    assert not cell.mismatches, "\n".join(cell.mismatches)


def test_the_matrix_in_the_docs_is_this_runs(matrix):
    if matrix.context("spirv") is None:
        skip_without_opencl("the matrix's spirv column runs on OpenCL")
    text = em.DOC.read_text(encoding="utf-8")
    assert em.replace_between_markers(text, matrix.markdown()) == text, \
        "docs/portability.md's examples matrix is stale: python -m tessera.tools.examples_matrix --write"


def test_a_difference_from_the_interpreter_is_reported():
    assert em._close("f", "f32", [1.0, 2.0], [1.0, 2.0]) is None
    assert "beyond the f32 tolerance" in em._close("f", "f32", [1.0, 2.01], [1.0, 2.0])
    assert em._close("f", "bf16", [1.0, 2.01], [1.0, 2.0]) is None  # within bf16's rounding
    assert "not equal" in em._close("f", "f32", np.array([1, 3], np.int32), np.array([1, 2], np.int32))
    assert "not equal" in em._close("f", None, np.array([1, 3], np.int8), np.array([1, 2], np.int8))
    assert "shape" in em._close("f", "f32", [1.0], [1.0, 2.0])


def test_a_tf32_gemm_of_f32_values_takes_the_tf32_tolerance():
    """Regression (found on an H200 by tests/gpu/test_examples_gpu.py): examples/gpu/gemm.py's gemm_f32_tf32
    holds only f32 values, but its sm_90a GEMM multiplies on tf32 tensor cores (input_precision "tf32"), so
    it was held to f32's tolerance; the kernel's property now counts as a tf32 value."""
    from tessera import compiler, plan
    from tessera.image import reader
    from tessera.options import CompileOptions
    src = ('@function(input_precision="tf32")\n'
           'def mm(A: tensor[f32, "M", 64], B: tensor[f32, 64, "N"]):\n    return A @ B\n\n'
           '@function\ndef ieee(A: tensor[f32, "M", 64], B: tensor[f32, 64, "N"]):\n    return A @ B\n')
    image = reader.read_image(compiler.compile_source(src, "tf32.py", CompileOptions(target="ptx", arch="sm_90a")).image)
    tf32 = frozenset(k.name for k in image.kernels if k.props.get("input_precision") == "tf32")
    plans = plan.decode(image.plan)
    assert tf32 and em.precision_of(plans["mm"], tf32) == "tf32"
    assert em.precision_of(plans["ieee"], tf32) == em.precision_of(plans["mm"]) == "f32"


KERNEL_ONLY = ["examples/saxpy.py", "examples/warp_ops.py", "examples/tile/cooperative.py",
               "examples/tile/histogram.py", "examples/tile/scatter_add.py"]


@pytest.mark.parametrize("example", KERNEL_ONLY)
def test_a_kernel_only_example_declares_its_launches(example):
    launches = em.launches_of(em.REPO / example)
    assert launches and all(set(l) >= {"kernel", "grid", "block", "args", "expect"} for l in launches), example
    again = em.launches_of(em.REPO / example)   # the same inputs on every run (the GPU test's stored results)
    for a, b in zip(launches, again):
        for x, y in zip(a["args"], b["args"]):
            assert np.array_equal(x, y, equal_nan=np.asarray(x).dtype.kind == "f")


LAUNCHED = """
import numpy as np
from tessera import ceil_div, kernel, launch, tensor, tile

@kernel
def histogram(X: tensor[int, "N"], H: tensor[int, "B"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        tile.atomic_add(H[X[i]], 1)

@kernel
def scale(X: tensor[float, "N"], Out: tensor[float, "N"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = X[i] * 3.0

def launches(rng):
    X = rng.integers(0, 4, 1000).astype(np.int32)
    F = rng.standard_normal(300).astype(np.float32)
    return [dict(kernel="histogram", grid=ceil_div(1000, 128), block=128, args=[X, np.zeros(4, np.int32)],
                 expect={1: np.bincount(X, minlength=4).astype(np.int32) + np.array(OFF, np.int32)}),
            dict(kernel="scale", grid=GRID, block=128, args=[F, np.full(300, np.nan, np.float32)],
                 expect={1: 3.0 * F.astype(np.float64) + SHIFT}, atol=1e-6)]
"""


@pytest.mark.parametrize("off, grid, shift, wrong", [
    ([0, 0, 0, 0], 3, 0.0, []),
    ([0, 1, 0, 0], 3, 0.0, ["histogram (launch 0) argument 1: 1 elements not equal"]),  # one count off
    ([0, 0, 0, 0], 2, 0.0, ["scale (launch 1) argument 1: 44 elements beyond"]),         # unwritten (NaN)
    ([0, 0, 0, 0], 3, 1e-5, ["scale (launch 1) argument 1: 300 elements beyond"]),       # past atol
])
def test_a_launch_that_differs_from_its_reference_is_reported(tmp_path, off, grid, shift, wrong):
    path = tmp_path / "launched.py"
    path.write_text(LAUNCHED.replace("OFF", repr(off)).replace("GRID", str(grid)).replace("SHIFT", repr(shift)))
    cell = em.run_cell(path, em.compile_cell(path, "cpu", ""), None)
    assert cell.status == "runs" and cell.reason == "2 kernel launches"
    assert len(cell.mismatches) == len(wrong) and all(m.startswith(w) for m, w in zip(cell.mismatches, wrong)), \
        cell.mismatches
    assert cell.text() == ("runs, DIFFERS" if wrong else "runs, matches (2 kernel launches)")


def test_a_file_of_kernels_without_launches_only_compiles(tmp_path):
    path = tmp_path / "bare.py"
    path.write_text(LAUNCHED.split("def launches")[0])
    cell = em.run_cell(path, em.compile_cell(path, "cpu", ""), None)
    assert cell.text() == "compiles (kernels only: not run)"


def test_stated_tolerances():
    assert em._within("x", np.array([1, 2]), np.array([1, 2])) is None
    assert "not equal" in em._within("x", np.array([1.0, 2.0 + 1e-7]), np.array([1.0, 2.0]))  # exact by default
    assert em._within("x", [1.0, 2.5], [1.0, 2.0], atol=[0.0, 0.5]) is None                   # per element
    assert "beyond" in em._within("x", [1.0, 2.5], [1.0, 2.0], atol=[0.0, 0.4])
    assert em._within("x", [1.0, 2.1], [1.0, 2.0], rtol=0.1) is None
    assert "beyond" in em._within("x", [1.0, 2.3], [1.0, 2.0], rtol=0.1)
    assert "beyond" in em._within("x", [np.nan], [1.0], atol=1.0)
    assert "shape" in em._within("x", [1.0], [1.0, 2.0])
