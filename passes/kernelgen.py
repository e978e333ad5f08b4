"""Kernels for fusion groups, written as Tessera SIMT kernel source and compiled by the kernel frontend.

Generating source rather than IR keeps each kernel readable (its plan step carries the source, and every op
is located at a line of it) and reuses one path to every target: the frontend, then each backend's SIMT
lowering. Building the IR directly was measured not to pay (docs/design.md, "Generated kernels are Tessera
source"): generating and parsing the text is 0.2 % of a CPU compile and 1.8 % of a PTX one, and a builder
would duplicate the frontend's typing rules and its SSA of variables across branches and loops. A kernel
computes in f32 (f64 for f64 data): narrower types are converted at loads and rounded at stores, the
legalization the quantization phase records.

Elementwise groups see their output as a matrix [R, C] (C the last extent): each input is a full [R, C]
tensor, a vector along the columns (a bias), a vector along the rows, or a scalar. Row groups run one warp
per row of [R, C] and reduce with butterfly shuffles; a reduction over other than trailing axes runs one
thread per kept element, looping over the reduced ones where they lie (no transposed copy first).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .. import dtypes
from ..diagnostics import LoweringError
from ..mlir import ir
from .fp8_fallback import round_source
from .fusion import is_scalar_constant
from .graph_shapes import product

# Unary functions as expressions of `x` (exact gelu through erf; tanh form as PyTorch's approximate="tanh").
UNARY = {
    "relu": "max({x}, 0.0)", "gelu": "0.5 * {x} * (1.0 + math.erf({x} * 0.7071067811865476))",
    "gelu_tanh": "0.5 * {x} * (1.0 + math.tanh(0.7978845608028654 * ({x} + 0.044715 * {x} * {x} * {x})))",
    "silu": "{x} / (1.0 + math.exp(-{x}))", "sigmoid": "1.0 / (1.0 + math.exp(-{x}))", "tanh": "math.tanh({x})",
    "exp": "math.exp({x})", "log": "math.log({x})", "sqrt": "math.sqrt({x})", "rsqrt": "math.rsqrt({x})",
    "neg": "-{x}", "abs": "abs({x})", "erf": "math.erf({x})", "square": "{x} * {x}", "reciprocal": "1.0 / {x}",
    "invert": "~{x}",
}
BINARY = {"add": "{a} + {b}", "sub": "{a} - {b}", "mul": "{a} * {b}", "div": "{a} / {b}", "max": "max({a}, {b})",
          "min": "min({a}, {b})", "pow": "{a} ** {b}", "lt": "{a} < {b}", "le": "{a} <= {b}", "gt": "{a} > {b}",
          "ge": "{a} >= {b}", "eq": "{a} == {b}", "ne": "{a} != {b}", "and": "{a} & {b}", "or": "{a} | {b}",
          "xor": "{a} ^ {b}", "shl": "{a} << ({b} & {mask})", "shr": "{a} >> ({b} & {mask})"}
# u8 values are i32s holding 0..255 in a kernel (tessera/frontend/kernel.py, U8_VALUE): the signed ops on them
# are the unsigned ones, and u8(x) wraps a result back into 0..255
INTEGERS = ("i8", "i16", "i32", "i64", "u8")
# functions whose u8 result can leave 0..255 in the i32 it is computed in, so it is wrapped: numpy's mod 256
U8_WRAPS = ("add", "sub", "mul", "neg", "square", "invert", "shl")
OWN_TYPE = (*INTEGERS, "bool")   # values a kernel keeps in their own type (a comparison's result is an i1)
LOWEST_F32 = "-3.4028234663852886e38"
LOWEST_F64 = "-1.7976931348623157e308"
XRC = "X[r, c]"
# a reduction's identity (the accumulator's start) and its combination of two partial results
REDUCE_INIT = {"sum": "0.0", "mean": "0.0", "prod": "1.0", "max": LOWEST_F32, "min": "3.4028234663852886e38"}
REDUCE_COMBINE = {"sum": "{a} + {b}", "mean": "{a} + {b}", "prod": "{a} * {b}", "max": "max({a}, {b})",
                  "min": "min({a}, {b})"}


@dataclass
class KernelSource:
    name: str
    source: str
    inputs: list            # group input values, in parameter order
    outputs: list           # group output values, in parameter order
    views: list             # per tensor parameter: "matrix" | "cols" | "rows" | "scalar" | "flat"
    block: tuple
    grid: tuple             # dims expressions in R and C ("R", "C") or plan symbols
    extra: dict = field(default_factory=dict)


def reduce_init(red: str, cdt: str) -> str:
    """The accumulator's start of reduction `red` computed in `cdt`: a bare literal is an f32 variable, so an
    f64 reduction starts from an f64 one (else it would accumulate, and compare, in f32), and an integer one
    from a literal of its type (a bare integer is an index)."""
    if cdt in INTEGERS:
        lo, hi = integer_range(cdt)
        start = {"sum": 0, "prod": 1, "max": lo, "min": hi}[red]
        return f"{cdt}({start})"
    if cdt == "f32":
        return REDUCE_INIT[red]
    return f"f64({ {'max': LOWEST_F64, 'min': LOWEST_F64[1:]}.get(red, REDUCE_INIT[red])})"


def element_dtype(v: ir.Value) -> str:
    return dtypes.of_ir_type(ir.RankedTensorType(v.type).element_type).name


def compute_dtype(dt: str) -> str:
    """The type a kernel computes values of dtype `dt` in: integers their own (wrapping in it, as numpy's
    arithmetic of the tensor's type), f64 f64, other floats f32."""
    if dt in INTEGERS:
        return dt
    return "f64" if dt == "f64" else "f32"


def storage(dt: str) -> str:
    """The element type a kernel declares a tensor of `dt` with: a bool tensor (one byte an element, 0 or 1)
    as i8, since a vector of i1 stored to memory packs eight lanes into a byte on the CPU."""
    return "i8" if dt == "bool" else dt


def accumulator_dtype(dt: str) -> str:
    """The type a reduction of `dt` accumulates in: i8, i16 and u8 in i32 (warp shuffles move 32-bit words;
    the sum, product, maximum and minimum wrapped to the tensor's type at the store are those of the type's
    own wrapping arithmetic), other types their compute type."""
    return "i32" if dt in ("i8", "i16", "u8") else compute_dtype(dt)


def integer_range(dt: str) -> tuple[int, int]:
    """The least and greatest value of integer dtype `dt`."""
    bits = int(dt[1:])
    return (0, 2 ** bits - 1) if dt.startswith("u") else (-2 ** (bits - 1), 2 ** (bits - 1) - 1)


def _literal(v: ir.Value) -> str:
    attr = v.owner.attributes["value"]
    if isinstance(attr, ir.IntegerAttr) and element_dtype(v) in INTEGERS:
        lo, hi = integer_range(element_dtype(v))
        return str((ir.IntegerAttr(attr).value - lo) % (hi - lo + 1) + lo)  # u8's bits may read back signed
    x = ir.FloatAttr(attr).value if isinstance(attr, ir.FloatAttr) else ir.IntegerAttr(attr).value
    return float_literal(x)


def saturate(x: str, dt: str) -> str:
    """Float expression `x` converted to integer type `dt`: truncated toward zero (numpy's astype),
    saturating at the type's range (u8: a negative is 0), NaN to 0, the same on every target (a bare
    conversion of a value out of range is undefined in LLVM and SPIR-V)."""
    lo, hi = integer_range(dt)
    return (f"({dt}({hi}) if {x} >= {float_literal(hi + 1.0)} else ({dt}({lo}) if {x} < {float_literal(lo)} "
            f"else ({dt}({x}) if {x} == {x} else {dt}(0))))")


def floor_divide(a: str, b: str, mod: bool, unsigned: bool = False) -> str:
    """Python's a // b or a % b of integer expressions, as numpy's: a zero divisor gives 0 for both, and the
    type's minimum // -1 wraps to itself. The kernel divides by 1 in place of 0 and -1 (dividing by 0, or
    the minimum by -1, traps on x86 and is undefined in LLVM, PTX and SPIR-V). Unsigned operands (u8, held
    non-negative) have no -1 and no floor to take: plain division, only 0 guarded."""
    if unsigned:
        d = f"({b} if {b} != 0 else 1)"
        return f"({a} % {d})" if mod else f"(0 if {b} == 0 else {a} // {d})"
    d = f"({b} if {b} != 0 and {b} != -1 else 1)"
    if mod:
        return f"({a} % {d})"
    return f"(0 if {b} == 0 else (-({a}) if {b} == -1 else {a} // {d}))"


def _view(v: ir.Value, out_dims: list, dims: dict) -> str:
    d = dims[v]
    if not d or all(x == "1" for x in d):
        return "scalar"
    if d == out_dims:
        return "matrix"
    if d == out_dims[-1:]:
        return "cols"
    if len(d) == len(out_dims) and d[-1] == "1" and d[:-1] == out_dims[:-1]:
        return "rows"
    return "general"


def _general_index(k: int, ind: list, out_dims: list, scalars: list) -> str:
    """Flat index into an input broadcast to the output, from the output's (row, col): each leading axis
    contributes ((row // row_stride) % input_extent) * input_stride, and the last col % input_extent —
    taking the input's own extent makes an axis that is 1 at run time contribute 0, as broadcasting does
    even where the program only knows a symbol."""
    ind = ["1"] * (len(out_dims) - len(ind)) + list(ind)
    terms = []
    for a in range(len(out_dims) - 1):
        if ind[a] == "1":
            continue
        names = [f"s{k}_{a}_{part}" for part in ("rs", "id", "is")]
        for n, expr in zip(names, (product(out_dims[a + 1:-1]), ind[a], product(ind[a + 1:]))):
            scalars.append((n, expr))
        terms.append(f"((row // {names[0]}) % {names[1]}) * {names[2]}")
    if ind[-1] != "1":
        if ind[-1] == out_dims[-1]:
            terms.append("col")
        else:
            scalars.append((f"s{k}_last", ind[-1]))
            terms.append(f"(col % s{k}_last)")
    return " + ".join(terms) or "0"


def _bias_dims(ops: list, dims: dict) -> dict:
    """The shapes the biases of `ops` broadcast as: added along axis a of a rank-r tensor, a bias [B] is
    [B, 1 × (r-1-a)] (numpy's right alignment would add it along the last axis)."""
    out = {}
    for op in ops:
        if op.operation.name == "ttensor.bias_add":
            rank = len(dims[op.operands[0]])
            axis = ir.IntegerAttr(op.attributes["axis"]).value % rank
            out[op.operands[1]] = [*dims[op.operands[1]], *["1"] * (rank - 1 - axis)]
    return out


# The most blocks a generated kernel's grid has along y and z: 65535, the least of every target's limits (CUDA's
# grid y and z; HIP counts its grid in work-items of 32 bits, which 65535 blocks of up to 1024 threads stay
# under; Level Zero's group counts). Blocks of rows are numbered across two or three dimensions instead of one
# (`split_grid`, `folded_block`): 65535² or 65535³ of them. A loop over blocks in each kernel (grid-stride) would
# have no limit at all, but LLVM hoists each input's address arithmetic out of it, and a fused backward
# elementwise kernel went from 94 registers a thread to 255 (its 512-thread blocks then refused at the launch).
GRID_LIMIT = 65535


def grid_dim(blocks: str) -> str:
    """A launch grid dimension for `blocks` blocks of work (an extent expression), capped at GRID_LIMIT."""
    return f"min({blocks}, {GRID_LIMIT})"


def split_grid(blocks: str, dims: int = 2) -> tuple[str, ...]:
    """`dims` (2 or 3) grid dimensions, lowest first, holding `blocks` blocks (an extent expression): each
    but the last min(…, GRID_LIMIT), the last the rest (at most GRID_LIMIT where blocks < GRID_LIMIT^dims).
    `folded_block` numbers them; the last few numbers pass `blocks`, which the kernel's guard skips."""
    out, rest = [], blocks
    for _ in range(dims - 1):
        out.append(grid_dim(rest))
        rest = f"ceil(({rest})/{GRID_LIMIT})"
    return (*out, rest)


def folded_block(*dims: int) -> str:
    """Kernel expression: this block's number in a `split_grid` laid along grid dimensions `dims`, lowest
    first."""
    expr = f"launch.block_id({dims[-1]})"
    for d in reversed(dims[:-1]):
        expr = f"{expr} * {GRID_LIMIT} + launch.block_id({d})"
        expr = f"({expr})"
    return expr


def block_loop(var: str, dim: int, blocks: str, body: list[str]) -> list[str]:
    """Kernel source running `body` (lines indented four spaces or more) for each of the `blocks` blocks of
    work (a kernel expression) along grid dimension `dim` that this block takes, as block index `var`: a
    grid-stride loop, for small kernels (a transpose's, a push's) whose three dimensions are all taken."""
    return [f"    for {var} in range(launch.block_id({dim}), {blocks}, launch.grid_dim({dim})):",
            *["    " + line for line in body]]


def _blocks_of(extent: str, size: int) -> str:
    """Kernel expression: how many blocks of `size` cover `extent` (a kernel expression)."""
    return f"({extent} + {size - 1}) // {size}" if size > 1 else extent


# Threads of an elementwise kernel's block: block_x along a row, as many rows as make this many. One row per
# block ([128, 1, 1]) made a [8192, 16384] kernel a million blocks, and on an H100 such kernels ran at the
# rate the device starts blocks (about 0.6 ns a block: 1.2 TB/s for an f32-to-bf16 gelu, 0.8 TB/s for a
# fill), far under its memory bandwidth; four rows of threads per block, each thread ELEMENTWISE_ROWS rows,
# cut the blocks sixteenfold.
ELEMENTWISE_THREADS = 512
# Rows of its column each thread of an elementwise kernel computes. One element a thread kept one load in
# flight per thread: 2048 threads × 4 bytes per H100 SM, about half the bytes in flight its memory needs
# at full bandwidth (an f32-to-bf16 gelu ran at 1.6 TB/s of ~3); four rows' loads issue back to back.
ELEMENTWISE_ROWS = 4


def elementwise(name: str, ops: list, inputs: list, outputs: list, dims: dict, block_x: int) -> KernelSource:
    out_dims = dims[outputs[0]]
    dims = {**dims, **_bias_dims(ops, dims)}
    # The group's floats compute in f64 where any value of it is f64, else in f32: taken from the first
    # output alone, a bool one (a comparison's; compute_dtype says f32) or an integer or narrower float one
    # (a cast's) made an f64 operand compute in f32 (1e100 overflowing, 1 + 1e-12 rounding to 1).
    values = [*inputs, *outputs, *(r for op in ops for r in op.results)]
    cdt = "f64" if any(element_dtype(v) == "f64" for v in values) else "f32"
    params, views, loads, scalars = [], [], [], []
    local: dict = {}
    for k, v in enumerate(inputs):
        view = _view(v, out_dims, dims)
        dt = element_dtype(v)
        vdt = dt if dt in OWN_TYPE else cdt
        shape = {"matrix": '"R", "C"', "cols": '"C"', "rows": '"R"'}.get(view, f'"S{k}"')
        params.append(f"I{k}: tensor[{storage(dt)}, {shape}]")
        index = {"matrix": "row, col", "cols": "col", "rows": "row", "scalar": "0"}.get(view)
        if index is None:
            index = _general_index(k, dims[v], out_dims, scalars)
            view = "scalar"  # passed as all its elements, indexed through the strides above
        load = f"I{k}[{index}]" if dt != "bool" else f"(I{k}[{index}] != 0)"
        loads.append(f"        a{k} = {vdt}({load})" if dt != vdt else f"        a{k} = {load}")
        local[v] = f"a{k}"
        views.append(view)
    body = []
    for n, op in enumerate(ops):
        expr = _expr(op, local, cdt, dims, scalars)
        body.append(f"        t{n} = {expr}")
        local[op.results[0]] = f"t{n}"
    stores = []
    for k, v in enumerate(outputs):
        dt = element_dtype(v)
        params.append(f"O{k}: tensor[{storage(dt)}, \"R\", \"C\"]")
        views.append("matrix")
        value = local[v] if dt in (cdt, *OWN_TYPE) else f"{dt}({local[v]})"
        if dt == "bool":
            value = f"(i8(1) if {value} else i8(0))"
        stores.append(f"        O{k}[row, col] = {value}")
    params += [f"{n}: int64" for n, _ in scalars]
    if product(out_dims[:-1]) == "1":
        return _one_row(name, params, loads + body + stores, inputs, outputs, views, scalars)
    # each thread computes ELEMENTWISE_ROWS rows of its column: every row's loads first (a load past the last
    # row reads the last row instead, a valid address), then each row's arithmetic and its guarded stores
    # (a dropout's kernel, 17 multiplies of Philox an element, is bound by its arithmetic: one row a thread)
    V = 1 if any(op.operation.name == "ttensor.dropout" for op in ops) else ELEMENTWISE_ROWS
    per_row = {f"a{k}" for k, line in enumerate(loads) if re.search(r"\brow\b", line)} | \
        {f"t{n}" for n in range(len(body))}

    def at(line: str, j: int) -> str:
        return re.sub(r"\b(row|a\d+|t\d+)\b", lambda m: f"{m[1]}_{j}" if m[1] == "row" or m[1] in per_row
                      else m[1], line)
    lines = [line for line in loads if not re.search(r"\brow\b", line)]
    lines += [f"        row_{j} = min(row0 + {j}, O0.shape[0] - 1)" for j in range(V)]
    lines += [at(line, j) for j in range(V) for line in loads if re.search(r"\brow\b", line)]
    for j in range(V):
        lines += [at(line, j) for line in body]
        if j:
            lines.append(f"        if row0 + {j} < O0.shape[0]:")
        lines += [("    " if j else "") + at(line, j) for line in stores]
    rows = max(1, ELEMENTWISE_THREADS // block_x)
    src = "\n".join([
        "import math", "", "",
        "@kernel",
        f"def {name}({', '.join(params)}):",
        "    col = launch.thread_id(0)",
        f"    row0 = ({folded_block(1, 2)} * {rows} + launch.local_id(1)) * {V}",
        "    if col < O0.shape[1] and row0 < O0.shape[0]:",
        *lines, ""])
    return KernelSource(name, src, inputs, outputs, views, block=(block_x, rows, 1),
                        grid=(f"ceil(C/{block_x})", *split_grid(f"ceil(R/{rows * V})")),
                        extra={"scalars": [e for _, e in scalars]})


def _one_row(name: str, params: list, lines: list, inputs: list, outputs: list, views: list,
             scalars: list) -> KernelSource:
    """An elementwise kernel of one row (a 1-D result): rows of threads and a thread's ELEMENTWISE_ROWS rows
    would leave 3 of 4 threads idle, so ELEMENTWISE_THREADS threads a block take one column each, written
    as a thread per element: on GPUs tessera-simt-coarsen gives each thread 16 bytes of consecutive columns
    (passes/simt_coarsen.py), and the CPU runs a warp's consecutive columns as one vector."""
    src = "\n".join([
        "import math", "", "",
        "@kernel",
        f"def {name}({', '.join(params)}):",
        "    col = launch.thread_id(0)",
        "    if col < O0.shape[1]:",
        *(re.sub(r"\brow\b", "0", line) for line in lines), ""])
    return KernelSource(name, src, inputs, outputs, views, block=(ELEMENTWISE_THREADS, 1, 1),
                        grid=(f"ceil(C/{ELEMENTWISE_THREADS})", "1", "1"),
                        extra={"scalars": [e for _, e in scalars]})


def _expr(op, local: dict, cdt: str, dims: dict, scalars: list) -> str:
    if "tessera.round_to" in op.attributes:  # an fp8 result in its f16 container (fp8_fallback.py)
        fmt = ir.StringAttr(op.attributes["tessera.round_to"]).value
        if op.operation.name == "ttensor.cast":  # from the operand's own value: one rounding, not two
            return "(" + round_source(_operand_expr(op, 0, local), fmt) + ")"
        return "(" + round_source(_value_expr(op, local, cdt, dims, scalars), fmt) + ")"
    return _value_expr(op, local, cdt, dims, scalars)


def _operand_expr(op, i: int, local: dict) -> str:
    v = op.operands[i]
    if v in local:
        return local[v]
    if is_scalar_constant(v):
        return _literal(v)
    raise LoweringError(op, "internal: an operand of a fused op is neither fused nor an input")


def _value_expr(op, local: dict, cdt: str, dims: dict, scalars: list) -> str:
    name = op.operation.name

    def operand(i: int) -> str:
        return _operand_expr(op, i, local)

    integer = element_dtype(op.results[0]) in INTEGERS
    u8 = element_dtype(op.results[0]) == "u8"
    if name == "ttensor.unary":
        fn = ir.StringAttr(op.attributes["fn"]).value
        if fn == "round":
            return round_half_even(operand(0), cdt)
        expr = "(" + ("max({x}, 0)" if integer and fn == "relu" else UNARY[fn]).format(x=operand(0)) + ")"
        return f"u8{expr}" if u8 and fn in U8_WRAPS else expr
    if name == "ttensor.binary":
        fn = ir.StringAttr(op.attributes["fn"]).value
        if fn in ("floordiv", "mod"):
            return floor_divide(operand(0), operand(1), fn == "mod", unsigned=u8)
        # a shift's count is taken modulo the width (docs/language.md): past it, LLVM, PTX and SPIR-V shifts
        # are undefined; u8 held in an i32 shifts logically right (its value is non-negative)
        mask = int(element_dtype(op.results[0])[1:]) - 1 if fn in ("shl", "shr") else 0
        expr = "(" + BINARY[fn].format(a=operand(0), b=operand(1), mask=mask) + ")"
        return f"u8{expr}" if u8 and fn in U8_WRAPS else expr
    if name == "ttensor.select":
        return f"({operand(1)} if {operand(0)} else {operand(2)})"
    if name == "ttensor.bias_add":
        return f"({operand(0)} + {operand(1)})"
    if name == "ttensor.broadcast":
        return operand(0)
    if name == "ttensor.constant":  # a constant read from storage is written by a kernel (fusion.constant_in_memory)
        return _literal(op.results[0])
    if name == "ttensor.dropout":  # the interpreter's Philox stream: counter = row-major index + offset
        p = ir.FloatAttr(op.attributes["p"]).value
        seed = ir.IntegerAttr(op.attributes["seed"]).value
        offset = ir.IntegerAttr(op.attributes["offset"]).value
        u = f"tile.philox_uniform(row * O0.shape[1] + col + {offset}, seed={seed})"
        return f"({operand(0)} / {1.0 - p!r} if {u} >= {p!r} else 0.0)"
    if name == "ttensor.mask_blocks":
        return _mask_blocks(op, operand(0), dims, scalars)
    if name == "ttensor.cast":  # round to the narrow type, keep computing in the wide one
        dt, src = element_dtype(op.results[0]), element_dtype(op.operands[0])
        if dt == "bool":  # numpy's astype(bool): nonzero (NaN included)
            return f"({operand(0)} != 0)"
        if src == "bool":  # 1 or 0 (a signed conversion of an i1 would make true -1)
            one, zero = (f"{dt}(1)", f"{dt}(0)") if integer else (f"{cdt}(1.0)", f"{cdt}(0.0)")
            return f"({one} if {operand(0)} else {zero})"
        if integer:  # integer to integer wraps (as numpy's astype), a float saturates (saturate())
            return saturate(operand(0), dt) if src not in INTEGERS else f"{dt}({operand(0)})" if dt != src \
                else operand(0)
        if src in INTEGERS:  # one rounding of the integer to the compute type, then to the narrow one
            return f"{cdt}({dt}({cdt}({operand(0)})))" if dt != cdt else f"{cdt}({operand(0)})"
        return f"{cdt}({dt}({operand(0)}))" if dt != cdt else operand(0)
    raise LoweringError(op, f"'{name}' cannot be fused into a CPU elementwise kernel yet")


def round_half_even(x: str, cdt: str) -> str:
    """numpy's round of float expression `x` computed in `cdt`: on |x|, its floor f and the fraction |x| - f
    (exact below 2^mantissa, where every value is an integer already and is kept), one up past a half or at
    a half from an odd f; the sign put back. (floor(x + 0.5) would be wrong: x + 0.5 itself rounds.)"""
    a, big = f"abs({x})", "4503599627370496.0" if cdt == "f64" else "8388608.0"
    f = f"math.floor({a})"
    up = f"({a} - {f} > 0.5 or ({a} - {f} == 0.5 and {f} - 2.0 * math.floor({f} * 0.5) == 1.0))"
    r = f"({f} + 1.0 if {up} else {f})"
    return f"({x} if {a} >= {big} else ({r} if {x} >= 0.0 else -{r}))"


def float_literal(x: float) -> str:
    """`x` as kernel source (infinities and NaN through math.inf and math.nan)."""
    if x != x:
        return "math.nan"
    if x in (float("inf"), float("-inf")):
        return "math.inf" if x > 0 else "(-math.inf)"
    return repr(float(x))


def _mask_blocks(op, x: str, dims: dict, scalars: list) -> str:
    """`x` where element (row, col) of the [R, C] view lies in a row of the bounds, else `other`: its block
    is axis 0, its row in the block the index along `axis` (row-major over the stacked extents)."""
    d = dims[op.results[0]]
    axis = ir.IntegerAttr(op.attributes["axis"]).value
    step = ir.IntegerAttr(op.attributes["step"]).value
    k = len(scalars)
    scalars.append((f"m{k}_rows", dims[op.operands[1]][0]))
    if axis == len(d) - 1:
        inner = "col"
    else:
        scalars.append((f"m{k}_in", product(d[axis + 1:-1])))
        inner = f"((row // m{k}_in) % {step})"
    scalars.append((f"m{k}_blk", product(d[1:-1])))
    other = float_literal(ir.FloatAttr(op.attributes["other"]).value)
    return f"({x} if (row // m{k}_blk) * {step} + {inner} < m{k}_rows else {other})"


def blocks(name: str, op, dims: dict, block_x: int) -> tuple[str, dict]:
    """A masked tile load (`ttensor.load_blocks`: rows past the input become `other`) or store
    (`ttensor.store_blocks`: only the destination's rows are written) as a kernel over the output's
    [rows, D] view, and its plan step's argument shapes."""
    x, y = op.operands[0], op.results[0]
    dt = element_dtype(x)
    load = op.operation.name == "ttensor.load_blocks"
    lines = ["import math", "", "", "@kernel",
             f"def {name}(X: tensor[{dt}, \"XR\", \"D\"], Y: tensor[{dt}, \"YR\", \"D\"]):",
             "    col = launch.thread_id(0)", f"    row = {folded_block(1, 2)}",
             "    if col < Y.shape[1] and row < Y.shape[0]:"]
    if load:
        other = float_literal(ir.FloatAttr(op.attributes["other"]).value)
        lines += ["        if row < X.shape[0]:", "            Y[row, col] = X[row, col]", "        else:",
                  f"            Y[row, col] = {other if dt in ('f32', 'f64') else f'{dt}({other})'}", ""]
    else:
        lines += ["        Y[row, col] = X[row, col]", ""]
    xd, yd = dims[x], dims[y]
    env = {"XR": product(xd[:-1]) if not load else xd[0], "YR": product(yd[:-1]) if load else yd[0],
           "D": product(xd[1:] if load else xd[2:])}
    step = {"env": env, "block": [block_x, 1, 1], "grid": [f"ceil(D/{block_x})", *split_grid("YR")],
            "args": [{"value": x, "shape": ["XR", "D"]}, {"value": y, "shape": ["YR", "D"]}]}
    return "\n".join(lines), step


def _butterfly(var: str, combine: str, warp: int) -> list[str]:
    lines, m = [], warp // 2
    while m >= 1:
        lines.append(f"        {var} = {combine.format(a=var, b=f'tile.warp_shuffle_xor({var}, {m})')}")
        m //= 2
    return lines


def _row_loop(body: list[str]) -> list[str]:
    return ["        for c0 in range(0, n, W):", "            c = c0 + lane", "            if c < n:",
            *["                " + b for b in body]]


def _dropout_of(op, value: str) -> str:
    """`value` masked and scaled by dropout op `op`, element (r, c) of the row view: the interpreter's
    Philox stream, counter = row-major index + offset."""
    p = ir.FloatAttr(op.attributes["p"]).value
    seed = ir.IntegerAttr(op.attributes["seed"]).value
    offset = ir.IntegerAttr(op.attributes["offset"]).value
    u = f"tile.philox_uniform(r * n + c + {offset}, seed={seed})"
    return f"({value} / {1.0 - p!r} if {u} >= {p!r} else 0.0)"


# A row of static length C (a multiple of the warp, at most REGISTER_ROW elements a lane) is read from memory
# once into registers, the statistics come from the registers (layernorm's variance a second pass over them,
# not E[x²] - mean²), and the result is stored once. Lane l holds chunks of E consecutive columns, E the
# elements of 16 bytes of the narrower of input and output (8 for bf16, 4 for f32): columns l·E + e + j·W·E
# (e < E, j < C / (W·E)); the loads of a chunk, and its stores (computed first, then stored one after another),
# are consecutive elements, which tessera-simt-vector-access (passes/simt_vector_access.py) makes one 16-byte
# access on the GPUs. Where C is not a multiple of W·E, E is 1 (lane l holds l + i·W). The generic kernel
# reads the row two or three times in loops of unknown trip count, a 2-byte load in flight per lane.
REGISTER_ROW = 128
# The targets whose row kernels take that form: on the CPU (a warp is one vector) the generic kernel's loops
# ran faster (a 2048 × 2048 f32 layernorm: 1.2 ms against 3.3 ms with lane l holding l + i·W, 6.1 ms with
# chunks of E; 2-core Zen 5, loaded); an image for several targets shares one source, so takes the generic.
REGISTER_TARGETS = frozenset({"ptx"})


def _register_row(kind: str, cols: str, warp: int, cdt: str, causal: bool) -> int:
    """Elements a lane holds of a row of `cols` columns in the register kernel, or 0 where it does not apply."""
    if kind not in ("ttensor.layernorm", "ttensor.rmsnorm", "ttensor.softmax", "ttensor.log_softmax") or \
            causal or cdt != "f32" or not cols.isdigit():
        return 0
    c = int(cols)
    return c // warp if c and c % warp == 0 and c // warp <= REGISTER_ROW else 0


def _chunk(k: int, warp: int, *dts: str) -> int:
    """E: consecutive columns a lane holds (16 bytes of the narrowest of `dts`), 1 where k is not a multiple."""
    e = 16 // min(dtypes.lookup(d).nbytes for d in dts)
    return e if k % e == 0 else 1


def _tree(terms: list[str], combine: str) -> str:
    """`terms` combined pairwise (a tree: log depth, and sums rounded as pairwise summation's)."""
    while len(terms) > 1:
        terms = [combine.format(a=terms[i], b=terms[i + 1]) if i + 1 < len(terms) else terms[i]
                 for i in range(0, len(terms), 2)]
    return terms[0]


def _register_lines(kind: str, k: int, e: int, warp: int, ld, st, scale_shift: list, eps: str,
                    drop) -> list[str]:
    """The register kernel's body (inside `if r < R`, at 12 spaces: under `if n == C`); x{i} is column
    lane·E + i % E + (i // E)·W·E."""
    at = [f"le + {i % e + (i // e) * warp * e}" if i else "le" for i in range(k)]
    lines = [f"le = lane * {e}" if e > 1 else "le = lane", *[f"x{i} = {ld(f'X[r, {at[i]}]')}" for i in range(k)]]

    def stores(value) -> list[str]:
        """Y's columns chunk by chunk: a chunk's E values computed, then stored one after another."""
        out = []
        for j in range(0, k, e):
            for i in range(j, j + e):
                out += [f"c = {at[i]}", f"y{i - j} = {st(value(i))}"]
            out += [f"Y[r, {at[i]}] = y{i - j}" for i in range(j, j + e)]
        return out

    if kind in ("ttensor.layernorm", "ttensor.rmsnorm"):
        if kind == "ttensor.layernorm":
            lines += [f"s = {_tree([f'x{i}' for i in range(k)], '({a} + {b})')}",
                      *[b.strip() for b in _butterfly("s", "{a} + {b}", warp)], "mean = s / n",
                      *[f"x{i} = x{i} - mean" for i in range(k)]]
        lines += [f"q = {_tree([f'x{i} * x{i}' for i in range(k)], '({a} + {b})')}",
                  *[b.strip() for b in _butterfly("q", "{a} + {b}", warp)], f"rstd = math.rsqrt(q / n + {eps})"]

        def normed(i: int) -> str:
            y = f"x{i} * rstd"
            for role, dt in scale_shift:
                p = f"{role}[c]" if dt == "f32" else f"f32({role}[c])"
                y = f"({y}) * {p}" if role == "G" else f"({y}) + {p}"
            return y
        lines += stores(normed)
    else:
        lines += [f"m = {_tree([f'x{i}' for i in range(k)], 'max({a}, {b})')}",
                  *[b.strip() for b in _butterfly("m", "max({a}, {b})", warp)]]
        if kind == "ttensor.log_softmax":
            lines += [f"s = {_tree([f'math.exp(x{i} - m)' for i in range(k)], '({a} + {b})')}",
                      *[b.strip() for b in _butterfly("s", "{a} + {b}", warp)], "lse = m + math.log(s)",
                      *stores(lambda i: f"x{i} - lse")]
        else:
            lines += [*[f"x{i} = math.exp(x{i} - m)" for i in range(k)],
                      f"s = {_tree([f'x{i}' for i in range(k)], '({a} + {b})')}",
                      *[b.strip() for b in _butterfly("s", "{a} + {b}", warp)], "inv = 1.0 / s",
                      *stores(lambda i: drop(f"x{i} * inv"))]
    return ["            " + b for b in lines]


def row(name: str, op, dims: dict, warp: int, rows_per_block: int, epilogue: list = (),
        registers: bool = False) -> KernelSource:
    """One warp per row of the input seen as [R, C] (C = the normalized or reduced trailing extents); with
    `registers` (the image's targets are REGISTER_TARGETS), rows of a static length that fits are held in
    registers (`_register_row`)."""
    kind = op.operation.name
    x = op.operands[0]
    xd = dims[x]
    dt_in, dt_out = element_dtype(x), element_dtype(op.results[0])
    cdt = accumulator_dtype(dt_in)
    ld = (lambda e: f"{cdt}({e})") if dt_in != cdt else (lambda e: e)
    st = (lambda e: f"{dt_out}({e})") if dt_out != cdt else (lambda e: e)
    params = [f"X: tensor[{dt_in}, \"R\", \"C\"]"]
    views = ["matrix"]
    inputs = [x]
    head = [f"    W = {warp}", "    lane = launch.local_id(0)"]
    each = [f"    r = {folded_block(0, 1, 2)} * {rows_per_block} + launch.local_id(1)", "    if r < X.shape[0]:",
            "        n = X.shape[1]"]
    lines: list[str] = []
    fast_scale_shift, fast_eps, fast_drop = [], "", (lambda value: value)
    if kind in ("ttensor.softmax", "ttensor.log_softmax"):   # along the last axis (decompose.softmax_axes)
        params.append(f"Y: tensor[{dt_out}, \"R\", \"C\"]")
        views.append("matrix")

        def drop(value: str) -> str:
            for e in epilogue:
                value = _dropout_of(e, value)
            return value

        extra, causal = {}, "tessera.causal" in op.attributes
        seen = (lambda body: [body]) if not causal else (lambda body: ["if c <= lim:", f"    {body}"])
        if causal:
            # scores of queries × keys: query r % SQ sees keys 0..r % SQ (top-left aligned); the rest is 0
            params.append("SQ: int64")
            extra = {"scalars": [ir.StringAttr(op.attributes["tessera.causal"]).value]}
            each.append("        lim = r % SQ")
        # a bare literal is an f32 variable: an f64 row keeps its maximum and sum in f64
        lowest, zero = (LOWEST_F32, "0.0") if cdt == "f32" else (f"f64({LOWEST_F64})", "f64(0.0)")
        lines += [f"        m = {lowest}", *_row_loop(seen(f"m = max(m, {ld(XRC)})")),
                  *_butterfly("m", "max({a}, {b})", warp),
                  f"        s = {zero}", *_row_loop(seen(f"s += math.exp({ld(XRC)} - m)")),
                  *_butterfly("s", "{a} + {b}", warp)]
        if kind == "ttensor.log_softmax":
            # x - (m + log s): the row's log-sum-exp shifted by its maximum, so exp never overflows and the
            # largest element adds exp(0) = 1 (s >= 1, its log finite); no exp of the result, no division
            lines += ["        lse = m + math.log(s)", *_row_loop([f"Y[r, c] = {st(f'{ld(XRC)} - lse')}"])]
        else:
            y = st(drop(f"math.exp({ld(XRC)} - m) * inv")) + (" if c <= lim else 0.0" if causal else "")
            lines += ["        inv = 1.0 / s", *_row_loop([f"Y[r, c] = {y}"])]
        outputs = [(epilogue[-1] if epilogue else op).results[0]]
        fast_drop = drop
    elif kind in ("ttensor.layernorm", "ttensor.rmsnorm"):
        extra = {}
        eps = float_literal(ir.FloatAttr(op.attributes["eps"]).value)
        sizes = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
        scale_shift = []
        pos = 1
        for role, count in zip(("G", "B"), sizes[1:]):
            if count:
                v = op.operands[pos]
                params.append(f"{role}: tensor[{element_dtype(v)}, \"C\"]")
                views.append("cols")
                inputs.append(v)
                scale_shift.append((role, element_dtype(v)))
                pos += 1
        params.append(f"Y: tensor[{dt_out}, \"R\", \"C\"]")
        views.append("matrix")
        y = "(v - mean) * rstd" if kind == "ttensor.layernorm" else "v * rstd"
        for role, dt in scale_shift:
            p = f"{role}[c]" if dt == cdt else f"{cdt}({role}[c])"
            y = f"({y}) * {p}" if role == "G" else f"({y}) + {p}"
        zero = "0.0" if cdt == "f32" else "f64(0.0)"   # a bare literal is an f32 variable (see softmax)
        if kind == "ttensor.layernorm":
            lines += [f"        s = {zero}", *_row_loop([f"s += {ld(XRC)}"]), *_butterfly("s", "{a} + {b}", warp),
                      "        mean = s / n", f"        q = {zero}",
                      *_row_loop([f"d = {ld(XRC)} - mean", "q += d * d"]), *_butterfly("q", "{a} + {b}", warp),
                      f"        rstd = math.rsqrt(q / n + {eps})"]
        else:
            lines += [f"        q = {zero}", *_row_loop([f"v = {ld(XRC)}", "q += v * v"]),
                      *_butterfly("q", "{a} + {b}", warp), f"        rstd = math.rsqrt(q / n + {eps})"]
        lines += _row_loop([f"v = {ld(XRC)}", f"Y[r, c] = {st(y)}"])
        outputs = [op.results[0]]
        fast_scale_shift, fast_eps = scale_shift, eps
    elif kind == "ttensor.reduce":
        extra = {}
        axes = reduced_axes(op)
        red = ir.StringAttr(op.attributes["kind"]).value
        init, comb = reduce_init(red, cdt), REDUCE_COMBINE[red]
        if axes != list(range(len(xd) - len(axes), len(xd))):
            return _strided_reduce(name, op, xd, axes, init, comb, red == "mean", (ld, st), warp * rows_per_block)
        params.append(f"Y: tensor[{dt_out}, \"R\"]")
        views.append("rows")
        result = "acc / n" if red == "mean" else "acc"
        lines += [f"        acc = {init}", *_row_loop([f"acc = {comb.format(a='acc', b=ld(XRC))}"]),
                  *_butterfly("acc", comb, warp), "        if lane == 0:", f"            Y[r] = {st(result)}"]
        outputs = [op.results[0]]
    else:
        raise LoweringError(op, f"'{kind}' has no CPU row kernel")
    k = _register_row(kind, xd[-1] if xd else "1", warp, cdt, "tessera.causal" in op.attributes) if registers else 0
    if k:   # the generic kernel stays for other lengths (the kernel is the same for any launch)
        e = _chunk(k, warp, dt_in, dt_out)
        fast = _register_lines(kind, k, e, warp, ld, st, fast_scale_shift, fast_eps, fast_drop)
        lines = [f"        if n == {k * warp}:", *fast, "        else:", *["    " + b for b in lines]]
    src = "\n".join(["import math", "", "", "@kernel", f"def {name}({', '.join(params)}):", *head,
                     *each, *lines, ""])
    return KernelSource(name, src, inputs, outputs, views, block=(warp, rows_per_block, 1),
                        grid=split_grid(f"ceil(R/{rows_per_block})", 3), extra=extra)


# A reduction over trailing axes whose rows are few and long (a loss's mean over a whole tensor: one row)
# would run one warp per row, one core of the device for all of it. Its rows split into chunks instead: a
# first kernel reduces each chunk with one warp into a partial result, a second reduces each row's partials
# and finishes (mean's division, the store's rounding). Chunks hold at least SPLIT_CHUNK elements, and rows ×
# chunks stay at most SPLIT_CHUNKS (enough warps to fill an H100's 132 SMs, or blocks for every CPU core),
# so many short rows keep one chunk each. The split depends on the extents only, never on the device, and
# every partial is combined in a fixed order (no atomics): the same inputs give the same bits everywhere.
SPLIT_CHUNK = 4096
SPLIT_CHUNKS = 8192


def split_chunks(rows: str, cols: str) -> str:
    """The extent expression of how many chunks each of `rows` rows of `cols` elements splits into (0 when
    the rows are empty: then neither kernel launches, as a one-kernel reduction of empty rows)."""
    return f"min(ceil(({cols})/{SPLIT_CHUNK}), max({SPLIT_CHUNKS} // ({rows}), 1))"


def split_reduce(name: str, op, warp: int, rows_per_block: int) -> tuple[str, str, str]:
    """The two kernels of a split reduction over trailing axes (see SPLIT_CHUNK), and the partials' dtype.
    The first, `{name}_part(X [R, C], T [R·P] flat, P)`, reduces chunk p of row r (its columns
    [p·L, min((p+1)·L, C)), L = ceil(C/P) rounded up to whole warps, so each chunk's loads stay aligned)
    into T[r·P + p] with one warp; the second, `{name}(T [R, P], Y [R], count)`, reduces each row of
    partials with one warp and divides a mean by `count`, the row's element count. Both run `rows_per_block`
    warps a block, their blocks along grid x, y and z (`split_grid`)."""
    x, y = op.operands[0], op.results[0]
    dt_in, dt_out = element_dtype(x), element_dtype(y)
    cdt = compute_dtype(dt_in)
    red = ir.StringAttr(op.attributes["kind"]).value
    init, comb = reduce_init(red, cdt), REDUCE_COMBINE[red]
    ld = (lambda e: f"{cdt}({e})") if dt_in != cdt else (lambda e: e)

    part = ["import math", "", "", "@kernel",
            f"def {name}_part(X: tensor[{dt_in}, \"R\", \"C\"], T: tensor[{cdt}, \"S\"], P: int64):",
            f"    W = {warp}", "    lane = launch.local_id(0)",
            f"    q = {folded_block(0, 1, 2)} * {rows_per_block} + launch.local_id(1)",
            "    if q < X.shape[0] * P:", "        r = q // P", "        n = X.shape[1]",
            "        L = ((n + P - 1) // P + W - 1) // W * W", "        lo = (q % P) * L", "        hi = min(lo + L, n)",
            f"        acc = {init}", "        for c0 in range(lo, hi, W):", "            c = c0 + lane",
            "            if c < hi:", f"                acc = {comb.format(a='acc', b=ld(XRC))}",
            *_butterfly("acc", comb, warp), "        if lane == 0:", "            T[q] = acc", ""]
    result = f"acc / {cdt}(count)" if red == "mean" else "acc"
    result = f"{dt_out}({result})" if dt_out != cdt else result
    finish = ["import math", "", "", "@kernel",
              f"def {name}(T: tensor[{cdt}, \"R\", \"C\"], Y: tensor[{dt_out}, \"R\"]"
              f"{', count: int64' if red == 'mean' else ''}):",
              f"    W = {warp}", "    lane = launch.local_id(0)",
              f"    r = {folded_block(0, 1, 2)} * {rows_per_block} + launch.local_id(1)",
              "    if r < T.shape[0]:", "        n = T.shape[1]", f"        acc = {init}",
              *_row_loop([f"acc = {comb.format(a='acc', b='T[r, c]')}"]), *_butterfly("acc", comb, warp),
              "        if lane == 0:", f"            Y[r] = {result}", ""]
    return "\n".join(part), "\n".join(finish), cdt


# A reduction over leading axes (a bias's gradient: [T, F] summed over T) runs one thread per kept element;
# with few of them (F = 16384 is 128 blocks of 128 threads on an H100's 132 SMs, each thread looping over
# 8192 rows) the device idles. Its outermost reduced run then splits into P chunks: a first kernel sums chunk
# p of each kept element into a partial T[p, K] (K·P threads), a second sums each column of T in order. P
# keeps chunks at least STRIDED_CHUNK rows long and K·P at most STRIDED_THREADS (two full waves of an H100's
# 132 SMs × 2048 threads, or enough for every CPU core); like SPLIT_CHUNK, extents alone decide it and the
# partials are combined in a fixed order (no atomics).
STRIDED_CHUNK = 64
STRIDED_THREADS = 1 << 19


def strided_chunks(kept: str, extent: str) -> str:
    """The extent expression of how many chunks the reduced run of `extent` splits into, for `kept` kept
    elements (at least 1: an empty run still writes the reduction's identity)."""
    return f"max(min(ceil(({extent})/{STRIDED_CHUNK}), {STRIDED_THREADS} // max({kept}, 1)), 1)"


def strided_reduce_split(name: str, op, dims: dict, block_x: int) -> tuple[KernelSource, str, str, str]:
    """The two kernels of a split reduction over not-only-trailing axes (see STRIDED_CHUNK): the first
    (`_strided_reduce(split=True)`, `{name}_part(X flat, T flat, runs..., K, P)`, launched over [R, C] =
    [K, P]: a grid's expression sees R and C in place of plan symbols of those names) and the source of the
    second, `{name}(T flat, Y flat, P[, count])`, which sums T[0..P, o] for each kept element o, divides a
    mean by its element count and rounds once at the store; with the partials' dtype and P's expression."""
    x, y = op.operands[0], op.results[0]
    xd, axes = dims[x], reduced_axes(op)
    red = ir.StringAttr(op.attributes["kind"]).value
    dt_in, dt_out = element_dtype(x), element_dtype(y)
    cdt = compute_dtype(dt_in)
    init, comb = reduce_init(red, cdt), REDUCE_COMBINE[red]
    part = _strided_reduce(name, op, xd, axes, init, comb, False, ((lambda e: f"{cdt}({e})") if dt_in != cdt
                                                                    else (lambda e: e), None), block_x, split=True)
    result = f"acc / {cdt}(count)" if red == "mean" else "acc"
    result = f"{dt_out}({result})" if dt_out != cdt else result
    finish = ["import math", "", "", "@kernel",
              f"def {name}(T: tensor[{cdt}, \"S0\"], Y: tensor[{dt_out}, \"S1\"], P: int64"
              f"{', count: int64' if red == 'mean' else ''}):",
              f"    o = {folded_block(0, 1, 2)} * {block_x} + launch.local_id(0)", "    if o < Y.shape[0]:",
              "        K = Y.shape[0]", f"        acc = {init}",
              "        for p in range(P):", f"            acc = {comb.format(a='acc', b='T[p * K + o]')}",
              f"        Y[o] = {result}", ""]
    return part, "\n".join(finish), cdt, part.extra["scalars"][-1]


def reduced_axes(op) -> list[int]:
    """A ttensor.reduce's axes, sorted, each in [0, rank)."""
    rank = ir.RankedTensorType(op.operands[0].type).rank
    return sorted(ir.IntegerAttr(a).value % rank for a in ir.ArrayAttr(op.attributes["axes"]))


def _strided_reduce(name: str, op, xd: list, axes: list, init: str, comb: str, mean: bool, conv: tuple,
                    block_x: int, split: bool = False) -> KernelSource:
    """A reduction over axes that are not all trailing (a bias's gradient sums a cotangent over its rows),
    without moving them last: one thread per kept element, looping over the reduced ones in place. Adjacent
    axes merge into runs, kept or reduced; consecutive threads take consecutive elements of the last kept
    run, so a column reduction ([R, C] over R) reads rows of X contiguously across threads (vector lanes on
    the CPU, a coalesced warp on GPUs). X and Y are passed flat, the runs' extents and strides as scalars.
    `split`: the first kernel of a split reduction instead (strided_reduce_split), `{name}_part`."""
    ld, st = conv
    x, y = op.operands[0], op.results[0]
    runs: list = []   # [reduced?, [extents]]
    for i, d in enumerate(xd):
        if runs and runs[-1][0] == (i in axes):
            runs[-1][1].append(d)
        else:
            runs.append([i in axes, [d]])
    scalars, kept, loops = [], [], []
    for k, (is_reduced, ds) in enumerate(runs):
        scalars += [(f"e{k}", product(ds)), (f"st{k}", product([d for _, rest in runs[k + 1:] for d in rest]))]
        (loops if is_reduced else kept).append(k)
    if split:   # thread (o, p): chunk p of the outermost reduced run, into T[p·K + o]
        scalars += [("K", product([d for k in kept for d in runs[k][1]])),
                    ("P", strided_chunks(product([d for k in kept for d in runs[k][1]]), product(runs[loops[0]][1])))]
        lines = ["    o = launch.thread_id(0)", f"    p = {folded_block(1, 2)}", "    if o < K and p < P:",
                 "        q = o", "        base = 0"]
    else:
        lines = [f"    o = {folded_block(0, 1, 2)} * {block_x} + launch.local_id(0)", "    if o < Y.shape[0]:",
                 "        q = o", "        base = 0"]
    for n, k in enumerate(reversed(kept)):   # the output index, last kept run fastest
        last = n == len(kept) - 1
        lines += [f"        base += {'q' if last else f'(q % e{k})'} * st{k}"] + ([] if last else [f"        q = q // e{k}"])
    lines.append(f"        acc = {init}")
    if split:
        k0 = loops[0]
        lines += [f"        L = (e{k0} + P - 1) // P", "        lo = p * L", f"        hi = min(lo + L, e{k0})"]
    indent = "        "
    for k in loops:
        lines.append(f"{indent}for i{k} in range({'lo, hi' if split and k == loops[0] else f'e{k}'}):")
        indent += "    "
    at = " + ".join(["base"] + [f"i{k} * st{k}" for k in loops])
    lines.append(f"{indent}acc = {comb.format(a='acc', b=ld(f'X[{at}]'))}")
    if split:
        cdt = compute_dtype(element_dtype(x))
        lines.append("        T[p * K + o] = acc")
        params = [f"X: tensor[{element_dtype(x)}, \"S0\"]", f"T: tensor[{cdt}, \"S1\"]",
                  *[f"{n}: int64" for n, _ in scalars]]
        src = "\n".join(["import math", "", "", "@kernel", f"def {name}_part({', '.join(params)}):",
                         *lines, ""])
        return KernelSource(f"{name}_part", src, [x], [], ["scalar", "scalar"], block=(block_x, 1, 1),
                            grid=(f"ceil(R/{block_x})", *split_grid("C")),
                            extra={"scalars": [e for _, e in scalars]})
    if mean:
        scalars.append(("count", product([d for k in loops for d in runs[k][1]])))
        lines.append(f"        acc = acc / {compute_dtype(element_dtype(x))}(count)")
    lines.append(f"        Y[o] = {st('acc')}")
    params = [f"X: tensor[{element_dtype(x)}, \"S0\"]", f"Y: tensor[{element_dtype(y)}, \"S1\"]",
              *[f"{n}: int64" for n, _ in scalars]]
    src = "\n".join(["import math", "", "", "@kernel", f"def {name}({', '.join(params)}):",
                     *lines, ""])
    return KernelSource(name, src, [x], [y], ["scalar", "scalar"], block=(block_x, 1, 1),
                        grid=split_grid(f"ceil(R/{block_x})", 3), extra={"scalars": [e for _, e in scalars]})


def transpose_runs(perm: list[int]) -> tuple[int, int, int] | None:
    """(p, m, n) where `perm` keeps its first p axes, swaps the next run of m axes with the run of n after it
    and keeps the rest ([0, 2, 1, 3], a split of heads: (1, 1, 1)); None for other permutations."""
    rank = len(perm)
    for p in range(rank):
        if perm[p] != p:
            break
    else:
        return None
    n = 1
    while p + n < rank and perm[p + n] == perm[p + n - 1] + 1:
        n += 1
    m = perm[p] - p
    if m <= 0 or perm[p + n:p + n + m] != list(range(p, p + m)) or perm[p + n + m:] != list(range(p + n + m, rank)):
        return None
    return p, m, n


def transpose(name: str, op, dims: dict) -> KernelSource:
    """A transpose that swaps two adjacent runs of axes ([B, R, C] -> [B, C, R]; [B, S, H, D] -> [B, H, S, D]).
    Where the last axes stay in place, the copy moves whole rows of them: the output seen as [R, C] (C their
    extent), each row read from the input row it comes from, threads along C so that a warp's loads and
    stores are contiguous, each thread ELEMENTWISE_ROWS rows with their loads first (as an elementwise
    kernel's). Otherwise the last two axes swap in 32 × 4 tiles."""
    x = op.operands[0]
    xd = dims[x]
    rank = len(xd)
    perm = [ir.IntegerAttr(a).value for a in ir.ArrayAttr(op.attributes["perm"])]
    runs = transpose_runs(perm)
    dt = element_dtype(x)
    if runs is not None and sum(runs) < rank:
        return _transpose_rows(name, op, xd, runs, dt)
    if rank < 2 or perm != list(range(rank - 2)) + [rank - 1, rank - 2]:
        raise LoweringError(op, f"transposes swap two adjacent runs of axes only (yet), not {perm}")
    src = "\n".join([
        "@kernel",
        f"def {name}(X: tensor[{dt}, \"B\", \"R\", \"C\"], Y: tensor[{dt}, \"B\", \"C\", \"R\"]):",
        *block_loop("b", 2, "X.shape[0]", block_loop("jb", 1, _blocks_of("X.shape[2]", 4), block_loop(
            "ib", 0, _blocks_of("X.shape[1]", 32), [
                "    i = ib * 32 + launch.local_id(0)", "    j = jb * 4 + launch.local_id(1)",
                "    if i < X.shape[1] and j < X.shape[2]:", "        Y[b, j, i] = X[b, i, j]"]))), ""])
    return KernelSource(name, src, [x], [op.results[0]], ["bmn", "bnm"], block=(32, 4, 1),
                        grid=(grid_dim("ceil(R/32)"), grid_dim("ceil(C/4)"), grid_dim("B")))


def _transpose_rows(name: str, op, xd: list, runs: tuple, dt: str) -> KernelSource:
    """transpose's copy of whole rows: with runs of extents M (`m`) and N (`n`) swapped and I the elements of
    the trailing axes kept, output row (b, c, r) of I elements is input row (b, r, c). X and Y are passed flat,
    the extents as scalars (Q = B·N). Grid dimension 2 takes q = b·N + c, dimension 1 blocks of r, dimension 0
    blocks of 128 of a row's elements (a warp's loads and stores contiguous), so a thread divides once (q
    into b and c) and steps N input rows from one of its rows to the next: a division per row (two 64-bit
    ones) made the [8192, 4096] bf16 head split of a transformer block 0.2 ms on an H200, 0.64 TB/s. Each
    thread copies V rows, their loads first, V such that it has 16 bytes in flight whatever the element size."""
    p, m, n = runs
    block_x = 128
    rows = ELEMENTWISE_THREADS // block_x
    V = max(1, 16 // dtypes.BY_NAME[dt].nbytes)
    per_block = rows * V
    body = ["    b = q // N", "    c = q - b * N"]
    body += block_loop("rb", 1, _blocks_of("M", per_block), [
        f"    r0 = (rb * {rows} + launch.local_id(1)) * {V}",
        "    if col < I and r0 < M:",
        "        src = (b * M + r0) * N + c",
        "        dst = (q * M + r0) * I + col",
        "        last = M - 1 - r0",
        *[f"        v{j} = X[(src + min({j}, last) * N) * I + col]" for j in range(V)],
        *[line for j in range(V) for line in ([f"        Y[dst + {j} * I] = v{j}"] if j == 0 else
                                              [f"        if {j} <= last:", f"            Y[dst + {j} * I] = v{j}"])]])
    src = "\n".join([
        "@kernel",
        f"def {name}(X: tensor[{storage(dt)}, \"S0\"], Y: tensor[{storage(dt)}, \"S1\"], M: int64, N: int64, "
        "I: int64, Q: int64):",
        "    col = launch.thread_id(0)",
        *block_loop("q", 2, "Q", body), ""])
    ext = {"M": product(xd[p:p + m]), "N": product(xd[p + m:p + m + n]), "I": product(xd[p + m + n:]),
           "Q": product([*xd[:p], *xd[p + m:p + m + n]])}
    return KernelSource(name, src, [op.operands[0]], [op.results[0]], ["scalar", "scalar"], block=(block_x, rows, 1),
                        # at least a block each (an empty extent launches one that copies nothing, not a grid of
                        # 0, which CUDA refuses)
                        grid=(f"max(ceil(({ext['I']})/{block_x}), 1)",
                              grid_dim(f"max(ceil(({ext['M']})/{per_block}), 1)"), grid_dim(f"max({ext['Q']}, 1)")),
                        extra={"scalars": list(ext.values())})


def push(name: str, op) -> KernelSource:
    """ttensor.push: thread c of the history [1, H] writes the value (c = 0) or the entry before it."""
    dt = element_dtype(op.results[0])
    src = "\n".join([
        "@kernel",
        f"def {name}(V: tensor[{dt}, \"S0\"], X: tensor[{dt}, \"C\"], Y: tensor[{dt}, \"R\", \"C\"]):",
        *block_loop("cb", 0, _blocks_of("Y.shape[1]", 64), [
            "    c = cb * 64 + launch.local_id(0)", "    if c < Y.shape[1]:",
            "        Y[0, c] = V[0] if c == 0 else X[max(c - 1, 0)]"]), ""])
    return KernelSource(name, src, [op.operands[0], op.operands[1]], [op.results[0]], ["scalar", "cols", "matrix"],
                        block=(64, 1, 1), grid=(grid_dim("ceil(C/64)"), "1", "1"))


def convert(name: str, src_dtype: str, dst_dtype: str) -> str:
    """Source of a kernel that rounds an [R, C] tensor to another element type."""
    return "\n".join([
        "@kernel",
        f"def {name}(I0: tensor[{src_dtype}, \"R\", \"C\"], O0: tensor[{dst_dtype}, \"R\", \"C\"]):",
        "    col = launch.thread_id(0)",
        "    row = launch.thread_id(1)",
        "    if col < O0.shape[1] and row < O0.shape[0]:",
        f"        O0[row, col] = {dst_dtype}(I0[row, col])", ""])
