"""tessera.diagnostics: one location format read in one place, one lowering error, both turned into a
CompileError at the user's file:line:col."""

from tessera.dialects import make_context
import pytest

from tessera.diagnostics import CompileError, LoweringError, parse_location
from tessera.mlir import ir


def test_parse_location_reads_mlir_locations_as_printed():
    with make_context():
        assert parse_location(str(ir.Location.file("k.py", 7, 9))) == ("k.py", 7, 9)
        named = ir.Location.name("x", childLoc=ir.Location.file("k.py", 3, 1))
        assert parse_location(str(named)) == ("k.py", 3, 1)
        assert parse_location(str(ir.Location.unknown())) is None


def test_a_lowering_error_is_a_compile_error_at_its_op():
    with make_context():
        module = ir.Module.parse('func.func @f() { return loc("user.py":12:5) }')
        ret = module.body.operations[0].regions[0].blocks[0].operations[0]
        for at in (ret, ret.location):  # an op or its location
            err = CompileError.from_lowering(LoweringError(at, "has no CPU lowering"), "other.py")
            assert str(err) == "user.py:12:5: error: has no CPU lowering"
        unlocated = LoweringError(ir.Location.unknown(), "no place")
        assert str(CompileError.from_lowering(unlocated, "other.py")) == "other.py:1:1: error: no place"


def test_a_deeply_nested_expression_is_a_located_error_from_the_api():
    """A 5 MB expression exhausts Python's recursion in the parser: an error at the file, not a traceback."""
    from tessera.compiler import compile_source
    src = "@function\ndef f(X: tensor[f32, 4]):\n    return X" + " + X" * 1_000_000 + "\n"
    with pytest.raises(CompileError) as e:
        compile_source(src, "deep.py")
    assert str(e.value).startswith("deep.py:1:1: error:") and "nested too deeply" in str(e.value)
