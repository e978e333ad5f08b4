"""Fourier operators that compile (spec Part IX, chapter 30's FFT convolution, spectral denoising and Kronecker
structure): op.fft / op.ifft lowered for every target (passes/fft.py: 128 and 32 as Stockham FFT stages, 96 and
24 as Bluestein's chirp-z on them), complex values as pairs of real tensors, complex results returned as numpy
complex64 arrays."""

from tessera import f32, function, op, tensor


@function
def fft_convolution(h: tensor[f32, 128], x: tensor[f32, 128, 4]):
    """Four signals circularly convolved with h through the spectrum: F* diag(√n · F h) F x, the convolution
    theorem for the unitary F (complex, with a zero imaginary part up to rounding), beside the direct circulant."""
    F = op.fft(128, dtype=f32)
    spectrum = op.diag(F @ h)
    return (op.adjoint(F) @ (11.313708498984761 * spectrum) @ F) @ x, op.conv1d(h, 128) @ x


@function
def lowpass_denoise(x: tensor[f32, 96, 8], keep: tensor[f32, 96]):
    """Spectral denoising: eight noisy signals with the frequencies outside `keep` (a 0/1 mask, symmetric for a
    real result) removed, F* diag(keep) F x."""
    F = op.fft(96, dtype=f32)
    return (op.ifft(96, dtype=f32) @ op.diag(keep) @ F) @ x


@function
def image_spectrum(image: tensor[f32, 768], keep: tensor[f32, 768]):
    """A 24×32 image flattened row-major: its 2-D DFT is the Kronecker product F₂₄ ⊗ F₃₂ (two batches of 1-D
    transforms, never the 768×768 matrix), and the image low-passed through it."""
    F2 = op.kronecker(op.fft(24, dtype=f32), op.fft(32, dtype=f32))
    return F2 @ image, (op.adjoint(F2) @ op.diag(keep) @ F2) @ image
