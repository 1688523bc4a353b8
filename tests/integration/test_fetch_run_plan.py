"""`run_fetch` acts on the artifacts' plan it is given: it publishes exactly the items the plan says are not
current, downloading from the plan's candidate URLs with the plan's digests; and what changed between the plan
and the run (a tree unpacked by hand, bytes another process cached) is handled safely, as before. Real HTTP
server on 127.0.0.1, a real recipe loaded through `open_context`."""

from __future__ import annotations

import json
import platform
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.context import ContextRequest, open_context
from flagtree_cpu_build.errors import ArtifactError
from flagtree_cpu_build.mirrors import parse_mirrors
from flagtree_cpu_build.stagekit.stage import RunOptions, StageContext
from flagtree_cpu_build.stages.artifacts.fetch import run_fetch
from flagtree_cpu_build.stages.registry import plan_stage, stage_named
from flagtree_cpu_build.ui import UI
from tests.support.fetching import cache_root
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import tarball_with

STAMP = ".flagtree-cpu-artifact.json"
FILES = {"tool-1.0/bin/tool": b"#!/bin/sh\necho tool\n", "tool-1.0/share/doc.txt": b"docs\n"}


class Kit:
    """A workspace and a recipe with artifacts `a` and `b`, each a tarball served from the loopback server."""

    def __init__(self, root: Path, server: LoopbackHTTPServer) -> None:
        self.root, self.server = root, server
        self.archives = {"a": tarball_with(FILES), "b": tarball_with({**FILES, "tool-1.0/b.txt": b"b\n"})}
        self.paths = {name: f"/releases/{name}/tool-1.0.tar.gz" for name in self.archives}
        self.urls = {name: server.serve(self.paths[name], archive.data) for name, archive in self.archives.items()}
        self.recipe = root / "two.yaml"
        artifacts = {name: {"url": self.urls[name], "sha256": archive.sha256, "path": str(self.dest(name)),
                            "root": {"strip": 1}} for name, archive in self.archives.items()}
        self.recipe.write_text(json.dumps({"schema_version": 2, "name": "two-artifacts",
                                           "platform": {"host": {"arch": [platform.machine()]}},
                                           "sources": {}, "artifacts": artifacts}))

    def dest(self, name: str) -> Path:
        return self.root / "tools" / name

    def context(self) -> StageContext:
        return open_context(ContextRequest(recipe=str(self.recipe), workdir=str(self.root / "ws")), UI())

    def requests_for(self, name: str) -> list[Any]:
        return self.server.requests_for(self.paths[name])


@pytest.fixture
def kit(tmp_path: Path, http_server: LoopbackHTTPServer) -> Kit:
    return Kit(tmp_path, http_server)


def hand_unpacked(dest: Path, archive_files: dict[str, bytes]) -> None:
    """What `tar -xf` and a `mv tool-1.0 <dest>` leave: no stamp of ours."""
    for name, data in archive_files.items():
        path = dest / name.split("/", 1)[1]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def test_the_run_publishes_exactly_the_items_of_its_plan(kit: Kit) -> None:
    ctx, options = kit.context(), RunOptions(python=Path())
    plan = plan_stage(stage_named("artifacts"), ctx, options)
    assert [(i.subject, i.will) for i in plan] == [("a", "created"), ("b", "created")]
    result = run_fetch(ctx, options, [i for i in plan if i.subject == "a"])  # a caller that wants only `a`
    assert [(a.subject, a.status) for a in result.actions] == [("a", "created")]
    assert json.loads((kit.dest("a") / STAMP).read_text())["sha256"] == kit.archives["a"].sha256
    assert not kit.dest("b").exists() and kit.requests_for("b") == []


def test_a_plan_made_without_the_network_leads_the_run_to_the_mirror_first(kit: Kit,
                                                                           http_server: LoopbackHTTPServer) -> None:
    """The plan asks no server (sizes are only words) and carries the candidate URLs in the order the
    download tries them; the run downloads from the first that works."""
    mirror_path = "/mirror" + kit.paths["a"]
    http_server.serve(mirror_path, kit.archives["a"].data)
    rule = f"{kit.urls['a'].removesuffix(kit.paths['a'])}/={http_server.url('/mirror')}/"
    ctx, options = kit.context(), RunOptions(python=Path(), mirrors=tuple(parse_mirrors([rule])))
    plan = plan_stage(stage_named("artifacts"), ctx, options)
    assert http_server.requests == []  # planning asked nothing
    facts = plan[0].data["fetch"]
    assert facts["candidates"] == [http_server.url(mirror_path), kit.urls["a"]]
    assert facts["expected"] == {"sha256": kit.archives["a"].sha256} and facts["tree"] == "none"
    assert facts["cache"] == str(cache_root())
    run_fetch(ctx, options, plan)
    assert http_server.requests_for(mirror_path) and kit.requests_for("a") == []
    # published now: the plan says so, and what its stamp records
    again = plan_stage(stage_named("artifacts"), ctx, options)
    assert again[0].current and again[0].data["fetch"]["tree"] == "ours"
    assert again[0].data["fetch"]["size"] == len(kit.archives["a"].data)


@pytest.mark.parametrize("edited", [False, True], ids=["same", "edited"])
def test_a_tree_unpacked_by_hand_after_the_plan_is_checked_not_replaced(kit: Kit, edited: bool) -> None:
    """The plan saw no tree; by the time the bytes are in, one is there: it is verified against the tarball
    (adopted when it matches), never replaced."""
    ctx, options = kit.context(), RunOptions(python=Path())
    plan = [i for i in plan_stage(stage_named("artifacts"), ctx, options) if i.subject == "a"]
    assert plan[0].data["fetch"]["tree"] == "none"
    files = {**FILES, "tool-1.0/share/doc.txt": b"edited by hand\n"} if edited else FILES
    hand_unpacked(kit.dest("a"), files)
    if edited:
        with pytest.raises(ArtifactError) as caught:
            run_fetch(ctx, options, plan)
        assert "differs from the verified tarball; it is left alone" in caught.value.message
        assert (kit.dest("a") / "share/doc.txt").read_bytes() == b"edited by hand\n"
        assert not (kit.dest("a") / STAMP).exists()
    else:
        [action] = run_fetch(ctx, options, plan).actions
        assert (action.status, action.detail) == ("updated", f"existing tree at {kit.dest('a')} matches the "
                                                             "tarball; adopted")
        assert json.loads((kit.dest("a") / STAMP).read_text())["sha256"] == kit.archives["a"].sha256


def test_bytes_another_workspace_cached_after_the_plan_are_not_downloaded_again(kit: Kit, tmp_path: Path) -> None:
    """The plan said "download"; by the run, another workspace has downloaded the same file. The cache is looked
    at under its lock, as the run always did, so the bytes are unpacked from it and not fetched again."""
    ctx, options = kit.context(), RunOptions(python=Path())
    plan = [i for i in plan_stage(stage_named("artifacts"), ctx, options) if i.subject == "a"]
    assert plan[0].action.startswith("download a")
    other = CliRunner().invoke(app, ["-w", str(tmp_path / "other"), "--recipe", str(kit.recipe), "fetch"])
    assert other.exit_code == 0, other.stderr
    served = len(kit.requests_for("a"))
    shutil.rmtree(kit.dest("a"))  # the recipe's path is shared: ours starts again without the tree
    [action] = run_fetch(ctx, options, plan).actions
    assert action.status == "created" and action.data["served_from"] == "download cache"
    assert len(kit.requests_for("a")) == served
