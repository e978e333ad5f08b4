"""`tessera-cc --emit-header`: a C header with a typed launch wrapper per kernel and a call wrapper per
`@function`.

The kernel wrapper takes each parameter with its C type and each dimension argument as ``int64_t``, builds the
``void* args[]`` array of docs/image-format.md and calls ``tsrLaunch``, so a C host cannot get the argument
order, count or types wrong without the C compiler saying so.

The function wrapper takes one ``const DLTensor*`` per parameter and per result, in the plan's order, builds
the arrays ``tsrFunctionCall`` takes and calls it: the count and order of tensors are what the C compiler can
check; dtypes, ranks and extents are data of the DLTensors, which tsrFunctionCall checks (naming the function
and argument), so the wrapper repeats none of it and documents each tensor's dtype and extents in a comment.

Everything from the user or the image that lands in the header is made inert C: names become identifiers
(distinct, none a C keyword or a name of the wrapper's own), the source path and the signatures are escaped
into their comments (`c_comment`), kernel and function names into string literals (`c_string`).
"""

from __future__ import annotations

import re

from . import plan as plans_
from .abi import DIM, SCALAR, Signature, signature_of_record
from .image import read_image
from .plan import Plan

# C's keywords (C11 and C++ both), and the names a wrapper itself declares: a parameter called so gets a trailing "_"
_KEYWORDS = frozenset("""auto break case char const continue default do double else enum extern float for goto if
    inline int long register restrict return short signed sizeof static struct switch typedef union unsigned void
    volatile while bool true false alignas alignof static_assert thread_local typeof NULL""".split())
_TAKEN = _KEYWORDS | {"kernel", "stream", "launch", "args"}
_TAKEN_BY_FUNCTION_WRAPPER = _KEYWORDS | {"fn", "stream", "inputs", "outputs"}


def c_identifier(name: str) -> str:
    s = re.sub(r"[^0-9A-Za-z_]", "_", name)
    s = re.sub(r"_+", "_", s).strip("_")
    return s if s and not s[0].isdigit() else f"_{s}"


def c_comment(text: str) -> str:
    """`text` as the inside of a one-line C comment: characters outside printable ASCII escaped as Python
    writes them (no newline can end the line), and no `*/` to end the comment (nor `/*` to nest one)."""
    out = "".join(c if " " <= c <= "~" else ascii(c)[1:-1] for c in text)
    return out.replace("*/", "*\\/").replace("/*", "/\\*")


