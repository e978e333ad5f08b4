"""What the lowering of one Graph IR function shares with the lowerings of its fusion groups
(passes/graph_lowering.py, and a backend's own: `lower(ctx, kname, ops) -> list[plan step]`): the module the
kernels go into, the function's extents, the plan's table of values, and the target's name for messages."""

from __future__ import annotations

import ast

from ..mlir import ir
from ..plan import Value
from .kernelgen import element_dtype


class LoweringContext:
    def __init__(self, module: ir.Module, dims: dict, target: str):
        self.module = module
        self.dims = dims                      # SSA value -> extent expressions (graph_shapes.infer)
        self.target = target                  # e.g. "cpu", "ptx/spirv"
        self.values: dict[str, Value] = {}    # the plan's values, by id
        self.ids: dict = {}                   # SSA value -> its value's id

    def record(self, v) -> str:
        """The plan value of SSA value `v` (the same id each time)."""
        vid = self.ids.setdefault(v, f"v{len(self.ids)}")
        self.values[vid] = Value(element_dtype(v), tuple(self.dims[v]))
        return vid

    def temporary(self, of: str, dtype: str, dims: list | None = None, tag: str = "") -> str:
        """A plan value of `dtype` with the extents of value `of` (or `dims`), for a copy of it a kernel
        needs in another form; `tag` tells apart two of one dtype."""
        tid = f"{of}_{dtype}{tag}"
        self.values[tid] = Value(dtype, self.values[of].dims if dims is None else tuple(dims))
        return tid

    def build(self, source: str, filename: str) -> None:
        """Compiles the kernels of generated Tessera source into the module, at its end."""
        from ..frontend.kernel import KernelBuilder  # lazy: only groups lowered as generated SIMT source need it
        tree = ast.parse(source, filename=filename)
        with ir.InsertionPoint(self.module.body):
            for node in tree.body:
                if isinstance(node, ast.FunctionDef):
                    KernelBuilder(node, filename).build()
