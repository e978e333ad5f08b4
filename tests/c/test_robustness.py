"""Robustness, measured (docs/robustness.md): the C hosts under AddressSanitizer + UndefinedBehaviorSanitizer
(with LeakSanitizer) and under ThreadSanitizer, create/load/launch/destroy cycles under valgrind, and bounded
libFuzzer runs over the image loader (with launch plans and their functions), the launch API, the
launch-plan reader and function calls (tsrFunctionCall). Each part skips, saying why,
where its tool is missing; .ci/run installs clang so that CI runs the fuzzers.

TESSERA_FUZZ_SECONDS (default 20) sets each fuzzer's run; the longer runs recorded in docs/robustness.md used
the same targets."""
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hostutil import HERE, REPO, run
import plan_corpus

RUNTIME_SOURCES = sorted((REPO / "runtime" / "src").glob("*.c"))
HOSTS = ["host_saxpy.c", "host_bad_inputs.c", "host_streams.c", "host_graphs.c", "host_memory.c", "host_debug.c",
         "host_device.c", "host_threads.c", "host_cycles.c", "host_bounds.c"]


def compiler_accepts(compiler, flags, tmp_path):
    """Whether `compiler` builds and runs a program with `flags` (a sanitizer's runtime may be missing)."""
    src = tmp_path / "probe.c"
    src.write_text("int main(void) { return 0; }\n")
    exe = tmp_path / "probe"
    try:
        return (subprocess.run([compiler, *flags, str(src), "-o", str(exe)], capture_output=True).returncode == 0 and
                subprocess.run([str(exe)], capture_output=True).returncode == 0)
    except OSError:
        return False


def sanitized_runtime(tmp_path_factory, name, flags):
    """libtessera built with `flags` (CMake, Debug), and a function that builds a host against it."""
    cc = shutil.which("cc")
    if not cc or not shutil.which("cmake"):
        pytest.skip("needs `cc` and `cmake` on PATH (Debian/Ubuntu: gcc; pip install cmake)")
    root = tmp_path_factory.mktemp(name)
    if not compiler_accepts(cc, flags, root):
        pytest.skip(f"`cc` cannot build and run programs with {' '.join(flags)} (sanitizer runtime missing: "
                    "Debian/Ubuntu gcc's libasan, libubsan)")
    build = root / "build"
    run(["cmake", "-S", REPO / "runtime", "-B", build, "-DCMAKE_BUILD_TYPE=Debug", f"-DCMAKE_C_FLAGS={' '.join(flags)}",
         "-DTESSERA_BUILD_PYTHON=OFF"])
    run(["cmake", "--build", build, "--target", "tessera", "--parallel", "2"])

    def host(source):
        exe = root / Path(source).stem
        run([cc, "-std=c11", "-g", *flags, HERE / source, f"-I{REPO / 'runtime' / 'include'}", f"-L{build}",
             f"-Wl,-rpath,{build}", "-ltessera", "-lm", "-pthread", "-o", exe])
        return exe

    return host


def run_clean(exe, args, env, sanitizer_markers):
    p = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, **env))
    report = [m for m in sanitizer_markers if m in p.stderr]
    failed = [line for line in p.stdout.splitlines() if line.startswith("FAIL")]
    assert p.returncode == 0 and not report and not failed, \
        f"exit {p.returncode}, reports {report}\n{p.stdout[-3000:]}\n{p.stderr[-6000:]}"


# ---- AddressSanitizer + UndefinedBehaviorSanitizer (+ LeakSanitizer) -------------------------------------------

ASAN_FLAGS = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=undefined"]
ASAN_ENV = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:allocator_may_return_null=1",
            "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}


@pytest.fixture(scope="module")
def asan_host(tmp_path_factory):
    return sanitized_runtime(tmp_path_factory, "asan", ASAN_FLAGS)


