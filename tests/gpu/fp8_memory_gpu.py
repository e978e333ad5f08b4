"""Images of test_fp8_memory_gpu.py: tests/unit/fp8_memory_programs.py's kernels and functions compiled for ptx
sm_80 (the integer conversions of passes/fp8_convert.py; the quantize-matmul's f16 containers on mma.sync), ptx
sm_90a (cvt; the quantize's bytes into the wgmma fp8 GEMM) and the CPU (a baseline x86-64, as the device
machine's CPU may lack the build machine's features; its GEMM widens the bytes), built here by build_images.py."""

import importlib.util
import os
import pathlib

PROGRAMS = pathlib.Path(__file__).resolve().parents[1] / "unit" / "fp8_memory_programs.py"
TARGETS = {"sm_80": {"target": "ptx", "arch": "sm_80"}, "sm_90a": {"target": "ptx", "arch": "sm_90a"},
           "cpu": {"target": "cpu", "cpu": "x86-64-v2"}}


def programs():
    """tests/unit/fp8_memory_programs.py as a module (its sources and the input sweep)."""
    spec = importlib.util.spec_from_file_location("fp8_memory_programs", PROGRAMS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def image_name(target: str) -> str:
    return f"fp8_memory.{target}.tessera"


def compile_image(target: str) -> bytes:
    from tessera import compiler  # lazy: the compiler, where the images are built
    from tessera.options import CompileOptions  # lazy: as above
    p = programs()
    return compiler.compile_source(p.SOURCE + p.GRAPH + p.GEMM, "fp8_memory_programs.py",
                                   CompileOptions(**TARGETS[target])).image


def build(out: str) -> None:
    """The three images into `out` (tests/gpu/build_images.py)."""
    for target in TARGETS:
        with open(os.path.join(out, image_name(target)), "wb") as f:
            f.write(compile_image(target))
        print(f"{image_name(target)} ({target})")
