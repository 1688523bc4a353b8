"""The fleet paths on the emulated board, end to end (issue 30, part 5).

The first board is air-gapped: every command on it runs in a network namespace of its own with nothing in it
(``NO_NETWORK``: not even loopback is up). It describes itself (`doctor --snapshot`); this x86_64 host — the
connected machine, the tool in-process — makes a bundle for that snapshot from the loopback world; the board
imports it and sets up offline, the fixture FlagTree built and its kernels validated on the board; then it
publishes its build into a wheelhouse folder. A second board with an empty workdir and the first board's lock
installs that build from the folder without syncing or fetching (an install-only board, by the lock's pins).

PyPI is out of reach here, so the prerequisites are tiny wheels on loopback PEP 503 indexes — the build's on one,
the run-time's (a stand-in for torch, behind its own `index_url` as the recipe's torch is) on another — and the
bundle carries them for the board's platform and Python. The kernels run with /opt/venv's aarch64 torch, which
each board's target venv reaches through a .pth file. Everything is built once for the module (one bundle, one
air-gapped setup): the tier's time is the emulator's.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.wheelhouse import MANIFEST
from tests.arm64.board import Board, target_venv
from tests.arm64.conftest import LLVM_PATH, ServedWorld
from tests.arm64.machine import KEEP, NO_NETWORK, PYTHON, Machine, Ran, report_line
from tests.support.envelope import error_of, result_of
from tests.support.hermetic import make_hermetic
from tests.support.venvs import packed_wheel, simple_index

CPU = "neoverse-n2"  # the target class: Armv9, SVE2/i8mm/bf16 at 128 bits
# Two of the recipe's checks (the FEP's backend check with its defaults, and a real kernel through the cpu
# backend): every check imports torch, ~10 s under emulation; test_validate_board.py runs the kernels per model.
CHECKS = ('checks=[{uses: flagtree/backend, with: {triton_version: "==3.3.*"}}, '
          '{uses: flagtree/vector-add, with: {size: 1024}}]')
BUILD_COMMANDS = {"editable_wheel", "bdist_wheel", "develop", "build_ext"}
# What a process on the board learns about the network: a connection to each loopback port given (the world's
# daemon and server, which a board sharing the host's namespace reaches), and the routing tables.
PROBE = """import socket, sys
for port in sys.argv[1:]:
    try:
        socket.create_connection(("127.0.0.1", int(port)), timeout=10).close()
        print(port, "connected")
    except OSError as error:
        print(port, "failed", error.errno)
# routes that lead somewhere: the kernel's IPv6 null entries (RTF_REJECT, 0x200) are in every namespace
ipv4 = [line.split() for line in open("/proc/net/route").read().splitlines()[1:]]
try:
    ipv6 = [line.split() for line in open("/proc/net/ipv6_route").read().splitlines()]
except OSError:  # a kernel without IPv6
    ipv6 = []
print("routes", len(ipv4) + len([f for f in ipv6 if not int(f[8], 16) & 0x200]))
"""


@dataclass
class Fleet:
    machine: Machine
    served: ServedWorld
    folder: Path  # host path under the rootfs
    sets: tuple[str, ...]  # the recipe overrides of every board and of the connected machine

    def board(self, name: str) -> Board:
        (self.folder / name).mkdir()
        return Board(self.machine, self.served, self.folder / name, self.sets)


@dataclass
class AirGapped:
    """What the air-gapped board and the connected machine did, in order."""

    board: Board
    python: Path  # the board's target interpreter (inside path)
    record: Path  # the fixture build's record (inside path)
    snapshot: Ran
    created: Result  # `bundle create` on this host
    bundle: Path  # inside path
    probes: tuple[Ran, Ran]  # the network probe without and with NO_NETWORK
    setup: Ran
    published: Ran
    wheelhouse: Path  # inside path


def prerequisite_sets(served: ServedWorld, wheels: Path) -> tuple[str, ...]:
    """The recipe's build and run-time prerequisites replaced by tiny wheels that only loopback indexes serve."""
    build = simple_index(served.server, "/fleet/pypi", packed_wheel(wheels, "fixture-build-tool", "1.0"))
    runtime = simple_index(served.server, "/fleet/whl/cpu", packed_wheel(wheels, "fixture-torch", "2.0"))
    return (f'python.build=[{{requirement: fixture-build-tool, index_url: "{build}"}}]',
            f'python.runtime=[{{requirement: "fixture-torch==2.0", index_url: "{runtime}"}}]', CHECKS)


