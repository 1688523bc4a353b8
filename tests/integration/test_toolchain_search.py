"""Pre-provisioned toolchains found where users keep them: `discover` asks interpreters (the target one, the python3
on PATH, the active venv) where a module is; `paths` are alternative folders; `version` is read from a file or a
command and judged against a range, and a version outside it is named as such.

The H100 story of issue 29: torch-fl's cuda variant on a host whose venv on PATH has a CUDA torch 2.11.0+cu130
failed `toolchain.provisioned` (it looked only at /opt/conda/...) and told the user to pip-install torch 2.10.0."""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flagtree_cpu_build.cli import app
from tests.support.envelope import result_of
from tests.support.venvs import make_venv

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="torch-fl's cuda variant builds on x86_64")


def fake_torch_venv(root: Path, *, version: str, cuda: str | None) -> Path:
    """A venv whose site-packages holds a stand-in torch: torch.version.cuda and the CUDA libraries of its lib/."""
    python = make_venv(root, with_pip=False)
    [site] = root.glob("lib/python3*/site-packages")
    torch = site / "torch"
    (torch / "lib").mkdir(parents=True)
    (torch / "__init__.py").write_text(f"from . import version\n__version__ = {version!r}\n")
    (torch / "version.py").write_text(f"__version__ = {version!r}\ncuda = {cuda!r}\n")
    if cuda:
        for lib in ("libtorch_cuda.so", "libc10_cuda.so"):
            (torch / "lib" / lib).write_text("stand-in\n")
    return python


def cuda_toolkit(root: Path, release: str) -> Path:
    """A CUDA toolkit stand-in whose nvcc says which release it is."""
    (root / "include").mkdir(parents=True)
    (root / "include" / "cuda_runtime.h").write_text("")
    nvcc = root / "bin" / "nvcc"
    nvcc.parent.mkdir()
    nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.48'\n")
    nvcc.chmod(0o755)
    return root


def doctor(*args: str, python: Path | None = None) -> dict[str, Any]:
    own = ["--python", str(python)] if python else []
    result = CliRunner().invoke(app, [*args, "doctor", "--json", "--only", "toolchain.provisioned", *own])
    assert result.exit_code in (0, 7), result.output
    [finding] = result_of(result.stdout)["checks"]
    return finding


def torch_fl(tmp_path: Path) -> tuple[str, ...]:
    return ("-w", str(tmp_path / "ws"), "--recipe", "torch-fl", "--variant", "cuda")


