"""Shell completion through Click's own machinery, in a real process (as bash's `complete -F` runs it): values
follow the active recipe, and --variant, doctor --only and `recipe show NAME` complete."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]


def complete(line: str, **env: str) -> list[str]:
    """What bash would be offered for the last word of ``line`` (a trailing space: a new, empty word)."""
    words = line.split()
    cword = len(words) if line.endswith(" ") else len(words) - 1
    done = subprocess.run([sys.executable, "-m", "flagtree_cpu_build"], cwd=CHECKOUT, capture_output=True, text=True,
                          timeout=600, check=False,
                          env={**os.environ, **env, "_FLAGTREE_CPU_COMPLETE": "complete_bash",
                               "COMP_WORDS": line, "COMP_CWORD": str(cword)})
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.parametrize("flag", ["--only", "--kernel"])
def test_validate_check_names_follow_the_recipe_option(flag):
    default = complete(f"flagtree-cpu validate {flag} ")
    assert "vector-add" in default and "softmax" in default
    torch_fl = complete(f"flagtree-cpu --recipe torch-fl validate {flag} ")
    assert "device-count" in torch_fl and "unit-tests" in torch_fl
    assert "vector-add" not in torch_fl
    assert complete(f"flagtree-cpu --recipe torch-fl validate {flag} unit") == ["unit-tests"]


def test_validate_check_names_follow_the_recipe_environment_variable():
    offered = complete("flagtree-cpu validate --only ", FLAGTREE_CPU_RECIPE="torch-fl")
    assert "device-count" in offered and "vector-add" not in offered


def test_variant_offers_the_active_recipes_variants():
    assert sorted(complete("flagtree-cpu --recipe torch-fl --variant ")) == ["ascend", "cuda", "metax"]
    assert complete("flagtree-cpu --recipe torch-fl --variant me") == ["metax"]
    assert complete("flagtree-cpu --recipe triton-cpu --variant ") == []  # a recipe without variants


def test_doctor_only_offers_the_check_ids():
    offered = complete("flagtree-cpu doctor --only cpu.")
    assert "cpu.features" in offered and "cpu.governor" in offered
    assert all(o.startswith("cpu.") for o in offered)


def test_recipe_show_offers_recipe_names_including_user_recipes(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "my-minimal.yaml").write_text((CHECKOUT / "tests/fixtures/recipes/valid/minimal.yaml").read_text())
    assert complete("flagtree-cpu recipe show triton") == ["triton-cpu"]
    offered = complete(f"flagtree-cpu --recipes-dir {folder} recipe show ")
    assert "flagtree-cpu-arm64" in offered and "torch-fl" in offered and "my-minimal" in offered


def test_an_unreadable_recipe_completes_nothing_and_prints_no_error(tmp_path):
    assert complete(f"flagtree-cpu --recipe {tmp_path / 'absent.yaml'} validate --only ") == []
