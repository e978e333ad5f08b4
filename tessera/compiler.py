"""The compile driver: source → stages → `.tessera` image.

Stages run in order — ``ttir`` (the frontend's Graph/Tile IR), ``canonical``, the Graph IR phases through
``kernels``, then the target backend's own (for the CPU: ``warps``, ``llvm``, ``llir``, ``obj``, ``so``; for
PTX: ``gpu``, ``nvvm``, ``llir``, ``ptx``; for AMDGPU: ``gpu``, ``rocdl``, ``llir``, ``obj``, ``hsaco``; for SPIR-V:
``gpu``, ``spirv``, ``spv``) and finally ``image``. A compilation can stop after any stage and
hand each stage's artifact to a callback (``--dump-ir-after-all``).

Several targets (``target="cpu,ptx"``) share the stages through ``kernels``; each backend then runs its own
stages on a copy of that module, their stage names qualified by the target (``cpu.llir``, ``ptx.llir``), and
the image carries every target's code section and kernel records.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
from dataclasses import dataclass, field
from typing import Callable

from . import abi, cache, image, plan, tuning
from .selection import backends_for
from .version import __version__
from .options import DEFAULT_BUCKET_BYTES, CompileOptions, collective_chunks, format_chunks
from .diagnostics import CompileError, LoweringError
from .frontend import build_module
from .frontend.sources import keyed_source
from .passes import autodiff_attention, decompose, fold_transposes, fusion, graph_lowering, graph_phases, tod_lower
from .dialects import make_context
from .mlir import ir
from .numerics import profiles
from .passes.registry import build_pass_manager


@dataclass
class CompileResult:
    image: bytes | None
    metadata: dict = field(default_factory=dict)
    artifacts: dict = field(default_factory=dict)   # stage name -> text or bytes, for stages asked to keep


def _planning_target(backends: list):
    """What the Graph IR phases plan for: the first target, with the narrowest warp of all the targets.

    Generated kernels reduce a row with butterfly shuffles inside groups of `warp_size` lanes; a group
    narrower than the hardware's warp stays inside it (xor offsets below the width never leave an aligned
    group), a wider one would not exist. So one image's kernels serve warps of 32 and wavefronts of 64."""
    first = backends[0].target_facts()
    # A backend's own GEMM and attention kernels (the memory phase plans the GEMM's staging buffers, the
    # fusion phase groups attention chains for the other) serve a one-target image only.
    alone = len(backends) == 1
    return dataclasses.replace(first, warp_size=min(b.target_facts().warp_size for b in backends),
                               staging_buffers=first.staging_buffers if alone else None,
                               fused_attention=first.fused_attention and alone,
                               gemm_epilogue=first.gemm_epilogue if alone else frozenset(),
                               fused_attention_backward=first.fused_attention_backward if alone else frozenset(),
                               attention_delta=first.attention_delta if alone else frozenset())


def make_ttir(source: str, filename: str, metadata: dict, options: CompileOptions) -> ir.Module:
    return build_module(source, filename, list(options.kernels) or None, options.include)


def make_canonical(mod: ir.Module, metadata: dict, bucket_bytes: int = DEFAULT_BUCKET_BYTES,
                   collective_chunks: int | tuple[int, ...] = 1) -> ir.Module:
    # derivatives' bodies written first (their calls are inlined like any other's); calls between functions
    # inlined next, so that every later phase sees one body per function; cse next, so that equal
    # constructions are one value when the operator algebra's laws look for them; all_reduces bucketed last,
    # on the body every later phase keeps the order of, then those a matmul feeds marked for row chunks (a
    # bucket of one only)
    build_pass_manager("builtin.module(tessera-autodiff,tessera-inline-functions,cse,tessera-tod-canonicalize,"
                       f"canonicalize,cse,tessera-bucketize{{bucket-bytes={bucket_bytes}}},"
                       f"tessera-pipeline-collectives{{chunks={format_chunks(collective_chunks)}}})"
                       ).run(mod.operation)
    metadata["ops"] = _bytecode(mod)
    # the module's symbols, kept on it so that a compilation restarting from a later stage's dump has them
    mod.operation.attributes["tessera.symbols"] = ir.StringAttr.get(json.dumps(_symbols(mod)))
    return mod


