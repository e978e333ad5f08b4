"""The sm_90a flash-attention kernel without a GPU: what Graph IR flash_attention lowers to on ptx, the
metadata the runtime needs (3-D tensor maps), ptxas's view, and located refusals.

Running it needs an H100/H200: tests/gpu/test_hopper.py."""

import pathlib

import pytest

from tessera import compiler, image
from tessera.backends.ptx import attention_sm90, ptxas
from tessera.options import CompileOptions

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "gpu" / "attention.py"


@pytest.fixture(scope="module")
def example():
    return compiler.compile_source(EXAMPLE.read_text(), str(EXAMPLE), CompileOptions(target="ptx", arch="sm_90a"))


@pytest.mark.parametrize("kw, message", [({"head_dim": 96}, "head dimension 64 or 128"),
                                         ({"dtype": "f32"}, "bf16 or f16"),
                                         ({"scale": -1.0}, "positive scale"),
                                         ({"stages": 5}, "do not fit"),
                                         ({"block_n": 100}, "a multiple of 16"),
                                         ({"block_n": 192}, "do not fit"),   # 3 stages of 192 keys at D=128
                                         ({"block_m": 256}, "128 or 192 query rows"),
                                         # three consumers' 160 registers: O, S and the previous P
                                         ({"head_dim": 64, "block_m": 192, "block_n": 192}, "at most 128 keys"),
                                         ({"head_dim": 128, "block_m": 192, "block_n": 128}, "at most 80 keys")])
def test_spec_refuses(kw, message):
    with pytest.raises(ValueError, match=message):
        attention_sm90.Sm90AttentionSpec("a", **kw)


def test_spec_geometry():
    s = attention_sm90.Sm90AttentionSpec("a", head_dim=128, causal=True, scale=0.1)
    # O leaves through shared memory and TMA bulk stores: 64 rows of a warpgroup a box
    assert s.tensor_maps == "Q:0:64x128x1:128;K:1:64x128x1:128;V:2:64x128x1:128;O:3:64x64x1:128"
    # Q, three K/V stages of 128 keys (the tuned default at D=128), mbarriers, alignment
    assert (s.stages, s.block_n) == (3, 128)
    assert s.smem_bytes == 2 * 16384 + 3 * 65536 + 8 * 7 + 1024
    assert (s.bm, s.consumers, s.threads) == (128, 2, 384)
    # D=64: FlashAttention-3's 192 x 128 tiles, three consumer warpgroups of 64 query rows
    d64 = attention_sm90.Sm90AttentionSpec("a", head_dim=64)
    assert (d64.stages, d64.block_n, d64.tensor_maps) == (3, 128, "Q:0:64x192x1:128;K:1:64x128x1:128;V:2:64x128x1:128;O:3:64x64x1:128")
    assert (d64.bm, d64.consumers, d64.threads, d64.q_box) == (192, 3, 512, 192 * 128)
    assert d64.smem_bytes == 192 * 128 + 3 * 2 * 128 * 128 + 8 * 7 + 1024
    # the earlier D=64 blocking stays reachable (two consumers, 192-key blocks)
    old = attention_sm90.Sm90AttentionSpec("a", head_dim=64, block_m=128, block_n=192)
    assert (old.consumers, old.threads, old.tensor_maps) == (2, 384, "Q:0:64x128x1:128;K:1:64x192x1:128;V:2:64x192x1:128;O:3:64x64x1:128")
    # key blocks past three consumers' registers (a hint, an autotuning candidate) without rows asked for: 128 rows
    assert attention_sm90.Sm90AttentionSpec("a", head_dim=64, block_n=192).bm == 128
    # causal: query i attends keys 0..i; 3 queries and 2 keys give 1 + 2 + 2 pairs
    assert s.flops(1, 3, 2) == 4.0 * 5 * 128


