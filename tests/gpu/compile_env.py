"""Environment variables some of kernels.SOURCES are compiled under (backend options read from the environment),
for both ways of building the GPU tests' images (conftest.py here, build_images.py beforehand)."""

import contextlib
import os

# the sm_80 attention kernel, the default, asked for by TESSERA_ATTENTION_SM80=1 all the same, so that the images
# test it whatever the environment they are built in says (backends/ptx/options.py); the sm_90a GEMM's clusters of
# two CTAs and the fp8 GEMM's 128x256 tiles, benchmarks' overrides the compile cache does not key on
# (backends/ptx/gemm_lowering.py, CLUSTER_ENV and FP8_BN_ENV)
ENVIRONMENT = {"ampere_attention": {"TESSERA_ATTENTION_SM80": "1"},
               "hopper_gemm_cluster": {"TESSERA_SM90_GEMM_CLUSTER": "2", "TESSERA_CACHE": "0"},
               "hopper_gemm_fp8_wide": {"TESSERA_SM90_GEMM_FP8_BN": "256", "TESSERA_CACHE": "0"},
               "hopper_gemm_fp8_wide_rs": {"TESSERA_SM90_GEMM_FP8_BN": "256rs", "TESSERA_CACHE": "0"},
               "hopper_gemm_fp8_promote1": {"TESSERA_SM90_GEMM_FP8_PROMOTE": "1", "TESSERA_CACHE": "0"}}


@contextlib.contextmanager
def environment(name: str):
    """SOURCES[name]'s ENVIRONMENT set for the compile inside, what was there before restored after."""
    saved = {k: os.environ.get(k) for k in ENVIRONMENT.get(name, {})}
    os.environ.update(ENVIRONMENT.get(name, {}))
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
