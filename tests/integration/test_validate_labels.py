"""`validate` and `doctor` judge a pin with a local label (torch==2.10.0+cpu) by the build the target interpreter
really has: PyPI's aarch64 torch wheel carries metadata version 2.10.0 while torch.__version__ is 2.10.0+cpu.

The target is a real venv holding a stand-in `torch` distribution (metadata written by hand, a package whose
__init__ sets __version__); the real torch of the test machine is never imported.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import Result

from flagtree_cpu_build.local_labels import runtime_versions
from tests.support.cli import Workspace, new_workspace
from tests.support.envelope import result_of
from tests.support.gitworld import GitWorld
from tests.support.venvs import build_venv, site_packages

RUNTIME = 'python.runtime=[{requirement: "torch==2.10.0+cpu", index_url: "https://download.pytorch.org/whl/cpu"}]'
TORCH_KERNELS = ("tle-rms-norm", "softmax")  # presets that import torch


def venv_with_torch(path: Path, metadata_version: str | None, init: str = "") -> Path:
    """A venv whose `torch` distribution says ``metadata_version`` and whose torch/__init__.py is ``init``
    (no torch at all with None). Its top_level.txt lists several modules, as real torch's does."""
    python = build_venv(path, ["pip"])
    if metadata_version is not None:
        purelib = site_packages(python)
        (purelib / "torch").mkdir()
        (purelib / "torch" / "__init__.py").write_text(init)
        info = purelib / f"torch-{metadata_version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {metadata_version}\n")
        (info / "top_level.txt").write_text("functorch\ntorch\ntorchgen\n")
        (info / "INSTALLER").write_text("pip\n")
    return python


def validate(ws: Workspace, python: Path) -> dict:
    kernels = [arg for kernel in TORCH_KERNELS for arg in ("--kernel", kernel)]
    result = ws.run("validate", "--json", "--python", str(python), *kernels, sets=(RUNTIME,))
    assert result.exit_code == 6, result.stderr  # the stand-in torch runs no kernel; what matters is why
    return result_of(result.stdout)


def row(document: dict, kernel: str) -> dict:
    return next(r for r in document["results"] if r["kernel"] == kernel)


@pytest.fixture
def ws(git_world: GitWorld, tmp_path: Path) -> Workspace:
    return new_workspace(git_world, tmp_path / "ws")


def test_the_cpu_build_whose_metadata_has_no_label_meets_the_cpu_pin(ws: Workspace, tmp_path: Path) -> None:
    python = venv_with_torch(tmp_path / "venv", "2.10.0", '__version__ = "2.10.0+cpu"\n')
    document = validate(ws, python)
    prerequisites = row(document, "prerequisites")
    assert prerequisites["status"] == "pass", prerequisites
    assert prerequisites["figure"] == "torch 2.10.0+cpu"
    assert prerequisites["details"] == {"missing": [], "wrong_version": {}}
    for kernel in TORCH_KERNELS:  # they ran (and failed for want of triton): not skipped
        assert row(document, kernel)["status"] == "fail", row(document, kernel)


def test_another_build_of_the_same_version_is_a_wrong_version(ws: Workspace, tmp_path: Path) -> None:
    python = venv_with_torch(tmp_path / "venv", "2.10.0", '__version__ = "2.10.0+cu128"\n')
    document = validate(ws, python)
    prerequisites = row(document, "prerequisites")
    assert prerequisites["status"] == "fail" and prerequisites["figure"] == "1 wrong version"
    assert prerequisites["details"]["missing"] == []
    assert prerequisites["details"]["wrong_version"] == {"torch": "2.10.0+cu128"}
    assert prerequisites["details"]["install"] == [
        f"{python} -m pip install torch==2.10.0+cpu --index-url https://download.pytorch.org/whl/cpu"]
    assert "torch==2.10.0+cpu: installed 2.10.0 (torch.__version__ 2.10.0+cu128: another build)" in json_text(
        prerequisites)
    for kernel in TORCH_KERNELS:
        assert row(document, kernel)["status"] == "skip"
        assert row(document, kernel)["message"] == ("needs torch, whose installed version (2.10.0+cu128) is not "
                                                     "the one the recipe pins (see prerequisites)")