def test_kernels_and_plans(example):
    kernels = {k.name: k for k in image.read_image(example.image).kernels}
    k = kernels["causal_d128__attention0"]
    assert [a.name for a in k.args] == ["Q", "K", "V", "O", "BH", "SQ", "SK"]
    assert k.props["attention.causal"] == "true" and k.props["tile.K"] == "128"
    d64 = kernels["attention_d64__attention0"].props
    assert d64["ptx.tensor_maps"].startswith("Q:0:64x192x1:128;K:1:64x128x1:128") and d64["tile.M"] == "192"
    assert (k.props["tile.N"], k.props["pipeline.stages"]) == ("128", "3")
    step = example.metadata["plans"]["causal_d128"]["steps"][0]
    assert step["grid"] == ["ceil(SQ/128)", "BH", "1"] and step["block"] == [384, 1, 1]
    assert step["env"] == {"BH": "B*H", "SQ": "S", "SK": "T"}
    step = example.metadata["plans"]["causal_d64"]["steps"][0]   # causal D = 64: a persistent grid (TUNED's)
    assert step["grid"] == ["min(ceil(SQ/192)*BH, 132)", "1", "1"] and step["block"] == [512, 1, 1]
    step = example.metadata["plans"]["attention_d64"]["steps"][0]
    assert step["grid"] == ["ceil(SQ/192)", "BH", "1"]


def test_three_consumers_schedule():
    """192 query rows: three consumer warpgroups with 160 registers (the producer's 24), each empty slot of the
    ring released by all three, and the turns passed round robin on named barriers 4, 5, 6 (after the O
    stores' 1, 2, 3): warpgroup c waits on 4 + c and hands over to 4 + (c + 1) % 3."""
    text = attention_sm90.generate(attention_sm90.Sm90AttentionSpec("a", head_dim=64, causal=True))
    assert "setmaxnreg.inc.sync.aligned.u32 160;" in text and "setmaxnreg.dec.sync.aligned.u32 24;" in text
    assert '"nvvm.maxntid"="512"' in text
    assert text.count("mbarrier.init.shared::cta.b64 [$0], 3;") == 4      # empty[3], the Q buffer's (persistent)
    two = attention_sm90.generate(attention_sm90.Sm90AttentionSpec("a", head_dim=128))
    assert "setmaxnreg.inc.sync.aligned.u32 240;" in two and two.count("mbarrier.init.shared::cta.b64 [$0], 2;") == 3


@pytest.mark.parametrize("n", [2, 3])
def test_turns_round_robin(n):
    """The turn barriers of _Turns as numbers: evaluate the IR it writes for each warpgroup c."""
    from tessera.backends.ptx.nvvm_text import Writer
    for c in range(n):
        w = Writer()
        t = attention_sm90._Turns(w, str(c), n)
        env = {}
        for line in w.lines:
            name, _, expr = line.strip().partition(" = ")
            op, *args = expr.replace(",", "").split()
            vals = [env.get(a, None) if a.startswith("%") else a for a in args]
            if op == "add":
                env[name] = int(vals[1]) + int(vals[2])
            elif op == "icmp":
                env[name] = int(vals[2]) == int(vals[3])
            elif op == "select":
                env[name] = int(vals[3]) if env[args[1]] else env.get(args[5], args[5])
            else:
                raise AssertionError(line)
        assert (env[t.mine], env[t.other]) == (n + 1 + c, n + 1 + (c + 1) % n)


def test_poly_exp2_matches_exp2():
    """exp2_poly's arithmetic (clamp, round by 1.5·2^23, cubic, exponent add) in float32: within 2e-4 of 2^x,
    and about 2^-125 (~0) for -inf."""
    import numpy as np
    x = np.concatenate([np.linspace(-124, 0, 20001), [-np.inf]]).astype(np.float32)
    xc = np.maximum(x, np.float32(-125))
    t = (xc + np.float32(12582912.0)).astype(np.float32)
    j = t.view(np.int32) - 1262485504
    r = (xc - (t - np.float32(12582912.0))).astype(np.float32)
    p = np.float32(0.05502926558256149)
    for c in (0.2422569841146469, 0.6932530403137207, 0.9999513626098633):
        p = (p * r + np.float32(c)).astype(np.float32)
    got = (p.view(np.int32) + (j << 23)).view(np.float32)
    want = np.exp2(x.astype(np.float64))
    assert np.all(np.abs(got[:-1] - want[:-1]) <= 2e-4 * want[:-1]) and abs(got[-1] / 2.0 ** -125 - 1) <= 2e-4
    spec = attention_sm90.Sm90AttentionSpec("a", head_dim=64, poly_every=4)
    text = attention_sm90.generate(spec)
    plain = attention_sm90.generate(attention_sm90.Sm90AttentionSpec("a", head_dim=64))
    # a quarter of the block's exponentials leave MUFU (the alphas stay on it)
    moved = text.count(", 1262485504")
    assert plain.count(", 1262485504") == 0 and moved > 0
    assert plain.count("@llvm.nvvm.ex2.approx.ftz.f(") - text.count("@llvm.nvvm.ex2.approx.ftz.f(") == moved


