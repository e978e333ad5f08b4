"""tessera-config: what a C/C++ host needs to build against the installed libtessera."""

from __future__ import annotations

import argparse
import os
import sys

from .errors import ToolError, tool_main


def install_dirs() -> tuple[str, str]:
    """(include dir, lib dir) of the installed runtime, found next to the `_runtime` extension."""
    # lazy: where the runtime is not installed, main() says so instead of failing to import
    from .. import _runtime
    root = os.path.dirname(os.path.abspath(_runtime.__file__))
    return os.path.join(root, "include"), os.path.join(root, "lib")


@tool_main("tessera-config")
def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="tessera-config", description=__doc__)
    p.add_argument("--cflags", action="store_true", help="compiler flags (-I…)")
    p.add_argument("--libs", action="store_true", help="linker flags (-L… -ltessera, with an rpath)")
    p.add_argument("--includedir", action="store_true")
    p.add_argument("--libdir", action="store_true")
    p.add_argument("--pkgconfigdir", action="store_true", help="for PKG_CONFIG_PATH (tessera.pc)")
    p.add_argument("--cmakedir", action="store_true", help="for CMAKE_PREFIX_PATH / Tessera_DIR")
    p.add_argument("--version", action="store_true")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        inc, lib = install_dirs()
    except ImportError as e:
        raise ToolError(f"the runtime is not installed ({e})") from None
    out = []
    if args.version:
        # lazy: see install_dirs
        from .. import _runtime
        out.append(".".join(map(str, _runtime.version())))
    if args.cflags:
        out.append(f"-I{inc}")
    if args.libs:
        out.append(f"-L{lib} -Wl,-rpath,{lib} -ltessera")
    if args.includedir:
        out.append(inc)
    if args.libdir:
        out.append(lib)
    if args.pkgconfigdir:
        out.append(os.path.join(lib, "pkgconfig"))
    if args.cmakedir:
        out.append(os.path.join(lib, "cmake", "Tessera"))
    if not out:
        p.print_help()
        return 1
    print(" ".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
