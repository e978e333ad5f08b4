"""The compile driver: source → stages → `.tessera` image.

Stages run in order — ``ttir`` (the frontend's Graph/Tile IR), ``canonical``, then the target backend's own
(for the CPU: ``warps``, ``llvm``, ``llir``, ``obj``, ``so``) and finally ``image``. A compilation can stop
after any stage and hand each stage's artifact to a callback (``--dump-ir-after-all``).
"""

from __future__ import annotations

import contextlib
import hashlib
from dataclasses import dataclass, field, fields
from typing import Callable

from . import __version__, abi, image, plan
from .frontend import CompileError, build_module
from .passes import fusion, graph_lowering, graph_phases
from .mlir import ir
from .passes.registry import build_pass_manager


@dataclass(frozen=True)
class CompileOptions:
    target: str = "cpu"
    kernels: tuple[str, ...] = ()   # compile only these (default: every @kernel of the file)
    cpu: str = "native"
    opt_level: int = 3
    warp_size: int = 32

    def hash(self) -> str:
        key = "_".join(f"{f.name}-{getattr(self, f.name)}" for f in fields(self))
        return hashlib.sha256(key.encode()).hexdigest()


@dataclass
class CompileResult:
    image: bytes | None
    metadata: dict = field(default_factory=dict)
    artifacts: dict = field(default_factory=dict)   # stage name -> text or bytes, for stages asked to keep


def _backend(options: CompileOptions):
    if options.target == "cpu":
        from .backends.cpu import CPUBackend
        return CPUBackend(CPUBackend.Options(cpu=options.cpu, opt_level=options.opt_level,
                                             warp_size=options.warp_size))
    raise CompileError(f"unknown target '{options.target}' (available: cpu)")


def make_ttir(source: str, filename: str, metadata: dict, options: CompileOptions) -> ir.Module:
    return build_module(source, filename, list(options.kernels) or None)


def make_canonical(mod: ir.Module, metadata: dict) -> ir.Module:
    # cse first, so that equal constructions are one value when the operator algebra's laws look for them
    build_pass_manager("builtin.module(cse,tessera-tod-canonicalize,canonicalize,cse)").run(mod.operation)
    metadata["ops"] = _bytecode(mod)
    return mod


def _functions(mod: ir.Module) -> list:
    return [op for op in mod.body.operations
            if op.operation.name == "func.func" and "tessera.function" in op.attributes]


def make_schedule(mod: ir.Module, metadata: dict, target) -> ir.Module:
    for fn in _functions(mod):
        graph_phases.schedule(fn, target)
    return mod


def make_vectorize(mod: ir.Module, metadata: dict, target) -> ir.Module:
    for fn in _functions(mod):
        graph_phases.vectorize(fn, target)
    return mod


def make_memory(mod: ir.Module, metadata: dict) -> ir.Module:
    for fn in _functions(mod):
        graph_phases.memory(fn)
    return mod


def make_fusion(mod: ir.Module, metadata: dict) -> ir.Module:
    for fn in _functions(mod):
        fusion.run(fn)
    return mod


def make_quantize(mod: ir.Module, metadata: dict, target) -> ir.Module:
    for fn in _functions(mod):
        graph_phases.quantize(fn, target)
    return mod


def make_kernels(mod: ir.Module, metadata: dict, backend) -> ir.Module:
    """Functions become kernels plus launch plans; from here on the module holds kernels only."""
    plans = {}
    for fn in _functions(mod):
        plans[ir.StringAttr(fn.attributes["sym_name"]).value] = graph_lowering.lower_function(
            fn, mod, getattr(backend, "gemm_lowering", None))
        fn.operation.erase()
    metadata["plans"] = plans
    kernels = [op for op in mod.body.operations
               if op.operation.name == "func.func" and "tessera.kernel" in op.attributes]
    metadata["signatures"] = [abi.signature_of(k) for k in kernels]
    return mod


def _bytecode(mod: ir.Module) -> bytes:
    import io
    buf = io.BytesIO()
    mod.operation.write_bytecode(buf)
    return buf.getvalue()


def make_image(code: bytes, metadata: dict, backend) -> bytes:
    records = []
    for sig in metadata["signatures"]:
        args = []
        for a in sig.args:
            dims = [d if isinstance(d, int) else -(d[1] + 1) for d in a.dims]
            args.append(image.format.ArgRecord(a.name, a.kind, a.dtype.code, dims,
                                               image.format.ARG_READONLY if a.readonly else 0))
        records.append(image.KernelRecord(
            sig.name, backend.entry_symbol(sig.name), backend.name, metadata["arch"], backend.code_section, args,
            warp_size=metadata["warp_size"],
            props={"compiler": f"tessera {__version__}", "cpu": metadata.get("cpu", ""),
                   **metadata.get("kernel_props", {}).get(sig.name, {})}))
    sections = {backend.code_section: code} if records else {}  # a Graph-IR-only image carries no code
    if metadata.get("plans"):
        sections[plan.SECTION] = plan.encode(metadata["plans"])
    return image.write_image(records, sections, ops=metadata["ops"])