def test_causal_end_tiles_and_skipped_blocks():
    """end_tiles: tile x holds rows SQ - (x + 1)·BM …, the first rows' tile clamped at row 0 (a signed
    comparison and a select: never a negative row); skip_masked: each consumer warpgroup runs its own count of
    key blocks, ceil((m0 + 64c + 64) / BN), then an idle loop that waits for each later block, passes the turn
    on (bar.sync on its own barrier, bar.arrive on the next) and releases the ring slot. Neither changes a
    non-causal kernel; the row comparisons stay unsigned (rows are never negative)."""
    spec = attention_sm90.Sm90AttentionSpec
    both = attention_sm90.generate(spec("a", head_dim=64, causal=True, end_tiles=1, skip_masked=1))
    plain = attention_sm90.generate(spec("a", head_dim=64, causal=True, end_tiles=0, skip_masked=0))
    # end_tiles is TUNED's (measured faster on an H200); skip_masked with the count broadcast from lane 0 is at
    # D = 64 (faster there), not at D = 128 (where 128 x 128 tiles skip nothing)
    for d, skip in ((64, 2), (128, 0)):
        default = spec("a", head_dim=d, causal=True)
        assert (default.end_tiles, default.skip_masked) == (1, skip)
    assert "icmp slt" in attention_sm90.generate(spec("a", head_dim=64, causal=True))
    assert "icmp slt" in both and "icmp slt" not in plain and "icmp sgt" not in both
    assert "cidle:" in both and "cidle" not in plain
    idle = both[both.index("cidle:"):both.index("cdone:")]
    assert "mbarrier.try_wait" in idle and "bar.sync $0, 256;" in idle and "bar.arrive $0, 256;" in idle
    assert "mbarrier.arrive" in idle and "wgmma" not in idle
    # the warpgroup's own blocks: 64 rows past its first, rounded up to 128-key blocks
    import re
    assert re.search(r"(%\w+) = add i32 %\w+, 191\n\s*%\w+ = udiv i32 \1, 128\n", both)
    for kw in ({}, {"head_dim": 128}):
        a = attention_sm90.generate(spec("a", end_tiles=0, **kw))
        assert a == attention_sm90.generate(spec("a", end_tiles=1, skip_masked=1, **kw))


def test_skipped_blocks_count_from_lane_0():
    """skip_masked=2 (TUNED's at D = 64): the warpgroup's own block count goes through shfl.sync.idx from lane 0
    (the same value, which ptxas then sees is uniform across the warp) before it bounds the loop; 1 uses it as
    computed; the fp8 spec (its own TUNED) skips nothing."""
    spec = attention_sm90.Sm90AttentionSpec
    two = attention_sm90.generate(spec("a", head_dim=64, causal=True))
    one = attention_sm90.generate(spec("a", head_dim=64, causal=True, skip_masked=1))
    import re
    assert re.search(r"(%\w+) = udiv i32 %\w+, 128\n\s*(%\w+) = call i32 @llvm.nvvm.shfl.sync.idx.i32\(i32 -1, "
                     r"i32 \1, i32 0, i32 31\)\n\s*%\w+ = icmp ult i32 \2, ", two)
    assert "shfl.sync.idx" not in one and "cidle:" in one and "cidle:" in two
    from tessera.backends.ptx import attention_fp8_sm90 as fp8
    f = attention_sm90.generate(fp8.Sm90AttentionFp8Spec("a", head_dim=128, causal=True, scale=0.1))
    assert "cidle" not in f and "shfl.sync.idx" not in f


