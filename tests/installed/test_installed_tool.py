"""What a user installs is what works: the installed console script, in real processes, outside the checkout.

Every command answers `--help`; then the product's three paths, each end to end on the loopback world:
1. `setup` with the fixture recipe (sync, fetch, links, prerequisites, the fixture build, the validation
   kernels), then `build --publish` into a wheelhouse, and a second workspace (another HOME, another target
   venv) that installs that build from the wheelhouse without building;
2. `bundle create --sign` on a connected workspace, `bundle verify` against the trusted key, and `setup --bundle
   --offline --trusted-keys` on a board that runs in a network namespace of its own, where nothing (not even
   loopback) answers.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import typer
from typer.main import get_command

from flagtree_cpu_build import __version__
from flagtree_cpu_build.cli import app
from tests.support.cli import Workspace, new_workspace
from tests.support.envelope import result_of
from tests.support.gitworld import GitWorld
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.signing import allowed_line, make_key
from tests.support.tarballs import TOP, llvm_tarball
from tests.support.venvs import PREREQUISITES, TOOLS, build_venv, simple_index, tiny_wheel

LLVM_PATH = f"/public/llvm-builds/{TOP}.tar.gz"
RUNTIME = "python.runtime=[torch>=2.0, numpy]"
BUILD_COMMANDS = {"editable_wheel", "bdist_wheel", "develop", "build_ext", "build"}


def command_paths(group: typer.core.TyperGroup, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command of the app, sub-commands included (`bundle verify`), from the checkout's own Typer app."""
    found = []
    for name, command in sorted(group.commands.items()):
        if getattr(command, "hidden", False):
            continue
        found.append((*prefix, name))
        if hasattr(command, "commands"):  # a group (typer vendors click: no isinstance against click's classes)
            found += command_paths(command, (*prefix, name))
    return found


def run(cli: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(cli), *args], cwd=cwd, capture_output=True, text=True, check=False,
                          stdin=subprocess.DEVNULL)


def builds_in(record: Path) -> list[list[str]]:
    runs = [json.loads(line)["argv"] for line in record.read_text().splitlines()] if record.exists() else []
    return [argv for argv in runs if BUILD_COMMANDS & set(argv[1:])]


