"""The bundled spine-triton-riscv64 recipe end to end on its loopback world (tests/support/worlds/spine_triton.py):
a riscv64 wheel cross-built on an x86_64 host. Real git (spine-triton with its `triton` submodule), the real HTTP
server for the four tarballs (md5-verified), the real CLI, a real `make` for the zlib step and real setuptools
for the wheel, whose fixture setup.py records what it received."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from flagtree_cpu_build.cli import app
from tests.conftest import REPO_ROOT
from tests.support.envelope import result_of
from tests.support.fixes import without_context
from tests.support.gitworld import git
from tests.support.hermetic import make_hermetic
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.venvs import build_venv, make_venv
from tests.support.worlds.spine_triton import (
    RECIPE,
    TOOLS,
    SpineWorkspace,
    SpineWorld,
    build_spine_world,
    tampered_toolchain,
)

HOSTS = REPO_ROOT / "tests" / "fixtures" / "hosts"
PATCH = REPO_ROOT / "tests" / "fixtures" / "projects" / "spine-triton" / "patch" / "triton.patch"
HERE = platform.machine()
PY_TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"
WHEEL = f"triton-3.6.0+spacemit.a5-{PY_TAG}-{PY_TAG}-linux_riscv64.whl"
CROSS_HOST = "x86_64, as the recipe requires; the products run on riscv64 (a cross build)"
PATCHED_LINE = 'TRITON_VERSION = "3.6.0" + "+" + os.environ.get("SPINE_TRITON_VERSION_NUMBER", "")'


@dataclass
class Made:
    ws: SpineWorkspace
    python: Path
    record: Path
    server: LoopbackHTTPServer
    setup: Any = None  # the `setup` run that made it (module fixture)

    def records(self) -> list[dict[str, Any]]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines()]

    def wheel_builds(self) -> list[dict[str, Any]]:
        return [r for r in self.records() if "bdist_wheel" in r["argv"]]

    def build(self, *args: str, sets: tuple[str, ...] = ()) -> Any:
        return self.ws.run("build", "--python", str(self.python), *args, sets=sets)

    def validate(self, *args: str) -> Any:
        return self.ws.run("validate", "--json", "--python", str(self.python), *args)

    def configure_runs(self) -> list[str]:
        log = self.ws.artifact("zlib") / "configure.log"
        return log.read_text().splitlines() if log.exists() else []


@pytest.fixture(scope="module")
def spine_world(tmp_path_factory: pytest.TempPathFactory) -> SpineWorld:
    return build_spine_world(tmp_path_factory.mktemp("spine-world"))


@pytest.fixture
def redirect(spine_world: SpineWorld, monkeypatch: pytest.MonkeyPatch) -> SpineWorld:
    """git's own insteadOf rule sends https://github.com/ to the world."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(spine_world.gitconfig))
    return spine_world


@pytest.fixture(scope="module")
def made(spine_world: SpineWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Made]:
    """One workspace through the whole `setup` (preflight, sync with the patch, fetch, the zlib step, the
    wheel, validation): the tests reading it change nothing in it."""
    root = tmp_path_factory.mktemp("spine-made")
    (root / "home").mkdir()
    server = LoopbackHTTPServer()
    with pytest.MonkeyPatch.context() as mp:
        make_hermetic(mp, root / "home")
        mp.setenv("GIT_CONFIG_GLOBAL", str(spine_world.gitconfig))
        mp.setenv("FIXTURE_BUILD_RECORD", str(root / "record.jsonl"))
        made = Made(SpineWorkspace(spine_world, root / "ws", spine_world.serve(server)),
                    build_venv(root / "venv", TOOLS), root / "record.jsonl", server)
        made.setup = made.ws.run("setup", "--python", str(made.python))
        try:
            yield made
        finally:
            server.close()


@pytest.fixture
def fresh(redirect: SpineWorld, tmp_path: Path, http_server: LoopbackHTTPServer,
          monkeypatch: pytest.MonkeyPatch) -> Made:
    """A workspace of its own, nothing done yet, for tests that change or break things."""
    monkeypatch.setenv("FIXTURE_BUILD_RECORD", str(tmp_path / "record.jsonl"))
    return Made(SpineWorkspace(redirect, tmp_path / "ws", redirect.serve(http_server)),
                build_venv(tmp_path / "venv", TOOLS), tmp_path / "record.jsonl", http_server)