@pytest.mark.parametrize("host", HOSTS)
def test_hosts_under_address_and_undefined_behavior_sanitizers(asan_host, test_image, host):
    run_clean(asan_host(host), [test_image], ASAN_ENV, ["ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                                                        "runtime error:"])


def test_function_calls_and_their_graphs_under_address_and_undefined_behavior_sanitizers(asan_host, test_image,
                                                                                         tmp_path):
    """tsrFunctionCall on the CPU backend, on streams and captured into graphs whose instances replay it and
    free its intermediates with the last of them (host_function_device.c): nothing leaks or overruns."""
    import function_images
    image = tmp_path / "axpy.tessera"
    image.write_bytes(function_images.with_plan(test_image.read_bytes(), function_images.INPLACE_AXPY))
    run_clean(asan_host("host_function_device.c"), [image, "cpu", *function_images.INPLACE_AXPY_COEFFICIENTS],
              ASAN_ENV, ["ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"])


@pytest.mark.parametrize("backend", ["cpu", "cuda"])
def test_direct_results_under_address_and_undefined_behavior_sanitizers(asan_host, test_image, fake_driver, tmp_path,
                                                                       backend):
    """Results computed in their outputs' memory and results copied out of intermediates (misaligned, strided,
    overlapping outputs, captured calls, shared buffer slots: host_function_direct.c), on the CPU and on the
    fake CUDA driver: nothing leaks or overruns."""
    import function_images
    image = tmp_path / "direct.tessera"
    image.write_bytes(function_images.with_plan(test_image.read_bytes(), function_images.DIRECT,
                                                [function_images.PTX_FILL]))
    env = dict(ASAN_ENV, LD_LIBRARY_PATH=str(fake_driver())) if backend == "cuda" else ASAN_ENV
    run_clean(asan_host("host_function_direct.c"), [image, backend], env,
              ["ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"])


# ---- ThreadSanitizer --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tsan_host(tmp_path_factory):
    return sanitized_runtime(tmp_path_factory, "tsan", ["-fsanitize=thread", "-O1"])


@pytest.mark.parametrize("host", ["host_threads.c", "host_streams.c", "host_graphs.c"])
def test_concurrent_hosts_under_thread_sanitizer(tsan_host, test_image, host):
    run_clean(tsan_host(host), [test_image], {"TSAN_OPTIONS": "halt_on_error=1"}, ["WARNING: ThreadSanitizer"])


def test_function_calls_from_two_threads_under_thread_sanitizer(tsan_host, test_image, tmp_path):
    """Two threads calling one function at once, on a stream each and on one stream, their intermediates
    released after their streams' work and reused by later calls (host_function_device.c): no data race."""
    import function_images
    image = tmp_path / "axpy.tessera"
    image.write_bytes(function_images.with_plan(test_image.read_bytes(), function_images.INPLACE_AXPY))
    run_clean(tsan_host("host_function_device.c"), [image, "cpu", *function_images.INPLACE_AXPY_COEFFICIENTS],
              {"TSAN_OPTIONS": "halt_on_error=1"}, ["WARNING: ThreadSanitizer"])


# ---- valgrind ---------------------------------------------------------------------------------------------------

def test_cycles_leak_nothing_under_valgrind(build_host, test_image):
    valgrind = shutil.which("valgrind")
    if not valgrind:
        pytest.skip("valgrind is not on PATH (Debian/Ubuntu: valgrind; the cycles also run under LeakSanitizer above)")
    p = subprocess.run([valgrind, "--leak-check=full", "--errors-for-leak-kinds=definite,indirect",
                        "--error-exitcode=99", str(build_host("host_cycles.c")), str(test_image), "6"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-6000:]
    assert "definitely lost: 0 bytes" in p.stderr or "All heap blocks were freed" in p.stderr, p.stderr[-3000:]


# ---- the code section, through the system's loader ------------------------------------------------------------

SAXPY = """
@kernel
def saxpy(a: float, X: tensor[float], Y: tensor[float], Out: tensor[float]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = a * X[i] + Y[i]
"""


@pytest.fixture(scope="module")
def compiled_image(tmp_path_factory):
    import tessera  # lazy: the compiler loads MLIR, which the C-only tests here do not need
    path = tmp_path_factory.mktemp("compiled") / "saxpy.tessera"
    path.write_bytes(tessera.compile(SAXPY, "saxpy.py"))
    return path


@pytest.mark.parametrize("which", ["test", "compiled"])
def test_damaged_code_sections_never_crash_the_loader(build_host, test_image, compiled_image, which):
    """A one-byte change in the shared object's program headers once crashed tsrLoadModule (SIGSEGV in dlopen,
    or ld.so's assertion ending the process): every structure the loader trusts is swept and mutated, and each
    result loaded with the real dlopen."""
    image = test_image if which == "test" else compiled_image
    p = subprocess.run([str(build_host("host_code_mutations.c")), str(image), "100000"], capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0 and "no crash" in p.stdout, f"exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    print(p.stdout)


LOAD_IN_A_CHILD = """
import sys
from tessera import _runtime as rt
try:
    rt.Context().load_module(open(sys.argv[1], "rb").read())
    print("loaded")
except rt.Error as e:
    print(e.status_name, e)
"""


@pytest.mark.parametrize("damage, message", [
    ("dynamic p_vaddr", "dynamic section outside its loadable segments"),
    ("load p_memsz larger", "larger in memory than in the file"),
    ("load p_memsz smaller", "shorter than its segment"),
    ("gnu.hash bloom size", "malformed GNU hash table header"),
    ("gnu.hash buckets", "GNU hash"),
])
def test_the_issues_damaged_objects_are_refused(compiled_image, tmp_path, damage, message):
    """Issue 13's examples, each once a crash (SIGSEGV in dlopen, or ld.so's assertion and exit 127)."""
    import struct
    import sys
    from tessera.image.reader import read_image  # lazy: as compiled_image
    image = bytearray(compiled_image.read_bytes())
    so = read_image(bytes(image)).section(".tessera.code.cpu")
    base = bytes(image).find(so)
    phoff, phnum = struct.unpack_from("<Q", so, 32)[0], struct.unpack_from("<H", so, 56)[0]
    headers = [base + phoff + 56 * i for i in range(phnum)]
    dynamic = next(h for h in headers if struct.unpack_from("<I", image, h)[0] == 2)
    load = next(h for h in headers if struct.unpack_from("<I", image, h)[0] == 1)
    gnu_hash = base + so.find(struct.pack("<QQ", 0x6ffffef5, 0)[:8])  # the tag; its value is the table's address
    gnu_hash = base + struct.unpack_from("<Q", image, gnu_hash + 8)[0]  # (the first segment maps offset 0 at 0)
    if damage == "dynamic p_vaddr":
        struct.pack_into("<Q", image, dynamic + 16, struct.unpack_from("<Q", image, dynamic + 16)[0] + 0x100000)
    elif damage == "load p_memsz larger":
        struct.pack_into("<Q", image, load + 40, 0x100000)
    elif damage == "load p_memsz smaller":
        struct.pack_into("<Q", image, load + 40, 8)
    elif damage == "gnu.hash bloom size":
        struct.pack_into("<I", image, gnu_hash + 8, 3)
    else:
        struct.pack_into("<I", image, gnu_hash, 0)
    path = tmp_path / "damaged.tessera"
    path.write_bytes(image)
    p = subprocess.run([sys.executable, "-c", LOAD_IN_A_CHILD, str(path)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.startswith("TSR_ERROR_BAD_IMAGE") and message in p.stdout, \
        f"exit {p.returncode}: {p.stdout}{p.stderr[-2000:]}"


# ---- libFuzzer --------------------------------------------------------------------------------------------------

FUZZ_FLAGS = ["-g", "-O1", "-fsanitize=fuzzer,address,undefined", "-fno-sanitize-recover=undefined"]


@pytest.fixture(scope="module")
def fuzzer(tmp_path_factory):
    """A function that builds a fuzz target (tests/c/fuzz) with clang's libFuzzer and ASan/UBSan."""
    clang = shutil.which("clang")
    root = tmp_path_factory.mktemp("fuzz")
    if not clang:
        pytest.skip("clang is not on PATH: libFuzzer needs it (`apt-get install clang`; .ci/run installs it)")
    probe = root / "probe.c"
    probe.write_text("#include <stdint.h>\n#include <stddef.h>\n"
                     "int LLVMFuzzerTestOneInput(const uint8_t* d, size_t n) { (void)d; (void)n; return 0; }\n")
    if subprocess.run([clang, "-fsanitize=fuzzer,address", str(probe), "-o", str(root / "probe")],
                      capture_output=True).returncode:
        pytest.skip("clang cannot link libFuzzer here (libclang-rt / compiler-rt missing: Debian/Ubuntu "
                    "libclang-rt-<version>-dev)")
    common = [f"-I{REPO / 'runtime' / 'include'}", f"-I{REPO / 'runtime' / 'src'}", "-DTSR_BUILDING_LIBRARY",
              "-D_POSIX_C_SOURCE=200809L"]

    def compile_object(source, defines=()):
        obj = root / f"{source.stem}{'-'.join(('',) + tuple(d.lstrip('-D') for d in defines))}.o"
        run([clang, *FUZZ_FLAGS, *common, *defines, "-c", source, "-o", obj])
        return obj

    # The runtime once for both targets (cpu_code.c replaced by the double), compiled in parallel.
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        runtime_objects = list(pool.map(compile_object, [s for s in RUNTIME_SOURCES if s.name != "cpu_code.c"]))

    def build(target, extra_sources=(), defines=(), real_code=False):
        """real_code: the real CPU code loader (cpu_code.c, dlopen) in place of the double, for targets that
        load only trusted images."""
        exe = root / target
        loader = REPO / "runtime" / "src" / "cpu_code.c" if real_code else HERE / "fuzz" / "cpu_code_double.c"
        objects = [compile_object(loader, defines),
                   *(compile_object(s) for s in extra_sources), compile_object(HERE / "fuzz" / f"{target}.c")]
        run([clang, *FUZZ_FLAGS, *runtime_objects, *objects, "-o", exe, "-lm", "-ldl", "-pthread"])
        return exe

    return build


def forked(argv):
    """`argv` run by a shell that forks it. libFuzzer's -rss_limit_mb reads getrusage's ru_maxrss, which Linux
    carries across exec: started straight from this process a fuzzer begins at pytest's own peak RSS (over 4 GiB
    late in the whole suite) and stops at once with "out-of-memory". A process forked from the small shell
    starts its count afresh."""
    return ["/bin/sh", "-c", '"$0" "$@"; exit $?', *map(str, argv)]


def fuzz(exe, corpus, tmp_path, env=None):
    """Runs a fuzzer for TESSERA_FUZZ_SECONDS; returns (runs, coverage) from its final statistics."""
    seconds = int(os.environ.get("TESSERA_FUZZ_SECONDS", "20"))
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    p = subprocess.run(forked([exe, f"-max_total_time={seconds}", "-timeout=60", "-rss_limit_mb=4096",
                               "-print_final_stats=1", f"-artifact_prefix={artifacts}/", corpus]),
                       capture_output=True, text=True, timeout=seconds + 300, env=dict(os.environ, **(env or {})))
    crashes = list(artifacts.iterdir())
    assert p.returncode == 0 and not crashes, f"fuzzer found {[c.name for c in crashes]}\n{p.stderr[-8000:]}"
    runs = int(re.search(r"stat::number_of_executed_units: (\d+)", p.stderr).group(1))
    cov = re.findall(r"cov: (\d+)", p.stderr)
    print(f"{exe.name}: {runs} inputs in {seconds} s, coverage {cov[-1] if cov else '?'} edges, no crash or leak")
    return runs


GROWN_PARENT = """
import json, subprocess, sys
big = bytearray(600 << 20)
big[::4096] = bytes(len(big) // 4096 * [1])   # every page resident: ~600 MiB of peak RSS
for argv in json.loads(sys.argv[1]):
    print(subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip())
"""


def test_a_fuzzer_does_not_start_at_pytests_peak_rss():
    """Regression (session 32's CI: all five fuzzers "out-of-memory", used 4100 MB, at once and only in the whole
    suite): a process grown to ~600 MiB starts a probe as fuzz() starts a fuzzer, then directly; only the first
    may report a small peak RSS."""
    probe = [sys.executable, "-c", "import resource; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10)"]
    out = subprocess.run([sys.executable, "-c", GROWN_PARENT, json.dumps([forked(probe), probe])],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    via_shell, direct = (int(v) for v in out.stdout.split())
    assert direct >= 600, f"the check cannot fail here: a directly started probe reported {direct} MiB"
    assert via_shell < 300, f"a process started by forked() began at {via_shell} MiB of peak RSS"


# Compiled images with launch plans, for the image fuzzer's corpus (loader and plan reader fuzzed together) and
# the function-call fuzzer: among them every plan step kind the CPU target produces (views of every kind,
# batch, alias, same_extents).
PLAN_PROGRAMS = ["examples/graph/mlp.py", "examples/graph/reductions.py", "examples/tile/partial_tiles.py",
                 "examples/graph/mor.py"]   # mor: operator records (plan version 8)
BATCH_ALIAS = """
@function
def bmm(A: tensor[f32, 2, 4, 8], B: tensor[f32, 2, 8, 3]):
    return op.softmax(op.reshape(op.relu(A @ B), (8, 3)))
"""


@pytest.fixture(scope="module")
def plan_images(tmp_path_factory):
    from tessera.compiler import compile_source  # lazy: as compiled_image
    root = tmp_path_factory.mktemp("plan-images")
    sources = [(name, (REPO / name).read_text()) for name in PLAN_PROGRAMS] + [("bmm.py", BATCH_ALIAS)]
    paths = []
    for name, source in sources:
        path = root / (name.replace("/", "_") + ".tessera")
        path.write_bytes(compile_source(source, name).image)
        paths.append(path)
    return paths


def test_fuzz_the_image_loader(fuzzer, test_image, plan_images, tmp_path):
    exe = fuzzer("fuzz_image", defines=["-DTSR_FUZZ_INERT"])
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(test_image, corpus / "test.tessera")
    for path in plan_images:
        shutil.copy(path, corpus / path.name)
    assert fuzz(exe, corpus, tmp_path) > 100


def test_fuzz_function_calls(fuzzer, plan_images, tmp_path):
    """tsrFunctionCall with fuzzed DLTensors on compiled images whose kernels really run."""
    exe = fuzzer("fuzz_function", real_code=True)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(len(plan_images) * 4):  # a well-formed call of each function at small extents
        (corpus / f"seed{i}").write_bytes(bytes([i] + [8 + i % 8] * 8 + [0] * 64))
    env = {"TESSERA_FUZZ_IMAGES": ":".join(map(str, plan_images))}
    assert fuzz(exe, corpus, tmp_path, env) > 100


def test_fuzz_the_code_checks(fuzzer, test_image, compiled_image, tmp_path):
    from tessera.image.reader import read_image  # lazy: as compiled_image
    exe = fuzzer("fuzz_code", defines=["-DTSR_FUZZ_INERT"])
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for image in (test_image, compiled_image):
        (corpus / image.stem).write_bytes(read_image(image.read_bytes()).section(".tessera.code.cpu"))
    assert fuzz(exe, corpus, tmp_path) > 100


def test_fuzz_the_launch_api(fuzzer, test_image, tmp_path):
    exe = fuzzer("fuzz_launch", extra_sources=[HERE / "kernels_cpu.c"])
    corpus = tmp_path / "corpus"
    shutil.copytree(HERE / "fuzz" / "regressions", corpus)  # inputs that once found bugs, run first
    (corpus / "seed").write_bytes(bytes(range(256)))
    assert fuzz(exe, corpus, tmp_path, {"TESSERA_FUZZ_IMAGE": str(test_image)}) > 100


def test_fuzz_the_plan_reader(fuzzer, tmp_path):
    exe = fuzzer("fuzz_plan", defines=["-DTSR_FUZZ_INERT"])
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    # between them: views of every kind, batch, alias, same_extents, prefer and smem, collective steps and
    # operator records
    for name, target in [("examples/graph/mlp.py", "cpu"), ("examples/graph/mor.py", "cpu"), ("examples/gpu/attention.py", "sm_90a"),
                         ("examples/gpu/gemm.py", "sm_90a"), ("examples/graph/reductions.py", "cpu"),
                         ("examples/tile/partial_tiles.py", "cpu"), ("examples/graph/collectives.py", "cpu")]:
        section = plan_corpus.compile_plan((name, (REPO / name).read_text(), target))
        (corpus / f"{name.replace('/', '_')}.{target}").write_bytes(section)
    assert fuzz(exe, corpus, tmp_path) > 100
