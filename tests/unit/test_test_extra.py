"""The project's [test] extra resolves to a CPU build of torch on every machine kind it is installed on.

PyPI's aarch64 torch is the CPU build up to 2.10.0 and the CUDA 13 build from 2.11 on (18 nvidia packages;
EMULATION.md measured it): one `torch==2.13.0` for every machine pulled CUDA onto aarch64 boards. The
emulated tier installs the extra on aarch64 for real; this checks the markers on both kinds here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
# the newest release whose PyPI wheel is a CPU build, per machine
LAST_CPU_TORCH = {"aarch64": Version("2.10.0"), "x86_64": None}  # x86_64: this machine's file is a CPU build


def requirements_on(machine: str) -> dict[str, list[Requirement]]:
    extra = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]["test"]
    env = {"platform_machine": machine, "sys_platform": "linux", "platform_system": "Linux"}
    applying: dict[str, list[Requirement]] = {}
    for line in extra:
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate(env):
            applying.setdefault(requirement.name, []).append(requirement)
    return applying


@pytest.mark.parametrize("machine", ["aarch64", "x86_64"])
def test_the_test_extra_pins_exactly_one_torch_per_machine(machine: str) -> None:
    torch = requirements_on(machine)["torch"]
    assert len(torch) == 1, torch
    pins = [s for s in torch[0].specifier if s.operator == "=="]
    assert pins, f"{torch[0]}: a range would fetch the newest release, a CUDA build"
    last = LAST_CPU_TORCH[machine]
    if last is not None:
        assert Version(pins[0].version) <= last, f"{torch[0]} is a CUDA build on {machine}"


def test_aarch64_gets_a_triton_with_an_aarch64_wheel() -> None:
    triton = requirements_on("aarch64").get("triton", [])
    assert triton and all(Version(s.version) >= Version("3.5.0") for s in triton[0].specifier), triton
