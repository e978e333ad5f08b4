"""Compile options: frozen dataclasses with a stable hash (part of the compile cache's key).

`CompileOptions` are the user's; each backend derives its own `Options` from them (backends/contract.py),
hashed the same way through `HashedOptions`."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field, fields

from .numerics import profiles


class HashedOptions:
    """A frozen dataclass's stable hash: every field's name and value, in declaration order."""

    def hash(self) -> str:
        key = "_".join(f"{f.name}-{getattr(self, f.name)}" for f in fields(self))
        return hashlib.sha256(key.encode()).hexdigest()


# Schedule hints (`@function(tile=, stages=, vector=)`, `CompileOptions.hints`) and their ranges: beyond
# them a hint only buys compile time and memory (each stage is unrolled; a tile is a buffer).
# PyTorch DDP's bucket_cap_mb: gradients are all-reduced in buckets of this many bytes unless told otherwise
DEFAULT_BUCKET_BYTES = 25 * 2**20
HINT_LIMITS = {"MB": 4096, "NC": 4096, "MC": 4096, "KC": 4096, "stages": 16, "vector": 64}
# tensor parallelism: the row chunks a matmul feeding an all_reduce runs in, by target (passes/
# pipeline_collectives.py); a GPU's all_reduce runs on a communication stream beside the next chunk's GEMM,
# a CPU's on the threads the GEMM uses (nothing would overlap): 1, the matmul whole
DEFAULT_COLLECTIVE_CHUNKS = {"ptx": 4, "amdgpu": 4}
# CompileOptions.input_precision's values (and `@function(input_precision=)`'s)
INPUT_PRECISIONS = ("ieee", "tf32")


def debug_from_env() -> bool:
    """Whether TESSERA_DEBUG asks for debug mode: any value but "" and "0", as the runtime reads it."""
    return os.environ.get("TESSERA_DEBUG", "") not in ("", "0")


@dataclass(frozen=True)
class CompileOptions(HashedOptions):
    target: str = "cpu"
    kernels: tuple[str, ...] = ()   # compile only these (default: every @kernel and @function of the file)
    include: tuple[str, ...] = ()   # directories imported modules are found in, after the importing file's own
    cpu: str = "native"
    arch: str = ""                  # GPU architectures, comma-separated, each for the target its prefix
                                    # names: sm_* for ptx (default sm_80), gfx* for amdgpu (default gfx942),
                                    # xe-* for spirv (default none: no matrix extension; xe-hpc: DPAS)
    opt_level: int = 3
    warp_size: int = 32
    # CPU: check at run time the tensor accesses the compiler cannot prove in bounds (a failing one makes the
    # launch return TSR_ERROR_MEMORY_FAULT naming kernel, tensor and line); False omits the checks.
    bounds_checks: bool = True
    # ptx, amdgpu, spirv: guard the tensor accesses the compiler cannot prove in bounds, and record the first
    # failure for the runtime (TSR_ERROR_MEMORY_FAULT naming kernel, tensor and line); debug mode
    # (TESSERA_DEBUG=1) refuses GPU code compiled without them. Default: on where TESSERA_DEBUG is set when the
    # options are made.
    gpu_bounds_checks: bool = field(default_factory=debug_from_env)
    hints: tuple[tuple[str, int], ...] = ()   # schedule hints over every function's own (autotuning)
    # matmuls no hint speaks for take the schedule autotuning stored for their key (tessera/tuning.py), if any
    tuned: bool = True
    # "fast" (default; "default" is read as "fast"), "deterministic" or "strict" (numerics/profiles.py)
    numerics: str = field(default_factory=profiles.current)
    # data parallelism: the gradient bucketizer's threshold (passes/bucketize.py, docs/language.md "Data
    # parallelism"), in bytes; op.all_reduce(bucket=) sets its own bucket's
    bucket_bytes: int = DEFAULT_BUCKET_BYTES
    # tensor parallelism: row chunks of a matmul feeding an all_reduce, each chunk's all_reduce overlapping
    # the next chunk's GEMM (passes/pipeline_collectives.py, docs/language.md "Compiled collectives");
    # 0: the target's default (DEFAULT_COLLECTIVE_CHUNKS, `collective_chunks()`), 1: whole; a tuple of
    # positive int weights asks uneven chunks, (6, 6, 3, 1): a smaller last chunk, less all_reduce exposed
    collective_chunks: int | tuple[int, ...] = 0
    # how f32 matmul operands are multiplied where the target has a choice (ptx): "ieee" (f32 products, on FMA
    # units) or "tf32" (tensor cores reading each operand's top 19 bits); Triton's input_precision. A
    # function's `@function(input_precision=)` hint overrides it; the strict profile multiplies in f32 always.
    input_precision: str = "ieee"

    def __post_init__(self):
        # Checked here, before any backend or LLVM sees them (LLVM asserts on an optimization level of 7).
        for name in ("target", "cpu", "arch", "numerics", "input_precision"):
            _expect(name, getattr(self, name), isinstance(getattr(self, name), str), "a str")
        _expect("kernels", self.kernels, isinstance(self.kernels, tuple) and
                all(isinstance(k, str) for k in self.kernels), "a tuple of kernel names")
        _expect("include", self.include, isinstance(self.include, tuple) and
                all(isinstance(k, str) for k in self.include), "a tuple of directories")
        _expect("hints", self.hints, isinstance(self.hints, tuple) and
                all(isinstance(h, tuple) and len(h) == 2 and isinstance(h[0], str) and type(h[1]) is int
                    for h in self.hints), "a tuple of (name, int) pairs")
        _expect("opt_level", self.opt_level, type(self.opt_level) is int, "an int")
        _expect("warp_size", self.warp_size, type(self.warp_size) is int, "an int")
        _expect("bounds_checks", self.bounds_checks, isinstance(self.bounds_checks, bool), "a bool")
        _expect("tuned", self.tuned, isinstance(self.tuned, bool), "a bool")
        _expect("gpu_bounds_checks", self.gpu_bounds_checks, isinstance(self.gpu_bounds_checks, bool), "a bool")
        _expect("bucket_bytes", self.bucket_bytes, type(self.bucket_bytes) is int, "an int")
        if self.bucket_bytes < 1:
            raise ValueError(f"bucket_bytes must be positive, not {self.bucket_bytes}")
        if isinstance(self.collective_chunks, list):
            object.__setattr__(self, "collective_chunks", tuple(self.collective_chunks))
        weights = self.collective_chunks
        _expect("collective_chunks", weights, type(weights) is int or isinstance(weights, tuple),
                "an int or a tuple of int weights")
        if type(weights) is int and weights < 0:
            raise ValueError(f"collective_chunks must be 0 (the target's default) or positive, not {weights}")
        if isinstance(weights, tuple) and (not weights or not all(type(w) is int and w >= 1 for w in weights)):
            raise ValueError(f"collective_chunks' weights must be a non-empty tuple of positive ints, not {weights}")
        for name, value in self.hints:
            if name not in HINT_LIMITS or not 1 <= value <= HINT_LIMITS[name]:
                raise ValueError(f"hint {name}={value} is out of range (hints: "
                                 f"{', '.join(f'{k} 1-{v}' for k, v in HINT_LIMITS.items())})")
        if self.input_precision not in INPUT_PRECISIONS:
            raise ValueError(f"input_precision must be one of {', '.join(INPUT_PRECISIONS)}, not "
                             f"{self.input_precision!r}")
        if not 0 <= self.opt_level <= 3:
            raise ValueError(f"opt_level must be 0, 1, 2 or 3, not {self.opt_level}")
        # the alias resolved here, so "default" and "fast" key the compile cache alike
        object.__setattr__(self, "numerics", profiles.canonical(self.numerics))


def parse_chunks(text: str) -> int | tuple[int, ...]:
    """collective_chunks written as text (tessera-cc --collective-chunks, the pass's `chunks` option): a count
    ("4") or uneven chunks' weights ("6:6:3:1"); ValueError where it is neither (their values are checked where
    they are used)."""
    try:
        ints = [int(p) for p in text.split(":")]
    except ValueError:
        raise ValueError(f"expected a count or weights like 6:6:3:1, not '{text}'") from None
    return ints[0] if len(ints) == 1 else tuple(ints)


def format_chunks(chunks: int | tuple[int, ...]) -> str:
    """`parse_chunks`'s text of a count or of weights."""
    return ":".join(map(str, chunks)) if isinstance(chunks, tuple) else str(chunks)


def collective_chunks(options: CompileOptions) -> int | tuple[int, ...]:
    """The chunk count (or uneven chunks' weights) `options` asks for: its own, else the target's default; a
    list of targets takes the smallest of theirs (one plan serves them all)."""
    return options.collective_chunks or min(DEFAULT_COLLECTIVE_CHUNKS.get(t.strip(), 1)
                                            for t in options.target.split(","))


def _expect(name: str, value, ok: bool, what: str) -> None:
    if not ok:
        raise TypeError(f"compile option {name} must be {what}, not {value!r}")
