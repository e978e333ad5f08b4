"""What the PTX GEMM kernels share (gemm_sm90.py's wgmma kernel, gemm_sm80.py's mma.sync kernel): the launch
parameters, the epilogue steps applied to the fp32 accumulator, the rounding of result pairs, and the order
in which tiles are visited."""

from __future__ import annotations

from .nvvm_text import Writer

OUT = {"bf16": "bfloat", "f16": "half", "f32": "float"}   # result and epilogue-operand dtypes, as LLVM types
# Steps with a parameter add it after C, in step order (the CPU GEMM's convention, backends/cpu/gemm.py);
# an activation `f` calls `float @tsr_act_f(float)`, which the caller links in (gemm_lowering.py).
PARAM_STEPS = {"scale": "float %alpha", "bias": "ptr addrspace(1) %bias", "add": "ptr addrspace(1) %residual",
               # a 0-d f32 tensor each: a scaled fp8 GEMM's scales (read once, in the entry block)
               "scale_by": "ptr addrspace(1) %factor", "scale_by2": "ptr addrspace(1) %factor2"}
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh")
EPILOGUE_STEPS = (*PARAM_STEPS, *ACTIVATIONS)


def check(kernel: str, spec) -> None:
    """ValueError unless `spec`'s result dtype, epilogue operands and steps are ones the kernels support."""
    if spec.out_dtype not in OUT:
        raise ValueError(f"the {kernel} GEMM writes bf16, f16 or f32, not {spec.out_dtype}")
    if spec.bias_dtype not in OUT or spec.residual_dtype not in OUT:
        raise ValueError(f"the {kernel} GEMM epilogue reads bf16, f16 or f32 operands, not "
                         f"{spec.bias_dtype}/{spec.residual_dtype}")
    with_param = [s for s in spec.epilogue if s in PARAM_STEPS]
    if len(with_param) != len(set(with_param)):
        raise ValueError(f"epilogue steps with a parameter may appear once each, got {spec.epilogue}")
    for s in spec.epilogue:
        if s not in EPILOGUE_STEPS:
            raise ValueError(f"unknown epilogue step '{s}' (steps: {', '.join(EPILOGUE_STEPS)})")


def params(spec, trans_a: bool = False) -> list[str]:
    """The launch arguments as kernel parameters: A, B, C, the epilogue's parameters in step order, then the
    dimension arguments in order of first appearance in the tensor arguments (tessera/abi.py): M, K, N, or
    K, M, N where A is stored transposed as [K, M] (`trans_a`)."""
    dims = ["i64 %K", "i64 %M"] if trans_a else ["i64 %M", "i64 %K"]
    return (["ptr addrspace(1) %A", "ptr addrspace(1) %B", "ptr addrspace(1) %C"]
            + [PARAM_STEPS[s] for s in spec.epilogue if s in PARAM_STEPS] + dims + ["i64 %N"])


def declarations(spec, activations: str) -> str:
    """`activations` (the definitions of the epilogue's activations), or their declarations when empty."""
    return activations or "\n".join(f"declare float @tsr_act_{a}(float)" for a in ACTIVATIONS if a in spec.epilogue)


def prologue(w: Writer, spec) -> None:
    """What the epilogue reads from the entry block: M·N, the residual's extent."""
    if "add" in spec.epilogue:
        w.emit("%MN = mul i64 %M, %N")
    for step, name in (("scale_by", "factor"), ("scale_by2", "factor2")):
        if step in spec.epilogue:
            w.emit(f"%{name}.v = load float, ptr addrspace(1) %{name}, align 4")


def apply(w: Writer, spec, v: str, col64: str, idx: str, k: int, alpha: str | None) -> str:
    """The epilogue steps, in order, on one fp32 value at column col64 + k (flat index idx + k)."""
    for step in spec.epilogue:
        if step == "scale":
            v = w.v(f"fmul float {v}, {alpha}")
        elif step in ("scale_by", "scale_by2"):
            v = w.v(f"fmul float {v}, %{'factor' if step == 'scale_by' else 'factor2'}.v")
        elif step in ACTIVATIONS:
            v = w.v(f"call float @tsr_act_{step}(float {v})")
        elif step in ("bias", "add"):
            ptr, i, dt = ("%bias", col64, spec.bias_dtype) if step == "bias" else \
                ("%residual", idx, spec.residual_dtype)
            i = w.v(f"add i64 {i}, {k}")
            # a masked-off lane's address may be out of range: clamp it to element 0 rather than load there
            ok = w.v(f"icmp ult i64 {i}, " + ("%N" if step == "bias" else "%MN"))
            i = w.v(f"select i1 {ok}, i64 {i}, i64 0")
            ty = OUT[dt]
            p = w.v(f"getelementptr {ty}, ptr addrspace(1) {ptr}, i64 {i}")
            x = w.v(f"load {ty}, ptr addrspace(1) {p}")
            if ty != "float":
                x = w.v(f"fpext {ty} {x} to float")
            v = w.v(f"fadd float {v}, {x}")
    return v


def pack(w: Writer, spec, a: str, b: str) -> str:
    """Two fp32 values rounded to the result dtype, as one 32-bit register."""
    ty = OUT[spec.out_dtype]
    vec = w.v(f"insertelement <2 x float> poison, float {a}, i32 0")
    vec = w.v(f"insertelement <2 x float> {vec}, float {b}, i32 1")
    return w.v(f"bitcast <2 x {ty}> {w.v(f'fptrunc <2 x float> {vec} to <2 x {ty}>')} to i32")


def extents(w: Writer, spec) -> tuple[str, str, str, str, str, str]:
    """(M, N, K as i32, the K steps of a tile, the tiles down M, the tiles across N): partial steps and tiles
    count, their missing rows and columns being zeros (TMA's fill, or the copies' predicates)."""
    m32 = w.v("trunc i64 %M to i32")
    n32 = w.v("trunc i64 %N to i32")
    k32 = w.v("trunc i64 %K to i32")
    kt_n = w.v(f"udiv i32 {w.v(f'add i32 {k32}, {spec.bk - 1}')}, {spec.bk}")
    num_m = w.v(f"udiv i32 {w.v(f'add i32 {m32}, {spec.bm - 1}')}, {spec.bm}")
    num_n = w.v(f"udiv i32 {w.v(f'add i32 {n32}, {spec.bn - 1}')}, {spec.bn}")
    return m32, n32, k32, kt_n, num_m, num_n


def tile_origin(w: Writer, spec, tile: str, dims: tuple[str, str]) -> tuple[str, str]:
    """(m0, n0) of tile number `tile`, numbered down groups of `spec.group_m` tile rows so that consecutive
    tiles share B's columns in L2."""
    num_m, num_n = dims
    gm = spec.group_m
    in_group = w.v(f"mul i32 {num_n}, {gm}")
    group = w.v(f"udiv i32 {tile}, {in_group}")
    first_m = w.v(f"mul i32 {group}, {gm}")
    left = w.v(f"sub i32 {num_m}, {first_m}")
    small = w.v(f"icmp ult i32 {left}, {gm}")
    gsz = w.v(f"select i1 {small}, i32 {left}, i32 {gm}")
    r = w.v(f"urem i32 {tile}, {in_group}")
    pm = w.v(f"add i32 {first_m}, {w.v(f'urem i32 {r}, {gsz}')}")
    pn = w.v(f"udiv i32 {r}, {gsz}")
    return w.v(f"mul i32 {pm}, {spec.bm}"), w.v(f"mul i32 {pn}, {spec.bn}")