def create_bundle(fleet: Fleet, bundle: Path, where: Path, *target: str) -> Result:
    """The connected x86_64 machine: `bundle create` for the ``target`` options (``--sysroot SNAPSHOT``: the board;
    none: this machine), in a workspace of its own, reaching the world the way the boards do (the same insteadOf
    rule, the same recipe overrides)."""
    home = where / "home"
    home.mkdir()
    sets = [arg for assignment in fleet.sets for arg in ("--set", assignment)]
    with pytest.MonkeyPatch.context() as mp:
        make_hermetic(mp, home)
        mp.setenv("GIT_CONFIG_GLOBAL", str(fleet.machine.host_path(fleet.served.gitconfig)))
        return CliRunner().invoke(app, ["-w", str(where / "ws"), *fleet.served.sets(), *sets, "bundle", "create",
                                        *target, "-o", str(bundle), "--json"])


@pytest.fixture(scope="module")
def fleet(machine: Machine, served_world: ServedWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    folder = machine.host_path("/tmp/tier") / "fleet"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    yield Fleet(machine, served_world, folder, prerequisite_sets(served_world, tmp_path_factory.mktemp("wheels")))
    if not KEEP:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def airgapped(fleet: Fleet, tmp_path_factory: pytest.TempPathFactory) -> AirGapped:
    machine, served = fleet.machine, fleet.served
    board = fleet.board("airgapped")
    inside = machine.inside(board.folder)
    snapshot = machine.tool("doctor", "--snapshot", str(inside / "board.tar.gz"), cpu=CPU, home=board.home,
                            wrap=NO_NETWORK)
    assert snapshot.returncode == 0, snapshot
    bundle = inside / "usb" / "board.bundle"
    board.host(bundle).parent.mkdir()
    created = create_bundle(fleet, board.host(bundle), tmp_path_factory.mktemp("connected"),
                            "--sysroot", str(board.host(inside / "board.tar.gz")), "--target-python", PYTHON)
    assert created.exit_code == 0, created.stdout + created.stderr
    ports = [str(served.daemon.port), str(served.server.port)]
    probes = (machine.run(["python3", "-c", PROBE, *ports], cpu=CPU),
              machine.run(["python3", "-c", PROBE, *ports], cpu=CPU, wrap=NO_NETWORK))
    python = target_venv(machine, board.folder)
    record = inside / "build-record.jsonl"
    env = {"FIXTURE_BUILD_RECORD": str(record)}
    setup = board.run("setup", "--bundle", str(bundle), "--offline", "--python", str(python), "--json", cpu=CPU,
                      env=env, wrap=NO_NETWORK, timeout=1200)
    wheelhouse = inside / "wheelhouse"
    published = board.run("build", "--offline", "--python", str(python), "--publish", str(wheelhouse), "--json",
                          cpu=CPU, env=env, wrap=NO_NETWORK, timeout=1200)
    report_line("time", f"air-gapped board on {CPU}: snapshot {snapshot.seconds:.1f} s, setup --bundle (offline, "
                f"build and validation) {setup.seconds:.1f} s ({stage_seconds(setup)}), build --publish "
                f"{published.seconds:.1f} s")
    return AirGapped(board, python, record, snapshot, created, bundle, probes, setup, published, wheelhouse)


def stage_seconds(ran: Ran) -> str:
    """Where a setup's time went, for the tier's report."""
    try:
        stages = result_of(ran.stdout)["stages"]
    except (AssertionError, KeyError, ValueError):
        return "no report"
    return ", ".join(f"{s['stage']} {s['seconds']:.0f}" for s in stages)


def builds(machine: Machine, record: Path) -> list[dict]:
    """The fixture setup.py runs that built (pip also runs it for metadata)."""
    if not machine.host_path(record).exists():
        return []
    runs = [json.loads(line) for line in machine.host_path(record).read_text().splitlines()]
    return [run for run in runs if BUILD_COMMANDS & set(run["argv"][1:])]


def head(repo: Path) -> str:
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_a_bundle_made_on_x86_64_for_the_boards_snapshot_sets_up_the_air_gapped_board(
        airgapped: AirGapped, fleet: Fleet) -> None:
    ag, served = airgapped, fleet.served
    # the connected machine made the bundle for the board it was described by, not for itself
    made = result_of(ag.created.stdout)
    assert made["target"]["arch"] == "aarch64" and made["target"]["python"] == PYTHON, made["target"]
    assert any("aarch64" in tag for tag in made["target"]["platforms"]), made["target"]
    assert made["members"]["git"] >= 3 and made["members"]["artifact"] == 1 and made["members"]["wheel"] == 2, made

    # the board has no route anywhere: the loopback world the host reaches is unreachable from it
    reachable, airgap = (probe.stdout.split("\n") for probe in ag.probes)
    assert ag.probes[0].returncode == 0 and ag.probes[1].returncode == 0, ag.probes
    assert [line.split()[1] for line in reachable[:2]] == ["connected", "connected"], ag.probes[0]
    assert [line.split()[1] for line in airgap[:2]] == ["failed", "failed"], ag.probes[1]
    assert airgap[2] == "routes 0", ag.probes[1]

    # imported and set up offline: the sources at their pins, LLVM published, the build run on the board
    assert ag.setup.returncode == 0, ag.setup
    report = result_of(ag.setup.stdout)
    stages = {s["stage"]: s["status"] for s in report["stages"]}
    assert stages["sources"] == stages["artifacts"] == stages["build"] == "created", report["stages"]
    assert set(stages.values()) <= {"ok", "created"}, report["stages"]
    ws = ag.board.host(ag.board.ws)
    assert head(ws / "FlagTree") == served.world["flagtree"].commits["cpu-backend"]
    assert (ws / "FlagTree" / "third_party" / "triton-cpu" / "third_party" / "sleef" / ".git").exists()
    assert (ag.board.llvm / "version.txt").read_text().strip() == served.llvm_url
    built = builds(fleet.machine, ag.record)[0]  # setup's editable build (build --publish then built the wheel)
    assert "editable_wheel" in built["argv"], built["argv"]
    assert built["env"]["QEMU_CPU"] == CPU and built["env"]["FLAGTREE_BACKEND"] == "cpu", built["env"]
    # the kernels ran on the board and passed
    validation = report["validation"]
    assert validation["ok"] is True, validation
    rows = {row["kernel"]: row["status"] for row in validation["results"]}
    assert rows == {"prerequisites": "pass", "backend": "pass", "vector-add": "pass"}, rows
    report_line("fleet", f"air-gapped setup on {CPU}: " + ", ".join(f"{k} {v}" for k, v in rows.items()))


def test_the_air_gapped_board_publishes_its_build_into_a_wheelhouse_folder(airgapped: AirGapped,
                                                                           fleet: Fleet) -> None:
    ag = airgapped
    assert ag.published.returncode == 0, ag.published
    [action] = result_of(ag.published.stdout)["actions"]
    assert action["published"]["status"] == "published", action
    manifest = json.loads(ag.board.host(ag.wheelhouse / MANIFEST).read_text())
    [entry] = manifest["wheels"]
    assert entry["class"]["arch"] == "aarch64" and entry["built_on"]["arch"] == "aarch64", entry
    assert (ag.board.host(ag.wheelhouse) / entry["file"]).is_file()
    assert len(builds(fleet.machine, ag.record)) == 2  # the editable build of setup, then the wheel


def test_a_bundle_the_connected_machine_made_for_itself_is_refused_on_the_board(
        fleet: Fleet, tmp_path: Path) -> None:
    """Without --sysroot the x86_64 machine bundles for itself: x86_64 wheels, an x86_64 target. The board, air-gapped,
    refuses it before anything is written, saying what it was made for and what this machine is."""
    board = fleet.board("wrong-bundle")
    bundle = fleet.machine.inside(board.folder) / "x86_64.bundle"
    created = create_bundle(fleet, board.host(bundle), tmp_path)
    assert created.exit_code == 0, created.stdout + created.stderr
    assert result_of(created.stdout)["target"]["arch"] == "x86_64"
    refused = board.run("setup", "--bundle", str(bundle), "--offline", "--json", cpu=CPU, wrap=NO_NETWORK)
    assert refused.returncode not in (0, 1), refused
    error = error_of(refused.stdout)
    assert error["exit_code"] == refused.returncode, error
    said = " ".join([error["message"], *error["details"], error["fix"]])
    assert "x86_64" in said and "aarch64" in said and "doctor --snapshot" in error["fix"], error
    ws = board.host(board.ws)
    for made in ("FlagTree", ".flagtree-cpu/bundle", ".flagtree-cpu/lock.yaml", ".flagtree-cpu/wheelhouse"):
        assert not (ws / made).exists(), f"{made} was written by a refused import"


def test_a_second_board_installs_the_published_build_without_syncing_or_fetching(airgapped: AirGapped,
                                                                                 fleet: Fleet,
                                                                                 refused_port: int) -> None:
    """An empty workdir with the first board's lock and its wheelhouse folder: `setup --wheelhouse` installs the
    published wheel and validates it; no clone, no LLVM download, no build. The second board is on the LAN: the
    loopback indexes and the LLVM server answer it (the server must see no request), but its git host refuses
    every connection, so a sync would fail the setup."""
    machine, served = fleet.machine, fleet.served
    board = fleet.board("second")
    gitconfig = board.folder / "git-host-down.gitconfig"
    gitconfig.write_text(f'[url "git://127.0.0.1:{refused_port}/"]\n\tinsteadOf = https://github.com/\n')
    lock = board.host(board.ws / ".flagtree-cpu" / "lock.yaml")
    lock.parent.mkdir(parents=True)
    shutil.copyfile(airgapped.board.host(airgapped.board.ws / ".flagtree-cpu" / "lock.yaml"), lock)
    python = target_venv(machine, board.folder)
    record = machine.inside(board.folder) / "build-record.jsonl"
    llvm_gets = len(served.server.requests_for(LLVM_PATH))
    ran = board.run("setup", "--wheelhouse", str(airgapped.wheelhouse), "--python", str(python), "--json", cpu=CPU,
                    env={"FIXTURE_BUILD_RECORD": str(record), "GIT_CONFIG_GLOBAL": str(machine.inside(gitconfig))},
                    timeout=1200)
    report_line("time", f"second board on {CPU}: setup --wheelhouse {ran.seconds:.1f} s (exit {ran.returncode}; "
                f"{stage_seconds(ran)})")
    assert ran.returncode == 0, ran
    report = result_of(ran.stdout)
    assert report["validation"]["ok"] is True, report["validation"]
    site = board.host(python.parents[1] / "lib" / f"python{PYTHON}" / "site-packages")
    assert (site / "triton" / "__init__.py").is_file(), "the published wheel is not installed in the target venv"
    assert builds(machine, record) == [], "the second board built"
    # install-only: nothing of what a build needs was fetched
    assert not (board.host(board.ws) / "FlagTree").exists(), "the second board cloned FlagTree"
    assert len(served.server.requests_for(LLVM_PATH)) == llvm_gets and not board.llvm.exists(), \
        "the second board downloaded LLVM"