def _symbols(mod: ir.Module) -> dict:
    """The exported functions and the imported ones (their declarations), with their signatures."""
    exports, imports = {}, {}
    for op in mod.body.operations:
        if op.operation.name != "func.func":
            continue
        name = ir.StringAttr(op.attributes["sym_name"]).value
        if "tessera.export" in op.attributes:
            exports[name] = json.loads(ir.StringAttr(op.attributes["tessera.export"]).value)
        if "tessera.import" in op.attributes:
            imports[name] = {"module": ir.StringAttr(op.attributes["tessera.import"]).value,
                             "signature": json.loads(ir.StringAttr(op.attributes["tessera.signature"]).value)}
    return {"exports": exports, "imports": imports}


def _functions(mod: ir.Module) -> list:
    return [op for op in mod.body.operations
            if op.operation.name == "func.func" and "tessera.function" in op.attributes]


def make_schedule(mod: ir.Module, metadata: dict, target, overrides: dict | None = None,
                  tuned: Callable | None = None) -> ir.Module:
    """`tuned(dims, dtype)`: the stored autotuning result for a matmul, or None (tuning.py)."""
    for fn in _functions(mod):
        tod_lower.run(fn, target.name)   # operators as GEMMs and elementwise ops, before anything plans them
        if target.scaled_fp8_gemm:   # before the rest of the quantization is spelled out
            decompose.scaled_fp8_matmuls(fn)
        decompose.attention_fp8(fn, target.fused_attention_fp8)   # before quantization: it makes quantizes
        decompose.quantization(fn)
        decompose.attention_backward(fn, target.fused_attention_backward, target.attention_kernels)
        # all of them, or those the target's kernels do not take; a fallback where fusion does not join it back
        decompose.attention(fn, fallback=not target.fused_attention,
                            keep=frozenset() if target.decompose_attention else target.attention_kernels)
        decompose.softmax_axes(fn)   # the row kernels normalize the last axis
        if target.gemm_transposes:
            fold_transposes.run(fn, target.gemm_transposes, target.fused_attention)
        if target.attention_seq_heads:
            fold_transposes.attention(fn, target.attention_seq_heads)
        graph_phases.schedule(fn, target, overrides or {}, tuned)
    # each tunable op's key for a stored autotuning result (matmuls; flash attentions the target keeps whole),
    # for autotune.search to store its result under
    metadata["matmuls"] = {ir.StringAttr(fn.attributes["sym_name"]).value:
                           [key for key in map(graph_phases.tunable_key, graph_phases.graph_ops(fn))
                            if key is not None and (target.attention_blocking or
                                                    not key[1].startswith("flash_attention"))]
                           for fn in _functions(mod)}
    return mod


def _tuned_lookup(options: CompileOptions, backends: list) -> Callable | None:
    """The schedule phase's `tuned(dims, dtype)` (make_schedule), or None where no stored result can apply.
    The group (tuning_group: its compiler hash reads and hashes every source file of the compiler, 20-40 ms)
    is made at the first lookup, and not at all while the store has no directory (no record to find)."""
    if not options.tuned or len(backends) != 1:
        return None
    grp = None

    def tuned(dims, dtype):
        nonlocal grp
        if not tuning.directory().is_dir():
            return None
        if grp is None:
            grp = tuning_group(options, backends)
        return tuning.lookup(tuning.record_key(grp, dims, dtype))
    return tuned


