"""The reference interpreter: executes Graph IR with numpy, the oracle for every backend's numerics.

    from tessera.interpret import run
    Y = run(module, "mlp", X, W1, b1, W2)

Each op is computed in float64 and rounded once to its result type (bf16, fp8 … included), so results are
what an exact implementation of the declared types gives. Programs with collectives run SPMD over
`world` devices: pass per-device inputs as lists, get per-device outputs as lists.
"""

from . import dist_ops, fourier_ops, operator_abi, operator_ops, tensor_ops  # noqa: F401 — they register the op implementations
from .core import Interpreter, run
from .values import InterpreterError

__all__ = ["Interpreter", "InterpreterError", "run"]