def test_the_installed_copy_runs_not_the_checkout(installed_cli: Path, tmp_path: Path) -> None:
    version = run(installed_cli, "--version", cwd=tmp_path)
    assert version.returncode == 0 and __version__ in version.stdout, version
    where = subprocess.run([str(installed_cli.parent / "python"), "-c",
                            "import flagtree_cpu_build; print(flagtree_cpu_build.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True, check=True).stdout.strip()
    assert "/site-packages/flagtree_cpu_build/" in where, where


def test_every_command_answers_help(installed_cli: Path, tmp_path: Path) -> None:
    paths = command_paths(get_command(app))
    assert ("bundle", "verify") in paths and ("setup",) in paths  # the walk sees sub-commands
    failed = []
    for path in paths:
        result = run(installed_cli, *path, "--help", cwd=tmp_path)
        if result.returncode != 0 or "Usage:" not in result.stdout:
            failed.append(f"{' '.join(path)}: exit {result.returncode}: {(result.stderr or result.stdout)[-300:]}")
    assert not failed, "\n".join(failed)


def test_setup_then_publish_then_a_second_machine_installs_without_building(
        installed_cli: Path, world: GitWorld, tmp_path: Path, http_server: LoopbackHTTPServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    url = http_server.serve(LLVM_PATH, llvm_tarball().data)
    sets = (f"artifacts.llvm.url={url}", PREREQUISITES, RUNTIME)
    record = tmp_path / "a-record.jsonl"
    monkeypatch.setenv("FIXTURE_BUILD_RECORD", str(record))
    a = new_workspace(world, tmp_path / "a" / "ws", always_set=sets, cli=installed_cli)
    a_python = build_venv(tmp_path / "a" / "venv", [*TOOLS, "torch", "numpy"])
    done = a.run("--json", "setup", "--ignore-host", "--python", str(a_python))
    assert done.exit_code == 0, done.stderr
    report = result_of(done.stdout)
    assert {s["stage"]: s["status"] for s in report["stages"]}["validate"] == "created"
    assert report["validation"]["ok"] is True and len(builds_in(record)) == 1

    wheelhouse = tmp_path / "wheelhouse"
    published = a.run("--json", "build", "--ignore-host", "--python", str(a_python), "--publish", str(wheelhouse))
    assert published.exit_code == 0, published.stderr
    [action] = result_of(published.stdout)["actions"]
    assert action["published"]["status"] == "published"

    b_home = tmp_path / "b" / "home"  # another machine: its own HOME, caches, target venv and workspace
    b_home.mkdir(parents=True)
    for name, value in (("HOME", b_home), ("XDG_CACHE_HOME", b_home / ".cache"),
                        ("XDG_CONFIG_HOME", b_home / ".config"), ("FIXTURE_BUILD_RECORD", tmp_path / "b-record")):
        monkeypatch.setenv(name, str(value))
    b = new_workspace(world, tmp_path / "b" / "ws", always_set=sets, cli=installed_cli)
    b_python = build_venv(tmp_path / "b" / "venv", [*TOOLS, "torch", "numpy"])
    installed = b.run("--json", "setup", "--ignore-host", "--python", str(b_python), "--wheelhouse", str(wheelhouse))
    assert installed.exit_code == 0, installed.stderr
    report = result_of(installed.stdout)
    [build] = [s for s in report["stages"] if s["stage"] == "build"]
    assert "installed from the wheelhouse" in json.dumps(build), build
    assert builds_in(tmp_path / "b-record") == [], "the second machine compiled"
    assert report["validation"]["ok"] is True  # the wheel it installed runs the kernels


def test_bundle_create_verify_and_an_offline_board_in_its_own_network_namespace(
        installed_cli: Path, no_network: tuple[str, ...], world: GitWorld, tmp_path: Path,
        http_server: LoopbackHTTPServer, monkeypatch: pytest.MonkeyPatch) -> None:
    url = http_server.serve(LLVM_PATH, llvm_tarball().data)
    index = simple_index(http_server, "/pypi", tiny_wheel(tmp_path / "wheel", "fixture-build-tool", "1.0"))
    monkeypatch.setenv("PIP_INDEX_URL", index)  # the build prerequisite only this loopback index has
    sets = (f"artifacts.llvm.url={url}", "python.build=[fixture-build-tool]", "checks=[]", "python.runtime=[]")
    online = new_workspace(world, tmp_path / "online", always_set=sets, cli=installed_cli)
    done = online.run("setup", "--skip-build", "--ignore-host")
    assert done.exit_code == 0, done.stderr
    key = make_key(tmp_path / "keys", "release")
    trusted = tmp_path / "allowed_signers"
    trusted.write_text(allowed_line("release@site", key))
    bundle = tmp_path / "usb" / "board.bundle"
    bundle.parent.mkdir()
    made = online.run("bundle", "create", "--sign", str(key), "-o", str(bundle))
    assert made.exit_code == 0, made.stderr
    verified = online.run("--json", "bundle", "verify", str(bundle), "--trusted-keys", str(trusted))
    assert verified.exit_code == 0, verified.stderr
    assert "release@site" in json.dumps(result_of(verified.stdout)["authenticity"])

    board_home = tmp_path / "board-home"  # a fresh machine: empty caches, no git redirect to the world
    board_home.mkdir()
    (board_home / ".gitconfig").write_text("")
    for name, value in (("HOME", board_home), ("XDG_CACHE_HOME", board_home / ".cache"),
                        ("XDG_CONFIG_HOME", board_home / ".config"), ("GIT_CONFIG_GLOBAL", board_home / ".gitconfig"),
                        ("FIXTURE_BUILD_RECORD", tmp_path / "board-record")):
        monkeypatch.setenv(name, str(value))
    board = Workspace(world, tmp_path / "board", online.flagtree_commit, sets, installed_cli, wrap=no_network)
    python = build_venv(tmp_path / "board-venv", TOOLS)
    served = len(http_server.requests)
    setup = board.run("setup", "--bundle", str(bundle), "--trusted-keys", str(trusted), "--offline", "--ignore-host",
                      "--python", str(python))
    assert setup.exit_code == 0, setup.stderr
    assert len(builds_in(tmp_path / "board-record")) == 1, "the board did not build"
    assert board.head(board.flagtree) == online.head(online.flagtree)
    assert subprocess.run([str(python), "-c", "import fixture_build_tool"], check=False).returncode == 0
    assert len(http_server.requests) == served  # nothing reached the loopback server from the namespace
