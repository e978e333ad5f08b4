"""Frontend errors name file:line:col of the user's source; the kernel language's typing rules."""

import pytest


def test_error_location_and_format(compile_error):
    e = compile_error("""\
        from tessera import kernel

        @kernel
        def k(X, Out):
            Out[0] = undefined + 1.0
        """)
    assert (e.filename, e.line, e.col) == ("user.py", 5, 14)
    assert str(e) == "user.py:5:14: error: name 'undefined' is not defined in this kernel"


CASES = [
    ("x = X\n    Out[0] = 1.0", "tensors cannot be aliased to new names in a kernel"),
    ("X = 1.0", "tensor parameter 'X' cannot be reassigned"),
    ("Out[1.5] = 1.0", "float literal 1.5 used where index is expected"),
    ("Out[0] = X[0, 1]", "'X' has rank 1 but is indexed with 2 indices"),
    ("Out[0:4] = 1.0", "slices are tile-level operations"),
    ("for i in X:\n        pass", "a kernel loop iterates over range(...) or a literal list"),
    ("for i in range(0, 10, -1):\n        pass", "range() step must be positive in a kernel"),
    ("Out[0] = tile.nonexistent()", "unknown function 'tile.nonexistent' in a kernel"),
    ("return 1", "kernels return nothing"),
    ("Out[0] = X[0] @ X[1]", "operator '@' is not defined on float values"),
    ("Out[0] = X.shape[1]", "'X' has rank 1; shape[1] does not exist"),
    ("Out[0] = 'text'", "constant 'text' has no kernel type"),
    ("i = launch.thread_id(3)", "takes an optional axis 0, 1 or 2"),
    ("Out[0] = 1 / 0", "cannot evaluate constant expression"),
]


@pytest.mark.parametrize("body, message", CASES)
def test_errors_are_located(compile_error, body, message):
    source = f"""\
from tessera import kernel, launch, tile

@kernel
def k(X, Out):
    {body}
"""
    e = compile_error(source)
    assert message in e.message
    assert e.filename == "user.py" and e.line >= 5 and e.col >= 1, str(e)


def test_bad_annotation(compile_error):
    e = compile_error("@kernel\ndef k(X: tensor[float, 0]):\n    pass\n")
    assert e.line == 2 and "a tensor dimension is a symbol name" in e.message


def test_unknown_scalar_type(compile_error):
    e = compile_error("@kernel\ndef k(a: complex):\n    pass\n")
    assert (e.line, e.col) == (2, 10) and "unknown type 'complex'" in e.message


def test_syntax_error(compile_error):
    e = compile_error("@kernel\ndef k(X)\n    pass\n")
    assert e.line == 2 and e.filename == "user.py"


def test_no_kernel(compile_error):
    e = compile_error("def helper():\n    return 1\n")
    assert "no @kernel or @function in this file" in e.message


def test_duplicate_kernel(compile_error):
    e = compile_error("@kernel\ndef k(X):\n    pass\n\n@kernel\ndef k(X):\n    pass\n")
    assert e.line == 6 and "defined twice" in e.message


def test_source_is_never_executed(tmp_path):
    """tessera-cc reads the AST: module-level code with side effects does not run."""
    from tessera import compiler
    marker = tmp_path / "ran"
    src = f"open({str(marker)!r}, 'w').write('x')\n\n@kernel\ndef k(X):\n    X[0] = 1.0\n"
    compiler.compile_source(src, "side_effects.py")
    assert not marker.exists()


def test_signature_dims_are_shared_by_name():
    from tessera import compiler
    from tessera.abi import DIM, TENSOR
    src = ("@kernel\ndef k(A: tensor[float, 'M', 'K'], B: tensor[float, 'K', 'N'], C: tensor[float, 'M', 'N'],"
           " s: float):\n    pass\n")
    sig = compiler.compile_source(src, stop_after="kernels").metadata["signatures"][0]
    assert [a.name for a in sig.args] == ["A", "B", "C", "s", "M", "K", "N"]
    assert [a.kind for a in sig.args[:3]] == [TENSOR] * 3 and all(a.kind == DIM for a in sig.args[4:])
    assert sig.args[1].dims == (("arg", 5), ("arg", 6))