def _evaluate(lines, env):
    """The values of straight-line i32 IR (add, sub, mul, udiv, urem, icmp ult/eq, select, trunc to i1)."""
    env = dict(env)
    val = lambda a: env[a] if a.startswith("%") else int(a)
    for line in lines:
        name, _, expr = line.strip().partition(" = ")
        op, *args = expr.replace(",", "").split()
        if op in ("add", "sub", "mul", "udiv", "urem"):
            a, b = val(args[1]), val(args[2])
            env[name] = {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "udiv": lambda: a // b,
                         "urem": lambda: a % b}[op]()
        elif op == "icmp":
            a, b = val(args[2]), val(args[3])
            env[name] = (a < b) if args[0] == "ult" else (a == b)
        elif op == "select":
            env[name] = val(args[3]) if env[args[1]] else val(args[5])
        elif op == "trunc":
            env[name] = val(args[1]) & 1
        else:
            raise AssertionError(line)
    return env


@pytest.mark.parametrize("causal, snake, section", [(True, 0, 0), (True, 1, 0), (True, 1, 5), (True, 0, -1),
                                                    (False, 0, 0)])
def test_persistent_tile_order(causal, snake, section):
    """A persistent grid's order of tiles (_decode, as IR evaluated here): every (query tile, batch-head) once,
    causal ones longest first — by rank across all (batch, head)s, or within sections of them (5, or as many as
    32 MiB of K and V: all 7 here) —, not causal a (batch, head)'s tiles together."""
    from tessera.backends.ptx.nvvm_text import Writer
    spec = attention_sm90.Sm90AttentionSpec("a", head_dim=64, causal=causal, persistent=2, snake=snake,
                                            section=section)
    nq, bht, sk = 4, 7, 1000
    seen = []
    for r in range(nq * bht):
        w = Writer()
        bx, bh = attention_sm90._decode(w, spec, "%r", "%nq", "%bht")
        lines = [x.replace("trunc i64 %SK to i32", "add i32 %SK, 0") for x in w.lines]
        env = _evaluate(lines, {"%r": r, "%nq": nq, "%bht": bht, "%SK": sk})
        seen.append((env[bx], env[bh]))
    assert sorted(seen) == [(x, h) for x in range(nq) for h in range(bht)]
    if not causal:
        assert seen[:nq] == [(x, 0) for x in range(nq)]
    elif section in (0, -1):   # tile 0 (the longest) of every (batch, head) first, then tile 1, …
        assert [x for x, _ in seen] == sorted(x for x, _ in seen)
    else:
        assert seen[:2 * 5] == [(x, h) for x in range(2) for h in range(5)]
        assert [x for x, h in seen if h >= 5] == sorted(x for x, h in seen if h >= 5)


def test_persistent_grid_structure():
    """`persistent` (TUNED's at D = 64 causal only: measured faster there with skip_masked=2, on an H200; slower or
    no faster elsewhere): the grid of at most SMS CTAs, a barrier more
    (the Q buffer's release, one arrival per consumer warpgroup), O's own staging at D = 64 (not at D = 128,
    where three stages of 128-key blocks leave no room), thread 32 loading Q, the ring's stage of a block counted
    on across tiles; 1 loops the causal kernels only; the fp8 spec never loops."""
    spec = attention_sm90.Sm90AttentionSpec
    assert [(d, c) for d in (64, 128) for c in (False, True) if spec("a", head_dim=d, causal=c).looping] == [(64, True)]
    assert spec("a", head_dim=64, causal=True).snake == 1 and not spec("a", head_dim=64, causal=True, persistent=0).looping
    d64 = spec("a", head_dim=64, causal=True, persistent=1)
    assert d64.looping and not spec("a", head_dim=64, persistent=1).looping and spec("a", persistent=2).looping
    assert d64.o_apart == 192 * 128 and d64.smem_bytes == spec("a", head_dim=64).smem_bytes + 192 * 128 + 8
    d128 = spec("a", head_dim=128, causal=True, persistent=1)
    assert d128.o_apart == 0 and d128.smem_bytes == spec("a", head_dim=128).smem_bytes + 8
    import re
    text = attention_sm90.generate(d64)
    assert text.count("mbarrier.init.shared::cta.b64 [$0], 3;") == 4      # empty[3] and the Q buffer's
    for block in ("qtile:", "kvtile:", "ctile:", "cend:"):
        assert block in text, block
    assert re.search(r"icmp eq i32 %tid_x\w*, 32\n", text)
    from tessera.backends.ptx import attention_fp8_sm90 as fp8
    assert not fp8.Sm90AttentionFp8Spec("a", head_dim=128, causal=True, scale=0.1).looping
    from tessera.backends.ptx import attention_lowering
    assert attention_lowering._grid(d64, False) == ("min(ceil(SQ/192)*BH, 132)", "1", "1")
    assert attention_lowering._grid(d128, True) == ("min(ceil(SQ/128)*H*B, 132)", "1", "1")
    assert attention_lowering._grid(spec("a", head_dim=64, causal=True, persistent=0), False) == \
        ("ceil(SQ/192)", "BH", "1")
    assert attention_lowering._grid(spec("a", head_dim=64), True) == ("ceil(SQ/192)", "H", "B")


