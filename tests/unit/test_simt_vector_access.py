"""tessera-simt-vector-access (passes/simt_vector_access.py) on hand-written SIMT kernels compiled for ptx: a
thread's 16 bytes of consecutive loads (stores) become one ld.global.v4 (st.global.v4) under a run-time
alignment test, and are left as written where merging could change what the kernel does: loads with a store
between them, stores with another store to the same tensor (which may write one of their elements) or a read
between them, and groups that are not 16 bytes of consecutive elements. Their numerics on a GPU, aligned and
not: tests/gpu/test_row_registers_gpu.py."""

import re

from tessera import compiler, image
from tessera.options import CompileOptions


def _ptx(body: str, dt: str = "bf16") -> str:
    src = f"""
@kernel
def k(X: tensor[{dt}, "N"], Y: tensor[{dt}, "N"], Z: tensor[{dt}, "N"]):
    i = launch.thread_id() * 8
    if i + 8 <= X.shape[0]:
{body}
"""
    r = compiler.compile_source(src, "k.py", CompileOptions(target="ptx", arch="sm_80"))
    return image.read_image(r.image).section(".tessera.code.ptx").decode()


def _count(ptx: str) -> tuple[int, int]:
    return len(re.findall(r"ld\.global\.v4\.b32", ptx)), len(re.findall(r"st\.global\.v4\.b32", ptx))


def _lines(*stmts: str) -> str:
    return "\n".join("        " + s for s in stmts)


COPY = [f"a{e} = X[i + {e}]" for e in range(8)] + [f"Y[i + {e}] = a{e} * 2.0" for e in range(8)]


def test_eight_bf16_loads_and_stores_become_one_each():
    ptx = _ptx(_lines(*COPY))
    assert _count(ptx) == (1, 1)
    # the fallback for a misaligned address: the accesses as written
    assert len(re.findall(r"ld\.global\.b16", ptx)) == 8 and len(re.findall(r"st\.global\.b16", ptx)) == 8


def test_four_f32_of_eight_are_two_vectors():
    assert _count(_ptx(_lines(*COPY), "f32")) == (2, 2)


def test_loads_with_a_store_between_stay():
    body = COPY[:4] + ["Z[i] = a0"] + COPY[4:]
    assert _count(_ptx(_lines(*body)))[0] == 0


def test_stores_with_another_store_to_the_tensor_between_stay():
    body = COPY[:12] + ["Y[i + 20] = a0"] + COPY[12:]
    assert _count(_ptx(_lines(*body)))[1] == 0


def test_stores_with_a_read_between_stay():
    body = COPY[:12] + ["b = Z[i]", "Z[i + 1] = b"] + COPY[12:]
    assert _count(_ptx(_lines(*body)))[1] == 0


def test_partial_and_misplaced_groups_stay():
    # 7 consecutive elements; 8 starting at an offset that is not a multiple of 8
    seven = [f"a{e} = X[i + {e}]" for e in range(7)] + [f"Y[i + {e}] = a{e}" for e in range(7)]
    assert _count(_ptx(_lines(*seven))) == (0, 0)
    shifted = [f"a{e} = X[i + {e + 1}]" for e in range(8)] + [f"Y[i + {e + 3}] = a{e}" for e in range(8)]
    assert _count(_ptx(_lines(*shifted))) == (0, 0)
