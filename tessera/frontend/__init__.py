"""The frontend: Python source (read as an AST, never run) becomes Tessera IR.

`build_module` loads MLIR; it is imported on first use so that tools reading only images and caches
(a `tessera-cc` cache hit) start fast.
"""

__all__ = ["build_module"]


def __getattr__(name):
    if name == "build_module":
        # lazy: it loads MLIR (see above)
        from .module import build_module
        return build_module
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
