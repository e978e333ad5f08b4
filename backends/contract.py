"""The backend contract: what a target gives the driver.

A backend is a class with a registered name (tessera.backends.register). The driver builds it from the
compile options (`from_options`), asks it for its stages (an ordered dict of small ``make_<ir>`` functions,
after the shared Graph IR phases), for the facts the phases plan with (`target_facts`), for its own lowerings
of whole op groups (`lowerings`: "gemm", "attention", and the collectives and quantized ops to come) and for
the symbol each kernel's entry has in its code section. `hash` names everything about the backend that changes
what it emits, for the compile cache.

The driver never names a backend and no backend imports the driver: both meet here and in the registry.
"""

from __future__ import annotations

import abc
import functools
import hashlib
import importlib
import os
import shutil
from typing import Callable, ClassVar

from ..options import CompileOptions
from ..targets import TargetFacts

# A backend's lowering of one fusion group: (lowering context, kernel name, the group's ops) -> plan steps.
Lowering = Callable[..., list]


class Backend(abc.ABC):
    name: ClassVar[str]              # the target name users give (`--target NAME`)
    code_section: ClassVar[str]      # the image section holding this target's code
    Options: ClassVar[type]          # a frozen dataclass with `hash()` (tessera.options.HashedOptions)
    arch_prefixes: ClassVar[tuple[str, ...]] = ()   # `--arch` names starting so are this target's

    def __init__(self, options=None):
        self.options = options if options is not None else self.Options()

    @classmethod
    def from_options(cls, options: CompileOptions, arch: str | None) -> "Backend":
        """The backend for a compilation's options and the architecture `--arch` gave this target, if any.
        Raises ValueError, with the known names, for an option this target cannot take."""
        return cls(cls.Options(**cls.option_values(options, arch)))

    @classmethod
    def option_values(cls, options: CompileOptions, arch: str | None) -> dict:
        """The keyword arguments of `Options` that the common compile options decide."""
        return {}

    def hash(self) -> str:
        """Everything about this backend that changes its output: its name, options and the versions of the
        external tools whose output lands in the image."""
        h = hashlib.sha256()
        for part in (self.name, self.options.hash(), *self.tool_versions()):
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()

    def tool_versions(self) -> tuple[str, ...]:
        return ()

    # The target's stages after the shared Graph IR phases, in order: (stage name, name of a function
    # make(artifact, metadata, options) -> artifact of the package's module `stage_module`).
    stages: ClassVar[tuple[tuple[str, str], ...]] = ()
    stage_module: ClassVar[str] = "compiler"

    def add_stages(self, stages: dict[str, Callable]) -> None:
        """Appends this target's stages, in order, as name -> make(artifact, metadata) -> artifact."""
        # Imported here, by name: the stages load MLIR and LLVM, which hashing a backend for a cache hit
        # must not.
        package = type(self).__module__.rpartition(".")[0]
        module = importlib.import_module(f"{package}.{self.stage_module}")
        for name, make in self.stages:
            stages[name] = functools.partial(getattr(module, make), options=self.options)

    @abc.abstractmethod
    def target_facts(self) -> TargetFacts:
        ...

    def lowerings(self) -> dict[str, Lowering]:
        """This target's own lowerings of fusion-group kinds ("gemm", "attention"); the others become
        generated SIMT kernels."""
        return {}

    @abc.abstractmethod
    def entry_symbol(self, kernel: str) -> str:
        """The symbol of `kernel`'s entry point in this target's code section."""


def tool_identity(program: str) -> str:
    """An external tool as a backend's `tool_versions` reports it: the file `program` resolves to, with its
    size and modification time — an upgrade changes them, and running the tool for its version would cost
    every compile, cache hits included, a process."""
    path = shutil.which(program)
    if path is None:
        return f"{program}=none"
    path = os.path.realpath(path)
    st = os.stat(path)
    return f"{path} {st.st_size} {int(st.st_mtime)}"
