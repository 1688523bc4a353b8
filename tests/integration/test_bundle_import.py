"""`bundle import` and `bundle verify`: a bundle of the loopback world seeded into a fresh workspace and home,
and every way a bundle can be wrong refused before anything is written.

The bundle here is made by hand from a synced and fetched workspace (git bundles of its git cache's mirrors,
the LLVM blob of its download cache, a tiny wheel, its lock) with the format's own ``write_bundle``, so these
tests judge the import alone; test_bundle_offline.py runs the real `bundle create`.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import yaml
from typer.testing import Result

from flagtree_cpu_build.bundle import MANIFEST_NAME, Manifest, Member, member_name, write_bundle
from flagtree_cpu_build.gitcmd import has_commit
from tests.support.cli import Workspace, new_workspace
from tests.support.envelope import error_of, result_of
from tests.support.gitworld import GitWorld, git
from tests.support.hermetic import make_hermetic
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.leftovers import killed_partial, old_partial
from tests.support.tarballs import TOP, llvm_tarball
from tests.support.venvs import build_venv, tiny_wheel

WHEEL = ("fixture-build-tool", "1.0")


@dataclass
class Made:
    """A bundle of the loopback world, and what it was made from (to craft wrong ones)."""

    path: Path
    manifest: Manifest
    files: dict[str, Path]  # member name -> the file it was made from
    sets: tuple[str, ...]  # the --set values of the workspace it was made for
    commits: dict[str, str]  # source -> pinned commit
    lock: Path

    def craft(self, dest: Path, *, carried: tuple[str, ...] = (), since: str | None = None, **target: object) -> Path:
        """Another sound bundle: the same members, another target, or some left to a --since bundle."""
        members = tuple(replace(m, carried_by_since=m.name in carried) for m in self.manifest.members)
        draft = replace(self.manifest, members=members, target={**self.manifest.target, **target}, since=since,
                        digest="")
        write_bundle(dest, draft, {n: p for n, p in self.files.items() if n not in carried})
        return dest


def _bundle_of_workspace(ws: Workspace, cache: Path, git_cache: Path, out: Path, wheel: Path) -> Made:
    lock = yaml.safe_load(ws.lock_file.read_text())
    pinned = [s["commit"] for s in lock["sources"].values()] + \
        [m["commit"] for s in lock["sources"].values() for m in s.get("submodules", [])]
    files, members = {}, []
    for mirror in sorted(git_cache.glob("*.git")):
        commits = sorted(c for c in pinned if has_commit(mirror, c))
        for commit in commits:  # a commit fetched by id is on no branch: a ref keeps it in the bundle
            git("update-ref", f"refs/flagtree-cpu/pins/{commit}", commit, cwd=mirror)
        name = member_name("git", f"{mirror.name}.bundle")
        files[name] = out.parent / "parts" / f"{mirror.name}.bundle"
        files[name].parent.mkdir(parents=True, exist_ok=True)
        git("bundle", "create", "--quiet", files[name], "--all", cwd=mirror)
        url = git("config", "remote.origin.url", cwd=mirror)
        members.append(Member(name, "git", meta={"url": url, "mirror": mirror.name, "commits": commits}))
    artifact = lock["artifacts"]["llvm"]
    name = member_name("artifact", artifact["sha256"])
    files[name] = cache / "downloads" / "blobs" / artifact["sha256"]
    members.append(Member(name, "artifact", meta={"recipe": lock["recipe"], "name": "llvm", "url": artifact["url"],
                                                  "digest": {"sha256": artifact["sha256"]}}))
    name = member_name("wheel", wheel.name)
    files[name] = wheel
    members.append(Member(name, "wheel", meta={"file": wheel.name, "sdist": False}))
    name = member_name("lock", f"{lock['recipe']}.yaml")
    files[name] = ws.lock_file
    members.append(Member(name, "lock", meta={"recipe": lock["recipe"]}))
    target = {"arch": platform.machine(), "platforms": [], "python": f"{sys.version_info[0]}.{sys.version_info[1]}",
              "os_id": "", "glibc": None}
    draft = Manifest.draft(recipe=lock["recipe"], stack=(lock["recipe"],), variant=lock.get("variant"),
                           target=target, members=members)
    manifest = write_bundle(out, draft, files)
    commits = {name: s["commit"] for name, s in lock["sources"].items()}
    return Made(out, manifest, files, ws.always_set, commits, ws.lock_file)


@pytest.fixture(scope="module")
def made(git_world: GitWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Made]:
    root = tmp_path_factory.mktemp("bundle-import")
    (root / "home").mkdir()
    server = LoopbackHTTPServer()
    with pytest.MonkeyPatch.context() as mp:
        make_hermetic(mp, root / "home")
        mp.setenv("GIT_CONFIG_GLOBAL", str(git_world.gitconfig))
        try:
            url = server.serve(f"/public/llvm-builds/{TOP}.tar.gz", llvm_tarball().data)
            ws = new_workspace(git_world, root / "ws", always_set=(f"artifacts.llvm.url={url}",
                                                                   f"python.build=[{WHEEL[0]}]"))
            for step in (["sync", "--git-cache", str(root / "git")], ["fetch"]):
                result = ws.run(*step)
                assert result.exit_code == 0, (step, result.stderr)
            wheel = tiny_wheel(root / "wheels", *WHEEL)
            made = _bundle_of_workspace(ws, root / "home" / ".cache" / "flagtree-cpu", root / "git",
                                        root / "world.bundle", wheel)
        finally:
            server.close()
    yield made


@dataclass
class Board:
    """A fresh workspace in this test's fresh home, opened with the recipe the bundle was made for."""

    ws: Workspace
    cache: Path

    def run(self, *args: str) -> Result:
        return self.ws.run(*args)

    def files(self) -> dict[str, bytes]:
        """Everything the workspace and the download cache hold (what an import may change)."""
        found = {}
        for top in (self.ws.root, self.cache):
            for path in sorted(top.rglob("*")) if top.exists() else []:
                # the busy lock says who holds the workspace: every command writes it
                if path.is_file() and not path.is_symlink() and path.name != "workspace.lock":
                    found[str(path)] = path.read_bytes()
        return found


