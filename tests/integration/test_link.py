"""`flagtree-cpu link`: FlagTree's 12 links, exactly as its own script makes them, and nothing else."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.cli import Workspace, new_workspace, synced_workspace
from tests.support.envelope import result_of
from tests.support.facts import FACTS_LINKS
from tests.support.fixes import without_context
from tests.support.gitworld import GitWorld


@pytest.fixture
def ws(world: GitWorld, tmp_path: Path) -> Workspace:
    return synced_workspace(world, tmp_path / "ws")


def links_now(ws: Workspace) -> dict[str, str | None]:
    return {path: (os.readlink(ws.flagtree / path) if (ws.flagtree / path).is_symlink() else None)
            for path, _target in FACTS_LINKS}


def test_creates_the_twelve_links_of_flagtrees_script(ws: Workspace) -> None:
    result = ws.run("link")
    assert result.exit_code == 0, result.stderr
    assert links_now(ws) == dict(FACTS_LINKS)  # path and readlink text, as link_flagtree_cpu.sh makes them
    for path, _target in FACTS_LINKS:
        assert (ws.flagtree / path).exists(), path  # every link resolves
    assert "12 created" in result.stderr  # said after the fact, in the past tense
    # what the build needs is reachable through the links
    assert "add_neon_sdot_to_llvmir" in (ws.flagtree / "third_party/cpu/triton_cpu.cc").read_text()
    assert (ws.flagtree / "python/triton/language/extra/cpu/tle_ops.py").is_file()


def test_second_run_changes_nothing(ws: Workspace) -> None:
    ws.run("link")
    before = {p: os.lstat(ws.flagtree / p).st_mtime_ns for p, _ in FACTS_LINKS}
    result = ws.run("link")
    assert result.exit_code == 0
    assert "12 ok" in result.stderr
    assert {p: os.lstat(ws.flagtree / p).st_mtime_ns for p, _ in FACTS_LINKS} == before


def test_a_wrong_symlink_is_updated(ws: Workspace) -> None:
    ws.run("link")
    sleef = ws.flagtree / "third_party/sleef"
    sleef.unlink()
    os.symlink("../cmake", sleef)  # exists, but is the wrong place
    result = ws.run("link")
    assert result.exit_code == 0, result.stderr
    assert os.readlink(sleef) == "triton-cpu/third_party/sleef"
    assert "1 update" in result.stderr


def test_conflicts_are_all_listed_and_nothing_is_changed(ws: Workspace) -> None:
    (ws.flagtree / "third_party/sleef").mkdir()
    (ws.flagtree / "third_party/sleef/mine.c").write_text("int x;\n")
    (ws.flagtree / "third_party/cpu/triton_cpu.cc").write_text("// my own file\n")
    result = ws.run("link")
    assert result.exit_code == 3
    assert "2 of 12 links cannot be made" in result.stderr and "nothing was changed" in result.stderr
    assert "conflict: third_party/sleef — a folder is in the way" in result.stderr
    assert "conflict: third_party/cpu/triton_cpu.cc — a regular file is in the way" in result.stderr
    assert (ws.flagtree / "third_party/sleef/mine.c").read_text() == "int x;\n"
    assert (ws.flagtree / "third_party/cpu/triton_cpu.cc").read_text() == "// my own file\n"
    assert all(target is None for target in links_now(ws).values())  # not even the free ones


def test_dangling_targets_are_refused_with_the_reason(ws: Workspace) -> None:
    ws.flagtree_cpu.rename(ws.root / "moved-away")
    result = ws.run("link")
    assert result.exit_code == 3
    assert "dangling: include/triton/Dialect/TritonCPU" in result.stderr
    assert "flagtree-cpu, which is not checked out: run `flagtree-cpu sync`" in result.stderr
    assert all(target is None for target in links_now(ws).values())


def test_an_absolute_link_to_the_same_place_is_left_as_the_build_made_it(ws: Workspace) -> None:
    ws.run("link")
    extra_cpu = ws.flagtree / "python/triton/language/extra/cpu"
    absolute = str((ws.flagtree / "third_party/cpu/language/cpu").resolve())
    extra_cpu.unlink()
    os.symlink(absolute, extra_cpu)  # what FlagTree's setup.py does during pip install -e
    check = ws.run("link", "--check")
    assert check.exit_code == 0, check.stderr
    assert "absolute, same place" in check.stderr
    assert ws.run("link").exit_code == 0
    assert os.readlink(extra_cpu) == absolute


def test_symlinks_that_are_not_in_the_recipe_are_never_touched(ws: Workspace) -> None:
    tracked = ws.flagtree / "python/triton/_C/include"  # FlagTree's own tracked symlink
    mine = ws.flagtree / "third_party/cpu/my-link"
    os.symlink("../../README.md", mine)
    backends_cpu = ws.flagtree / "python/triton/backends/cpu"  # setup.py adds this absolute one
    backends_cpu.parent.mkdir(parents=True, exist_ok=True)  # tracked: it holds __init__.py
    os.symlink(str(ws.flagtree / "third_party/cpu/backend"), backends_cpu)
    before = {p: os.readlink(p) for p in (tracked, mine, backends_cpu)}
    assert ws.run("link").exit_code == 0
    assert ws.run("link").exit_code == 0
    assert {p: os.readlink(p) for p in (tracked, mine, backends_cpu)} == before


def test_a_folder_leading_outside_the_tree_is_a_conflict(ws: Workspace, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    language = ws.flagtree / "third_party/cpu/language"
    (ws.flagtree / "third_party/cpu/language.orig").mkdir()
    for child in language.iterdir():
        child.rename(ws.flagtree / "third_party/cpu/language.orig" / child.name)
    language.rmdir()
    os.symlink(outside, language)
    result = ws.run("link")
    assert result.exit_code == 3
    assert "leads outside" in result.stderr
    assert list(outside.iterdir()) == []  # nothing was written outside the tree


def test_check_and_dry_run_change_nothing(ws: Workspace) -> None:
    check = ws.run("link", "--check")
    assert check.exit_code == 3
    assert "12 of 12 links are not as the recipe says" in check.stderr
    dry = ws.run("link", "--dry-run")
    assert dry.exit_code == 0 and "12 create" in dry.stderr
    assert all(target is None for target in links_now(ws).values())
    ws.run("link")
    assert ws.run("link", "--check").exit_code == 0


def test_link_before_sync_says_what_to_do(world: GitWorld, tmp_path: Path) -> None:
    result = new_workspace(world, tmp_path / "empty").run("link")
    assert result.exit_code == 3
    assert "not checked out" in result.stderr and "flagtree-cpu sync" in without_context(result.stderr)


def test_json_plan(ws: Workspace) -> None:
    result = ws.run("link", "--dry-run", "--json")
    plan = result_of(result.stdout)
    assert [(e["path"], e["target"], e["state"]) for e in plan["links"]] == \
        [(path, target, "create") for path, target in FACTS_LINKS]


def test_a_link_named_after_the_target_interpreter_is_made_as_filled_in(ws: Workspace) -> None:
    import sysconfig

    entry = "links.entries=[{path: 'build-{python.version}', target: 'python/build/cmake.{platform.tag}'}]"
    (ws.flagtree / "python/build" / f"cmake.{sysconfig.get_platform()}").mkdir(parents=True)
    result = ws.run("link", sets=(entry,))  # no workspace venv yet: the running interpreter's values
    assert result.exit_code == 0, result.stderr
    link = ws.flagtree / f"build-{sysconfig.get_python_version()}"
    assert os.readlink(link) == f"python/build/cmake.{sysconfig.get_platform()}"
