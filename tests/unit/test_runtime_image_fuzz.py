"""Images the C loader accepts are read by the Python layer too (tessera.runtime, tessera.executor): whatever it
cannot read is a `runtime.Error` with TSR_ERROR_BAD_IMAGE, and bad scalar arguments are the TypeError or
ValueError the docs promise, naming the argument (issue 13, item 14).

The fuzzer mutates everything of a valid image but its code section (the system's loader trusts that one:
tests/c fuzzes it apart) — the metadata tables, the string table, the launch plans, the Graph IR, the section
headers — and loads each mutant through both, then looks up every kernel and function it names."""

import random
import struct

import numpy as np
import pytest

from tessera import executor, runtime
from tessera.compiler import compile_source
from tessera.image import read_image
from tessera.image.format import CODE_PREFIX

SOURCE = '''
from tessera import kernel, function, launch, op, tensor, f32

@kernel
def axpy(a: f32, n: i32, X: tensor[f32, "N"], Out: tensor[f32, "N"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = a * X[i] + float(n)

@function
def mlp(X: tensor[f32, "M", "K"], W: tensor[f32, "K", "N"]):
    return op.relu(X @ W)
'''
MUTANTS = 1500


@pytest.fixture(scope="module")
def image():
    return compile_source(SOURCE, "fuzz_image.py").image


def _mutable_ranges(data: bytes) -> list[tuple[int, int]]:
    """Byte ranges outside the code section: the sections Python reads, and the section header table."""
    img = read_image(data)
    ranges = [(s.offset, s.offset + s.size) for s in img.sections
              if s.size and not s.name.startswith(CODE_PREFIX) and s.type != 8]   # 8: SHT_NOBITS
    shoff, shentsize, shnum = struct.unpack_from("<Q", data, 0x28)[0], *struct.unpack_from("<HH", data, 0x3A)
    ranges.append((shoff, shoff + shentsize * shnum))
    return ranges


def _mutate(rng: random.Random, data: bytes, ranges) -> bytes:
    out = bytearray(data)
    for _ in range(rng.choice([1, 1, 2, 4, 8])):
        lo, hi = rng.choice(ranges)
        i = rng.randrange(lo, hi)
        out[i] = rng.choice([0, 0xFF, 0x7F, 0x80, out[i] ^ (1 << rng.randrange(8)), rng.randrange(256)])
    return bytes(out)


def _use(data: bytes) -> None:
    module = runtime.load(data)
    for name in module.kernel_names:
        module.kernel(name)
    program = executor.load(data)
    for name in program.functions:
        program.function(name)


def test_mutated_images_load_or_raise_runtime_errors(image):
    rng = random.Random(14)
    ranges = _mutable_ranges(image)
    outcomes = {"loaded": 0, "refused": 0}
    for n in range(MUTANTS):
        data = _mutate(rng, image, ranges)
        try:
            _use(data)
            outcomes["loaded"] += 1
        except runtime.Error as e:
            assert e.status_name == "TSR_ERROR_BAD_IMAGE" or e.status_name.startswith("TSR_ERROR"), e
            outcomes["refused"] += 1
        except Exception as e:  # noqa: BLE001 -- anything else is a finding
            offsets = [i for i in range(len(data)) if data[i] != image[i]]
            pytest.fail(f"mutant {n} (bytes changed at {offsets}) raised {type(e).__name__}: {e}")
    assert outcomes["refused"] > 0 and outcomes["loaded"] > 0, outcomes


@pytest.mark.parametrize("value, error, words", [
    ("2.0", TypeError, "got str"), (None, TypeError, "got NoneType"), (1j, TypeError, "got complex"),
    (1e300, ValueError, "largest finite"), (10 ** 400, ValueError, "largest finite"),
])
def test_bad_float_scalars(image, value, error, words):
    k = runtime.load(image).axpy
    X = np.ones(4, np.float32)
    with pytest.raises(error, match=f"argument 'a' of 'axpy'.*{words}"):
        k(value, 1, X, np.zeros(4, np.float32), grid=1, block=4)


@pytest.mark.parametrize("value, error, words", [
    (2 ** 31, ValueError, "outside"), (2 ** 64, ValueError, "outside"), (1.5, TypeError, "got float"),
    ("3", TypeError, "got str"),
])
def test_bad_integer_scalars(image, value, error, words):
    k = runtime.load(image).axpy
    X = np.ones(4, np.float32)
    with pytest.raises(error, match=f"argument 'n' of 'axpy'.*{words}"):
        k(2.0, value, X, np.zeros(4, np.float32), grid=1, block=4)


def test_good_scalars_still_launch(image):
    k = runtime.load(image).axpy
    X, Out = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    k(np.float64(2.0), np.int64(3), X, Out, grid=1, block=4)
    np.testing.assert_allclose(Out, 2 * X + 3)
