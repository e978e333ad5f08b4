# lit configuration for Tessera's IR regression tests (run: `lit tests/lit`).
import os
import sys

import lit.formats

config.name = "Tessera"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".py"]
config.excludes = ["lit.cfg.py", "Inputs"]
config.test_source_root = os.path.dirname(__file__)

# The tools come from the environment tessera is installed in, whichever python runs lit.
bindir = os.path.dirname(sys.executable)
# TESSERA_LIT_PATH puts tools of a development checkout first.
paths = [os.environ.get("TESSERA_LIT_PATH"), bindir, os.environ.get("PATH")]
config.environment["PATH"] = os.pathsep.join(p for p in paths if p)
config.environment["PYTHONDONTWRITEBYTECODE"] = "1"
# no stored autotuning results (tessera/tuning.py) change the schedules checked: a place that does not exist
config.environment["TESSERA_TUNE_DIR"] = os.path.join(os.path.dirname(__file__), ".no-tuning-results")
config.substitutions.append(("%python", sys.executable))
config.substitutions.append(("FileCheck", "filecheck"))

# glibc's vector math library (passes/cpu_vector_math.py) is present on glibc hosts only.
try:
    import ctypes
    ctypes.CDLL("libmvec.so.1")
    config.available_features.add("libmvec")
except OSError:
    pass

# The host's bf16 units (backends/cpu/gemm_bf16.py's paths pinned in backends/cpu/bf16-gemm.py), from the
# kernel's CPU flags: the tests compile for the build machine.
try:
    with open("/proc/cpuinfo") as f:
        flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    for flag, feature in (("amx_bf16", "amx-bf16"), ("avx512_bf16", "avx512-bf16")):
        if flag in flags:
            config.available_features.add(feature)
except OSError:
    pass
