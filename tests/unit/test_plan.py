"""Launch plans: the typed plans' one serializer (tessera/plan.py, docs/image-format.md "Launch plans") and
the grammar of extent expressions."""

import dataclasses
import json

import pytest

from tessera import plan
from tessera.plan import (AliasStep, Alternative, ArgsStep, F32Arg, I64Arg, MultipleOf, Plan, PlanError, TensorArg,
                          TensorView, Value, ViewStep)


def _plan(**steps_and_values) -> Plan:
    values = {"v0": Value("f32", ("M", "K")), "v1": Value("bf16", ("K", "N")), "v2": Value("f32", ("M", "N")),
              "v3": Value("f32", ("M*N",), buffer=0), "v4": Value("f32", ("(M*N)//(4)", "4"))}
    steps = (
        ArgsStep("f__gemm0", env={"M": "M", "K": "K", "N": "N", "KP": "ceil((K)/16)*16"},
                 args=(TensorArg("v0", ("M", "K")), TensorArg("v1", ("K", "N")), TensorArg("v2", ("M", "N")),
                       F32Arg(0.5), I64Arg("KP")),
                 block=(384, 1, 1), grid=("min(ceil(M/128)*ceil(N/256), DEVICE_UNITS)", "1", "1"), smem=1024,
                 multiple_of=(MultipleOf("K", 8, "16-byte rows"),),
                 prefer=(Alternative("M - 100", "f__gemm0_n128", ("ceil(M/128)", "1", "1"), (384, 1, 1), 512),)),
        ViewStep("f__elementwise1", tensors=(TensorView("v2", "matrix"), TensorView("v3", "cols")), R="M", C="N",
                 block=(128, 1, 1), grid=("ceil(C/128)", "R", "1"), scalars=("N",), source="@kernel\n..."),
        ViewStep("f__layout2", tensors=(TensorView("v2", "bmn"), TensorView("v3", "bnm")), R="M", C="N", B="2",
                 block=(32, 4, 1), grid=("ceil(R/32)", "ceil(C/4)", "B")),
        ArgsStep("f__gemm3", env={"BATCH": "2", "M": "M"}, args=(TensorArg("v0", ("BATCH", "M", "K")),),
                 block=(1, 1, 1), grid=("1", "1", "1"), batch="BATCH"),
        AliasStep("v4", "v3"))
    return Plan(params=("A", "B"), args=("v0", "v1"), results=("v4",), values=values, steps=steps,
                fallbacks=("bf16 computed in f32",), outputs=(1,), same_extents=(("M", "N"),))


def test_typed_plans_round_trip_through_bytes_and_json():
    p = _plan()
    assert plan.decode(plan.encode({"f": p})) == {"f": p}
    assert Plan.from_json(p.to_json()) == p
    assert Plan.from_json(json.loads(json.dumps(p.to_json()))) == p


def test_the_document_omits_defaults_and_keeps_env_order():
    doc = plan.Plan.from_json(_plan().to_json()).to_json()
    gemm, ew, layout, batched, alias = doc["steps"]
    assert list(gemm["env"]) == ["M", "K", "N", "KP"]   # the producer's order
    assert "B" not in ew and layout["B"] == "2" and "smem" not in batched and "prefer" not in batched
    assert "buffer" not in doc["values"]["v0"] and doc["values"]["v3"]["buffer"] == 0
    assert alias == {"alias": "v4", "of": "v3"}
    assert gemm["args"][3:] == [{"f32": 0.5}, {"i64": "KP"}]
    assert gemm["multiple_of"] == [["K", 8, "16-byte rows"]]
    section = json.loads(plan.encode({"f": _plan()}))
    assert section["version"] == plan.VERSION == 8


def test_other_versions_are_refused_naming_both():
    data = json.dumps({"version": 2, "functions": {}}).encode()
    with pytest.raises(PlanError, match=r"version 2 is not one of 3, 4, 5, 6, 7 and 8"):
        plan.decode(data)


def _caller() -> Plan:
    return Plan(params=("X",), args=("v0",), results=("v1",),
                values={"v0": Value("f32", ("M", "K")), "v1": Value("f32", ("M", "N"))},
                steps=(plan.CallStep(call="mlp", args=("v0",), results=("v1",)),))


def test_call_steps_round_trip_and_are_listed():
    doc = _caller().to_json()
    assert doc["steps"] == [{"call": "mlp", "args": ["v0"], "results": ["v1"]}]
    plans = plan.decode(plan.encode({"g": _caller(), "f": _plan()}))
    assert plans["g"] == _caller() and plan.calls(plans) == [("g", 0, "mlp")]


