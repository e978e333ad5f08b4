"""Barriers, cooperative groups and lane reductions on CUDA: tests/unit/group_checks.py (bar.sync,
bar.warp.sync on a group's lanes, shfl.sync butterflies of i32 and f64) on the kernels compiled for sm_80 and
sm_90a, and examples/tile/cooperative.py, all against numpy."""

import importlib.util
import pathlib

import pytest

_spec = importlib.util.spec_from_file_location("group_checks", pathlib.Path(__file__).parents[1] / "unit" / "group_checks.py")
checks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(checks)


@pytest.mark.parametrize("image", ["groups", "groups_sm90a"])
@pytest.mark.parametrize("check", checks.CHECKS, ids=lambda c: c.__name__)
def test_group_kernels(load, cuda, image, check):
    check(checks.device_launcher(load(image), cuda))


def test_cooperative_example(load, cuda):
    checks.check_example(checks.device_launcher(load("cooperative"), cuda))
