"""Fixtures of the emulated Armv9 tier (run by `make test-arm64`, i.e. `tests/arm64/emu.sh tier`).

The tests run on the host; every command under test runs inside the emulated aarch64 rootfs. The loopback
worlds are served from the host: git daemon and the HTTP server listen on 127.0.0.1, which the chroot shares
(same network namespace). Workspaces and the git world live under the rootfs's /tmp, so the tool inside sees
them under their inside names.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.arm64.machine import KEEP, ROOT, Machine
from tests.support.gitdaemon import GitDaemon
from tests.support.gitworld import GitWorld, build_world
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import TOP, Tarball, llvm_tarball

LLVM_PATH = f"/public/llvm-builds/{TOP}.tar.gz"


@pytest.fixture(scope="session")
def machine() -> Machine:
    root = Path(ROOT) if ROOT else None
    if root is None or not (root / "usr/bin/python3").exists() or not (root / "proc/self").exists():
        pytest.skip("no emulated rootfs is mounted: run the tier with `make test-arm64` (tests/arm64/emu.sh tier)")
    return Machine(root)


@pytest.fixture
def board_tmp(machine: Machine, request: pytest.FixtureRequest) -> Iterator[Path]:
    """A fresh folder inside the rootfs (a host path; ``machine.inside`` names it for the board)."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name)[:80]
    folder = machine.host_path("/tmp/tier") / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    yield folder
    if not KEEP:
        shutil.rmtree(folder, ignore_errors=True)


@dataclass
class ServedWorld:
    """The fixture FlagTree / flagtree-cpu / sleef repositories behind git daemon, and the LLVM stand-in
    behind the HTTP server, as a board on the LAN would reach them."""

    world: GitWorld
    daemon: GitDaemon
    server: LoopbackHTTPServer
    tarball: Tarball
    gitconfig: Path  # inside path: insteadOf https://github.com/ -> the daemon (what a user's mirror rule does)

    @property
    def llvm_url(self) -> str:
        return self.server.url(LLVM_PATH)

    def sets(self) -> list[str]:
        """The overrides every workspace of the tier uses: FlagTree's fixture commit (the real pin cannot exist
        in a fixture repository) and the LLVM download on the loopback server."""
        return ["--set", f"sources.flagtree.commit={self.world['flagtree'].commits['cpu-backend']}",
                "--set", f"artifacts.llvm.url={self.llvm_url}"]


@pytest.fixture(scope="session")
def served_world(machine: Machine) -> Iterator[ServedWorld]:
    root = machine.host_path("/tmp/tier-world")
    shutil.rmtree(root, ignore_errors=True)
    world = build_world(root)
    daemon = GitDaemon(root / "bare")
    server = LoopbackHTTPServer()
    tarball = llvm_tarball()
    server.serve(LLVM_PATH, tarball.data)
    gitconfig = root / "board.gitconfig"
    gitconfig.write_text(f'[url "git://127.0.0.1:{daemon.port}/"]\n\tinsteadOf = https://github.com/\n')
    yield ServedWorld(world, daemon, server, tarball, machine.inside(gitconfig))
    daemon.close()
    server.close()
    shutil.rmtree(root, ignore_errors=True)
