"""Helpers the C-host tests import by name (conftest.py is not importable by name once several test folders
have one)."""

import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def run(cmd, **kw):
    """Runs a command; on failure, fails the test with its output."""
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if p.returncode != 0:
        pytest.fail(f"{' '.join(map(str, cmd))} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p
