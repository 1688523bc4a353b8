"""The build and run environments: every FlagTree trap, conflicts with the inherited environment, toolchains' env
ops, the stamp, shells."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from flagtree_cpu_build.buildenv import (
    EnvLayer,
    compute_build_env,
    render_exports,
    runtime_env,
    stamp_env,
    toolchain_layers,
)
from flagtree_cpu_build.cmakeargs import cmake_arguments
from flagtree_cpu_build.host import HostFacts
from flagtree_cpu_build.placeholders import placeholder_values
from flagtree_cpu_build.recipe import EnvOps, Selector, SourceScript, Toolchain, resolve, select_variants
from flagtree_cpu_build.recipe.files import load_recipe
from flagtree_cpu_build.workspace import Workspace

BOARD = HostFacts("linux", "aarch64", "ubuntu", "24.04", "Ubuntu", 12, 32 * 2**30, 20 * 2**30)
NVIDIA = ("TRITON_PTXAS_PATH", "TRITON_CUOBJDUMP_PATH", "TRITON_NVDISASM_PATH", "TRITON_CUDACRT_PATH",
          "TRITON_CUDART_PATH", "TRITON_CUPTI_INCLUDE_PATH", "TRITON_CUPTI_LIB_PATH")


def resolved_recipe(tmp_path: Path, jobs: int | None = None):
    recipe = select_variants(load_recipe("flagtree-cpu-arm64"), BOARD.os_id, BOARD.arch)
    ws = Workspace(tmp_path / "ws")
    values = placeholder_values(recipe, ws, BOARD, {"HOME": "/home/edge"}, jobs=jobs)
    # the LLVM's hash, as sync reads it from FlagTree's cmake/llvm-hash.txt (source_reads)
    return resolve(recipe, ws.root, values, reads={"artifacts.llvm.match": "a66376b0"}), ws


def build_spec(tmp_path: Path, jobs: int | None = None):
    recipe, ws = resolved_recipe(tmp_path, jobs)
    return recipe.build, ws


def env_for(tmp_path: Path, inherited: dict[str, str] | None = None, *, offline: bool = False,
            ccache: bool = False, jobs: int | None = None):
    recipe, ws = resolved_recipe(tmp_path, jobs)
    base = {"HOME": "/home/edge", "PATH": "/usr/bin:/bin", **(inherited or {})}
    return compute_build_env(recipe.build, base, offline=offline, commands_available={"ccache": ccache},
                             path_prefix=str(ws.venv_dir / "bin"),
                             cmake_args=cmake_arguments(recipe.build.cmake, recipe, ws.root)), ws


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


# --- env operations in the build and run environments -----------------------------------------------


def fake_source(changes: dict[str, str | None]):
    def run(script: Path, args, env, cwd) -> dict[str, str]:
        out = dict(env)
        for name, value in changes.items():
            if value is None:
                out.pop(name, None)
            else:
                out[name] = value.replace("$PATH", env.get("PATH", ""))
        return out

    return run


def vendor_recipe(tmp_path: Path, when: Selector | None = None):
    build, _ = build_spec(tmp_path)
    recipe = select_variants(load_recipe("flagtree-cpu-arm64"), BOARD.os_id, BOARD.arch)
    vendor = Toolchain(path="/opt/vendor", env=EnvOps(source=(SourceScript(script="/opt/vendor/set_env.sh"),),
                                                       prepend={"LD_LIBRARY_PATH": ("/opt/vendor/lib",)}),
                       fix="install the vendor SDK", when=when)
    return replace(recipe, build=build, toolchains={"vendor": vendor})


def test_toolchain_ops_come_after_the_build_env_and_before_offline(tmp_path: Path) -> None:
    recipe = vendor_recipe(tmp_path)
    assert recipe.build is not None
    layers = toolchain_layers(recipe, recipe.selector_facts("aarch64", "ubuntu"))
    assert [(layer.key, layer.fix) for layer in layers] == [
        ("toolchains.vendor.env",
         "install the vendor SDK (or point FLAGTREE_CPU_TOOLCHAIN_VENDOR at this host's copy)")]
    sourcer = fake_source({"FLAGTREE_BACKEND": "vendor", "TRITON_OFFLINE_BUILD": "0", "VENDOR_HOME": "/opt/vendor",
                           "PATH": "/opt/vendor/bin:$PATH"})
    result = compute_build_env(recipe.build, {"PATH": "/usr/bin:/bin"}, offline=True, commands_available={},
                               path_prefix="/venv/bin", extra_ops=layers, source=sourcer)
    env = result.env
    assert env["FLAGTREE_BACKEND"] == "vendor"  # the toolchain's script runs after build.env
    assert env["TRITON_OFFLINE_BUILD"] == "1"  # and offline_env after it
    assert env["PATH"] == "/venv/bin:/opt/vendor/bin:/usr/bin:/bin"
    assert env["LD_LIBRARY_PATH"] == "/opt/vendor/lib"
    assert [s.key for s in result.sourced] == ["toolchains.vendor.env.source[0]"]
    stamp = stamp_env(result, recipe.build.stamp_ignores)
    assert stamp["VENDOR_HOME"] == "/opt/vendor" and stamp["FLAGTREE_BACKEND"] == "vendor"
    # the added entries around the inherited value, not this machine's PATH (nor the venv's bin)
    assert stamp["PATH"] == "/opt/vendor/bin:$PATH" and stamp["LD_LIBRARY_PATH"] == "/opt/vendor/lib:$LD_LIBRARY_PATH"
    assert "TRITON_OFFLINE_BUILD" not in stamp  # stamp_ignores hold for sourced values too


def test_a_changed_script_result_changes_the_stamp(tmp_path: Path) -> None:
    recipe = vendor_recipe(tmp_path)
    assert recipe.build is not None
    layers = toolchain_layers(recipe, recipe.selector_facts("aarch64", "ubuntu"))

    def stamp(value: str) -> dict[str, str | None]:
        built = compute_build_env(recipe.build, {"PATH": "/usr/bin"}, offline=False, commands_available={},
                                  extra_ops=layers, source=fake_source({"VENDOR_VERSION": value}))
        return stamp_env(built, recipe.build.stamp_ignores)

    assert stamp("8.0") != stamp("8.1") and stamp("8.0") == stamp("8.0")


def test_a_toolchain_that_does_not_apply_adds_nothing(tmp_path: Path) -> None:
    recipe = vendor_recipe(tmp_path, when=Selector(arch=("x86_64",)))
    assert toolchain_layers(recipe, recipe.selector_facts("aarch64", "ubuntu")) == []
    assert len(toolchain_layers(recipe, recipe.selector_facts("x86_64", "ubuntu"))) == 1


def test_the_runtime_env_is_runtime_ops_then_toolchains_then_a_checks_own(tmp_path: Path) -> None:
    recipe = vendor_recipe(tmp_path)
    check_env = EnvLayer(EnvOps(set={"FLAGGEMS_VENDOR": "none"}, unset=("VENDOR_*",)), "checks[2].env")
    result = runtime_env(recipe, {"PATH": "/usr/bin", "FLAGTREE_BACKEND": "cpu"},
                         facts=recipe.selector_facts("aarch64", "ubuntu"), extra_ops=[check_env],
                         source=fake_source({"VENDOR_HOME": "/opt/vendor"}))
    env = result.env
    assert env["FLAGTREE_BACKEND"] == "cpu" and env["FLAGGEMS_VENDOR"] == "none"
    assert env["LD_LIBRARY_PATH"] == "/opt/vendor/lib" and "VENDOR_HOME" not in env
    # `flagtree-cpu env` exports what the ops name even when inherited as wanted (FLAGTREE_BACKEND)
    assert list(result.exports()) == ["FLAGTREE_BACKEND", "FLAGGEMS_VENDOR", "LD_LIBRARY_PATH"]
    assert result.settings() == {"FLAGGEMS_VENDOR": "none", "LD_LIBRARY_PATH": "/opt/vendor/lib"}


def test_the_bundled_runtime_env(tmp_path: Path) -> None:
    build, ws = build_spec(tmp_path)
    recipe = select_variants(load_recipe("flagtree-cpu-arm64"), BOARD.os_id, BOARD.arch)
    result = runtime_env(recipe, {"PATH": "/usr/bin"}, facts=recipe.selector_facts("aarch64", "ubuntu"))
    assert result.exports() == {"FLAGTREE_BACKEND": "cpu", "FLAGGEMS_VENDOR": "arm"}
    assert result.removed() == [] and result.sourced == ()


def test_a_prepended_path_is_exported_whole(tmp_path: Path) -> None:
    build, ws = build_spec(tmp_path)
    ops = EnvLayer(EnvOps(prepend={"PATH": ("/opt/my tools/bin",)}), "toolchains.x.env")
    result = compute_build_env(build, {"PATH": "/usr/bin:/bin"}, offline=False, commands_available={},
                               path_prefix="/venv/bin", extra_ops=[ops])
    rendered = render_exports({"PATH": result.settings()["PATH"]}, (), "bash")
    assert rendered == "export PATH='/venv/bin:/opt/my tools/bin:/usr/bin:/bin'\n"
    assert [c.describe() for c in result.changes if c.name == "PATH"] == [
        "PATH starts with /venv/bin:/opt/my tools/bin"]
    assert stamp_env(result, ())["PATH"] == "/opt/my tools/bin:$PATH"


def test_if_command_is_answered_by_the_caller_or_looked_up(tmp_path: Path) -> None:
    build, _ = build_spec(tmp_path)
    given = compute_build_env(build, {"PATH": "/nowhere"}, offline=False, commands_available={"ccache": True})
    assert given.env["TRITON_BUILD_WITH_CCACHE"] == "true"
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "ccache").write_text("#!/bin/sh\n")
    (tools / "ccache").chmod(0o755)
    looked_up = compute_build_env(build, {"PATH": "/nowhere"}, offline=False, path_prefix=str(tools))
    assert looked_up.env["TRITON_BUILD_WITH_CCACHE"] == "true"  # found in the target Python's bin
    absent = compute_build_env(build, {"PATH": "/nowhere"}, offline=False, path_prefix=str(tmp_path / "empty"))
    assert "TRITON_BUILD_WITH_CCACHE" not in absent.env


def test_exports_carry_notes_as_comments() -> None:
    assert render_exports({"A": "1"}, ["B"], "fish", ["from /s.sh (build.env.source[0]): 2 variables changed"]) == (
        "# from /s.sh (build.env.source[0]): 2 variables changed\nset -e B;\nset -gx A '1';\n")
