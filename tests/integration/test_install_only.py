"""Install-only boards: board A builds and publishes; board B, an empty workdir with A's lock, installs that build by
the lock's pins without cloning a source, downloading LLVM or building, then validates.

A publishes once for the module (its own HOME, git world and venv); each test copies the wheelhouse. B's git world
is stopped before B runs (any clone or fetch fails) and the loopback server counts the LLVM downloads.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from flagtree_cpu_build.wheelhouse import MANIFEST
from tests.integration.test_plan_contract import RUNTIME
from tests.support.cli import ONE_KERNEL, Workspace, new_workspace, ready_to_build
from tests.support.envelope import result_of
from tests.support.gitworld import GitWorld
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import TOP, llvm_tarball
from tests.support.venvs import PREREQUISITES, TOOLS, build_venv

LLVM_PATH = f"/public/llvm-builds/{TOP}.tar.gz"
# the recipe's target needs no particular CPU features here (the test machine is an x86_64): board B then passes the
# checks of what running needs without --ignore-host, and what it lacks (a compiler) is the build's alone
ANY_CPU = "platform.target.cpu_features=[]"
pytestmark = pytest.mark.xdist_group("install_only")


@dataclass(frozen=True)
class Fleet:
    wheelhouse: Path  # what A published
    lock: Path  # A's lock
    sets: tuple[str, ...]  # the recipe overrides both boards use
    server: LoopbackHTTPServer  # serves the LLVM tarball A downloaded
    built: dict  # A's build action
    pinned: Path  # what A published from the fully pinned recipe (its own wheelhouse)
    pinned_sets: tuple[str, ...]  # what makes the recipe fully pinned (added to ``sets``)


def fully_pinned(lock: Path) -> tuple[str, ...]:
    """The overrides that make the recipe pin every input itself (``recipe_lock``: it is its own lock): flagtree-cpu
    at A's commit without its submodules, the LLVM download by its sha256 at a path read from no source's file."""
    from flagtree_cpu_build.lockfile import read_lock
    from tests.support.fetching import PATH_SET

    return (f"sources.flagtree-cpu.commit={read_lock(lock).sources['flagtree-cpu'].commit}",
            "sources.flagtree-cpu.submodules=none", "artifacts.llvm.matches=null", "artifacts.llvm.variants=[]",
            PATH_SET, f"artifacts.llvm.sha256={llvm_tarball().sha256}")


@pytest.fixture(scope="module")
def fleet(git_world: GitWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    from tests.support.hermetic import make_hermetic

    root = tmp_path_factory.mktemp("install-only")
    (root / "home").mkdir()
    server = LoopbackHTTPServer()
    try:
        with pytest.MonkeyPatch.context() as mp:
            make_hermetic(mp, root / "home")
            mp.setenv("GIT_CONFIG_GLOBAL", str(git_world.gitconfig))
            mp.setenv("FIXTURE_BUILD_RECORD", str(root / "record.jsonl"))
            url = server.serve(LLVM_PATH, llvm_tarball().data)
            sets = (f"artifacts.llvm.url={url}", PREREQUISITES, RUNTIME, ONE_KERNEL, ANY_CPU)
            ws = ready_to_build(git_world, root / "a", url, RUNTIME, ONE_KERNEL, ANY_CPU)
            python = build_venv(root / "a-venv", TOOLS)
            done = ws.run("--json", "build", "--ignore-host", "--python", str(python), "--publish",
                          str(root / "wheelhouse"))
            assert done.exit_code == 0, done.stderr
            lock = root / "lock.yaml"  # A's lock, as board B copies it
            shutil.copy(ws.lock_file, lock)
            pinned = fully_pinned(lock)
            # the same checkout and LLVM tree published again from the fully pinned recipe, with the lock its sync
            # writes (its own file): the build is up to date or quick, and its entry carries that recipe's pins key
            beside = ("--lock-file", str(root / "pinned-lock.yaml"))
            for step in ("sync", "fetch"):
                again = ws.run(*beside, step, sets=pinned)
                assert again.exit_code == 0, (step, again.stderr)
            again = ws.run(*beside, "build", "--ignore-host", "--python", str(python), "--publish",
                           str(root / "pinned-wheelhouse"), sets=pinned)
            assert again.exit_code == 0, again.stderr
        [built] = result_of(done.stdout)["actions"]
        assert built["published"]["status"] == "published"
        yield Fleet(root / "wheelhouse", lock, sets, server, built, root / "pinned-wheelhouse", pinned)
    finally:
        server.close()


@dataclass
class Board:
    ws: Workspace
    python: Path
    wheelhouse: Path
    fleet: Fleet

    def run(self, *args: str, sets: tuple[str, ...] = ()):
        return self.ws.run(*args, "--ignore-host", "--python", str(self.python), sets=sets)

    def llvm_gets(self) -> int:
        return len([r for r in self.fleet.server.requests_for(LLVM_PATH) if r.method == "GET"])


@pytest.fixture
def board(fleet: Fleet, world: GitWorld, tmp_path: Path) -> Board:
    """Board B: an empty workdir holding only A's lock, a venv with pip and the run-time prerequisites (no build
    tools), a copy of A's wheelhouse, and a git world that refuses every clone."""
    shutil.copytree(fleet.wheelhouse, tmp_path / "wheelhouse")
    ws = new_workspace(world, tmp_path / "b", always_set=fleet.sets)
    ws.lock_file.parent.mkdir(parents=True)
    shutil.copy(fleet.lock, ws.lock_file)
    python = build_venv(tmp_path / "b-venv", ["pip", "torch", "numpy"])
    world.stop()
    return Board(ws, python, tmp_path / "wheelhouse", fleet)


