"""The Graph IR phases' decisions as ops (tsched.schedule, tmem.stage, tmem.slot), read back through
passes/schedule_ir.py the way the kernel lowering reads them."""

from tessera import compiler
from tessera.dialects import make_context
from tessera.mlir import ir
from tessera.options import CompileOptions
from tessera.passes import schedule_ir

SRC = """
@function(stages=3)
def f(X: tensor[f32, "M", 64], W: tensor[f32, 64, 32], b: tensor[f32, 32]):
    return op.softmax(op.relu(op.bias_add(X @ W, b)), axis=-1)
"""
# A parsed module does not keep its context alive, nor an op its module: both live as long as the tests.
CONTEXT = make_context()
MODULES = []


def _function(stage: str):
    dumps = {}
    compiler.compile_source(SRC, "prog.py", CompileOptions(target="cpu", cpu="x86-64-v3"), stop_after=stage,
                            on_stage=lambda n, a: dumps.setdefault(n, a))
    module = ir.Module.parse(dumps[stage], CONTEXT)
    MODULES.append(module)
    return next(op for op in module.body.operations if "tessera.function" in op.attributes)


def test_each_graph_op_gets_its_decisions():
    fn = _function("memory")
    ops = schedule_ir.graph_ops(fn)
    assert [op.operation.name for op in ops] == ["ttensor.matmul", "ttensor.bias_add", "ttensor.unary",
                                                 "ttensor.softmax", "func.return"]
    mm, bias, relu, softmax, ret = ops
    assert schedule_ir.schedule_of(mm)["stages"] == 3 and "KC" in schedule_ir.schedule_of(mm)
    assert schedule_ir.vector_of(mm) == {"lanes": 8, "warp": 32}  # vectorize's, kept apart from the schedule
    assert "lanes" not in schedule_ir.schedule_of(mm)
    assert schedule_ir.schedule_of(bias) == {"block_x": 128}
    assert schedule_ir.schedule_of(softmax) == {"rows_per_block": 4}
    staging = schedule_ir.staging_of(mm)
    assert sorted(staging) == ["a_block", "b_panel"] and staging["b_panel"][1] == 3
    assert staging["b_panel"][0][0] == schedule_ir.schedule_of(mm)["KC"]
    assert schedule_ir.staging_of(bias) is None
    # a dead value's slot is reused: the bias_add's by the softmax
    slots = [schedule_ir.buffer_of(op.results[0]) for op in (mm, bias, relu, softmax)]
    assert slots == [0, 1, 0, 1]
    assert schedule_ir.buffer_of(fn.entry_block.arguments[0]) is None
    assert schedule_ir.schedule_of(ret) == {} and schedule_ir.decisions(ret) == []


def test_decisions_stop_at_the_schedule_phase():
    fn = _function("schedule")
    mm = schedule_ir.graph_ops(fn)[0]
    assert [d.operation.name for d in schedule_ir.decisions(mm)] == ["tsched.schedule"]
    assert schedule_ir.vector_of(mm) == {} and schedule_ir.staging_of(mm) is None
    assert schedule_ir.buffer_of(mm.results[0]) is None