@pytest.mark.skipif(ptxas.find() is None, reason="ptxas (CUDA's PTX assembler) is not installed (the CUDA toolkit)")
def test_persistent_kernels_assemble(monkeypatch):
    """The looping kernels (causal and not, D = 64 and 128, snake order and sections) through the compiler and
    ptxas. ptxas spills a few registers of the causal D = 64 one (8–16 bytes, outside the key-block loop)."""
    monkeypatch.setenv(attention_sm90.ENV, "64:persistent=2,snake=1,section=-1;128:persistent=2,snake=1,section=-1")
    monkeypatch.setenv("TESSERA_CACHE", "0")
    result = compiler.compile_source(EXAMPLE.read_text(), str(EXAMPLE), CompileOptions(target="ptx", arch="sm_90a"))
    kernels = {k.name: k for k in image.read_image(result.image).kernels}
    for name in ("attention_d128", "causal_d128", "attention_d64", "causal_d64"):
        assert int(kernels[f"{name}__attention0"].props.get("ptx.spill_bytes", 0)) <= LOOPING_SPILLS, name
    assert result.metadata["plans"]["causal_d64"]["steps"][0]["grid"] == ["min(ceil(SQ/192)*BH, 132)", "1", "1"]


@pytest.mark.skipif(ptxas.find() is None, reason="ptxas (CUDA's PTX assembler) is not installed (the CUDA toolkit)")
def test_causal_end_tiles_and_skipped_blocks_assemble(monkeypatch):
    """The causal kernels with end_tiles and skip_masked through the compiler and ptxas: no spills."""
    monkeypatch.setenv(attention_sm90.ENV, "64:end_tiles=1,skip_masked=1;128:end_tiles=1,skip_masked=1")
    monkeypatch.setenv("TESSERA_CACHE", "0")
    src = ("@function\ndef f(Q: tensor[bf16, 'B', 'S', 64], K: tensor[bf16, 'B', 'S', 64], "
           "V: tensor[bf16, 'B', 'S', 64]):\n    return op.flash_attention(Q, K, V, causal=True, scale=0.125)\n"
           "@function\ndef g(Q: tensor[bf16, 'B', 'S', 128], K: tensor[bf16, 'B', 'S', 128], "
           "V: tensor[bf16, 'B', 'S', 128]):\n    return op.flash_attention(Q, K, V, causal=True, scale=0.125)\n")
    result = compiler.compile_source(src, "user.py", CompileOptions(target="ptx", arch="sm_90a"))
    kernels = [k for k in image.read_image(result.image).kernels if "attention" in k.name or "flash" in k.name]
    assert len(kernels) == 2
    for k in kernels:   # f: D = 64, looping (TUNED's)
        assert int(k.props.get("ptx.spill_bytes", 0)) <= (LOOPING_SPILLS if k.name.startswith("f_") else 0), k.name


def test_env_overrides_tuned(monkeypatch):
    """$TESSERA_SM90_ATTENTION: the benchmark's variants (the old D=64 blocking for comparison)."""
    monkeypatch.setenv(attention_sm90.ENV, "64:block_m=128,block_n=192;128:stages=2")
    assert attention_sm90.tuned(64) == {"block_m": 128, "block_n": 192, "stages": 3, "end_tiles": 1,
                                        "skip_masked": 2, "persistent": 1, "snake": 1}
    assert attention_sm90.tuned(128)["stages"] == 2
    monkeypatch.setenv(attention_sm90.ENV, "64:end_tiles=1,skip_masked=1")
    assert attention_sm90.tuned(64)["end_tiles"] == attention_sm90.tuned(64)["skip_masked"] == 1
    monkeypatch.setenv(attention_sm90.ENV, "64:tiles=3")
    with pytest.raises(ValueError, match="no setting 'tiles'"):
        attention_sm90.tuned(64)


