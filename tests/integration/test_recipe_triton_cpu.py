"""The bundled `triton-cpu` recipe (upstream triton-lang/triton-cpu, Triton 3.7) against its loopback world
(tests/support/worlds/triton_cpu.py): `setup` through every stage, the checks passing and failing for the
right reasons, the build failing the way upstream's would without the recipe's variables, `build --offline`
on a fresh workspace, doctor on board snapshots, and the LLVM tarball the host's glibc selects.

The recipe is the bundled file; `--set` changes only what a fixture cannot have (the commit, the stand-ins'
sha256), the Python prerequisites (to what this machine has, so no pip runs) and the disk/memory estimates
(the test machine's, not the subject here). The target venv is made by build_venv in milliseconds."""

from __future__ import annotations

import json
import platform
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.recipe import resolve, select_variants
from flagtree_cpu_build.recipe.files import load_recipe
from flagtree_cpu_build.recipe.placeholder_checks import PLACEHOLDERS
from flagtree_cpu_build.source_reads import read_all
from tests.conftest import REPO_ROOT
from tests.support.envelope import error_of, result_of
from tests.support.hermetic import make_hermetic
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.venvs import PREREQUISITES, TOOLS, build_venv, make_venv
from tests.support.worlds.triton_cpu import (
    BUMP_HASH,
    JSON_URL,
    LLVM_BASE,
    LLVM_DIR,
    Runner,
    TritonCpuWorld,
    build_triton_cpu_world,
    llvm_name,
)

HOSTS = REPO_ROOT / "tests" / "fixtures" / "hosts"
UNREAD = "llvm-{{match.hash}}-{}-{{match.build}}.tar.gz"  # before sync: the values are read from llvm-info.json
SHOWN = "llvm-…-{}-….tar.gz"  # how doctor shows that name: the parts read after sync as …
RUNTIME = "python.runtime=[torch>=2.0, numpy, pytest]"  # what this machine has; the recipe adds the plots'
MACHINE = ("resources.disk=[]", "resources.memory_gb=0")
NVIDIA = ("TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH", "TRITON_CUOBJDUMP_PATH", "TRITON_NVDISASM_PATH",
          "TRITON_CUDACRT_PATH", "TRITON_CUDART_PATH", "TRITON_CUPTI_INCLUDE_PATH", "TRITON_CUPTI_LIB_PATH",
          "TRITON_CUPTI_LIB_BLACKWELL_PATH")
CHECKS = ["prerequisites", "triton-version", "tutorial-vector-add", "pytest-core-empty-kernels"]


def host_suffix() -> str:
    """The tarball python/build_helpers.py picks on this machine (its rule, written out independently)."""
    machine = platform.machine()
    if machine == "aarch64":
        return "almalinux-arm64" if 'ID="almalinux"' in Path("/etc/os-release").read_text() else "ubuntu-arm64"
    major, minor = map(int, platform.libc_ver()[1].split(".")[:2])
    return "ubuntu-x64" if major * 100 + minor > 228 else "almalinux-x64"


@dataclass
class Setup:
    world: TritonCpuWorld
    ws: Runner
    python: Path
    triton_home: Path
    record: Path
    result: Result

    def records(self) -> list[dict]:
        return [json.loads(line) for line in self.record.read_text().splitlines()] if self.record.exists() else []

    def builds(self) -> list[dict]:
        return [r for r in self.records() if {"editable_wheel", "develop", "build_ext"} & set(r["argv"][1:])]


def env_for(mp: pytest.MonkeyPatch, world: TritonCpuWorld, triton_home: Path, record: Path) -> None:
    mp.setenv("GIT_CONFIG_GLOBAL", str(world.gitconfig))
    mp.setenv("TRITON_HOME", str(triton_home))
    mp.setenv("FIXTURE_BUILD_RECORD", str(record))


