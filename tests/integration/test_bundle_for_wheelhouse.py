"""`bundle create --for-wheelhouse`: a bundle that carries a published build (not the sources and LLVM) to a board
that only installs.

Board A builds and publishes into a wheelhouse folder once for the module, then makes the for-wheelhouse bundle from
its workspace (its lock, the recipe, the run-time prerequisite from a loopback PEP 503 index). Each board is an empty
workdir on a machine with every route closed: the tool's own connections refused (``FLAGTREE_CPU_NO_NETWORK``, and
in-process every socket, loopback included: ``netguard``), pip's index a dead port, git allowed no protocol but file
and its world stopped. Hostile bundles are the good one re-sealed with one thing changed (``rebundle``): the archive
verifies, so what refuses them is the check of the published build.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from flagtree_cpu_build.bundle import MANIFEST_NAME, Manifest, Member, write_bundle
from flagtree_cpu_build.bundle.archive import seal
from flagtree_cpu_build.wheelhouse import MANIFEST
from tests.integration.test_bundle_offline import close_every_route
from tests.support.cli import ONE_KERNEL, Workspace, new_workspace, ready_to_build
from tests.support.envelope import result_of
from tests.support.gitworld import GitWorld
from tests.support.hermetic import make_hermetic
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.netguard import forbid_network
from tests.support.tarballs import TOP, llvm_tarball
from tests.support.venvs import PREREQUISITES, TOOLS, build_venv, simple_index, tiny_wheel

LLVM_PATH = f"/public/llvm-builds/{TOP}.tar.gz"
RUNTIME = "python.runtime=[fixture-runtime==1.0]"  # only the loopback index has it; torch is the board's own
FLEET = ".flagtree-cpu/fleet-wheelhouse"
pytestmark = pytest.mark.xdist_group("for_wheelhouse")


@dataclass(frozen=True)
class Made:
    wheelhouse: Path  # what A published
    bundle: Path  # A's for-wheelhouse bundle
    sets: tuple[str, ...]
    ws: Workspace  # A's workspace
    home: Path
    index: str
    server: LoopbackHTTPServer
    created: dict  # bundle create's --json result


@pytest.fixture(scope="module")
def made(git_world: GitWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Made]:
    root = tmp_path_factory.mktemp("for-wheelhouse")
    (root / "home").mkdir()
    server = LoopbackHTTPServer()
    try:
        with pytest.MonkeyPatch.context() as mp:
            make_hermetic(mp, root / "home")
            mp.setenv("GIT_CONFIG_GLOBAL", str(git_world.gitconfig))
            mp.setenv("FIXTURE_BUILD_RECORD", str(root / "record.jsonl"))
            url = server.serve(LLVM_PATH, llvm_tarball().data)
            index = simple_index(server, "/pypi", tiny_wheel(root / "w", "fixture-runtime", "1.0"))
            mp.setenv("PIP_INDEX_URL", index)  # the build prerequisites are not there: only the run-time one is
            sets = (f"artifacts.llvm.url={url}", PREREQUISITES, RUNTIME, ONE_KERNEL)
            ws = ready_to_build(git_world, root / "a", url, RUNTIME, ONE_KERNEL)
            python = build_venv(root / "a-venv", TOOLS)
            done = ws.run("build", "--ignore-host", "--python", str(python), "--publish", str(root / "wheelhouse"))
            assert done.exit_code == 0, done.stderr
            created = ws.run("--json", "bundle", "create", "--for-wheelhouse", "--wheelhouse",
                             str(root / "wheelhouse"), "-o", str(root / "board.bundle"))
            assert created.exit_code == 0, created.stderr
        yield Made(root / "wheelhouse", root / "board.bundle", sets, ws, root / "home", index, server,
                   result_of(created.stdout))
    finally:
        server.close()


@pytest.fixture
def at_a(made: Made, git_world: GitWorld, monkeypatch: pytest.MonkeyPatch) -> Made:
    """Board A's machine again, as it made the bundle."""
    make_hermetic(monkeypatch, made.home)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(git_world.gitconfig))
    monkeypatch.setenv("PIP_INDEX_URL", made.index)
    return made


@dataclass
class Board:
    ws: Workspace
    python: Path
    made: Made

    def run(self, *args: str) -> object:
        return self.ws.run(*args)

    def imported(self, bundle: Path | None = None) -> object:
        return self.ws.run("bundle", "import", str(bundle or self.made.bundle), "--python", str(self.python))

    def outside(self) -> list[str]:
        """What the board's workspace holds besides its state folder (a source, a link, a build)."""
        return sorted(p.name for p in self.ws.root.iterdir() if p.name not in (".flagtree-cpu", "logs")) \
            if self.ws.root.exists() else []


