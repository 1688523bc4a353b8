"""A full disk where the tool writes its own state (the lock, stamps, reports), for real: a workspace on a
1 MiB tmpfs filled to the last byte. The run stops with exit 4 and a message naming the file and the file
system, never "unexpected error"; it leaves no temporary file behind; once space is freed the same command
works."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flagtree_cpu_build.cli import app
from tests.support.disks import tmpfs

RECIPE = "schema_version: 2\nname: empty\nplatform: {host: {arch: [x86_64, aarch64]}}\nsources: {}\n"


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "tiny", "1m", "a real full disk needs root") as mount:
        yield mount


def test_a_full_disk_under_the_workspace_is_named_and_nothing_is_left_behind(full_disk: Path,
                                                                             tmp_path: Path) -> None:
    recipe = tmp_path / "empty.yaml"
    recipe.write_text(RECIPE)
    ws = full_disk / "ws"
    (ws / ".flagtree-cpu").mkdir(parents=True)  # a workspace that exists (the lock is written into it)
    filler = full_disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)  # every last block: the next write fails with ENOSPC
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
    argv = ["-w", str(ws), "--recipe", str(recipe), "--json", "sync"]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 4, result.stdout
    error = json.loads(result.stdout)["error"]
    assert error["message"].startswith(f"not enough disk space for writing {ws}/.flagtree-cpu/lock.yaml")
    assert f"free space on {full_disk}" in error["fix"]
    assert "unexpected" not in result.stdout + result.stderr
    assert sorted(p.name for p in (ws / ".flagtree-cpu").iterdir()) == ["workspace.lock"]  # no half-written files
    filler.unlink()
    again = CliRunner().invoke(app, argv)
    assert again.exit_code == 0, again.stdout
    assert (ws / ".flagtree-cpu" / "lock.yaml").is_file()