@pytest.fixture(scope="module")
def done(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    """One `setup` of the bundled recipe on the world; the tests below read what it left."""
    root = tmp_path_factory.mktemp("triton-cpu")
    (root / "home").mkdir()
    server = LoopbackHTTPServer()
    try:
        with pytest.MonkeyPatch.context() as mp:
            make_hermetic(mp, root / "home")
            world = build_triton_cpu_world(root / "world", server)
            env_for(mp, world, root / "triton-home", root / "build-record.jsonl")
            python = build_venv(root / "venv", [*TOOLS, "torch", "numpy", "pytest"])
            ws = Runner(world, root / "ws", always_set=(PREREQUISITES, RUNTIME, *MACHINE))
            result = ws.run("setup", "--python", str(python), *ws.mirrored(), "--json")
            yield Setup(world, ws, python, root / "triton-home", root / "build-record.jsonl", result)
    finally:
        server.close()


@pytest.fixture
def here(done: Setup, monkeypatch: pytest.MonkeyPatch) -> Setup:
    """The module's setup, with its git redirect, TRITON_HOME and build record in this test's environment."""
    env_for(monkeypatch, done.world, done.triton_home, done.record)
    return done


def test_setup_syncs_fetches_builds_at_the_root_and_validates(here: Setup) -> None:
    assert here.result.exit_code == 0, here.result.stderr
    report = result_of(here.result.stdout)
    assert {s["stage"]: s["status"] for s in report["stages"]} == {
        "preflight": "ok", "sources": "created", "artifacts": "created", "links": "skipped", "python": "ok",
        "build": "created", "validate": "created"}, report["stages"]
    # the pinned commit, and sleef at the gitlink (not sleef's newer main)
    assert here.ws.head(here.ws.checkout) == here.world.commits["triton-cpu"]
    assert here.ws.head(here.ws.checkout / "third_party" / "sleef") == here.world.commits["sleef-pinned"]
    # the LLVM of this host and nlohmann json, where build_helpers.py keeps them, version.txt = the real URL
    name = llvm_name(host_suffix())
    llvm = here.triton_home / ".triton" / "llvm" / name
    assert (llvm / "lib" / "cmake" / "mlir" / "MLIRConfig.cmake").is_file()
    assert (llvm / "version.txt").read_text() == f"{LLVM_BASE}public/llvm-builds/{name}.tar.gz"
    json_tree = here.triton_home / ".triton" / "json"
    assert (json_tree / "include" / "nlohmann" / "json.hpp").is_file()
    assert (json_tree / "version.txt").read_text() == JSON_URL
    # nothing else was downloaded: one tarball and the zip, from the mirror
    assert sorted(here.world.download_requests()) == sorted([f"{LLVM_DIR}{name}.tar.gz",
                                                             "/nlohmann/json/releases/download/v3.11.3/include.zip"])
    # one build, at the repository root, with upstream's variables (the fixture setup.py would have
    # "downloaded" or "cloned" without any of them and failed)
    [build] = here.builds()
    assert build["cwd"] == str(here.ws.checkout)
    assert build["executable"] == str(here.python)
    env = build["env"]
    assert env["LLVM_SYSPATH"] == str(llvm) and env["JSON_SYSPATH"] == str(json_tree)
    assert env["TRITON_APPEND_CMAKE_ARGS"] == "-DTRITON_BUILD_UT=OFF"
    assert env["TRITON_BUILD_PROTON"] == "OFF"
    empty = here.ws.root / ".flagtree-cpu" / "empty"
    assert {env[name] for name in NVIDIA} == {str(empty)} and not list(empty.iterdir())
    assert "TRITON_OFFLINE_BUILD" not in env and "PIP_NO_INDEX" not in env
    assert (here.ws.checkout / "python" / "triton" / "_C" / "libtriton.so").is_file()
    # the three checks ran with the run-time environment and passed
    validation = report["validation"]
    assert validation["ok"] is True, validation
    found = {r["kernel"]: r for r in validation["results"]}
    assert [r["kernel"] for r in validation["results"]] == CHECKS
    assert {k: r["status"] for k, r in found.items()} == dict.fromkeys(CHECKS, "pass")
    assert found["pytest-core-empty-kernels"]["figure"] == "13 passed, 2 deselected"  # -m cpu, -k
    assert found["triton-version"]["figure"] == "triton 3.7.0"


def test_checks_fail_for_the_right_reasons(here: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    """A miscompiled kernel changes the tutorial's printed difference; one broken dtype changes pytest's counts."""
    monkeypatch.setenv("FIXTURE_TRITON_CPU_MODE", "wrong-numbers")
    monkeypatch.setenv("FIXTURE_TRITON_CPU_BROKEN", "bfloat16")
    lock_before = (here.ws.root / ".flagtree-cpu").joinpath("lock.yaml").read_bytes()
    result = here.ws.run("validate", "--python", str(here.python), "--json")
    assert result.exit_code == 6, result.stderr
    found = {r["kernel"]: r for r in result_of(result.stdout)["results"]}
    assert found["triton-version"]["status"] == "pass"
    tutorial = found["tutorial-vector-add"]
    assert tutorial["status"] == "fail"
    assert tutorial["message"].startswith("no output matches /The maximum difference between torch-cpu and "
                                          "triton-cpu is 0\\.0$/"), tutorial["message"]
    assert "is 0.5" in Path(tutorial["log"]).read_text()
    counts = found["pytest-core-empty-kernels"]
    assert counts["status"] == "fail"
    assert counts["message"] == ("exit status 1, expected 0; pytest counts passed=13, failed=0 expected, "
                                 "saw passed=12, failed=1"), counts
    assert "empty kernel for bfloat16 did not compile" in Path(counts["log"]).read_text()
    assert (here.ws.root / ".flagtree-cpu").joinpath("lock.yaml").read_bytes() == lock_before


@pytest.mark.parametrize(("change", "signature", "said"), [
    ("build.cmake=null", "googletest-clone", "TRITON_BUILD_UT=OFF"),
    ("build.env.set.TRITON_CUPTI_LIB_BLACKWELL_PATH=", "nvidia-download", "it sets all nine"),
], ids=["googletest", "nvidia"])
def test_without_the_recipes_variables_the_build_fails_as_upstreams_would(
        here: Setup, tmp_path: Path, change: str, signature: str, said: str) -> None:
    ws = Runner(here.world, tmp_path / "ws", always_set=(PREREQUISITES, RUNTIME, *MACHINE))
    assert ws.run("sync").exit_code == 0
    python = build_venv(tmp_path / "venv", TOOLS)
    before = len(here.records())
    result = ws.run("build", "--python", str(python), "--json", sets=(change,))
    assert result.exit_code == 5, result.stderr
    error = error_of(result.stdout)
    assert error["diagnosis"]["signature"] == signature, error
    assert said in error["fix"], error
    assert len(here.records()) > before  # the fixture setup.py ran and stopped where upstream's would


def test_an_llvm_bump_upstream_is_followed_from_llvm_info_json(here: Setup, tmp_path: Path) -> None:
    """An LLVM bump upstream: cmake/llvm-info.json names another hash, build number and sha256s. The recipe reads
    them after the clone (no hand-copied value to update), downloads that tarball, verifies it against the sha256
    the file lists, and the lock records each value read."""
    monkeypatch_home = tmp_path / "triton-home"
    ws = Runner(here.world, tmp_path / "ws", always_set=(PREREQUISITES, RUNTIME, *MACHINE))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITON_HOME", str(monkeypatch_home))
        result = ws.run("setup", "--skip-build", *ws.mirrored(),
                        sets=(f"sources.triton-cpu.commit={here.world.commits['llvm-bump']}",))
    assert result.exit_code == 0, result.stderr
    name = llvm_name(host_suffix(), bump=True)
    assert (monkeypatch_home / ".triton/llvm" / name / "version.txt").read_text() == \
        f"{LLVM_BASE}public/llvm-builds/{name}.tar.gz"
    lock = yaml.safe_load((ws.root / ".flagtree-cpu/lock.yaml").read_text())
    assert lock["artifacts"]["llvm"]["sha256"] == here.world.tarballs[f"{host_suffix()}-bump"].sha256
    reads = {key: entry["value"] for key, entry in lock["reads"].items()}
    assert reads["artifacts.llvm.match.hash"] == BUMP_HASH[:8] and reads["artifacts.llvm.match.build"] == "3"
    assert lock["reads"]["artifacts.llvm.match.hash"]["commit"] == here.world.commits["llvm-bump"]
    assert reads["artifacts.json.match"] == "v3.11.3"


def test_offline_build_on_a_fresh_workspace_lists_every_missing_input(here: Setup, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_HOME", str(tmp_path / "new-user"))  # nothing downloaded yet either
    bare = make_venv(tmp_path / "bare-venv", with_pip=False)  # none of the build prerequisites
    ws = Runner(here.world, tmp_path / "ws")  # the recipe's own prerequisites
    requests, records = len(here.world.server.requests), len(here.records())
    result = ws.run("build", "--offline", "--python", str(bare))
    assert result.exit_code == 5, result.stderr
    text = result.stderr
    assert "4 inputs of an offline build are missing; nothing was run" in text
    assert f"source triton-cpu: not checked out at {tmp_path}/ws/triton-cpu — run `flagtree-cpu sync`" in text
    # the LLVM's name is read from the checkout that is not there yet
    assert "artifact llvm: read from triton-cpu's cmake/llvm-info.json after sync — run `flagtree-cpu sync`, then " \
           "`flagtree-cpu fetch`" in text
    assert "artifact json: read from triton-cpu's cmake/json-version.txt after sync" in text
    assert "pybind11>=2.13.1: missing" in text and "lit: missing" in text
    assert len(here.world.server.requests) == requests and len(here.records()) == records
    assert not (tmp_path / "ws" / "triton-cpu").exists()


def doctor(*args: str) -> dict[str, dict]:
    result = CliRunner().invoke(app, ["--recipe", "triton-cpu", "doctor", "--json", "--offline", *args])
    return {f["id"]: f for f in result_of(result.stdout)["checks"]}


def test_doctor_gives_x86_64_no_armv9_failure_and_almalinux_aarch64_its_tarball() -> None:
    debian = doctor("--sysroot", str(HOSTS / "x86_64-debian"))
    assert debian["host.arch"]["status"] == "ok" and debian["host.arch"]["detail"].startswith("x86_64")
    assert debian["cpu.features"]["status"] == "ok", debian["cpu.features"]
    assert "no particular CPU features" in debian["cpu.features"]["detail"]
    assert [f for f in debian.values() if f["status"] == "fail"] == []
    assert not [f for f in debian.values() if "armv9" in json.dumps(f).lower()]
    assert SHOWN.format("ubuntu-x64") in debian["host.os"]["detail"]
    alma = doctor("--sysroot", str(HOSTS / "almalinux-9-aarch64"))
    assert alma["host.arch"]["status"] == "ok"
    assert SHOWN.format("almalinux-arm64") in alma["host.os"]["detail"]
    assert "llvm: the recipe's variant for almalinux" in alma["host.os"]["detail"]


@pytest.mark.parametrize(("os_id", "arch", "glibc", "suffix"), [
    ("ubuntu", "x86_64", "2.35", "ubuntu-x64"),
    ("almalinux", "x86_64", "2.34", "ubuntu-x64"),  # AlmaLinux 9: the glibc decides on x86_64, not the name
    ("almalinux", "x86_64", "2.28", "almalinux-x64"),  # AlmaLinux 8 / manylinux_2_28: vglibc 228 is not > 228
    ("centos", "x86_64", "2.17", "almalinux-x64"),
    ("debian", "x86_64", None, "ubuntu-x64"),  # glibc unknown (a snapshot): the default
    ("almalinux", "aarch64", "2.34", "almalinux-arm64"),  # aarch64: the distribution decides
    ("ubuntu", "aarch64", "2.17", "ubuntu-arm64"),  # ... and no glibc rule applies
], ids=lambda v: str(v))
def test_the_llvm_tarball_follows_build_helpers_rule(os_id: str, arch: str, glibc: str | None, suffix: str,
                                                     tmp_path: Path) -> None:
    """The suffix from the host, the hash, build number and sha256 from upstream's cmake/llvm-info.json (the
    fixture holds the real file of the pinned commit)."""

    recipe = select_variants(load_recipe("triton-cpu"), os_id, arch, glibc)
    llvm = recipe.artifacts["llvm"]
    assert llvm.url == f"{LLVM_BASE}public/llvm-builds/{UNREAD.format(suffix)}"
    assert llvm.digest == {"sha256": "{match." + suffix.replace("-", "_") + "}"}
    checkout = tmp_path / "triton-cpu" / "cmake"
    shutil.copytree(REPO_ROOT / "tests/fixtures/projects/triton-cpu/cmake", checkout)
    reads = read_all(recipe, tmp_path, None)
    assert not reads.problems and not reads.waiting
    values = {name: str(tmp_path) for name in PLACEHOLDERS}
    resolved = resolve(recipe, tmp_path, values, {}, reads.by_marker()).artifacts["llvm"]
    assert resolved.url == f"{LLVM_BASE}public/llvm-builds/{llvm_name(suffix)}.tar.gz"
    assert resolved.path.endswith(f"/.triton/llvm/{llvm_name(suffix)}")
    info = json.loads((checkout / "llvm-info.json").read_text())
    assert resolved.digest["sha256"] == info["sha256sum"][suffix]


def test_this_host_resolves_to_the_tarball_its_glibc_selects(tmp_path: Path) -> None:
    """`recipe show` shows the values read from the checkout (here the fixture's file, as sync would leave it)."""
    checkout = tmp_path / "triton-cpu" / "cmake"
    checkout.mkdir(parents=True)
    shutil.copy(REPO_ROOT / "tests/fixtures/projects/triton-cpu/cmake/llvm-info.json", checkout)
    result = CliRunner().invoke(app, ["-w", str(tmp_path), "recipe", "show", "triton-cpu", "--json"])
    assert result.exit_code == 0, result.stderr
    llvm = result_of(result.stdout)["recipe"]["artifacts"]["llvm"]
    assert llvm["url"] == f"{LLVM_BASE}public/llvm-builds/{llvm_name(host_suffix())}.tar.gz"


def test_doctor_on_a_board_snapshot_applies_the_glibc_rule_its_manifest_records(tmp_path: Path) -> None:
    """A snapshot (`doctor --snapshot`) records the board's glibc; an old-glibc x86_64 machine (manylinux_2_28,
    AlmaLinux 8) gets the almalinux-x64 tarball, as build_helpers.py would pick on it."""
    import shutil

    from flagtree_cpu_build.snapshot import MANIFEST_NAME

    board = tmp_path / "x86_64-glibc-2.28"
    shutil.copytree(HOSTS / "x86_64-debian", board)
    (board / MANIFEST_NAME).write_text(json.dumps({"glibc": "2.28", "uname": {"machine": "x86_64"}}))
    old = doctor("--sysroot", str(board))
    assert SHOWN.format("almalinux-x64") in old["host.os"]["detail"], old["host.os"]
    (board / MANIFEST_NAME).write_text(json.dumps({"glibc": "2.36"}))
    assert SHOWN.format("ubuntu-x64") in doctor("--sysroot", str(board))["host.os"]["detail"]
    (board / MANIFEST_NAME).write_text("{damaged")  # says nothing: the default tarball, no crash
    assert SHOWN.format("ubuntu-x64") in doctor("--sysroot", str(board))["host.os"]["detail"]