def tuning_group(options: CompileOptions, backends: list) -> dict | None:
    """The stored autotuning results a compile of `options` reads (tuning.py), or None: none asked for
    (`CompileOptions.tuned` off), or several targets (one schedule serves them all: the cost model's)."""
    if not options.tuned or len(backends) != 1:
        return None
    arch = options.cpu if backends[0].name == "cpu" else options.arch
    return tuning.group(backends[0].name, arch, options.numerics, backends[0].hash())


def make_vectorize(mod: ir.Module, metadata: dict, target) -> ir.Module:
    for fn in _functions(mod):
        graph_phases.vectorize(fn, target)
    return mod


def make_memory(mod: ir.Module, metadata: dict, target=None) -> ir.Module:
    for fn in _functions(mod):
        graph_phases.memory(fn, target)
    return mod


def make_fusion(mod: ir.Module, metadata: dict, target=None) -> ir.Module:
    for fn in _functions(mod):
        fusion.run(fn, fused_attention=bool(target and target.fused_attention),
                   gemm_epilogue=target.gemm_epilogue if target else frozenset())
        if target and target.attention_delta:
            autodiff_attention.join_delta(fn, target.attention_delta)
    return mod


def make_quantize(mod: ir.Module, metadata: dict, target) -> ir.Module:
    for fn in _functions(mod):
        graph_phases.quantize(fn, target)
    return mod


def make_kernels(mod: ir.Module, metadata: dict, backends: list) -> ir.Module:
    """Functions become kernels plus launch plans; from here on the module holds kernels only."""
    plans = {}
    tuned = {ir.StringAttr(fn.attributes["sym_name"]).value: ir.StringAttr(fn.attributes["tessera.tuned"]).value
             for fn in _functions(mod) if "tessera.tuned" in fn.attributes}
    # A backend's own lowerings (the CPU's tile kernels) serve only an image for that target alone.
    lowerings = backends[0].lowerings() if len(backends) == 1 else {}
    for fn in _functions(mod):
        plans[ir.StringAttr(fn.attributes["sym_name"]).value] = graph_lowering.lower_function(
            fn, mod, lowerings, "/".join(b.name for b in backends))
        fn.operation.erase()
    for op in list(mod.body.operations):   # imported functions' declarations: their calls are plan call steps
        if op.operation.name == "func.func" and "tessera.import" in op.attributes:
            op.operation.erase()
    # The dtype fallbacks a function took are part of each of its kernels' metadata (tessera-objdump shows them).
    props = metadata.setdefault("kernel_props", {})
    for p in plans.values():
        if p.fallbacks:
            for step in p.steps:
                if not isinstance(step, (plan.AliasStep, plan.CallStep, plan.CollectiveStep)):
                    props.setdefault(step.kernel, {})["fallbacks"] = "; ".join(p.fallbacks)
    # so are the stored autotuning results its schedule took (graph_phases.schedule's `tessera.tuned`)
    for name, p in plans.items():
        if name in tuned:
            for step in p.steps:
                if not isinstance(step, (plan.AliasStep, plan.CallStep, plan.CollectiveStep)):
                    props.setdefault(step.kernel, {})["autotune"] = tuned[name]
    kernels = [op for op in mod.body.operations
               if op.operation.name == "func.func" and "tessera.kernel" in op.attributes]
    signatures = [abi.to_json(abi.signature_of(k)) for k in kernels]
    # Kept on the module too, so a compilation can restart from this or any later stage's dump, after
    # lowering has turned the kernels' signatures into plain LLVM arguments.
    attrs = mod.operation.attributes
    attrs["tessera.plans"] = ir.StringAttr.get(plan.encode(plans).decode())
    attrs["tessera.signatures"] = ir.StringAttr.get(json.dumps(signatures))
    _collect(mod, metadata)
    return mod