@pytest.fixture
def board(made: Made, git_world: GitWorld, tmp_path: Path) -> Board:
    # no redirect to the world: the board reaches no repository (GIT_CONFIG_GLOBAL stays the empty hermetic one)
    ws = new_workspace(git_world, tmp_path / "board", always_set=made.sets)
    return Board(ws, Path(os.environ["XDG_CACHE_HOME"]) / "flagtree-cpu")


def test_import_seeds_the_caches_and_a_second_import_does_nothing(made: Made, board: Board) -> None:
    verified = board.run("--json", "bundle", "verify", str(made.path))
    assert verified.exit_code == 0, verified.stderr
    assert result_of(verified.stdout)["manifest"]["digest"] == made.manifest.digest

    first = board.run("bundle", "import", str(made.path))
    assert first.exit_code == 0, first.stderr
    state = board.ws.root / ".flagtree-cpu"
    mirrors = sorted((state / "bundle" / "git").glob("*.git"))
    assert len(mirrors) == 3  # FlagTree, flagtree-cpu and the sleef submodule
    for source, commit in made.commits.items():
        assert any(has_commit(m, commit) for m in mirrors), source
    sha = next(m.sha256 for m in made.manifest.members if m.kind == "artifact")
    assert (board.cache / "downloads" / "blobs" / sha).is_file()
    assert [p.name for p in (state / "wheelhouse").iterdir()] == [made.files[n].name for n in made.files
                                                                  if n.startswith("wheels/")]
    assert board.ws.lock_file.read_bytes() == made.lock.read_bytes()
    assert not list((state / "bundle").glob(".incoming*")), "the extraction folder was left behind"

    before = board.files()
    second = board.run("--json", "bundle", "import", str(made.path))
    assert second.exit_code == 0, second.stderr
    assert {a["status"] for a in result_of(second.stdout)["actions"]} == {"ok"}
    assert board.files() == before
    third = board.run("bundle", "import", str(made.path))
    assert "nothing to import" in third.stderr
    planned = board.run("setup", "--dry-run", "--bundle", str(made.path))
    assert planned.exit_code == 2 and "bundle import" in planned.stderr, planned.stderr


