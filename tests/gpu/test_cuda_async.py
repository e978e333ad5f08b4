"""Asynchronous work on the CUDA backend: Tessera streams as CUDA streams, events between them, asynchronous
copies from pinned memory timed by events, CUDA-graph replay against direct launches (with the host time each
costs, for docs/runtime.md), tessera.executor plans in device memory on streams and in graphs, a kernel's
fault reported by the next synchronize, and the C host of the same (tests/c/host_cuda_streams.c).

Exact comparisons where the arithmetic is exact (products by 1, 0.5 and 2 of small integers; the same kernels
on the same values); 1e-5 relative against numpy for the generated row and elementwise kernels, as in
test_cuda.py."""

import ctypes
import os
import shutil
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

RNG = np.random.default_rng(17)


def dev(x, ctx):
    from tessera.runtime import DeviceArray
    return DeviceArray.from_numpy(x, ctx)


def test_many_launches_on_two_streams_ordered_by_events(load, cuda):
    from tessera import stream
    mod = load("saxpy")
    n, rounds, launches = 1 << 20, 8, 8
    a, b = (np.arange(n) % 7).astype(np.float32), (np.arange(n) % 5 - 2).astype(np.float32)
    A, B = dev(a, cuda), dev(b, cuda)
    s1, s2 = stream.new(context=cuda), stream.new(context=cuda)
    e1, e2 = stream.Event(cuda), stream.Event(cuda)
    t0 = time.perf_counter()
    for _ in range(rounds):
        for _ in range(launches):
            mod.saxpy(np.float32(1), A, B, B, grid=n // 256, block=256, stream=s1)     # B += A
        e1.record(s1)
        s2.wait_event(e1)
        for _ in range(launches):
            mod.saxpy(np.float32(0.5), B, A, A, grid=n // 256, block=256, stream=s2)   # A += B / 2
        e2.record(s2)
        s1.wait_event(e2)
    queued = time.perf_counter() - t0
    stream.synchronize(cuda)
    done = time.perf_counter() - t0
    for _ in range(rounds):
        for _ in range(launches):
            b = np.float32(1) * a + b
        for _ in range(launches):
            a = np.float32(0.5) * b + a
    np.testing.assert_array_equal(A.numpy(), a)
    np.testing.assert_array_equal(B.numpy(), b)
    print(f"128 launches of 2^20 elements on two streams with 32 event operations: queued in {queued * 1e3:.2f} ms, "
          f"done after {done * 1e3:.2f} ms")


def test_async_copies_from_pinned_memory_and_event_time(load, cuda):
    from tessera import stream
    mod = load("saxpy")
    n = 1 << 22
    pinned = [cuda.alloc(4 * n, pinned=True) for _ in range(2)]
    hx, hy = (np.ctypeslib.as_array((ctypes.c_float * n).from_address(p)) for p in pinned)
    hx[:] = np.arange(n) % 1000
    hy[:] = 1
    X, Y = dev(np.zeros(n, np.float32), cuda), dev(np.zeros(n, np.float32), cuda)
    out = np.zeros(n, np.float32)
    s = stream.new(context=cuda)
    start = s.record()
    stream.memcpy_async(X, hx, stream=s)
    stream.memcpy_async(Y, hy, stream=s)
    mod.saxpy(np.float32(2), X, Y, Y, grid=n // 256, block=256, stream=s)
    stream.memcpy_async(out, Y, stream=s)
    stop = s.record()
    stop.synchronize()
    np.testing.assert_array_equal(out, 2 * (np.arange(n) % 1000).astype(np.float32) + 1)
    ms = start.elapsed_ms(stop)
    print(f"32 MiB in from pinned memory, a launch, 16 MiB out: {ms:.3f} ms (events)")
    assert ms > 0
    s.synchronize()
    for p in pinned:
        cuda.free(p)


def _step(mod, x, y, n, stream=None):
    """y += x; x -= y / 2: a rotation, so the values stay bounded however often it runs."""
    mod.saxpy(np.float32(1), x, y, y, grid=(n + 255) // 256, block=256, stream=stream)
    mod.saxpy(np.float32(-0.5), y, x, x, grid=(n + 255) // 256, block=256, stream=stream)


def test_graph_replay_matches_direct_launches_and_costs_less_host_time(load, cuda):
    from tessera import graph, stream
    mod = load("saxpy")
    n, replays = 4096, 100
    h = (np.arange(n) % 13 - 6).astype(np.float32)
    gx, gy, dx, dy = (dev(h, cuda) for _ in range(4))
    s = stream.new(context=cuda)
    with graph.capture(stream=s) as g:
        for _ in range(2):
            _step(mod, gx, gy, n)
    assert g.node_count == 4
    g.launch(s)  # instantiates the CUDA graph
    s.synchronize()
    _step(mod, dx, dy, n, s)
    _step(mod, dx, dy, n, s)
    t0 = time.perf_counter()
    for _ in range(replays - 1):
        g.launch(s)
    t1 = time.perf_counter()
    s.synchronize()
    t2 = time.perf_counter()
    for _ in range(replays - 1):
        _step(mod, dx, dy, n, s)
        _step(mod, dx, dy, n, s)
    t3 = time.perf_counter()
    s.synchronize()
    t4 = time.perf_counter()
    np.testing.assert_array_equal(gx.numpy(), dx.numpy())
    np.testing.assert_array_equal(gy.numpy(), dy.numpy())
    launches = (replays - 1) * 4
    direct, replay = (t3 - t2) / launches * 1e6, (t1 - t0) / launches * 1e6
    print(f"host time per launch from Python ({launches} launches of a 4096-element saxpy on a stream): direct "
          f"{direct:.2f} us, CUDA graph replay {replay:.2f} us ({direct / replay:.1f}x); until synchronized: "
          f"direct {(t4 - t2) / launches * 1e6:.2f} us, replay {(t2 - t0) / launches * 1e6:.2f} us")
    assert replay < direct


def test_executor_plan_in_device_memory(program, cuda):
    """An MLP block's tail (bias, gelu, residual, layernorm; a softmax) as a plan of generated kernels, run by
    tessera.executor with DeviceArrays, on a stream and in a CUDA graph, against numpy."""
    from math import erf

    from tessera import graph, stream
    prog = program("mlp_tail")
    X, b, g = (RNG.standard_normal(s).astype(np.float32) for s in ((300, 1024), (1024,), (1024,)))

    def reference(X):
        x = X.astype(np.float64)
        h = x + b
        h = 0.5 * h * (1 + np.vectorize(erf)(h / np.sqrt(2)))
        y = h + x
        mu, var = y.mean(-1, keepdims=True), y.var(-1, keepdims=True)
        e = np.exp(h - h.max(-1, keepdims=True))
        return (y - mu) / np.sqrt(var + 1e-5) * g + b, e / e.sum(-1, keepdims=True)

    want_ln, want_sm = reference(X)
    ln, sm = prog.f(X, b, g)  # numpy in, numpy out
    np.testing.assert_allclose(ln, want_ln, rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(sm, want_sm, rtol=1e-5, atol=2e-6)

    Xd, bd, gd = dev(X, cuda), dev(b, cuda), dev(g, cuda)
    s = stream.new(context=cuda)
    ln_d, sm_d = prog.f(Xd, bd, gd, stream=s)  # DeviceArrays in and out, queued on s
    s.synchronize()
    np.testing.assert_array_equal(ln_d.numpy(), ln)
    np.testing.assert_array_equal(sm_d.numpy(), sm)

    with graph.capture(stream=s) as captured:
        ln_g, sm_g = prog.f(Xd, bd, gd)
    X2 = RNG.standard_normal((300, 1024)).astype(np.float32)
    Xd.copy_from(X2)
    captured.launch(s)
    s.synchronize()
    want_ln, want_sm = reference(X2)
    np.testing.assert_allclose(ln_g.numpy(), want_ln, rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(sm_g.numpy(), want_sm, rtol=1e-5, atol=2e-6)
    with pytest.raises(ValueError, match="pass DeviceArrays"):
        with graph.capture(stream=s):
            prog.f(X, b, g)  # numpy results of a capture would never be computed


def test_a_fault_in_queued_work_is_reported_by_synchronize(cuda, image_of, tmp_path):
    """In a child process: a fault ends the CUDA context."""
    (tmp_path / "saxpy.tessera").write_bytes(image_of("saxpy"))
    script = textwrap.dedent(f"""
        from tessera import _runtime, runtime, stream

        class Bad:  # a CUDA array at an address no allocation holds
            __cuda_array_interface__ = {{"shape": (1 << 20,), "typestr": "<f4", "data": (1 << 40, False),
                                         "version": 3}}

        ctx = _runtime.Context("cuda")
        mod = runtime.load({str(tmp_path / "saxpy.tessera")!r}, ctx)
        s = stream.new(context=ctx)
        mod.saxpy(1.0, Bad(), Bad(), Bad(), grid=4096, block=256, stream=s)
        print("queued")
        try:
            s.synchronize()
        except runtime.Error as e:
            print("caught", e.status_name, e)
        """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path)  # not the checkout, whose tessera/ would shadow the installed package
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith("queued") and "caught TSR_ERROR_LAUNCH_FAILED" in p.stdout
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in p.stdout


def test_c_host_streams_events_and_graphs(cuda, image_of, tmp_path):
    """tests/c/host_cuda_streams.c on the GPU (it runs against a fake driver in tests/c/test_cuda_fake.py)."""
    from tessera import _runtime
    cc = shutil.which("cc")
    if not cc:
        pytest.skip("no C compiler")
    prefix = os.path.dirname(_runtime.__file__)
    if not os.path.exists(os.path.join(prefix, "include", "tessera", "tessera.h")):
        pytest.skip("libtessera's headers are not installed next to tessera._runtime")
    here = os.path.join(os.path.dirname(__file__), os.pardir, "c")
    exe = tmp_path / "host_cuda_streams"
    subprocess.run([cc, "-std=c11", "-O2", os.path.join(here, "host_cuda_streams.c"), f"-I{here}",
                    f"-I{prefix}/include", f"-L{prefix}/lib", f"-Wl,-rpath,{prefix}/lib", "-ltessera", "-lm",
                    "-o", str(exe)], check=True)
    (tmp_path / "saxpy.tessera").write_bytes(image_of("saxpy"))
    p = subprocess.run([str(exe), str(tmp_path / "saxpy.tessera")], capture_output=True, text=True, timeout=300)
    print("\n".join(line for line in p.stdout.splitlines() if line.startswith("     ")))
    failed = [line for line in p.stdout.splitlines() if line.startswith("FAIL")]
    assert p.returncode == 0 and not failed and p.stdout.rstrip().endswith("0 failed"), p.stdout + p.stderr