def test_version_3_documents_are_read_without_call_steps():
    v3 = {"version": 3, "functions": {"f": _plan().to_json()}}
    assert plan.decode(json.dumps(v3).encode())["f"] == Plan.from_json(_plan().to_json())
    v3["functions"]["g"] = _caller().to_json()
    with pytest.raises(PlanError, match="version 3 has call steps"):
        plan.decode(json.dumps(v3).encode())


def _chunks() -> Plan:
    """Two row chunks of v0 [M, 8]: rows [0, 128) and [128, M), as a pipelined collective's chunks are."""
    return Plan(params=("X",), args=("v0",), results=("v0",),
                values={"v0": Value("f32", ("M", "8")), "v1": Value("f32", ("min(128, M)", "8")),
                        "v2": Value("f32", ("M - min(128, M)", "8"))},
                steps=(AliasStep("v1", "v0", offset="0"), AliasStep("v2", "v0", offset="min(128, M)*8")))


def test_alias_offsets_round_trip_and_are_written_where_present():
    """An offset, "0" included, is a window and is written; a reshape has none (None), and none is written."""
    doc = _chunks().to_json()
    assert doc["steps"] == [{"alias": "v1", "of": "v0", "offset": "0"},
                            {"alias": "v2", "of": "v0", "offset": "min(128, M)*8"}]
    assert plan.decode(plan.encode({"f": _chunks()})) == {"f": _chunks()}
    reshape = Plan.from_json(dict(doc, steps=[{"alias": "v1", "of": "v0"}]))
    assert reshape.steps == (AliasStep("v1", "v0"),) and reshape.steps[0].offset is None
    assert reshape.to_json()["steps"] == [{"alias": "v1", "of": "v0"}]


def test_version_5_documents_are_read_without_alias_offsets():
    v5 = {"version": 5, "functions": {"f": _plan().to_json()}}
    assert plan.decode(json.dumps(v5).encode())["f"] == Plan.from_json(_plan().to_json())
    v5["functions"]["g"] = _chunks().to_json()
    with pytest.raises(PlanError, match="version 5 has alias steps with an offset, which version 6 introduced"):
        plan.decode(json.dumps(v5).encode())


def test_broadcasts_round_trip_from_version_7_on():
    """A function's broadcasts (pairs of extent expressions the runtime checks at the call) are written where
    present and read back; a document older than 7 with them is refused."""
    p = dataclasses.replace(_plan(), broadcasts=(("N", "max(M, 2)"), ("K", "ceil(M/4)")))
    assert p.to_json()["broadcasts"] == [["N", "max(M, 2)"], ["K", "ceil(M/4)"]]
    assert "broadcasts" not in _plan().to_json()
    assert plan.decode(plan.encode({"f": p})) == {"f": p}
    v6 = {"version": 6, "functions": {"f": p.to_json()}}
    with pytest.raises(PlanError, match="version 6 has 'broadcasts', which version 7 introduced"):
        plan.decode(json.dumps(v6).encode())


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["steps"][1].update(offset="M*"), "extent expression 'M\\*'"),
    (lambda d: d["steps"][1].update(offset=8), "'offset' is 8, not str"),
    (lambda d: d["values"]["v2"].update(dtype="bf16"), "an alias has its storage's dtype \\(bf16 is not f32\\)"),
])
def test_malformed_alias_offsets_are_plan_errors(mutate, message):
    doc = _chunks().to_json()
    mutate(doc)
    with pytest.raises(PlanError, match=message):
        Plan.from_json(doc)