def _collect(mod: ir.Module, metadata: dict) -> None:
    """Kernel signatures and launch plans, as the module at or after the `kernels` stage holds them."""
    attrs = mod.operation.attributes
    if "tessera.signatures" not in attrs:
        raise CompileError("this IR carries no kernel signatures: restart from a dump of the 'kernels' stage "
                           "or a later one made by tessera-cc")
    metadata["signatures"] = [abi.from_json(d) for d in json.loads(ir.StringAttr(attrs["tessera.signatures"]).value)]
    metadata["plans"] = _documents(plan.decode(ir.StringAttr(attrs["tessera.plans"]).value.encode()))
    if "tessera.symbols" in attrs:
        metadata["symbols"] = json.loads(ir.StringAttr(attrs["tessera.symbols"]).value)


def _bytecode(mod: ir.Module) -> bytes:
    """The Graph IR's bytecode, at the pinned version the image's IR version note records."""
    buf = io.BytesIO()
    mod.operation.write_bytecode(buf, desired_version=image.format.BYTECODE_VERSION)
    return buf.getvalue()


def make_image(codes: list, metadata: dict) -> bytes:
    """The image of `codes`: per backend (backend, code, that backend's metadata), its code section and a
    kernel record per kernel signature."""
    records = []
    sections = {}
    for backend, code, md in codes:
        for sig in metadata["signatures"]:
            args = []
            for a in sig.args:
                dims = [d if isinstance(d, int) else -(d[1] + 1) for d in a.dims]
                args.append(image.format.ArgRecord(a.name, a.kind, a.dtype.code, dims,
                                                   image.format.ARG_READONLY if a.readonly else 0))
            props = {"compiler": f"tessera {__version__}", "numerics": md["numerics"],
                     **({"cpu": md["cpu"]} if "cpu" in md else {}),
                     **md.get("kernel_props", {}).get(sig.name, {})}
            records.append(image.KernelRecord(
                sig.name, backend.entry_symbol(sig.name), backend.name, md["arch"], backend.code_section, args,
                warp_size=md["warp_size"], props=props, **md.get("kernel_resources", {}).get(sig.name, {})))
        if metadata["signatures"]:  # a Graph-IR-only image carries no code
            sections[backend.code_section] = code.encode() if isinstance(code, str) else code
    plans = {n: plan.Plan.from_json(d) for n, d in metadata.get("plans", {}).items()}
    if plans:
        sections[plan.SECTION] = plan.encode(plans)
    symbols = metadata.get("symbols", {})
    if symbols.get("exports") or symbols.get("imports"):
        relocations = [image.symbols.Relocation(f, i, callee) for f, i, callee in plan.calls(plans)
                       if callee in symbols["imports"]]
        sections[image.symbols.SECTION] = image.symbols.Symbols(symbols["exports"], symbols["imports"],
                                                                relocations).encode()
    return image.write_image(records, sections, ops=metadata["ops"])


# The Graph IR phases after canonicalization, in the normative order (spec/system-architecture.md §3.3);
# the backend's own stages follow ("lower to backend IR").
GRAPH_PHASES = ("schedule", "vectorize", "memory", "fusion", "quantize", "kernels")


def _backend_stages(backends: list) -> list[tuple[object, list[tuple[str, Callable]]]]:
    """Per backend, its stages in order; with several backends their names are qualified (``ptx.llir``)."""
    out = []
    for b in backends:
        stages: dict = {}
        b.add_stages(stages)
        prefix = f"{b.name}." if len(backends) > 1 else ""
        out.append((b, [(prefix + name, make) for name, make in stages.items()]))
    return out


def stage_names(options: CompileOptions | None = None) -> list[str]:
    branches = _backend_stages(backends_for(options or CompileOptions()))
    return ["ttir", "canonical", *GRAPH_PHASES, *(n for _, stages in branches for n, _ in stages), "image"]


