"""doctor on snapshots of real machine classes: the right status and the right fix for each check."""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest

from flagtree_cpu_build.cpuinfo import read_cpu
from flagtree_cpu_build.doctor import DOCTOR_SCHEMA, Check, DoctorContext, all_checks, run_doctor
from flagtree_cpu_build.doctor import kit as doctor_module
from flagtree_cpu_build.host import read_host
from flagtree_cpu_build.placeholders import placeholder_values
from flagtree_cpu_build.recipe import resolve, select_variants
from flagtree_cpu_build.recipe.files import load_recipe
from flagtree_cpu_build.stagekit.stage import RunOptions
from flagtree_cpu_build.workspace import Workspace

HOSTS = Path(__file__).resolve().parent.parent / "fixtures" / "hosts"


GOLDEN = Path(__file__).resolve().parent.parent / "fixtures" / "golden-v1"
BUNDLED = "flagtree-cpu-arm64"


def context_for(root: Path, tmp_path: Path, recipe: str = BUNDLED, *, euid: int | None = 1000,
                variant: str | None = None, environ: dict[str, str] | None = None) -> DoctorContext:
    host = read_host(root)
    environ = {"HOME": str(tmp_path), **(environ or {})}
    loaded = select_variants(load_recipe(recipe, variant=variant), host.os_id, host.arch)
    ws = Workspace(tmp_path / "ws")
    resolved = resolve(loaded, ws.root, placeholder_values(loaded, ws, host, environ), environ)
    return DoctorContext(resolved, ws, host, read_cpu(root), root, RunOptions(python=ws.venv_dir / "bin" / "python"),
                         environ, euid=euid)


def report_for(snapshot: str | Path, tmp_path: Path, only: tuple[str, ...] = (), *, euid: int | None = 1000,
               recipe: str = BUNDLED):
    """doctor on a snapshot; fixes as a user who is not root sees them, unless ``euid`` says otherwise."""
    return run_doctor(context_for(HOSTS / snapshot, tmp_path, recipe, euid=euid), only)


def by_id(report) -> dict:
    return {f.id: f for f in report.findings}


def test_big_little_board(tmp_path: Path) -> None:
    f = by_id(report_for("cix-p1-biglittle", tmp_path))
    assert f["host.arch"].status == "ok" and f["cpu.features"].status == "ok"
    assert f["cpu.sve-length"].status == "ok"
    assert f["cpu.topology"].status == "warn"
    assert f["cpu.topology"].fix == "taskset -c 0-1,6-11 python your_program.py"
    assert "8x Cortex-A720 + 4x Cortex-A520" in f["cpu.topology"].detail
    assert f["cpu.governor"].status == "warn" and "echo performance | sudo tee" in f["cpu.governor"].fix
    assert f["system.packages"].status == "warn"
    assert f["system.packages"].fix == "sudo apt-get install -y ccache libomp-dev nlohmann-json3-dev"
    assert f["resources.memory"].status == "ok" and "12 compile jobs and 6 link jobs" in f["resources.memory"].detail


def test_neoverse_v2_server_is_fine(tmp_path: Path) -> None:
    report = report_for("graviton4-neoverse-v2", tmp_path)
    f = by_id(report)
    assert not report.failed
    assert f["cpu.features"].status == "ok" and "4x Neoverse-V2 has asimd, sve2, i8mm, bf16" in f["cpu.features"].detail
    assert f["cpu.topology"].status == "ok" and f["cpu.governor"].status == "skip"
    assert f["system.packages"].status == "ok"


def test_neoverse_v1_lacks_sve2_and_has_256_bit_vectors(tmp_path: Path) -> None:
    f = by_id(report_for("graviton3-neoverse-v1", tmp_path))
    assert f["cpu.features"].status == "fail" and "lacks sve2" in f["cpu.features"].detail
    assert "illegal instruction (SIGILL)" in f["cpu.features"].detail
    assert f["cpu.sve-length"].status == "fail" and "256-bit" in f["cpu.sve-length"].detail
    assert f["cpu.sve-length"].fix.startswith("echo 16 | sudo tee /proc/sys/abi/sve_default_vector_length")