def test_an_import_removes_the_half_made_mirrors_a_killed_import_left(made: Made, board: Board) -> None:
    git_root = board.ws.root / ".flagtree-cpu" / "bundle" / "git"
    names = sorted(str(m.meta["mirror"]) for m in made.manifest.members if m.kind == "git")
    old = old_partial(git_root / f"{names[0]}.partial")  # the previous release's name for a half-made mirror
    killed = killed_partial(git_root / names[1])  # this version's, with the owner record of a SIGKILLed import
    result = board.run("bundle", "import", str(made.path))
    assert result.exit_code == 0, result.stderr
    assert not old.exists() and not killed.exists() and not list(git_root.glob("*partial*"))
    assert all((git_root / name / "HEAD").is_file() for name in names)


def _flip(bundle: Path, dest: Path, member: str, at: int = 100) -> Path:
    """A copy of ``bundle`` with one byte of ``member`` changed (the tar itself stays well formed)."""
    with tarfile.open(bundle) as tar:
        offset = tar.getmember(member).offset_data + at
    data = bytearray(bundle.read_bytes())
    data[offset] ^= 0x01
    dest.write_bytes(bytes(data))
    return dest


def _manifest_flipped(bundle: Path, dest: Path) -> Path:
    """One digit of the manifest's creation time changed: still JSON, still a tar, another manifest."""
    data = bytearray(bundle.read_bytes())
    at = data.index(b'"created": "') + len(b'"created": "') + 3  # the last digit of the year
    data[at] = ord("7") if data[at] != ord("7") else ord("8")
    dest.write_bytes(bytes(data))
    return dest