@pytest.mark.parametrize("mutate, message", [
    (lambda s: s.pop("results"), "has no 'results'"),
    (lambda s: s.update(args="v0"), "'args' is 'v0', not list"),
    (lambda s: s.update(args=["v9"]), "uses value 'v9'"),
    (lambda s: s.update(kernel="k"), "unknown member 'kernel'"),
])
def test_malformed_call_steps_are_plan_errors(mutate, message):
    doc = _caller().to_json()
    mutate(doc["steps"][0])
    with pytest.raises(PlanError, match=message):
        Plan.from_json(doc)


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.pop("steps"), "plan has no 'steps'"),
    (lambda d: d.update(extra=1), "unknown member 'extra'"),
    (lambda d: d["steps"][0].pop("grid"), "has no 'grid'"),
    (lambda d: d["steps"][0].update(block=[1, 1]), "'block' must be 3 integers"),
    (lambda d: d["steps"][0]["args"][0].update(shape="M"), "'shape' is 'M', not list"),
    (lambda d: d["steps"][0]["args"].append({"bogus": 1}), "has no 'i64'"),
    (lambda d: d["steps"][0]["prefer"][0].pop("when"), "has no 'when'"),
    (lambda d: d["steps"][0].update(multiple_of=[["K", 8]]), "'multiple_of' entry"),
    (lambda d: d["steps"][1]["tensors"][0].update(view="diagonal"), "view 'diagonal'"),
    (lambda d: d["steps"][4].update(kernel="k"), "unknown member 'kernel'"),
    (lambda d: d["values"]["v0"].update(dims=["M", 3]), "must hold strings"),
    (lambda d: d["values"].pop("v1"), "uses value 'v1'"),
    (lambda d: d["steps"][0]["env"].update(KP=16), "env 'KP' is 16"),
    (lambda d: d["steps"][0].update(grid=["ceil(N/128)", "R", "N/2"]), "'N/2'"),
    (lambda d: d["steps"][3].update(batch="B"), "per entry of 'B'"),
    (lambda d: d.update(same_extents=[["M", "Q"]]), "same_extents names 'Q'"),
    (lambda d: d.update(broadcasts=[["M"]]), "'broadcasts' entry must be two extent expressions"),
    (lambda d: d.update(broadcasts=[["M", "N+"]]), "'N\\+'"),
])
def test_malformed_documents_are_plan_errors(mutate, message):
    doc = _plan().to_json()
    mutate(doc)
    with pytest.raises(PlanError, match=message):
        Plan.from_json(doc)
    with pytest.raises(PlanError):
        plan.decode(json.dumps({"version": plan.VERSION, "functions": {"f": doc}}).encode())


@pytest.mark.parametrize("data", [b"\xff", b"not json", b"[1]", b'{"version": 3}',
                                  b'{"version": 3, "functions": {"f": 3}}'])
def test_malformed_sections_are_plan_errors(data):
    with pytest.raises(PlanError):
        plan.decode(data)


@pytest.mark.parametrize("expr", ["N/128", "ceil(N/128.0)", "ceil(M+1/2)", "M**2", "-M", "abs(M)", "min(M)",
                                  "max(M, N, K)", "M[0]", "M N", "", "(M", "M)", "ceil", "min", "M % 4",
                                  "x.y", "1e3", "ceil(M//2)"])
def test_expressions_outside_the_grammar_are_refused_when_written(expr):
    p = _plan()
    bad = ViewStep("k", tensors=(), R=expr, C="1", block=(1, 1, 1), grid=("1", "1", "1"))
    with pytest.raises(PlanError, match="extent expression") as e:
        plan.encode({"f": Plan(p.params, p.args, p.results, p.values, (*p.steps, bad))})
    assert repr(expr)[1:-1] in str(e.value) or expr == ""
    with pytest.raises(PlanError):
        plan.evaluate(expr, {"M": 1, "N": 2, "K": 3})


@pytest.mark.parametrize("expr, value", [
    ("42", 42), ("M", 300), ("M*N + K", 300 * 264 + 77), ("M - N - K", 300 - 264 - 77), ("M - (N - K)", 300 - 187),
    ("(M*K)//8", 300 * 77 // 8), ("ceil(M/128)", 3), ("ceil((K)/16)*16", 80), ("ceil(256/128)", 2),
    ("ceil((ceil(M/128)*ceil(N/256))/DEVICE_UNITS)", 1), ("min(ceil(M/128)*ceil(N/128), DEVICE_UNITS)", 9),
    ("max(M, N)", 300), ("min(R, 65535)", 7), ("  M *  N ", 300 * 264), ("K - M", -223), ("(K - M)//10", -23),
    ("ceil((K - M)/10)", -22), ("93*ceil(M/128)*ceil(N/256)*ceil((ceil(M/128)*ceil(N/128))/DEVICE_UNITS) - "
                                "100*ceil(M/128)*ceil(N/128)*ceil((ceil(M/128)*ceil(N/256))/DEVICE_UNITS)", 93 * 6 - 900),
])
def test_evaluate_follows_the_grammar(expr, value):
    assert plan.evaluate(expr, {"M": 300, "N": 264, "K": 77, "R": 7, "DEVICE_UNITS": 132}) == value


def test_evaluate_errors():
    with pytest.raises(PlanError, match="extent 'Q' is unknown"):
        plan.evaluate("M + Q", {"M": 1})
    with pytest.raises(PlanError, match="division by zero in extent 'ceil"):
        plan.evaluate("ceil(M/N)", {"M": 1, "N": 0})
    with pytest.raises(PlanError, match="division by zero"):
        plan.evaluate("M//0", {"M": 1})


def test_chosen_takes_the_first_alternative_whose_condition_is_positive():
    step = _plan().steps[0]
    assert plan.chosen(step, {"M": 100}) is step
    alt = plan.chosen(step, {"M": 101})
    assert (alt.kernel, alt.grid, alt.smem, alt.args) == ("f__gemm0_n128", ("ceil(M/128)", "1", "1"), 512, step.args)
