"""Host rules a recipe states beyond the architecture (issue 29, the Triton-family survey's gaps): device nodes
named by a glob (`/dev/dri/renderD*`: the render node's number differs per host), the OS release and glibc as
gates that fail doctor like `host.arch`, dnf/yum packages, and distributions that must not be installed."""

from __future__ import annotations

import json
import platform
import shutil
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.snapshot import write_snapshot
from tests.support.envelope import error_of, result_of

HOST = platform.machine()
HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
NO_SUCH = "/dev/flagtree-cpu-test-no-such-node*"


def write_recipe(folder: Path, **extra: Any) -> Path:
    host = {"arch": [HOST], **extra.pop("host", {})}
    data = {"schema_version": 3, "name": "gates", "platform": {"host": host}, "sources": {}, **extra}
    path = folder / "gates.yaml"
    path.write_text(json.dumps(data, indent=1))  # JSON is YAML
    return path


def doctor(folder: Path, recipe: Path, *only: str, sysroot: Path | None = None,
           python: str = sys.executable) -> dict[str, dict[str, Any]]:
    args = ["-w", str(folder / "ws"), "--recipe", str(recipe), "doctor", "--json", "--python", python]
    args += ["--sysroot", str(sysroot)] if sysroot else []
    for check in only:
        args += ["--only", check]
    result = CliRunner().invoke(app, args)
    assert result.exit_code in (0, 7), result.output
    return {f["id"]: f for f in result_of(result.stdout)["checks"]}


# --- device globs ----------------------------------------------------------------------------------------------


def test_a_device_glob_is_met_by_any_one_matching_node(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path, host={"requires": {"devices": [{"path": "/dev/nul*"}]}})
    found = doctor(tmp_path, recipe, "host.devices")["host.devices"]
    assert found["status"] == "ok" and "/dev/null" in found["detail"], found


def test_a_device_glob_that_matches_nothing_fails_naming_the_pattern(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path, host={"requires": {"devices": [
        {"path": NO_SUCH, "why": "the GPU's render node", "fix": "install the GPU driver"}]}})
    found = doctor(tmp_path, recipe, "host.devices")["host.devices"]
    assert found["status"] == "fail", found
    assert f"nothing matches {NO_SUCH}" in found["detail"] and found["fix"].endswith("install the GPU driver")


