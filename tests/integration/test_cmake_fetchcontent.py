"""A build's `cmake:` block for real (issue 29, item 4): `env --build` shows the CMake arguments, the fixture build
receives them in the variable the recipe names and is stamped with them, and `build --offline` says which missing
input is a FetchContent dependency."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from flagtree_cpu_build.cli import app
from tests.integration.test_build import BuildWorkspace, bws  # noqa: F401  (the fixture)
from tests.support.envelope import error_of, result_of

GOOGLETEST = "sources.googletest={url: 'https://github.com/google/googletest.git', ref: v1.17.0}"
CMAKE = ("build.cmake={args_env: TRITON_APPEND_CMAKE_ARGS, define: {TRITON_BUILD_UT: 'OFF'}, "
         "fetchcontent: {googletest: {source: googletest}}}")


def test_env_build_shows_the_cmake_arguments_after_the_recipes_own(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    result = CliRunner().invoke(app, ["--recipe", "triton-cpu", "-w", str(ws), "--set", GOOGLETEST, "--set", CMAKE,
                                      "--set", "build.env.set.TRITON_APPEND_CMAKE_ARGS=-DUSER=1", "env", "--build",
                                      "--json", "--python", str(tmp_path / "venv/bin/python")])
    assert result.exit_code == 0, result.stderr
    document = result_of(result.stdout)
    assert shlex.split(document["set"]["TRITON_APPEND_CMAKE_ARGS"]) == [
        "-DUSER=1", "-DTRITON_BUILD_UT=OFF", f"-DFETCHCONTENT_SOURCE_DIR_GOOGLETEST={ws}/googletest",
        "-DFETCHCONTENT_FULLY_DISCONNECTED=ON"]
    (change,) = [c for c in document["changes"] if c["name"] == "TRITON_APPEND_CMAKE_ARGS"]
    assert change["by"] == "build.cmake"


def test_an_offline_build_names_the_missing_fetchcontent_dependency(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    result = CliRunner().invoke(app, ["--recipe", "triton-cpu", "-w", str(tmp_path / "ws"), "--set", GOOGLETEST,
                                      "--set", CMAKE, "build", "--offline", "--python",
                                      str(tmp_path / "venv/bin/python"), "--json"])
    assert result.exit_code == 5, result.stdout
    details = error_of(result.stdout)["details"]
    [line] = [d for d in details if d.startswith("source googletest:")]
    assert line.endswith("(FetchContent googletest of build.cmake)"), line
    assert any(d.startswith("source triton-cpu:") and "FetchContent" not in d for d in details), details


def test_the_build_gets_the_arguments_and_a_changed_define_rebuilds(bws: BuildWorkspace) -> None:  # noqa: F811
    # the fixture flagtree-cpu checkout stands in for googletest: a folder with a CMakeLists.txt
    (bws.ws.flagtree_cpu / "CMakeLists.txt").write_text("project(stand_in)\n")
    dep = "fetchcontent: {googletest: {source: flagtree-cpu}}"
    sets = (f"build.cmake={{args_env: TRITON_APPEND_CMAKE_ARGS, define: {{TRITON_BUILD_UT: 'OFF'}}, {dep}}}",)
    first = bws.build(sets=sets)
    assert first.exit_code == 0, first.stderr
    [entry] = [r for r in bws.build_records() if "editable_wheel" in r["argv"]]
    # the --set replaces the recipe's own cmake block (its install prefix) and the recipe unsets an inherited value,
    # so the variable holds exactly these
    assert shlex.split(entry["env"]["TRITON_APPEND_CMAKE_ARGS"]) == [
        "-DTRITON_BUILD_UT=OFF", f"-DFETCHCONTENT_SOURCE_DIR_GOOGLETEST={bws.ws.flagtree_cpu}",
        "-DFETCHCONTENT_FULLY_DISCONNECTED=ON"]
    changed = bws.build(sets=(sets[0].replace("'OFF'", "'ON'"),))
    assert changed.exit_code == 0, changed.stderr
    assert "env.TRITON_APPEND_CMAKE_ARGS changed" in changed.stderr, changed.stderr


def test_a_dependency_at_its_own_folder_is_linked_before_the_command_and_a_stranger_there_stops_it(
        bws: BuildWorkspace) -> None:  # noqa: F811
    (bws.ws.flagtree_cpu / "CMakeLists.txt").write_text("project(stand_in)\n")
    sets = ("build.cmake={args_env: TRITON_APPEND_CMAKE_ARGS, fetchcontent: {googletest: {source: flagtree-cpu, "
            "at: build/_deps/googletest-src}}}",)
    first = bws.build(sets=sets)
    assert first.exit_code == 0, first.stderr
    at = bws.ws.flagtree / "build/_deps/googletest-src"  # the build runs in the checkout
    assert at.is_symlink() and Path(at.readlink()) == bws.ws.flagtree_cpu, first.stderr
    moved = bws.build(sets=(sets[0].replace("googletest-src", "gtest"),))
    assert moved.exit_code == 0 and "fetchcontent_at.googletest changed" in moved.stderr, moved.stderr
    at.unlink()
    at.mkdir()  # CMake's own clone, as a build before `at` would leave it
    builds = len(bws.build_records())
    refused = bws.build("--force", "--json", sets=sets)
    assert refused.exit_code == 5, refused.stdout
    [line] = [d for d in error_of(refused.stdout)["details"] if "googletest-src" in d]
    assert "is a folder (CMake's own download?), not the tool's link" in line and "rm -rf" in line, line
    assert len(bws.build_records()) == builds and at.is_dir() and not at.is_symlink()  # nothing ran, nothing removed
