"""C hosts against the installed libtessera: the spec §11.1 flow, bad inputs, streams and events, graphs,
memory, debug mode, devices and the launch descriptor, concurrent threads, create/destroy cycles, and the
three ways to build a host (direct flags, pkg-config, CMake find_package)."""
import os
import shutil
import subprocess

import pytest

from hostutil import HERE, REPO, run


def run_checks(exe, *args, env=None):
    """Runs a host made of check.h checks; fails with its output unless every check passed."""
    p = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=300,
                       env=None if env is None else dict(os.environ, **env))
    failed = [line for line in p.stdout.splitlines() if line.startswith("FAIL")]
    assert p.returncode == 0 and not failed and p.stdout.rstrip().endswith("0 failed"), p.stdout + p.stderr
    return p


def test_saxpy_host_runs_the_test_image(build_host, test_image):
    p = run([build_host("host_saxpy.c"), test_image])
    assert "kernels: saxpy fill_fixed scale_add" in p.stdout
    assert "saxpy: 4 args" in p.stdout and p.stdout.rstrip().endswith("ok")


def test_saxpy_host_runs_a_compiled_image(build_host, tmp_path):
    """The same host on what tessera-cc makes of examples/saxpy.py (out = a * x + y, 7 arguments)."""
    try:
        import tessera
        from tessera import compiler  # noqa: F401 — needs MLIR and llvmlite
    except ImportError as e:
        pytest.skip(f"the compiler is not importable: {e}")
    image = tmp_path / "saxpy.tessera"
    source = REPO / "examples" / "saxpy.py"
    image.write_bytes(tessera.compile(source.read_text(), str(source)))
    p = run([build_host("host_saxpy.c"), image])
    assert "saxpy: 7 args" in p.stdout and p.stdout.rstrip().endswith("ok")


def test_bad_inputs_are_refused_and_the_host_lives(build_host, test_image):
    p = subprocess.run([build_host("host_bad_inputs.c"), test_image], capture_output=True, text=True)
    failed = [line for line in p.stdout.splitlines() if line.startswith("FAIL")]
    assert p.returncode == 0 and not failed, p.stdout + p.stderr
    assert p.stdout.rstrip().endswith("0 failed")


def test_launches_from_many_host_threads(build_host, test_image):
    p = run([build_host("host_threads.c"), test_image])
    assert p.stdout.rstrip().endswith(": 0 errors")


@pytest.mark.parametrize("host", ["host_streams.c", "host_graphs.c", "host_memory.c", "host_debug.c",
                                  "host_device.c", "host_bounds.c"])
def test_api_host(build_host, test_image, host):
    run_checks(build_host(host), test_image)


def test_foreign_device_memory_registers_on_the_cpu(build_host, test_image):
    """tsrDeviceRegister on the CPU backend (host_device_register.c): copies, launches' extents, refusals."""
    run_checks(build_host("host_device_register.c"), "cpu", test_image)


def test_cycles_leave_no_descriptor_or_thread_behind(build_host, test_image):
    p = run_checks(build_host("host_cycles.c"), test_image, 10)
    assert "10 cycles:" in p.stdout


def test_header_compiles_as_cxx(build_host):
    cxx = shutil.which("c++")
    if not cxx:
        pytest.skip("no C++ compiler: `c++` is not on PATH (Debian/Ubuntu: g++)")
    run([build_host("host_cxx.cpp", compiler=cxx, flags=("-std=c++17", "-Wpedantic"))])


def test_host_builds_with_pkg_config(cc, runtime_prefix, test_image, tmp_path):
    if not shutil.which("pkg-config"):
        pytest.skip("pkg-config is not on PATH (Debian/Ubuntu: pkg-config)")
    env = dict(os.environ, PKG_CONFIG_PATH=str(runtime_prefix / "lib" / "pkgconfig"))
    flags = run(["pkg-config", "--cflags", "--libs", "tessera"], env=env).stdout.split()
    libdir = run(["pkg-config", "--variable=libdir", "tessera"], env=env).stdout.strip()
    exe = tmp_path / "host_saxpy"
    run([cc, "-std=c11", HERE / "host_saxpy.c", *flags, f"-Wl,-rpath,{libdir}", "-lm", "-o", exe])
    assert run([exe, test_image]).stdout.rstrip().endswith("ok")


def test_host_builds_with_cmake_find_package(runtime_prefix, test_image, tmp_path):
    if not shutil.which("cmake"):
        pytest.skip("cmake is not on PATH (pip install cmake)")
    (tmp_path / "CMakeLists.txt").write_text(f"""
cmake_minimum_required(VERSION 3.18)
project(host C)
find_package(Tessera 0.1 REQUIRED)
add_executable(host_saxpy "{HERE / 'host_saxpy.c'}")
target_link_libraries(host_saxpy PRIVATE Tessera::tessera m)
""")
    run(["cmake", "-S", tmp_path, "-B", tmp_path / "build", f"-DCMAKE_PREFIX_PATH={runtime_prefix}"])
    run(["cmake", "--build", tmp_path / "build"])
    assert run([tmp_path / "build" / "host_saxpy", test_image]).stdout.rstrip().endswith("ok")


def test_cxx_host_with_streams_builds_with_cmake(runtime_prefix, test_image, tmp_path):
    """A C++17 host using the C API through RAII (find_package(Tessera), CXX only): threads on their own
    streams, events between them, one graph replayed from several threads."""
    if not shutil.which("cmake") or not shutil.which("c++"):
        pytest.skip("cmake or a C++ compiler is not on PATH (pip install cmake; Debian/Ubuntu: g++)")
    (tmp_path / "CMakeLists.txt").write_text(f"""
cmake_minimum_required(VERSION 3.18)
project(host_cpp CXX)
set(CMAKE_CXX_STANDARD 17)
find_package(Tessera 0.2 REQUIRED)
find_package(Threads REQUIRED)
add_executable(host_streams_cpp "{HERE / 'host_streams.cpp'}")
target_compile_options(host_streams_cpp PRIVATE -Wall -Wextra -Werror)
target_link_libraries(host_streams_cpp PRIVATE Tessera::tessera Threads::Threads)
""")
    run(["cmake", "-S", tmp_path, "-B", tmp_path / "build", f"-DCMAKE_PREFIX_PATH={runtime_prefix}"])
    run(["cmake", "--build", tmp_path / "build"])
    run_checks(tmp_path / "build" / "host_streams_cpp", test_image)
