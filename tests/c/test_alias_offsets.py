"""Launch plan version 6's alias offsets and zero-sized launches through the C executor (tsrFunctionCall on
the CPU backend, through tessera.executor), on hand-written plans over the standard test image's kernels
(kernels_cpu.c: fill_fixed, the in-place saxpy): an alias at an offset reads and writes that part of its
storage (an offset of "0" included: a window, where no offset is a reshape), one outside its storage is TSR_ERROR_INVALID_VALUE naming the function, step and both values, a
launch whose grid has a zero dimension is skipped, and the reader refuses an offset in a version-5 plan
(docs/image-format.md, "Alias step")."""
import numpy as np
import pytest

from function_images import _step, _tensor, with_plan
from tessera import _runtime, executor


def halves(offset="N//2", version=6):
    """out = 1 everywhere, then out[N//2:] += 2 * x[N//2:] through aliases of both at `offset` (None: no
    "offset" member, a reshape)."""
    f32 = {"dtype": "f32", "dims": ["N"]}
    half = {"dtype": "f32", "dims": ["N//2"]}
    at = {} if offset is None else {"offset": offset}
    fn = {"params": ["x"], "args": ["x"], "results": ["out"],
          "values": {"x": f32, "out": f32, "x_hi": half, "out_hi": half},
          "steps": [_step("fill_fixed", [_tensor("out"), {"f32": 1.0}]),
                    {"alias": "x_hi", "of": "x", **at},
                    {"alias": "out_hi", "of": "out", **at},
                    dict(_step("saxpy", [{"f32": 2.0}, _tensor("x_hi"), _tensor("out_hi")]), env={"N": "N//2"})],
          "fallbacks": [], "outputs": []}
    return {"version": version, "functions": {"halves": fn}}


def program(test_image, doc):
    return executor.load(with_plan(test_image.read_bytes(), doc), _runtime.Context("cpu"))


@pytest.mark.parametrize("n", [10, 130])
def test_an_alias_at_an_offset_sees_that_part_of_its_storage(test_image, n):
    x = np.arange(n, dtype=np.float32)
    out = np.asarray(program(test_image, halves()).halves(x))
    want = np.ones(n, np.float32)
    want[n // 2:] += 2 * x[n // 2:]
    assert np.array_equal(out, want), out


@pytest.mark.parametrize("n", [10, 131])
def test_an_offset_of_0_is_a_window_of_the_first_elements(test_image, n):
    """The presence of "offset" makes a window, "0" included (a pipelined collective's first chunk): the
    aliases see the first N//2 elements, fewer than their storage's."""
    x = np.arange(n, dtype=np.float32)
    out = np.asarray(program(test_image, halves("0")).halves(x))
    want = np.ones(n, np.float32)
    want[:n // 2] += 2 * x[:n // 2]
    assert np.array_equal(out, want), out


def test_an_alias_without_an_offset_is_a_reshape_that_sees_every_element(test_image):
    with pytest.raises(Exception) as e:
        program(test_image, halves(None)).halves(np.zeros(10, np.float32))
    assert "function 'halves': value 'x' of 10 elements cannot be viewed as value 'x_hi' of 5" in str(e.value)


def test_a_launch_with_a_zero_grid_is_skipped(test_image):
    """N = 1: the second half has 0 elements, saxpy's grid ceil(0/64) = 0 blocks (tsrLaunch refuses a zero
    grid: the executor must not call it); the first kernel still runs."""
    out = np.asarray(program(test_image, halves()).halves(np.array([5], np.float32)))
    assert out.tolist() == [1.0]


@pytest.mark.parametrize("offset, shown", [("N//2+1", "at offset 6 (N//2+1) is not within value 'x' of 10"),
                                           ("0-1", "at offset -1 (0-1) is not within value 'x' of 10")])
def test_an_alias_outside_its_storage_is_refused(test_image, offset, shown):
    with pytest.raises(Exception) as e:
        program(test_image, halves(offset)).halves(np.zeros(10, np.float32))
    assert "function 'halves': step 1: alias 'x_hi' of 5 elements " + shown in str(e.value), str(e.value)


def test_an_offset_needs_version_6(test_image):
    with pytest.raises(Exception) as e:
        program(test_image, halves(version=5)).halves
    assert "an alias step with an offset, which version 6 introduced, in a plan of version 5" in str(e.value)


def test_an_alias_keeps_its_storages_dtype(test_image):
    doc = halves()
    doc["functions"]["halves"]["values"]["x_hi"] = {"dtype": "i32", "dims": ["N//2"]}
    with pytest.raises(Exception) as e:
        program(test_image, doc).halves
    assert "alias 'x_hi' of 'x': an alias has its storage's dtype (i32 is not f32)" in str(e.value)