def entry_of(wheelhouse: Path) -> dict:
    [entry] = json.loads((wheelhouse / MANIFEST).read_text())["wheels"]
    return entry


def test_publish_records_the_lock_pins_of_an_exact_checkout(fleet: Fleet) -> None:
    entry = entry_of(fleet.wheelhouse)
    assert len(entry["pins_key"]) == 64
    pins = entry["pins"]
    assert pins["sources"]["flagtree"]["commit"] and pins["artifacts"]["llvm"] == llvm_tarball().sha256
    assert pins["build"] and pins["recipe"] == entry["recipe"]


def test_an_empty_board_installs_by_the_lock_pins_without_clone_or_llvm(board: Board) -> None:
    gets = board.llvm_gets()
    result = board.run("--json", "setup", "--wheelhouse", str(board.wheelhouse))
    assert result.exit_code == 0, result.stderr
    report = result_of(result.stdout)
    stages = {s["stage"]: s["status"] for s in report["stages"]}
    assert stages == {"preflight": "ok", "sources": "skipped", "artifacts": "skipped", "links": "skipped",
                      "python": "skipped", "build": "created", "validate": "created"}, result.stderr
    assert "(no sync, no fetch)" in result.stderr
    assert board.llvm_gets() == gets, "LLVM was downloaded"
    assert not board.ws.flagtree.exists(), "a source was cloned"
    assert report["validation"]["ok"] is True
    assert not (board.ws.root / ".flagtree-cpu" / "wheelhouse-downloads").exists()

    again = board.run("--json", "setup", "--wheelhouse", str(board.wheelhouse))  # the wheelhouse may be gone now
    assert again.exit_code == 0, again.stderr
    rows = {s["stage"]: s for s in result_of(again.stdout)["stages"]}
    assert rows["build"]["status"] == "ok" and rows["validate"]["status"] == "ok", again.stderr
    assert rows["sources"]["status"] == "skipped" and "install-only" in rows["sources"]["detail"]
    assert not board.ws.flagtree.exists()
    status = board.ws.run("--json", "status", "--python", str(board.python))
    [item] = [i for i in result_of(status.stdout)["items"] if i["area"] == "build"]
    assert item["state"] == "ok" and "install-only: skipped sync, fetch" in item["detail"]
    assert "flagtree-cpu build --force" in item["detail"]


def test_a_rerun_asks_no_wheelhouse_over_http(board: Board, tmp_path: Path) -> None:
    from tests.integration.test_wheelhouse import serve_folder

    url = serve_folder(board.fleet.server, board.wheelhouse, f"/{tmp_path.name}/fleet")
    assert board.run("setup", "--wheelhouse", url).exit_code == 0
    asked = board.fleet.server.requests_for(f"/{tmp_path.name}/fleet/{MANIFEST}")
    assert len(asked) == 1
    for again in (board.run("setup", "--wheelhouse", url), board.run("build", "--wheelhouse", url)):
        assert again.exit_code == 0, again.stderr
        assert "up to date" in again.stderr
    assert board.fleet.server.requests_for(f"/{tmp_path.name}/fleet/{MANIFEST}") == asked  # no request at all


