"""Programs of the fp8 memory type's tests (tests/unit/test_fp8_memory.py, and tests/gpu/test_fp8_memory_gpu.py,
which compiles them for ptx sm_80 (integer conversions), sm_90a (cvt) and the CPU): SIMT kernels narrowing f32
and f64 to e4m3/e5m2 bytes, widening bytes, rounding in registers; a Graph IR function with a one-byte fp8
parameter and result; a quantize feeding a matmul (one byte into the GEMM on sm_90a and the CPU, the f16
container on sm_80: tests/unit/test_fp8_one_byte_gemm.py); and the inputs that sweep the conversions' cases."""

import numpy as np

from tessera.numerics.rounding import fp8_values

FORMATS = ("fp8_e4m3", "fp8_e5m2")

NARROW = '''
@kernel
def narrow(X: tensor[f32, "N"], Y: tensor[fp8_e4m3, "N"], Z: tensor[fp8_e5m2, "N"]):
    i = launch.thread_id(0)
    if i < X.shape[0]:
        Y[i] = X[i]
        Z[i] = X[i]
'''
SOURCE = NARROW + NARROW.replace("narrow", "narrow64").replace("f32", "f64") + '''

@kernel
def widen(Y: tensor[fp8_e4m3, "N"], Z: tensor[fp8_e5m2, "N"], A: tensor[f32, "N"], B: tensor[f32, "N"]):
    i = launch.thread_id(0)
    if i < Y.shape[0]:
        A[i] = Y[i]
        B[i] = Z[i]

@kernel
def rounded(X: tensor[f32, "N"], A: tensor[f32, "N"], B: tensor[f32, "N"]):
    i = launch.thread_id(0)
    if i < X.shape[0]:
        A[i] = fp8_e4m3(X[i]) * 2.0
        B[i] = fp8_e5m2(X[i])
'''


def sweep() -> np.ndarray:
    """f32 inputs: every fp8 value, the midpoints between neighbours (ties) and the floats either side of
    them, subnormals, past the largest finite value, infinities, NaNs of both signs, signed zeros, normal
    numbers at several scales and a stride through all 2^32 bit patterns."""
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(3000).astype(np.float32) * s for s in (1e-3, 0.05, 1, 30, 500, 7e4)]
    for f in FORMATS:
        v = fp8_values(np.arange(256, dtype=np.uint8), f)
        v = np.sort(v[np.isfinite(v)])
        mid = ((v[1:] + v[:-1]) / 2).astype(np.float32)
        xs += [v.astype(np.float32), mid, np.nextafter(mid, np.float32(np.inf)),
               np.nextafter(mid, np.float32(-np.inf))]
    xs.append(np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 1e-38, 3.4e38, -3.4e38,
                        448, 464, 463.99, 480, -1e9, 57344, 61440, 61439, -61440, 2.0 ** -10, 2.0 ** -17],
                       np.float32))
    xs.append(np.arange(0, 2 ** 32, 65521, dtype=np.uint64).astype(np.uint32).view(np.float32))
    return np.concatenate(xs)


GRAPH = '''
@function
def q8(X: tensor[f32, "N", "D"], E: tensor[fp8_e5m2, "N", "D"]):
    y = op.cast(X * 3.0, fp8_e4m3)
    return y, op.cast(op.relu(E), f32) + op.cast(y, f32)
'''


# K = 208: a multiple of 16 (sm_90a's wgmma reads the bytes) that is not one of 128 (a K step past the end);
# qgemm_t's B is read in place, [N, K], on sm_90a (the transpose folds into the GEMM).
GEMM = '''
@function
def qgemm(X: tensor[f32, "M", 208], W: tensor[f32, 208, "N"], sx: tensor[f32], sw: tensor[f32]):
    q = op.quantize(X, fp8_e4m3, scale=sx)
    return q, q @ op.quantize(W, fp8_e5m2, scale=sw)

@function
def qgemm_t(X: tensor[f32, "M", 208], Wt: tensor[f32, "N", 208], sx: tensor[f32], sw: tensor[f32]):
    q = op.quantize(X, fp8_e4m3, scale=sx)
    return q, q @ op.transpose(op.quantize(Wt, fp8_e5m2, scale=sw))
'''