def rows(result: Any) -> dict[str, dict[str, Any]]:
    return {r["kernel"]: r for r in result_of(result.stdout)["results"]}


# --- the recipe itself ------------------------------------------------------------------------------------


def test_the_bundled_recipe_validates_and_resolves(tmp_path: Path) -> None:
    valid = CliRunner().invoke(app, ["recipe", "validate", RECIPE])
    assert valid.exit_code == 0, valid.stderr
    shown = CliRunner().invoke(app, ["-w", str(tmp_path / "ws"), "--json", "recipe", "show", RECIPE])
    assert shown.exit_code == 0, shown.stderr
    text = shown.stdout
    assert "fbfa20f14500bfe77bad1f548a8ba525" in text and "907c992fe62c1c669c1bcdc9eec3b70a" in text
    assert "13da1e8beb1879e63cfdf59950136a7d" in text and "411df857c091f20f2a5f44b53ec2e183a59c84d2" in text
    assert f"{tmp_path / 'ws'}/toolchain/bin/riscv64-unknown-linux-gnu-g++" in text  # placeholders filled in


# --- setup, sources, downloads ----------------------------------------------------------------------------


def test_setup_on_x86_64_passes_preflight_and_makes_the_riscv64_wheel(made: Made) -> None:
    result = made.setup
    assert result.exit_code == 0, result.stderr
    stages = {s["stage"]: s for s in json.loads((made.ws.root / ".flagtree-cpu" / "last-setup.json").read_text())
              ["stages"]}
    [host] = stages["preflight"]["actions"]
    checks = {c["id"]: c for c in host["checks"]}
    # the host rules are the recipe's own: an x86_64 build host, a riscv64 target, no Armv9 or SVE rule
    assert checks["host.arch"]["detail"] == CROSS_HOST.replace("x86_64", HERE, 1)
    assert checks["cpu.features"]["status"] == "skip" and "fail" not in {c["status"] for c in checks.values()}
    assert "armv9" not in result.stderr.lower() and "sve" not in result.stderr.lower()
    assert stages["validate"]["detail"] == "1 passed, 1 skipped (import-on-board: runs on riscv64; this host is x86_64)"
    wheel = made.ws.root / "dist" / WHEEL
    assert wheel.is_file(), sorted(p.name for p in (made.ws.root / "dist").glob("*"))
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert "triton/_C/libtriton.so" in names and "triton/_C/libproton.so" not in names
        metadata = archive.read("triton-3.6.0+spacemit.a5.dist-info/WHEEL").decode()
    assert f"Tag: {PY_TAG}-{PY_TAG}-linux_riscv64" in metadata
    # a wheel-only build installs nothing into the build host's interpreter
    probe = subprocess.run([str(made.python), "-c", "import triton"], capture_output=True, cwd=made.ws.root)
    assert probe.returncode != 0
    # the stand-in compilers never ran where they should not (the stamp asks `$CC --version` only)
    assert not (made.ws.root / "a.out").exists() and not Path("a.out").exists()


def test_downloads_are_verified_by_md5_and_unpacked_by_their_rules(made: Made, spine_world: SpineWorld) -> None:
    lock = yaml.safe_load((made.ws.root / ".flagtree-cpu" / "lock.yaml").read_text())
    for name in ("toolchain", "speir", "llvm"):
        assert lock["artifacts"][name]["digest"] == {"md5": spine_world.downloads[name].tarball.md5}
    assert lock["artifacts"]["zlib"]["sha256"] == spine_world.downloads["zlib"].tarball.sha256
    toolchain = made.ws.artifact("toolchain")
    # root: {strip: 1}; after_unpack removed what sysroot/lib64/cmake held and nothing beside it
    assert (toolchain / "bin" / "riscv64-unknown-linux-gnu-gcc").is_file()
    assert (toolchain / "sysroot" / "lib64" / "cmake").is_dir()
    assert list((toolchain / "sysroot" / "lib64" / "cmake").iterdir()) == []
    assert (toolchain / "sysroot" / "lib64" / "libc.so.6").is_file()
    # root: {find: bin} published the folder holding bin/, two levels down
    speir = made.ws.artifact("speir")
    assert sorted(p.name for p in speir.iterdir() if not p.name.startswith(".")) == ["bin", "lib"]
    # ... whose tools came without their executable bits: the recipe's chmod step added them
    assert all(os.access(tool, os.X_OK) for tool in (speir / "bin").iterdir())
    assert (made.ws.artifact("llvm") / "lib" / "cmake" / "mlir" / "MLIRConfig.cmake").is_file()


