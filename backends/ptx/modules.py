"""The kernels' LLVM IR as independent modules, and their PTX put together as one module's would be.

The llir stage links the kernels generated whole as LLVM IR (the wgmma GEMM and attention kernels,
``tessera.llvm_ir``) into the module translated from MLIR and optimizes the result; the ptx stage generates
its code. Where the modules share nothing but declarations of the same external globals (``tsr_smem``),
each can be optimized and code-generated alone, on threads (backends/llvm_threads.py), and the PTX of the
pieces put together is byte for byte that of the linked module (tests/unit/test_compile_concurrency.py):

- `split` says whether the modules are independent: no function defined in two, none declared in one and
  defined in another, every global named in two an external declaration (the linker keeps the first module's,
  so the later ones are given its text). Otherwise None, and the stage links them as before.
- `as_linked` checks the optimized modules the same way, and that their globals are those of the inputs, in
  the order the linked module would have them (the first module naming each first); otherwise the stage links
  the modules as before.
- The llir stage's text is then the optimized modules one after another, each after a
  ``; tessera: LLVM module i of n`` line (`join`, `pieces`).
- `stitch_ptx` puts the modules' PTX together: the header once, every module's globals (their first
  declaration) after the first kernel's ``.globl`` line, then the functions in order, their basic-block labels
  and local depots renumbered by the functions before them (NVPTX numbers them per module). PTX of another
  shape (function declarations, calls, other labels) gives None, and the ptx stage links the modules.
"""

from __future__ import annotations

import re

_NAME = r'(?:"(?:[^"\\]|\\.)*"|[-\w.$]+)'
_DEFINE = re.compile(rf"define [^@]*@({_NAME})\(")
_DECLARE = re.compile(rf"declare [^@]*@({_NAME})\(")
_GLOBAL = re.compile(rf"@({_NAME}) = ")
_MARK = "; tessera: LLVM module "


def _names(text: str) -> tuple[list[str], list[str], dict[str, str]]:
    """(functions defined, functions declared other than LLVM's intrinsics, global name -> its line), from the
    lines that start with `define`, `declare` or `@` (one split: a regular expression in MULTILINE mode tries
    every position of the megabytes of a wgmma kernel's IR)."""
    defined, declared, globals_ = [], [], {}
    for line in text.split("\n"):
        if line.startswith("define "):
            if m := _DEFINE.match(line):
                defined.append(m.group(1))
        elif line.startswith("declare "):
            if (m := _DECLARE.match(line)) and not m.group(1).startswith("llvm."):
                declared.append(m.group(1))
        elif line.startswith("@") and (m := _GLOBAL.match(line)):
            globals_[m.group(1)] = line
    return defined, declared, globals_


def _independent(texts: list[str], parsed: list, rewrite: bool) -> list[str] | None:
    defined: set[str] = set()
    first_line: dict[str, str] = {}
    out = []
    all_defined = {n for d, _, _ in parsed for n in d}
    for text, (functions, declared, globals_) in zip(texts, parsed):
        if defined & set(functions) or set(declared) & all_defined:
            return None
        defined |= set(functions)
        for name, line in globals_.items():
            if name not in first_line:
                first_line[name] = line
                continue
            first = first_line[name]
            if " = external " not in first or " = external " not in line:
                return None   # a definition the linker would merge or rename
            if line != first:
                if not rewrite:
                    return None
                rewritten = text.replace(f"\n{line}\n", f"\n{first}\n", 1)
                if rewritten == text:
                    return None
                text = rewritten
        out.append(text)
    return out


class Pieces(list):
    """Modules to optimize apart (`split`), with the order in which they first name each global."""
    order: dict[str, int]


def split(texts: list[str], renames: dict[str, str]) -> Pieces | None:
    """`texts` (the translated module, then the generated kernels) as modules to optimize apart, or None where
    they must be linked. Only worth it for more than one module that defines functions."""
    parsed = [_names(t) for t in texts]
    if sum(1 for functions, _, _ in parsed if functions) < 2:
        return None
    out = _independent(texts, parsed, rewrite=True)
    if out is None:
        return None
    pieces = Pieces(out)
    pieces.order = {}
    for _, _, globals_ in parsed:
        for name in globals_:
            pieces.order.setdefault(name, len(pieces.order))
    return pieces


def as_linked(pieces: Pieces, optimized: list[str]) -> bool:
    """Whether the separately optimized modules are still independent, and their globals those of the inputs in
    the order the linked module would have them (the first module naming each first)."""
    parsed = [_names(t) for t in optimized]
    if _independent(optimized, parsed, rewrite=False) is None:
        return False
    kept: list[str] = []
    for _, _, globals_ in parsed:
        kept += [name for name in globals_ if name not in kept]
    # a global the optimizer made (its place in the linked module is not known here): link them
    order = pieces.order
    return all(name in order for name in kept) and kept == sorted(kept, key=order.__getitem__)


def join(optimized: list[str]) -> str:
    n = len(optimized)
    return "".join(f"{_MARK}{i + 1} of {n}\n{text if text.endswith(chr(10)) else text + chr(10)}"
                   for i, text in enumerate(optimized))


def pieces(llir: str) -> list[str]:
    """The modules of the llir stage's text (one where it has no `join` marks)."""
    if not llir.startswith(_MARK):
        return [llir]
    parts = llir.split("\n" + _MARK)
    return [part.partition("\n")[2] + ("\n" if i < len(parts) - 1 else "") for i, part in enumerate(parts)]


_HEAD = re.compile(r"\A(//\n// Generated by LLVM NVPTX Back-End\n//\n\n\.version [^\n]*\n\.target [^\n]*\n"
                   r"\.address_size \d+\n\n)(\t// \.globl\t[^\n]*\n)?((?:[^\n]+\n)*?)\n")
_PREAMBLE_LINE = re.compile(r"(?:\.extern |\.visible |\.weak |\.common )?\.(?:shared|global|const) [^\n]*;"
                            r"|// \S+ has been demoted")
_FUNCTION = re.compile(r"^(?:\.visible |\.weak |\.extern )?\.(?:entry|func)\b", re.M)
_NUMBERED = re.compile(r"\$L__BB(\d+)_|__local_depot(\d+)")
_OTHER = re.compile(r"\$L(?!__BB\d+_\d)|callseq|prototype_\d")


def stitch_ptx(ptxs: list[str]) -> str | None:
    """The PTX of the modules' functions as one module's, or None where it is not of the shape this knows."""
    head = globl = None
    preamble: list[str] = []
    bodies = []
    functions = 0
    for ptx in ptxs:
        m = _HEAD.match(ptx)
        if m is None or (head is not None and m.group(1) != head):
            return None
        head = m.group(1)
        lines = m.group(3).splitlines()
        if any(not _PREAMBLE_LINE.fullmatch(line) for line in lines):
            return None
        preamble += [line for line in lines if line not in preamble]
        body = ptx[m.end():]
        if _OTHER.search(body):
            return None
        count = len(_FUNCTION.findall(body))
        if count == 0:
            if body.strip():
                return None
            continue
        if globl is None:
            globl = m.group(2) or ""
        else:
            body = (m.group(2) or "") + body
        if functions:
            body = _NUMBERED.sub(lambda q: f"$L__BB{int(q.group(1)) + functions}_" if q.group(1) is not None
                                 else f"__local_depot{int(q.group(2)) + functions}", body)
        functions += count
        bodies.append(body)
    if head is None or globl is None:
        return None
    return head + globl + "".join(line + "\n" for line in preamble) + "\n" + "".join(bodies)