def test_a_cuda_torch_in_the_venv_on_path_passes_toolchain_provisioned(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    venv = fake_torch_venv(tmp_path / "h100-venv", version="2.11.0+cu130", cuda="13.0")
    monkeypatch.setenv("PATH", f"{venv.parent}:{os.environ['PATH']}")
    monkeypatch.setenv("FLAGTREE_CPU_TOOLCHAIN_CUDA", str(cuda_toolkit(tmp_path / "cuda", "13.0")))
    finding = doctor(*torch_fl(tmp_path))
    assert finding["status"] == "ok", finding
    torch_dir = next((tmp_path / "h100-venv").glob("lib/python3*/site-packages/torch"))
    on_path = venv.parent / "python3"
    assert f"cuda-torch at {torch_dir} (13.0, torch of {on_path} (python3 on PATH))" in finding["detail"]
    assert f"cuda at {tmp_path / 'cuda'} (13.0, FLAGTREE_CPU_TOOLCHAIN_CUDA)" in finding["detail"]


def test_a_cpu_torch_is_passed_over_and_a_cuda_torch_outside_the_range_is_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLAGTREE_CPU_TOOLCHAIN_CUDA", str(cuda_toolkit(tmp_path / "cuda", "13.0")))
    cpu = fake_torch_venv(tmp_path / "target", version="2.10.0+cpu", cuda=None)  # what the build installs
    old = fake_torch_venv(tmp_path / "old", version="2.0.1+cu118", cuda="11.8")
    monkeypatch.setenv("PATH", f"{old.parent}:{os.environ['PATH']}")
    finding = doctor(*torch_fl(tmp_path), python=cpu)
    assert finding["status"] == "fail"
    old_torch = next((tmp_path / "old").glob("lib/python3*/site-packages/torch"))
    detail = " ".join(finding["detail"].split())
    assert f"toolchain cuda-torch (recipe variant cuda): found 11.8 at {old_torch}, the recipe needs >=12" in detail
    assert "has no torch.version.cuda (None: a build without it)" in detail  # the target's CPU torch
    assert "pip install torch==2.10.0" not in finding["fix"]


def test_a_cuda_toolkit_older_than_the_range_is_named_with_its_version(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    venv = fake_torch_venv(tmp_path / "venv", version="2.11.0+cu130", cuda="13.0")
    monkeypatch.setenv("PATH", f"{venv.parent}:{os.environ['PATH']}")
    old = cuda_toolkit(tmp_path / "cuda-11", "11.8")
    monkeypatch.setenv("FLAGTREE_CPU_TOOLCHAIN_CUDA", str(old))
    finding = doctor(*torch_fl(tmp_path))
    assert finding["status"] == "fail"
    assert f"toolchain cuda (recipe variant cuda): found 11.8 at {old}, the recipe needs >=12" in " ".join(
        finding["detail"].split())


# --- paths and version rules of any recipe ----------------------------------------------------------------------


def vendor_recipe(tmp_path: Path, toolchain: dict[str, Any]) -> Path:
    data = {"schema_version": 2, "name": "vendor-sdk", "platform": {"host": {"arch": [platform.machine()]}},
            "sources": {}, "toolchains": {"sdk": {"expect": ["bin/cc"], "why": "the vendor compiler",
                                                  "fix": "install the SDK", **toolchain}}}
    path = tmp_path / "vendor-sdk.yaml"
    path.write_text(json.dumps(data))
    return path


def sdk(root: Path, version_text: str | None = None) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "cc").write_text("")
    if version_text is not None:
        (root / "VERSION").write_text(version_text)
    return root


def test_paths_are_tried_in_order_and_a_home_folder_is_found(tmp_path: Path, hermetic_env: Path) -> None:
    sdk(hermetic_env / "vendor", "SDK 3.2.1\n")
    recipe = vendor_recipe(tmp_path, {"path": str(tmp_path / "opt-vendor"), "paths": ["~/vendor"],
                                      "version": {"file": "VERSION", "range": ">=3"}})
    finding = doctor("-w", str(tmp_path / "ws"), "--recipe", str(recipe))
    assert finding["status"] == "ok" and f"sdk at {hermetic_env / 'vendor'} (3.2.1)" in finding["detail"], finding


def test_a_version_file_outside_the_range_is_named_and_other_places_are_listed(tmp_path: Path) -> None:
    old = sdk(tmp_path / "opt-vendor", "SDK 2.9\n")
    recipe = vendor_recipe(tmp_path, {"path": str(old), "paths": [str(tmp_path / "nowhere")],
                                      "version": {"file": "VERSION", "range": ">=3"}})
    finding = doctor("-w", str(tmp_path / "ws"), "--recipe", str(recipe))
    detail = " ".join(finding["detail"].split())
    assert finding["status"] == "fail"
    assert f"toolchain sdk: found 2.9 at {old}, the recipe needs >=3" in detail
    assert f"also looked at: paths[0]: missing {tmp_path / 'nowhere'}" in detail


@pytest.mark.timeout(120)
def test_a_hostile_version_command_or_file_is_bounded_and_refused(tmp_path: Path) -> None:
    endless = sdk(tmp_path / "endless")
    (endless / "bin" / "version").write_text("#!/bin/sh\nwhile :; do echo 1.0.0.0.0.0.0.0; done\n")
    (endless / "bin" / "version").chmod(0o755)
    recipe = vendor_recipe(tmp_path, {"path": str(endless), "version": {"command": ["bin/version"], "range": ">=1"}})
    finding = doctor("-w", str(tmp_path / "ws"), "--recipe", str(recipe))
    assert finding["status"] == "fail" and "gave no version (too much output)" in finding["detail"]
    fifo = sdk(tmp_path / "fifo")
    os.mkfifo(fifo / "VERSION")  # nothing ever writes it: a read would block forever
    recipe = vendor_recipe(tmp_path, {"path": str(fifo), "version": {"file": "VERSION"}})
    finding = doctor("-w", str(tmp_path / "ws"), "--recipe", str(recipe))
    assert finding["status"] == "fail" and f"could not read its version file {fifo / 'VERSION'}" in finding["detail"]


def test_an_interpreter_that_answers_garbage_is_a_reason_not_a_traceback(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    liar = tmp_path / "bin" / "python3"
    liar.parent.mkdir()
    liar.write_text("#!/bin/sh\necho '{\"folder\": [1, 2]}'\n")
    liar.chmod(0o755)
    monkeypatch.setenv("PATH", f"{liar.parent}:{os.environ['PATH']}")
    recipe = vendor_recipe(tmp_path, {"discover": {"python": {"module": "vendor_sdk"}}})
    finding = doctor("-w", str(tmp_path / "ws"), "--recipe", str(recipe), python=Path(sys.executable))
    detail = " ".join(finding["detail"].split())
    assert finding["status"] == "fail" and f"{liar} gave no answer about vendor_sdk" in detail
    assert "no vendor_sdk there (ModuleNotFoundError" in detail  # the target interpreter's own answer