# ptxas spills a few registers of the persistent causal D = 64 kernel (TUNED's), outside its key-block loop
LOOPING_SPILLS = attention_sm90.LOOPING_SPILL_BYTES


@pytest.mark.skipif(ptxas.find() is None, reason="ptxas (CUDA's PTX assembler) is not installed (the CUDA toolkit)")
def test_ptxas_assembles_without_spills(example):
    for k in image.read_image(example.image).kernels:
        if k.props.get("attention.persistent") == "true":
            assert k.name == "causal_d64__attention0"
            assert int(k.props.get("ptx.spill_bytes", 0)) <= LOOPING_SPILLS
        else:
            assert "ptx.spill_bytes" not in k.props, k.name


@pytest.mark.parametrize("body, dtype", [
    ("Q: tensor[bf16, 'S', 'D'], K: tensor[bf16, 'T', 'D'], V: tensor[bf16, 'T', 'D']", "bf16"),
    ("Q: tensor[bf16, 'S', 32], K: tensor[bf16, 'T', 32], V: tensor[bf16, 'T', 32]", "bf16"),
    ("Q: tensor[f32, 'S', 64], K: tensor[f32, 'T', 64], V: tensor[f32, 'T', 64]", "f32"),
])
def test_what_the_kernel_does_not_take_is_decomposed(body, dtype):
    """sm_90a's kernel takes bf16/f16 by head dimension 64 or 128 (TargetFacts.attention_kernels); a
    symbolic or other head dimension, or f32, runs as two GEMMs and a softmax instead, recorded."""
    src = f"@function\ndef f({body}):\n    return op.flash_attention(Q, K, V, scale=0.125)\n"
    plan = compiler.compile_source(src, "user.py", CompileOptions(target="ptx", arch="sm_90a")).metadata["plans"]["f"]
    assert f"flash_attention ({dtype}) as two GEMMs and a softmax (the probabilities materialised)" in plan["fallbacks"]
    assert not any("attention" in s.get("kernel", "") for s in plan["steps"])


def _ptx(spec):
    """The spec's kernel as PTX (LLVM's O3 and NVPTX codegen, as backends/ptx/compiler.py runs them)."""
    from tessera.backends.ptx.compiler import PTXOptions, _target_machine, llvm
    tm = _target_machine(PTXOptions(arch="sm_90a"))
    mod = llvm.parse_assembly(attention_sm90.generate(spec))
    mod.data_layout = str(tm.target_data)
    mod.verify()
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
    pb.getModulePassManager().run(mod, pb)
    return tm.emit_assembly(mod)


def test_late_wait_keeps_the_softmax_before_the_pv_wait():
    """late_wait=1: in the key-block loop, the wait for P·Vⱼ₋₁ (wgmma.wait_group 0) comes after the softmax of
    Sⱼ in a block of its own (ptxas hoists it above the softmax within one block), reached by a branch LLVM can
    not fold (on a value through an opaque mov) and not sink the softmax past (an empty asm takes P, α, l); the
    branch's never-taken side waits itself. TUNED's at D = 128 (measured faster on an H200), not at D = 64 nor for
    the non-causal fp8 spec (the causal one has it: attention_fp8_sm90.TUNED_CAUSAL)."""
    spec = attention_sm90.Sm90AttentionSpec
    plain, late = (attention_sm90.generate(spec("a", head_dim=128, late_wait=x)) for x in (0, 1))
    assert attention_sm90.generate(spec("a", head_dim=128)) == late and "never" not in plain
    assert [spec("a", head_dim=d, causal=c).late_wait for d in (64, 128) for c in (0, 1)] == [0, 0, 1, 1]
    from tessera.backends.ptx import attention_fp8_sm90 as fp8
    assert "never" not in attention_sm90.generate(fp8.Sm90AttentionFp8Spec("a", head_dim=128, causal=False, scale=0.1))
    assert "never" in attention_sm90.generate(fp8.Sm90AttentionFp8Spec("a", head_dim=128, causal=True, scale=0.1))
    loop = late[late.index("\nckv:"):late.index("\nclast:")]
    at = loop.index("wgmma.wait_group.sync.aligned 1;")
    wait0 = loop.index("wgmma.wait_group.sync.aligned 0;", at)
    body = loop[at:wait0]
    # the never-taken side (its own wait) comes first in the text; the exponentials are all before the branch
    assert body.count("@llvm.nvvm.ex2.approx.ftz.f(") == 64 + 2 and 'asm sideeffect "", "' in body
    assert "never" in body and "pvwait" in body
    tool = ptxas.find()
    if tool:   # and the PTX keeps the branch: a predicated bra between the last ex2 and the loop's wait 0
        text = _ptx(spec("a", head_dim=128, late_wait=1))
        waits = [i for i in range(len(text)) if text.startswith("wgmma.wait_group.sync.aligned 0;", i)]
        last_ex2 = text.rindex("ex2.approx.ftz.f32")
        after = [i for i in waits if i > last_ex2]
        assert after and " bra " in text[last_ex2:after[0]].replace("\t", " ")
        assert all(r.spill_bytes == 0 for r in ptxas.check(text, "sm_90a", tool).values())


