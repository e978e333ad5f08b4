"""tsched, tmem and ttile ops built from Python: they verify, print as hand-written IR does (no segment-size
attributes), and their accessors read the same from built and from parsed ops."""

import pytest

from tessera.dialects import make_context, tmem, tsched, ttile_tile
from tessera.mlir import func, ir


@pytest.fixture
def ctx():
    with make_context() as c, ir.Location.unknown():
        yield c


def i64(v):
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), v)


def build_function(arg_types, body):
    """A module holding `func.func @f(arg_types)` whose entry block `body(args)` fills before the return."""
    module = ir.Module.create()
    with ir.InsertionPoint(module.body):
        f = func.FuncOp("f", (arg_types, []))
        with ir.InsertionPoint(f.add_entry_block()):
            body(list(f.arguments))
            func.ReturnOp([])
    module.operation.verify()
    return module


def ops_named(module, name):
    found = []

    def walk(op):
        if op.name == name:
            found.append(op.opview)
        return ir.WalkResult.ADVANCE

    module.operation.walk(walk)
    return found


def test_tile_and_pipeline(ctx):
    t = ir.RankedTensorType.get([16], ir.F32Type.get())
    built = {}

    def body(args):
        x, n = args
        tile = tsched.TileOp(output=t)
        tile.attributes["tile.shape"] = ir.ArrayAttr.get([i64(16)])
        with ir.InsertionPoint(tile.body.blocks.append()):
            loop = tsched.PipelineOp(n, n, n, i64(2), init=x, output=t)
            with ir.InsertionPoint(loop.body.blocks.append(ir.IndexType.get(), t)):
                tsched.YieldOp(value=loop.body.blocks[0].arguments[1])
            tsched.YieldOp(value=loop.output)
        bare = tsched.PipelineOp(n, n, n, i64(1))
        with ir.InsertionPoint(bare.body.blocks.append(ir.IndexType.get())):
            tsched.YieldOp()
        built.update(tile=tile, loop=loop, bare=bare)

    module = build_function([t, ir.IndexType.get()], body)
    assert "SegmentSizes" not in str(module)
    assert built["tile"].output.type == t
    assert built["loop"].init == module.body.operations[0].arguments[0]
    assert built["bare"].init is None and built["bare"].output is None
    again = ir.Module.parse(str(module))
    loop, bare = ops_named(again, "tsched.pipeline")
    assert loop.step == loop.operation.operands[2] and loop.init == loop.operation.operands[3]
    assert loop.output.type == t
    assert bare.init is None and bare.output is None


def test_memory_ops_read_their_index_groups(ctx):
    shared = ir.Attribute.parse("#gpu.address_space<workgroup>")
    smem = ir.MemRefType.get([2, 64, 64], ir.BF16Type.get(), memory_space=shared)
    gmem = ir.MemRefType.get([ir.ShapedType.get_dynamic_size()] * 2, ir.BF16Type.get())
    frag = ttile_tile.FragmentType.get(ir.ArrayAttr.get([i64(16), i64(16)]), ir.BF16Type.get(),
                                       ir.StringAttr.get("a"))
    built = {}

    def body(args):
        g, i = args
        buf = tmem.AllocOp([], ir.StringAttr.get("shared"), i64(128), memref=smem)
        copy = ttile_tile.AsyncCopyOp(g, buf.memref, [i, i, i, i, i], ir.ArrayAttr.get([i64(64), i64(64)]),
                                      i64(16), token=ttile_tile.AsyncTokenType.get())
        load = ttile_tile.LdmatrixOp(buf.memref, [i, i, i], result=frag)
        built.update(alloc=buf, copy=copy, load=load)

    module = build_function([gmem, ir.IndexType.get()], body)
    assert "SegmentSizes" not in str(module)
    assert len(built["alloc"].dynamic_sizes) == 0
    assert len(built["copy"].indices) == 5 and built["copy"].dest == built["alloc"].memref
    again = ir.Module.parse(str(module))
    (load,) = ops_named(again, "ttile.ldmatrix")
    assert len(load.indices) == 3 and load.source.type == smem
    assert load.result.type == frag