def test_cortex_a76_has_no_sve_at_all(tmp_path: Path) -> None:
    f = by_id(report_for("rpi5-cortex-a76", tmp_path))
    assert f["cpu.features"].status == "fail" and "lacks sve2, i8mm, bf16" in f["cpu.features"].detail
    assert f["cpu.sve-length"].status == "skip"
    assert f["cpu.governor"].status == "warn" and "ondemand" in f["cpu.governor"].detail


def test_x86_host(tmp_path: Path) -> None:
    report = report_for("x86_64-debian", tmp_path)
    f = by_id(report)
    assert report.failed
    assert f["host.arch"].status == "fail" and "this machine is x86_64" in f["host.arch"].detail
    assert f["cpu.features"].status == "fail" and "is an x86_64 CPU" in f["cpu.features"].detail
    assert "the recipe's target needs asimd, sve2, i8mm, bf16" in f["cpu.features"].detail


def test_almalinux_gets_its_own_llvm_and_no_apt_check(tmp_path: Path) -> None:
    f = by_id(report_for("almalinux-9-aarch64", tmp_path))
    # the hash is read from FlagTree's cmake/llvm-hash.txt after sync; the suffix is the host's
    assert "llvm-…-almalinux-arm64.tar.gz" in f["host.os"].detail
    assert "(… is read from the sources' files after sync)" in f["host.os"].detail
    assert "{match" not in f["host.os"].detail
    assert "llvm: the recipe's variant for almalinux" in f["host.os"].detail
    assert f["system.packages"].status == "skip" and "not a Debian/Ubuntu system" in f["system.packages"].detail


def test_local_checks_are_skipped_for_a_snapshot(tmp_path: Path) -> None:
    report = report_for("graviton4-neoverse-v2", tmp_path)
    for finding in report.findings:
        if finding.area in ("toolchain", "python", "network", "workspace", "runtime"):
            assert finding.status == "skip", finding.id


def test_json_validates_against_the_documented_schema(tmp_path: Path) -> None:
    document = report_for("cix-p1-biglittle", tmp_path).to_json()
    jsonschema.Draft202012Validator.check_schema(DOCTOR_SCHEMA)
    jsonschema.Draft202012Validator(DOCTOR_SCHEMA).validate(json.loads(json.dumps(document)))
    assert document["schema"] == "flagtree-cpu/doctor/v1"


def test_every_check_has_a_stable_unique_id() -> None:
    ids = [c.id for c in all_checks()]
    assert len(ids) == len(set(ids)) >= 25
    assert all(i.split(".")[0] in doctor_module.AREAS or i.split(".")[0] == "toolchain" for i in ids)


def test_a_crashing_check_is_reported_not_fatal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(context: DoctorContext):
        raise RuntimeError("boom")

    all_checks()  # register the real ones first
    monkeypatch.setattr(doctor_module, "CHECKS", [*doctor_module.CHECKS, Check("cpu.broken", "cpu", "broken", broken)])
    report = report_for("graviton4-neoverse-v2", tmp_path)
    broken_finding = by_id(report)["cpu.broken"]
    assert broken_finding.status == "fail"
    assert broken_finding.detail == "the check itself failed: RuntimeError: boom"
    assert by_id(report)["cpu.features"].status == "ok"  # the others still ran


def test_only_the_asked_checks_run(tmp_path: Path) -> None:
    report = report_for("cix-p1-biglittle", tmp_path, ("cpu.topology",))
    assert [f.id for f in report.findings] == ["cpu.topology"]


# --- fixes that need root's rights: sudo for a user, none for root ---------------------------------------------


def low_memory_board(tmp_path: Path) -> Path:
    """The Graviton4 snapshot with 4 GiB: below the recipe's 7, so the swap fix appears."""
    import shutil

    root = tmp_path / "low-memory-board"
    shutil.copytree(HOSTS / "graviton4-neoverse-v2", root)
    meminfo = root / "proc/meminfo"
    meminfo.write_text("MemTotal:        4194304 kB\nMemAvailable:    3145728 kB\n")
    return root


