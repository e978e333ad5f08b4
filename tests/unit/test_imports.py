"""Who may import whom (docs/design.md): no import cycles, the layers' direction, leaves that import nothing of
the project's, and a reason beside every import deferred into a function.

The imports are read from the source (module level and inside functions alike, relative ones resolved with
the install's mapping of dialects/, passes/, backends/ and tools/ into tessera.*), never executed.
"""

from __future__ import annotations

import ast
import collections
import functools
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
MAPPING = {"tessera": "tessera", "dialects": "tessera.dialects", "passes": "tessera.passes",
           "backends": "tessera.backends", "tools": "tessera.tools"}

# No module of the left layer imports a module under any prefix on the right.
FORBIDDEN = {
    "tessera.backends": ("tessera.compiler", "tessera.cache", "tessera.executor"),
    "tessera.passes": ("tessera.backends",),
    "tessera.dialects": ("tessera.passes", "tessera.backends", "tessera.frontend"),
}
LEAVES = ("tessera.targets", "tessera.dtypes", "tessera.diagnostics", "tessera.version")
# Modules built from runtime/ rather than read from a .py file.
EXTENSIONS = ("tessera._runtime",)

Import = collections.namedtuple("Import", "source target line local lazy")


def _modules() -> dict[str, pathlib.Path | None]:
    mods = dict.fromkeys(EXTENSIONS)
    for folder, package in MAPPING.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join([package, *parts])] = path
    return mods


def _targets(node, package: str, mods) -> list[str]:
    """The project modules an import statement names, each as the innermost module of its dotted name."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join(anchor + ([base] if base else []))
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
    out = []
    for name in names:
        while name not in mods and "." in name:
            name = name.rsplit(".", 1)[0]
        if name in mods:
            out.append(name)
    return out


def _explained(tree, lines: list[str]) -> set[int]:
    """The import statements with a `# lazy: <reason>` comment on the line above or their own line(s), and
    those in a run of imports, one per line, that begins with one."""
    found = set()
    for parent in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            statements = getattr(parent, field, None)
            previous = None
            for node in statements if isinstance(statements, list) else ():
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    above = lines[node.lineno - 2] if node.lineno >= 2 else ""
                    own = [line.split("#", 1)[1] for line in lines[node.lineno - 1:node.end_lineno] if "#" in line]
                    if any(_says_why(c) for c in [above, *own]) or (
                            id(previous) in found and previous.end_lineno == node.lineno - 1):
                        found.add(id(node))
                previous = node
    return found


def _says_why(comment: str) -> bool:
    comment = comment.strip().lstrip("#").strip()
    return comment.startswith("lazy:") and bool(comment[len("lazy:"):].strip())


@functools.cache
def imports() -> tuple[Import, ...]:
    mods = _modules()
    found = []
    for name, path in mods.items():
        if path is None:
            continue
        text = path.read_text(encoding="utf-8")
        tree, lines = ast.parse(text), text.splitlines()
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        explained = _explained(tree, lines)
        local = {id(n) for fn in ast.walk(tree) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                 for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(node, package, mods):
                    if target != name:
                        found.append(Import(name, target, f"{path.relative_to(ROOT)}:{node.lineno}",
                                            id(node) in local, id(node) in explained))
    return tuple(found)


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected component of more than one module (Tarjan, iterative)."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.add(w)
                    if w == v:
                        break
                if len(component) > 1:
                    components.append(component)
    return [_cycle_in(c, edges) for c in components]


def _cycle_in(component: set[str], edges) -> list[str]:
    """The shortest cycle through the component's first module, staying inside the component."""
    first = min(component)
    paths, queue = {first: [first]}, collections.deque([first])
    while queue:
        v = queue.popleft()
        for w in sorted(edges[v] & component):
            if w == first:
                return paths[v] + [first]
            if w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    raise AssertionError(f"no cycle in component {component}")


def _where(source: str, target: str) -> str:
    return next(i.line for i in imports() if i.source == source and i.target == target)


def test_no_import_cycles():
    edges = collections.defaultdict(set)
    for i in imports():
        edges[i.source].add(i.target)
        edges[i.target]
    cycles = _cycles(edges)
    assert not cycles, "import cycles (function-local imports count):\n" + "\n".join(
        " -> ".join(c) + "   [" + ", ".join(_where(a, b) for a, b in zip(c, c[1:])) + "]" for c in cycles)


def test_function_local_imports_say_why():
    unexplained = sorted({i.line + f" imports {i.target}" for i in imports() if i.local and not i.lazy})
    assert not unexplained, ("function-local imports of project modules without a `# lazy: <reason>` comment "
                             "on the line above (one comment serves a run of imports):\n" + "\n".join(unexplained))


def test_layers_import_one_way():
    wrong = sorted({f"{i.line}: {i.source} imports {i.target}" for i in imports() for layer, banned in
                    FORBIDDEN.items() if _under(i.source, layer) and any(_under(i.target, b) for b in banned)})
    assert not wrong, "imports against the layers' direction:\n" + "\n".join(wrong)


def test_leaves_import_nothing_of_the_project():
    wrong = sorted({f"{i.line}: {i.source} imports {i.target}" for i in imports() if i.source in LEAVES})
    assert not wrong, "leaf modules importing the project:\n" + "\n".join(wrong)


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")