def compile_source(source: str, filename: str = "<string>", options: CompileOptions | None = None,
                   stop_after: str | None = None,
                   on_stage: Callable[[str, object], None] | None = None) -> CompileResult:
    """Compiles `source`; raises CompileError (located at the user's source) on any mistake in it.

    A whole compilation (no `stop_after`, no `on_stage`) is served from the compile cache when it can be."""
    options = options or CompileOptions()
    _check_stage(stop_after, options)
    whole = stop_after is None and on_stage is None and cache.enabled()
    if whole:
        backends = backends_for(options)
        grp = tuning_group(options, backends)
        stored = tuning.group_digest(grp) if grp else ""
        # the stored autotuning results the schedule phase may apply: a changed one recompiles
        k = cache.key(keyed_source(source, filename, options.include), filename, options,
                      [b.hash() for b in backends] + ([f"tuned:{stored}"] if stored else []))
        hit = cache.lookup(k)
        if hit is not None:
            return CompileResult(hit, metadata_of_image(hit, cached=True))
    with make_context(), ir.Location.unknown():
        with _compile_errors(filename):
            module = make_ttir(source, filename, {}, options)
        result = compile_module(module, options, stop_after=stop_after, on_stage=on_stage, filename=filename)
    if whole:
        cache.store(k, result.image)
    return result


def metadata_of_image(data: bytes, cached: bool = False) -> dict:
    """What a compilation's metadata says that its image records too (kernel signatures, launch plans)."""
    img = image.read_image(data)
    section = img.plan
    return {"signatures": [abi.signature_of_record(k) for k in img.kernels],
            "plans": _documents(plan.decode(section)) if section is not None else {}, "cached": cached}


def _documents(plans: dict) -> dict:
    """The metadata's form of launch plans: each function's JSON document (docs/image-format.md)."""
    return {name: p.to_json() for name, p in plans.items()}


def compile_module(module: ir.Module, options: CompileOptions | None = None, metadata: dict | None = None,
                   stop_after: str | None = None, on_stage: Callable[[str, object], None] | None = None,
                   filename: str = "<module>", start_after: str = "ttir") -> CompileResult:
    """Compiles a module at the ``ttir`` stage (or, with `start_after`, the IR some later MLIR stage
    printed — `tessera-cc --from STAGE file.mlir`) through the remaining stages.

    `compile_source` ends here after its frontend; kernel generators that build their module in Python
    (backends/cpu/gemm.py) start here. Call it inside the module's context (`tessera.dialects.make_context`).
    `metadata` seeds the compilation's metadata; its ``kernel_props`` (kernel name -> {key: value}) become
    properties of those kernels in the image.
    """
    options = options or CompileOptions()
    _check_stage(stop_after, options)
    options = _profile_of(module, options, filename)
    backends = backends_for(options)
    metadata = {"warp_size": options.warp_size, "target": options.target, "numerics": options.numerics,
                **(metadata or {})}
    result = CompileResult(None, metadata)
    branches = _backend_stages(backends)
    target = _planning_target(backends)
    tuned = _tuned_lookup(options, backends)
    shared = [("canonical", lambda m, md: make_canonical(m, md, options.bucket_bytes, collective_chunks(options))),
              ("schedule", lambda m, md: make_schedule(m, md, target, dict(options.hints), tuned)),
              ("vectorize", lambda m, md: make_vectorize(m, md, target)),
              ("memory", lambda m, md: make_memory(m, md, target)),
              ("fusion", lambda m, md: make_fusion(m, md, target)),
              ("quantize", lambda m, md: make_quantize(m, md, target)),
              ("kernels", lambda m, md: make_kernels(m, md, backends))]
    shared_names = ["ttir"] + [n for n, _ in shared]
    # A backend's stages before its LLVM IR print MLIR, which a compilation of that one target can restart from.
    own = [n for n, _ in branches[0][1]] if len(branches) == 1 else []
    restartable = shared_names + own[:own.index("llir")] if "llir" in own else shared_names
    if start_after not in restartable:
        raise CompileError(f"cannot start after '{start_after}': give the IR of one of {', '.join(restartable)}")
    if start_after != "ttir":
        metadata.setdefault("ops", _bytecode(module))
        if restartable.index(start_after) >= shared_names.index("kernels"):
            _collect(module, metadata)
    _report(on_stage, result, start_after, module)
    if stop_after == start_after:
        return result
    with _compile_errors(filename):
        artifact = module
        if start_after in shared_names:
            for name, make in shared[shared_names.index(start_after):]:
                artifact = make(artifact, metadata)
                _report(on_stage, result, name, artifact)
                if stop_after == name:
                    return result
        codes = []
        for backend, stages in branches:
            md, code = (metadata, artifact) if len(branches) == 1 else _fork(metadata, backend.name, artifact)
            if start_after in own:
                stages = stages[own.index(start_after) + 1:]
            for name, make in stages:
                code = make(code, md)
                _report(on_stage, result, name, code)
                if stop_after == name:
                    return result
            codes.append((backend, code, md))
        result.image = make_image(codes, metadata)
    _report(on_stage, result, "image", result.image)
    return result


