"""The row kernels of layernorm, rmsnorm, softmax and log_softmax on a GPU against torch on the same tensors:
bf16 and f32 rows of 2048 and 4096 columns (held in registers, passes/kernelgen._register_row) and 1000 (the
generic kernel), rows that do not fill the last block of 4 (R = 4·k + 3), images for sm_80 and for sm_90a (the
latter skipped below compute capability 9.0). torch computes bf16 norms in f32 and rounds once, as the kernels
do: results within one bf16 rounding (2^-8 of the row's largest magnitude, 2^-7 where both round a value that
the other computed one f32 ulp away) and, for f32, 1e-5 of the largest plus 1e-5 relative."""

import numpy as np
import pytest

import row_registers_gpu
from conftest import _images

torch = pytest.importorskip("torch")
_image = _images(row_registers_gpu.compile_image)


@pytest.fixture(scope="module", params=row_registers_gpu.ARCHS)
def prog(request, cuda):
    from tessera import executor, runtime
    arch = request.param
    if arch == "sm_90a" and not runtime.capabilities(cuda)["arch"].startswith("sm_90"):
        pytest.skip("the sm_90a image needs an H100/H200 (compute capability 9.0)")
    return executor.load(_image(row_registers_gpu.image_name(arch), arch), cuda)


def _torch(X, g, b):
    F = torch.nn.functional
    c = X.shape[-1]
    x = X.float()
    ms = x.pow(2).mean(-1, keepdim=True)
    return [F.layer_norm(x, (c,), g.float(), b.float(), 1e-5), x * torch.rsqrt(ms + 1e-6) * g.float(),
            torch.softmax(x, -1), torch.log_softmax(x, -1)]


@pytest.mark.parametrize("rows", [4 * 257 + 3, 5])
@pytest.mark.parametrize("cols", row_registers_gpu.COLS)
@pytest.mark.parametrize("dt", row_registers_gpu.DTYPES)
def test_rows_match_torch(prog, dt, cols, rows):
    gen = torch.Generator(device="cuda").manual_seed(cols + rows)
    tdt = {"bf16": torch.bfloat16, "f32": torch.float32}[dt]
    X = (torch.randn(rows, cols, device="cuda", generator=gen) * 3 + 1.5).to(tdt)
    g = torch.randn(cols, device="cuda", generator=gen).to(tdt)
    b = torch.randn(cols, device="cuda", generator=gen).to(tdt)
    got = prog.function(f"rows_{dt}_{cols}")(X, g, b)
    for name, y, want in zip(("layernorm", "rmsnorm", "softmax", "log_softmax"), got, _torch(X, g, b)):
        y = torch.as_tensor(y, device="cuda").float() if not isinstance(y, torch.Tensor) else y.float()
        assert y.shape == want.shape
        err = (y - want).abs()
        big = want.abs().amax(-1, keepdim=True)
        tol = 2.0 ** -7 * big if dt == "bf16" else 1e-5 * big + 1e-5 * want.abs()
        assert bool((err <= tol).all()), f"{name}: max error {err.max().item():.3g}"
