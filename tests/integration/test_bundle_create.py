"""`flagtree-cpu bundle create` on the loopback world: the FlagTree git world (FlagTree, flagtree-cpu and its
sleef submodule), the LLVM tarball on the loopback HTTP server, and the Python prerequisites on loopback PEP
503 indexes of tiny wheels (one for pip's default index, one standing in for the PyTorch CPU index).

The bundle is read here with tarfile, git and hashlib, not with the tool's own reader: what it holds is
checked independently of the code that wrote it.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from tests.support.cli import Workspace, new_workspace
from tests.support.envelope import error_of, result_of
from tests.support.gitworld import GitWorld
from tests.support.hermetic import make_hermetic
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import TOP, llvm_tarball
from tests.support.venvs import packed_wheel, simple_index, tiny_wheel
from tests.support.worlds.flaggems import build_flaggems_world, write_base_recipe

MANIFEST = "flagtree-cpu-bundle.json"
LLVM_PATH = f"/public/llvm-builds/{TOP}.tar.gz"


@dataclass
class Read:
    """A bundle file as tarfile sees it."""

    names: list[str]  # in archive order
    manifest: dict
    data: dict[str, bytes]

    def members(self, kind: str) -> list[dict]:
        return [m for m in self.manifest["members"] if m["kind"] == kind]

    def signature(self) -> list[tuple[str, str, int]]:
        return sorted((m["name"], m["sha256"], m["size"]) for m in self.manifest["members"])


def read_bundle(path: Path) -> Read:
    with tarfile.open(path) as tar:
        infos = tar.getmembers()
        data = {i.name: tar.extractfile(i).read() for i in infos if i.isfile()}  # type: ignore[union-attr]
    return Read([i.name for i in infos], json.loads(data[MANIFEST]), data)


@dataclass
class Made:
    ws: Workspace
    home: Path
    root: Path
    server: LoopbackHTTPServer
    default_index: str
    llvm_sha256: str
    first: Result
    second: Result

    def run(self, *args: str, sets: tuple[str, ...] = ()) -> Result:
        return self.ws.run(*args, sets=sets)


def _wheel_sets(torch_index: str) -> tuple[str, ...]:
    # cmake is satisfied by a system command on this machine, and is downloaded all the same
    return ("python.build=[fixture-build-tool, {requirement: fixture-cmake, system_command: cmake}]",
            f'python.runtime=[{{requirement: "fixture-torch==2.0", index_url: "{torch_index}"}}]')


@pytest.fixture(scope="module")
def made(git_world: GitWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Made]:
    """One workspace of the bundled recipe, bundled twice (the second run on what the first left)."""
    root = tmp_path_factory.mktemp("bundle-create")
    home = root / "home"
    home.mkdir()
    server = LoopbackHTTPServer()
    try:
        with pytest.MonkeyPatch.context() as mp:
            make_hermetic(mp, home)
            mp.setenv("GIT_CONFIG_GLOBAL", str(git_world.gitconfig))
            tarball = llvm_tarball()
            llvm = server.serve(LLVM_PATH, tarball.data)
            default_index = simple_index(server, "/pypi", tiny_wheel(root / "a", "fixture-build-tool", "1.0"))
            simple_index(server, "/pypi", tiny_wheel(root / "b", "fixture-cmake", "3.30"))
            torch_index = simple_index(server, "/whl/cpu", tiny_wheel(root / "c", "fixture-torch", "2.0"))
            mp.setenv("PIP_INDEX_URL", default_index)
            ws = new_workspace(git_world, root / "ws", always_set=(f"artifacts.llvm.url={llvm}",
                                                                    *_wheel_sets(torch_index)))
            first = ws.run("--json", "bundle", "create", "-o", str(root / "a.bundle"))
            second = ws.run("--json", "bundle", "create", "-o", str(root / "b.bundle"))
        yield Made(ws, home, root, server, default_index, tarball.sha256, first, second)
    finally:
        server.close()


@pytest.fixture
def at(made: Made, git_world: GitWorld, monkeypatch: pytest.MonkeyPatch) -> Made:
    """The module's workspace, in the environment it was bundled in."""
    make_hermetic(monkeypatch, made.home)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(git_world.gitconfig))
    monkeypatch.setenv("PIP_INDEX_URL", made.default_index)
    return made


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def test_the_bundle_holds_every_source_artifact_wheel_lock_and_recipe(made: Made, git_world: GitWorld,
                                                                      tmp_path: Path) -> None:
    assert made.first.exit_code == 0, made.first.stderr
    result = result_of(made.first.stdout)
    bundle = made.root / "a.bundle"
    assert result["bundle"] == str(bundle) and result["size"] == bundle.stat().st_size
    assert result["members"] == {"git": 3, "artifact": 1, "wheel": 3, "lock": 1, "recipe": 1}
    read = read_bundle(bundle)
    assert result["manifest_digest"] == read.manifest["digest"]
    # the manifest first, then exactly the members it lists, each with its size and sha256
    assert read.names[0] == MANIFEST
    assert read.names[1:] == [m["name"] for m in read.manifest["members"]]
    for member in read.manifest["members"]:
        body = read.data[member["name"]]
        assert (len(body), hashlib.sha256(body).hexdigest()) == (member["size"], member["sha256"]), member["name"]
    assert read.manifest["recipe"] == "flagtree-cpu-arm64" and read.manifest["stack"] == ["flagtree-cpu-arm64"]
    assert read.manifest["target"]["python"] == f"{sys.version_info.major}.{sys.version_info.minor}"

    # every source and the sleef submodule, as a pack git itself indexes, of the pinned commit and nothing else
    pinned = {"FlagTree": git_world["flagtree"].commits["cpu-backend"],
              "flagtree-cpu": git_world["flagtree-cpu"].commits["v33"],
              "sleef": git_world["sleef"].commits["first"]}
    for member in read.members("git"):
        stem = member["meta"]["mirror"].rsplit("-", 1)[0]
        assert member["name"] == f"git/{member['meta']['mirror']}.pack" and member["meta"]["form"] == "pins"
        scratch = tmp_path / member["meta"]["mirror"]
        git("init", "--quiet", "--bare", str(scratch), cwd=tmp_path)
        path = scratch / "objects" / "pack" / "pack-read.pack"
        path.write_bytes(read.data[member["name"]])
        git("index-pack", str(path), cwd=scratch)
        listed = git("verify-pack", "-v", str(path.with_suffix(".idx")), cwd=scratch).splitlines()
        assert [line.split()[0] for line in listed if line.split()[1:2] == ["commit"]] == [pinned[stem]]
        assert member["meta"]["commits"] == [pinned[stem]]
        assert member["meta"]["url"].startswith("https://github.com/")
    assert {m["meta"]["mirror"].rsplit("-", 1)[0] for m in read.members("git")} == set(pinned)

    # the LLVM tarball by its sha256, the wheels of both indexes, the lock and the recipe
    [artifact] = read.members("artifact")
    assert artifact["name"] == f"artifacts/{made.llvm_sha256}"
    assert artifact["meta"]["digest"] == {"sha256": made.llvm_sha256} and artifact["meta"]["name"] == "llvm"
    assert sorted(m["meta"]["file"].split("-")[0] for m in read.members("wheel")) == [
        "fixture_build_tool", "fixture_cmake", "fixture_torch"]
    lock = yaml.safe_load(read.data["locks/flagtree-cpu-arm64.yaml"])
    assert lock["sources"]["flagtree"]["commit"] == pinned["FlagTree"]
    assert lock["sources"]["flagtree-cpu"]["submodules"][0]["commit"] == pinned["sleef"]
    assert lock["artifacts"]["llvm"]["sha256"] == made.llvm_sha256
    assert read.data["locks/flagtree-cpu-arm64.yaml"] == made.ws.lock_file.read_bytes()
    assert b"name: flagtree-cpu-arm64" in read.data["recipes/flagtree-cpu-arm64.yaml"]
    # the workspace was synced as `sync` leaves it
    assert made.ws.head(made.ws.flagtree) == pinned["FlagTree"]
    # people get a table of sizes
    assert made.second.exit_code == 0, made.second.stderr


