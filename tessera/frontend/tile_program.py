"""Tile programs: `@kernel` functions written with whole-tile operations (spec/execution-model.md §2–5).

    @kernel
    def fused_mlp(X, W1, b1, W2, b2, Out):
        H = tile.dot(X, W1) + b1
        H = tile.relu(H)
        Out[:] = tile.dot(H, W2) + b2

A tile program says what each tile computes and how tiles are staged (cp_async into shared buffers,
barriers, double buffering, `tile.mma` blocking); the compiler decides the threads. It becomes Graph IR —
the same pipeline then tiles, fuses and lowers it — with the staging kept as schedule hints:

- `tile.dot`, `tile.softmax`, `tile.relu`/`gelu`/…, `x.T` are the Graph ops; `tile.dot` accumulates in f32;
- `re, im = tile.fft(x)` (or `tile.fft(re, im)`, `inverse=True` for the inverse) is numpy.fft.fft (ifft) of
  an f32 or f64 tile's rows as the pair of its real and imaginary parts, the tile primitive the spec's FFT
  lowering names: for a power of two n the Stockham FFT's stages (`ttensor.fft_stage`, passes/fft.py), other
  n (at most 4096) GEMMs with the DFT's twiddle matrices (`ttensor.twiddle`, passes/fourier.py);
- `for m, n, k in tile.mma(A, B, C, BM=, BN=, BK=): tile.mma_sync(m, n, k)` is ``C += A @ B`` blocked BM×BN×BK;
- `for k in range(0, A.shape[1], S)` whose body accumulates `tile.dot` of k-slices of width S is the whole
  contraction (``C += A @ B``), software-pipelined over S-wide chunks (stages = shared buffers used);
- `for b in tile.range(Q, axis=0, step=S)` runs its body on every S-row block of Q; tiles taken with
  `tile.cp_async(Q, b)` are those blocks, stacked (the extent must be a multiple of S);
- `tile.cp_async(buf, x)` stages `x` in `buf` (from `tile.alloc_shared()`); `tile.barrier()` orders stages —
  both are implied by dataflow in Graph IR;
- `tile.load(T, b)` is `tile.cp_async(T, b)`, and `tile.store(O, b, v)` is `O[b] = v`;
- partial tiles: `tile.load(T, b, mask=b.mask, other=x)` pads the last block with `x` (`ttensor.load_blocks`),
  `tile.store(O, b, v, mask=b.mask)` writes only the rows inside O (`ttensor.store_blocks`), and
  `tile.where(b.mask[None, :], s, x)` (or `[:, None]` for rows) sets the elements of padded columns (rows) to
  `x` (`ttensor.mask_blocks`) — `-inf` before a softmax over padded keys. A k-chunk slice loaded with
  `mask=k.mask, other=0.0` is the chunk as is: its tail past the extent adds zero to the contraction.
  Without masks a tile.range step must divide the extent;
- a parameter that is assigned (`Out[:] = v`, `O[b] = v`, `C += v`) is an output, written in place.

Unannotated parameters are 2-D `f32` tensors, `tensor[dtype]` without extents is 2-D of that dtype.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass

from .. import dtypes
from ..dialects import ttensor
from ..mlir import func, ir
from ..options import HINT_LIMITS
from .attrs import INT64_MAX, i64 as _i64
from .function import FunctionBuilder, _name
from .oplib import OPS, DTypePolicy, GTensor

TILE_CALLS = {"dot", "fft", "mma", "mma_sync", "range", "cp_async", "load", "store", "where", "barrier", "alloc_shared",
              "softmax", "relu", "gelu", "silu", "sigmoid", "tanh", "exp", "log", "sqrt"}
ATOMIC_CALLS = {"atomic_add", "atomic_max", "atomic_cas", "fence"}  # SIMT only (language.md, "Atomics and fences")
SIMT_CALLS = {"thread_id", "local_id", "block_id", "lane_id", "warp_id", "warp_shuffle_down", "warp_shuffle_xor",
              "cooperative_group", "warp_size", "warp_reduce", "group_reduce"}


def is_tile_program(fn: ast.FunctionDef) -> bool:
    """A kernel using tile-level operations and no per-thread ones."""
    names = {n.func.attr for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    return bool(names & TILE_CALLS) and not (names & SIMT_CALLS)


@dataclass
class SharedBuffer:
    """`tile.alloc_shared()`: holds the tile last staged into it."""

    content: object = None


@dataclass(frozen=True)
class Blocks:
    """The loop variable of `tile.range(T, axis, step)`: every `step`-row block of `T` at once."""

    of: str
    axis: int
    step: int


@dataclass(frozen=True)
class BlockMask:
    """`b.mask`: which rows of block `b` lie inside its tensor; `b.mask[:, None]` masks a tile's rows (axis
    "rows"), `b.mask[None, :]` its columns (axis "cols")."""

    blocks: Blocks
    along: str | None = None


@dataclass(frozen=True)
class ChunkMask:
    """`k.mask`: which elements of k-chunk `k` lie inside the contracted extent."""

    chunk: "Chunk"


@dataclass(frozen=True)
class Chunk:
    """The loop variable of a k-loop `range(0, extent, step)`: every `step`-wide chunk at once."""

    step: int
    extent: str   # 'A.shape[1]' style


@dataclass(frozen=True)
class ChunkSlice:
    """`A[:, k:k+S]` (axis 1) or `B[k:k+S, :]` (axis 0): A's chunks along `axis`."""

    tensor: GTensor
    axis: int
    chunk: Chunk


