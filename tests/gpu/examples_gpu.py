"""Every examples/ program on a GPU (test_examples_gpu.py): its ptx sm_90a image and the interpreter's results.

The inputs, tolerances and comparison are the examples matrix's (tessera.tools.examples_matrix: calls() and
check()), so a GPU cell means what the matrix's CPU and OpenCL cells mean. The interpreter needs MLIR, which
the GPU machine lacks, so `build` writes beside each image the interpreter's results of its functions (a sample of
each large one, see `sample`) and a digest of the inputs they were computed from, which the test checks it
regenerates identically; for a file of SIMT @kernels, the arrays its declared launches must produce
(examples_matrix.launches_of: the file's `launches(rng)`) and their inputs' digest.
"""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np

TARGET, ARCH = "ptx", "sm_90a"
FOLDER = "examples_gpu"          # under the images' folder
MANIFEST = "manifest.json"       # example -> "" (image built) or the compiler's refusal


def stem(example: str) -> str:
    """The files' name of an example ("examples/graph/mlp.py" -> "graph.mlp")."""
    return example.removeprefix("examples/").removesuffix(".py").replace("/", ".")


SAMPLE = 16384   # elements kept of a larger result (the attention examples' results are 160 MB in all)


def digest(args: list) -> np.ndarray:
    """A fingerprint of a call's inputs (dtypes, shapes, bytes), stored instead of the inputs themselves."""
    h = hashlib.sha256()
    for a in args:
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return np.array(h.hexdigest())


def sample(name: str, i: int, result: np.ndarray) -> np.ndarray:
    """The flat positions of `result` kept: every element of a small one; else SAMPLE positions, drawn by a
    generator seeded by the result's name, and the position of the largest magnitude (the tolerance is relative
    to it, so the sample's bound is the whole result's)."""
    size = result.size
    if size <= SAMPLE:
        return np.arange(size)
    rng = np.random.default_rng(list(f"{name}:{i}".encode()))
    largest = int(np.argmax(np.abs(result.astype(np.float64)).ravel())) if size else 0
    return np.union1d(rng.choice(size, SAMPLE, replace=False), [largest])


def references(functions: dict, reference) -> dict[str, np.ndarray]:
    """The arrays stored for an image whose functions' plans are `functions` (name -> plan): each call's inputs'
    digest as "<name>:inputs", and for reference(name, inputs)'s result i its shape "<name>:shape<i>", the flat
    positions kept "<name>:at<i>" (sample) and their values "<name>:out<i>"; or the interpreter's refusal of the
    inputs as "<name>:refused" (the runtime refuses them too: examples/tile/execution_model.py's flash_attention
    over 24 rows, docs/portability.md)."""
    from tessera.interpret.values import InterpreterError  # lazy: the interpreter, where the images are built
    from tessera.tools import examples_matrix as em
    out = {}
    for name, _, args in em.calls(functions):
        out[f"{name}:inputs"] = digest(args)
        try:
            results = reference(name, args)
        except InterpreterError as e:
            out[f"{name}:refused"] = np.array(str(e))
            continue
        for i, r in enumerate(np.asarray(r) for r in results):
            at = sample(name, i, r)
            out.update({f"{name}:shape{i}": np.array(r.shape, np.int64), f"{name}:at{i}": at,
                        f"{name}:out{i}": r.ravel()[at]})
    return out


def stored_reference(stored: dict):
    """(reference, select) for examples_matrix.check() from references()'s arrays: the stored values, and a
    result's elements at the stored positions. Refuses inputs other than those the values were computed from
    (a build from another tree), and a result of another shape."""
    def reference(name: str, args: list) -> tuple:
        if str(stored[f"{name}:inputs"]) != str(digest(args)):
            raise AssertionError(f"{name}: the inputs are not the ones the stored results were computed from "
                                 "(rebuild the images with this tree: tests/gpu/build_images.py)")
        if f"{name}:refused" in stored:
            raise AssertionError(f"{name} ran on inputs the interpreter refused: {stored[f'{name}:refused']}")
        count = sum(1 for k in stored if k.startswith(f"{name}:out"))
        return tuple(stored[f"{name}:out{i}"] for i in range(count))

    def select(name: str, i: int, result) -> np.ndarray:
        result = np.asarray(result)
        shape = tuple(int(d) for d in stored[f"{name}:shape{i}"])
        if result.shape != shape:
            raise AssertionError(f"{name} result {i}: shape {result.shape}, the interpreter's {shape}")
        return result.ravel()[stored[f"{name}:at{i}"]]

    return reference, select


def launch_references(launches: list[dict]) -> dict[str, np.ndarray]:
    """The arrays stored for a file of SIMT @kernels (examples_matrix.launches_of): each launch's inputs' digest
    as "<launch>:inputs" and the array each `expect` position must hold as "<launch>:expect<position>", the
    launch named by examples_matrix.launch_name. Its launches' arguments are small (the file chose them)."""
    from tessera.tools import examples_matrix as em
    out = {}
    for index, launch in enumerate(launches):
        name = em.launch_name(index, launch)
        out[f"{name}:inputs"] = digest([np.asarray(a) for a in launch["args"]])
        out.update({f"{name}:expect{p}": np.asarray(want) for p, want in launch["expect"].items()})
    return out


def stored_expected(stored: dict, launches: list[dict]):
    """expected(name, position) for examples_matrix.run_launches from launch_references()'s arrays, after
    checking that `launches` (regenerated here from the example) are the ones the values were stored for."""
    from tessera.tools import examples_matrix as em
    for index, launch in enumerate(launches):
        name = em.launch_name(index, launch)
        if f"{name}:inputs" not in stored or \
                str(stored[f"{name}:inputs"]) != str(digest([np.asarray(a) for a in launch["args"]])):
            raise AssertionError(f"{name}: the inputs are not the ones the stored results were computed from "
                                 "(rebuild the images with this tree: tests/gpu/build_images.py)")

    def expected(name: str, position: int) -> np.ndarray:
        return stored[f"{name}:expect{position}"]

    return expected


def build(out: str, target: str = TARGET, arch: str = ARCH, only: list[str] | None = None) -> dict[str, str]:
    """Compiles every example (or those of `only`) for target/arch into out/examples_gpu/<stem>.tessera, the interpreter's results
    (or a kernel file's declared launches' expected arrays) beside it (<stem>.npz), and the manifest of what was built or refused (tests/gpu/build_images.py)."""
    from tessera import plan as plans  # lazy: the compiler, where the images are built
    from tessera.image import read_image
    from tessera.tools import examples_matrix as em
    folder = os.path.join(out, FOLDER)
    os.makedirs(folder, exist_ok=True)
    manifest = {}
    for path in em.examples():
        example = em.name_of(path)
        if only is not None and example not in only:
            continue
        cell = em.compile_cell(path, target, arch)
        if cell.status == "refused":
            manifest[example] = cell.text()
            continue
        manifest[example] = ""
        with open(os.path.join(folder, f"{stem(example)}.tessera"), "wb") as f:
            f.write(cell.image)
        section = read_image(cell.image).plan
        functions = plans.decode(section) if section is not None else {}
        launches = None if functions else em.launches_of(path)   # a file of @kernels: its declared launches
        stored = launch_references(launches) if launches else references(functions, em.interpreter_results(path))
        np.savez(os.path.join(folder, f"{stem(example)}.npz"), **stored)
        print(f"{FOLDER}/{stem(example)}.tessera ({target} {arch}, {len(functions)} functions"
              + (f", {len(launches)} kernel launches)" if launches else ")"))
    with open(os.path.join(folder, MANIFEST), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
    return manifest