def _profile_of(module: ir.Module, options: CompileOptions, filename: str) -> CompileOptions:
    """`options` under the strictest of their numerics profile and the one the source's hints ask for (the
    module's `tessera.numerics`). Refused at the user's line: under a deterministic profile a float atomic,
    whose result depends on the order the threads happen to reach it in."""
    attrs = module.operation.attributes
    if "tessera.numerics" in attrs:
        options = dataclasses.replace(options, numerics=profiles.strictest(
            options.numerics, ir.StringAttr(attrs["tessera.numerics"]).value))
    if profiles.deterministic(options.numerics):
        found = []

        def first_float_atomic(op):
            if op.name == "ttile.atomic_rmw" and isinstance(op.results[0].type, ir.FloatType):
                found.append(op)
                return ir.WalkResult.INTERRUPT
            return ir.WalkResult.ADVANCE
        module.operation.walk(first_float_atomic)
        for op in found:
            kind = ir.StringAttr(op.attributes["kind"]).value
            raise CompileError.located(
                f"tile.atomic_{kind} on {op.results[0].type} elements is refused under the '{options.numerics}' "
                f"numerics profile: the order in which threads update a float decides the result, so it varies "
                f"from run to run (reduce with op.sum or op.max, or compile with the 'fast' profile)",
                op.location, filename)
    return options


def _fork(metadata: dict, target: str, module: ir.Module) -> tuple[dict, ir.Module]:
    """One target's own metadata (recorded under metadata["targets"]) and copy of the kernels module."""
    md = {k: v for k, v in metadata.items() if k != "targets"}
    md["kernel_props"] = {k: dict(v) for k, v in metadata.get("kernel_props", {}).items()}
    metadata.setdefault("targets", {})[target] = md
    return md, ir.Module.parse(module.operation.get_asm(enable_debug_info=True))


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
    except LoweringError as e:
        raise CompileError.from_lowering(e, filename) from None
    except RecursionError:  # Python's parser and the IR walkers recurse once per level of nesting
        raise CompileError("the program is nested too deeply to compile (split the expression)", filename, 1, 1) \
            from None


def _report(on_stage, result: CompileResult, name: str, artifact) -> None:
    if on_stage is None:
        return
    if isinstance(artifact, ir.Module):
        on_stage(name, artifact.operation.get_asm(enable_debug_info=True))
    else:
        on_stage(name, artifact)


def compile_ir_file(path: str, options: CompileOptions | None = None, start_after: str = "ttir",
                    **kwargs) -> CompileResult:
    """Continues a compilation from the IR a stage printed (an .mlir file)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    with make_context(), ir.Location.unknown():
        with _compile_errors(path):
            module = ir.Module.parse(text)
        return compile_module(module, options, filename=path, start_after=start_after, **kwargs)


def compile_file(path: str, options: CompileOptions | None = None, **kwargs) -> CompileResult:
    with open(path, encoding="utf-8") as f:
        source = f.read()
    return compile_source(source, path, options, **kwargs)
