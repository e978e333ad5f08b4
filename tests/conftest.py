"""Shared by every test directory: the Pythons the tests start never see the checkout's tessera/.

The tests run against the installed package (README: `pip install '.[test]' && pytest`). A child started
with `python -m …` or `python -c …` in the repository root would find the root first on sys.path, where
tessera/ lacks the packages an install maps into it (tessera.dialects …) and stops with an ImportError.
PYTHONSAFEPATH (Python 3.11+) keeps the working directory and a script's own folder off every child's
sys.path; a script that needs its folder adds it itself (tests/gpu/build_images.py)."""

import os

os.environ["PYTHONSAFEPATH"] = "1"
# Stored autotuning results change the schedules compiles take (tessera/tuning.py): the tests read none of
# the developer's (a place that does not exist); tests/unit/test_autotune.py stores its own.
os.environ["TESSERA_TUNE_DIR"] = os.path.join(os.path.dirname(__file__), ".no-tuning-results")
