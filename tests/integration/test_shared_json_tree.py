"""triton-cpu and flagtree both publish nlohmann json's include.zip at Triton's `<TRITON_HOME>/.triton/json` (the
same zip: v3.11.3, one file upstream). Both publish it `shared`: the two recipes' workspaces on one machine use the
one tree without a refusal, and neither replaces it under the other. With triton-cpu's `own`, a triton-cpu
workspace whose json changed replaced the tree the flagtree workspace had reused, without a word.

The worlds are the recipes' own (tests/support/worlds/): triton-cpu's, and flagtree's with its default variant's
branch only; the recipes are the bundled files with only the fixture commits (and triton-cpu's stand-in digest)
set."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.extract import read_stamp
from tests.support.hermetic import make_hermetic
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import zip_with
from tests.support.worlds.flagtree import BRANCHES, FlagTreeWorld, build_flagtree_world
from tests.support.worlds.triton_cpu import TritonCpuWorld, build_triton_cpu_world

MACHINE = ("resources.disk=[]", "resources.memory_gb=0")
VARIANT = "3_6-nvidia"


@dataclass
class Worlds:
    triton: TritonCpuWorld
    flagtree: FlagTreeWorld


@pytest.fixture(scope="module")
def worlds(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worlds]:
    root = tmp_path_factory.mktemp("shared-json")
    servers = LoopbackHTTPServer(), LoopbackHTTPServer()
    try:
        yield Worlds(build_triton_cpu_world(root / "triton-cpu", servers[0]),
                     build_flagtree_world(root / "flagtree", servers[1], only=(VARIANT.split("-")[0],)))
    finally:
        for server in servers:
            server.close()


@pytest.fixture
def json_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """One HOME and TRITON_HOME for both workspaces (one user's machine); the tree both publish."""
    (tmp_path / "home").mkdir()
    make_hermetic(monkeypatch, tmp_path / "home")
    monkeypatch.setenv("TRITON_HOME", str(tmp_path / "triton-home"))
    return tmp_path / "triton-home" / ".triton" / "json"


def triton_cpu(worlds: Worlds, ws: Path, mp: pytest.MonkeyPatch, *args: str, sets: tuple[str, ...] = ()) -> Result:
    mp.setenv("GIT_CONFIG_GLOBAL", str(worlds.triton.gitconfig))
    mp.delenv("FLAGTREE_CPU_MIRRORS", raising=False)
    argv = ["-w", str(ws), "--recipe", "triton-cpu"]
    for assignment in (*worlds.triton.sets(), *MACHINE, *sets):
        argv += ["--set", assignment]
    mirrors = [a for rule in worlds.triton.mirrors() for a in ("--mirror", rule)]
    return CliRunner().invoke(app, [*argv, *args, *(mirrors if args[0] in ("fetch", "setup") else [])])


def flagtree(worlds: Worlds, ws: Path, mp: pytest.MonkeyPatch, *args: str) -> Result:
    mp.setenv("GIT_CONFIG_GLOBAL", str(worlds.flagtree.gitconfig))
    mp.setenv("FLAGTREE_CPU_MIRRORS", worlds.flagtree.mirrors)
    commit = worlds.flagtree.commits[BRANCHES[VARIANT.split("-")[0]].name]
    argv = ["-w", str(ws), "--recipe", "flagtree", "--variant", VARIANT, "--set", f"sources.flagtree.commit={commit}"]
    for assignment in MACHINE:
        argv += ["--set", assignment]
    return CliRunner().invoke(app, [*argv, *args])


def synced_and_fetched(run, ws: Path) -> None:  # type: ignore[no-untyped-def]
    for command in ("sync", "fetch"):
        result = run(ws, command)
        assert result.exit_code == 0, (command, result.stderr)


def test_triton_cpu_and_flagtree_workspaces_share_the_json_tree_and_neither_replaces_it(
        worlds: Worlds, json_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mp = monkeypatch
    synced_and_fetched(lambda ws, c: triton_cpu(worlds, ws, mp, c), tmp_path / "triton-ws")
    assert read_stamp(json_tree)["owner"]["publish"] == "shared"  # type: ignore[index]
    header = (json_tree / "include" / "nlohmann" / "json.hpp").read_bytes()
    asked = len(worlds.flagtree.server.requests)
    synced_and_fetched(lambda ws, c: flagtree(worlds, ws, mp, c), tmp_path / "flagtree-ws")
    # reused, not downloaded again: the same zip, at the same place
    assert not [u for u in worlds.flagtree.downloaded(asked) if "nlohmann" in u]
    stamp = read_stamp(json_tree)
    assert stamp is not None and stamp["owner"]["recipe"] == "triton-cpu"
    assert [u["recipe"] for u in stamp["users"]] == ["flagtree"]
    status = flagtree(worlds, tmp_path / "flagtree-ws", mp, "status")
    assert status.exit_code == 0 and "shared, published by recipe triton-cpu" in " ".join(status.stdout.split())

    # triton-cpu's json bumped (another zip): refused, naming the owner; the flagtree workspace's tree stays
    newer = zip_with({"include/nlohmann/json.hpp": b"// stand-in nlohmann/json 3.12.0\n"})
    worlds.triton.server.serve("/nlohmann/json/releases/download/v3.12.0/include.zip", newer.data)
    bumped = triton_cpu(worlds, tmp_path / "triton-ws", mp, "fetch", sets=(
        "artifacts.json.url=https://github.com/nlohmann/json/releases/download/v3.12.0/include.zip",
        "artifacts.json.matches=[]", f"artifacts.json.digest.sha256={newer.sha256}"))
    assert bumped.exit_code == 4, bumped.stderr
    assert f"{json_tree} is a shared tree that recipe triton-cpu" in " ".join(bumped.stderr.split())
    assert (json_tree / "include" / "nlohmann" / "json.hpp").read_bytes() == header
    assert flagtree(worlds, tmp_path / "flagtree-ws", mp, "fetch").exit_code == 0