# The Graph IR phases after canonicalization, in the normative order (spec/system-architecture.md §3.3);
# the backend's own stages follow ("lower to backend IR").
GRAPH_PHASES = ("schedule", "vectorize", "memory", "fusion", "quantize", "kernels")


def stage_names(options: CompileOptions | None = None) -> list[str]:
    stages: dict = {}
    _backend(options or CompileOptions()).add_stages(stages)
    return ["ttir", "canonical", *GRAPH_PHASES, *stages, "image"]


def compile_source(source: str, filename: str = "<string>", options: CompileOptions | None = None,
                   stop_after: str | None = None,
                   on_stage: Callable[[str, object], None] | None = None) -> CompileResult:
    """Compiles `source`; raises CompileError (located at the user's source) on any mistake in it."""
    options = options or CompileOptions()
    _check_stage(stop_after, options)
    from .dialects import make_context
    with make_context(), ir.Location.unknown():
        with _compile_errors(filename):
            module = make_ttir(source, filename, {}, options)
        return compile_module(module, options, stop_after=stop_after, on_stage=on_stage, filename=filename)


def compile_module(module: ir.Module, options: CompileOptions | None = None, metadata: dict | None = None,
                   stop_after: str | None = None, on_stage: Callable[[str, object], None] | None = None,
                   filename: str = "<module>") -> CompileResult:
    """Compiles a module at the ``ttir`` stage through the remaining stages.

    `compile_source` ends here after its frontend; kernel generators that build their module in Python
    (backends/cpu/gemm.py) start here. Call it inside the module's context (`tessera.dialects.make_context`).
    `metadata` seeds the compilation's metadata; its ``kernel_props`` (kernel name -> {key: value}) become
    properties of those kernels in the image.
    """
    options = options or CompileOptions()
    _check_stage(stop_after, options)
    backend = _backend(options)
    metadata = {"warp_size": options.warp_size, "target": options.target, **(metadata or {})}
    result = CompileResult(None, metadata)
    stages: dict = {}
    backend.add_stages(stages)
    target = backend.target_info()
    pipeline = [("canonical", make_canonical),
                ("schedule", lambda m, md: make_schedule(m, md, target)),
                ("vectorize", lambda m, md: make_vectorize(m, md, target)),
                ("memory", make_memory),
                ("fusion", make_fusion),
                ("quantize", lambda m, md: make_quantize(m, md, target)),
                ("kernels", lambda m, md: make_kernels(m, md, backend)),
                *stages.items(),
                ("image", lambda c, md: make_image(c, md, backend))]
    artifact = module
    _report(on_stage, result, "ttir", artifact)
    if stop_after == "ttir":
        return result
    with _compile_errors(filename):
        for name, make in pipeline:
            artifact = make(artifact, metadata)
            _report(on_stage, result, name, artifact)
            if stop_after == name:
                return result
    result.image = artifact
    return result


def _check_stage(stop_after: str | None, options: CompileOptions) -> None:
    names = stage_names(options)
    if stop_after is not None and stop_after not in names:
        raise CompileError(f"unknown stage '{stop_after}' (stages: {', '.join(names)})")


@contextlib.contextmanager
def _compile_errors(filename: str):
    """MLIR diagnostics and located lowering failures become CompileErrors at the user's source."""
    try:
        yield
    except ir.MLIRError as e:
        raise CompileError.from_mlir(e, filename) from None
    except Exception as e:  # a lowering that reports a located failure
        if hasattr(e, "location") and hasattr(e, "message"):
            raise _located(e, filename) from None
        raise


def _located(e, filename: str) -> CompileError:
    import re
    m = re.search(r'"(?P<f>[^"]*)":(?P<l>\d+):(?P<c>\d+)', str(e.location))
    if m is None:
        return CompileError(e.message, filename, 0, 0)
    return CompileError(e.message, m["f"], int(m["l"]), int(m["c"]))


def _report(on_stage, result: CompileResult, name: str, artifact) -> None:
    if on_stage is None:
        return
    if isinstance(artifact, ir.Module):
        on_stage(name, artifact.operation.get_asm(enable_debug_info=True))
    else:
        on_stage(name, artifact)


def compile_file(path: str, options: CompileOptions | None = None, **kwargs) -> CompileResult:
    with open(path, encoding="utf-8") as f:
        source = f.read()
    return compile_source(source, path, options, **kwargs)
