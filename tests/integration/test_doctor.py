"""`flagtree-cpu doctor` on this machine, its workspace, its Python and real ELF files."""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import sys
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.doctor import DOCTOR_SCHEMA
from flagtree_cpu_build.extract import write_markers
from tests.support.cli import Workspace, new_workspace
from tests.support.envelope import result_of
from tests.support.fetching import PATH_SET
from tests.support.gitworld import GitWorld
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import TOP, llvm_tarball
from tests.support.venvs import build_venv, tiny_wheel

LLVM_URL = f"https://oaitriton.blob.core.windows.net/public/llvm-builds/{TOP}.tar.gz"


def doctor(*args: str) -> Result:
    return CliRunner().invoke(app, ["doctor", *args])


def findings(result: Result) -> dict[str, dict]:
    return {f["id"]: f for f in result_of(result.stdout)["checks"]}


def test_doctor_on_this_machine(tmp_path: Path) -> None:
    result = doctor("--json", "--offline", "-w", str(tmp_path / "ws"))  # how fast: bench_doctor
    document = result_of(result.stdout)
    jsonschema.Draft202012Validator(DOCTOR_SCHEMA).validate(document)
    assert result.exit_code == (7 if document["summary"]["fail"] else 0)
    checks = {f["id"]: f for f in document["checks"]}
    supported = platform.machine() == "aarch64"
    assert checks["host.arch"]["status"] == ("ok" if supported else "fail")
    if not supported:
        assert checks["cpu.features"]["status"] == "fail" and checks["cpu.features"]["fix"]
    assert checks["network.hosts"]["status"] == "skip"  # --offline
    for finding in document["checks"]:
        assert finding["status"] in ("ok", "skip") or finding["fix"], finding["id"]


def test_the_human_report_groups_by_area_and_lists_fixes(tmp_path: Path) -> None:
    result = doctor("--offline", "-w", str(tmp_path / "ws"), "--set", "platform.host.arch=[riscv64]")
    assert result.exit_code == 7
    table, out = result.stdout, result.stderr  # the findings are the product (stdout); fixes and summary: stderr
    assert table.index(" host ") < table.index(" cpu ") < table.index(" toolchain ") < table.index(" workspace ")
    assert "✗" in table and "fixes" in out and " 1. ✗ host.arch: " in out
    assert "doctor: " in out and "failed" in out and "doctor: " not in table


def test_list_check_and_schema(tmp_path: Path) -> None:
    listing = doctor("--list", "--json")
    ids = [c["id"] for c in result_of(listing.stdout)["checks"]]
    assert "cpu.topology" in ids and "workspace.links" in ids
    one = doctor("--json", "--check", "toolchain.git", "-w", str(tmp_path / "ws"))
    assert [f["id"] for f in result_of(one.stdout)["checks"]] == ["toolchain.git"]
    assert one.exit_code == 0
    typo = doctor("--check", "cpu.featurs")
    assert typo.exit_code == 2 and "did you mean 'cpu.features'" in typo.stderr
    schema = json.loads(doctor("--schema").stdout)
    assert schema == DOCTOR_SCHEMA


def test_network_hosts_are_probed(tmp_path: Path, http_server: LoopbackHTTPServer, world: GitWorld) -> None:
    # sources reach the git world through insteadOf (local paths: nothing to probe); the artifact is served
    url = http_server.serve(f"/llvm-builds/{TOP}.tar.gz", b"x")
    good = doctor("--json", "--check", "network.hosts", "--set", f"artifacts.llvm.url={url}")
    finding = findings(good)["network.hosts"]
    assert finding["status"] == "ok", finding
    assert f"127.0.0.1:{url.split(':')[2].split('/')[0]}" in finding["detail"]
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: connections are refused
        bad = doctor("--json", "--check", "network.hosts", "--set",
                     f"artifacts.llvm.url=http://127.0.0.1:{port}/llvm-builds/{TOP}.tar.gz")
    finding = findings(bad)["network.hosts"]
    assert bad.exit_code == 7 and finding["status"] == "fail"
    assert "ConnectionRefusedError" in finding["detail"] and "--mirror" in finding["fix"]


