"""The Python face of the runtime's execution model: tessera.stream (streams, events, async copies),
tessera.graph (capture and replay, the spec's example), tessera.runtime.capabilities and backend selection,
on the test image of make_image.py."""
import gc
import struct
import threading

import numpy as np
import pytest

pytest.importorskip("tessera._runtime", reason="libtessera's Python module is not installed")

from tessera import _runtime, graph, runtime, stream  # noqa: E402


@pytest.fixture
def ctx():
    with _runtime.Context(threads=2) as c:  # two workers: cross-stream checks need them on any machine
        yield c


@pytest.fixture
def mod(ctx, test_image):
    return runtime.load(test_image, ctx)


def test_capabilities_come_from_the_device():
    caps = runtime.capabilities()
    props = runtime.default_context().properties
    assert caps["backend"] == "cpu" and caps["warp_size"] == 32
    assert caps["tensorcore"] == {} and caps["cp_async"] is False
    assert caps["shared_bytes_per_block"] == props["max_shared_bytes_per_block"] == 64 * 1024
    assert caps["threads"] == props["compute_units"] >= 1
    assert caps["simd"] in {"avx512", "avx2", "avx", "sse2", "neon", "sve"}
    assert caps["simd_width_bytes"] in {16, 32, 64} or caps["simd"] == "sve"
    with _runtime.Context(threads=3) as c:
        assert runtime.capabilities(c)["threads"] == 3


def test_backend_selection(monkeypatch):
    assert "cpu" in runtime.backends()
    for name in ("ptx", "cuda", "rocm"):
        if name in runtime.backends() or (name == "ptx" and "cuda" in runtime.backends()):
            continue
        with pytest.raises(runtime.Error, match=r"not available.*\(available: cpu") as e:
            runtime.select_backend(name)
        assert e.value.status_name == "TSR_ERROR_UNSUPPORTED"
    with pytest.raises(runtime.Error, match="unknown backend 'tpu'"):
        runtime.select_backend("tpu")
    monkeypatch.setattr(runtime, "_default", None)
    ctx = runtime.select_backend("cpu")
    assert ctx.backend == "cpu" and runtime.default_context() is ctx
    monkeypatch.setenv("TESSERA_BACKEND", "rocm")
    with pytest.raises(runtime.Error, match="TESSERA_BACKEND"):
        _runtime.Context()


def test_stream_launches_run_in_order_and_asynchronously(ctx, mod):
    s = stream.new(context=ctx)
    out = np.zeros(1000, np.float32)
    mod.sleep_ms(200, grid=1, block=1, stream=s)
    for k in range(1, 11):
        mod.scale_add(out, float(k), grid=16, block=64, stream=s)
    assert not s.query(), "launches on a stream return before they run"
    s.synchronize()
    want = 0.0
    for k in range(1, 11):
        want = 2 * want + k
    assert (out == want).all()


def test_streams_are_independent_and_events_order_them(ctx, mod):
    s1, s2 = stream.new(context=ctx), stream.new(context=ctx)
    flag, seen = np.zeros(1, np.int32), np.zeros(1, np.int32)
    mod.spin_until(flag, seen, grid=1, block=1, stream=s1)   # finishes only if s2 runs meanwhile
    mod.set_flag(flag, grid=1, block=1, stream=s2)
    stream.synchronize(ctx)
    assert seen[0] == 1

    flag[0] = 0
    mod.sleep_ms(200, grid=1, block=1, stream=s1)
    done = s1.record()
    s2.wait_event(done)
    mod.set_flag(flag, grid=1, block=1, stream=s2)
    assert flag[0] == 0 and not done.query()
    s2.synchronize()
    assert flag[0] == 1 and done.query()

    start = stream.Event(ctx)
    start.record(s1)
    mod.sleep_ms(50, grid=1, block=1, stream=s1)
    end = s1.record()
    end.synchronize()
    assert 45 <= start.elapsed_ms(end) < 5000


