"""Why the build would run is a value, and its words are made from it in one place (``build_stamp.say``): `build`
says "sources.flagtree.commit changed: ...", the dry run says "flagtree moves ...", from the same ``Changed``.
Nothing parses those words back."""

from __future__ import annotations

from pathlib import Path

import pytest

from flagtree_cpu_build.build_stamp import (
    Changed,
    CreatesMissing,
    EnvUnreadable,
    Forced,
    InputsNotReady,
    NoInterpreter,
    NoPreviousBuild,
    NotInstalled,
    PrerequisitesMissing,
    ProductsMissing,
    Unresolved,
    WheelGone,
    say,
    stale_reasons,
)
from flagtree_cpu_build.host import HostFacts
from flagtree_cpu_build.placeholders import placeholder_values
from flagtree_cpu_build.pythonenv import PythonReport
from flagtree_cpu_build.recipe import resolve, select_variants
from flagtree_cpu_build.recipe.files import load_recipe
from flagtree_cpu_build.stagekit.stage import StageContext
from flagtree_cpu_build.stages.build.plan import BuildPlan, _item
from flagtree_cpu_build.ui import UI
from flagtree_cpu_build.workspace import Workspace

BOARD = HostFacts("linux", "aarch64", "ubuntu", "24.04", "Ubuntu", 12, 32 * 2**30, 20 * 2**30)
OLD, NEW = "3911e5b" + "a" * 33, "54d33a5" + "b" * 33
LLVM_OLD, LLVM_NEW = "1" * 64, "2" * 64


@pytest.fixture
def ctx(tmp_path: Path) -> StageContext:
    recipe = select_variants(load_recipe("flagtree-cpu-arm64"), BOARD.os_id, BOARD.arch)
    ws = Workspace(tmp_path / "ws")
    recipe = resolve(recipe, ws.root, placeholder_values(recipe, ws, BOARD, {"HOME": str(tmp_path)}))
    return StageContext(recipe, ws, BOARD, UI(quiet=True))


def components(commit: str, llvm: str, proton: str) -> dict:
    return {"mode": "editable", "sources": {"flagtree": {"commit": commit, "local_changes": None}},
            "artifacts": {"llvm": llvm}, "env": {"TRITON_BUILD_PROTON": proton}}


def test_a_moved_pin_is_a_changed_value_holding_both_whole_commits(ctx: StageContext, tmp_path: Path) -> None:
    python = tmp_path / "no-interpreter-here"  # nothing to ask it: the recipe's steps verify nothing
    report = PythonReport(python, "3.11.7", (), {})
    stored = {"digest": "d" * 64, "components": components(OLD, LLVM_OLD, "OFF"), "products": []}
    reasons = stale_reasons(ctx, python, stored, components(NEW, LLVM_NEW, "ON"), report)
    assert reasons == (Changed(("artifacts", "llvm"), LLVM_OLD, LLVM_NEW),
                       Changed(("env", "TRITON_BUILD_PROTON"), "OFF", "ON"),
                       Changed(("sources", "flagtree", "commit"), OLD, NEW))
    moved = reasons[2]
    assert (moved.key[1], moved.old, moved.new) == ("flagtree", OLD, NEW)  # read from the value, not from words


def test_the_words_of_one_change_are_made_for_the_build_and_for_the_dry_run() -> None:
    moved = Changed(("sources", "flagtree", "commit"), OLD, NEW)
    assert say(moved) == f"sources.flagtree.commit changed: {OLD[:12]} -> {NEW[:12]}"
    assert say(moved, ahead=True) == "flagtree moves 3911e5b -> 54d33a5"
    assert say(Changed(("artifacts", "llvm"), LLVM_OLD, LLVM_NEW), ahead=True) == "llvm changed (1111111 -> 2222222)"
    # a change no stage above brings is said as it is, ahead or not
    proton = Changed(("env", "TRITON_BUILD_PROTON"), "OFF", "ON")
    assert say(proton, ahead=True) == say(proton) == "env.TRITON_BUILD_PROTON changed: OFF -> ON"
    # a source that is new in the stamp: its old commit is None
    assert say(Changed(("sources", "extra", "commit"), None, NEW), ahead=True) == "extra moves None -> 54d33a5"


def test_every_reason_says_what_it_holds(tmp_path: Path) -> None:
    python = tmp_path / "venv" / "bin" / "python"
    said = {
        Forced(): "--force",
        NoPreviousBuild(): "no previous build",
        ProductsMissing(("/ws/a.so", "/ws/b.so")): "build products are missing: /ws/a.so, /ws/b.so",
        CreatesMissing(("step prepare: x.txt",)): "what the steps create is missing: step prepare: x.txt",
        NotInstalled("triton", python): f"triton is not installed in {python}",
        WheelGone("/ws/dist/t.whl"): "the wheel /ws/dist/t.whl is gone",
        InputsNotReady(("source flagtree: not checked out — run `flagtree-cpu sync`", "artifact llvm: ...")):
            "its inputs are not ready: source flagtree: not checked out",
        NoInterpreter(python): f"there is no interpreter at {python} yet",
        PrerequisitesMissing(("pybind11", "ninja")):
            "build prerequisites are missing or of the wrong version: pybind11, ninja",
        EnvUnreadable("/ws/env.sh is missing"): "its environment cannot be made yet: /ws/env.sh is missing",
        Unresolved("sources", "flagtree", "resolve main"): "flagtree is resolved again (resolve main)",
        Unresolved("artifacts", "llvm", "download"): "llvm has no known sha256 yet",
    }
    for reason, words in said.items():
        assert say(reason) == say(reason, ahead=True) == words, reason


def test_the_plan_item_carries_the_values_and_shows_their_words(tmp_path: Path) -> None:
    moved = Changed(("sources", "flagtree", "commit"), OLD, NEW)
    facts = BuildPlan("editable", tmp_path / "build-editable.json", {"digest": "d" * 64, "components": {}},
                      (moved, ProductsMissing(("/ws/a.so",))))
    ahead = _item(facts, ready=False, asked="")  # the dry run, before sync moves the pin
    assert ahead.facts is facts and ahead.facts.reasons[0] is moved  # what the run acts on: the values themselves
    assert ahead.reason == "flagtree moves 3911e5b -> 54d33a5; build products are missing: /ws/a.so"
    now = _item(facts, ready=True, asked="")
    assert now.to_json()["reasons"] == [say(moved), "build products are missing: /ws/a.so"]
    assert "facts" not in now.to_json() and now.will == "updated"