def test_a_tampered_toolchain_is_refused_and_nothing_is_published(fresh: Made, spine_world: SpineWorld) -> None:
    good = spine_world.downloads["toolchain"]
    bad = tampered_toolchain()
    fresh.server.serve(good.path, bad.data)  # the mirror now serves other bytes under the same name
    result = fresh.ws.run("fetch")
    assert result.exit_code == 4, result.stderr
    assert f"md5 mismatch — expected {good.tarball.md5}, got {bad.md5}" in result.stderr
    assert not fresh.ws.artifact("toolchain").exists()
    assert not list(fresh.ws.root.glob("toolchain*")) and not list(fresh.ws.root.glob(".toolchain*"))


def test_the_patch_is_applied_once_inside_the_pinned_submodule(made: Made, spine_world: SpineWorld) -> None:
    triton = made.ws.triton
    assert git("rev-parse", "HEAD", cwd=triton) == spine_world.gitlink != spine_world.triton_tip
    assert git("diff", "--name-only", cwd=triton) == "setup.py"
    setup_py = (triton / "setup.py").read_text()
    assert setup_py.count(PATCHED_LINE) == 1
    assert setup_py.count("def download_and_copy_dependencies():\n    return\n") == 1
    locked = yaml.safe_load((made.ws.root / ".flagtree-cpu" / "lock.yaml").read_text())["sources"]["spine-triton"]
    assert locked["submodules"] == [{"path": "triton", "url": "https://github.com/triton-lang/triton.git",
                                     "commit": spine_world.gitlink}]
    assert locked["patches"] == [{"file": "spine-triton:patch/triton.patch into triton",
                                  "sha256": hashlib.sha256(PATCH.read_bytes()).hexdigest()}]
    before = git("diff", cwd=triton)
    again = made.ws.run("sync")
    assert again.exit_code == 0, again.stderr
    assert git("diff", cwd=triton) == before  # recognized as applied: not applied a second time
    # spine-triton's own checkout is untouched: the patch went into the submodule only
    assert git("status", "--porcelain", "--ignore-submodules=all", cwd=made.ws.spine_triton) == ""


# --- the build --------------------------------------------------------------------------------------------


def test_the_wheel_build_gets_the_cross_environment(made: Made) -> None:
    [entry] = made.wheel_builds()
    ws = made.ws.root
    spine, toolchain, llvm = made.ws.spine_triton, ws / "toolchain", ws / "llvm_installed"
    assert entry["argv"] == ["setup.py", "bdist_wheel", "--plat-name", "linux_riscv64", "--dist-dir", str(ws / "dist")]
    assert entry["cwd"] == str(made.ws.triton) and entry["executable"] == str(made.python)
    env = entry["env"]
    assert env["CC"] == f"{toolchain}/bin/riscv64-unknown-linux-gnu-gcc"
    assert env["CXX"] == f"{toolchain}/bin/riscv64-unknown-linux-gnu-g++"
    assert env["RISCV_ROOT_PATH"] == str(toolchain)
    assert env["TRITON_APPEND_CMAKE_ARGS"] == (
        f"-DLLVM_LIBRARY_DIR={llvm}/lib -DLLVM_DIR={llvm}/lib/cmake/llvm -DLLD_DIR={llvm}/lib/cmake/lld "
        f"-DMLIR_DIR={llvm}/lib/cmake/mlir -DCMAKE_TOOLCHAIN_FILE={spine}/cmake/linux_riscv64.toolchain.cmake")
    assert env["SPINE_TRITON_VERSION_NUMBER"] == "spacemit.a5"  # VERSION_NUMBER's content, newline stripped
    assert env["TRITON_PLUGIN_DIRS"] == str(spine) and env["SPINE_MLIR_INSTALL_DIR"] == str(ws / "speir_installed")
    assert env["LLVM_SYSPATH"] == env["LLVM_ROOT_DIR"] == str(llvm)
    assert (env["TRITON_OFFLINE_BUILD"], env["TRITON_BUILD_PROTON"], env["TRITON_BUILD_UT"]) == ("true", "false",
                                                                                                  "false")
    assert env["TRITON_IN_TREE_BACKENDS"] == ""