def test_current_stream_and_async_copies(ctx, mod):
    s = stream.new(context=ctx)
    src = np.arange(256, dtype=np.float32)
    dst = np.zeros_like(src)
    with stream.use(s):
        assert stream.current() is s
        mod.sleep_ms(100, grid=1, block=1)             # goes to s: returns at once
        stream.memcpy_async(dst, src)                  # after it, on s
        assert dst[5] == 0
    assert stream.current() is None
    s.synchronize()
    assert (dst == src).all()
    device = runtime.DeviceArray((256,), np.float32, ctx)
    stream.memcpy_async(device, src, stream=s)
    mod.scale_add(device, 1.0, grid=4, block=64, stream=s)
    back = np.zeros_like(src)
    stream.memcpy_async(back, device, stream=s)
    s.synchronize()
    assert (back == 2 * src + 1).all()
    with pytest.raises(ValueError, match="has 1024 bytes, the source 4"):
        stream.memcpy_async(dst, np.zeros(1, np.float32), stream=s)


def test_queued_work_keeps_its_arrays_alive(ctx, mod):
    s = stream.new(context=ctx)
    mod.sleep_ms(150, grid=1, block=1, stream=s)
    out = np.zeros(1 << 16, np.float32)
    mod.scale_add(out, 3.0, grid=1024, block=64, stream=s)
    kept = out
    del out
    gc.collect()
    s.synchronize()  # the launch wrote into memory the stream kept alive
    assert (kept == 3).all()


def test_graph_capture_and_replay_the_spec_example(ctx, mod):
    """execution-model §5: `with graph.capture() as g:` records, `graph.launch(g)` replays."""
    x = np.zeros(512, np.float32)
    y = np.zeros(512, np.float32)
    a = 1.0
    with graph.capture(context=ctx) as g:
        mod.scale_add(x, a, grid=8, block=64)          # recorded, not run
        mod.saxpy(2.0, x, y, grid=8, block=64)         # y = 2x + y
        a = 100.0                                      # the recorded value stays 1.0
    assert g.node_count == 2 and (x == 0).all() and (y == 0).all()
    graph.launch(g)
    assert (x == 1).all() and (y == 2).all()
    for _ in range(3):
        graph.launch(g)
    assert (x == 15).all() and (y == 2 + 6 + 14 + 30).all()
    s = stream.new(context=ctx)
    g.launch(s)
    s.synchronize()
    assert (x == 31).all()


def test_graph_keeps_its_arrays_and_refuses_misuse(ctx, mod):
    x = np.zeros(64, np.float32)
    with graph.capture(context=ctx) as g:
        mod.scale_add(x, 1.0, grid=1, block=64)
        with pytest.raises(RuntimeError, match="still being captured"):
            graph.launch(g)
    view = x
    del x
    gc.collect()
    graph.launch(g)
    assert (view == 1).all()
    with pytest.raises(ZeroDivisionError):
        with graph.capture(context=ctx) as broken:
            mod.scale_add(view, 1.0, grid=1, block=64)
            1 / 0
    with pytest.raises(RuntimeError, match="ended with an exception"):
        graph.launch(broken)
    assert stream.current() is None  # the capture's stream was left


def test_stream_errors_surface_once(test_image):
    with _runtime.Context(debug=True, threads=2) as c:
        m = runtime.load(test_image, c)
        s = stream.new(context=c)
        address = c.alloc(64 * 4)
        m.sleep_ms(150, grid=1, block=1, stream=s)
        m.kernel("overrun")._native.launch((1, 1, 1), (1, 1, 1), 0, [
            struct.pack("<Q", address), struct.pack("<q", 0), struct.pack("<q", 64)], s.native)
        c.free(address)  # the host's bug: freed before the queued launch ran
        with pytest.raises(runtime.Error, match="use after free") as e:
            s.synchronize()
        assert e.value.status_name == "TSR_ERROR_MEMORY_FAULT"
        s.synchronize()  # reported once


def test_launches_on_many_streams_from_many_threads(ctx, mod):
    outs = [np.zeros(4096, np.int64) for _ in range(6)]

    def work(i):
        s = stream.new(context=ctx)
        for _ in range(50):
            mod.add_one(outs[i], grid=64, block=64, stream=s)
        s.synchronize()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all((o == 50).all() for o in outs)


def test_a_dropped_stream_finishes_its_queued_work(ctx, mod):
    out = np.zeros(1 << 16, np.float32)
    view = out[:8]
    s = stream.new(context=ctx)
    mod.sleep_ms(100, grid=1, block=1, stream=s)
    mod.scale_add(out, 5.0, grid=1024, block=64, stream=s)
    del out, s
    gc.collect()
    assert (view == 5).all()
