"""The timing half of a split autotuning search on a CUDA device (tessera/tune_run.py): candidates exported
where the compiler is (tune_split_gpu.py), timed here through the runtime alone, every candidate timed and the
fastest confirmed; where the compiler is here too, the records imported and the choice compiled in."""

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import tune_split_gpu  # noqa: E402


@pytest.mark.parametrize("name", list(tune_split_gpu.SPACES))
def test_candidates_are_timed_on_the_device(cuda, tmp_path, monkeypatch, name):
    from tessera import tune_run
    root, built_here = tune_split_gpu.candidates(tmp_path)
    folder = root / name
    records = tune_run.run(folder, repeat=2)
    assert records["device"].endswith(f"({cuda.properties['arch']})") and records["keys"][0]["arch"] == "sm_90a"
    assert len(records["trials"]) == 4 and all(0 < t["seconds"] < 1 for t in records["trials"])
    assert sum("confirmed" in t for t in records["trials"]) == 3
    if not built_here:
        return   # the import half is the compiler's that made the candidates
    from tessera import autotune, compiler
    from tessera.image import read_image
    from tessera.options import CompileOptions
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TESSERA_TUNE_DIR", raising=False)
    (_, config), = autotune.import_records(records)
    image = compiler.compile_file(str(folder.parent / "tune_split.py"),
                                  CompileOptions(kernels=(name,), target="ptx", arch="sm_90a")).image
    assert read_image(image).kernels[0].props["autotune"] == \
        "stored: " + " ".join(f"{k}={v}" for k, v in sorted(config.items()))
