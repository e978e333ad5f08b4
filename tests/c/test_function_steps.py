"""Every kind of launch-plan step through the C executor (tsrFunctionCall on the CPU backend), checked against
numpy: batch, alias, the view steps of every view kind, same_extents, and — which no CPU program compiles to,
since only the GPU GEMM lowerings emit them — multiple_of, prefer and smem in plans edited into compiled images.
Refusals (a multiple_of or same_extents violated, a tile program's argument too small for its result) return
their status with a message naming the function and what is wrong, from C and from Python (tessera.executor).

Tolerances: f32 GEMMs and reductions rtol 1e-5 (summation order differs from numpy's); bf16 inputs are exact in
f32, the products accumulated in f32: rtol 1e-5."""
import json
import subprocess

import numpy as np
import pytest

from hostutil import REPO, run_host_function

RNG = np.random.default_rng(1414)

GEMMS = """
@function
def mm(A: tensor[f32, "M", "K"], W: tensor[f32, "K", "N"]):
    return A @ W


@function
def mm_relu(A: tensor[f32, "M", "K"], W: tensor[f32, "K", "N"]):
    return op.relu(A @ W)


@function
def batched(A: tensor[f32, "B", "M", "K"], W: tensor[f32, "B", "K", "N"]):
    return A @ W
"""

_COMPILED: dict = {}


def compiled(source_or_path: str):
    """The CPU image of a program: a path under the repository, or a source string."""
    if source_or_path not in _COMPILED:
        from tessera.compiler import compile_source  # lazy: the compiler loads MLIR
        path = REPO / source_or_path if source_or_path.endswith(".py") else None
        source = path.read_text() if path else source_or_path
        _COMPILED[source_or_path] = compile_source(source, str(path or "steps.py")).image
    return _COMPILED[source_or_path]


def plans_of(image: bytes) -> dict:
    from tessera.image import read_image
    return json.loads(read_image(image).section(".tessera.plan"))


def with_plans(image: bytes, edit) -> bytes:
    """`image` with its plan document edited in place by `edit(doc)`: a hand-edited plan, every other section
    (code, metadata, versions) as compiled."""
    from tessera.image import read_image, write_image
    from tessera.image.format import SEC_META, SEC_NOTE, SEC_OPS, SEC_STRTAB
    img = read_image(image)
    doc = json.loads(img.section(".tessera.plan"))
    edit(doc)
    kept = {s.name: s.data for s in img.sections
            if s.name not in (SEC_NOTE, SEC_META, SEC_STRTAB, SEC_OPS, ".shstrtab")}
    kept[".tessera.plan"] = json.dumps(doc).encode()
    return write_image(img.kernels, kept, ops=img.section(SEC_OPS), abi=img.abi, versions=img.versions)


def step_kinds(fn_plan: dict) -> set[str]:
    kinds = {"same_extents"} if fn_plan.get("same_extents") else set()
    for s in fn_plan["steps"]:
        kinds |= {k for k in ("batch", "alias", "multiple_of", "prefer", "smem", "call") if k in s}
        kinds |= {f"view:{t['view']}" for t in s.get("tensors", ())}
    return kinds


