"""Compiled collectives (issue 16): the tdist ops lower to collective steps of the launch plan in every
pipeline (docs/image-format.md, "Collective step"), the plan's reader checks them, and a call that meets one
without a communicator fails saying so. Multi-rank runs against the interpreter: tests/dist/."""

import json

import numpy as np
import pytest

import tessera
from tessera import executor, plan
from tessera.image import read_image
from tessera.plan import CollectiveStep, Plan, PlanError, Value

SOURCE = '''
from tessera import dist, f32, function, op, tensor

mesh = dist.Mesh(axes=["dp", "tp"], devices=range(6), shape=(2, 3))


@function
def f(X: tensor[f32, "M", "N"]):
    a = op.all_reduce(X * 2.0, mesh=mesh, axis="tp", op="mean", deterministic=True, algo="tree")
    b = op.all_gather(a, mesh=mesh, axis="dp", dim=1)
    c = op.reduce_scatter(b, mesh=mesh, axis="tp", dim=0, op="max")
    return op.broadcast(c, mesh=mesh, axis="dp", root=1)
'''


def _plan_of(source: str, target: str) -> dict:
    return json.loads(read_image(tessera.compile(source, target=target)).plan)["functions"]["f"]


@pytest.mark.parametrize("target", ["cpu", "ptx", "amdgpu", "spirv"])
def test_every_pipeline_plans_the_same_collective_steps(target):
    doc = _plan_of(SOURCE, target)
    steps = [s for s in doc["steps"] if "collective" in s]
    mesh = {"mesh_axes": ["dp", "tp"], "mesh_shape": [2, 3]}
    assert [{k: v for k, v in s.items() if k not in ("input", "output")} for s in steps] == [
        {"collective": "all_reduce", **mesh, "axis": "tp", "reduce": "mean", "deterministic": True, "algo": "tree"},
        {"collective": "all_gather", **mesh, "axis": "dp", "dim": 1},
        {"collective": "reduce_scatter", **mesh, "axis": "tp", "reduce": "max", "dim": 0, "deterministic": False,
         "algo": "auto"},
        {"collective": "broadcast", **mesh, "axis": "dp", "root": 1}]
    # each step reads what the one before wrote; the extents scale by the axis' size, symbolic ones too
    assert [s["input"] for s in steps[1:]] == [s["output"] for s in steps[:-1]]
    assert steps[-1]["output"] == doc["results"][0]
    dims = [doc["values"][s["output"]]["dims"] for s in steps]
    assert dims == [["M", "N"], ["M", "N*2"], ["(M)//3", "N*2"], ["(M)//3", "N*2"]]
    assert plan.decode(json.dumps({"version": plan.VERSION, "functions": {"f": doc}}).encode())


def test_a_call_with_collectives_and_no_communicator_says_so():
    prog = executor.load(tessera.compile(SOURCE, target="cpu"))
    with pytest.raises(ValueError, match=r"function 'f': step 1 is a collective \(all_reduce over mesh axis 'tp'\), "
                                         r"which runs only with a communicator"):
        prog.f(np.ones((6, 4), np.float32))
    with pytest.raises(TypeError, match="comm= takes a tessera.comm.Communicator, not int"):
        prog.f(np.ones((6, 4), np.float32), comm=3)


def _collective_plan(**step) -> Plan:
    s = dict(collective="all_gather", input="v0", output="v1", mesh_axes=("dp", "tp"), mesh_shape=(2, 3),
             axis="tp", dim=1)
    s.update(step)
    return Plan(params=("X",), args=("v0",), results=("v1",),
                values={"v0": Value("f32", ("M", "N")), "v1": Value("f32", ("M", "N*3"))},
                steps=(CollectiveStep(**s),))


def test_collective_steps_round_trip():
    for step in (dict(), dict(collective="all_reduce", dim=None, reduce="prod", deterministic=True, algo="ring"),
                 dict(collective="broadcast", dim=None, root=2),
                 dict(collective="reduce_scatter", reduce="sum", dim=0)):
        p = _collective_plan(**step)
        assert plan.decode(plan.encode({"f": p})) == {"f": p}


