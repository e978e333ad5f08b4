"""The names programs are written with: `kernel`, `launch`, `tile`, `tensor`, `ceil_div` for kernels;
`function`, `op`, `dist`, the dtypes and `accum` for operator programs.

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
        """This kernel compiled for the CPU (cached): an `executor.Program` whose `.module` is the loaded
        image."""
        if self._module is None or options:
            # lazy: the executor and the compiler load MLIR, which importing tessera must not
            from . import executor
            from .compiler import CompileOptions, compile_source
            with open(self.filename, encoding="utf-8") as f:
                source = f.read()
            result = compile_source(source, self.filename, CompileOptions(kernels=(self.name,), **options))
            self._module = executor.load(result.image)
        return self._module

    def __getitem__(self, launch_config):
        grid, block = launch_config
        program = self.compile()
        if self.name in program.functions:  # a tile program: the compiler chose its own launches
            return program.function(self.name)
        return lambda *args: program.module.kernel(self.name)(*args, grid=grid, block=block)

    def __call__(self, *args, **kwargs):
        if self.name in self.compile().functions:
            return self.compile().function(self.name)(*args)
        raise RuntimeError(f"launch a SIMT kernel with a grid: {self.name}[grid, block](...) "
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
op = _KernelOnly("op")


class Function:
    """A `@tessera.function`: compiled to Graph IR from its source (once), run by the reference interpreter
    when called — the oracle every backend is checked against."""

    def __init__(self, fn):
        self.fn = fn
        self.name = fn.__name__
        self.filename = inspect.getsourcefile(fn)
        self.__doc__ = fn.__doc__
        self._ir = None

    def ir(self):
        """The function's verified Graph IR (a ModuleIR)."""
        if self._ir is None:
            # lazy: the frontend loads MLIR, which importing tessera must not
            from .frontend.interfaces import tessera_frontend_compile
            with open(self.filename, encoding="utf-8") as f:
                source = f.read()
            # imported functions built from their sources, which the interpreter runs
            self._ir = tessera_frontend_compile(source, {"filename": self.filename, "functions": [self.name],
                                                         "define_imports": True})
        return self._ir

    def interpret(self, *args, world: int | None = None):
        module = self.ir()
        return module.interpret(self.name, *args, world=world or _mesh_size(module))

    __call__ = interpret


class Derivative(Function):
    """`tessera.grad(f)`, `value_and_grad`, `vjp`, `jvp` of a `@function`, called from Python: the derivative
    built into f's module (frontend/derivatives.py, passes/autodiff.py) and run by the interpreter. In a
    source file, `g = grad(f, argnums=…)` at the top level makes the same derivative a function named `g`
    that other functions call and images export."""

    def __init__(self, kind: str, primal: Function, argnums):
        if not isinstance(primal, Function) or isinstance(primal, Derivative):
            raise TypeError(f"{kind}() takes a @function (higher-order derivatives are not supported yet)")
        self.fn = primal.fn
        self.primal, self.kind = primal, kind
        self.argnums = None if argnums is None else (argnums,) if isinstance(argnums, int) else tuple(argnums)
        self.name = f"{kind}_of_{primal.name}"
        self.filename = primal.filename
        self.__doc__ = f"{kind} of {primal.name}"
        self._ir = None

    def ir(self):
        if self._ir is None:
            # lazy: the frontend loads MLIR, which importing tessera must not
            from .frontend.interfaces import tessera_frontend_compile
            with open(self.filename, encoding="utf-8") as f:
                source = f.read()
            self._ir = tessera_frontend_compile(source, {
                "filename": self.filename, "functions": [self.name], "define_imports": True,
                "derivatives": [(self.name, self.kind, self.primal.name, self.argnums)]})
        return self._ir


def grad(f: Function, argnums=0) -> Derivative:
    """d f / d (parameters `argnums`) of a `@function` returning one 0-d float tensor."""
    return Derivative("grad", f, argnums)


def value_and_grad(f: Function, argnums=0) -> Derivative:
    """(f(*params), *grad(f, argnums)(*params))."""
    return Derivative("value_and_grad", f, argnums)


def vjp(f: Function, argnums=None) -> Derivative:
    """(*params, *cotangents of f's results) -> (*f's results, *cotangents of params[argnums]); all by default."""
    return Derivative("vjp", f, argnums)


def jvp(f: Function, argnums=None) -> Derivative:
    """(*params, *tangents of params[argnums]) -> (*f's results, *tangents of f's results); all by default."""
    return Derivative("jvp", f, argnums)


def _mesh_size(module) -> int:
    # lazy: the frontend loads MLIR, which importing tessera must not
    from .frontend.interfaces import _walk
    from .mlir import ir
    with module.context:
        for o in _walk(module.module.operation):
            if "mesh_shape" in o.attributes:
                n = 1
                for a in ir.ArrayAttr(o.attributes["mesh_shape"]):
                    n *= ir.IntegerAttr(a).value
                return n
    return 1


def function(fn=None, **options):
    """`@function`, or `@function(export=True, tile=…)`: the options are the compiler's (read from the source:
    `export` makes the function a symbol other files import, the rest are schedule hints)."""
    if fn is None:
        return Function
    return Function(fn)


class _Dist:
    @staticmethod
    def Mesh(axes, devices, shape=None):
        # lazy: the frontend loads MLIR, which importing tessera must not
        from .frontend.function import mesh_from
        kwargs = {"axes": axes, "devices": devices}
        if shape is not None:
            kwargs["shape"] = shape

        def error(msg):
            return ValueError(msg)
        return mesh_from([], kwargs, error)

    @staticmethod
    def shard(tensor_type, mesh=None, axis=None, dim=0):
        """`X: dist.shard(tensor[f32, 256, 1024], mesh, axis="tp", dim=1)` in a @function's signature: the
        compiler reads the annotation from the source (docs/language.md, "Sharded parameters"); evaluated by
        Python, it is the tensor type."""
        return tensor_type


dist = _Dist()


class DType(str):
    """A dtype name usable in annotations (`tensor[bf16, "M"]`) and policies (`fp8_e4m3 @ accum(fp32)`)."""

    def __matmul__(self, other):
        return (self, other)


def accum(dtype: DType) -> tuple:
    return ("accum", dtype)


f32 = fp32 = float32 = DType("f32")
f16 = fp16 = float16 = DType("f16")
bf16 = bfloat16 = DType("bf16")
tf32 = DType("tf32")
f64 = fp64 = float64 = DType("f64")
fp8_e4m3 = DType("fp8_e4m3")
fp8_e5m2 = DType("fp8_e5m2")
int8 = i8 = DType("i8")
int4 = i4 = DType("i4")
int32 = i32 = DType("i32")
int64 = i64 = DType("i64")
c64 = complex64 = DType("c64")
c128 = complex128 = DType("c128")
