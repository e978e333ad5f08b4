"""The examples matrix on a GPU (issue 18 item 5): every examples/ file whose ptx sm_90a image compiles, each of
its @functions run by tessera.executor on the CUDA context and compared with the interpreter on the matrix's
inputs and tolerances (tessera.tools.examples_matrix.calls/check: extents 24, floats of scale 0.5, small
integers; the tolerance of the narrowest float dtype of the function's plan). A file of SIMT @kernels runs the
launches its `launches(rng)` declares (examples_matrix.launches_of/run_launches, the arrays on the GPU) against
the expected arrays stored beside its image. A function the runtime refuses
the inputs for is "not run", as in the matrix, and fails the test here only where it ran nowhere.

Images and the interpreter's results (each large result sampled: examples_gpu.sample) come from $TESSERA_GPU_IMAGES/examples_gpu (tests/gpu/build_images.py,
where the compiler is), else are built here. `test_stored_results_check_a_cpu_image` runs the stored-results
path on the CPU where the compiler is, so that a GPU failure is the GPU's, not the comparison's.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import examples_gpu as E  # noqa: E402
from tessera import executor  # noqa: E402
from tessera.tools import examples_matrix as em  # noqa: E402

EXAMPLES = [em.name_of(p) for p in em.examples()]


def test_the_examples_are_found():
    """The matrix finds the checkout from the working directory: run from elsewhere (an installed tessera, no
    checkout above the working directory) it finds no examples, and every case below would vanish unseen."""
    assert EXAMPLES, f"no examples/ under {em.REPO}: run pytest from the checkout's root"


def _prebuilt(example: str):
    """(image, reference, select, stored) from $TESSERA_GPU_IMAGES, skipping where the compiler refused the
    example."""
    folder = os.path.join(os.environ["TESSERA_GPU_IMAGES"], E.FOLDER)
    with open(os.path.join(folder, E.MANIFEST), encoding="utf-8") as f:
        manifest = json.load(f)
    if example not in manifest:
        pytest.fail(f"{example} is not in the prebuilt images: rebuild them with this tree (build_images.py)")
    if manifest[example]:
        pytest.skip(f"{E.ARCH}: {manifest[example]}")
    with open(os.path.join(folder, f"{E.stem(example)}.tessera"), "rb") as f:
        image = f.read()
    stored = dict(np.load(os.path.join(folder, f"{E.stem(example)}.npz")))
    return (image, *E.stored_reference(stored), stored)


def _built_here(example: str):
    """(image, reference, None, None) compiled and interpreted here, skipping where there is no compiler or it
    refuses."""
    path = em.REPO / example
    try:
        cell = em.compile_cell(path, E.TARGET, E.ARCH)
        reference = em.interpreter_results(path)
    except ImportError as e:
        pytest.skip(f"no compiler here ({e}) and no TESSERA_GPU_IMAGES with prebuilt images")
    if cell.status == "refused":
        pytest.skip(f"{E.ARCH}: {cell.text()}")
    return cell.image, reference, None, None


def _assert_launches_match(program, example: str, stored=None):
    """A file of SIMT @kernels: the launches it declares (examples_matrix.launches_of), run on the program's
    context and compared with the arrays build() stored (`stored`), else with the launches' own `expect`."""
    launches = em.launches_of(em.REPO / example)
    if launches is None:
        pytest.skip("kernels only: no launches declared, not run (as in the examples matrix)")
    expected = E.stored_expected(stored, launches) if stored is not None else None
    mismatches = em.run_launches(program.module, launches, program.module.context, expected)
    assert not mismatches, "\n".join(mismatches)


def _assert_matches(program, reference, select=None):
    if not program.functions:
        pytest.skip("kernels only: not run (as in the examples matrix)")
    ran, mismatches, skipped = em.check(program, reference, select)
    if not ran and not skipped:
        pytest.skip("collectives: not run without a communicator (as in the examples matrix)")
    assert ran, f"the runtime refused the inputs of every function: {skipped}"
    assert not mismatches, "\n".join(mismatches)