def test_a_check_needing_a_device_glob_runs_when_one_node_matches_and_is_skipped_otherwise(tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    ran.mkdir()

    def check(name: str, device: str) -> dict[str, Any]:
        return {"name": name, "argv": ["{python}", "-c", f"open({str(ran / name)!r}, 'w').close()"],
                "needs": {"devices": [device]}}

    recipe = write_recipe(tmp_path, checks=[check("any-null", "/dev/nul*"), check("no-gpu", NO_SUCH)])
    result = CliRunner().invoke(app, ["-w", str(tmp_path / "ws"), "--recipe", str(recipe), "validate", "--json",
                                      "--python", sys.executable])
    assert result.exit_code == 0, result.output
    rows = {r["kernel"]: r for r in result_of(result.stdout)["results"]}
    assert rows["any-null"]["status"] == "pass" and rows["no-gpu"]["status"] == "skip"
    assert NO_SUCH in rows["no-gpu"]["message"]
    assert {p.name for p in ran.iterdir()} == {"any-null"}


def board(tmp_path: Path, name: str, *devices: str) -> Path:
    root = tmp_path / name
    shutil.copytree(HOSTS / "x86_64-debian", root)
    for device in devices:
        (root / device).parent.mkdir(parents=True, exist_ok=True)
        (root / device).write_text("")  # a plain file stands in for the node
    return root


def test_a_snapshot_replay_judges_a_device_glob_from_the_recorded_nodes(tmp_path: Path) -> None:
    write_snapshot(tmp_path / "igpu.tgz", board(tmp_path, "igpu", "dev/dri/renderD129"), ask_nvidia_smi=False)
    write_snapshot(tmp_path / "none.tgz", board(tmp_path, "none"), ask_nvidia_smi=False)
    data = {"schema_version": 3, "name": "gates", "platform": {"host": {"arch": ["x86_64"], "requires": {
        "devices": [{"path": "/dev/dri/renderD*"}]}}}, "sources": {}}
    recipe = tmp_path / "gates.yaml"
    recipe.write_text(json.dumps(data))
    found = doctor(tmp_path, recipe, "host.devices", sysroot=tmp_path / "igpu.tgz")["host.devices"]
    assert found["status"] == "ok" and "/dev/dri/renderD129" in found["detail"], found
    found = doctor(tmp_path, recipe, "host.devices", sysroot=tmp_path / "none.tgz")["host.devices"]
    assert found["status"] == "fail" and "nothing matches /dev/dri/renderD*" in found["detail"], found


def test_a_device_glob_that_leaves_dev_is_a_located_problem(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path, host={"requires": {"devices": [{"path": "/dev/../etc/*"}]}})
    result = CliRunner().invoke(app, ["-w", str(tmp_path / "ws"), "--json", "recipe", "validate", str(recipe)])
    assert result.exit_code == 2, result.output
    [problem] = error_of(result.stdout)["problems"]
    assert problem["key"] == "platform.host.requires.devices[0].path"
    assert "'..'" in problem["message"]


# --- python.conflicts ------------------------------------------------------------------------------------------
# typer is installed in the interpreter running these tests: it stands in for intel_extension_for_pytorch


def test_an_installed_conflicting_distribution_fails_doctor_naming_what_to_remove(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path, python={"conflicts": ["Typer", "flagtree-cpu-test-not-installed"]})
    found = doctor(tmp_path, recipe, "python.conflicts")["python.conflicts"]
    assert found["status"] == "fail", found
    assert "typer" in found["detail"].lower() and "must not be installed" in found["detail"]
    assert "not-installed" not in found["detail"]
    assert found["fix"] == f"{sys.executable} -m pip uninstall Typer"


def test_no_conflicting_distribution_installed_is_ok(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path, python={"conflicts": ["flagtree-cpu-test-not-installed"]})
    assert doctor(tmp_path, recipe, "python.conflicts")["python.conflicts"]["status"] == "ok"


def test_build_stops_before_running_when_a_conflicting_distribution_is_installed(tmp_path: Path) -> None:
    marker = tmp_path / "built"
    recipe = write_recipe(tmp_path, python={"conflicts": ["typer"]},
                          build={"cwd": "{workdir}", "argv": ["{python}", "-c", f"open({str(marker)!r}, 'w')"]})
    result = CliRunner().invoke(app, ["-w", str(tmp_path / "ws"), "--recipe", str(recipe), "build", "--json",
                                      "--python", sys.executable])
    assert result.exit_code == 7, result.output
    error = error_of(result.stdout)
    text = json.dumps(error)
    assert "python.conflicts" in text and f"{sys.executable} -m pip uninstall typer" in text
    assert not marker.exists()
    assert metadata.version("typer")  # still installed: the tool never removes a conflict itself


def test_a_conflict_that_is_also_a_prerequisite_is_a_located_problem(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path, python={"build": [{"requirement": "ninja"}], "conflicts": ["Ninja"]})
    result = CliRunner().invoke(app, ["-w", str(tmp_path / "ws"), "--json", "recipe", "validate", str(recipe)])
    assert result.exit_code == 2, result.output
    [problem] = error_of(result.stdout)["problems"]
    assert problem["key"] == "python.conflicts[0]"
    assert "Ninja is also a prerequisite (python.build[0])" in problem["message"]


# --- the OS release and glibc as host gates -------------------------------------------------------------------


def release_root(tmp_path: Path, os_id: str, version: str) -> Path:
    root = board(tmp_path, f"{os_id}-{version}")
    (root / "etc/os-release").write_text(f'ID={os_id}\nPRETTY_NAME="{os_id} {version}"\nVERSION_ID="{version}"\n')
    return root


def x86_recipe(tmp_path: Path, **host: Any) -> Path:
    data = {"schema_version": 3, "name": "gates", "sources": {},
            "platform": {"host": {"arch": ["x86_64"], **host}}}
    recipe = tmp_path / "gates.yaml"
    recipe.write_text(json.dumps(data))
    return recipe


def test_a_host_outside_the_recipes_os_versions_fails_doctor_with_why_and_advice(tmp_path: Path) -> None:
    recipe = x86_recipe(tmp_path, os_version=["22.04", ">=24.04"], why="the driver packages exist for these",
                        advice="use an Ubuntu 22.04 or 24.04 machine")
    old = doctor(tmp_path, recipe, "host.os-version", sysroot=release_root(tmp_path, "ubuntu", "20.04"))
    finding = old["host.os-version"]
    assert finding["status"] == "fail", finding
    assert "ubuntu 20.04" in finding["detail"] and "22.04, >=24.04" in finding["detail"]
    assert "the driver packages exist for these" in finding["detail"]
    assert finding["fix"] == "use an Ubuntu 22.04 or 24.04 machine"
    for version in ("22.04", "24.10"):
        found = doctor(tmp_path, recipe, "host.os-version", sysroot=release_root(tmp_path, "ubuntu", version))
        assert found["host.os-version"]["status"] == "ok", found


def test_a_host_whose_os_release_has_no_version_fails_an_os_version_gate(tmp_path: Path) -> None:
    root = board(tmp_path, "rolling")
    (root / "etc/os-release").write_text("ID=arch\n")
    found = doctor(tmp_path, x86_recipe(tmp_path, os_version=["22.04"]), "host.os-version", sysroot=root)
    assert found["host.os-version"]["status"] == "fail" and "no VERSION_ID" in found["host.os-version"]["detail"]


def test_a_glibc_below_the_recipes_range_fails_doctor_and_stops_build(tmp_path: Path) -> None:
    marker = tmp_path / "built"
    recipe = write_recipe(tmp_path, host={"requires": {"glibc": ">=99.0"}, "advice": "build on AlmaLinux 10"},
                          build={"cwd": "{workdir}", "argv": ["{python}", "-c", f"open({str(marker)!r}, 'w')"]})
    finding = doctor(tmp_path, recipe, "host.glibc")["host.glibc"]
    assert finding["status"] == "fail", finding
    assert "the recipe needs glibc >=99.0" in finding["detail"] and finding["fix"] == "build on AlmaLinux 10"
    result = CliRunner().invoke(app, ["-w", str(tmp_path / "ws"), "--recipe", str(recipe), "build", "--json",
                                      "--python", sys.executable])
    assert result.exit_code == 7, result.output
    assert "host.glibc" in json.dumps(error_of(result.stdout)) and not marker.exists()
    ok_recipe = write_recipe(tmp_path, host={"requires": {"glibc": ">=2.0"}})
    assert doctor(tmp_path, ok_recipe, "host.glibc")["host.glibc"]["status"] == "ok"


def test_a_host_gate_that_is_no_version_range_is_a_located_problem(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path, host={"os_version": ["jammy"], "requires": {"glibc": "2.28+"}})
    result = CliRunner().invoke(app, ["-w", str(tmp_path / "ws"), "--json", "recipe", "validate", str(recipe)])
    assert result.exit_code == 2, result.output
    keys = {p["key"] for p in error_of(result.stdout)["problems"]}
    assert keys == {"platform.host.os_version[0]", "platform.host.requires.glibc"}


# --- dnf/yum packages on RHEL-family hosts --------------------------------------------------------------------

FAKE_RPM = """#!/bin/sh
# rpm -q NAME...: what an AlmaLinux rpm answers when only gcc-c++ is installed
shift
missing=0
for name in "$@"; do
  if [ "$name" = gcc-c++ ]; then echo "gcc-c++-11.4.1-3.el9.x86_64"
  else echo "package $name is not installed"; missing=$((missing+1)); fi
done
exit $missing
"""


def rhel_world(tmp_path: Path, monkeypatch: Any, *commands: str) -> tuple[Any, Path]:
    """A live doctor context whose host says AlmaLinux (ID_LIKE rhel), with a fake rpm (and ``commands``,
    e.g. dnf or yum) first on PATH."""
    import dataclasses

    from flagtree_cpu_build.cpuinfo import read_cpu
    from flagtree_cpu_build.doctor import DoctorContext
    from flagtree_cpu_build.host import read_host
    from flagtree_cpu_build.placeholders import placeholder_values
    from flagtree_cpu_build.recipe import resolve
    from flagtree_cpu_build.recipe.files import load_recipe_file
    from flagtree_cpu_build.stagekit.stage import RunOptions
    from flagtree_cpu_build.workspace import Workspace

    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "rpm").write_text(FAKE_RPM)
    for command in commands:
        (tools / command).write_text("#!/bin/sh\nexit 0\n")
    for tool in tools.iterdir():
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin:/bin")
    recipe_file = write_recipe(tmp_path, system_packages={"apt": ["g++"], "dnf": ["gcc-c++", "libstdc++-static",
                                                                                    "ccache"]})
    host = dataclasses.replace(read_host(), os_id="almalinux", os_id_like=("rhel", "centos", "fedora"))
    ws = Workspace(tmp_path / "ws")
    loaded = load_recipe_file(recipe_file)
    environ = {"HOME": str(tmp_path)}
    recipe = resolve(loaded, ws.root, placeholder_values(loaded, ws, host, environ), environ)
    return DoctorContext(recipe, ws, host, read_cpu(Path("/")), Path("/"), RunOptions(python=Path(sys.executable)),
                         {"HOME": str(tmp_path)}, euid=1000), tools


