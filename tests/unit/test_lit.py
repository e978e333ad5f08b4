"""Runs the lit/FileCheck IR regression suite (tests/lit) as part of pytest."""

import os
import subprocess
import sys

LIT_DIR = os.path.join(os.path.dirname(__file__), os.pardir, "lit")


def test_lit_suite():
    # lit has no __main__; run its entry point with this interpreter so the tools come from this environment.
    r = subprocess.run([sys.executable, "-c", "import sys; from lit.main import main; sys.exit(main())", "-sv", LIT_DIR],
                       capture_output=True, text=True)
    assert r.returncode == 0, f"lit failed:\n{r.stdout[-20000:]}\n{r.stderr[-5000:]}"
    assert "Passed" in r.stdout
