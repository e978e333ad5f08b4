"""The launch plans the repository's graph programs compile to: every `@function` program of examples/ and
every source string holding one in tests/unit, for the CPU and for PTX sm_90a. Strings that are fragments or
that a target refuses are skipped (their tests check the refusals)."""
import ast
import concurrent.futures
import multiprocessing
import os

from hostutil import REPO

TARGETS = {"cpu": {"target": "cpu"}, "sm_90a": {"target": "ptx", "arch": "sm_90a"}}


def programs() -> list[tuple[str, str]]:
    """(name, source) of each graph program."""
    out = [(str(p.relative_to(REPO)), p.read_text()) for p in sorted((REPO / "examples").rglob("*.py"))]
    for path in sorted((REPO / "tests" / "unit").glob("*.py")):
        strings = [n.value for n in ast.walk(ast.parse(path.read_text()))
                   if isinstance(n, ast.Constant) and isinstance(n.value, str) and "@function" in n.value]
        out += [(f"{path.relative_to(REPO)}#{i}", s) for i, s in enumerate(strings)]
    return out


def compile_plan(job: tuple[str, str, str]) -> bytes | None:
    """The .tessera.plan section that (name, source, target) compiles to, or None."""
    # lazy: each worker process imports the compiler itself (spawned, not forked from pytest)
    from tessera import plan
    from tessera.compiler import compile_source
    from tessera.image import read_image
    from tessera.options import CompileOptions
    name, source, target = job
    try:
        image = compile_source(source, name, CompileOptions(**TARGETS[target])).image
    except Exception:  # a fragment, or a program this target refuses
        return None
    return read_image(image).section(plan.SECTION)


def sections() -> dict[str, bytes]:
    """'name [target]' -> its image's .tessera.plan section, for every program that compiles to one."""
    jobs = [(name, source, target) for name, source in programs() for target in TARGETS]
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(min(4, os.cpu_count() or 1), mp_context=ctx) as pool:
        found = list(pool.map(compile_plan, jobs, chunksize=4))
    return {f"{name} [{target}]": s for (name, _, target), s in zip(jobs, found) if s is not None}
