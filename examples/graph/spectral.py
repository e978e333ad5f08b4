"""The operator algebra (spec Part IX): FFT convolution, spectral denoising, heat flow by expm, and the
gradient of a measurement of that flow."""

from tessera import f64, function, grad, op, tensor


@function
def circular_convolution(h: tensor[f64, 64], x: tensor[f64, 64]):
    """h ⊛ x twice: by the circulant operator, and through the spectrum. With the unitary DFT F, the
    convolution theorem reads conv(h) = F* ∘ diag(√n · F h) ∘ F."""
    F = op.fft(64, dtype=f64)
    spectrum = 8.0 * op.diag(F @ h)  # √64 · F h
    return op.conv1d(h, 64) @ x, (op.adjoint(F) @ spectrum @ F) @ x


@function
def denoised_measurement(A: tensor[f64, 48, 32], x: tensor[f64, 32]):
    """A noisy measurement operator of rank 4 is denoised by its 4 largest singular terms; the
    pseudoinverse of that factorization recovers x's part in the operator's row space."""
    S = op.truncate(op.spectral(op.dense(A), kind="svd"), 4)
    y = op.reconstruct(S) @ x
    return y, op.pseudoinverse(S) @ y


@function
def heat_flow(L: tensor[f64, 16, 16], u0: tensor[f64, 16]):
    """Diffusion for time 0.5 on a graph with Laplacian L: exp(−0.5 L) u0, and the decay rate's bound."""
    G = op.dense(L)
    return op.expm(-0.5 * G) @ u0, op.spectral_radius(G)


@function
def heat_at(L: tensor[f64, 16, 16], u0: tensor[f64, 16], w: tensor[f64, 16]):
    """The heat the weights w read after time 0.5. Its gradient in the Laplacian and the initial state
    (heat_sensitivity) goes through the exponential's Fréchet derivative (docs/operators.md, "Derivatives")."""
    return op.sum(w * (op.expm(-0.5 * op.dense(L)) @ u0))


heat_sensitivity = grad(heat_at, argnums=(0, 1))