@pytest.mark.parametrize("euid, sudo", [(1000, "sudo "), (0, "")])
def test_privileged_fixes_use_sudo_only_when_not_root(tmp_path: Path, euid: int, sudo: str) -> None:
    big_little = by_id(report_for("cix-p1-biglittle", tmp_path, euid=euid))
    assert big_little["system.packages"].fix == f"{sudo}apt-get install -y ccache libomp-dev nlohmann-json3-dev"
    assert f"echo performance | {sudo}tee $g" in big_little["cpu.governor"].fix
    v1 = by_id(report_for("graviton3-neoverse-v1", tmp_path, euid=euid))
    assert v1["cpu.sve-length"].fix.startswith(f"echo 16 | {sudo}tee /proc/sys/abi/sve_default_vector_length")
    memory = by_id(report_for(low_memory_board(tmp_path), tmp_path, euid=euid))["resources.memory"]
    assert memory.status == "warn"
    assert f"({sudo}fallocate -l 8G /swapfile && {sudo}mkswap /swapfile && {sudo}swapon /swapfile)" in memory.fix


def test_no_fix_says_sudo_to_root(tmp_path: Path) -> None:
    boards = [*(p.name for p in sorted(HOSTS.iterdir())), low_memory_board(tmp_path)]
    fixes = [f.fix for board in boards for f in report_for(board, tmp_path, euid=0).findings if f.fix]
    assert fixes and not [fix for fix in fixes if "sudo" in fix]


# the checks whose fix installs a system package (toolchain.build-commands' fix is pip, into the venv)
TOOLCHAIN = ("toolchain.git", "toolchain.compiler", "toolchain.ccache", "toolchain.pkg-config", "toolchain.libraries")


@pytest.mark.parametrize("euid, sudo", [(1000, "sudo "), (0, "")])
def test_toolchain_install_fixes_use_sudo_only_when_not_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             euid: int, sudo: str) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # a bare machine: no git, compiler, cmake, ninja ...
    host = read_host()
    recipe = select_variants(load_recipe("flagtree-cpu-arm64"), host.os_id, host.arch)
    ws = Workspace(tmp_path / "ws")
    resolved = resolve(recipe, ws.root, placeholder_values(recipe, ws, host, {"HOME": str(tmp_path)}))
    python = ws.venv_dir / "bin" / "python"
    context = DoctorContext(resolved, ws, host, read_cpu(), Path("/"), RunOptions(python=python),
                            {"HOME": str(tmp_path), "PATH": str(empty)}, euid=euid)
    findings = run_doctor(context, (*TOOLCHAIN, "toolchain.build-commands")).findings
    assert [f.id for f in findings if f.status == "ok"] == []
    for finding in findings:
        if finding.id == "toolchain.build-commands":  # pip into the venv: no root's rights needed
            assert finding.status == "warn" and "no cmake on PATH" in finding.detail, finding
            assert " -m pip install 'ninja>=1.11.1' 'cmake>=3.18'" in finding.fix and "sudo" not in finding.fix
            continue
        assert f"{sudo}apt-get install -y " in finding.fix, finding
        assert euid != 0 or "sudo" not in finding.fix, finding


# --- the old engine's answers, and recipes without FlagTree's rules ---------------------------------------------

# checks renamed when their FlagTree-specific wording became the recipe's data: old id -> new id
RENAMED = {"toolchain.cmake": "toolchain.build-commands", "toolchain.ninja": "toolchain.build-commands",
           "toolchain.openmp": "toolchain.libraries", "python.foreign-triton": "python.installed-elsewhere",
           "workspace.llvm": "workspace.artifacts"}
# new checks (the old engine had none): a snapshot skips them, or the recipe asks for nothing they check
NEW = {"host.devices", "host.commands", "toolchain.provisioned", "python.preinstalled", "toolchain.compile-cache",
       "toolchain.compile-farm", "toolchain.wheelhouse", "python.conflicts", "host.os-version", "host.glibc",
       "python.installer"}
# details whose words became generic (same status, same facts):
REWORDED = {
    "host.os",  # the AlmaLinux note names the recipe's artifact variant, not FlagTree's setup.py
    "host.arch",  # "builds on" (the host), no longer "builds for": the target may be another arch
    "cpu.features",  # another arch's CPU: "the recipe's target needs ..."; the fix names platform.target.machines
    "resources.memory",  # "N compile jobs and M link jobs", not FlagTree's MAX_JOBS/TRITON_PARALLEL_LINK_JOBS
}


