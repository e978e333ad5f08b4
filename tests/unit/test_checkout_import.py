"""Importing tessera from a source checkout that is not the installed package stops with what to do."""

import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]

# The situation after a non-editable `pip install .`: nothing maps the checkout's dialects/ (or passes/ …)
# into tessera.*, so scikit-build-core's editable finder, which does here, is taken out of the way.
NO_EDITABLE_FINDER = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in "
                      "type(f).__module__.lower() and 'scikit' not in type(f).__module__.lower()]")


def test_import_from_an_unmapped_checkout_says_what_to_do(tmp_path):
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT / "tessera", checkout / "tessera", ignore=shutil.ignore_patterns("__pycache__"))
    (checkout / "dialects").mkdir()
    # Python as a user starts it in the checkout, the working directory first on sys.path (tests/conftest.py
    # sets PYTHONSAFEPATH for the other tests' children).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}
    p = subprocess.run([sys.executable, "-c", f"{NO_EDITABLE_FINDER}; import tessera"], cwd=checkout,
                       capture_output=True, text=True, env=env)
    assert p.returncode != 0
    last = p.stderr.strip().splitlines()[-1]
    assert last == (f"ImportError: tessera is being imported from the source checkout at {checkout}, which is "
                    f"not the installed package: run `pip install -e .` there, or run from another directory")
    assert "language.py" not in p.stderr   # stopped before importing anything of the package
