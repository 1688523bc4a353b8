"""The bundled recipe carries FlagTree's real pins, links, env and expectations.

The expected values below are copied from FLAGTREE-FACTS.md (and FlagTree's
link_flagtree_cpu.sh), independently of the recipe file, so a typo in the recipe
fails here.
"""

from __future__ import annotations

import posixpath
from pathlib import Path

import pytest

from flagtree_cpu_build.host import HostFacts
from flagtree_cpu_build.placeholders import placeholder_values
from flagtree_cpu_build.recipe import resolve, select_variants
from flagtree_cpu_build.recipe.files import load_recipe
from flagtree_cpu_build.workspace import Workspace
from tests.support.facts import FACTS_BUILDER_METHODS, FACTS_LINKS

ARM_BOARD = HostFacts(system="linux", arch="aarch64", os_id="ubuntu", os_version_id="24.04",
                      os_pretty_name="Ubuntu 24.04", cpu_count=12, mem_total=32 * 2**30,
                      mem_available=20 * 2**30)


READ = {"artifacts.llvm.match": "a66376b0"}


@pytest.fixture(scope="module")
def recipe():
    return load_recipe("flagtree-cpu-arm64")


def test_pins_and_urls(recipe) -> None:
    flagtree = recipe.sources["flagtree"]
    assert flagtree.url == "https://github.com/flagos-ai/FlagTree.git"
    assert flagtree.ref == "triton_v3.3.x"
    assert flagtree.commit == "3911e5bf145c039104aa31ef2fef0e55f569c9e5"
    cpu = recipe.sources["flagtree-cpu"]
    assert cpu.url == "https://github.com/flagos-ai/flagtree-cpu.git"
    assert (cpu.ref, cpu.commit, cpu.submodules) == ("main", None, "recursive")
    assert recipe.source_path("flagtree-cpu") == "FlagTree/third_party/triton-cpu"
    assert recipe.sources_in_order() == ["flagtree", "flagtree-cpu"]
    llvm = recipe.artifacts["llvm"]
    # the tarball named after the first 8 characters of FlagTree's cmake/llvm-hash.txt, read after sync
    assert llvm.url == ("https://oaitriton.blob.core.windows.net/public/llvm-builds/"
                        "llvm-{match}-ubuntu-arm64.tar.gz")
    assert llvm.sha256 is None  # none is published: trust on first use
    assert (llvm.matches.source, llvm.matches.file, llvm.matches.chars) == ("flagtree", "cmake/llvm-hash.txt", 8)
    assert llvm.version_file == "version.txt"


def test_the_twelve_links_match_flagtrees_script(recipe) -> None:
    assert recipe.links.root == "flagtree"
    assert [(link.path, link.target) for link in recipe.links.entries] == FACTS_LINKS


def test_every_link_target_lands_in_the_flagtree_cpu_checkout_or_the_backend(recipe) -> None:
    for link in recipe.links.entries:
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(link.path), link.target))
        assert resolved.startswith(("third_party/triton-cpu/", "third_party/cpu/language/cpu")), resolved


def test_build_environment_encodes_the_traps(recipe) -> None:
    env = recipe.build.env.set
    assert env["FLAGTREE_BACKEND"] == "cpu"
    assert env["TRITON_BUILD_PROTON"] == "OFF"
    cmake = recipe.build.cmake  # appended to TRITON_APPEND_CMAKE_ARGS, which setup.py hands to CMake
    assert (cmake.args_env, cmake.define) == ("TRITON_APPEND_CMAKE_ARGS",
                                              {"CMAKE_INSTALL_PREFIX": "{home}/.flagtree_install"})
    assert "TRITON_APPEND_CMAKE_ARGS" in recipe.build.env.unset  # an inherited value does not reach CMake
    nvidia = ["TRITON_PTXAS_PATH", "TRITON_CUOBJDUMP_PATH", "TRITON_NVDISASM_PATH", "TRITON_CUDACRT_PATH",
              "TRITON_CUDART_PATH", "TRITON_CUPTI_INCLUDE_PATH", "TRITON_CUPTI_LIB_PATH"]
    assert all(env[name] == "{empty_dir}" for name in nvidia)
    assert recipe.build.offline_env.set["TRITON_OFFLINE_BUILD"] == "1"  # not "ON"
    assert {"LLVM_*", "TRITON_OFFLINE_BUILD"} <= set(recipe.build.env.unset)  # the guide's stale exports
    assert [(c.command, c.set) for c in recipe.build.env.if_command] == [
        ("ccache", {"TRITON_BUILD_WITH_CCACHE": "true"})]
    assert recipe.build.argv[1:] == ("-m", "pip", "install", "-e", "python/", "--no-build-isolation", "-v")
    assert recipe.runtime.env.set["FLAGTREE_BACKEND"] == "cpu"
    assert recipe.runtime.env.set["FLAGGEMS_VENDOR"] == "arm"
    assert recipe.runtime.only_with == {"FLAGGEMS_VENDOR": "flag_gems"}


