"""examples/tile/execution_model.py (the spec's tile programs: cp_async, alloc_shared, barrier, mma_sync) on
CUDA, compiled for sm_80 and sm_90a, at extents that hold whole tiles (flash_attention's 128-row blocks; the
examples matrix's 24 rows hold none, so there the runtime refuses that program, as the interpreter does) and at
ragged ones where a program allows them, against numpy. tests/unit/test_tile_programs.py checks the same
programs on the CPU and, through SPIR-V, on the OpenCL CPU runtime against the interpreter.

Tolerance: 2e-4 of the largest entry (the matrix's f32 tolerance: sums in other orders, the GPU's exp); gemm_tc
rounds its operands to bf16 first, as the program declares them."""

import numpy as np
import pytest

from tessera.numerics.rounding import round_to

IMAGES = ["execution_model", "execution_model_sm90a"]


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _close(got, want):
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-4 * float(np.abs(want).max()))


@pytest.mark.parametrize("image", IMAGES)
def test_gemm_tc(program, image):
    rng = np.random.default_rng(1)
    A, B, C = _f32(rng, 130, 96), _f32(rng, 96, 70), _f32(rng, 130, 70)
    got = program(image).function("gemm_tc")(A, B, C.copy())
    _close(got, C + round_to(A, "bf16").astype(np.float64) @ round_to(B, "bf16").astype(np.float64))


@pytest.mark.parametrize("image", IMAGES)
@pytest.mark.parametrize("rows", [128, 384])
def test_flash_attention_blocks(program, image, rows):
    rng = np.random.default_rng(rows)
    Q, K, V = _f32(rng, rows, 64), _f32(rng, rows, 64), _f32(rng, rows, 32)
    got = program(image).function("flash_attention")(Q, K, V, np.zeros((rows, 32), np.float32))
    q, k, v = (x.astype(np.float64).reshape(rows // 128, 128, -1) for x in (Q, K, V))
    s = q @ k.transpose(0, 2, 1)   # each 128-row block attends to its own block only
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    _close(got, ((e / e.sum(axis=-1, keepdims=True)) @ v).reshape(rows, 32))


@pytest.mark.parametrize("image", IMAGES)
def test_pipeline_double_buffers_the_whole_contraction(program, image):
    rng = np.random.default_rng(3)
    A, B, C = _f32(rng, 70, 384), _f32(rng, 384, 50), _f32(rng, 70, 50)
    got = program(image).function("pipeline")(A, B, C.copy())
    _close(got, C + A.astype(np.float64) @ B)


@pytest.mark.parametrize("image", IMAGES)
def test_fused_mlp(program, image):
    rng = np.random.default_rng(4)
    X, W1, b1, W2, b2 = _f32(rng, 64, 32), _f32(rng, 32, 48), _f32(rng, 1, 48), _f32(rng, 48, 16), _f32(rng, 1, 16)
    got = program(image).function("fused_mlp")(X, W1, b1, W2, b2, np.zeros((64, 16), np.float32))
    _close(got, np.maximum(X.astype(np.float64) @ W1 + b1, 0) @ W2 + b2)
