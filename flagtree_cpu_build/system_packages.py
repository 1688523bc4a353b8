"""The recipe's system packages (apt, or dnf on a RHEL-family host): which are missing, the one command that
installs them, and — only when asked (``setup --install-system-packages``) — running it.

Which list applies is the host's family: /etc/os-release ID or ID_LIKE naming rhel, fedora, centos, almalinux or
rocky means dnf (yum where there is no dnf); any other host uses the apt list, as before.

Missing packages are read from dpkg's status file, never by running apt or dpkg, so asking is
instant and works on a copy of another machine's files (a doctor ``--sysroot``). Installing is the
one place the tool runs a command as root: a single ``apt-get install -y`` line, shown before it
runs, on the user's terminal (sudo may ask for a password).
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import DoctorFailed
from .stagekit.stage import Action

if TYPE_CHECKING:
    from .host import HostFacts
    from .recipe import Recipe
    from .stagekit.stage import StageContext

DPKG_STATUS = "var/lib/dpkg/status"
# A recipe lists its apt packages as one list, "what the build needs". Before the build only two stages run
# a system program the tool does not bring: sources (git) and python (a venv made by Debian's split-out venv
# and pip). So a run that stops before the build (`setup --skip-build`) needs only these of the list; every
# other package counts as the build's (and the checks', which load what it built).
BEFORE_BUILD = {"sources": ("git",), "python": ("python3-venv", "python3-pip")}
RPM_FAMILY = frozenset({"rhel", "fedora", "centos", "almalinux", "rocky"})
_RPM_OUTPUT = 256 * 1024
_RPM_TIMEOUT_S = 60.0
BUILD_STAGES = ("build", "validate")


def packages_for(wanted: Sequence[str], stages: Sequence[str]) -> list[str]:
    """The packages of ``wanted`` the stages about to run (``stages``, by name) need, in the order given."""
    if any(stage in BUILD_STAGES for stage in stages):
        return list(wanted)
    used = {package for stage in stages for package in BEFORE_BUILD.get(stage, ())}
    return [package for package in wanted if package in used]


def installed_packages(status_text: str) -> set[str]:
    """Package names dpkg marks 'install ok installed' in its status file (architecture suffixes dropped)."""
    installed = set()
    for stanza in status_text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and not line[0].isspace())
        if fields.get("Status", "").endswith("ok installed") and "Package" in fields:
            installed.add(fields["Package"].split(":")[0])
    return installed


def missing_apt_packages(wanted: Sequence[str], root: Path = Path("/")) -> list[str] | None:
    """The packages of ``wanted`` dpkg does not have under ``root``, in the order given; None when nothing is
    wanted or this is not a dpkg system."""
    status = root / DPKG_STATUS
    if not wanted or not status.is_file():
        return None
    installed = installed_packages(status.read_text(encoding="utf-8", errors="replace"))
    return [p for p in wanted if p not in installed]


def is_rpm_family(host: HostFacts) -> bool:
    """True on a RHEL-family host (its ID or one of its ID_LIKE), whose packages are the recipe's dnf list."""
    return bool(RPM_FAMILY & {host.os_id, *host.os_id_like})


def wanted_packages(recipe: Recipe, host: HostFacts) -> tuple[str, tuple[str, ...]]:
    """The package manager this host uses and the recipe's list for it; a recipe with no dnf list is judged by
    its apt list everywhere, as before dnf lists existed (on a RHEL host: "not a Debian/Ubuntu system")."""
    if is_rpm_family(host) and recipe.system_packages.dnf:
        return "dnf", recipe.system_packages.dnf
    return "apt", recipe.system_packages.apt


def missing_rpm_packages(wanted: Sequence[str], root: Path = Path("/")) -> list[str] | None:
    """The packages of ``wanted`` rpm says are not installed, in the order given; None when nothing is wanted,
    ``root`` is another machine's copy (its rpm database is a binary file only its rpm reads) or there is no rpm."""
    from .proc import capture_bounded

    rpm = shutil.which("rpm")
    if not wanted or root != Path("/") or rpm is None:
        return None
    try:
        done = capture_bounded([rpm, "-q", *wanted], limit=_RPM_OUTPUT, timeout_s=_RPM_TIMEOUT_S)
    except OSError:
        return None
    if done.timed_out or done.overflowed:
        return None
    # rpm -q prints "package NAME is not installed" for each one it lacks (exit status: how many)
    absent = {line.strip()[len("package "):-len(" is not installed")] for line in done.stdout.splitlines()
              if line.startswith("package ") and line.rstrip().endswith(" is not installed")}
    return [p for p in wanted if p in absent]


def missing_system_packages(ctx: StageContext, root: Path = Path("/"),
                            stages: Sequence[str] = BUILD_STAGES) -> list[str] | None:
    """The recipe's packages (apt, or dnf on a RHEL-family host) that ``stages`` need and the system does not
    have; None when this host's package database cannot be read (or those stages need none of them)."""
    manager, wanted = wanted_packages(ctx.recipe, ctx.host)
    needed = packages_for(wanted, stages)
    if manager == "dnf":
        return missing_rpm_packages(needed, root)
    return missing_apt_packages(needed, root)


def system_install_argv(missing: list[str], euid: int, manager: str = "apt") -> list[str]:
    if manager == "dnf":  # RHEL 7 and CentOS 7 have only yum; the same command line
        argv = ["dnf" if shutil.which("dnf") or not shutil.which("yum") else "yum", "install", "-y", *missing]
    else:
        argv = ["apt-get", "install", "-y", *missing]
    return argv if euid == 0 else ["sudo", *argv]


def system_packages_action(ctx: StageContext, *, install: bool, offline: bool,
                           stages: Sequence[str] = BUILD_STAGES) -> Action | None:
    """Missing system packages: a warning with the command by default, naming only those the stages about to run
    need; with ``install`` every missing one of the recipe's list is installed (asked for explicitly, it
    prepares the machine for the build too). None when nothing is missing (or this is not a dpkg system)."""
    missing = missing_system_packages(ctx, stages=BUILD_STAGES if install else stages)
    if not missing:
        return None
    argv = system_install_argv(missing, os.geteuid(), wanted_packages(ctx.recipe, ctx.host)[0])
    if not install:
        return Action("system packages", "skipped", f"{len(missing)} of the recipe's system packages are missing: "
                      f"{' '.join(missing)} — install them with `{shlex.join(argv)}` (or pass "
                      "--install-system-packages)", {"missing": missing})
    if offline:
        raise DoctorFailed("--install-system-packages needs the network, and --offline forbids it",
                           details=(f"missing: {' '.join(missing)}",), fix=f"run `{shlex.join(argv)}` when online")
    from .proc import run_attached

    ctx.ui.info(f"installing {len(missing)} system packages: + {shlex.join(argv)}")
    status = run_attached(argv, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    if status != 0:
        raise DoctorFailed(f"`{shlex.join(argv)}` failed (exit status {status}); nothing else was changed",
                           fix="run it yourself to see why (on a fresh Debian/Ubuntu machine apt-get update first), "
                           "then setup again")
    return Action("system packages", "created", f"installed {' '.join(missing)}", {"installed": missing})
