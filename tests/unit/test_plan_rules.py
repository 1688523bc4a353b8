"""The "current" rules every reader shares (plans): which commit a source must be at, when a published
artifact is the expected one, and what a stage as a whole would report."""

from __future__ import annotations

from flagtree_cpu_build.lockfile import SourceLock
from flagtree_cpu_build.recipe import Source
from flagtree_cpu_build.stagekit.plan import PlanItem, stage_will
from flagtree_cpu_build.stages.artifacts.plan import is_current
from flagtree_cpu_build.stages.sources.plan import wanted_commit

URL = "https://github.com/flagos-ai/flagtree-cpu.git"
A, B = "a" * 40, "b" * 40
SHA = "c" * 64


def test_the_recipe_pin_wins_over_the_lock() -> None:
    assert wanted_commit(Source(url=URL, ref="main", commit=A.upper()), SourceLock(url=URL, ref="main", commit=B)) == A


def test_the_lock_answers_only_for_the_same_repository_and_ref() -> None:
    source = Source(url=URL, ref="main")
    assert wanted_commit(source, SourceLock(url=URL + "/", ref="main", commit=B)) == B  # the same repository
    assert wanted_commit(source, SourceLock(url=URL, ref="release", commit=B)) is None  # a changed ref: ask again
    assert wanted_commit(source, SourceLock(url="https://example.org/fork.git", ref="main", commit=B)) is None
    assert wanted_commit(source, None) is None
    assert wanted_commit(source, SourceLock(url=URL, ref="main", commit=B), update=True) is None  # setup --update


def test_a_published_artifact_is_current_by_its_digest_not_its_url() -> None:
    stamp = {"url": "https://old.example/llvm.tar.gz", "sha256": SHA}
    assert is_current(stamp, SHA, "https://mirror.example/llvm.tar.gz")  # same bytes from another URL
    assert not is_current(stamp, "d" * 64, "https://old.example/llvm.tar.gz")
    assert is_current(stamp, None, "https://old.example/llvm.tar.gz")  # nothing expected yet: the URL decides
    assert not is_current(stamp, None, "https://mirror.example/llvm.tar.gz")
    assert not is_current(None, SHA, "https://old.example/llvm.tar.gz")


def test_a_stage_reports_its_biggest_change_and_a_stop_outranks_everything() -> None:
    def item(will: str) -> PlanItem:
        return PlanItem("sources", will, "ok", "", will=will)  # type: ignore[arg-type]

    assert stage_will([]) is None
    assert stage_will([item("ok"), item("skipped")]) == "ok"
    assert stage_will([item("ok"), item("updated"), item("created")]) == "created"
    assert stage_will([item("created"), item("stop")]) == "stop"
