"""A half-made folder the next run meets while something still writes into it — a git that outlived an older
flagtree-cpu, or one that a killed run's watcher is still stopping: the run waits for the writer (bounded),
or names it and exits 8; it never races it into exit 1 "Directory not empty". Real writer processes.

Clones and mirrors are half made in ``partials`` folders (``.<name>.flagtree-cpu-partial-<pid>``, with an owner
record); the names the previous release used (``.<name>.flagtree-cpu-partial``, ``<mirror>.partial``) are still
found and removed the same way, so a workspace that release left behind is cleaned up too."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flagtree_cpu_build.cli import app
from tests.support.cli import Workspace, new_workspace
from tests.support.gitworld import GitWorld
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.interrupt import wait_until
from tests.support.leftovers import killed_partial
from tests.support.tarballs import zip_with

# Writes small files into FOLDER's subfolders as fast as a checkout does, for SECONDS; "inside": from a current
# folder inside FOLDER (as git works in its repository); "outside": by absolute paths, holding nothing open
# between writes. It never re-creates FOLDER itself: an orphaned git fails its writes once its folder is gone.
WRITER = r"""
import os, sys, time
folder, seconds, where = sys.argv[1], float(sys.argv[2]), sys.argv[3]
if where == "inside":
    os.chdir(folder)
    folder = "."
end, i = time.monotonic() + seconds, 0
while time.monotonic() < end:
    sub = os.path.join(folder, f"d{i % 7}")
    try:
        if not os.path.isdir(sub):
            os.mkdir(sub)
        with open(os.path.join(sub, f"f{i}"), "w") as f:
            f.write("x")
    except OSError:
        pass
    i += 1
    time.sleep(0.0005)