@pytest.fixture
def board(made: Made, world: GitWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Board:
    """An empty workdir (no lock: the bundle brings it), a venv with pip, torch and numpy, every route closed."""
    python = build_venv(tmp_path / "venv", ["pip", "torch", "numpy"])
    close_every_route(monkeypatch, world, tmp_path / "board-home")
    forbid_network(monkeypatch, allow_loopback=False)
    return Board(new_workspace(world, tmp_path / "board", always_set=made.sets), python, made)


def test_the_bundle_carries_the_build_the_lock_and_the_runtime_wheels_only(made: Made) -> None:
    with tarfile.open(made.bundle) as tar:
        manifest = json.loads(tar.extractfile(MANIFEST_NAME).read())  # type: ignore[union-attr]
    kinds = sorted({m["kind"] for m in manifest["members"]})
    assert kinds == ["build", "lock", "recipe", "wheel"], kinds  # no git, no artifact (no LLVM)
    assert [m["meta"]["file"] for m in manifest["members"] if m["kind"] == "wheel"] == \
        ["fixture_runtime-1.0-py3-none-any.whl"]  # the run-time prerequisite, none of the build's
    [build] = [m for m in manifest["members"] if m["kind"] == "build"]
    [published] = json.loads((made.wheelhouse / MANIFEST).read_text())["wheels"]
    assert build["sha256"] == published["sha256"] and build["meta"]["entry"]["pins_key"] == published["pins_key"]
    assert made.created["members"] == {"build": 1, "wheel": 1, "lock": 1, "recipe": 1}


def test_an_empty_board_imports_it_and_sets_up_offline_with_every_route_closed(board: Board) -> None:
    asked = len(board.made.server.requests)
    imported = board.imported()
    assert imported.exit_code == 0, imported.stderr
    fleet = board.ws.root / FLEET
    assert json.loads((fleet / MANIFEST).read_text())["wheels"][0]["pins_key"]
    assert (fleet / "simple" / "index.html").is_file()  # the layout `build --publish` writes
    assert board.ws.lock_file.is_file()
    assert "installs the published build" in imported.stderr
    plan = board.run("setup", "--dry-run", "--offline", "--ignore-host", "--python", str(board.python))
    assert plan.exit_code == 0 and f"from {fleet} (no sync, no fetch)" in plan.stderr + plan.stdout, plan.stderr

    setup = board.run("--json", "setup", "--offline", "--ignore-host", "--python", str(board.python))
    assert setup.exit_code == 0, setup.stderr
    report = result_of(setup.stdout)
    stages = {s["stage"]: s["status"] for s in report["stages"]}
    assert stages == {"preflight": "ok", "sources": "skipped", "artifacts": "skipped", "links": "skipped",
                      "python": "skipped", "build": "created", "validate": "created"}, setup.stderr
    assert f"from {fleet} (no sync, no fetch)" in setup.stderr
    assert report["validation"]["ok"] is True
    assert board.outside() == [], "a source was cloned or a link made"
    assert len(board.made.server.requests) == asked, "the board reached the loopback server"

    status = board.run("--json", "status", "--python", str(board.python))
    [item] = [i for i in result_of(status.stdout)["items"] if i["area"] == "build"]
    assert item["state"] == "ok" and f"installed from the wheelhouse {fleet}" in item["detail"]
    again = board.imported()  # the same bundle again: everything is here
    assert again.exit_code == 0 and "nothing to import" in again.stderr, again.stderr


def test_setup_bundle_offline_as_bundle_create_says_installs_it(board: Board) -> None:
    """What `bundle create` prints for the board of a bundled recipe: `setup --bundle FILE --offline`."""
    setup = board.run("--json", "setup", "--bundle", str(board.made.bundle), "--offline", "--ignore-host",
                      "--python", str(board.python))
    assert setup.exit_code == 0, setup.stderr
    stages = {s["stage"]: s["status"] for s in result_of(setup.stdout)["stages"]}
    assert stages["sources"] == "skipped" and stages["build"] == "created" and stages["validate"] == "created"
    assert board.outside() == []


def test_bundle_verify_accepts_it(made: Made) -> None:
    result = made.ws.run("bundle", "verify", str(made.bundle))
    assert result.exit_code == 0, result.stderr


def test_no_build_for_this_lock_and_target_is_refused_naming_the_differing_pin(at_a: Made, tmp_path: Path) -> None:
    out = tmp_path / "x.bundle"
    other = at_a.ws.run("bundle", "create", "--for-wheelhouse", "--wheelhouse", str(at_a.wheelhouse), "-o", str(out),
                        sets=("build.env.set.TRITON_BUILD_PROTON=ON",))  # another recipe digest
    assert other.exit_code == 4, other.stderr
    said = " ".join(other.stderr.split())
    assert f"the wheelhouse {at_a.wheelhouse} has no build for this lock" in said and "recipe_digest" in said, said
    arm = at_a.ws.run("bundle", "create", "--for-wheelhouse", "--wheelhouse", str(at_a.wheelhouse), "--platform",
                      "manylinux_2_28_aarch64", "--target-python", "3.12", "-o", str(out))
    assert arm.exit_code == 4 and "is for another machine: arch: built for x86_64" in " ".join(arm.stderr.split()), \
        arm.stderr
    assert not out.exists()


def test_wheelhouse_without_for_wheelhouse_is_a_usage_error(at_a: Made, tmp_path: Path) -> None:
    result = at_a.ws.run("bundle", "create", "--wheelhouse", str(at_a.wheelhouse), "-o", str(tmp_path / "x.bundle"))
    assert result.exit_code == 2 and "--for-wheelhouse" in result.stderr, result.stderr


# --- hostile bundles ----------------------------------------------------------------------------------------------


def rebundle(source: Path, dest: Path, change: Callable[[dict, dict[str, bytes]], None]) -> Path:
    """``source`` with its manifest (as JSON) and member bytes changed by ``change``, sealed and written again by
    the tool's own writer: a bundle whose archive verifies."""
    with tarfile.open(source) as tar:
        data = {i.name: tar.extractfile(i).read() for i in tar if i.isfile()}  # type: ignore[union-attr]
    doc = json.loads(data.pop(MANIFEST_NAME))
    change(doc, data)
    files = {}
    for name, raw in data.items():
        files[name] = dest.parent / "members" / name
        files[name].parent.mkdir(parents=True, exist_ok=True)
        files[name].write_bytes(raw)
    members = tuple(Member(name=m["name"], kind=m["kind"], meta=m["meta"]) for m in doc["members"])
    draft = Manifest(tool_version=doc["tool_version"], created=doc["created"], host=doc["host"],
                     recipe=doc["recipe"], stack=tuple(doc["stack"]), variant=doc["variant"], target=doc["target"],
                     since=None, members=members)
    write_bundle(dest, seal(draft, files), files)
    return dest


def build_of(doc: dict) -> dict:
    [member] = [m for m in doc["members"] if m["kind"] == "build"]
    return member


def assert_refused(board: Board, bundle: Path, code: int, *said: str) -> None:
    verify = board.run("bundle", "verify", str(bundle))
    imported = board.imported(bundle)
    for result in ((verify, imported) if code == 4 else (imported,)):
        text = " ".join(result.stderr.split())
        assert result.exit_code == code and all(s in text for s in said), result.stderr
    assert not (board.ws.root / FLEET).exists() and not board.ws.lock_file.exists(), "something was imported"


def test_a_wheel_whose_sha256_disagrees_with_its_entry_is_refused(board: Board, tmp_path: Path) -> None:
    def tamper(doc: dict, data: dict[str, bytes]) -> None:
        name = build_of(doc)["name"]
        data[name] = data[name][:-1] + bytes([data[name][-1] ^ 0xFF])

    bundle = rebundle(board.made.bundle, tmp_path / "tampered.bundle", tamper)
    assert_refused(board, bundle, 4, "is not the wheel its wheelhouse entry lists")


def test_an_entry_whose_file_name_escapes_the_folder_is_refused(board: Board, tmp_path: Path) -> None:
    def escape(doc: dict, data: dict[str, bytes]) -> None:
        build_of(doc)["meta"]["entry"]["file"] = "wheels/../../../../escaped.whl"

    bundle = rebundle(board.made.bundle, tmp_path / "escape.bundle", escape)
    assert_refused(board, bundle, 4, "the wheelhouse entry of builds/", "is malformed", "is not a bare wheel file name")
    assert not list(tmp_path.rglob("escaped.whl"))


def test_a_lock_whose_pins_differ_from_the_entry_is_refused(board: Board, tmp_path: Path) -> None:
    other = board.ws.world["flagtree"].commits["tip"]

    def repin(doc: dict, data: dict[str, bytes]) -> None:
        [name] = [m["name"] for m in doc["members"] if m["kind"] == "lock"]
        lock = yaml.safe_load(data[name])
        lock["sources"]["flagtree"]["commit"] = other
        data[name] = yaml.safe_dump(lock).encode()

    bundle = rebundle(board.made.bundle, tmp_path / "repinned.bundle", repin)
    assert_refused(board, bundle, 4, "pins other things than the build", f"the lock's {other[:12]}")


def test_a_build_for_another_board_class_is_refused_at_import(board: Board, tmp_path: Path) -> None:
    def other_class(doc: dict, data: dict[str, bytes]) -> None:
        build_of(doc)["meta"]["entry"]["class"]["cpu_features"] = ["sve2"]

    bundle = rebundle(board.made.bundle, tmp_path / "sve2.bundle", other_class)
    assert_refused(board, bundle, 2, "carries a build this board would not install",
                   "cpu_features: built for sve2, here asimd")