def test_zlib_is_cross_built_into_the_sysroot_once_and_again_only_when_it_is_gone(made: Made) -> None:
    libz = made.ws.artifact("toolchain") / "sysroot" / "usr" / "lib" / "libz.a"
    text = libz.read_text()
    # made with the step's CC/AR/RANLIB (the cross tools), installed under the toolchain's sysroot
    assert text.startswith("!<arch>\narchived by riscv64-unknown-linux-gnu-ar\n")
    assert "riscv64 object from riscv64-unknown-linux-gnu-gcc" in text and "riscv64-unknown-linux-gnu-ranlib" in text
    assert (made.ws.artifact("toolchain") / "sysroot" / "usr" / "include" / "zlib.h").is_file()
    prefix = made.ws.artifact("toolchain") / "sysroot" / "usr"
    assert made.configure_runs() == [
        f"configure --prefix={prefix} CC={made.ws.artifact('toolchain')}/bin/riscv64-unknown-linux-gnu-gcc"]
    again = made.build()
    assert again.exit_code == 0, again.stderr
    assert "up to date" in again.stderr
    assert len(made.configure_runs()) == 1 and len(made.wheel_builds()) == 1


def test_a_toolchain_without_zlib_runs_the_step_again(fresh: Made) -> None:
    for step in ("sync", "fetch"):
        assert fresh.ws.run(step).exit_code == 0
    assert fresh.build().exit_code == 0
    libz = fresh.ws.artifact("toolchain") / "sysroot" / "usr" / "lib" / "libz.a"
    libz.unlink()  # e.g. the toolchain was unpacked again
    result = fresh.build()
    assert result.exit_code == 0, result.stderr
    assert f"what the steps create is missing: step zlib-into-sysroot: {libz}" in result.stderr
    assert libz.is_file() and len(fresh.configure_runs()) == 2 and len(fresh.wheel_builds()) == 2


def test_an_unpatched_triton_fails_for_that_reason(fresh: Made) -> None:
    unpatched = ("sources.spine-triton.patches=[]",)
    for step in ("sync", "fetch"):
        assert fresh.ws.run(step, sets=unpatched).exit_code == 0
    result = fresh.build(sets=unpatched)
    assert result.exit_code == 5
    assert "the triton submodule is not patched with spine-triton's patch/triton.patch" in result.stderr
    assert "flagtree-cpu sync (it applies patch/triton.patch" in without_context(result.stderr)
    assert not list((fresh.ws.root / "dist").glob("*.whl"))


def test_build_offline_lists_every_missing_input_and_runs_nothing(fresh: Made, tmp_path: Path) -> None:
    bare = make_venv(tmp_path / "bare-venv", with_pip=False)  # no setuptools, wheel or pybind11
    result = fresh.ws.run("build", "--offline", "--python", str(bare))
    assert result.exit_code == 5, result.stderr
    # listed although the build environment cannot be computed yet (VERSION_NUMBER is in the missing source)
    assert "5 inputs of an offline build are missing; nothing was run" in result.stderr
    assert "source spine-triton: not checked out" in result.stderr
    assert "flagtree-cpu sync" in without_context(result.stderr)
    for name in ("toolchain", "speir", "llvm", "zlib"):
        assert f"artifact {name}: not published" in result.stderr
    assert not fresh.record.exists() and fresh.server.requests == []
    # with the sources and downloads here, what is left: the build prerequisites, named with the command
    for step in ("sync", "fetch"):
        assert fresh.ws.run(step).exit_code == 0
    served = len(fresh.server.requests)
    left = fresh.ws.run("build", "--offline", "--python", str(bare))
    assert left.exit_code == 5, left.stderr
    assert "1 input of an offline build is missing; nothing was run" in left.stderr
    assert "not checked out" not in left.stderr and "not published" not in left.stderr
    assert f"{bare} -m pip install setuptools wheel pybind11" in left.stderr
    assert not fresh.record.exists() and fresh.configure_runs() == [] and len(fresh.server.requests) == served