"""


@pytest.fixture
def ws(world: GitWorld, tmp_path: Path) -> Workspace:
    return new_workspace(world, tmp_path / "ws")


@pytest.fixture
def writers() -> Iterator[list[subprocess.Popen]]:
    started: list[subprocess.Popen] = []
    yield started
    for writer in started:
        writer.kill()
        writer.wait()


def start_writer(writers: list[subprocess.Popen], folder: Path, seconds: float, where: str) -> subprocess.Popen:
    folder.mkdir(parents=True, exist_ok=True)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(folder), str(seconds), where])
    writers.append(writer)
    wait_until(lambda: len(list(folder.rglob("f*"))) >= 20, 30, "the writer to be writing")
    return writer


def half_made_clone(ws: Workspace) -> Path:
    return ws.root / ".FlagTree.flagtree-cpu-partial"  # the previous release's name


def test_a_killed_runs_half_made_clone_its_git_still_writes_is_waited_for_then_removed(ws: Workspace,
                                                                                      writers) -> None:
    left = killed_partial(ws.flagtree)  # this version's folder, the owner record of a SIGKILLed run
    writer = start_writer(writers, left / "FlagTree", 3, "inside")  # the git that outlived it
    result = ws.run("sync")
    assert result.exit_code == 0, result.stderr
    assert f"waiting for pid {writer.pid} (" in result.stderr and writer.poll() is not None
    assert ws.head(ws.flagtree) == ws.flagtree_commit and not left.exists()
    assert not list(ws.root.glob(".*flagtree-cpu-*"))


def test_a_half_made_clone_still_being_written_is_waited_for_then_replaced(ws: Workspace, writers) -> None:
    writer = start_writer(writers, half_made_clone(ws), 3, "inside")
    result = ws.run("sync")
    assert result.exit_code == 0, result.stderr
    assert f"waiting for pid {writer.pid} (" in result.stderr and "to stop writing into" in result.stderr
    assert writer.poll() is not None  # it was waited for, not raced
    assert ws.head(ws.flagtree) == ws.flagtree_commit and not half_made_clone(ws).exists()


def test_a_writer_that_holds_nothing_open_does_not_make_the_removal_fail(ws: Workspace, writers) -> None:
    start_writer(writers, half_made_clone(ws), 3, "outside")  # no current folder or open file to find it by
    result = ws.run("sync")
    assert result.exit_code == 0, result.stderr
    assert ws.head(ws.flagtree) == ws.flagtree_commit and not half_made_clone(ws).exists()


def test_a_half_made_clone_whose_writer_never_stops_is_named_and_exit_8(ws: Workspace, writers) -> None:
    writer = start_writer(writers, half_made_clone(ws), 3600, "inside")
    result = ws.run("sync")
    assert result.exit_code == 8, result.stderr
    assert f"{half_made_clone(ws)} (an interrupted clone of flagtree) is still being written by pid {writer.pid} (" \
        in result.stderr
    assert f"kill {writer.pid}" in result.stderr and "Traceback" not in result.stderr
    assert half_made_clone(ws).is_dir() and writer.poll() is None  # left alone, and so is its writer

    writer.kill()
    writer.wait()
    again = ws.run("sync")
    assert again.exit_code == 0, again.stderr
    assert not half_made_clone(ws).exists()


def test_a_half_made_git_cache_mirror_still_being_written_is_waited_for(ws: Workspace, writers, world: GitWorld,
                                                                        tmp_path: Path) -> None:
    cache = tmp_path / "git-cache"
    assert ws.run("sync", "--git-cache", str(cache)).exit_code == 0
    mirror = next(cache.glob("FlagTree-*.git"))
    mirror.rename(mirror.with_name(mirror.name + ".moved"))  # a second workspace must mirror FlagTree again
    writer = start_writer(writers, mirror.with_name(mirror.name + ".partial"), 3, "inside")
    second = new_workspace(world, tmp_path / "ws2")
    result = second.run("sync", "--git-cache", str(cache))
    assert result.exit_code == 0, result.stderr
    assert f"waiting for pid {writer.pid} (" in result.stderr
    assert (mirror / "HEAD").is_file() and not mirror.with_name(mirror.name + ".partial").exists()


def test_a_killed_runs_half_made_mirror_still_being_written_is_waited_for(ws: Workspace, writers, world: GitWorld,
                                                                          tmp_path: Path) -> None:
    cache = tmp_path / "git-cache"
    assert ws.run("sync", "--git-cache", str(cache)).exit_code == 0
    mirror = next(cache.glob("FlagTree-*.git"))
    mirror.rename(mirror.with_name(mirror.name + ".moved"))  # a second workspace must mirror FlagTree again
    left = killed_partial(mirror)
    writer = start_writer(writers, left / mirror.name, 3, "inside")
    result = new_workspace(world, tmp_path / "ws2").run("sync", "--git-cache", str(cache))
    assert result.exit_code == 0, result.stderr
    assert f"waiting for pid {writer.pid} (" in result.stderr
    assert (mirror / "HEAD").is_file() and not left.exists() and not list(cache.glob("*partial*"))


def test_bundle_create_removes_the_staging_folder_a_killed_run_left(tmp_path: Path,
                                                                    http_server: LoopbackHTTPServer) -> None:
    archive = zip_with({"tool-1.0/bin/tool": b"#!/bin/sh\n"})
    url = http_server.serve("/releases/tool-1.0.zip", archive.data)
    recipe = tmp_path / "tool.yaml"
    recipe.write_text(json.dumps({"schema_version": 2, "name": "staging-fixture", "sources": {},
                                  "platform": {"host": {"arch": [platform.machine()]}},
                                  "artifacts": {"tool": {"path": str(tmp_path / "tools/tool"), "url": url,
                                                         "sha256": archive.sha256, "kind": "zip"}}}))
    staging = tmp_path / "ws/.flagtree-cpu/bundle-create"
    killed = staging / "staging-k1ll3d"  # what a SIGKILLed `bundle create` leaves: git bundles, wheels
    (killed / "git").mkdir(parents=True)
    (killed / "git/FlagTree.bundle").write_bytes(bytes(100_000))
    result = CliRunner().invoke(app, ["-w", str(tmp_path / "ws"), "--recipe", str(recipe), "bundle", "create",
                                      "-o", str(tmp_path / "out.bundle")])
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "out.bundle").is_file() and list(staging.iterdir()) == []
