"""A small writer of NVPTX LLVM IR text, for kernels generated whole (the tensor-core GEMM and attention).

Their hot loops are sequences of warpgroup and bulk-copy instructions that neither MLIR's NVVM dialect at our
pinned version nor LLVM intrinsics spell (wgmma with 128 accumulators, TMA with an mbarrier), so they are
written as inline PTX inside ordinary LLVM IR; everything around them (addresses, loops, the epilogue) stays
LLVM IR, which LLVM optimises and register-allocates before ptxas sees it. Same approach as Triton's NVIDIA
backend.
"""

from __future__ import annotations

TRIPLE = "nvptx64-nvidia-cuda"
DATALAYOUT = "e-p6:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64"


class Writer:
    """Appends instructions to the current block; `v(expr)` names an SSA value and returns its name."""

    def __init__(self):
        self.lines: list[str] = []
        self.current = ""     # the block being written, for phis that name their predecessors
        self._n = 0

    def fresh(self, hint: str = "v") -> str:
        self._n += 1
        return f"%{hint}{self._n}"

    def v(self, expr: str, hint: str = "v") -> str:
        name = self.fresh(hint)
        self.lines.append(f"  {name} = {expr}")
        return name

    def emit(self, line: str) -> None:
        self.lines.append(f"  {line}")

    def fresh_label(self, hint: str) -> str:
        self._n += 1
        return f"{hint}{self._n}"

    def label(self, name: str) -> None:
        self.lines.append(f"{name}:")
        self.current = name

    def br(self, target: str) -> None:
        self.emit(f"br label %{target}")

    def cbr(self, cond: str, then: str, other: str) -> None:
        self.emit(f"br i1 {cond}, label %{then}, label %{other}")

    # -- inline PTX ------------------------------------------------------------------------------------
    def asm(self, text: str, constraints: str = "", args: list[tuple[str, str]] = (), ret: str = "void",
            hint: str = "a") -> str | None:
        """Inline PTX with side effects. `args` are (type, value) pairs; returns the result name, if any."""
        operands = ", ".join(f"{t} {v}" for t, v in args)
        call = f'call {ret} asm sideeffect "{text}", "{constraints}"({operands})'
        if ret == "void":
            self.emit(call)
            return None
        return self.v(call, hint)

    def sreg(self, name: str) -> str:
        return self.v(f"call i32 @llvm.nvvm.read.ptx.sreg.{name}()", name.replace(".", "_"))


SREG_DECLS = "\n".join(f"declare i32 @llvm.nvvm.read.ptx.sreg.{r}()" for r in
                       ("tid.x", "ctaid.x", "ctaid.y", "ctaid.z", "nctaid.x", "laneid"))


def module(body: str, extra_decls: str = "") -> str:
    return "\n".join([f'target triple = "{TRIPLE}"', f'target datalayout = "{DATALAYOUT}"',
                      SREG_DECLS, extra_decls, body])
