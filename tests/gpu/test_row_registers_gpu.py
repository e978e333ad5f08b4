"""The row kernels of layernorm, rmsnorm, softmax and log_softmax on a GPU against torch on the same tensors:
bf16 and f32 rows of 2048 and 4096 columns (held in registers, passes/kernelgen._register_row, their chunks
read and written as 16-byte accesses, passes/simt_vector_access.py) and 1000 (the generic kernel), rows that
do not fill the last block of 4 (R = 4·k + 3), inputs at an element offset that is not 16-byte aligned (the
accesses as written, one element each), images for sm_80 and for sm_90a (the latter skipped below compute
capability 9.0). torch computes bf16 norms in f32 and rounds once, as the kernels do: results within 2^-7 of
the row's largest magnitude for bf16 (both round to bf16, from f32 values that may differ by a few ulp) and,
for f32, 1e-5 of the row's largest plus 1e-5 relative."""

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


def _as_torch(y, dtype):
    """A result (a DeviceArray, bf16 as 16-bit integers) as a float32 torch tensor on the GPU."""
    t = (torch.from_dlpack(y) if hasattr(y, "__dlpack__") else torch.as_tensor(y)).to("cuda")
    if dtype == torch.bfloat16 and t.dtype != torch.bfloat16:
        t = t.view(torch.bfloat16)
    return t.float()


def _shifted(t):
    """`t`'s values in a tensor whose first element lies one element past a 16-byte boundary."""
    flat = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)[1:]
    out = flat.view(t.shape)
    out.copy_(t)
    assert out.data_ptr() % 16 != 0
    return out


@pytest.mark.parametrize("aligned", [True, False], ids=["aligned", "offset"])
@pytest.mark.parametrize("rows", [4 * 257 + 3, 5])
@pytest.mark.parametrize("cols", row_registers_gpu.COLS)
@pytest.mark.parametrize("dt", row_registers_gpu.DTYPES)
def test_rows_match_torch(prog, dt, cols, rows, aligned):
    gen = torch.Generator(device="cuda").manual_seed(cols + rows)
    tdt = {"bf16": torch.bfloat16, "f32": torch.float32}[dt]
    X = (torch.randn(rows, cols, device="cuda", generator=gen) * 3 + 1.5).to(tdt)
    g = torch.randn(cols, device="cuda", generator=gen).to(tdt)
    b = torch.randn(cols, device="cuda", generator=gen).to(tdt)
    args = (X, g, b) if aligned else tuple(map(_shifted, (X, g, b)))
    got = prog.function(f"rows_{dt}_{cols}")(*args)
    for name, y, want in zip(("layernorm", "rmsnorm", "softmax", "log_softmax"), got, _torch(X, g, b)):
        y = _as_torch(y, tdt)
        assert y.shape == want.shape
        err = (y - want).abs()
        big = want.abs().amax(-1, keepdim=True)
        tol = 2.0 ** -7 * big if dt == "bf16" else 1e-5 * big + 1e-5 * want.abs()
        assert bool((err <= tol).all()), f"{name}: max error {err.max().item():.3g}"