def test_creating_twice_gives_the_same_members_and_downloads_nothing_again(made: Made) -> None:
    assert made.second.exit_code == 0, made.second.stderr
    first, second = read_bundle(made.root / "a.bundle"), read_bundle(made.root / "b.bundle")
    assert first.signature() == second.signature()
    assert first.names == second.names
    assert len([r for r in made.server.requests_for(LLVM_PATH) if r.method == "GET"]) == 1  # the cache had it


def test_since_leaves_out_what_the_old_bundle_holds(at: Made, tmp_path: Path) -> None:
    old = at.root / "a.bundle"
    nothing_new = at.run("bundle", "create", "--since", str(old), "-o", str(tmp_path / "same.bundle"))
    assert nothing_new.exit_code == 0, nothing_new.stderr
    assert "left out" in nothing_new.stderr
    same = read_bundle(tmp_path / "same.bundle")
    assert same.manifest["since"] == read_bundle(old).manifest["digest"]
    assert same.names == [MANIFEST, "locks/flagtree-cpu-arm64.yaml", "recipes/flagtree-cpu-arm64.yaml"]
    assert all(m["carried_by_since"] for m in same.manifest["members"] if m["kind"] in ("git", "artifact", "wheel"))
    assert sorted(same.signature()) == sorted(read_bundle(old).signature())

    # a newer wheel on the index: only it is new
    newer = tiny_wheel(tmp_path / "w", "fixture-build-tool", "1.1")
    older = next(Path(p) for p in (at.root / "a" / "wheelhouse").glob("*.whl"))
    at.server.serve(f"/pypi/files/{newer.name}", newer.read_bytes())
    page = "".join(f'<a href="/pypi/files/{w.name}">{w.name}</a>' for w in (older, newer))
    at.server.serve("/pypi/fixture-build-tool/", page.encode(), **{"Content-Type": "text/html"})
    result = at.run("--json", "bundle", "create", "--since", str(old), "-o", str(tmp_path / "next.bundle"))
    assert result.exit_code == 0, result.stderr
    assert result_of(result.stdout)["omitted"] == {"git": 3, "artifact": 1, "wheel": 2}
    nxt = read_bundle(tmp_path / "next.bundle")
    assert [n for n in nxt.names if n.startswith("wheels/")] == [f"wheels/{newer.name}"]
    assert not any(n.startswith(("git/", "artifacts/")) for n in nxt.names)


