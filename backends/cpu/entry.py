"""The CPU entry point of a kernel, as LLVM IR text.

``void <entry>(void **args, const tsr_cpu_block_ctx_t *ctx)`` (docs/image-format.md) unpacks the launch
arguments, builds a memref descriptor per tensor from its pointer and dimension arguments, and calls the
lowered per-block function, whose signature the MLIR calling convention fixes: a scalar is one value; a
rank-r memref is (allocated ptr, aligned ptr, offset, r sizes, r strides); then the nine launch indices;
then, for a kernel lowered with bounds checks (passes/simt_to_warps.py), its report slot: ``ctx->fault``
as a ``memref<1xindex>``.
"""

from __future__ import annotations

from ...abi import DIM, SCALAR, TENSOR, Signature
from ..symbol_names import llvm_global

_LLVM_SCALAR = {"f32": "float", "f64": "double", "f16": "half", "bf16": "bfloat", "i8": "i8", "i16": "i16",
                "i32": "i32", "i64": "i64", "index": "i64", "bool": "i1"}


def entry_symbol(kernel: str) -> str:
    return f"tsr_cpu_{kernel}"


# The report slot's parameters in the MLIR calling convention: a rank-1 memref.
_REPORT_SLOT_PARAMS = 5
_CTX_FAULT_OFFSET = 40  # bytes: tsr_cpu_block_ctx_t.fault


def takes_report_slot(sig: Signature, body_params: int) -> bool:
    """Whether the lowered per-block function of `sig`, with `body_params` parameters, takes a report slot."""
    return body_params == _body_params(sig) + _REPORT_SLOT_PARAMS


def _body_params(sig: Signature) -> int:
    return sum(1 if a.kind == SCALAR else 3 + 2 * a.rank for a in sig.args if a.kind != DIM) + 9


def entry_ir(sig: Signature, body_symbol: str, report_slot: bool = False) -> str:
    lines = [f"define void @{llvm_global(entry_symbol(sig.name))}(ptr noalias nocapture readonly %args, "
             f"ptr noalias nocapture readonly %ctx) {{", "entry:"]
    slot: dict[int, str] = {}
    for i, a in enumerate(sig.args):
        lines += [f"  %slot{i}.pp = getelementptr inbounds ptr, ptr %args, i64 {i}",
                  f"  %slot{i} = load ptr, ptr %slot{i}.pp"]
        if a.kind == DIM:
            lines.append(f"  %dim{i} = load i64, ptr %slot{i}")
        slot[i] = f"%slot{i}"
    call_args: list[str] = []
    for i, a in enumerate(sig.args):
        if a.kind == SCALAR:
            if a.dtype.name == "bool":  # C's bool is a byte
                lines += [f"  %b{i} = load i8, ptr %slot{i}", f"  %v{i} = trunc i8 %b{i} to i1"]
            else:
                lines.append(f"  %v{i} = load {_LLVM_SCALAR[a.dtype.name]}, ptr %slot{i}")
            call_args.append(f"{_LLVM_SCALAR[a.dtype.name]} %v{i}")
        elif a.kind == TENSOR:
            lines.append(f"  %p{i} = load ptr, ptr %slot{i}")
            sizes = [str(d) if isinstance(d, int) else f"%dim{d[1]}" for d in a.dims]
            strides = ["1"]
            for k in range(a.rank - 1, 0, -1):
                lines.append(f"  %st{i}_{k - 1} = mul i64 {strides[0]}, {sizes[k]}")
                strides.insert(0, f"%st{i}_{k - 1}")
            call_args += [f"ptr %p{i}", f"ptr %p{i}", "i64 0"]
            call_args += [f"i64 {s}" for s in sizes] + [f"i64 {s}" for s in strides]
    for field, base in (("block_id", 6), ("block", 3), ("grid", 0)):
        for axis in range(3):
            n = f"%{field}{axis}"
            lines += [f"  {n}.p = getelementptr inbounds i32, ptr %ctx, i64 {base + axis}",
                      f"  {n}.u = load i32, ptr {n}.p", f"  {n} = zext i32 {n}.u to i64"]
            call_args.append(f"i64 {n}")
    if report_slot:
        lines += [f"  %fault.pp = getelementptr inbounds i8, ptr %ctx, i64 {_CTX_FAULT_OFFSET}",
                  "  %fault = load ptr, ptr %fault.pp"]
        call_args += ["ptr %fault", "ptr %fault", "i64 0", "i64 1", "i64 1"]
    lines += [f"  call void @{llvm_global(body_symbol)}({', '.join(call_args)})", "  ret void", "}"]
    decl = f"declare void @{llvm_global(body_symbol)}({', '.join(a.split(' ')[0] for a in call_args)})"
    return decl + "\n\n" + "\n".join(lines) + "\n"