@pytest.mark.parametrize("golden", sorted(GOLDEN.glob("doctor-*.json")), ids=lambda p: p.stem)
def test_the_flagtree_recipe_gives_the_old_engines_answers(golden: Path, tmp_path: Path) -> None:
    old = json.loads(golden.read_text())["checks"]
    new = by_id(report_for(golden.stem.removeprefix("doctor-"), tmp_path))
    assert {RENAMED.get(c["id"], c["id"]) for c in old} | NEW == set(new)
    for check in old:
        finding = new[RENAMED.get(check["id"], check["id"])]
        assert finding.status == check["status"], (check["id"], finding)
        if check["id"] not in REWORDED:
            assert (finding.detail, finding.fix) == (check["detail"], check["fix"]), check["id"]
    for check_id in NEW:
        assert new[check_id].status == "skip", new[check_id]


def bundled_data() -> dict:
    import yaml

    from flagtree_cpu_build.recipe.files import find_recipe

    return yaml.safe_load(find_recipe(BUNDLED).path.read_text())


def write_recipe(tmp_path: Path, name: str, data: dict) -> str:
    import yaml

    data = {**data, "name": name}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


MACHINE = ("host.arch", "cpu.features", "cpu.sve-length")


def test_a_recipe_without_armv9_rules_has_nothing_against_an_x86_host(tmp_path: Path) -> None:
    data = bundled_data()
    data["platform"] = {"host": {"arch": ["x86_64", "aarch64"]}}
    recipe = write_recipe(tmp_path, "plain", data)
    f = by_id(report_for("x86_64-debian", tmp_path, MACHINE, recipe=recipe))
    assert {i: f[i].status for i in MACHINE} == {"host.arch": "ok", "cpu.features": "ok", "cpu.sve-length": "skip"}
    assert f["cpu.features"].detail == "the recipe needs no particular CPU features"


def test_a_cross_recipe_judges_the_host_not_its_cpu(tmp_path: Path) -> None:
    data = bundled_data()
    data["platform"] = {"host": {"arch": ["x86_64"]},
                        "target": {"arch": "riscv64", "cpu_features": ["rvv"], "sve_vector_bits": 128}}
    recipe = write_recipe(tmp_path, "cross", data)
    f = by_id(report_for("x86_64-debian", tmp_path, MACHINE, recipe=recipe))
    assert f["host.arch"].status == "ok"
    assert f["host.arch"].detail == "x86_64, as the recipe requires; the products run on riscv64 (a cross build)"
    for check_id in ("cpu.features", "cpu.sve-length"):
        assert f[check_id].status == "skip"
        assert f[check_id].detail == "the products run on riscv64, not on this x86_64 host"
    # the same recipe on an aarch64 board: a host it does not build on
    board = by_id(report_for("graviton4-neoverse-v2", tmp_path, ("host.arch",), recipe=recipe))["host.arch"]
    assert board.status == "fail" and board.fix == "build on an x86_64 machine"


def toolchain_recipe(tmp_path: Path) -> str:
    """A recipe that builds anywhere and whose `sdk` variant needs a toolkit that is not installed."""
    data = bundled_data()
    data["platform"] = {"host": {"arch": ["x86_64", "aarch64"]}}
    data["resources"] = {}
    data["variant"] = "plain"
    data["variants"] = {
        "plain": {"description": "no toolkit"},
        "sdk": {"description": "needs the vendor SDK", "overlay": {"toolchains": {"vendor-sdk": {
            "path": str(tmp_path / "opt" / "vendor-sdk"), "expect": ["bin/vcc", "include/vendor.h"],
            "why": "the kernels link its runtime", "fix": "install the vendor SDK 8.1"}}}},
    }
    return write_recipe(tmp_path, "sdk", data)


