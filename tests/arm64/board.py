"""One workspace on the emulated board, as the tier's tests drive it: HOME and the workdir inside the rootfs,
git pointed at the loopback daemon through a user-style insteadOf rule, the recipe overrides every run uses."""

from __future__ import annotations

from pathlib import Path

from tests.arm64.conftest import ServedWorld
from tests.arm64.machine import PYTHON, VENV, Machine, Ran
from tests.support.tarballs import TOP

# the bundled recipe's build prerequisites without cmake (the fixture build runs no CMake; the board has none)
PREREQUISITES = ('python.build=[setuptools>=40.8.0, wheel, pybind11>=2.13.1, '
                 '{requirement: "ninja>=1.11.1", system_command: ninja}]')


class Board:
    """One workspace on the board; ``sets`` are the recipe overrides of every run (besides the served world's)."""

    def __init__(self, machine: Machine, served: ServedWorld, folder: Path, sets: tuple[str, ...] = (PREREQUISITES,)):
        self.machine, self.served, self.folder = machine, served, folder
        self.sets = sets
        self.home = machine.inside(folder) / "home"
        self.ws = machine.inside(folder) / "ws"
        (folder / "home").mkdir(exist_ok=True)

    def argv(self, *args: str) -> list[str]:
        """The tool's arguments for a command of this workspace (``-w``, every ``--set``, then ``args``)."""
        sets = [arg for assignment in self.sets for arg in ("--set", assignment)]
        return ["-w", str(self.ws), *self.served.sets(), *sets, *args]

    def run(self, *args: str, cpu: str, env: dict[str, str] | None = None, wrap: tuple[str, ...] = (),
            timeout: float = 600) -> Ran:
        return self.machine.tool(*self.argv(*args), cpu=cpu, home=self.home, wrap=wrap, timeout=timeout,
                                 env={"GIT_CONFIG_GLOBAL": str(self.served.gitconfig), **(env or {})})

    def host(self, inside: Path) -> Path:
        return self.machine.host_path(inside)

    @property
    def llvm(self) -> Path:
        """Where fetch publishes the LLVM stand-in on this board (a host path)."""
        return self.host(self.home / ".triton" / "llvm" / TOP)


def target_venv(machine: Machine, folder: Path) -> Path:
    """A target venv for the fixture build in ``folder`` (a host path; the venv's python is returned as the board
    names it): no pip of its own; /opt/venv's packages (pip, setuptools, wheel, pybind11, ninja, torch, numpy) but
    its PyPI triton reachable through a .pth file; ninja on its PATH.

    The .pth names a folder of links to /opt/venv's site-packages without triton: the fixture triton the build
    installs is an editable install, whose finder Python asks only after the path, so a triton on the path would
    win over it (validate would check PyPI's 3.5.0). Packages on a .pth path are outside the venv: pip never
    uninstalls them (it says they are outside the environment), so nothing the tests run changes /opt/venv."""
    venv = machine.inside(folder) / "venv"
    made = machine.run(["python3", "-m", "venv", "--without-pip", str(venv)], cpu="neoverse-n2")
    assert made.returncode == 0, made
    opt_site = VENV / "lib" / f"python{PYTHON}" / "site-packages"
    shared = folder / "opt-venv-site"  # beside the venv, not in it: pip takes what is under sys.prefix for its own
    shared.mkdir()
    for entry in machine.host_path(opt_site).iterdir():
        if not entry.name.lower().startswith("triton"):
            (shared / entry.name).symlink_to(opt_site / entry.name)
    site = machine.host_path(venv / "lib" / f"python{PYTHON}" / "site-packages")
    (site / "opt-venv.pth").write_text(f"{machine.inside(shared)}\n")
    machine.host_path(venv / "bin" / "ninja").symlink_to(f"{VENV}/bin/ninja")
    return venv / "bin" / "python"
