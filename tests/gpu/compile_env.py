"""Environment variables some of kernels.SOURCES are compiled under (backend options read from the environment),
for both ways of building the GPU tests' images (conftest.py here, build_images.py beforehand)."""

import contextlib
import os

# the sm_80 attention kernel, the default, asked for by TESSERA_ATTENTION_SM80=1 all the same, so that the images
# test it whatever the environment they are built in says (backends/ptx/options.py)
ENVIRONMENT = {"ampere_attention": {"TESSERA_ATTENTION_SM80": "1"}}


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