def test_a_missing_toolchain_names_its_path_the_variant_and_the_override(tmp_path: Path) -> None:
    recipe = toolchain_recipe(tmp_path)
    plain = run_doctor(context_for(Path("/"), tmp_path, recipe), ("toolchain.provisioned",)).findings[0]
    assert plain.status == "skip"  # the default variant names no toolkit
    context = context_for(Path("/"), tmp_path, recipe, variant="sdk")
    finding = run_doctor(context, ("toolchain.provisioned",)).findings[0]
    sdk = tmp_path / "opt" / "vendor-sdk"
    assert finding.status == "fail"
    assert finding.detail == (f"toolchain vendor-sdk (recipe variant sdk): missing {sdk}; the kernels link its "
                              "runtime")
    assert finding.fix == ("install the vendor SDK 8.1, or export FLAGTREE_CPU_TOOLCHAIN_VENDOR_SDK=<where vendor-sdk "
                           "is installed on this machine>")
    (sdk / "bin").mkdir(parents=True)
    (sdk / "bin" / "vcc").write_text("")
    finding = run_doctor(context, ("toolchain.provisioned",)).findings[0]
    assert finding.status == "fail" and f"missing {sdk}/include/vendor.h;" in finding.detail
    (sdk / "include").mkdir()
    (sdk / "include" / "vendor.h").write_text("")
    assert run_doctor(context, ("toolchain.provisioned",)).findings[0].status == "ok"
    # the per-host override is where doctor looks
    elsewhere = context_for(Path("/"), tmp_path, recipe, variant="sdk",
                            environ={"FLAGTREE_CPU_TOOLCHAIN_VENDOR_SDK": str(tmp_path / "nowhere")})
    moved = run_doctor(elsewhere, ("toolchain.provisioned",)).findings[0]
    assert moved.status == "fail" and f"missing {tmp_path / 'nowhere'};" in moved.detail


def test_preflight_lists_a_missing_toolchain(tmp_path: Path) -> None:

    from flagtree_cpu_build.errors import DoctorFailed
    from flagtree_cpu_build.preflight import build_only, run_preflight
    from flagtree_cpu_build.stagekit.stage import StageContext
    from flagtree_cpu_build.ui import UI

    assert build_only("toolchain.provisioned") and build_only("host.devices")
    context = context_for(Path("/"), tmp_path, toolchain_recipe(tmp_path), variant="sdk")
    stage = StageContext(context.recipe, context.workspace, context.host, UI(quiet=True))
    options = RunOptions(python=context.options.python, offline=True)
    with pytest.raises(DoctorFailed) as raised:
        run_preflight(stage, options)
    listed = [d for d in raised.value.details if d.startswith("toolchain.provisioned: ")]
    assert listed and str(tmp_path / "opt" / "vendor-sdk") in listed[0] and "(recipe variant sdk)" in listed[0]


# --- what the recipe asks of this machine, checked live --------------------------------------------------------


def live(tmp_path: Path, data: dict, only: tuple[str, ...], name: str = "asks") -> dict:
    recipe = write_recipe(tmp_path, name, data)
    return by_id(run_doctor(context_for(Path("/"), tmp_path, recipe, environ={"PATH": os.environ["PATH"]}), only))


def test_devices_and_commands_come_from_the_recipe(tmp_path: Path) -> None:
    data = bundled_data()
    data["platform"]["host"]["requires"] = {
        "devices": [{"path": "/dev/null"},
                    {"path": "/dev/no-such-accelerator", "why": "the kernels run on it",
                     "fix": "apt-get install -y accel-driver"}],
        "commands": [{"command": "sh"}, {"command": "no-such-command-here", "why": "the build calls it"}],
    }
    data["platform"]["host"]["arch"] = ["x86_64", "aarch64"]
    f = live(tmp_path, data, ("host.devices", "host.commands"))
    assert f["host.devices"].status == "fail"
    assert f["host.devices"].detail == "no /dev/no-such-accelerator (the kernels run on it)"
    assert f["host.devices"].fix == "sudo apt-get install -y accel-driver"  # the recipe's fix, for a user
    assert f["host.commands"].status == "fail"
    assert f["host.commands"].detail == "no no-such-command-here on PATH (the build calls it)"
    board = by_id(run_doctor(context_for(HOSTS / "graviton4-neoverse-v2", tmp_path, str(tmp_path / "asks.yaml")),
                             ("host.devices",)))["host.devices"]
    assert board.status == "skip" and "a --sysroot snapshot has no /dev" in board.detail


def test_an_install_prefix_in_any_build_variable_is_checked(tmp_path: Path) -> None:
    data = bundled_data()
    data["build"].pop("cmake")  # the bundled recipe's prefix is build.cmake.define.CMAKE_INSTALL_PREFIX
    assert live(tmp_path, data, ("workspace.install-prefix",))["workspace.install-prefix"].status == "skip"
    data["build"]["env"]["set"]["EXTRA_CMAKE_ARGS"] = f"-G Ninja -DCMAKE_INSTALL_PREFIX={tmp_path}/prefix"
    finding = live(tmp_path, data, ("workspace.install-prefix",))["workspace.install-prefix"]
    assert finding.status == "ok" and finding.detail == f"{tmp_path}/prefix can be created writable"
