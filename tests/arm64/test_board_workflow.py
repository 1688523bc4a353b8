"""The user's workflow on an (emulated) aarch64 board, with no --ignore-host: setup against the loopback
world, the build stage's preflight and environment with the fixture FlagTree, and a refusal on a CPU that
cannot run FlagTree's code.

The board reaches the fixture repositories through git daemon on 127.0.0.1 and a user-style insteadOf rule
(https://github.com/ -> the daemon), and the LLVM stand-in through the loopback HTTP server.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.arm64.board import Board, target_venv
from tests.arm64.conftest import LLVM_PATH, ServedWorld
from tests.arm64.machine import ARMV9_128, Machine, model_id, report_line
from tests.support.envelope import envelope_of, error_of, result_of
from tests.support.tarballs import TOP


def stages(report: dict) -> dict[str, str]:
    return {s["stage"]: s["status"] for s in report["stages"]}


@pytest.mark.parametrize("cpu", ARMV9_128, ids=[model_id(m) for m in ARMV9_128])
def test_setup_skip_build_on_an_armv9_board_then_a_rerun_is_a_no_op(machine: Machine, served_world: ServedWorld,
                                                                     board_tmp: Path, cpu: str) -> None:
    board = Board(machine, served_world, board_tmp)
    first = board.run("setup", "--skip-build", "--json", cpu=cpu)
    assert first.returncode == 0, first
    report = result_of(first.stdout)
    assert stages(report)["preflight"] == "ok" and stages(report)["sources"] == "created", report["stages"]
    assert stages(report)["artifacts"] == "created" and stages(report)["links"] in ("created", "ok")
    ws = board.host(board.ws)
    assert (ws / "FlagTree" / "third_party" / "triton-cpu" / "third_party" / "sleef" / ".git").exists()
    assert (board.llvm / "version.txt").read_text().strip() == served_world.llvm_url
    assert (ws / "FlagTree" / "third_party" / "cpu" / "triton_cpu.cc").is_symlink()
    gets = [r for r in served_world.server.requests_for(LLVM_PATH) if r.method == "GET"]
    assert gets, "the board downloaded the LLVM stand-in from the loopback server"

    served_world.daemon.freeze()  # a re-run must not talk to git at all (a frozen daemon would hang it)
    try:
        again = board.run("setup", "--skip-build", "--json", cpu=cpu)
    finally:
        served_world.daemon.thaw()
    assert again.returncode == 0, again
    assert set(stages(result_of(again.stdout)).values()) <= {"ok", "skipped"}, again.stdout
    report_line("time", f"setup --skip-build on {cpu}: first {first.seconds:.1f} s, no-op re-run {again.seconds:.1f} s")


@pytest.mark.parametrize(("cpu", "lacking"), [("neoverse-n1", "sve2, i8mm, bf16"), ("neoverse-v1", "sve2")],
                         ids=["neoverse-n1", "neoverse-v1"])
def test_a_full_setup_is_refused_on_a_cpu_without_armv9_features(machine: Machine, served_world: ServedWorld,
                                                                 board_tmp: Path, cpu: str, lacking: str) -> None:
    """Building for a CPU that would die with SIGILL is refused before anything changes, with the features
    named and `--skip-build` offered (it prepares the workspace for another board); that one works here."""
    board = Board(machine, served_world, board_tmp)
    refused = board.run("setup", "--json", cpu=cpu)
    assert refused.returncode == 7, refused
    error = error_of(refused.stdout)
    said = " ".join([error["message"], *error["details"], error["fix"]])
    assert f"lacks {lacking}" in said and "cpu.features" in said, error
    assert "--skip-build" in error["fix"], error
    assert not (board.host(board.ws) / "FlagTree").exists() and not board.llvm.exists()  # nothing was changed
    prepared = board.run("setup", "--skip-build", "--json", cpu=cpu)
    assert prepared.returncode == 0, prepared


def test_a_full_setup_is_refused_where_sve_vectors_are_not_128_bit(machine: Machine, served_world: ServedWorld,
                                                                   board_tmp: Path) -> None:
    """QEMU's `max` has every feature but 512-bit SVE: FlagTree's -msve-vector-bits=128 code would run and
    compute wrong numbers, so the build is refused like a missing feature."""
    board = Board(machine, served_world, board_tmp)
    refused = board.run("setup", "--json", cpu="max")
    assert refused.returncode == 7, refused
    error = error_of(refused.stdout)
    said = " ".join([error["message"], *error["details"], error["fix"]])
    assert "cpu.sve-length" in said and "512" in said, error
    assert not (board.host(board.ws) / "FlagTree").exists()


@pytest.fixture
def board_venv(machine: Machine, board_tmp: Path) -> Path:
    return target_venv(machine, board_tmp)


def test_the_build_stage_on_an_armv9_board(machine: Machine, served_world: ServedWorld, board_tmp: Path,
                                           board_venv: Path) -> None:
    """setup with the build (no --ignore-host, no --skip-build) on neoverse-n2: the build preflight passes on
    its own merits (aarch64, SVE2/i8mm/bf16, 128-bit SVE, gcc-12 taking -march=armv9-a+sve2+i8mm+bf16) and
    the fixture FlagTree's setup.py receives FlagTree's environment, on aarch64."""
    board = Board(machine, served_world, board_tmp)
    record = machine.inside(board_tmp) / "build-record.jsonl"
    ran = board.run("setup", "--skip-validate", "--python", str(board_venv), "--json", cpu="neoverse-n2",
                    env={"FIXTURE_BUILD_RECORD": str(record)})
    assert ran.returncode == 0, ran
    report = result_of(ran.stdout)
    assert stages(report)["preflight"] == "ok" and stages(report)["build"] == "created", report["stages"]
    builds = [json.loads(line) for line in machine.host_path(record).read_text().splitlines()]
    built = [b for b in builds if {"editable_wheel", "develop", "build_ext"} & set(b["argv"][1:])]
    assert len(built) == 1, builds
    env = built[0]["env"]
    assert env["FLAGTREE_BACKEND"] == "cpu" and env["TRITON_BUILD_PROTON"] == "OFF"
    assert env["LLVM_SYSPATH"] == str(board.home / ".triton" / "llvm" / TOP)
    assert env["TRITON_APPEND_CMAKE_ARGS"] == f"-DCMAKE_INSTALL_PREFIX={board.home}/.flagtree_install"
    assert env["QEMU_CPU"] == "neoverse-n2"  # it really ran inside the emulated board
    assert not [k for k in env if k.startswith("LLVM_") and k != "LLVM_SYSPATH"]
    assert int(env["MAX_JOBS"]) >= 1
    # the product is there and status agrees, still on the board
    status = board.run("status", "--json", cpu="neoverse-n2")
    assert envelope_of(status.stdout)["ok"], status

