"""A build's `cmake:` block (issue 29, item 4): definitions and FetchContent dependencies as recipe sources or
artifacts, appended shell-quoted to the variable the project reads CMake arguments from — after every env
operation, in the build environment, its stamp and `env --build` alike."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from flagtree_cpu_build.buildenv import build_environment, compute_build_env, stamp_env
from flagtree_cpu_build.cmakeargs import cmake_arguments, fetchcontent_problems, place_links
from flagtree_cpu_build.errors import BuildError, RecipeError
from flagtree_cpu_build.host import HostFacts
from flagtree_cpu_build.placeholders import placeholder_values
from flagtree_cpu_build.recipe import resolve, select_variants
from flagtree_cpu_build.recipe.files import parse_recipe
from flagtree_cpu_build.workspace import Workspace

HOST = HostFacts("linux", "x86_64", "ubuntu", "22.04", "Ubuntu", 4, None, 16 * 2**30)

RECIPE = """\
schema_version: 2
name: fc-demo
platform:
  host: {arch: [x86_64, aarch64]}
sources:
  app:
    url: https://example.invalid/app.git
    ref: main
  googletest:
    url: https://example.invalid/googletest.git
    ref: v1.17.0
artifacts:
  json:
    url: https://example.invalid/json.tar.xz
    path: "/c/json 3.11"
build:
  cwd: "{sources.app.path}"
  argv: ["{python}", -m, pip, install, -e, .]
  env:
    set:
      TRITON_APPEND_CMAKE_ARGS: "-DCMAKE_INSTALL_PREFIX={home}/.install"
  offline_env:
    set: {TRITON_OFFLINE_BUILD: "1"}
  cmake:
    args_env: TRITON_APPEND_CMAKE_ARGS
    define:
      TRITON_BUILD_UT: "OFF"
      LLVM_DIR:PATH: "{workdir}/llvm"
    fetchcontent:
      googletest: {source: googletest}
      nlohmann_json: {artifact: json}