def test_a_reachable_mirror_makes_the_artifact_reachable(http_server: LoopbackHTTPServer,
                                                          github_redirect: GitWorld, refused_port: int,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    original = f"http://127.0.0.1:{refused_port}/public/"
    mirror = http_server.serve(f"/triton/llvm-builds/{TOP}.tar.gz", b"x").split("/llvm-builds/")[0] + "/"
    url = f"artifacts.llvm.url={original}llvm-builds/{TOP}.tar.gz"
    alone = doctor("--json", "--check", "network.hosts", "--set", url)
    assert alone.exit_code == 7 and findings(alone)["network.hosts"]["status"] == "fail"
    for via in (["--mirror", f"{original}={mirror}"], []):  # the option, then FLAGTREE_CPU_MIRRORS
        if not via:
            monkeypatch.setenv("FLAGTREE_CPU_MIRRORS", f"{original}={mirror}")
        result = doctor("--json", "--check", "network.hosts", "--set", url, *via)
        finding = findings(result)["network.hosts"]
        assert result.exit_code == 0 and finding["status"] == "ok", finding
        assert f"artifacts.llvm via mirror {http_server.base_url[len('http://'):]}" in finding["detail"]
    bad = doctor("--check", "network.hosts", "--mirror", "no-equals-sign")
    assert bad.exit_code == 2 and "PREFIX=REPLACEMENT" in bad.stderr


def test_a_local_mirror_counts_when_its_file_is_there(tmp_path: Path, github_redirect: GitWorld,
                                                       refused_port: int) -> None:
    original = f"http://127.0.0.1:{refused_port}/public/"
    url = f"artifacts.llvm.url={original}llvm-builds/{TOP}.tar.gz"
    folder = tmp_path / "usb-stick"
    (folder / "llvm-builds").mkdir(parents=True)
    for replacement in (str(folder) + "/", folder.as_uri() + "/"):  # a folder, and a file:// URL
        empty = findings(doctor("--json", "--check", "network.hosts", "--set", url, "--mirror",
                                f"{original}={replacement}"))["network.hosts"]
        assert empty["status"] == "fail" and "no such file" in empty["detail"]
        (folder / "llvm-builds" / f"{TOP}.tar.gz").write_bytes(b"x")
        there = doctor("--json", "--check", "network.hosts", "--set", url, "--mirror", f"{original}={replacement}")
        finding = findings(there)["network.hosts"]
        assert there.exit_code == 0 and finding["status"] == "ok", finding
        assert f"local file {folder}/llvm-builds/{TOP}.tar.gz" in finding["detail"]
        (folder / "llvm-builds" / f"{TOP}.tar.gz").unlink()


def test_a_dead_mirror_in_front_of_a_live_host_is_a_warning(http_server: LoopbackHTTPServer,
                                                             github_redirect: GitWorld, refused_port: int) -> None:
    url = http_server.serve(f"/llvm-builds/{TOP}.tar.gz", b"x")
    dead = f"http://127.0.0.1:{refused_port}/"
    result = doctor("--json", "--check", "network.hosts", "--set", f"artifacts.llvm.url={url}",
                    "--mirror", f"{http_server.base_url}/={dead}")
    finding = findings(result)["network.hosts"]
    assert result.exit_code == 0 and finding["status"] == "warn", finding
    assert "ConnectionRefusedError" in finding["detail"]
    assert f"fall back to {http_server.base_url[len('http://'):]}" in finding["detail"]
    assert "--mirror" in finding["fix"]


# --- the workspace --------------------------------------------------------------------------------------


@pytest.fixture
def synced(world: GitWorld, tmp_path: Path) -> Workspace:
    ws = new_workspace(world, tmp_path / "ws", always_set=(f"artifacts.llvm.url={LLVM_URL}",))
    tarball = tmp_path / f"{TOP}.tar.gz"
    tarball.write_bytes(llvm_tarball().data)
    for step in (("sync",), ("link",), ("fetch", "--offline", "--from", str(tarball))):
        result = ws.run(*step)
        assert result.exit_code == 0, (step, result.stderr)
    return ws


def tree_state(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and link under root with its size and mtime: doctor must change none of them."""
    state = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            info = path.lstat()
            state[str(path)] = (info.st_size, info.st_mtime_ns)
    return state


WORKSPACE_TREES = ("--check", "workspace.sources", "--check", "workspace.artifacts", "--check", "workspace.build")


def test_a_workdir_before_setup_is_not_a_failure(tmp_path: Path) -> None:
    # the folder exists (made by hand, or --workdir .), but nothing was ever set up in it
    (tmp_path / "ws").mkdir()
    result = doctor("--json", *WORKSPACE_TREES, "-w", str(tmp_path / "ws"))
    assert result.exit_code == 0, result.stdout
    for finding in findings(result).values():
        assert finding["status"] == "skip", finding
        assert "not set up yet" in finding["detail"] and "flagtree-cpu setup" in finding["detail"]


def test_a_set_up_workspace_without_its_trees_fails(tmp_path: Path) -> None:
    (tmp_path / "ws" / ".flagtree-cpu").mkdir(parents=True)  # what every command that changes a workspace makes
    result = doctor("--json", *WORKSPACE_TREES, "-w", str(tmp_path / "ws"))
    checks = findings(result)
    assert result.exit_code == 7
    ws = tmp_path / "ws"  # each fix carries the workspace (-w), so it works from any folder
    assert checks["workspace.sources"]["status"] == "fail" and checks["workspace.sources"]["fix"] == \
        f"flagtree-cpu -w {ws} sync"
    assert "not checked out" in checks["workspace.sources"]["detail"]
    artifacts = checks["workspace.artifacts"]
    assert artifacts["status"] == "fail" and artifacts["fix"] == f"flagtree-cpu -w {ws} fetch"
    assert checks["workspace.build"]["status"] == "skip" and checks["workspace.build"]["detail"] == "no build yet"


def test_workspace_checks_are_read_only(synced: Workspace) -> None:
    (synced.flagtree / "README.md").write_text("a local edit\n")  # makes git status want to refresh its index
    before = tree_state(synced.root)
    llvm_before = tree_state(Path(os.environ["HOME"]) / ".triton")
    result = synced.run("doctor", "--json", "--offline")
    checks = findings(result)
    assert checks["workspace.sources"]["status"] == "warn" and "local changes" in checks["workspace.sources"]["detail"]
    assert checks["workspace.links"]["status"] == "ok"
    assert checks["workspace.artifacts"]["status"] == "ok"
    assert checks["workspace.build"]["status"] == "skip"
    assert tree_state(synced.root) == before  # nothing written, not even .git/index
    assert tree_state(Path(os.environ["HOME"]) / ".triton") == llvm_before


def test_a_damaged_lock_file_is_a_failed_check_with_its_fix_not_a_bug_report(synced: Workspace) -> None:
    """The workspace checks read the stages' plans, which read the lock: its damage is named, with the way out,
    and the file is left as it was."""
    synced.lock_file.write_text("sources: [unclosed\n")
    before = synced.lock_file.read_bytes()
    result = synced.run("doctor", "--json", "--offline")
    sources = findings(result)["workspace.sources"]
    assert sources["status"] == "fail" and str(synced.lock_file) in sources["detail"], sources
    assert "bug" not in sources["detail"] + (sources["fix"] or "")
    assert f"flagtree-cpu -w {synced.root} lock" in sources["fix"]
    assert synced.lock_file.read_bytes() == before


def test_broken_workspace_is_reported_with_the_commands(synced: Workspace) -> None:
    (synced.flagtree / "third_party/sleef").unlink()
    tip = synced.world["flagtree"].commits["tip"]
    result = synced.run("doctor", "--json", "--offline", sets=(f"sources.flagtree.commit={tip}",))
    sources, links = findings(result)["workspace.sources"], findings(result)["workspace.links"]
    assert sources["status"] == "fail" and sources["fix"] == f"flagtree-cpu -w {synced.root} sync"
    assert links["status"] == "fail" and "third_party/sleef (create)" in links["detail"]
    assert links["fix"].startswith(f"flagtree-cpu -w {synced.root} link")


def test_conflicting_and_missing_environment(synced: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLVM_SYSPATH", "/opt/old-llvm")
    monkeypatch.setenv("TRITON_OFFLINE_BUILD", "ON")
    checks = findings(synced.run("doctor", "--json", "--offline"))
    assert checks["workspace.build-env"]["status"] == "warn"
    assert checks["workspace.build-env"]["fix"] == "unset LLVM_SYSPATH TRITON_OFFLINE_BUILD"
    assert checks["workspace.runtime-env"]["status"] == "warn"
    assert "junk at end of line" in checks["workspace.runtime-env"]["detail"]
    monkeypatch.setenv("FLAGTREE_BACKEND", "cpu")
    assert findings(synced.run("doctor", "--json", "--offline"))["workspace.runtime-env"]["status"] == "ok"


def test_python_checks_in_a_target_venv(synced: Workspace, tmp_path: Path) -> None:
    python = build_venv(tmp_path / "venv", ["pip", "setuptools", "wheel"])  # no pybind11
    checks = findings(synced.run("doctor", "--json", "--offline", "--python", str(python)))
    assert checks["python.version"]["status"] == "ok"
    prerequisites = checks["python.build-prerequisites"]
    assert prerequisites["status"] == "warn" and "missing: pybind11>=2.13.1" in prerequisites["detail"]
    assert prerequisites["fix"].startswith(f"{python} -m pip install")
    runtime = checks["python.runtime-prerequisites"]
    assert runtime["status"] == "warn" and "--index-url https://download.pytorch.org/whl/cpu" in runtime["fix"]
    assert checks["python.installed-elsewhere"]["status"] == "ok"


def test_a_foreign_triton_is_flagged(synced: Workspace, tmp_path: Path) -> None:
    import subprocess

    python = build_venv(tmp_path / "venv", ["pip", "setuptools", "wheel"])
    wheelhouse = tiny_wheel(tmp_path, "triton", "3.2.0").parent

    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-index", "--find-links", str(wheelhouse),
                    "triton"], check=True, capture_output=True)
    result = synced.run("doctor", "--json", "--offline", "--python", str(python))
    finding = findings(result)["python.installed-elsewhere"]
    assert finding["status"] == "warn" and "triton 3.2.0 from elsewhere" in finding["detail"]
    assert finding["fix"].startswith(f"{python} -m pip uninstall -y triton")


# --- the C/C++ runtime, on real ELF files ----------------------------------------------------------------------


def publish_tree_with(binary: bytes, tmp_path: Path) -> None:
    tree = Path(os.environ["HOME"]) / ".triton/llvm" / TOP
    (tree / "bin").mkdir(parents=True)
    (tree / "bin/mlir-tblgen").write_bytes(binary)
    write_markers(tree, url=LLVM_URL, sha256="0" * 64, size=0, version_file="version.txt")


def test_glibc_versions_the_binaries_need_are_provided(tmp_path: Path) -> None:
    publish_tree_with(Path(shutil.which("git")).read_bytes(), tmp_path)
    finding = findings(doctor("--json", "--check", "runtime.glibc", "--set", f"artifacts.llvm.url={LLVM_URL}",
                               "--set", PATH_SET))
    assert finding["runtime.glibc"]["status"] == "ok", finding


def test_a_binary_needing_a_newer_glibc_is_caught(tmp_path: Path) -> None:
    binary = Path(shutil.which("git")).read_bytes()
    needed = sorted({part.decode() for part in __import__("re").findall(rb"GLIBC_2\.\d+(?:\.\d+)?", binary)})
    assert needed, "git should need some GLIBC_2.x version"
    victim = needed[0].encode()
    future = b"GLIBC_9." + b"9" * (len(victim) - len(b"GLIBC_9."))  # same length: the ELF layout is unchanged
    publish_tree_with(binary.replace(victim + b"\0", future + b"\0"), tmp_path)
    result = doctor("--json", "--check", "runtime.glibc", "--set", f"artifacts.llvm.url={LLVM_URL}",
                               "--set", PATH_SET)
    finding = findings(result)["runtime.glibc"]
    assert result.exit_code == 7 and finding["status"] == "fail"
    assert future.decode() in finding["detail"] and "LD_PRELOAD" in finding["fix"]


def test_elf_reader_on_the_systems_own_files() -> None:
    from flagtree_cpu_build.elfinfo import read_versions

    git = read_versions(Path(shutil.which("git")))
    assert git.machine == platform.machine() and any(n.startswith("GLIBC_") for n in git.needs["libc.so.6"])
    libc = next(Path(p) for p in (f"/lib/{platform.machine()}-linux-gnu/libc.so.6", "/lib64/libc.so.6")
                if Path(p).exists())
    assert git.needs["libc.so.6"] <= read_versions(libc).defines
    assert sys.version_info >= (3, 10)


# --- the compiler: the build's, judged by the recipe's rules --------------------------------------------------------


def fake_compiler(tmp_path: Path, banner: str) -> Path:
    script = tmp_path / "fake-c++"
    script.write_text(f"""#!/bin/sh
if [ "$1" = --version ]; then echo '{banner}'; exit 0; fi
for a in "$@"; do case "$a" in -mno-such-flag) echo "error: unrecognized option '$a'" >&2; exit 1;; esac; done
exit 0
""")
    script.chmod(0o755)
    return script


def compiler_finding(tmp_path: Path, data: dict) -> dict:
    import yaml

    path = tmp_path / "compiler.yaml"
    path.write_text(yaml.safe_dump({**data, "name": "compiler"}, sort_keys=False))
    result = doctor("--json", "-r", str(path), "--check", "toolchain.compiler", "-w", str(tmp_path / "ws"))
    return findings(result)["toolchain.compiler"]


def test_the_compiler_is_the_builds_and_judged_by_the_recipes_rules(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import yaml

    from flagtree_cpu_build.recipe.files import find_recipe

    data = yaml.safe_load(find_recipe("flagtree-cpu-arm64").path.read_text())
    data["platform"]["host"]["arch"] = [platform.machine()]  # flags are probed only on a host the recipe builds on
    data["platform"]["host"]["requires"] = {}
    assert compiler_finding(tmp_path, data)["detail"] == "the recipe asks nothing of the compiler"
    compiler = fake_compiler(tmp_path, "g++ (Debian 12.2.0-14) 12.2.0")
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    data["build"]["env"]["set"]["CXX"] = str(compiler)  # the build's CXX wins over the shell's
    data["platform"]["host"]["requires"] = {"compilers": [
        {"min": {"gcc": 13, "clang": 15}, "why": "the project uses C++23", "fix": "apt-get install -y g++-13"}]}
    old = compiler_finding(tmp_path, data)
    assert old["status"] == "fail"
    assert old["detail"] == (f"GCC 12.2.0 ({compiler}) is older than the recipe needs (GCC 13 or Clang 15): the "
                             "project uses C++23")
    assert old["fix"] == ("apt-get install -y g++-13" if os.geteuid() == 0 else "sudo apt-get install -y g++-13")
    data["platform"]["host"]["requires"] = {"compilers": [{"min": {"gcc": 12}, "flags": ["-O2", "-mno-such-flag"]}]}
    rejected = compiler_finding(tmp_path, data)
    assert rejected["status"] == "fail"
    assert rejected["detail"] == "GCC 12.2.0 rejects -mno-such-flag: error: unrecognized option '-mno-such-flag'"
    data["platform"]["host"]["requires"] = {"compilers": [{"min": {"gcc": 12}, "flags": ["-O2"]}]}
    assert compiler_finding(tmp_path, data)["detail"] == f"GCC 12.2.0 ({compiler}) accepts -O2"
    # a recipe for other hosts: its flags are not this machine's business (host.arch says what is wrong)
    data["platform"]["host"]["arch"] = ["riscv64" if platform.machine() != "riscv64" else "s390x"]
    data["platform"]["host"]["requires"] = {"compilers": [{"flags": ["-mno-such-flag"]}]}
    other = compiler_finding(tmp_path, data)
    assert other["status"] == "ok" and "-mno-such-flag is not tried on a" in other["detail"]