def test_a_rhel_family_host_checks_the_dnf_list_and_prints_the_dnf_command(tmp_path: Path, monkeypatch: Any) -> None:
    from flagtree_cpu_build.doctor import run_doctor

    c, _ = rhel_world(tmp_path, monkeypatch, "dnf")
    [finding] = run_doctor(c, ("system.packages",)).findings
    assert (finding.status, finding.detail) == ("warn", "2 of 3 missing: libstdc++-static ccache")
    assert finding.fix == "sudo dnf install -y libstdc++-static ccache"


def test_a_rhel_host_without_dnf_is_told_the_yum_command(tmp_path: Path, monkeypatch: Any) -> None:
    from flagtree_cpu_build.stagekit.stage import StageContext
    from flagtree_cpu_build.system_packages import system_packages_action
    from flagtree_cpu_build.ui import UI

    c, _ = rhel_world(tmp_path, monkeypatch, "yum")
    action = system_packages_action(StageContext(c.recipe, c.workspace, c.host, UI(quiet=True)), install=False,
                                    offline=False)
    assert action is not None and action.data == {"missing": ["libstdc++-static", "ccache"]}
    assert "yum install -y libstdc++-static ccache" in action.detail


def test_a_rhel_snapshot_names_the_dnf_list_not_the_apt_one(tmp_path: Path) -> None:
    recipe = x86_recipe(tmp_path)
    data = json.loads(recipe.read_text())
    data["system_packages"] = {"apt": ["g++"], "dnf": ["gcc-c++"]}
    recipe.write_text(json.dumps(data))
    root = release_root(tmp_path, "rocky", "9.4")
    found = doctor(tmp_path, recipe, "system.packages", sysroot=root)["system.packages"]
    assert found["status"] == "skip" and "dnf names: gcc-c++" in found["detail"], found