@pytest.mark.parametrize("damage", ["artifact", "git", "manifest", "truncated"])
def test_a_damaged_bundle_is_refused_and_nothing_is_imported(made: Made, board: Board, tmp_path: Path,
                                                             damage: str) -> None:
    bad = tmp_path / "bad.bundle"
    named = {"artifact": next(n for n in made.files if n.startswith("artifacts/")),
             "git": next(n for n in made.files if n.startswith("git/")), "manifest": MANIFEST_NAME}
    if damage == "truncated":
        bad.write_bytes(made.path.read_bytes()[: made.path.stat().st_size * 2 // 3])
    elif damage == "manifest":
        _manifest_flipped(made.path, bad)
    else:
        _flip(made.path, bad, named[damage])
    for command in (["bundle", "verify"], ["bundle", "import"], ["setup", "--offline", "--skip-build", "--bundle"]):
        result = board.run("--json", *command, str(bad))
        assert result.exit_code == 4, (command, result.stderr)
        error = error_of(result.stdout)
        text = error["message"] + " ".join(error["details"])
        if damage in named:
            assert named[damage] in text or "manifest" in text, error
        assert "again" in (error["fix"] or ""), error
    assert board.files() == {}
    assert not board.ws.root.exists(), "a refused import left the workspace it would have made"


@pytest.mark.parametrize("target", [{"arch": "riscv64"}, {"python": "2.7"}], ids=["arch", "python"])
def test_a_bundle_for_another_machine_is_refused_naming_both(made: Made, board: Board, tmp_path: Path,
                                                             target: dict[str, str]) -> None:
    other = made.craft(tmp_path / "other.bundle", **target)
    result = board.run("--json", "bundle", "import", str(other))
    assert result.exit_code == 2, result.stderr
    error = error_of(result.stdout)
    value = next(iter(target.values()))
    assert "made for recipe flagtree-cpu-arm64" in error["message"] and value in error["message"], error
    here = platform.machine() if "arch" in target else f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert any(value in d and here in d for d in error["details"]), error
    assert "bundle create" in error["fix"], error
    assert board.files() == {}


def test_a_lock_that_differs_is_refused_unless_replaced(made: Made, board: Board) -> None:
    lock = yaml.safe_load(made.lock.read_text())
    lock["sources"]["flagtree-cpu"]["commit"] = "0" * 40
    board.ws.lock_file.parent.mkdir(parents=True)
    board.ws.lock_file.write_text(yaml.safe_dump(lock, sort_keys=False))
    before = board.files()
    refused = board.run("--json", "bundle", "import", str(made.path))
    assert refused.exit_code == 2, refused.stderr
    error = error_of(refused.stdout)
    assert "disagrees" in error["message"] and "--update-lock" in error["fix"], error
    assert any("source flagtree-cpu: this workspace has 000000000000" in d for d in error["details"]), error
    assert board.files() == before, "a refused import changed the workspace or the cache"

    replaced = board.run("bundle", "import", "--update-lock", str(made.path))
    assert replaced.exit_code == 0, replaced.stderr
    assert board.ws.lock_file.read_bytes() == made.lock.read_bytes()


def test_an_incremental_bundle_needs_the_one_it_was_made_since(made: Made, board: Board, tmp_path: Path) -> None:
    artifact = next(n for n in made.files if n.startswith("artifacts/"))
    newer = made.craft(tmp_path / "newer.bundle", carried=(artifact,), since=made.manifest.digest)
    assert newer.stat().st_size < made.path.stat().st_size // 2  # the LLVM tarball is the bulk of it
    refused = board.run("--json", "bundle", "import", str(newer))
    assert refused.exit_code == 4, refused.stderr
    error = error_of(refused.stdout)
    assert artifact in error["details"] and made.manifest.digest[:12] in error["message"], error
    assert "import the bundle it was made --since first" in error["fix"], error
    assert board.files() == {}

    assert board.run("bundle", "import", str(made.path)).exit_code == 0
    after = board.run("bundle", "import", str(newer))
    assert after.exit_code == 0, after.stderr


def test_sync_and_fetch_offline_use_what_was_imported(made: Made, board: Board, git_world: GitWorld) -> None:
    """No --git-cache and no network: the mirrors the import seeded are sync's git cache; the blob is fetch's."""
    assert board.run("bundle", "import", str(made.path)).exit_code == 0
    for step in ("sync", "fetch"):
        result = board.run(step, "--offline")
        assert result.exit_code == 0, (step, result.stderr)
    assert board.ws.head(board.ws.flagtree) == made.commits["flagtree"]
    assert board.ws.head(board.ws.flagtree_cpu) == made.commits["flagtree-cpu"]
    assert git("remote", "get-url", "origin", cwd=board.ws.flagtree).startswith("https://github.com/")
    assert (Path.home() / ".triton" / "llvm" / TOP).is_dir()
    shutil.rmtree(board.ws.root / ".flagtree-cpu" / "bundle")  # the clones do not depend on the mirrors
    assert board.run("sync", "--offline").exit_code == 0


def test_the_python_stage_installs_offline_from_the_imported_wheelhouse(made: Made, board: Board,
                                                                         tmp_path: Path) -> None:
    python = build_venv(tmp_path / "venv", ["pip"])
    refused = board.run("python", "--offline", "--skip-runtime", "--python", str(python))
    assert refused.exit_code == 5, refused.stderr
    assert "--offline forbids pip" in refused.stderr and "bundle import" in refused.stderr

    assert board.run("bundle", "import", str(made.path)).exit_code == 0
    result = board.run("--json", "python", "--offline", "--skip-runtime", "--python", str(python))
    assert result.exit_code == 0, result.stderr
    [installed] = [a for a in result_of(result.stdout)["actions"] if a["subject"] == "prerequisites"]
    assert installed["status"] == "created" and installed["wheelhouse"].endswith(".flagtree-cpu/wheelhouse")
    [log] = (board.ws.root / "logs").glob("prerequisites-*.log")
    assert "--no-index --find-links" in log.read_text()
    assert subprocess.run([str(python), "-c", f"import {WHEEL[0].replace('-', '_')}"], check=False).returncode == 0
