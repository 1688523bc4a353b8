"""The build environment: every FlagTree trap, conflicts with the inherited environment, shells."""

from __future__ import annotations

from pathlib import Path

import pytest

from flagtree_cpu_build.buildenv import compute_build_env, render_exports, stamp_env
from flagtree_cpu_build.host import HostFacts
from flagtree_cpu_build.placeholders import placeholder_values
from flagtree_cpu_build.recipe import resolve, select_variants
from flagtree_cpu_build.recipe.files import load_recipe
from flagtree_cpu_build.workspace import Workspace

BOARD = HostFacts("linux", "aarch64", "ubuntu", "24.04", "Ubuntu", 12, 32 * 2**30, 20 * 2**30)
NVIDIA = ("TRITON_PTXAS_PATH", "TRITON_CUOBJDUMP_PATH", "TRITON_NVDISASM_PATH", "TRITON_CUDACRT_PATH",
          "TRITON_CUDART_PATH", "TRITON_CUPTI_INCLUDE_PATH", "TRITON_CUPTI_LIB_PATH")


def build_spec(tmp_path: Path, jobs: int | None = None):
    recipe = select_variants(load_recipe("flagtree-cpu-arm64"), BOARD.os_id, BOARD.arch)
    ws = Workspace(tmp_path / "ws")
    values = placeholder_values(recipe, ws, BOARD, {"HOME": "/home/edge"}, jobs=jobs)
    return resolve(recipe, ws.root, values).build, ws


def env_for(tmp_path: Path, inherited: dict[str, str] | None = None, *, offline: bool = False,
            ccache: bool = False, jobs: int | None = None):
    build, ws = build_spec(tmp_path, jobs)
    base = {"HOME": "/home/edge", "PATH": "/usr/bin:/bin", **(inherited or {})}
    return compute_build_env(build, base, offline=offline, commands_available={"ccache": ccache},
                             path_prefix=str(ws.venv_dir / "bin")), ws


def test_the_build_environment_carries_every_fix(tmp_path: Path) -> None:
    result, ws = env_for(tmp_path)
    env = result.env
    assert env["FLAGTREE_BACKEND"] == "cpu"
    assert env["TRITON_BUILD_PROTON"] == "OFF"
    assert env["LLVM_SYSPATH"] == "/home/edge/.triton/llvm/llvm-a66376b0-ubuntu-arm64"
    assert env["TRITON_APPEND_CMAKE_ARGS"] == "-DCMAKE_INSTALL_PREFIX=/home/edge/.flagtree_install"
    assert {env[name] for name in NVIDIA} == {str(ws.state_dir / "empty")}
    assert (env["MAX_JOBS"], env["TRITON_PARALLEL_LINK_JOBS"]) == ("10", "5")  # 20 GiB free, 12 cores
    assert env["PATH"] == f"{ws.venv_dir / 'bin'}:/usr/bin:/bin"  # ninja and cmake from the venv
    assert "TRITON_OFFLINE_BUILD" not in env and "PIP_NO_INDEX" not in env
    assert "TRITON_BUILD_WITH_CCACHE" not in env
    assert result.conflicts == []


def test_offline_adds_the_offline_variables_with_1_not_on(tmp_path: Path) -> None:
    result, _ = env_for(tmp_path, offline=True)
    assert result.env["TRITON_OFFLINE_BUILD"] == "1"
    assert result.env["PIP_NO_INDEX"] == "1"


def test_ccache_is_used_when_present(tmp_path: Path) -> None:
    result, _ = env_for(tmp_path, ccache=True)
    assert result.env["TRITON_BUILD_WITH_CCACHE"] == "true"


def test_jobs_override(tmp_path: Path) -> None:
    result, _ = env_for(tmp_path, jobs=3)
    assert (result.env["MAX_JOBS"], result.env["TRITON_PARALLEL_LINK_JOBS"]) == ("3", "3")


def test_conflicting_inherited_variables_are_dropped_or_overridden_and_reported(tmp_path: Path) -> None:
    stale = {"LLVM_SYSPATH": "/opt/llvm-old", "LLVM_INCLUDE_DIRS": "/opt/llvm-old/include",
             "LLVM_LIBRARY_DIR": "/opt/llvm-old/lib", "FLAGTREE_BACKEND": "xpu", "TRITON_OFFLINE_BUILD": "ON",
             "FLAGTREE_OFFLINE_BUILD_DIR": "/x", "CC": "gcc-12"}
    result, _ = env_for(tmp_path, stale)
    described = sorted(c.describe() for c in result.conflicts)
    assert described == sorted([
        "FLAGTREE_BACKEND overridden: 'xpu' -> 'cpu'",
        "FLAGTREE_OFFLINE_BUILD_DIR dropped (was '/x')",
        "LLVM_INCLUDE_DIRS dropped (was '/opt/llvm-old/include')",
        "LLVM_LIBRARY_DIR dropped (was '/opt/llvm-old/lib')",
        "LLVM_SYSPATH overridden: '/opt/llvm-old' -> '/home/edge/.triton/llvm/llvm-a66376b0-ubuntu-arm64'",
        "TRITON_OFFLINE_BUILD dropped (was 'ON')",
    ])
    assert "LLVM_INCLUDE_DIRS" not in result.env and result.env["CC"] == "gcc-12"  # unrelated ones stay
    offline, _ = env_for(tmp_path, stale, offline=True)
    assert offline.env["TRITON_OFFLINE_BUILD"] == "1"
    assert "TRITON_OFFLINE_BUILD overridden: 'ON' -> '1'" in [c.describe() for c in offline.conflicts]


def test_path_prefix_is_not_repeated(tmp_path: Path) -> None:
    build, ws = build_spec(tmp_path)
    prefix = str(ws.venv_dir / "bin")
    result = compute_build_env(build, {"PATH": f"{prefix}:/usr/bin"}, offline=False, commands_available={},
                               path_prefix=prefix)
    assert result.env["PATH"] == f"{prefix}:/usr/bin"
    assert "PATH" not in [c.name for c in result.changes]


def test_the_stamp_ignores_job_counts_and_offline_switches(tmp_path: Path) -> None:
    build, _ = build_spec(tmp_path)
    a, _ = env_for(tmp_path, jobs=2)
    b, _ = env_for(tmp_path, jobs=8, offline=True, ccache=True)
    assert stamp_env(a, build.stamp_ignores) == stamp_env(b, build.stamp_ignores)
    assert "LLVM_SYSPATH" in stamp_env(a, build.stamp_ignores)


@pytest.mark.parametrize("shell, expected", [
    ("bash", "unset LLVM_SYSPATH\nexport FLAGTREE_BACKEND=cpu\nexport NOTE='it'\"'\"'s here'\n"),
    ("zsh", "unset LLVM_SYSPATH\nexport FLAGTREE_BACKEND=cpu\nexport NOTE='it'\"'\"'s here'\n"),
    ("fish", "set -e LLVM_SYSPATH;\nset -gx FLAGTREE_BACKEND 'cpu';\nset -gx NOTE 'it\\'s here';\n"),
])
def test_exports_for_each_shell(shell: str, expected: str) -> None:
    rendered = render_exports({"FLAGTREE_BACKEND": "cpu", "NOTE": "it's here"}, ["LLVM_SYSPATH"], shell)
    assert rendered == expected
