"""The rule of every tool that writes files: no output is one of its inputs, and no two outputs are one file.

"The same file" is decided by the file system (a symlink, a hard link or another spelling of the path all
count), so that `tessera-cc s.py -o ./link-to-s.py` is refused as `-o s.py` is. Tools check before they
compute anything: a refused command has written nothing.
"""

from __future__ import annotations

import os


def same_file(a: str, b: str) -> bool:
    """Whether paths `a` and `b` name one file: the same inode when both exist, else the same resolved path
    (a path that does not exist yet is the file it would create)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def clash(inputs: dict[str, str], outputs: dict[str, str]) -> str | None:
    """The first output that is an input or an earlier output, as a sentence; None when there is none.

    Both map a role ("-o", "the source") to a path; "-" (standard input or output) is never a file."""
    seen: dict[str, str] = {}
    for role, path in outputs.items():
        if path in (None, "-"):
            continue
        for in_role, in_path in inputs.items():
            if in_path not in (None, "-") and same_file(path, in_path):
                return f"{role} {path} is {in_role} ({in_path}); refusing to overwrite an input"
        for out_role, out_path in seen.items():
            if same_file(path, out_path):
                return f"{role} {path} is also {out_role} ({out_path}); each output needs its own file"
        seen[role] = path
    return None


def inside(path: str, directory: str) -> bool:
    """Whether `path` lies in `directory` or below it, both resolved through symlinks."""
    path, directory = os.path.realpath(path), os.path.realpath(directory)
    return os.path.commonpath([path, directory]) == directory