def call_c(build_host, image, name, inputs, out_shapes, tmp_path, sizes=None, offsets=None):
    """One call in host_function_call.c, every tensor in tsrAlloc memory (`sizes`: buffer bytes by tensor
    index where they differ from the shape's; `offsets`: byte_offset by tensor index). Returns
    ({"shapes"|"call"|...: (status, message)}, outputs)."""
    lines = [f"in {x.ndim} {' '.join(map(str, x.shape))}" for x in inputs]
    lines += [f"out {len(s)} {' '.join(map(str, s))}" for s in out_shapes]
    lines = [line + (f" [{sizes[i]}]" if sizes and i in sizes else "") for i, line in enumerate(lines)]
    lines = [line + (f" +{offsets[i]}" if offsets and i in offsets else "") for i, line in enumerate(lines)]
    (tmp_path / "shapes.txt").write_text("\n".join(lines) + "\n")
    for i, x in enumerate(inputs):
        (tmp_path / f"in{i}.bin").write_bytes(np.ascontiguousarray(x).tobytes())
    path = tmp_path / "image.tessera"
    path.write_bytes(image)
    p = subprocess.run([str(build_host("host_function_call.c")), str(path), name, str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.rstrip().endswith("0 failed"), p.stdout + p.stderr
    said = {}
    for line in p.stdout.splitlines():
        what, _, rest = line.partition(": ")
        status, _, message = rest.partition(": ")
        said[what] = (status, message)
    outs = []
    if said.get("call", ("",))[0] == "TSR_SUCCESS":
        outs = [(tmp_path / f"out{i}.bin").read_bytes() for i in range(len(out_shapes))]
    return said, outs


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def bf16_bits(x):
    """float32 values rounded to bf16 (round to nearest even), as their uint16 bit patterns."""
    b = np.ascontiguousarray(x, np.float32).view(np.uint32)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_values(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _stats_reference(X):
    flat = X.transpose(0, 2, 1).reshape(-1, 8)
    rms = flat / np.sqrt((flat * flat).mean(axis=-1, keepdims=True) + 1e-6)
    return [np.array(X.sum(), np.float32), X.max(axis=-1), X - X.mean(axis=(1, 2), keepdims=True), rms]


# kind -> (program, function, inputs, numpy reference of the outputs)
def _cases():
    X = f32(3, 8, 16)
    x, s = f32(16), np.float32(1.5)
    A, W = f32(3, 5, 7), f32(3, 7, 4)
    Ab, Bb = bf16_bits(f32(40, 24)), bf16_bits(f32(24, 8))
    stats = ("examples/graph/reductions.py", "stats", [X], _stats_reference(X))
    return {
        "batch": (GEMMS, "batched", [A, W], [A @ W]),
        "alias": stats,
        "view:matrix": stats,
        "view:rows": stats,
        "view:scalar": stats,
        "view:bmn": stats,
        "view:bnm": stats,
        "view:cols": ("examples/graph/reductions.py", "broadcast_scale", [x, np.array(s)],
                      [np.broadcast_to(x, (4, 16)) * s + 1]),
        "same_extents": ("examples/tile/partial_tiles.py", "gemm_rows", [Ab, Bb, np.zeros((40, 8), np.float32)],
                         [bf16_values(Ab) @ bf16_values(Bb)]),
    }


CASES = _cases()


@pytest.mark.parametrize("kind", list(CASES))
def test_each_step_kind_from_c_against_numpy(build_host, tmp_path, kind):
    program, name, inputs, want = CASES[kind]
    image = compiled(program)
    assert kind in step_kinds(plans_of(image)["functions"][name]), f"{program} {name} has no {kind} step any more"
    got, _ = run_host_function(build_host("host_function.c"), image, name, inputs, [w.shape for w in want], tmp_path)
    for g, w in zip(got, want):
        w = np.asarray(w, np.float32)
        np.testing.assert_allclose(np.frombuffer(g, np.float32).reshape(w.shape), w, rtol=1e-5, atol=1e-5)


# ---- hand-edited plans: multiple_of, prefer, smem ---------------------------------------------------------------

def _edit_step(name, **members):
    def edit(doc):
        doc["functions"][name]["steps"][0].update(members)
    return edit


def test_multiple_of_passes_and_refuses_naming_the_extent_and_kernel(build_host, tmp_path):
    from tessera import executor
    image = with_plans(compiled(GEMMS), _edit_step("mm", multiple_of=[["K", 4, "4-wide K chunks"]]))
    assert "multiple_of" in step_kinds(plans_of(image)["functions"]["mm"])
    A, W = f32(5, 8), f32(8, 3)
    got, _ = run_host_function(build_host("host_function.c"), image, "mm", [A, W], [(5, 3)], tmp_path)
    np.testing.assert_allclose(np.frombuffer(got[0], np.float32).reshape(5, 3), A @ W, rtol=1e-5, atol=1e-5)
    A, W = f32(5, 7), f32(7, 3)
    said, _ = call_c(build_host, image, "mm", [A, W], [(5, 3)], tmp_path)
    want = "function 'mm': K = 7 is not a multiple of 4, which kernel 'mm__gemm0' needs (4-wide K chunks)"
    assert said["call"] == ("TSR_ERROR_INVALID_VALUE", want), said
    with pytest.raises(ValueError, match=r"K = 7 is not a multiple of 4.*mm__gemm0.*4-wide K chunks"):
        executor.load(image).function("mm")(A, W)


@pytest.mark.parametrize("M", [4, 8])
def test_prefer_takes_its_alternative_where_its_condition_holds(build_host, tmp_path, M):
    """mm's GEMM step prefers mm_relu's kernel (same arguments, a ReLU epilogue) where M > 6: the result says
    which kernel ran."""
    from tessera import executor
    step = plans_of(compiled(GEMMS))["functions"]["mm"]["steps"][0]
    alternative = {"when": "M - 6", "kernel": "mm_relu__gemm0", "block": step["block"], "grid": step["grid"]}
    image = with_plans(compiled(GEMMS), _edit_step("mm", prefer=[alternative]))
    A, W = f32(M, 6), f32(6, 5)
    want = np.maximum(A @ W, 0) if M > 6 else A @ W
    assert (want != A @ W).any() == (M > 6)  # the two kernels' results differ here
    got, _ = run_host_function(build_host("host_function.c"), image, "mm", [A, W], [(M, 5)], tmp_path)
    np.testing.assert_allclose(np.frombuffer(got[0], np.float32).reshape(M, 5), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(executor.load(image).function("mm")(A, W), want, rtol=1e-5, atol=1e-5)


def test_an_args_step_with_dynamic_shared_memory(build_host, tmp_path):
    """smem is the launch's dynamic shared memory: the CPU backend provides it per block; more than the device
    has is the launch's refusal, named by function, step and kernel."""
    image = with_plans(compiled(GEMMS), _edit_step("batched", smem=4096))
    assert "smem" in step_kinds(plans_of(image)["functions"]["batched"])
    A, W = f32(2, 3, 5), f32(2, 5, 4)
    got, _ = run_host_function(build_host("host_function.c"), image, "batched", [A, W], [(2, 3, 4)], tmp_path)
    np.testing.assert_allclose(np.frombuffer(got[0], np.float32).reshape(2, 3, 4), A @ W, rtol=1e-5, atol=1e-5)
    image = with_plans(compiled(GEMMS), _edit_step("batched", smem=1 << 31))
    said, _ = call_c(build_host, image, "batched", [A, W], [(2, 3, 4)], tmp_path)
    status, message = said["call"]
    assert status != "TSR_SUCCESS" and message.startswith("function 'batched': step 0 (kernel 'batched__gemm0'): "), said


# ---- refusals ----------------------------------------------------------------------------------------------------

def test_same_extents_refused_naming_both(build_host, tmp_path):
    from tessera import executor
    image = compiled("examples/tile/partial_tiles.py")
    pair = plans_of(image)["functions"]["gemm_rows"]["same_extents"][0]
    A, B, C = bf16_bits(f32(40, 24)), bf16_bits(f32(24, 8)), np.zeros((32, 8), np.float32)
    said, _ = call_c(build_host, image, "gemm_rows", [A, B, C], [(40, 8)], tmp_path)
    status, message = said["call"]
    assert status == "TSR_ERROR_INVALID_VALUE" and message.startswith("function 'gemm_rows': "), said
    assert "must be equal" in message and all(p.split("_")[0] in message for p in pair), message
    assert said["shapes"] == said["call"], said  # tsrFunctionGetResultShapes checks as the call does
    with pytest.raises(ValueError, match="gemm_rows.*must be equal"):
        executor.load(image).function("gemm_rows")(A, B, C)


SMALLER = "argument 'C' has {size} elements, but result 0, which the tile program also writes into it, has 256: " \
          "their extents must agree"
NOT_BROADCAST = "B.shape[1] = 16 and C.shape[1] = {columns} do not broadcast: they must be equal, or one of them 1 " \
                "(numpy's rule)"


@pytest.mark.parametrize("C_shape, message", [((16, 3), NOT_BROADCAST), ((16, 0), NOT_BROADCAST), ((1, 16), SMALLER)])
def test_a_tile_programs_argument_smaller_than_its_result_is_refused(build_host, tmp_path, C_shape, message):
    """gemm_mma writes its result, [max(A_0, C_0), max(B_1, C_1)], into the C it is passed as well: a C that
    broadcasts is smaller than that. Found by fuzz_function: the copy overran C's buffer (heap corruption from
    Python) and C = [16, 0] divided by zero in the elementwise kernel. A C whose columns do not broadcast
    against B's is refused first, by the plan's broadcasts (format 7)."""
    from tessera import executor
    image = compiled("examples/tile/partial_tiles.py")
    A, B, C = f32(16, 16), f32(16, 16), np.zeros(C_shape, np.float32)
    said, _ = call_c(build_host, image, "gemm_mma", [A, B, C], [(16, 16)], tmp_path)
    want = "function 'gemm_mma': " + message.format(size=C.size, columns=C_shape[1])
    assert said["call"] == ("TSR_ERROR_INVALID_VALUE", want), said
    assert said["shapes"] == said["call"], said
    if C.size:  # (numpy's empty C has strides (0, 0), which Python refuses first as not compact)
        with pytest.raises(ValueError) as e:
            executor.load(image).function("gemm_mma")(A, B, C)
        assert want in str(e.value)


def test_a_buffer_shorter_than_its_descriptor_is_refused_naming_it(build_host, tmp_path):
    A, W = f32(5, 8), f32(8, 3)
    said, _ = call_c(build_host, compiled(GEMMS), "mm", [A, W], [(5, 3)], tmp_path, sizes={1: 8 * 3 * 4 - 4})
    status, message = said["call"]
    assert status == "TSR_ERROR_MEMORY_FAULT", said
    assert message.startswith("function 'mm': argument 'W' ") and "96 bytes" in message and "92 bytes" in message, \
        message
    said, _ = call_c(build_host, compiled(GEMMS), "mm", [A, W], [(5, 3)], tmp_path, sizes={2: 59})
    status, message = said["call"]
    assert status == "TSR_ERROR_MEMORY_FAULT", said
    assert message.startswith("function 'mm': output 'result0' ") and "60 bytes" in message, message


def test_an_unknown_function_is_refused_listing_the_functions(build_host, tmp_path):
    from tessera import executor
    said, _ = call_c(build_host, compiled(GEMMS), "nope", [], [], tmp_path)
    status, message = said["lookup"]
    assert status == "TSR_ERROR_NOT_FOUND" and "'nope'" in message and "'mm'" in message and "'batched'" in message
    with pytest.raises((KeyError, ValueError, AttributeError), match="nope"):
        executor.load(compiled(GEMMS)).function("nope")


@pytest.mark.parametrize("label", ["count", "rank", "dtype", "extent"])
def test_bad_calls_from_python_name_the_function_and_argument(label):
    """As host_function.c --bad checks from C (test_function_host.py)."""
    from tessera import executor
    mm = executor.load(compiled(GEMMS)).function("mm")
    A, W = f32(5, 8), f32(8, 3)
    args, argument = {"count": ((A,), "W"), "rank": ((A[None], W), "A"), "dtype": ((A.astype(np.float64), W), "A"),
                      "extent": ((A, f32(7, 3)), "W")}[label]
    with pytest.raises((TypeError, ValueError)) as e:
        mm(*args)
    assert "'mm'" in str(e.value) and argument in str(e.value), str(e.value)


def test_malformed_and_truncated_plans_from_python():
    """As test_function_host.py checks from C: the load is refused, naming the function and step where the
    document can be read that far."""
    from tessera import executor
    from tessera.image import read_image
    image = compiled(GEMMS)
    bad = with_plans(image, _edit_step("mm", kernel=1))
    with pytest.raises(Exception, match=r"launch plan: function 'mm': step 0: 'kernel' is an integer"):
        executor.load(bad)
    section = next(s for s in read_image(image).sections if s.name == ".tessera.plan")
    end = section.offset + section.size
    with pytest.raises(Exception, match="launch plan: .*truncated"):
        executor.load(image[:end - 40] + b" " * 40 + image[end:])


def test_extents_near_int64s_limit_are_refused_naming_the_function(build_host, tmp_path):
    """swiglu with its hidden extent H = 2^63 - 1 and 64-byte buffers: its intermediates' sizes overflow uint64.
    Found by fuzz_function: the size wrapped, the allocator refused it with a message naming no function, and
    an argument whose byte size overflowed went unchecked against its allocation."""
    image = compiled("examples/graph/mlp.py")
    H = 2**63 - 1
    (tmp_path / "image.tessera").write_bytes(image)
    for i in range(4):
        (tmp_path / f"in{i}.bin").write_bytes(bytes(4))
    (tmp_path / "shapes.txt").write_text(f"in 2 1 1\nin 2 1 {H} [64]\nin 2 1 {H} [64]\nin 2 {H} 1 [64]\nout 2 1 1\n")
    p = subprocess.run([str(build_host("host_function_call.c")), str(tmp_path / "image.tessera"), "swiglu",
                        str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.rstrip().endswith("0 failed"), p.stdout + p.stderr
    for what in ("shapes", "call"):
        line = next(x for x in p.stdout.splitlines() if x.startswith(what + ": "))
        assert not line.startswith(f"{what}: TSR_SUCCESS") and f"{what}: TSR_ERROR" in line, line
        assert ": function 'swiglu': " in line, line


@pytest.mark.parametrize("which", ["output", "input"])
def test_a_byte_offset_past_the_allocation_is_refused_naming_the_tensor(build_host, tmp_path, which):
    """A tensor whose byte_offset puts it past its allocation's end (its start in debug slack or beyond). Found
    by fuzz_function: a rank-0 output of stats at offset 14 of a 4-byte allocation passed the size check (its
    start was looked up, and belongs to no allocation), and the copy of the result failed on the stream with a
    message naming no function."""
    X = f32(2, 8, 16)
    outs = [(), (2, 8), (2, 8, 16), (32, 8)]
    tensor, name = (1, "output 'result0'") if which == "output" else (0, "argument 'X'")
    said, _ = call_c(build_host, compiled("examples/graph/reductions.py"), "stats", [X], outs, tmp_path,
                     offsets={tensor: X.nbytes + 12 if which == "input" else 14})
    status, message = said["call"]
    assert status == "TSR_ERROR_MEMORY_FAULT" and message.startswith(f"function 'stats': {name} "), said
