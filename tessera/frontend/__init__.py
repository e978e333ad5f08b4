"""The frontend: Python source (read as an AST, never run) becomes Tessera IR."""

from .errors import CompileError
from .module import build_module

__all__ = ["CompileError", "build_module"]
