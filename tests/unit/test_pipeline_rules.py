"""setup's pure rules: which preflight checks run and which stop it, the apt line, the summary line."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from flagtree_cpu_build.doctor import Finding
from flagtree_cpu_build.pipeline import _summary
from flagtree_cpu_build.preflight import blocking, build_only, preflight_checks
from flagtree_cpu_build.stagekit.stage import Action, RunOptions, StageResult
from flagtree_cpu_build.system_packages import missing_system_packages, system_install_argv

PY = Path("/venv/bin/python")


def finding(id_: str, status: str) -> Finding:
    return Finding(id_, id_.split(".")[0], id_, status, "detail", "fix")  # type: ignore[arg-type]


def test_apt_get_needs_sudo_only_when_not_root() -> None:
    assert system_install_argv(["ccache", "numactl"], euid=0) == ["apt-get", "install", "-y", "ccache", "numactl"]
    assert system_install_argv(["ccache"], euid=1000) == ["sudo", "apt-get", "install", "-y", "ccache"]


def test_missing_system_packages_reads_dpkg_status(tmp_path: Path) -> None:
    status = tmp_path / "var/lib/dpkg/status"
    status.parent.mkdir(parents=True)
    status.write_text("Package: git\nStatus: install ok installed\n\n"
                      "Package: ccache\nStatus: deinstall ok config-files\n\n"
                      "Package: libomp-dev:arm64\nStatus: install ok installed\n")
    ctx = SimpleNamespace(recipe=SimpleNamespace(system_packages=SimpleNamespace(apt=("git", "ccache", "libomp-dev",
                                                                                       "numactl"), dnf=())),
                          host=SimpleNamespace(os_id="debian", os_id_like=()))
    assert missing_system_packages(ctx, tmp_path) == ["ccache", "numactl"]  # type: ignore[arg-type]
    assert missing_system_packages(ctx, tmp_path / "no-dpkg") is None  # type: ignore[arg-type]


def test_skip_build_leaves_out_the_checks_only_a_build_needs() -> None:
    for_build = {"host.arch", "cpu.features", "toolchain.compiler", "toolchain.libraries", "host.commands"}
    assert all(build_only(i) for i in for_build) and not build_only("toolchain.git")
    assert for_build <= set(preflight_checks(RunOptions(python=PY)))
    assert not for_build & set(preflight_checks(RunOptions(python=PY, skip_build=True)))
    assert "toolchain.git" in preflight_checks(RunOptions(python=PY, skip_build=True))


def test_the_preflight_runs_every_check_doctor_says_blocks_a_stage_and_no_other() -> None:
    from flagtree_cpu_build.doctor import all_checks

    blocking_checks = {c.id for c in all_checks() if c.blocks}
    assert set(preflight_checks(RunOptions(python=PY))) == blocking_checks
    assert not {"network.hosts", "toolchain.ccache", "cpu.governor"} & blocking_checks  # advice, not a stop


def test_ignore_host_turns_failures_into_warnings_except_a_missing_git() -> None:
    findings = [finding("host.arch", "fail"), finding("toolchain.git", "fail"), finding("resources.disk", "warn")]
    assert [f.id for f in blocking(findings, RunOptions(python=PY))] == ["host.arch", "toolchain.git"]
    assert [f.id for f in blocking(findings, RunOptions(python=PY, ignore_host=True))] == ["toolchain.git"]


def test_the_summary_line_counts_many_changes_and_names_few() -> None:
    links = StageResult("link", tuple(Action(f"link{i}", "created") for i in range(12)))
    assert _summary(links) == "12 created"
    sources = StageResult("sync", (Action("flagtree", "updated"), Action("flagtree-cpu", "ok"),
                                   Action("sleef", "skipped", "not used")))
    assert _summary(sources) == "flagtree updated, sleef skipped (not used), 1 already current"
    assert _summary(StageResult("sync", (Action("a", "ok"), Action("b", "ok")))) == "all 2 current"
    assert _summary(StageResult("build", (Action("build", "ok", "up to date"),))) == "up to date"


def test_compatibility_checks_are_reported_not_counted_as_items() -> None:
    """A fresh clone said 'flagtree created, flagtree-cpu created, 1 already current': the checks were an item."""
    fresh = StageResult("sync", (Action("flagtree", "created"), Action("flagtree-cpu", "created"),
                                 Action("compatibility checks", "ok", "5 passed", {"check": True})))
    assert _summary(fresh) == "flagtree created, flagtree-cpu created, compatibility checks: 5 passed"
    current = StageResult("sync", (Action("flagtree", "ok"), Action("flagtree-cpu", "ok"),
                                   Action("compatibility checks", "ok", "5 passed", {"check": True})))
    assert _summary(current) == "all 2 current, compatibility checks: 5 passed"