"""


def resolved(tmp_path: Path, text: str = RECIPE, overrides: tuple[str, ...] = ()):
    recipe = select_variants(parse_recipe(text, "fc.yaml", overrides), HOST.os_id, HOST.arch)
    ws = Workspace(tmp_path / "ws")
    values = placeholder_values(recipe, ws, HOST, {"HOME": "/home/u", "XDG_CACHE_HOME": "/c"})
    return resolve(recipe, ws.root, values, {"HOME": "/home/u"}), ws


def problems_of(text: str, overrides: tuple[str, ...] = ()) -> list[str]:
    with pytest.raises(RecipeError) as caught:
        parse_recipe(text, "fc.yaml", overrides)
    return [f"{p.key}: {p.message}" for p in caught.value.problems]


def test_arguments_are_the_defines_then_each_fetchcontent_folder_then_disconnected(tmp_path: Path) -> None:
    recipe, ws = resolved(tmp_path)
    args = cmake_arguments(recipe.build.cmake, recipe, ws.root)
    assert args == ("-DTRITON_BUILD_UT=OFF", f"-DLLVM_DIR:PATH={ws.root}/llvm",
                    f"-DFETCHCONTENT_SOURCE_DIR_GOOGLETEST={ws.root}/googletest",
                    "-DFETCHCONTENT_SOURCE_DIR_NLOHMANN_JSON=/c/json 3.11",
                    "-DFETCHCONTENT_FULLY_DISCONNECTED=ON")


def test_they_are_appended_shell_quoted_after_every_env_layer(tmp_path: Path) -> None:
    recipe, ws = resolved(tmp_path)
    args = cmake_arguments(recipe.build.cmake, recipe, ws.root)
    for offline in (False, True):
        built = compute_build_env(recipe.build, {"PATH": "/usr/bin"}, offline=offline, commands_available={},
                                  cmake_args=args)
        value = built.env["TRITON_APPEND_CMAKE_ARGS"]
        # the recipe's own set comes first; a path with a space stays one argument for setup.py's shlex.split
        assert shlex.split(value) == ["-DCMAKE_INSTALL_PREFIX=/home/u/.install", *args]
        assert "'-DFETCHCONTENT_SOURCE_DIR_NLOHMANN_JSON=" in value
        (change,) = [c for c in built.changes if c.name == "TRITON_APPEND_CMAKE_ARGS"]
        assert change.by == "build.cmake"
        assert stamp_env(built, ())["TRITON_APPEND_CMAKE_ARGS"] == value  # a changed define rebuilds


def test_an_inherited_value_is_kept_in_front_when_the_recipe_sets_none(tmp_path: Path) -> None:
    recipe, ws = resolved(tmp_path, overrides=("build.env.set={}",))
    args = cmake_arguments(recipe.build.cmake, recipe, ws.root)
    built = compute_build_env(recipe.build, {"TRITON_APPEND_CMAKE_ARGS": "-DUSER=1"}, offline=False,
                              commands_available={}, cmake_args=args)
    assert shlex.split(built.env["TRITON_APPEND_CMAKE_ARGS"]) == ["-DUSER=1", *args]


def test_the_machine_build_environment_has_them(tmp_path: Path) -> None:
    recipe, ws = resolved(tmp_path)
    built = build_environment(recipe, ws.venv_dir / "bin/python", offline=False, host=HOST, workdir=ws.root)
    assert f"-DFETCHCONTENT_SOURCE_DIR_GOOGLETEST={ws.root}/googletest" in built.env["TRITON_APPEND_CMAKE_ARGS"]


def test_defines_alone_do_not_disconnect_fetchcontent(tmp_path: Path) -> None:
    recipe, ws = resolved(tmp_path, overrides=("build.cmake.fetchcontent={}",))
    assert cmake_arguments(recipe.build.cmake, recipe, ws.root) == (
        "-DTRITON_BUILD_UT=OFF", f"-DLLVM_DIR:PATH={ws.root}/llvm")


def test_a_fetchcontent_folder_without_a_cmakelists_is_listed_and_a_listed_input_says_its_role(
        tmp_path: Path) -> None:
    recipe, ws = resolved(tmp_path)
    (ws.root / "googletest").mkdir(parents=True)  # synced, but not the project CMake would add
    listed = fetchcontent_problems(recipe, ws.root, ["artifact json: not published — run `flagtree-cpu fetch`"])
    assert listed[0] == "artifact json: not published — run `flagtree-cpu fetch` (FetchContent nlohmann_json of " \
        "build.cmake)"
    assert listed[1].startswith(f"FetchContent googletest (build.cmake.fetchcontent.googletest): source googletest at "
                                f"{ws.root}/googletest has no CMakeLists.txt — run `flagtree-cpu sync`")
    (ws.root / "googletest" / "CMakeLists.txt").write_text("project(googletest)\n")
    assert len(fetchcontent_problems(recipe, ws.root, [])) == 1  # the json artifact's folder is still missing


@pytest.mark.parametrize(("overrides", "expected"), [
    (("build.cmake.fetchcontent.googletest.source=gtest",),
     "build.cmake.fetchcontent.googletest.source: there is no source named 'gtest'"),
    (("build.cmake.fetchcontent.nlohmann_json.artifact=jsn",),
     "build.cmake.fetchcontent.nlohmann_json.artifact: there is no artifact named 'jsn' (did you mean 'json'?)"),
    (("build.cmake.fetchcontent.googletest.artifact=json",),
     "build.cmake.fetchcontent.googletest: a FetchContent dependency names one source or one artifact, not both"),
    (("build.cmake.fetchcontent.GoogleTest.source=googletest",),
     "build.cmake.fetchcontent.GoogleTest: 'GoogleTest' and 'googletest' are one FetchContent dependency"),
    (("build.cmake.define.FETCHCONTENT_SOURCE_DIR_GOOGLETEST=/x",),
     "build.cmake.define.FETCHCONTENT_SOURCE_DIR_GOOGLETEST: FETCHCONTENT_SOURCE_DIR_GOOGLETEST is FetchContent's "
     "own"),
    (("build.cmake.define={BAD NAME: 'on'}",), "build.cmake.define.BAD NAME: 'BAD NAME' is not a CMake variable name"),
    (("build.cmake.args_env=APPEND-ARGS",), "build.cmake.args_env: 'APPEND-ARGS' is not an environment variable"),
    (('build.cmake.define.X="{pyhton}"',), "build.cmake.define.X: unknown placeholder {pyhton}"),
    (("build.cmake.define={}", "build.cmake.fetchcontent={}"),
     "build.cmake: a cmake block without define or fetchcontent adds nothing"),
    (("build.cmake.fetchcontent.googletest.at=../outside",),
     "build.cmake.fetchcontent.googletest.at: folder '../outside' escapes the build's working folder (cwd)"),
    (("build.cmake.fetchcontent.googletest.at=/abs/googletest",),
     "build.cmake.fetchcontent.googletest.at: folder '/abs/googletest' must be a relative path"),
    (('build.cmake.fetchcontent.googletest.at="build/{pyhton.version}/gt"',),
     "build.cmake.fetchcontent.googletest.at: unknown placeholder {pyhton.version}"),
    (("build.cmake.fetchcontnet={}",),
     "build.cmake.fetchcontnet: unknown key 'fetchcontnet' (did you mean 'fetchcontent'?)"),
])
def test_a_wrong_cmake_block_is_a_located_recipe_problem(overrides: tuple[str, ...], expected: str) -> None:
    found = problems_of(RECIPE, overrides)
    assert any(p.startswith(expected) for p in found), found


AT = ('build.cmake.fetchcontent.googletest={source: googletest, at: "build/cmake.{platform.tag}-cpython-'
      '{python.version}/_deps/googletest"}',)


def test_a_dependency_at_its_own_folder_is_linked_there_once(tmp_path: Path) -> None:
    recipe, ws = resolved(tmp_path, overrides=AT)
    (ws.root / "googletest").mkdir(parents=True)
    (ws.root / "app").mkdir()
    at = Path(recipe.build.cwd) / recipe.build.cmake.fetchcontent["googletest"].at
    assert "{" not in str(at) and "cpython-" in str(at)  # the computed placeholders filled in
    assert place_links(recipe, ws.root) == [at]
    assert at.is_symlink() and Path(at.readlink()) == ws.root / "googletest"
    assert place_links(recipe, ws.root) == []  # the right link is left as it is
    assert cmake_arguments(recipe.build.cmake, recipe, ws.root)[2] == \
        f"-DFETCHCONTENT_SOURCE_DIR_GOOGLETEST={ws.root}/googletest"  # the hand-over by argument stays too


def test_what_is_not_the_tools_link_at_that_folder_is_refused_and_listed(tmp_path: Path) -> None:
    recipe, ws = resolved(tmp_path, overrides=AT)
    (ws.root / "googletest").mkdir(parents=True)
    at = Path(recipe.build.cwd) / recipe.build.cmake.fetchcontent["googletest"].at
    (at / "src").mkdir(parents=True)  # CMake's own clone, from a build before the recipe said `at`
    with pytest.raises(BuildError) as caught:
        place_links(recipe, ws.root)
    [detail] = caught.value.details
    assert f"{at} is a folder (CMake's own download?), not the tool's link to {ws.root}/googletest" in detail
    assert (at / "src").is_dir()  # untouched
    assert any(line.startswith("FetchContent googletest (build.cmake.fetchcontent.googletest.at)")
               for line in fetchcontent_problems(recipe, ws.root, []))  # `build --offline` lists it before a run


def test_a_link_in_the_build_tree_that_leads_out_is_refused(tmp_path: Path) -> None:
    recipe, ws = resolved(tmp_path, overrides=("build.cmake.fetchcontent.googletest={source: googletest, at: "
                                               "build/_deps/googletest}",))
    (ws.root / "googletest").mkdir(parents=True)
    (ws.root / "app").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (ws.root / "app/build").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(BuildError) as caught:
        place_links(recipe, ws.root)
    assert "leads outside the build's folder" in caught.value.details[0]
    assert not (tmp_path / "elsewhere/_deps").exists()


def test_a_missing_tree_with_a_place_is_listed_with_that_place(tmp_path: Path) -> None:
    recipe, ws = resolved(tmp_path, overrides=AT)
    at = Path(recipe.build.cwd) / recipe.build.cmake.fetchcontent["googletest"].at
    [line] = fetchcontent_problems(recipe, ws.root, ["source googletest: not cloned — run `flagtree-cpu sync`"])[:1]
    assert line.endswith(f"(FetchContent googletest of build.cmake, linked at {at})"), line
