"""Linked images on the CUDA backend: two modules compiled apart for ptx (kernels.LINKED), one exporting a
function the other calls through a plan call step, linked by tessera-link and run by tessera.executor
(libtessera's executor) on the GPU, against the same sources compiled, linked and run on the CPU, and numpy."""
import numpy as np


def test_a_linked_image_runs_on_cuda_as_on_the_cpu(cuda, linked_image_of):
    from tessera import executor
    rng = np.random.default_rng(14)
    X = rng.standard_normal((77, 96)).astype(np.float32)
    g = rng.standard_normal(96).astype(np.float32)
    gpu = executor.load(linked_image_of("linked_head", "ptx"), cuda).function("head")(X, g)
    cpu = executor.load(linked_image_of("linked_head", "cpu")).function("head")(X, g)
    x = X.astype(np.float64) + 1.0
    ref = np.maximum((x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g, 0) * 2.0
    gpu = np.asarray(gpu)
    np.testing.assert_allclose(gpu, ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gpu, cpu, rtol=1e-5, atol=1e-5)
