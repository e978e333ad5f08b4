"""Kernels and a @function with names PTX cannot spell, on a GPU: cuModuleGetFunction finds each by its
mangled .entry (the record's `entry`), the host launches them by the user's name, and a failed bounds check
of such a kernel is reported as its own launch's, under the user's name (the site table names the entry the
runtime looks it up by).
(tests/unit/test_unicode_names.py checks the PTX without a GPU.)"""

import numpy as np
import pytest

RNG = np.random.default_rng(1414)
N = 1000


def dev(x, ctx):
    from tessera.runtime import DeviceArray
    return DeviceArray.from_numpy(x, ctx)


def test_kernel_and_function_run_by_their_names(load, program, cuda):
    mod = load("unicode_names")
    X, Y = RNG.standard_normal(N, dtype=np.float32), RNG.standard_normal(N, dtype=np.float32)
    out = dev(np.full(N, np.nan, np.float32), cuda)
    mod.kernel("café")(np.float32(2.5), dev(X, cuda), dev(Y, cuda), out, grid=(N + 255) // 256, block=256)
    np.testing.assert_allclose(out.numpy(), np.float32(2.5) * X + Y, rtol=1e-6, atol=1e-6)
    got = program("unicode_names").function("数据")(X, Y)
    np.testing.assert_allclose(got, np.maximum(X, 0) * Y + 1.0, rtol=1e-6, atol=1e-6)


def test_a_failed_check_names_the_kernel_of_this_launch(load, cuda):
    from tessera import runtime
    mod = load("unicode_names")
    X = RNG.standard_normal(N, dtype=np.float32)
    with pytest.raises(runtime.Error) as e:
        mod.kernel("décalé")(dev(X, cuda), dev(np.zeros(N, np.float32), cuda), grid=(N + 255) // 256, block=256)
    assert e.value.status_name == "TSR_ERROR_MEMORY_FAULT"
    # the message names the kernel as its record does (the user's name), not by its mangled entry
    assert "kernel 'décalé' block" in str(e.value) and "another stream" not in str(e.value)
    assert "tensor 'Out' accessed outside its extents at unicode_names.py:" in str(e.value)