def test_another_version_is_a_wrong_version_and_nothing_is_imported(ws: Workspace, tmp_path: Path) -> None:
    # an import would fail loudly: 2.13.0 cannot be the pinned build whatever __version__ says
    python = venv_with_torch(tmp_path / "venv", "2.13.0", 'raise SystemExit("TORCH-WAS-IMPORTED")\n')
    prerequisites = row(validate(ws, python), "prerequisites")
    assert prerequisites["figure"] == "1 wrong version"
    assert prerequisites["details"]["wrong_version"] == {"torch": "2.13.0"}
    assert "torch==2.10.0+cpu: wrong version: installed 2.13.0" in json_text(prerequisites)
    assert "TORCH-WAS-IMPORTED" not in json_text(prerequisites)


def test_an_absent_torch_is_missing(ws: Workspace, tmp_path: Path) -> None:
    document = validate(ws, venv_with_torch(tmp_path / "venv", None))
    prerequisites = row(document, "prerequisites")
    assert prerequisites["figure"] == "1 missing"
    assert prerequisites["details"]["missing"] == ["torch"] and prerequisites["details"]["wrong_version"] == {}
    assert row(document, "softmax")["message"] == "needs torch, which is missing (see prerequisites)"


def test_doctor_names_the_build_and_a_torch_that_cannot_be_imported(ws: Workspace, tmp_path: Path) -> None:
    def runtime_finding(python: Path) -> dict:
        result: Result = ws.run("doctor", "--json", "--offline", "--python", str(python), sets=(RUNTIME,))
        return next(f for f in result_of(result.stdout)["checks"] if f["id"] == "python.runtime-prerequisites")

    cpu = runtime_finding(venv_with_torch(tmp_path / "cpu", "2.10.0", '__version__ = "2.10.0+cpu"\n'))
    assert cpu["status"] == "ok", cpu
    assert cpu["detail"] == "torch==2.10.0+cpu: installed 2.10.0 (torch.__version__ 2.10.0+cpu)"
    broken = runtime_finding(venv_with_torch(tmp_path / "broken", "2.10.0", 'import no_such_module\n'))
    assert broken["status"] == "warn", broken
    assert broken["detail"].startswith("wrong version: torch==2.10.0+cpu: installed 2.10.0 (import torch failed: "
                                       "ModuleNotFoundError: No module named 'no_such_module': cannot tell which "
                                       "build it is)")
    assert "--index-url https://download.pytorch.org/whl/cpu" in broken["fix"]
    absent = runtime_finding(venv_with_torch(tmp_path / "absent", None))
    assert absent["detail"].startswith("missing: torch==2.10.0+cpu; ")


def test_one_run_reads_every_version_and_a_crash_spoils_only_what_follows(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    python = venv_with_torch(tmp_path / "venv", "2.10.0", '__version__ = "2.10.0+cu128"\n')
    purelib = site_packages(python)
    (purelib / "crashing").mkdir()
    (purelib / "crashing" / "__init__.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    info = purelib / "crashing-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: crashing\nVersion: 1.0\n")
    shadow = tmp_path / "cwd"
    (shadow / "torch").mkdir(parents=True)
    (shadow / "torch" / "__init__.py").write_text('__version__ = "2.10.0+cpu"\n')
    monkeypatch.chdir(shadow)  # a folder named torch where the command runs is not the installed torch
    found = runtime_versions(python, ["torch", "crashing"], dict(os.environ))
    assert (found["torch"].module, found["torch"].version) == ("torch", "2.10.0+cu128")
    assert found["crashing"].version is None
    assert found["crashing"].error == f"importing crashing in {python} ended badly (killed by signal 9)"


def json_text(entry: dict) -> str:
    return f"{entry.get('figure')} {entry.get('message')} {entry.get('details')}"
