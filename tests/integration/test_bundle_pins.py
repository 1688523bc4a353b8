"""Bundles of pinned commits only: `bundle create` carries each source's pinned commit (and its submodules'),
not the repositories' whole history, in a form that works when the upstream is shallow; `bundle import` and
`bundle verify` check it; an imported board syncs offline from it and, once it has network, `sync --update`
fetches the rest and moves on.

The upstream here is a shallow copy of the git world (each repository cloned ``--depth 2`` from its pinned branch:
FlagTree is cut at its pinned commit) served by a real ``git daemon`` on 127.0.0.1; git reaches it through one
``insteadOf`` rule, as a user's configuration would.
"""

from __future__ import annotations

import json
import shutil
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from flagtree_cpu_build.bundle import Manifest, Member, write_bundle
from tests.support.cli import Workspace, new_workspace
from tests.support.envelope import error_of
from tests.support.gitdaemon import GitDaemon
from tests.support.gitworld import GitWorld, git
from tests.support.hermetic import make_hermetic
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import TOP, llvm_tarball

MANIFEST = "flagtree-cpu-bundle.json"
NO_WHEELS = ("python.build=[]", "python.runtime=[]", "checks=[]")
REPOS = {"flagtree": "flagos-ai/FlagTree.git", "flagtree-cpu": "flagos-ai/flagtree-cpu.git",
         "sleef": "shibatch/sleef.git"}


@dataclass
class Made:
    root: Path
    home: Path
    gitconfig: Path  # the insteadOf rule to the shallow daemon
    bundle: Path
    result: object  # the bundle create run
    sets: tuple[str, ...]
    pins: dict[str, str]  # repository name -> its pinned commit

    def manifest(self) -> dict:
        with tarfile.open(self.bundle) as tar:
            return json.loads(tar.extractfile(MANIFEST).read())  # type: ignore[union-attr]


SHALLOW_BRANCHES = {"flagtree": "triton_v3.3.x", "flagtree-cpu": "main", "sleef": "main"}


