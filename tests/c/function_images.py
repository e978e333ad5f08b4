"""Test helper: images whose launch plans call hand-picked kernels, for running tsrFunctionCall where the
compiler's own kernels cannot run (fake and mock drivers run saxpy-like kernels only, tests/c/fake_cuda.c,
tests/c/mock/). The plan is written as tessera.plan documents are (docs/image-format.md, "Launch plans"), at
the version it names (these at 3; the C reader reads 3 to 6), and added to an existing image with its IR version
note saying so."""
import json

from tessera.image import read_image, write_image
from tessera.image.format import BYTECODE_VERSION, IR_MAJOR, IR_MINOR, ArgRecord, KernelRecord, Versions

SCALAR, TENSOR, DIMENSION, F32, INDEX = 0, 1, 2, 1, 17


def _tensor(value):
    return {"value": value, "shape": ["N"]}


def _step(kernel, args):
    return {"kernel": kernel, "env": {"N": "N"}, "args": args, "block": [64, 1, 1], "grid": ["ceil(N/64)", "1", "1"]}


def _function(steps):
    f32n = {"dtype": "f32", "dims": ["N"]}
    return {"params": ["x", "y"], "args": ["v0", "v1"], "results": ["v2"],
            "values": {"v0": f32n, "v1": f32n, "v2": f32n}, "steps": steps, "fallbacks": [], "outputs": []}


# axpy(x, y) = 2x + y + 1 computed in the result v2 (an intermediate the call allocates), with the in-place kernels of the
# standard test image (kernels_cpu.c) and fake_cuda.c: fill_fixed(v2, 1); saxpy(2, x, v2); saxpy(1, y, v2).
INPLACE_AXPY = {"version": 3, "functions": {"axpy": _function([
    _step("fill_fixed", [_tensor("v2"), {"f32": 1.0}]),
    _step("saxpy", [{"f32": 2.0}, _tensor("v0"), _tensor("v2")]),
    _step("saxpy", [{"f32": 1.0}, _tensor("v1"), _tensor("v2")])])}}
INPLACE_AXPY_COEFFICIENTS = (2, 1, 1)

# INPLACE_AXPY computed in an intermediate t that the result v2 then views (an alias step): a result that is an
# alias keeps its copy into the output (docs/c-api.md, "Functions"), so every call has an intermediate and a
# result copy, whose stream order and release tests/c/test_cuda_fake.py looks at.
INPLACE_AXPY_VIA_ALIAS = {"version": 3, "functions": {"axpy": _function([
    _step("fill_fixed", [_tensor("t"), {"f32": 1.0}]),
    _step("saxpy", [{"f32": 2.0}, _tensor("v0"), _tensor("t")]),
    _step("saxpy", [{"f32": 1.0}, _tensor("v1"), _tensor("t")]),
    {"alias": "v2", "of": "t"}])}}
INPLACE_AXPY_VIA_ALIAS["functions"]["axpy"]["values"]["t"] = {"dtype": "f32", "dims": ["N"]}


def _direct_functions():
    """The functions of DIRECT (tests/c/host_function_direct.c), each 2x + y + 1 (and 2·that) with fill_fixed and
    the in-place saxpy: `axpy`, INPLACE_AXPY's; `sole`, its result in a buffer slot of its own; `shared`, its
    result in the buffer slot of an intermediate t that the steps compute it in, never naming the result itself
    (its storage is the slot's: the call must copy the slot out, not leave the output unwritten); `reread`,
    results v2 = 2x + y + 1 and v3 = 2·v2, the steps reading v2 after writing it."""
    f32n = {"dtype": "f32", "dims": ["N"]}
    axpy = lambda out: [_step("fill_fixed", [_tensor(out), {"f32": 1.0}]),  # noqa: E731
                        _step("saxpy", [{"f32": 2.0}, _tensor("v0"), _tensor(out)]),
                        _step("saxpy", [{"f32": 1.0}, _tensor("v1"), _tensor(out)])]
    sole = _function(axpy("v2"))
    sole["values"]["v2"] = dict(f32n, buffer=0)
    shared = _function(axpy("t"))
    shared["values"]["t"] = dict(f32n, buffer=0)
    shared["values"]["v2"] = dict(f32n, buffer=0)
    reread = _function(axpy("v2") + [_step("fill_fixed", [_tensor("v3"), {"f32": 0.0}]),
                                     _step("saxpy", [{"f32": 2.0}, _tensor("v2"), _tensor("v3")])])
    reread["results"] = ["v2", "v3"]
    reread["values"]["v3"] = f32n
    return {"axpy": _function(axpy("v2")), "sole": sole, "shared": shared, "reread": reread}


DIRECT = {"version": 3, "functions": _direct_functions()}

# axpy(x, y) = 2x + 2y through an intermediate t, with the out-of-place saxpy(a, X, Y, Out) the mock drivers
# run: t = saxpy(2, x, y); v2 = saxpy(1, y, t).
OUT_OF_PLACE_AXPY = {"version": 3, "functions": {"axpy": _function([
    _step("saxpy", [{"f32": 2.0}, _tensor("v0"), _tensor("v1"), _tensor("t")]),
    _step("saxpy", [{"f32": 1.0}, _tensor("v1"), _tensor("t"), _tensor("v2")])])}}
OUT_OF_PLACE_AXPY["functions"]["axpy"]["values"]["t"] = {"dtype": "f32", "dims": ["N"]}
OUT_OF_PLACE_AXPY_COEFFICIENTS = (2, 2, 0)

# The PTX record of fill_fixed, which fake_cuda.c runs (the standard test image has saxpy's only).
PTX_FILL = KernelRecord("fill_fixed", "fill_fixed", "ptx", "sm_90a", ".tessera.code.ptx",
                        [ArgRecord("out", TENSOR, F32, [-3]), ArgRecord("value", SCALAR, F32),
                         ArgRecord("N", DIMENSION, INDEX)])


def with_plan(image: bytes, doc: dict, kernels=()) -> bytes:
    """`image` with `doc` as its `.tessera.plan` section (replacing any) and `kernels` added to its records."""
    img = read_image(image)
    code = {s.name: bytes(s.data) for s in img.sections if s.name.startswith(".tessera.code.")}
    code[".tessera.plan"] = json.dumps(doc).encode()
    versions = Versions((IR_MAJOR, IR_MINOR), BYTECODE_VERSION, doc["version"])
    return write_image(list(img.kernels) + list(kernels), code, img.section(".tessera.ops"), versions=versions)