def c_string(text: str) -> str:
    """`text` as a C string literal of its UTF-8 bytes: quotes, backslashes, `?` (trigraphs) and every byte
    outside printable ASCII as octal escapes."""
    out = []
    for byte in text.encode("utf-8", "surrogateescape"):
        c = chr(byte)
        out.append(c if " " <= c <= "~" and c not in '"\\?' else f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def _c_names(sig: Signature) -> list[str]:
    """The wrapper's parameter names: the arguments' as C identifiers, distinct, and none taken."""
    names: list[str] = []
    for a in sig.args:
        n = c_identifier(a.name)
        while n in _TAKEN or n in names:
            n += "_"
        names.append(n)
    return names


def _c_params(sig: Signature, names: list[str]) -> list[str]:
    out = []
    for a, n in zip(sig.args, names):
        if a.kind == SCALAR:
            out.append(f"{a.dtype.c_type} {n}")
        elif a.kind == DIM:
            out.append(f"int64_t {n}")
        else:
            const = "const " if a.readonly else ""
            out.append(f"{const}{a.dtype.c_type}* {n}")
    return out


def _describe(sig: Signature) -> str:
    parts = []
    for a in sig.params:
        if a.kind == SCALAR:
            parts.append(f"{a.name}: {a.dtype.name}")
        else:
            dims = ", ".join(str(d) if isinstance(d, int) else sig.args[d[1]].name for d in a.dims)
            parts.append(f"{a.name}: tensor[{a.dtype.name}, {dims}]")
    return f"{sig.name}({', '.join(parts)})"


def _kernel_idents(signatures: list[Signature]) -> dict[str, str]:
    """Each kernel's identifier in the names it declares (<id>_launch, <ID>_KERNEL_NAME, <ID>_NARGS): distinct,
    also as the macros' upper case, where kernels' names are not (`café` and `cafè` both become `caf`)."""
    taken: set[str] = set()
    out = {}
    for sig in signatures:
        ident = c_identifier(sig.name)
        while {n.lower() for n in _kernel_names(ident)} & taken:
            ident += "_"
        taken |= {n.lower() for n in _kernel_names(ident)}
        out[sig.name] = ident
    return out


def _kernel_names(ident: str) -> tuple[str, ...]:
    return f"{ident}_launch", f"{ident}_kernel_name", f"{ident}_nargs"


def _function_idents(plans: dict[str, Plan], kernel_idents: dict[str, str]) -> dict[str, str]:
    """Each function's identifier in the names it declares (tessera_<id>, tessera_<id>_lookup,
    TESSERA_<ID>_NAME, ...): distinct, also as the macros' upper case, and none equal to a kernel wrapper's."""
    taken = {n.lower() for ident in kernel_idents.values() for n in _kernel_names(ident)}
    out = {}
    for name in plans:
        ident = c_identifier(name)
        while {n.lower() for n in _function_names(ident)} & taken:
            ident += "_"
        taken |= {n.lower() for n in _function_names(ident)}
        out[name] = ident
    return out


def _function_names(ident: str) -> tuple[str, ...]:
    return (f"tessera_{ident}", f"tessera_{ident}_lookup", f"TESSERA_{ident.upper()}_NAME",
            f"TESSERA_{ident.upper()}_NUM_INPUTS", f"TESSERA_{ident.upper()}_NUM_OUTPUTS")


def _tensor_names(p: Plan) -> tuple[list[str], list[str]]:
    """The names tsrFunctionGetSignature gives the function's inputs (the parameters', else the value ids)
    and outputs ("result0", ...)."""
    ins = [p.params[i] if i < len(p.params) else vid for i, vid in enumerate(p.args)]
    return ins, [f"result{r}" for r in range(len(p.results))]


def _spec(p: Plan, vid: str) -> str:
    v = p.values[vid]
    declared = f" (declared {v.declared})" if v.declared and v.declared != v.dtype else ""
    return f"{v.dtype}[{', '.join(v.dims)}]{declared}"


def _function_wrapper(name: str, p: Plan, ident: str) -> list[str]:
    ins, outs = _tensor_names(p)
    c_names: list[str] = []
    for n in ins + outs:
        c = c_identifier(n)
        while c in _TAKEN_BY_FUNCTION_WRAPPER or c in c_names:
            c += "_"
        c_names.append(c)
    c_in, c_out = c_names[:len(ins)], c_names[len(ins):]
    symbols = sorted({tok for vid in (*p.args, *p.results) for d in p.values[vid].dims
                      for tok in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", d) if tok not in ("min", "max", "ceil")})
    doc = [f"@function {name}: tsrFunctionCall with its tensors in this order (docs/c-api.md, \"Functions\")."]
    doc += [f"  in  {n}: {_spec(p, vid)}" for n, vid in zip(ins, p.args)]
    # a tile program's result r is also written into the input outputs[r] names (as tsrFunctionCall does)
    into = {r: ins[k] for r, k in enumerate(p.outputs) if 0 <= k < len(ins)}
    doc += [f"  out {n}: {_spec(p, vid)}" + (f", also written into {into[r]}" if r in into else "")
            for r, (n, vid) in enumerate(zip(outs, p.results))]
    if symbols:
        doc.append(f"Symbolic extents ({', '.join(symbols)}) are bound by the first input that has them and must "
                   f"agree everywhere else, the outputs' included.")
    upper = ident.upper()
    params = ["tsr_function_t fn", "tsr_stream_t stream"] + [f"const DLTensor* {n}" for n in c_names]
    body = []
    for arr, names in (("inputs", c_in), ("outputs", c_out)):
        if names:
            body.append(f"  const DLTensor* {arr}[{len(names)}] = {{{', '.join(names)}}};")
    call_in = "inputs" if c_in else "NULL"
    call_out = "outputs" if c_out else "NULL"
    lines = ["/*"] + [f" * {c_comment(d)}" for d in doc] + [" */",
             f"#define TESSERA_{upper}_NAME {c_string(name)}",
             f"#define TESSERA_{upper}_NUM_INPUTS {len(ins)}",
             f"#define TESSERA_{upper}_NUM_OUTPUTS {len(outs)}",
             f"static inline tsr_status_t tessera_{ident}_lookup(tsr_module_t module, tsr_function_t* out_function) {{",
             f"  return tsrModuleGetFunction(module, TESSERA_{upper}_NAME, out_function);", "}",
             f"static inline tsr_status_t tessera_{ident}(" + ", ".join(params) + ") {"]
    lines += body
    lines += [f"  return tsrFunctionCall(fn, stream, {call_in}, {len(ins)}, {call_out}, {len(outs)});", "}", ""]
    return lines


def emit_header(signatures: list[Signature], source: str, guard_hint: str,
                plans: dict[str, Plan] | None = None) -> str:
    """The header of an image's kernels (`signatures`) and functions (`plans`, by name)."""
    plans = plans or {}
    guard = "TESSERA_GEN_" + c_identifier(guard_hint).upper() + "_H"
    lines = [f"/* Generated by tessera-cc from {c_comment(source)}. Do not edit. */", f"#ifndef {guard}",
             f"#define {guard}",
             "", "#include <stdbool.h>", "#include <stdint.h>", "#include <tessera/tessera.h>",
             "", "#ifdef __cplusplus", 'extern "C" {', "#endif", ""]
    # an image of several targets records each kernel once per target, with one launch signature: one launcher
    signatures = list({sig.name: sig for sig in reversed(signatures)}.values())[::-1]
    kernel_idents = _kernel_idents(signatures)
    for sig in signatures:
        ident = kernel_idents[sig.name]
        names = _c_names(sig)
        lines += [f"/* {c_comment(_describe(sig))} */",
                  f"#define {ident.upper()}_KERNEL_NAME {c_string(sig.name)}",
                  f"#define {ident.upper()}_NARGS {len(sig.args)}",
                  f"static inline tsr_status_t {ident}_launch(tsr_kernel_t kernel, tsr_stream_t stream, "
                  f"tsr_launch_t launch,",
                  "    " + ", ".join(_c_params(sig, names)) + ") {",
                  f"  void* args[{len(sig.args)}] = {{" + ", ".join(f"(void*)&{n}" for n in names) + "};",
                  f"  return tsrLaunch(kernel, stream, launch, args, {len(sig.args)});", "}", ""]
    for name, ident in _function_idents(plans, kernel_idents).items():
        lines += _function_wrapper(name, plans[name], ident)
    lines += ["#ifdef __cplusplus", "}", "#endif", "", f"#endif /* {guard} */", ""]
    return "\n".join(lines)


def image_header(image: bytes, source: str, guard_hint: str) -> str:
    """The header of a `.tessera` image: its kernels' launchers and its functions' call wrappers, from what the
    image records (so a host's header needs no compiler, only the image it runs)."""
    img = read_image(image)
    section = img.plan
    return emit_header([signature_of_record(k) for k in img.kernels], source, guard_hint,
                       plans_.decode(section) if section is not None else {})