def test_dry_run_asks_the_wheelhouse_and_says_what_it_would_install(board: Board) -> None:
    entry = entry_of(board.wheelhouse)
    wheel = entry["file"].split("/")[-1]
    result = board.run("setup", "--dry-run", "--wheelhouse", str(board.wheelhouse))
    assert result.exit_code == 0, result.stderr
    assert f"install {wheel} from {board.wheelhouse} (no sync, no fetch)" in result.stderr + result.stdout
    assert "clone" not in result.stdout
    assert not (board.ws.root / "FlagTree").exists()

    other = board.run("setup", "--dry-run", "--wheelhouse", str(board.wheelhouse),
                      sets=("build.env.set.TRITON_BUILD_PROTON=ON",))  # another recipe digest
    assert "not install-only: wheelhouse" in other.stderr and "recipe_digest" in other.stderr


def test_a_tampered_wheel_is_refused_with_exit_4_and_nothing_installed(board: Board) -> None:
    [wheel] = (board.wheelhouse / "wheels").glob("*.whl")
    data = bytearray(wheel.read_bytes())
    data[len(data) // 2] ^= 0xFF
    wheel.write_bytes(bytes(data))
    result = board.run("setup", "--wheelhouse", str(board.wheelhouse))
    assert result.exit_code == 4, result.stderr
    assert "is not the file its manifest lists" in result.stderr and "nothing was installed" in result.stderr
    assert not (board.ws.root / ".flagtree-cpu" / "install-only.json").exists()
    assert not (board.ws.root / ".flagtree-cpu" / "wheelhouse-downloads").exists()
    assert not board.ws.flagtree.exists()


def test_a_fitting_pins_key_for_another_class_is_not_taken(board: Board) -> None:
    manifest = json.loads((board.wheelhouse / MANIFEST).read_text())
    manifest["wheels"][0]["class"]["arch"] = "riscv64"  # a lying (or another board's) class
    (board.wheelhouse / MANIFEST).write_text(json.dumps(manifest))
    result = board.run("setup", "--dry-run", "--wheelhouse", str(board.wheelhouse))
    assert "is for another machine: arch: built for riscv64" in result.stderr, result.stderr
    assert "(no sync, no fetch)" not in result.stderr


def test_doctor_says_the_build_came_from_the_wheelhouse_and_what_was_skipped(board: Board) -> None:
    assert board.run("setup", "--skip-validate", "--wheelhouse", str(board.wheelhouse)).exit_code == 0
    result = board.ws.run("doctor", "--json", "--offline", "--python", str(board.python))
    checks = {f["id"]: f for f in result_of(result.stdout)["checks"]}
    build = checks["workspace.build"]
    assert build["status"] == "ok" and f"installed from the wheelhouse {board.wheelhouse}" in build["detail"]
    assert "install-only: skipped sync, fetch, link, build prerequisites, build" in build["detail"]
    for skipped in ("workspace.sources", "workspace.artifacts", "workspace.links"):
        assert checks[skipped]["status"] == "skip" and "install-only board" in checks[skipped]["detail"], skipped


def test_a_later_full_build_on_the_board_works(board: Board, world: GitWorld,
                                               monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert board.run("setup", "--skip-validate", "--wheelhouse", str(board.wheelhouse)).exit_code == 0
    world.start()
    for step in ("sync", "link", "fetch"):
        done = board.ws.run(step)
        assert done.exit_code == 0, (step, done.stderr)
    tools = build_venv(tmp_path / "b-build-venv", TOOLS)  # the build prerequisites, which install-only left out
    record = tmp_path / "b-record.jsonl"
    monkeypatch.setenv("FIXTURE_BUILD_RECORD", str(record))
    built = board.ws.run("--json", "build", "--force", "--ignore-host", "--python", str(tools),
                         "--wheelhouse", str(board.wheelhouse))
    assert built.exit_code == 0, built.stderr
    [action] = result_of(built.stdout)["actions"]
    assert action["status"] in ("created", "updated") and "built in" in action["detail"]
    assert record.exists(), "no build ran"
    assert not (board.ws.root / ".flagtree-cpu" / "install-only.json").exists()  # the board now holds its own build


def test_a_wheel_the_wheelhouse_cannot_deliver_is_one_warning_and_the_usual_path(board: Board) -> None:
    """The manifest lists a wheel that is gone by the time it is downloaded: not an attack, a stale wheelhouse; the
    board takes the usual path (here it stops at sync: its git world refuses every clone)."""
    [wheel] = (board.wheelhouse / "wheels").glob("*.whl")
    wheel.unlink()
    result = board.run("setup", "--wheelhouse", str(board.wheelhouse))
    assert f"could not download {wheel.name} from the wheelhouse" in result.stderr, result.stderr
    assert result.stderr.count("could not download") == 1
    assert result.exit_code == 3, result.stderr  # sync ran: the install-only path was left
    assert not (board.ws.root / ".flagtree-cpu" / "install-only.json").exists()


def test_a_board_without_a_compiler_is_judged_only_on_what_running_needs(board: Board, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """No --ignore-host, and nothing on PATH (no compiler, cmake or git): the usual setup stops at preflight for the
    build's checks; the install-only board is judged on what running needs, and the dry run says what it skipped."""
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    python, wheelhouse = ("--python", str(board.python)), ("--wheelhouse", str(board.wheelhouse))
    usual = board.ws.run("setup", "--dry-run", *python)
    assert usual.exit_code == 7 and "toolchain.compiler" in usual.stderr, usual.stderr

    dry = board.ws.run("setup", "--dry-run", *python, *wheelhouse)
    assert dry.exit_code == 0, dry.stderr
    said = " ".join(dry.stderr.split())
    assert "install-only: " in said and "build checks skipped, nothing is built here" in said, said
    assert "toolchain.compiler" in said and "resources.memory" in said and "toolchain.git" in said

    planned = result_of(board.ws.run("--json", "setup", "--dry-run", *python, *wheelhouse).stdout)
    judged = {c["id"] for c in planned["preflight"]["checks"]}
    assert {"cpu.features", "python.version"} <= judged
    assert not judged & {"toolchain.compiler", "host.arch", "resources.memory", "toolchain.git"}, judged

    result = board.ws.run("--json", "setup", *python, *wheelhouse)
    assert result.exit_code == 0, result.stderr
    [preflight] = [s for s in result_of(result.stdout)["stages"] if s["stage"] == "preflight"]
    assert preflight["status"] == "ok" and "build checks skipped" in preflight["detail"], preflight
    assert "toolchain.compiler:" not in result.stderr  # neither a failure nor a warning (the note lists it: "...,")
    assert result_of(result.stdout)["validation"]["ok"] is True


def _without_a_compiler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing on PATH (no compiler, cmake or git): the venv's interpreter is named by its path."""
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def test_build_on_a_board_without_a_compiler_asks_the_wheelhouse_before_judging_the_host(
        board: Board, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`build --wheelhouse` with no --ignore-host on a board that cannot build (no compiler, another arch than the
    recipe builds on): it installs the published build, judged only on what running needs, as setup does."""
    _without_a_compiler(tmp_path, monkeypatch)
    python, wheelhouse = ("--python", str(board.python)), ("--wheelhouse", str(board.wheelhouse))
    usual = board.ws.run("build", *python)
    assert usual.exit_code == 7 and "toolchain.compiler" in usual.stderr, usual.stderr

    result = board.ws.run("--json", "build", *python, *wheelhouse)
    assert result.exit_code == 0, result.stderr
    [action] = result_of(result.stdout)["actions"]
    assert action["status"] == "created" and "installed from the wheelhouse" in action["detail"], action
    said = " ".join(result.stderr.split())
    assert "(no sync, no fetch)" in said
    assert "build checks skipped, nothing is built here" in said and "toolchain.compiler" in said, said
    assert "toolchain.compiler:" not in said  # neither a failure nor a warning
    assert not board.ws.flagtree.exists(), "a source was cloned"

    again = board.ws.run("--json", "build", *python, *wheelhouse)  # the record: nothing asked, nothing judged anew
    assert again.exit_code == 0, again.stderr
    [action] = result_of(again.stdout)["actions"]
    assert action["status"] == "ok" and action["detail"] == "up to date", action


def test_build_judges_the_host_as_a_builder_when_the_wheelhouse_cannot_deliver(
        board: Board, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The manifest lists a wheel that is gone: one warning, then the usual build, whose host checks now judge the
    board (exit 7 naming the compiler) before anything is run."""
    [wheel] = (board.wheelhouse / "wheels").glob("*.whl")
    wheel.unlink()
    _without_a_compiler(tmp_path, monkeypatch)
    result = board.ws.run("build", "--python", str(board.python), "--wheelhouse", str(board.wheelhouse))
    assert result.stderr.count(f"could not download {wheel.name} from the wheelhouse") == 1, result.stderr
    assert result.exit_code == 7 and "toolchain.compiler" in result.stderr, result.stderr
    assert not (board.ws.root / ".flagtree-cpu" / "install-only.json").exists()


def _rows(result) -> dict[str, str]:
    return {s["stage"]: s["status"] for s in result_of(result.stdout)["stages"]}


def test_a_wheel_the_user_uninstalled_is_noticed_and_installed_again(board: Board) -> None:
    """The record is trusted only while what it installed is there: a `pip uninstall` is seen by a stat of the
    .dist-info (no pip run) and the re-run installs the wheel from the wheelhouse again, then validates."""
    assert board.run("setup", "--wheelhouse", str(board.wheelhouse)).exit_code == 0
    [dist_info] = board.python.parent.parent.glob("lib/python*/site-packages/triton-*.dist-info")
    shutil.rmtree(dist_info)  # what `pip uninstall triton` leaves of it: no .dist-info
    again = board.run("--json", "setup", "--wheelhouse", str(board.wheelhouse))
    assert again.exit_code == 0, again.stderr
    assert "is gone" in again.stderr and "the wheelhouse is asked again" in again.stderr
    assert _rows(again)["build"] == "created" and result_of(again.stdout)["validation"]["ok"] is True
    assert dist_info.is_dir()
    assert _rows(board.run("--json", "setup", "--wheelhouse", str(board.wheelhouse)))["build"] == "ok"


def test_a_venv_made_again_gets_the_wheel_again(board: Board) -> None:
    """The venv removed and made again at the same path (the interpreter exists, the install does not): `build`
    notices it and installs the wheel again instead of saying "up to date"."""
    assert board.run("setup", "--skip-validate", "--wheelhouse", str(board.wheelhouse)).exit_code == 0
    shutil.rmtree(board.python.parent.parent)
    assert build_venv(board.python.parent.parent, ["pip", "torch", "numpy"]) == board.python
    result = board.run("--json", "build", "--wheelhouse", str(board.wheelhouse))
    assert result.exit_code == 0, result.stderr
    [action] = result_of(result.stdout)["actions"]
    assert action["status"] == "created" and "installed from the wheelhouse" in action["detail"], action


def test_without_a_lock_the_dry_run_names_the_unknown_pin_and_how_to_get_the_lock(board: Board) -> None:
    board.ws.lock_file.unlink()
    result = board.run("setup", "--dry-run", "--wheelhouse", str(board.wheelhouse))
    said = " ".join(result.stderr.split())
    assert "not install-only: there is no lock file, and source flagtree-cpu has no commit in the recipe" in said, said
    assert "run `flagtree-cpu sync` on a machine with network" in said
    assert "or copy the publishing board's .flagtree-cpu/lock.yaml" in said
    assert "(no sync, no fetch)" not in said


def test_a_board_without_a_lock_installs_by_a_fully_pinned_recipe_and_writes_the_lock(
        fleet: Fleet, world: GitWorld, tmp_path: Path) -> None:
    """No lock file, a recipe that pins every input itself: its pins key is computed from the recipe, the build A
    published from that recipe is installed with no clone and no LLVM download, and the lock `flagtree-cpu lock`
    would write is written (so the re-run is up to date by the record, with no wheelhouse asked)."""
    shutil.copytree(fleet.pinned, tmp_path / "wheelhouse")
    ws = new_workspace(world, tmp_path / "b", always_set=(*fleet.sets, *fleet.pinned_sets))
    board = Board(ws, build_venv(tmp_path / "b-venv", ["pip", "torch", "numpy"]), tmp_path / "wheelhouse", fleet)
    world.stop()
    gets = board.llvm_gets()
    result = board.run("--json", "setup", "--wheelhouse", str(board.wheelhouse))
    assert result.exit_code == 0, result.stderr
    assert _rows(result) == {"preflight": "ok", "sources": "skipped", "artifacts": "skipped", "links": "skipped",
                             "python": "skipped", "build": "created", "validate": "created"}, result.stderr
    said = " ".join(result.stderr.split())
    assert "(no sync, no fetch)" in said
    assert f"no lock file: the recipe pins every input, so its lock was written from it ({ws.lock_file})" in said
    assert board.llvm_gets() == gets, "LLVM was downloaded"
    assert not ws.flagtree.exists(), "a source was cloned"

    from flagtree_cpu_build.lockfile import read_lock

    written = read_lock(ws.lock_file)
    assert written.sources["flagtree-cpu"].commit == read_lock(fleet.lock).sources["flagtree-cpu"].commit
    assert written.artifacts["llvm"].sha256 == llvm_tarball().sha256
    shutil.rmtree(board.wheelhouse)  # the re-run asks no wheelhouse: the record holds for the written lock
    again = board.run("--json", "setup", "--wheelhouse", str(board.wheelhouse))
    assert again.exit_code == 0, again.stderr
    assert _rows(again)["build"] == "ok" and _rows(again)["validate"] == "ok", again.stderr