def test_bad_requests_are_refused_before_anything_is_written(at: Made, tmp_path: Path) -> None:
    mine = tmp_path / "notes.txt"
    mine.write_text("my notes")
    result = at.run("--json", "bundle", "create", "-o", str(mine))
    assert result.exit_code == 2 and "is not a flagtree-cpu bundle" in error_of(result.stdout)["message"]
    assert mine.read_text() == "my notes"
    cases = [
        (["--platform", "manylinux_2_28_aarch64"], "--target-python"),
        (["--platform", "manylinux_2_28_aarch64", "--platform", "manylinux_2_28_x86_64", "--target-python", "3.12"],
         "one machine"),
        (["--platform", "win_amd64", "--target-python", "3.12"], "not a Linux wheel platform tag"),
        (["--platform", "manylinux_2_28_aarch64", "--target-python", "3.9"], "needs Python"),
    ]
    for args, said in cases:
        result = at.run("--json", "bundle", "create", *args, "-o", str(tmp_path / "x.bundle"))
        error = error_of(result.stdout)
        assert result.exit_code == 2 and said in error["message"] + (error["fix"] or ""), (args, error)
    damaged = tmp_path / "old.bundle"
    good = (at.root / "a.bundle").read_bytes()
    damaged.write_bytes(good[: len(good) // 2])  # cut short on the way
    result = at.run("--json", "bundle", "create", "--since", str(damaged), "-o", str(tmp_path / "x.bundle"))
    assert result.exit_code == 4, result.stdout
    assert not (tmp_path / "x.bundle").exists()


def test_a_bundle_for_another_platform_resolves_for_it(at: Made, tmp_path: Path) -> None:
    result = at.run("--json", "bundle", "create", "--platform", "manylinux_2_28_aarch64", "--target-python", "3.12",
                    "-o", str(tmp_path / "board.bundle"))
    assert result.exit_code == 0, result.stderr
    target = read_bundle(tmp_path / "board.bundle").manifest["target"]
    assert target["arch"] == "aarch64" and target["python"] == "3.12" and target["glibc"] == "2.28"
    assert target["platforms"][:2] == ["manylinux_2_28_aarch64", "manylinux_2_27_aarch64"]
    assert "manylinux2014_aarch64" in target["platforms"] and not any("x86_64" in p for p in target["platforms"])


# --- a stacked recipe ------------------------------------------------------------------------------------------


def test_a_stacked_recipe_bundles_its_whole_stack(git_world: GitWorld, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  http_server: LoopbackHTTPServer) -> None:
    world = build_flaggems_world(tmp_path / "world", git_world)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(world.gitconfig))
    index = simple_index(http_server, "/pypi", tiny_wheel(tmp_path / "a", "fixture-build-tool", "1.0"))
    simple_index(http_server, "/pypi", tiny_wheel(tmp_path / "b", "fixture-gems-dep", "2.0"))
    monkeypatch.setenv("PIP_INDEX_URL", index)
    recipes = tmp_path / "recipes"
    base = write_base_recipe(recipes, world, http_server.serve(LLVM_PATH, llvm_tarball().data))
    data = yaml.safe_load(base.read_text())  # a stacked recipe loads its base as the file says
    data["python"] = {"requires": data["python"]["requires"], "build": ["fixture-build-tool"], "runtime": []}
    base.write_text(yaml.safe_dump(data, sort_keys=False))
    argv = ["-w", str(tmp_path / "ws"), "--recipes-dir", str(recipes), "--recipe", "flaggems-arm",
            "--set", f"sources.flaggems.commit={world['flaggems'].commits['rc2']}",
            "--set", "python.build=[fixture-build-tool]", "--set", "python.runtime=[fixture-gems-dep]",
            "--set", "python.constraints=[]", "--json", "bundle", "create", "-o", str(tmp_path / "gems.bundle")]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.stderr
    read = read_bundle(tmp_path / "gems.bundle")
    assert read.manifest["stack"] == ["flagtree-cpu-arm64", "flaggems-arm"]
    assert read.manifest["recipe"] == "flaggems-arm"
    assert {m["meta"]["mirror"].rsplit("-", 1)[0] for m in read.members("git")} == {
        "FlagTree", "flagtree-cpu", "sleef", "FlagGems"}
    assert sorted(m["name"] for m in read.members("lock")) == ["locks/flaggems-arm.yaml",
                                                                "locks/flagtree-cpu-arm64.yaml"]
    assert sorted(m["name"] for m in read.members("recipe")) == ["recipes/flaggems-arm.yaml",
                                                                  "recipes/flagtree-cpu-arm64.yaml"]
    gems_lock = yaml.safe_load(read.data["locks/flaggems-arm.yaml"])
    assert gems_lock["sources"]["flaggems"]["commit"] == world["flaggems"].commits["rc2"]
    assert "flaggems" not in yaml.safe_load(read.data["locks/flagtree-cpu-arm64.yaml"])["sources"]
    assert sorted(m["meta"]["file"].split("-")[0] for m in read.members("wheel")) == [
        "fixture_build_tool", "fixture_gems_dep"]
    assert len(read.members("artifact")) == 1


# --- the wheelhouse: a source distribution only where no wheel exists ---------------------------------------


def _wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> Path:
    """A wheel whose metadata states ``requires`` (tiny_wheel's have none)."""
    return packed_wheel(folder, name, version, requires=requires)


_BACKEND = '''import os, shutil
HERE = os.path.dirname(os.path.abspath(__file__))
def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    dist = os.path.join(metadata_directory, "fixture_src-1.0.dist-info")
    os.makedirs(dist)
    shutil.copy(os.path.join(HERE, "PKG-INFO"), os.path.join(dist, "METADATA"))
    return "fixture_src-1.0.dist-info"
def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    raise RuntimeError("a bundle never builds")
'''


def _sdist(folder: Path) -> Path:
    """fixture-src 1.0 as a source distribution only, stating its dependency (metadata 2.2), with an in-tree
    build backend (pip prepares its metadata without installing anything)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "fixture_src-1.0.tar.gz"
    files = {"PKG-INFO": "Metadata-Version: 2.2\nName: fixture-src\nVersion: 1.0\nRequires-Dist: fixture-dep\n",
             "pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n',
             "backend.py": _BACKEND}
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(f"fixture_src-1.0/{name}")
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    return path


def test_the_wheelhouse_takes_a_source_distribution_only_where_no_wheel_exists(
        tmp_path: Path, http_server: LoopbackHTTPServer) -> None:
    from flagtree_cpu_build.bundle.wheelhouse import WheelTarget, download_wheelhouse, platform_tags
    from flagtree_cpu_build.ui import UI

    # fixture-app (a wheel) needs fixture-src (an sdist only), which needs fixture-dep (a wheel)
    index = simple_index(http_server, "/pypi", _wheel(tmp_path / "w", "fixture-app", "1.0", ("fixture-src",)))
    simple_index(http_server, "/pypi", _wheel(tmp_path / "w", "fixture-dep", "1.0"))
    simple_index(http_server, "/pypi", _sdist(tmp_path / "s"))
    dest = tmp_path / "house"
    house = download_wheelhouse({index: ["fixture-app"]},
                                WheelTarget(platform_tags("aarch64", "2.28"), "3.12"), dest, constraints=None,
                                ui=UI(quiet=True), logs_dir=tmp_path / "logs", cwd=tmp_path)
    assert [p.name for p in house.files] == ["fixture_app-1.0-py3-none-any.whl", "fixture_dep-1.0-py3-none-any.whl",
                                             "fixture_src-1.0.tar.gz"]
    assert house.sdists == ("fixture-src",) and house.warnings == ()


def test_a_stacked_bundle_sets_up_the_whole_stack_on_a_machine_without_network(
        git_world: GitWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        http_server: LoopbackHTTPServer) -> None:
    """The stack's bundle, imported by `setup --bundle` in a fresh home with the network switch on and no route
    to the git world: both recipes' sources at their pins, each lock where its recipe keeps it (the base's in the
    state folder, the stacked recipe's in its own), nothing asked of the server."""
    world = build_flaggems_world(tmp_path / "world", git_world)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(world.gitconfig))
    index = simple_index(http_server, "/pypi", tiny_wheel(tmp_path / "a", "fixture-build-tool", "1.0"))
    monkeypatch.setenv("PIP_INDEX_URL", index)
    recipes = tmp_path / "recipes"
    base = write_base_recipe(recipes, world, http_server.serve(LLVM_PATH, llvm_tarball().data))
    data = yaml.safe_load(base.read_text())
    data["python"] = {"requires": data["python"]["requires"], "build": ["fixture-build-tool"], "runtime": []}
    base.write_text(yaml.safe_dump(data, sort_keys=False))
    stack = ["--recipes-dir", str(recipes), "--recipe", "flaggems-arm",
             "--set", f"sources.flaggems.commit={world['flaggems'].commits['rc2']}",
             "--set", "python.build=[fixture-build-tool]", "--set", "python.runtime=[]",
             "--set", "python.constraints=[]"]
    bundle = tmp_path / "gems.bundle"
    made = CliRunner().invoke(app, ["-w", str(tmp_path / "ws"), *stack, "bundle", "create", "-o", str(bundle)])
    assert made.exit_code == 0, made.stderr

    board = tmp_path / "board-home"
    board.mkdir()
    (board / ".gitconfig").write_text("")  # no route to the git world
    for name, value in (("HOME", board), ("XDG_CACHE_HOME", board / ".cache"), ("GIT_CONFIG_GLOBAL",
                        board / ".gitconfig"), ("FLAGTREE_CPU_NO_NETWORK", "1"),
                        ("PIP_INDEX_URL", "http://127.0.0.1:9/simple/")):
        monkeypatch.setenv(name, str(value))
    asked = len(http_server.requests)
    ws = tmp_path / "board-ws"
    result = CliRunner().invoke(app, ["-w", str(ws), *stack, "setup", "--bundle", str(bundle), "--skip-build",
                                      "--ignore-host"])
    assert result.exit_code == 0, result.stderr
    assert len(http_server.requests) == asked  # the bundle was enough
    state = ws / ".flagtree-cpu"
    base_lock = yaml.safe_load((state / "lock.yaml").read_text())
    gems_lock = yaml.safe_load((state / "recipes" / "flaggems-arm" / "lock.yaml").read_text())
    assert base_lock["recipe"] == "flagtree-cpu-arm64" and "flaggems" not in base_lock["sources"]
    assert gems_lock["sources"]["flaggems"]["commit"] == world["flaggems"].commits["rc2"]
    heads = {name: git("rev-parse", "HEAD", cwd=ws / folder).strip()
             for name, folder in (("flagtree", "FlagTree"), ("flaggems", "FlagGems"))}
    assert heads == {"flagtree": base_lock["sources"]["flagtree"]["commit"],
                     "flaggems": world["flaggems"].commits["rc2"]}
    lock_before = (state / "lock.yaml").read_bytes()
    again = CliRunner().invoke(app, ["-w", str(ws), *stack, "bundle", "import", str(bundle)])
    assert again.exit_code == 0, again.stderr
    assert "nothing to import" in again.stderr, again.stderr
    assert (state / "lock.yaml").read_bytes() == lock_before  # where the bytes came from is the workspace's own