def shallow_copy(full: Path, dest: Path, branch: str) -> None:
    """``full`` as a shallow upstream: ``branch`` only, its last two commits."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    git("clone", "--quiet", "--bare", "--depth", "2", "--branch", branch, full.as_uri(), dest)
    git("config", "uploadpack.allowAnySHA1InWant", "true", cwd=dest)


@pytest.fixture(scope="module")
def made(git_world: GitWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Made]:
    """A workspace synced from a shallow upstream behind git daemon, and its bundle."""
    root = tmp_path_factory.mktemp("bundle-pins")
    (root / "home").mkdir()
    pins = {"flagtree": git_world["flagtree"].commits["cpu-backend"],
            "flagtree-cpu": git_world["flagtree-cpu"].commits["v33"],
            "sleef": git_world["sleef"].commits["first"]}
    for name, path in REPOS.items():
        shallow_copy(git_world[name].bare, root / "shallow" / path, SHALLOW_BRANCHES[name])
    assert (root / "shallow" / REPOS["flagtree"] / "shallow").read_text().split() == [pins["flagtree"]]
    daemon = GitDaemon(root / "shallow")
    server = LoopbackHTTPServer()
    try:
        gitconfig = root / "daemon.gitconfig"
        gitconfig.write_text(f'[url "git://127.0.0.1:{daemon.port}/"]\n\tinsteadOf = https://github.com/\n')
        with pytest.MonkeyPatch.context() as mp:
            make_hermetic(mp, root / "home")
            mp.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
            url = server.serve(f"/public/llvm-builds/{TOP}.tar.gz", llvm_tarball().data)
            sets = (f"artifacts.llvm.url={url}", *NO_WHEELS)
            ws = new_workspace(git_world, root / "ws", always_set=sets)
            bundle = root / "usb" / "board.bundle"
            bundle.parent.mkdir()
            result = ws.run("--json", "bundle", "create", "-o", str(bundle))
        yield Made(root, root / "home", gitconfig, bundle, result, sets, pins)
    finally:
        server.close()
        daemon.close()


def test_bundle_create_from_a_shallow_upstream_carries_each_pinned_commit(made: Made) -> None:
    assert made.result.exit_code == 0, made.result.stderr  # type: ignore[attr-defined]
    assert "Failed to traverse parents" not in made.result.stderr  # type: ignore[attr-defined]
    gits = [m for m in made.manifest()["members"] if m["kind"] == "git"]
    assert sorted(c for m in gits for c in m["meta"]["commits"]) == sorted(made.pins.values())


def git_members(made: Made) -> list[dict]:
    return [m for m in made.manifest()["members"] if m["kind"] == "git"]


def commits_in_pack(data: bytes, scratch: Path) -> set[str]:
    """The commit ids a pack file holds, as git itself indexes it."""
    repo = scratch / "read.git"
    git("init", "--quiet", "--bare", repo)
    pack = repo / "objects" / "pack" / "pack-read.pack"
    pack.write_bytes(data)
    git("index-pack", pack, cwd=repo)
    listed = git("verify-pack", "-v", pack.with_suffix(".idx"), cwd=repo)
    shutil.rmtree(repo)
    return {line.split()[0] for line in listed.splitlines() if len(line.split()) > 1 and line.split()[1] == "commit"}


def test_each_git_member_is_a_pack_of_the_pinned_commits_without_their_history(made: Made, tmp_path: Path) -> None:
    assert made.result.exit_code == 0, made.result.stderr  # type: ignore[attr-defined]
    with tarfile.open(made.bundle) as tar:
        for member in git_members(made):
            assert member["name"].endswith(".pack") and member["meta"]["form"] == "pins", member
            data = tar.extractfile(member["name"]).read()  # type: ignore[union-attr]
            assert commits_in_pack(data, tmp_path) == set(member["meta"]["commits"]), member["name"]


def closed_board(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    """A fresh home on a machine without network: no insteadOf rule, git allowed only local files, the tool's
    HTTP switched off."""
    home.mkdir()
    make_hermetic(monkeypatch, home)
    (home / ".gitconfig").write_text("")
    for name, value in (("GIT_CONFIG_GLOBAL", str(home / ".gitconfig")), ("FLAGTREE_CPU_NO_NETWORK", "1"),
                        ("GIT_CONFIG_COUNT", "2"), ("GIT_CONFIG_KEY_0", "protocol.allow"),
                        ("GIT_CONFIG_VALUE_0", "never"), ("GIT_CONFIG_KEY_1", "protocol.file.allow"),
                        ("GIT_CONFIG_VALUE_1", "always")):
        monkeypatch.setenv(name, value)


def heads(ws: Workspace) -> dict[str, str]:
    return {"flagtree": ws.head(ws.flagtree), "flagtree-cpu": ws.head(ws.flagtree_cpu),
            "sleef": ws.head(ws.flagtree_cpu / "third_party" / "sleef")}


def imported_board(made: Made, git_world: GitWorld, root: Path) -> Workspace:
    board = new_workspace(git_world, root, always_set=made.sets)
    imported = board.run("bundle", "import", str(made.bundle))
    assert imported.exit_code == 0, imported.stderr
    synced = board.run("sync", "--offline")
    assert synced.exit_code == 0, synced.stderr
    return board


def test_a_board_imports_the_pins_and_syncs_offline_to_them(made: Made, git_world: GitWorld, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    closed_board(monkeypatch, tmp_path / "home")
    verified = Workspace(git_world, tmp_path / "v", "").run("bundle", "verify", str(made.bundle))
    assert verified.exit_code == 0, verified.stderr
    board = imported_board(made, git_world, tmp_path / "board")
    assert heads(board) == made.pins
    # the checkout holds its pin and nothing of the history before it
    assert git("rev-list", "--count", "HEAD", cwd=board.flagtree) == "1"


def test_sync_update_with_network_fetches_the_rest_and_moves_to_a_newer_commit(
        made: Made, world: GitWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    make_hermetic(monkeypatch, home)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(world.gitconfig))  # the full upstream, once online
    world.stop()
    board = imported_board(made, world, tmp_path / "board")
    assert heads(board) == made.pins
    world.start()
    newer = world.advance("flagtree-cpu", "main", "NEWS.md", "a later upstream commit\n")
    moved = board.run("sync", "--update")
    assert moved.exit_code == 0, moved.stderr
    assert board.head(board.flagtree_cpu) == newer
    history = git("rev-list", "HEAD", cwd=board.flagtree_cpu).split()
    assert history[:2] == [newer, made.pins["flagtree-cpu"]]
    assert heads(board)["sleef"] == made.pins["sleef"]


# --- hostile bundles -----------------------------------------------------------------------------------------


def pack_of(bare: Path, commit: str, scratch: Path) -> Path:
    """A pack of ``commit`` alone (its tree, no history), made with git by hand."""
    repo = scratch / f"pack-{commit[:12]}.git"
    git("init", "--quiet", "--bare", repo)
    git("-c", "uploadpack.allowAnySHA1InWant=true", "fetch", "--quiet", "--depth", "1", bare.as_uri(),
        f"{commit}:refs/x", cwd=repo)
    git("repack", "-a", "-d", "-q", cwd=repo)
    [pack] = (repo / "objects" / "pack").glob("*.pack")
    return pack


def recrafted(made: Made, scratch: Path, *, pack: Path, listed: list[str]) -> Path:
    """The module's bundle with FlagTree's git member replaced by ``pack``, listed as holding ``listed``."""
    with tarfile.open(made.bundle) as tar:
        tar.extractall(scratch / "parts", filter="data")
    manifest = Manifest.from_bytes((scratch / "parts" / MANIFEST).read_bytes(), "test")
    files, members = {}, []
    for member in manifest.members:
        files[member.name] = scratch / "parts" / member.name
        if member.kind == "git" and member.meta["url"].endswith("FlagTree.git"):
            files[member.name] = pack
            member = Member(member.name, "git", meta={**member.meta, "commits": listed})
        members.append(Member(member.name, member.kind, meta=member.meta))
    draft = Manifest.draft(recipe=manifest.recipe, stack=manifest.stack, variant=manifest.variant,
                           target=manifest.target, members=members)
    out = scratch / "hostile.bundle"
    write_bundle(out, draft, files)
    return out


def refused(board: Workspace, bundle: Path) -> dict:
    result = board.run("--json", "bundle", "import", str(bundle))
    assert result.exit_code == 4, result.stderr
    assert not (board.root / ".flagtree-cpu" / "bundle").exists(), "a refused import left a mirror"
    assert not board.lock_file.exists(), "a refused import wrote the lock"
    assert not list((Path.home() / ".cache").rglob("blobs/*")), "a refused import seeded the download cache"
    return error_of(result.stdout)


def test_a_pack_without_the_pinned_commit_it_lists_is_refused_and_nothing_is_written(
        made: Made, git_world: GitWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = pack_of(git_world["flagtree"].bare, git_world["flagtree"].commits["pre-cpu"], tmp_path)
    bundle = recrafted(made, tmp_path, pack=other, listed=[made.pins["flagtree"]])
    closed_board(monkeypatch, tmp_path / "home")
    error = refused(new_workspace(git_world, tmp_path / "board", always_set=made.sets), bundle)
    assert made.pins["flagtree"] in error["message"] and "FlagTree" in error["message"], error
    assert "bundle create" in error["fix"], error


def test_a_bundle_whose_git_carries_another_commit_than_its_lock_pins_is_refused_by_verify_and_import(
        made: Made, git_world: GitWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tip = git_world["flagtree"].commits["tip"]
    bundle = recrafted(made, tmp_path, pack=pack_of(git_world["flagtree"].bare, tip, tmp_path), listed=[tip])
    closed_board(monkeypatch, tmp_path / "home")
    board = new_workspace(git_world, tmp_path / "board", always_set=made.sets)
    verify = board.run("--json", "bundle", "verify", str(bundle))
    assert verify.exit_code == 4, verify.stderr
    for error in (error_of(verify.stdout), refused(board, bundle)):
        located = " ".join(error["details"])
        assert f"source flagtree pins {made.pins['flagtree'][:12]}" in located, error
        assert str(bundle) in error["message"], error