def test_prerequisites_are_split_into_build_and_runtime(recipe) -> None:
    build = [r.requirement for r in recipe.python.build]
    assert build == ["setuptools>=40.8.0", "wheel", "pybind11>=2.13.1", "ninja>=1.11.1", "cmake>=3.18"]
    torch = recipe.python.runtime[0]
    assert (torch.requirement, torch.index_url) == ("torch==2.10.0+cpu", "https://download.pytorch.org/whl/cpu")


def test_platform_and_validation_expectations(recipe) -> None:
    assert recipe.platform.host.arch == ("aarch64",)
    assert recipe.platform.target.arch is None  # native: the products run where they are built
    assert set(recipe.platform.target.cpu_features) >= {"sve2", "i8mm", "bf16"}
    assert recipe.platform.target.sve_vector_bits == 128
    [compiler] = recipe.platform.host.requires.compilers
    assert compiler.min == {"gcc": 12, "clang": 14} and compiler.flags == ("-march=armv9-a+sve2+i8mm+bf16",)
    checks = {c.uses: c for c in recipe.checks}
    assert list(checks) == ["flagtree/backend", "flagtree/tle-rms-norm", "flagtree/vector-add", "flagtree/softmax",
                            "flagtree/decode-e2e"]
    backend = checks["flagtree/backend"].with_
    assert set(backend["builder_methods"]) == FACTS_BUILDER_METHODS
    assert backend["triton_version"] == "==3.3.*"
    rms = checks["flagtree/tle-rms-norm"].with_
    assert (rms["dtype"], rms["dim"], rms["eps"]) == ("bfloat16", 128, 1e-6)
    assert rms["max_error"] >= 0.0143  # the FEP's clean run must pass
    assert checks["flagtree/decode-e2e"].required is False


def test_resolved_for_an_ubuntu_arm_board(recipe, tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    environ = {"HOME": "/home/edge"}
    chosen = select_variants(recipe, ARM_BOARD.os_id, ARM_BOARD.arch)
    # the value sync reads from FlagTree's cmake/llvm-hash.txt (source_reads) fills in {match}
    resolved = resolve(chosen, ws.root, placeholder_values(chosen, ws, ARM_BOARD, environ), reads=READ)
    env = resolved.build.env.set
    assert resolved.build.cwd == str(ws.root / "FlagTree")
    assert resolved.build.argv[0] == str(ws.root / ".venv/bin/python")
    assert env["LLVM_SYSPATH"] == "/home/edge/.triton/llvm/llvm-a66376b0-ubuntu-arm64"
    assert resolved.build.cmake.define["CMAKE_INSTALL_PREFIX"] == "/home/edge/.flagtree_install"
    assert env["TRITON_PTXAS_PATH"] == str(ws.state_dir / "empty")
    assert env["MAX_JOBS"] == "10"  # 12 cores, 20 GiB at 2 GB per job
    assert env["TRITON_PARALLEL_LINK_JOBS"] == "5"  # 20 GiB at 4 GB per link job


def test_almalinux_gets_the_almalinux_tarball(recipe, tmp_path: Path) -> None:
    chosen = select_variants(recipe, "almalinux", "aarch64")
    assert chosen.artifacts["llvm"].url.endswith("/llvm-{match}-almalinux-arm64.tar.gz")
    ws = Workspace(tmp_path)
    host = HostFacts("linux", "aarch64", "almalinux", "9.4", "AlmaLinux", 4, None, None)
    values = placeholder_values(chosen, ws, host, {"HOME": "/h", "TRITON_HOME": "/t"})
    resolved = resolve(chosen, ws.root, values, reads=READ)
    assert resolved.build.env.set["LLVM_SYSPATH"] == "/t/.triton/llvm/llvm-a66376b0-almalinux-arm64"
    assert resolved.artifacts["llvm"].url.endswith("/llvm-a66376b0-almalinux-arm64.tar.gz")
    unread = resolve(chosen, ws.root, values)  # before sync: the placeholder stays as the recipe writes it
    assert unread.artifacts["llvm"].path == "/t/.triton/llvm/llvm-{match}-almalinux-arm64"