def test_a_dnf_name_that_reads_as_an_option_is_a_located_problem(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path, system_packages={"dnf": ["gcc-c++", "--nogpgcheck"]})
    result = CliRunner().invoke(app, ["-w", str(tmp_path / "ws"), "--json", "recipe", "validate", str(recipe)])
    assert result.exit_code == 2, result.output
    [problem] = error_of(result.stdout)["problems"]
    assert problem["key"] == "system_packages.dnf[1]" and "is not a package name" in problem["message"]


# --- compiler minimums beyond the major -----------------------------------------------------------------------


def fake_gcc(tmp_path: Path, version: str) -> Path:
    compiler = tmp_path / f"g++-{version}"
    compiler.write_text(f"#!/bin/sh\necho 'g++ (GCC) {version} 20200408 (Red Hat {version}-2)'\n")
    compiler.chmod(0o755)
    return compiler


@pytest.mark.parametrize(("version", "status"), [("9.3.1", "fail"), ("9.4.0", "ok"), ("11.2.1", "ok")])
def test_a_compiler_minimum_with_a_minor_is_judged_against_the_full_version(tmp_path: Path, version: str,
                                                                           status: str) -> None:
    recipe = write_recipe(tmp_path, host={"requires": {"compilers": [
        {"default": str(fake_gcc(tmp_path, version)), "min": {"gcc": "9.4", "clang": 15}}]}})
    found = doctor(tmp_path, recipe, "toolchain.compiler")["toolchain.compiler"]
    assert found["status"] == status, found
    if status == "fail":
        assert f"GCC {version}" in found["detail"] and "GCC 9.4 or Clang 15" in found["detail"]


def test_a_compiler_minimum_that_is_no_version_is_a_located_problem(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path, host={"requires": {"compilers": [{"min": {"gcc": "9.x"}}]}})
    result = CliRunner().invoke(app, ["-w", str(tmp_path / "ws"), "--json", "recipe", "validate", str(recipe)])
    assert result.exit_code == 2, result.output
    [problem] = error_of(result.stdout)["problems"]
    assert problem["key"] == "platform.host.requires.compilers[0].min.gcc"
