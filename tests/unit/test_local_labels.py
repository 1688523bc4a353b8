"""A pin with a local label (torch==2.10.0+cpu) names a build: when the metadata has no label (PyPI's aarch64
torch wheels), the package's own __version__ decides; otherwise PEP 440 as pip applies it."""

from __future__ import annotations

import pytest
from packaging.specifiers import SpecifierSet

from flagtree_cpu_build.local_labels import RuntimeVersion
from flagtree_cpu_build.pythonenv import Prerequisite, PythonReport
from flagtree_cpu_build.recipe import Requirement
from flagtree_cpu_build.stages.validate.check_run import _unmet_reason
from flagtree_cpu_build.versions import allows, label_pin, meets, reads_runtime_label

CPU = SpecifierSet("==2.10.0+cpu")


@pytest.mark.parametrize(("specifier", "installed", "reads"), [
    ("==2.10.0+cpu", "2.10.0", True),  # the aarch64 wheel: only its __version__ says it is the CPU build
    ("==2.10+cpu", "2.10.0", True),  # the same public version, spelled shorter
    ("==2.10.0+cpu", "2.10.0+cpu", False),  # the metadata says it
    ("==2.10.0+cpu", "2.10.0+cu128", False),  # the metadata says it is another build
    ("==2.10.0+cpu", "2.13.0", False),  # another version: no import tells anything more
    ("==2.10.0", "2.10.0", False),  # no label on the pin: nothing to import
    (">=2.10", "2.10.0", False),
    ("==2.10.*", "2.10.0", False),
])
def test_only_a_labelled_pin_against_unlabelled_metadata_of_its_version_reads_the_runtime(
        specifier: str, installed: str, reads: bool) -> None:
    assert reads_runtime_label(SpecifierSet(specifier), installed) is reads


@pytest.mark.parametrize(("installed", "runtime", "met"), [
    ("2.10.0", "2.10.0+cpu", True),  # PyPI's aarch64 torch
    ("2.10.0", "2.10.0+cu128", False),  # another build
    ("2.10.0", "2.10.0", False),  # __version__ names no build either
    ("2.10.0", None, False),  # it could not be imported, or has no __version__
    ("2.10.0", "2.11.0+cpu", False),  # __version__ of another version altogether
    ("2.10.0", "not a version", False),
    ("2.10.0+cpu", None, True),  # the metadata carries the label: PEP 440 alone
    ("2.10.0+cu128", "2.10.0+cpu", False),  # a labelled metadata version is never second-guessed
    ("2.13.0", "2.10.0+cpu", False),
])
def test_a_labelled_pin_is_met_by_that_build_only(installed: str, runtime: str | None, met: bool) -> None:
    assert meets(CPU, installed, runtime) is met


def test_an_unlabelled_pin_keeps_pep_440() -> None:
    assert meets(SpecifierSet("==2.10.0"), "2.10.0+cpu")
    assert meets(SpecifierSet("==2.10.0"), "2.10.0", "2.10.0+cu128")  # the runtime is not asked about
    assert not meets(SpecifierSet("==2.10.0"), "2.13.0")


def test_a_labelled_constraint_is_judged_the_same_way() -> None:
    assert allows("torch==2.10.0+cpu", "2.10.0", "2.10.0+cpu")
    assert not allows("torch==2.10.0+cpu", "2.10.0", "2.10.0+cu128")
    assert not allows("torch==2.10.0+cpu", "2.10.0")


def test_the_label_pin_is_the_exact_pin_with_a_label() -> None:
    assert str(label_pin(SpecifierSet("==2.10.0+cpu,>=2"))) == "2.10.0+cpu"
    assert label_pin(SpecifierSet("==2.10.0")) is None
    assert label_pin(SpecifierSet(">=2.10")) is None


def _torch(installed: str | None, satisfied: bool, runtime: RuntimeVersion | None = None) -> Prerequisite:
    requirement = Requirement(requirement="torch==2.10.0+cpu", index_url="https://download.pytorch.org/whl/cpu")
    return Prerequisite(requirement, installed, None, satisfied, runtime=runtime)


def test_an_installed_prerequisite_of_another_version_is_a_wrong_version_not_missing() -> None:
    wrong = _torch("2.13.0", False)
    assert wrong.describe() == "torch==2.10.0+cpu: wrong version: installed 2.13.0"
    assert wrong.wrong_version and wrong.version == "2.13.0"
    missing = _torch(None, False)
    assert missing.describe() == "torch==2.10.0+cpu: missing" and not missing.wrong_version
    report = PythonReport(None, "3.12.0", (wrong,), {})  # type: ignore[arg-type]
    assert report.unmet == {"torch": "2.13.0"}
    assert PythonReport(None, "3.12.0", (missing,), {}).unmet == {"torch": None}  # type: ignore[arg-type]


def test_the_runtime_version_is_named_when_it_decided() -> None:
    cpu = _torch("2.10.0", True, RuntimeVersion("torch", "2.10.0+cpu"))
    assert cpu.describe() == "torch==2.10.0+cpu: installed 2.10.0 (torch.__version__ 2.10.0+cpu)"
    assert cpu.version == "2.10.0+cpu" and not cpu.wrong_version
    cuda = _torch("2.10.0", False, RuntimeVersion("torch", "2.10.0+cu128"))
    assert cuda.describe() == "torch==2.10.0+cpu: installed 2.10.0 (torch.__version__ 2.10.0+cu128: another build)"
    assert cuda.wrong_version and cuda.version == "2.10.0+cu128"
    plain = _torch("2.10.0", False, RuntimeVersion("torch", "2.10.0"))
    assert plain.describe() == "torch==2.10.0+cpu: installed 2.10.0 (torch.__version__ 2.10.0: names no build)"
    broken = _torch("2.10.0", False, RuntimeVersion("torch", None, "import torch failed: ImportError: libgomp"))
    assert broken.describe() == ("torch==2.10.0+cpu: installed 2.10.0 (import torch failed: ImportError: libgomp: "
                                 "cannot tell which build it is)")
    assert broken.version == "2.10.0"


def test_a_skipped_check_says_missing_or_wrong_version() -> None:
    assert _unmet_reason(["torch"], {"torch": None}) == "needs torch, which is missing (see prerequisites)"
    assert _unmet_reason(["torch"], {"torch": "2.13.0"}) == (
        "needs torch, whose installed version (2.13.0) is not the one the recipe pins (see prerequisites)")
    assert _unmet_reason(["numpy", "torch"], {"torch": "2.13.0", "numpy": None}) == (
        "needs numpy, which is missing; and torch, whose installed version (2.13.0) is not the one the recipe "
        "pins (see prerequisites)")