def test_version_4_documents_are_read_without_collective_steps():
    doc = {"version": 4, "functions": {"f": _collective_plan().to_json()}}
    with pytest.raises(PlanError, match="version 4 has collective steps, which version 5 introduced"):
        plan.decode(json.dumps(doc).encode())


@pytest.mark.parametrize("mutate, message", [
    (lambda s: s.update(collective="all_to_some"), "collective 'all_to_some' is not one of"),
    (lambda s: s.update(axis="pp"), "axis 'pp' is not one of the mesh's"),
    (lambda s: s.update(mesh_shape=[2]), "must be distinct names, one per mesh_shape entry"),
    (lambda s: s.update(mesh_axes=["tp", "tp"]), "must be distinct names"),
    (lambda s: s.update(mesh_shape=[2, 0]), "must hold positive sizes"),
    (lambda s: s.update(dim=2), "dim 2 is not an axis of the rank-2 tensor 'v0'"),
    (lambda s: s.update(dim=-1), "dim -1 must be a tensor axis"),
    (lambda s: s.pop("dim"), "has no 'dim'"),
    (lambda s: s.update(root=0), "unknown member 'root'"),
    (lambda s: s.update(reduce="sum"), "unknown member 'reduce'"),
    (lambda s: s.update(output="v9"), "uses value 'v9'"),
    (lambda s: s.update(collective="broadcast", root=3, dim=None) or s.pop("dim"), "root 3 is not an index"),
    (lambda s: s.update(collective="all_reduce", reduce="xor", deterministic=False, algo="auto") or s.pop("dim"),
     "reduce 'xor' is not one of sum, max, min, mean, prod"),
    (lambda s: s.update(collective="all_reduce", reduce="sum", deterministic=1, algo="auto") or s.pop("dim"),
     "'deterministic' is 1, not bool"),
    (lambda s: s.update(collective="all_reduce", reduce="sum", deterministic=True, algo="fast") or s.pop("dim"),
     "algo 'fast' is not one of"),
])
def test_malformed_collective_steps_are_plan_errors(mutate, message):
    doc = _collective_plan().to_json()
    mutate(doc["steps"][0])
    with pytest.raises(PlanError, match=message):
        Plan.from_json(doc)


def test_a_collective_keeps_dtype_and_rank():
    doc = _collective_plan().to_json()
    doc["values"]["v1"]["dtype"] = "bf16"
    with pytest.raises(PlanError, match="the dtype and rank must be kept"):
        Plan.from_json(doc)


def test_a_function_with_a_dtype_fallback_and_a_collective_compiles():
    """The fallback ("f16 computed in f32" on the CPU) is recorded on the function's kernels, not on its
    collective steps, which have none."""
    source = SOURCE.replace("f32, \"M\", \"N\"", "f16, \"M\", \"N\"").replace("import dist,", "import dist, f16,")
    image = read_image(tessera.compile(source, target="cpu"))
    assert [k.props.get("fallbacks") for k in image.kernels] == ["f16 computed in f32"]


# ---- sharded parameters -------------------------------------------------------------------------------------

SHARDED = '''
from tessera import dist, f32, function, op, tensor

mesh = dist.Mesh(axes=["dp", "tp"], devices=range(4), shape=(2, 2))


@function
def f(X: tensor[f32, "T", 8], W: dist.shard(tensor[f32, 8, 6], mesh, axis="tp", dim=1)):
    return op.all_gather(X @ W, mesh=mesh, axis="tp", dim=1)
'''


