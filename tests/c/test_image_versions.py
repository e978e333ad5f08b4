"""The C loader's reading of the IR version note (runtime/src/image.c; docs/image-format.md, "Versions"): it
reads the versions the version fixtures record (tests/data), and refuses launch plans of another version, or of
an image that records none, naming both versions — as tessera/image/reader.py does."""
import sys

import pytest

from hostutil import HERE, REPO, run
from tessera import plan

sys.path.insert(0, str(REPO / "tests" / "unit"))
from test_fixtures import DATA, FIXTURES, _bytes, _patched  # noqa: E402

SOURCES = [REPO / "runtime" / "src" / f for f in ("image.c", "status.c")]


@pytest.fixture(scope="module")
def tool(cc, tmp_path_factory):
    exe = tmp_path_factory.mktemp("image_versions") / "image_versions"
    run([cc, "-std=c11", "-g", "-O1", "-Wall", "-Wextra", "-Werror", "-D_POSIX_C_SOURCE=200809L",
         "-DTSR_BUILDING_LIBRARY", f"-I{REPO / 'runtime' / 'include'}", f"-I{REPO / 'runtime' / 'src'}",
         HERE / "image_versions.c", *SOURCES, "-o", exe, "-pthread"])
    return exe


def read(tool, tmp_path, data: bytes) -> list[str]:
    path = tmp_path / "image.tessera"
    path.write_bytes(data)
    import subprocess
    p = subprocess.run([str(tool), str(path)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout.splitlines()


@pytest.mark.parametrize("name", FIXTURES)
def test_c_reads_the_fixtures_versions(tool, tmp_path, name):
    assert read(tool, tmp_path, (DATA / name).read_bytes()) == ["versions 1.0 6 3", "plan OK"]


def test_c_refuses_other_plan_versions_by_name(tool, tmp_path):
    out = read(tool, tmp_path, _patched(_bytes("function.cpu.tessera"), plan_version=plan.VERSION + 1))
    assert out[0] == f"versions 1.0 6 {plan.VERSION + 1}"
    assert out[1].startswith("plan ERR") and f"version {plan.VERSION + 1}" in out[1] and \
        f"version {min(plan.READS)} or version {plan.VERSION}" in out[1]
    out = read(tool, tmp_path, _patched(_bytes("function.cpu.tessera"), drop=True))
    assert out[0] == "versions none"
    assert "version 0" in out[1] and f"version {plan.VERSION}" in out[1]