@pytest.mark.parametrize("example", EXAMPLES)
def test_example_runs_on_the_gpu_like_the_interpreter(cuda, example):
    image, reference, select, stored = _prebuilt(example) if os.environ.get("TESSERA_GPU_IMAGES") \
        else _built_here(example)
    program = executor.load(image, cuda)
    if not program.functions:
        _assert_launches_match(program, example, stored)
    else:
        _assert_matches(program, reference, select)


def _built_for_the_cpu(tmp_path, example: str):
    """build()'s image of `example` for the CPU target, loaded, and its stored results (skips without a compiler)."""
    try:
        manifest = E.build(str(tmp_path), target="cpu", arch="", only=[example])
    except ImportError as e:
        pytest.skip(f"no compiler here: {e}")
    assert manifest == {example: ""}
    folder = tmp_path / E.FOLDER
    program = executor.load((folder / f"{E.stem(example)}.tessera").read_bytes())
    return program, dict(np.load(folder / f"{E.stem(example)}.npz"))


def test_stored_results_check_a_cpu_image(tmp_path, monkeypatch):
    """build()'s files for the CPU target (results sampled: SAMPLE made small), checked as the GPU test checks its
    image: matches; a stored value changed by more than the tolerance, and other inputs, are reported."""
    example = "examples/graph/mlp.py"
    monkeypatch.setattr(E, "SAMPLE", 64)
    program, stored = _built_for_the_cpu(tmp_path, example)
    assert any(len(v) == 65 for k, v in stored.items() if ":at" in k)
    _assert_matches(program, *E.stored_reference(stored))
    key = next(k for k in sorted(stored) if ":out" in k)
    stored[key] = stored[key] + 0.1 * max(1.0, float(np.max(np.abs(stored[key]))))
    ran, mismatches, _ = em.check(program, *E.stored_reference(stored))
    assert ran and any("beyond the" in m for m in mismatches), mismatches
    stored[key.split(":")[0] + ":inputs"] = np.array("0" * 64)
    with pytest.raises(AssertionError, match="not the ones the stored results were computed from"):
        em.check(program, *E.stored_reference(stored))


def test_stored_launches_check_a_cpu_image(tmp_path):
    """build()'s files of a kernel-only example for the CPU target, checked as the GPU test checks its image:
    its declared launches match the stored arrays; a stored count changed by one, and other inputs, are
    reported."""
    example = "examples/tile/histogram.py"
    program, stored = _built_for_the_cpu(tmp_path, example)
    assert sorted(stored) == ["histogram (launch 0):expect1", "histogram (launch 0):inputs"]
    _assert_launches_match(program, example, stored)
    launches = em.launches_of(em.REPO / example)
    stored["histogram (launch 0):expect1"] = stored["histogram (launch 0):expect1"] + np.eye(1, 16, 3, np.int32)[0]
    mismatches = em.run_launches(program.module, launches, None, E.stored_expected(stored, launches))
    assert mismatches and "1 elements not equal" in mismatches[0], mismatches
    stored["histogram (launch 0):inputs"] = np.array("0" * 64)
    with pytest.raises(AssertionError, match="not the ones the stored results were computed from"):
        E.stored_expected(stored, launches)


def test_a_large_result_is_sampled_with_its_largest_element():
    result = np.random.default_rng(0).standard_normal((300, 300))
    result[123, 45] = 1e3
    at = E.sample("f", 0, result)
    assert len(at) == E.SAMPLE + 1 and 123 * 300 + 45 in at
    assert np.array_equal(at, E.sample("f", 0, result)) and not np.array_equal(at, E.sample("f", 1, result))
    assert np.array_equal(E.sample("f", 0, np.ones(7)), np.arange(7))
