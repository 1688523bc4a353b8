"""`bundle create` reads which requirement pip found no wheel for, and which requirement needs it, from pip's
own words, as each pip version writes them (the texts below are pip's output, copied from real runs).

pip 23.2 is what `python3.11 -m venv` brings, so a tool installed into such a venv runs it: it names the
parent on the "Could not find a version" line only, and `bundle create` used to stop there with "no wheel of
fixture-src" instead of taking its source distribution.
"""

from __future__ import annotations

import pytest

from flagtree_cpu_build.bundle.wheelhouse import _no_wheel_for

PIP_23_2 = """\
Collecting fixture-app
  Downloading http://127.0.0.1:42617/pypi/files/fixture_app-1.0-py3-none-any.whl (1.0 kB)
INFO: pip is looking at multiple versions of fixture-app to determine which version is compatible with other \
requirements. This could take a while.
ERROR: Could not find a version that satisfies the requirement fixture-src (from fixture-app) (from versions: none)
ERROR: No matching distribution found for fixture-src
"""
PIP_26_3 = """\
ERROR: Could not find a version that satisfies the requirement fixture-src (from fixture-app) (from versions: none)
ERROR: No matching distribution found for fixture-src (from fixture-app)
"""
OWN_REQUIREMENT = """\
ERROR: Could not find a version that satisfies the requirement fixture-src (from versions: none)
ERROR: No matching distribution found for fixture-src
"""


@pytest.mark.parametrize("output", [PIP_23_2, PIP_26_3], ids=["pip-23.2", "pip-26.3"])
def test_the_requirement_without_a_wheel_and_its_parent_are_read_from_either_pip(output: str) -> None:
    assert _no_wheel_for(output) == ("fixture-src", "fixture-app")


def test_a_requirement_of_the_recipe_itself_has_no_parent() -> None:
    assert _no_wheel_for(OWN_REQUIREMENT) == ("fixture-src", None)


def test_the_versions_pip_saw_are_not_taken_for_a_parent() -> None:
    output = "ERROR: Could not find a version that satisfies the requirement torch==9 (from versions: 2.0, 2.1)\n"
    assert _no_wheel_for(output) == ("torch==9", None)


def test_output_without_such_a_line_names_nothing() -> None:
    assert _no_wheel_for("ERROR: HTTP error 503 while getting http://127.0.0.1:9/simple/x/\n") == (None, None)