@dataclass(frozen=True)
class ChunkedProduct:
    """tile.dot of two chunk slices: summed over the chunks, the whole product."""

    product: GTensor


class TileProgramBuilder(FunctionBuilder):
    def __init__(self, fn: ast.FunctionDef, filename: str, module_env: dict):
        super().__init__(fn, filename, module_env)
        self.param_names: list[str] = []
        self.written: dict[str, GTensor] = {}
        self.stages = 1
        self.block_loads: dict[Blocks, set[bool]] = {}   # per tile.range: were its loads masked?
        self.same_extents: list[list[str]] = []            # parameter extents the launch must find equal

    # -- parameters: unannotated means a 2-D f32 tensor --------------------------------------------------
    def _param_type(self, arg: ast.arg) -> GTensor:
        ann = arg.annotation
        self.param_names.append(arg.arg)
        dims2 = [f"{arg.arg}_0", f"{arg.arg}_1"]
        self.shapes.flexible.update(dims2)  # extents the program never named: unify with anything
        if ann is None or (isinstance(ann, ast.Name) and ann.id == "tensor"):
            return GTensor(None, dtypes.BY_NAME["f32"], dims2)
        if isinstance(ann, ast.Subscript) and _name(ann.value) == "tensor" and not isinstance(ann.slice, ast.Tuple):
            dt = dtypes.lookup(_name(ann.slice) or "")
            if dt is None:
                raise self.error(ann, f"'{ast.unparse(ann.slice)}' is not a tensor element type")
            return GTensor(None, dt, dims2)
        return super()._param_type(arg)

    # -- entry: the function returns the written parameters ------------------------------------------------
    def build(self) -> func.FuncOp:
        f, entry, names, arg_types = self.begin()
        self.params = {name: self.env[name] for name in names}
        with ir.InsertionPoint(entry):
            self.block(self.fn.body)
            if not self.written:
                raise self.error(self.fn, f"tile program '{self.fn.name}' writes none of its parameters")
            outs = [n for n in self.param_names if n in self.written]
            values = [self._as_param(n, self.written[n]) for n in outs]
            with self.loc(self.fn):
                func.ReturnOp([v.value for v in values])
        self.finish(f, arg_types, values)
        i64 = ir.IntegerType.get_signless(64)
        f.attributes["tessera.outputs"] = ir.ArrayAttr.get(
            [ir.IntegerAttr.get(i64, self.param_names.index(n)) for n in outs])
        if self.same_extents:
            f.attributes["tessera.same_extents"] = ir.ArrayAttr.get(
                [ir.ArrayAttr.get([ir.StringAttr.get(d) for d in pair]) for pair in self.same_extents])
        return f

    def _as_param(self, name: str, v: GTensor) -> GTensor:
        """`v` as the new value of parameter `name`: its dtype and shape."""
        p = self.params[name]
        if v.dtype != p.dtype:
            v = OPS["cast"](self, self.fn, [v, DTypePolicy(p.dtype)], {})
        if len(v.dims) == len(p.dims):
            try:
                for a, b in zip(v.dims, p.dims):
                    self.shapes.unify(a, b, "stored tile")
                return v
            except Exception:  # noqa: BLE001 — not the same extents: broadcast below
                pass
        return OPS["broadcast_to"](self, self.fn, [v, tuple(p.dims)], {})

    # -- statements ---------------------------------------------------------------------------------------
    def stmt(self, s: ast.stmt) -> None:
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Subscript):
            return self._store(s.targets[0], self.expr(s.value), s)
        if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name) and s.target.id in self.params:
            value = self.expr(s.value)
            if isinstance(value, ChunkedProduct):
                value = value.product
            current = self.written.get(s.target.id, self.params[s.target.id])
            return self._write(s.target.id, self.binop(s.op, current, value, s), s)
        if isinstance(s, ast.Return) and s.value is None:
            return None
        if isinstance(s, ast.For):
            return self._for(s)
        return super().stmt(s)

    def _write(self, name: str, value, node) -> None:
        if not isinstance(value, GTensor):
            value = self.as_tensor(value, node, like=self.params[name])
        self.written[name] = value
        self.env[name] = value

    def _store(self, target: ast.Subscript, value, node) -> None:
        t = target.value
        if not (isinstance(t, ast.Name) and t.id in self.params):
            raise self.error(target, "a tile program stores into its tensor parameters")
        index = self.expr(target.slice) if not isinstance(target.slice, ast.Slice) else "all"
        if isinstance(target.slice, ast.Slice) and not (target.slice.lower or target.slice.upper or target.slice.step):
            index = "all"
        if isinstance(index, Blocks):
            return self._store_blocks(t.id, index, value, node)
        if index != "all":
            raise self.error(target.slice, "store a whole tile (`Out[:] = …`) or a tile.range block (`O[b] = …`)")
        self._write(t.id, value, node)

    def _store_blocks(self, name: str, b: Blocks, value, node) -> None:
        """`O[b] = v` unmasked: the stacked blocks are O's rows exactly."""
        if True in self.block_loads.get(b, ()):
            raise self.error(node, f"the blocks of {b.of} were loaded masked: store them with "
                                   f"tile.store({name}, block, value, mask=block.mask)")
        if isinstance(value, GTensor) and value.rank > 2:
            value = OPS["reshape"](self, node, [value, (-1, *value.dims[2:])], {})
        self._write(name, value, node)   # anything but a tile or a number is refused there, at `node`

    def _for(self, s: ast.For) -> None:
        it = s.iter
        if isinstance(it, ast.Call) and _name(it.func) == "mma" and isinstance(it.func, ast.Attribute):
            return self._mma_loop(s, it)
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr == "range" \
                and _name(it.func.value) == "tile":
            return self._block_loop(s, it)
        if isinstance(it, ast.Call) and _name(it.func) == "range" and len(it.args) == 3:
            return self._chunk_loop(s, it)
        return super().stmt(s)

    def _mma_loop(self, s: ast.For, call: ast.Call) -> None:
        if len(call.args) != 3:
            raise self.error(call, "tile.mma(A, B, C, BM=…, BN=…, BK=…) takes three tiles")
        a, b, c = (self.expr(x) for x in call.args)
        blocking = {k.arg: self.expr(k.value) for k in call.keywords}
        hint = {"BM": "MB", "BN": "NC", "BK": "KC"}  # the schedule hints they become, with their ranges
        for key, v in blocking.items():
            if key not in hint or type(v) is not int or not 0 < v <= HINT_LIMITS[hint[key]]:
                raise self.error(call, f"tile.mma's blocking is BM=, BN=, BK=, each a positive integer up to "
                                       f"{HINT_LIMITS['MB']}; got {key}={v!r}")
        body = [x for x in s.body if not (isinstance(x, ast.Pass))]
        if len(body) != 1 or not (isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Call)
                                  and _name(body[0].value.func) == "mma_sync"):
            raise self.error(s, "a tile.mma loop's body is `tile.mma_sync(m, n, k)`")
        if not isinstance(c, GTensor) or not isinstance(call.args[2], ast.Name) or call.args[2].id not in self.params:
            raise self.error(call, "tile.mma(A, B, C, …) accumulates into the tensor parameter C")
        product = self._dot(a, b, call)
        self._hint(product, {"MB": blocking.get("BM"), "NC": blocking.get("BN"), "KC": blocking.get("BK")})
        self._write(call.args[2].id, OPS["add"](self, call, [self._as_param(call.args[2].id, product), c], {}), s)

    def _block_loop(self, s: ast.For, call: ast.Call) -> None:
        if not isinstance(s.target, ast.Name) or not call.args:
            raise self.error(call, "write `for block in tile.range(T, axis=0, step=S)`")
        kw = {k.arg: self.expr(k.value) for k in call.keywords}
        of = call.args[0]
        if not isinstance(of, ast.Name) or of.id not in self.params:
            raise self.error(of, "tile.range iterates over a tensor parameter's blocks")
        axis, step = kw.get("axis", 0), kw.get("step")
        if axis != 0 or type(step) is not int or not 1 <= step <= INT64_MAX:
            raise self.error(call, "tile.range(T, axis=0, step=S) with a positive constant S (blocks of rows)")
        self.env[s.target.id] = Blocks(of.id, axis, step)
        self.block(s.body)

    def _chunk_loop(self, s: ast.For, call: ast.Call) -> None:
        start, stop, step = call.args
        if not (isinstance(start, ast.Constant) and start.value == 0 and isinstance(step, ast.Constant)
                and isinstance(step.value, int) and step.value > 0 and _is_shape(stop)):
            return super().stmt(s)
        self.env[s.target.id] = Chunk(step.value, ast.unparse(stop))
        self.block(s.body)

    # -- expressions -------------------------------------------------------------------------------------
    def expr_Subscript(self, node: ast.Subscript):
        base = self.expr(node.value)
        if isinstance(base, BlockMask) and base.along is None:
            along = {"(slice(None), None)": "rows", "(None, slice(None))": "cols"}.get(_mask_index(node.slice))
            if along is None:
                raise self.error(node.slice, "orient a block mask as mask[:, None] (rows) or mask[None, :] (columns)")
            return BlockMask(base.blocks, along)
        if isinstance(base, GTensor):
            chunk = self._chunk_index(node, base)
            if chunk is not None:
                return chunk
            if isinstance(node.slice, ast.Slice) and not (node.slice.lower or node.slice.upper or node.slice.step):
                return base
        raise self.error(node, "index a tile with `[:]`, a tile.range block, or k-chunk slices `[:, k:k+S]`")

    def _chunk_index(self, node: ast.Subscript, base: GTensor):
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if len(items) != 2:
            return None
        for axis, item in enumerate(items):
            other = items[1 - axis]
            if isinstance(item, ast.Slice) and isinstance(item.lower, ast.Name) and \
                    isinstance(self.env.get(item.lower.id), Chunk) and isinstance(other, ast.Slice) \
                    and not (other.lower or other.upper):
                chunk = self.env[item.lower.id]
                width = item.upper
                ok = (isinstance(width, ast.BinOp) and isinstance(width.op, ast.Add)
                      and ast.unparse(width.left) == item.lower.id and isinstance(width.right, ast.Constant)
                      and width.right.value == chunk.step)
                if not ok:
                    raise self.error(item, f"slice a k-chunk as [k:k+{chunk.step}]")
                return ChunkSlice(base, axis, chunk)
        return None

    def expr_Call(self, node: ast.Call):
        f = node.func
        if isinstance(f, ast.Attribute) and _name(f.value) == "tile":
            if f.attr in ATOMIC_CALLS:  # before its arguments, whose element indexing a tile program refuses
                raise self.error(node, f"tile.{f.attr} is a SIMT operation: a tile program has no per-thread "
                                       f"memory updates (write a @kernel with launch.thread_id())")
            args = [self.expr(a) for a in node.args]
            kwargs = {k.arg: self.expr(k.value) for k in node.keywords}
            return self._tile_call(node, f.attr, args, kwargs)
        return super().expr_Call(node)

    def _tile_call(self, node: ast.Call, name: str, args: list, kwargs: dict):
        if name == "dot":
            if len(args) != 2:
                raise self.error(node, "tile.dot(a, b) takes two tiles")
            return self._dot(*args, node)
        if name == "fft":
            return self._fft(node, args, kwargs)
        if name == "alloc_shared":
            return SharedBuffer()
        if name == "barrier":
            return None
        if name in ("cp_async", "load"):
            extra = set(kwargs) - {"mask", "other"}
            if extra:
                raise self.error(node, f"tile.{name} takes mask= and other=, not {', '.join(sorted(extra))}")
            if "other" in kwargs and "mask" not in kwargs:
                raise self.error(node, "other= is the value of masked-off elements: give mask= too")
            return self._stage(node, args, kwargs)
        if name == "store":
            return self._store_call(node, args, kwargs)
        if name == "where":
            return self._where(node, args, kwargs)
        if name in OPS and name not in ("dot",):
            tensors = [a for a in args if isinstance(a, GTensor)]
            if not tensors:
                raise self.error(node, f"tile.{name} takes a tile")
            return OPS[name](self, node, args, kwargs)
        raise self.error(node, f"unknown tile operation 'tile.{name}' in a tile program")

    def _fill(self, node: ast.Call, kwargs: dict) -> float:
        other = kwargs.get("other", 0.0)
        if not isinstance(other, (int, float)) or isinstance(other, bool):
            raise self.error(node, f"other= is a number (the value of masked-off elements), got {other!r}")
        return float(other)

    def _masked_chunk(self, node: ast.Call, what, kwargs: dict):
        """A masked k-chunk load is the chunk as it is: the contraction covers exactly the extent, so the
        padding past it (zeros) adds nothing."""
        if not isinstance(what, ChunkSlice):
            raise self.error(node, "mask= masks a tile.range block (tile.load(T, b, mask=b.mask, other=…)) or a "
                                   "k-chunk (tile.load(A[:, k:k+S], mask=k.mask, other=0.0)); other masks cannot "
                                   "be expressed yet")
        if kwargs["mask"] != ChunkMask(what.chunk):
            raise self.error(node, "a masked k-chunk load takes mask=k.mask of its own chunk variable")
        if self._fill(node, kwargs) != 0:
            raise self.error(node, "a k-chunk's masked-off elements are summed into the product: other must be 0")
        return what

    def _block_mask(self, node: ast.Call, mask, blocks: Blocks, oriented: bool) -> None:
        if not isinstance(mask, BlockMask) or mask.blocks != blocks or (mask.along is None) == oriented:
            form = "b.mask[None, :] or b.mask[:, None]" if oriented else "b.mask"
            raise self.error(node, f"the mask of a partial tile is its block's own: {form}, with b the tile.range "
                                   f"block (other masks cannot be expressed yet)")

    def _load_blocks(self, node: ast.Call, t: GTensor, b: Blocks, mask, other: float) -> GTensor:
        self._block_mask(node, mask, b, oriented=False)
        self._loaded(node, b, True)
        self._same_rows(node, t, b)
        dims = [self.shapes.fresh(), b.step, t.dims[1]]
        with self.loc(node):
            op = ttensor.LoadBlocksOp(t.value, step=_i64(b.step), other=ir.FloatAttr.get(ir.Type.parse(t.dtype.mlir), other),
                                      result=self.tensor_type(t.dtype, dims))
        return GTensor(op.result, t.dtype, dims, t.accum)

    def _same_rows(self, node: ast.AST, t: GTensor, b: Blocks) -> None:
        """`t` has the rows of `b`'s tensor: unified now, and checked at the launch where both are extents
        of parameters (their symbols unify with anything at compile time)."""
        mine, theirs = t.dims[0], self.params[b.of].dims[0]
        if isinstance(mine, str) and isinstance(theirs, str) and mine != theirs \
                and not mine.startswith("?") and not theirs.startswith("?"):
            self.same_extents.append([mine, theirs])
        self.unify(node, mine, theirs, f"rows of {b.of}'s blocks")

    def _loaded(self, node: ast.AST, b: Blocks, masked: bool) -> None:
        seen = self.block_loads.setdefault(b, set())
        seen.add(masked)
        if len(seen) > 1:
            raise self.error(node, f"the blocks of {b.of} are loaded both masked and unmasked: mask every load "
                                   f"of a partial block (mask=block.mask)")

    def _store_call(self, node: ast.Call, args: list, kwargs: dict) -> None:
        """tile.store(Out, block, value[, mask=block.mask]): `Out[block] = value`, masked to Out's rows."""
        target = node.args[0] if node.args else None
        if len(args) != 3 or not (isinstance(target, ast.Name) and target.id in self.params):
            raise self.error(node, "tile.store(Out, block, value) writes a block of a tensor parameter")
        if set(kwargs) - {"mask"}:
            raise self.error(node, f"tile.store takes mask=, not {', '.join(sorted(set(kwargs) - {'mask'}))}")
        b, value = args[1], args[2]
        if not isinstance(b, Blocks):
            raise self.error(node.args[1], "tile.store's block is a tile.range block")
        if "mask" not in kwargs:
            return self._store_blocks(target.id, b, value, node)
        self._block_mask(node, kwargs["mask"], b, oriented=False)
        if not isinstance(value, GTensor) or value.rank != 3:
            raise self.error(node, "a masked tile.store writes a tile of the block (stacked blocks [B, S, C])")
        dest = self.params[target.id]
        self._same_rows(node, dest, b)
        self.unify(node, value.dims[1], b.step, "rows of a stored block")
        value = self._as_dtype(value, dest, node)
        with self.loc(node):
            op = ttensor.StoreBlocksOp(value.value, dest.value, result=dest.value.type)
        self._write(target.id, GTensor(op.result, dest.dtype, list(dest.dims)), node)
        return None

    def _as_dtype(self, v: GTensor, like: GTensor, node) -> GTensor:
        if v.dtype == like.dtype:
            return v
        return OPS["cast"](self, node, [v, DTypePolicy(like.dtype)], {})

    def _where(self, node: ast.Call, args: list, kwargs: dict) -> GTensor:
        """tile.where(b.mask[None, :], tile, value): the tile, with `value` where the block is padded."""
        if len(args) != 3 or kwargs:
            raise self.error(node, "tile.where(mask, tile, value) takes three arguments")
        mask, x, other = args
        if not isinstance(mask, BlockMask):
            raise self.error(node, "tile.where's mask is a block's mask (b.mask[None, :] or b.mask[:, None]); "
                                   "other masks cannot be expressed yet")
        self._block_mask(node, mask, mask.blocks, oriented=True)
        if not isinstance(x, GTensor) or not isinstance(other, (int, float)) or isinstance(other, bool):
            raise self.error(node, "tile.where(mask, tile, value) keeps the tile where the mask holds and puts "
                                   "the number `value` elsewhere")
        if x.rank != 3:
            raise self.error(node, "tile.where masks a tile of the blocks (stacked blocks [B, rows, cols])")
        b = mask.blocks
        axis = 1 if mask.along == "rows" else 2
        self.unify(node, x.dims[axis], b.step, f"the masked {mask.along} and the block step")
        with self.loc(node):
            op = ttensor.MaskBlocksOp(x.value, self.params[b.of].value, axis=_i64(axis), step=_i64(b.step),
                                      other=ir.FloatAttr.get(ir.Type.parse(x.dtype.mlir), other), result=x.value.type)
        return GTensor(op.result, x.dtype, x.dims, x.accum)

    def _stage(self, node: ast.Call, args: list, kwargs: dict):
        masked = "mask" in kwargs
        if len(args) == 1 and masked:                                  # tile.load(A[:, k:k+S], mask=k.mask)
            return self._masked_chunk(node, args[0], kwargs)
        if len(args) == 2 and isinstance(args[0], SharedBuffer):      # tile.cp_async(buf, tile)
            args[0].content = self._masked_chunk(node, args[1], kwargs) if masked else args[1]
            buffers = {id(v) for v in self.env.values() if isinstance(v, SharedBuffer)}
            self.stages = max(self.stages, len(buffers))
            return None
        if len(args) == 2 and isinstance(args[0], GTensor) and isinstance(args[1], Blocks):  # (Q, block)
            t, b = args
            if b.axis != 0 or t.rank != 2:
                raise self.error(node, "tile.cp_async(T, block) takes row blocks of a 2-D tensor")
            if masked:
                return self._load_blocks(node, t, b, kwargs["mask"], self._fill(node, kwargs))
            self._loaded(node, b, False)
            return OPS["reshape"](self, node, [t, (-1, b.step, t.dims[1])], {})
        if masked:
            self._masked_chunk(node, args[-1] if args else None, kwargs)
        raise self.error(node, "tile.cp_async(T, block) loads a tile.range block; tile.cp_async(buf, tile) "
                               "stages a tile in a shared buffer")

    def _resolve(self, v):
        return v.content if isinstance(v, SharedBuffer) else v

    def _dot(self, a, b, node):
        a, b = self._resolve(a), self._resolve(b)
        if isinstance(a, ChunkSlice) and isinstance(b, ChunkSlice):
            if not (a.axis == 1 and b.axis == 0 and a.chunk == b.chunk):
                raise self.error(node, "tile.dot of k-chunks takes A[:, k:k+S] and B[k:k+S, :]")
            product = self._dot(a.tensor, b.tensor, node)
            self._hint(product, {"KC": a.chunk.step, "stages": self.stages})
            return ChunkedProduct(product)
        if not (isinstance(a, GTensor) and isinstance(b, GTensor)):
            raise self.error(node, "tile.dot takes two tiles")
        f32 = DTypePolicy(dtypes.BY_NAME["f32"])
        return OPS["matmul"](self, node, [a, b], {"out_dtype": f32} if a.dtype.bits < 32 else {})

    def _fft(self, node: ast.Call, args: list, kwargs: dict) -> tuple:
        """numpy.fft.fft (`inverse`: ifft) along the last axis of a real tile or of a (re, im) pair of f32 or f64
        tiles, as (re, im). A power of two n ≥ 2 of static extents: the Stockham FFT's stages (ttensor.fft_stage,
        dialects/ttensor.fft_stages, as op.fft's; the inverse's last stage scaled by 1/n), O(n log n). Other n: the
        DFT as GEMMs, with the unitary C, S = cos, sin(2π·jk/n)/√n: fft = √n (C − iS), ifft = (C + iS)/√n."""
        if set(kwargs) - {"inverse"} or not isinstance(kwargs.get("inverse", False), bool):
            raise self.error(node, "tile.fft takes inverse=True or False and nothing else")
        parts = [self._resolve(a) for a in args]
        if not 1 <= len(parts) <= 2 or not all(isinstance(p, GTensor) for p in parts):
            raise self.error(node, "tile.fft(x) takes a tile, or the real and imaginary tiles tile.fft(re, im)")
        if any(p.dtype.name not in ("f32", "f64") for p in parts) or any(p.dims != parts[0].dims for p in parts) \
                or parts[-1].dtype != parts[0].dtype:
            raise self.error(node, "tile.fft takes f32 or f64 tiles of one shape and dtype (op.cast first)")
        n = parts[0].dims[-1]
        static = isinstance(n, int) and n >= 1 and all(isinstance(d, int) for d in parts[0].dims)
        if not isinstance(n, int) or n < 1 or (n > ttensor.TWIDDLE_MAX and (n & (n - 1) or not static)):
            raise self.error(node, f"tile.fft transforms a static last axis of at most {ttensor.TWIDDLE_MAX} "
                                   f"elements or a power of two of a tile of static extents, got {n}")
        inverse, dt = kwargs.get("inverse", False), parts[0].dtype
        element = ir.RankedTensorType(parts[0].value.type).element_type
        if n >= 2 and not n & (n - 1) and static:
            dims = list(parts[0].dims)
            with self.loc(node):
                # the parts of an earlier transform's pairs [..., n, 1, 2]: read those (no part kernels)
                src = [ttensor.part_source(p.value) for p in parts]
                both = len(src) == 2 and src[0] and src[1] and src[0][0] == src[1][0]
                if both and (src[0][1], src[1][1]) == ("re", "im") and \
                        ttensor.shape_of(ir.RankedTensorType(src[0][0].type)) == dims + [1, 2]:
                    value, imag, layout = src[0][0], None, "pairs"
                else:
                    cols = [ttensor.ReshapeOp(p.value, result=ir.RankedTensorType.get(dims + [1], element)).result
                            for p in parts]
                    value, imag, layout = cols[0], cols[1] if len(cols) > 1 else None, "parts"
                pairs = ttensor.fft_stages(value, imag, layout, dims + [1], element, inverse, 1 / n if inverse else 1.0)
                out = tuple(GTensor(ttensor.ReshapeOp(ttensor.PartOp(
                    pairs, part=ir.StringAttr.get(p), result=ir.RankedTensorType.get(dims + [1], element)).result,
                    result=ir.RankedTensorType.get(dims, element)).result, dt, dims) for p in ("re", "im"))
            return out
        with self.loc(node):
            c, s = (GTensor(ttensor.TwiddleOp(part=ir.StringAttr.get(part), result=ir.RankedTensorType.get(
                [n, n], element)).result, dt, [n, n]) for part in ("cos", "sin"))
        mul = lambda x, w: OPS["matmul"](self, node, [x, w], {})   # noqa: E731   (C, S symmetric)
        if len(parts) == 1:
            re, im = mul(parts[0], c), mul(parts[0], s)
            im = im if inverse else self.binop(ast.Mult(), im, -1.0, node)
        else:
            (xr, xi), add, sub = parts, ast.Add(), ast.Sub()
            re = self.binop(sub if inverse else add, mul(xr, c), mul(xi, s), node)
            im = self.binop(add if inverse else sub, mul(xi, c), mul(xr, s), node)
        scale = 1 / math.sqrt(n) if inverse else math.sqrt(n)
        return tuple(self.binop(ast.Mult(), t, scale, node) for t in (re, im))

    def _hint(self, t: GTensor, hints: dict) -> None:
        """Staging choices the program made, recorded for the schedule phase."""
        op = t.value.owner
        old = {na.name: na.attr for na in ir.DictAttr(op.attributes["tessera.hints"])} \
            if "tessera.hints" in op.attributes else {}
        old.update({k: _i64(v) for k, v in hints.items() if isinstance(v, int)})
        op.attributes["tessera.hints"] = ir.DictAttr.get(old)

    def expr_IfExp(self, node: ast.IfExp):
        test = self.expr(node.test)
        if isinstance(test, GTensor):
            raise self.error(node.test, "a choice in a tile program is made at compile time")
        return self.expr(node.body if test else node.orelse)

    def expr_Attribute(self, node: ast.Attribute):
        if node.attr == "mask" and isinstance(node.value, ast.Name):
            v = self.expr(node.value)
            if isinstance(v, Blocks):
                return BlockMask(v)
            if isinstance(v, Chunk):
                return ChunkMask(v)
        if node.attr == "T":  # a tile's transpose: its last two axes (stacked blocks keep their order)
            x = self._resolve(self.expr(node.value))
            if isinstance(x, GTensor) and x.rank >= 2:
                perm = tuple(range(x.rank - 2)) + (x.rank - 1, x.rank - 2)
                return OPS["transpose"](self, node, [x], {"perm": perm})
        return super().expr_Attribute(node)

    def binop(self, op, a, b, node):
        if isinstance(b, ChunkedProduct) or isinstance(a, ChunkedProduct):
            raise self.error(node, "accumulate k-chunk products into a parameter: `C += tile.dot(…)`")
        return super().binop(op, a, b, node)


def _is_shape(node: ast.expr) -> bool:
    return (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
            and node.value.attr == "shape")


def _mask_index(node: ast.expr) -> str:
    """`[:, None]` → "(slice(None), None)": the shape of a mask's index, for matching."""
    items = node.elts if isinstance(node, ast.Tuple) else [node]
    out = []
    for i in items:
        if isinstance(i, ast.Slice) and not (i.lower or i.upper or i.step):
            out.append("slice(None)")
        elif isinstance(i, ast.Constant) and i.value is None:
            out.append("None")
        else:
            out.append("?")
    return "(" + ", ".join(out) + ")"