# --- checks -----------------------------------------------------------------------------------------------


def test_the_wheel_check_passes_on_the_host_and_the_board_check_is_skipped(made: Made) -> None:
    result = made.validate()
    assert result.exit_code == 0, result.stdout + result.stderr
    found = rows(result)
    wheel = found["wheel-is-riscv64"]
    assert wheel["status"] == "pass", wheel
    assert wheel["details"]["wheels"] == {WHEEL: {"triton/_C/libtriton.so": "riscv64"}}
    board = found["import-on-board"]
    assert board["status"] == "skip" and board["message"] == f"runs on riscv64; this host is {HERE}"


def test_the_wheel_check_fails_for_an_x86_64_object_and_for_a_wrong_tag(fresh: Made) -> None:
    for step in ("sync", "fetch"):
        assert fresh.ws.run(step).exit_code == 0
    assert fresh.build(sets=("build.env.set.FIXTURE_WHEEL_X86_SO=1",)).exit_code == 0
    sneaked = fresh.validate()
    assert sneaked.exit_code == 6
    check = rows(sneaked)["wheel-is-riscv64"]
    assert check["status"] == "fail" and "triton/_C/libproton.so (x86_64)" in check["message"]
    assert "libtriton.so" not in check["message"]
    # the host's platform name instead of the board's: every object is right, the tag is not
    for wheel in (fresh.ws.root / "dist").glob("*.whl"):
        wheel.unlink()
    host_tag = ("build.wheel_argv=['{python}', setup.py, bdist_wheel, --plat-name, linux_x86_64, --dist-dir, "
                "'{wheel_dir}']",)
    assert fresh.build(sets=host_tag).exit_code == 0
    mistagged = fresh.validate()
    assert mistagged.exit_code == 6
    check = rows(mistagged)["wheel-is-riscv64"]
    wrong = WHEEL.replace("linux_riscv64", "linux_x86_64")
    assert check["message"] == f"{wrong} is tagged linux_x86_64, not linux_riscv64"


# --- doctor on board snapshots ----------------------------------------------------------------------------


def doctor_findings(tmp_path: Path, snapshot: str) -> dict[str, dict[str, Any]]:
    result = CliRunner().invoke(app, ["-w", str(tmp_path / "ws"), "--recipe", RECIPE, "doctor", "--json",
                                      "--offline", "--sysroot", str(HOSTS / snapshot)])
    return {f["id"]: f for f in result_of(result.stdout)["checks"]}


def test_doctor_gives_the_cross_build_its_own_host_rules(tmp_path: Path) -> None:
    x86 = doctor_findings(tmp_path, "x86_64-debian")
    assert x86["host.arch"]["status"] == "ok"
    assert x86["host.arch"]["detail"] == CROSS_HOST
    assert x86["cpu.features"]["status"] == "skip"
    assert x86["cpu.features"]["detail"] == "the products run on riscv64, not on this x86_64 host"
    host_rules = {k: v for k, v in x86.items() if k.startswith(("host.", "cpu."))}
    assert not [k for k, v in host_rules.items() if v["status"] == "fail"], host_rules
    arm = doctor_findings(tmp_path, "graviton4-neoverse-v2")
    assert arm["host.arch"]["status"] == "fail"
    assert arm["host.arch"]["detail"] == ("this machine is aarch64; recipe spine-triton-riscv64 builds on x86_64 "
                                          "(the SpacemiT cross toolchain it downloads is the x86_64-host build, "
                                          "spacemit-toolchain-linux-glibc-x86_64)")
    assert arm["host.arch"]["fix"] == "build on an x86_64 Linux machine and copy the wheel to the board"
