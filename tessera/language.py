"""The names a kernel is written with: `kernel`, `launch`, `tile`, `tensor`, `ceil_div`.

Inside a `@kernel` function they are read by the compiler from the AST, never called. Outside, `@kernel`
makes a launchable object, and ``launch.grid(blocks=…, threads=…)(k)(*args)`` compiles it (once, cached by
source and options) and runs it through libtessera — the launch form of spec/execution-model.md §1.
"""

from __future__ import annotations

import inspect
from typing import Any


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class _TensorAnnotation:
    """``tensor[float]``, ``tensor[bf16, "M", "K"]``: a type annotation, read by the compiler."""

    def __class_getitem__(cls, item) -> Any:
        return (cls, item)


tensor = _TensorAnnotation


class _KernelOnly:
    """A namespace whose functions exist only inside a kernel (the compiler maps them to IR)."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        def inside_kernel_only(*args, **kwargs):
            raise RuntimeError(f"{self._name}.{attr}() can only be used inside a @kernel function")
        return inside_kernel_only


class Kernel:
    """A `@kernel` function: its source location, so the compiler can read it, and a launcher."""

    def __init__(self, fn):
        self.fn = fn
        self.name = fn.__name__
        self.filename = inspect.getsourcefile(fn)
        self.__doc__ = fn.__doc__
        self._module = None

    def compile(self, **options):
        """The runtime module holding this kernel, compiled for the CPU (cached)."""
        from . import runtime
        if self._module is None or options:
            from .compiler import CompileOptions, compile_source
            with open(self.filename, encoding="utf-8") as f:
                source = f.read()
            result = compile_source(source, self.filename, CompileOptions(kernels=(self.name,), **options))
            self._module = runtime.load(result.image)
        return self._module

    def __getitem__(self, launch_config):
        grid, block = launch_config
        return lambda *args: self.compile().kernel(self.name)(*args, grid=grid, block=block)

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"launch a kernel with a grid: {self.name}[grid, block](...) "
                           f"or launch.grid(blocks=..., threads=...)({self.name})(...)")


def kernel(fn):
    return Kernel(fn)


class _Launch(_KernelOnly):
    def __init__(self):
        super().__init__("launch")

    @staticmethod
    def grid(blocks, threads):
        def bind(k: Kernel):
            if not isinstance(k, Kernel):
                raise TypeError("launch.grid(...) takes a @kernel function")
            return k[blocks, threads]
        return bind


launch = _Launch()
tile = _KernelOnly("tile")