def test_a_sharded_parameter_is_planned_with_its_slice_and_split_by_the_interpreter():
    doc = _plan_of(SHARDED, "cpu")
    assert doc["values"][doc["args"][1]]["dims"] == ["8", "3"]
    assert doc["values"][doc["results"][0]]["dims"] == ["T", "6"]
    from tessera import tessera_frontend_compile
    m = tessera_frontend_compile(SHARDED, {"filename": "s.py"})
    rng = np.random.default_rng(0)
    X, W = rng.standard_normal((5, 8)).astype(np.float32), rng.standard_normal((8, 6)).astype(np.float32)
    ys = m.interpret("f", [X * (d + 1) for d in range(4)], W, world=4)
    for d, y in enumerate(ys):   # device d = (d // 2, d % 2): its tp group a, a + 1 gathers the column halves
        a = d - d % 2
        assert np.allclose(y, np.concatenate([(X * (a + 1)) @ W[:, :3], (X * (a + 2)) @ W[:, 3:]], 1), rtol=1e-5)
    with pytest.raises(Exception, match=r"shape \[8, 5\] cannot be split in 2 along dim 1"):
        m.interpret("f", X, W[:, :5], world=4)


@pytest.mark.parametrize("annotation, message", [
    ('dist.shard(tensor[f32, 8, 6], mesh, axis="pp", dim=1)', "axis 'pp' is not an axis of the mesh ['dp', 'tp']"),
    ('dist.shard(tensor[f32, 8, 6], mesh, axis="tp", dim=2)', "dim 2 is not an axis of the rank-2 tensor"),
    ('dist.shard(tensor[f32, 8, 5], mesh, axis="tp", dim=1)', "extent 5 of dim 1 is not divisible by the 2 devices"),
    ('dist.shard(tensor[f32, 8, "N"], mesh, axis="tp", dim=1)', "the sharded extent 'N' must be a constant"),
    ('dist.shard(tensor[f32, 8, 6], 3, axis="tp")', "dist.shard needs a mesh"),
    ('dist.shard(tensor[f32, 8, 6], mesh, axes="tp")', "axis= and dim= by keyword (unknown: axes)"),
    ('dist.shard(mesh=mesh)', "takes the tensor type first"),
])
def test_bad_shardings_are_located_errors(compile_error, annotation, message):
    source = SHARDED.replace('dist.shard(tensor[f32, 8, 6], mesh, axis="tp", dim=1)', annotation)
    e = compile_error(source)
    assert message in e.message and (e.filename, e.line) == ("user.py", 8), e
    assert e.col == source.splitlines()[7].index("dist.shard") + 1


RESULT = '''
from tessera import dist, f32, function, op, tensor

mesh = dist.Mesh(axes=["tp"], devices=range(2))


@function
def f(X: tensor[f32, 4, 8],
      W: dist.shard(tensor[f32, 8, 6], mesh, dim=1)) -> dist.shard(tensor[f32, 4, 6], mesh, dim=1):
    return X @ W
'''


def test_a_sharded_result_is_checked_and_recorded():
    from tessera import tessera_frontend_compile
    text = tessera_frontend_compile(RESULT, {"filename": "r.py"}).text()
    assert '-> (tensor<4x3xf32> {tessera.dims = [4, 3], tessera.name = "result0", tessera.shard = {axis = "tp", ' \
        'dim = 1 : i64' in text, text
    assert _plan_of(RESULT, "cpu")["values"]["v2"]["dims"] == ["4", "3"]


@pytest.mark.parametrize("annotation, message", [
    ("dist.shard(tensor[f32, 4, 6], mesh, dim=0)", "result 0 is f32[4, 3] on each device, not the slice f32[2, 6]"),
    ("dist.shard(tensor[f32, 4, 5], mesh, dim=1)", "extent 5 of dim 1 is not divisible by the 2 devices"),
    ("(dist.shard(tensor[f32, 4, 6], mesh, dim=1), tensor[f32, 4, 3])", "names 2 results, the function returns 1"),
])
def test_bad_sharded_results_are_located_errors(compile_error, annotation, message):
    source = RESULT.replace("dist.shard(tensor[f32, 4, 6], mesh, dim=1):", annotation + ":")
    e = compile_error(source)
    assert message in e.message and e.line == 9, e