def test_split_kv_barriers():
    """split_kv=1: K and V with full and empty mbarriers each — Q's, K's full[S] and empty[S], V's full[S]
    and empty[S] (16·S more bytes) —, K released after Sⱼ's wait, V after P·V's; with 176-key blocks in two
    stages (FlashAttention-3's non-causal D = 128 blocking) it fits shared memory; a persistent grid or
    skip_masked is refused."""
    spec = attention_sm90.Sm90AttentionSpec
    s = spec("a", head_dim=128, split_kv=1, block_n=176, stages=2)
    assert s.smem_bytes == spec("a", head_dim=128, block_n=176, stages=2).smem_bytes + 16 * 2 <= 227 * 1024
    text = attention_sm90.generate(s)
    assert text.count("mbarrier.init.shared::cta.b64 [$0], 1;") == 5
    assert text.count("mbarrier.init.shared::cta.b64 [$0], 2;") == 4
    # K₀ before the loop, then Kⱼ₊₁ and Vⱼ in it, each alone (Q's is 32768 bytes)
    assert text.count("mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], 45056;") == 3
    assert "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], 90112;" not in text
    loop = text[text.index("\nckv:"):text.index("\nclast:")]
    assert loop.index("wgmma.wait_group.sync.aligned 1;") < loop.index("mbarrier.arrive.shared::cta.b64 _")
    for bad in ({"skip_masked": 1, "causal": True}, {"persistent": 2}):
        with pytest.raises(ValueError, match="split_kv"):
            spec("a", head_dim=128, split_kv=1, **bad)
    tool = ptxas.find()
    if tool:
        assert all(r.spill_bytes == 0 for r in ptxas.check(_ptx(s), "sm_90a", tool).values())


def test_early_rescale_between_the_issues():
    """early_rescale=1: O·αⱼ₋₁ between the issue of Sⱼ and of P·Vⱼ₋₁ (a second wgmma.fence before P·V), none
    after P·V's wait; α carried round the loop; the default keeps the rescale after the wait."""
    spec = attention_sm90.Sm90AttentionSpec
    text = attention_sm90.generate(spec("a", head_dim=128, early_rescale=1, late_wait=1))
    loop = text[text.index("\nckv:"):text.index("\nclast:")]
    commits = [i for i in range(len(loop)) if loop.startswith("wgmma.commit_group", i)]
    assert len(commits) == 2 and loop.count("wgmma.fence.sync.aligned") == 2
    between = loop[commits[0]:commits[1]]
    assert between.count("fmul float") == 64
    after = loop[loop.index("wgmma.wait_group.sync.aligned 0;", loop.index("pvwait")):]
    assert "fmul float" not in after
    plain = attention_sm90.generate(spec("a", head_dim=128, early_rescale=0))
    pl = plain[plain.index("\nckv:"):plain.index("\nclast:")]
    assert pl.count("wgmma.fence.sync.aligned") == 1


def test_new_switches_from_the_environment(monkeypatch):
    monkeypatch.setenv(attention_sm90.ENV, "128:late_wait=1,split_kv=1,early_rescale=1,block_n=176,stages=2")
    s = attention_sm90.Sm90AttentionSpec("a", head_dim=128)
    assert (s.late_wait, s.split_kv, s.early_rescale, s.block_n, s.stages) == (1, 1, 1, 176, 2)
    assert attention_sm90.Sm90AttentionSpec("a", head_dim=64).late_wait == 0
