"""doctor checks of this machine's tools, Python, C/C++ runtime and disk (the network's are in ``network``).

They are skipped for a ``--sysroot`` snapshot (a copy of a board's /proc, /sys and /etc
says nothing about the tools or the workspace on the machine doctor runs on).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlparse

from ..elfinfo import NotElf, read_versions, version_key
from ..extract import read_stamp
from ..proc import capture
from .facts import existing_parent, python_facts
from .kit import DoctorContext, Outcome, check, fail, ok, skip, warn

GIB = 1024**3

# --- toolchain --------------------------------------------------------------------------------


def _version_of(command: str, pattern: str = r"(\d+\.\d+(?:\.\d+)?)") -> tuple[str | None, str | None]:
    """(path, version) of a command on PATH, or (None, None)."""
    path = shutil.which(command)
    if path is None:
        return None, None
    result = capture([path, "--version"], timeout_s=10)
    match = re.search(pattern, result.stdout + result.stderr)
    return path, match.group(1) if match else None


def _at_least(version: str | None, minimum: tuple[int, ...]) -> bool:
    if version is None:
        return False
    return tuple(int(p) for p in version.split(".") if p.isdigit()) >= minimum


def _tool_present(c: DoctorContext, command: str, package: str, missing: str, *, required: bool,
                  note: str = "") -> Outcome:
    path, version = _version_of(command)
    if path is not None:
        return ok(f"{command} {version} ({path}){note}")
    return (fail if required else warn)(missing, c.as_root(f"apt-get install -y {package}"))


@check("toolchain.git", "toolchain", "git", live_only=True)
def tool_git(c: DoctorContext) -> Outcome:
    return _tool_present(c, "git", "git", "git is not installed", required=True)


def _build_tool(c: DoctorContext, command: str, minimum: tuple[int, ...], package: str) -> Outcome:
    venv_tool = c.python.parent / command
    path, version = _version_of(str(venv_tool)) if venv_tool.exists() else _version_of(command)
    wanted = ".".join(map(str, minimum))
    if path is not None and _at_least(version, minimum):
        return ok(f"{command} {version} ({path})")
    found = f"{command} {version} at {path} is older than {wanted}" if path else f"no {command} on PATH"
    return warn(f"{found}; `flagtree-cpu build` installs a recent one into the venv with pip",
                c.as_root(f"apt-get install -y {package}") + "   # or let flagtree-cpu build install it")


@check("toolchain.cmake", "toolchain", "CMake 3.18 or newer", live_only=True)
def tool_cmake(c: DoctorContext) -> Outcome:
    return _build_tool(c, "cmake", (3, 18), "cmake")


@check("toolchain.ninja", "toolchain", "ninja", live_only=True)
def tool_ninja(c: DoctorContext) -> Outcome:
    return _build_tool(c, "ninja", (1, 11), "ninja-build")


@check("toolchain.compiler", "toolchain", "C/C++ compiler that knows -march=armv9-a", live_only=True)
def tool_compiler(c: DoctorContext) -> Outcome:
    compiler = c.environ.get("CXX", "c++")
    path = shutil.which(compiler)
    if path is None:
        return fail(f"no C++ compiler ({compiler}) on PATH", c.as_root("apt-get install -y build-essential"))
    text = capture([path, "--version"], timeout_s=10).stdout
    clang = re.search(r"clang version (\d+)\.", text)
    gcc = re.search(r"\) (\d+)\.\d+", text.splitlines()[0] if text else "")
    family, major = ("Clang", int(clang.group(1))) if clang else ("GCC", int(gcc.group(1)) if gcc else 0)
    minimum = 14 if family == "Clang" else 12
    name = f"{family} {major}" if major else text.splitlines()[0] if text else compiler
    if major < minimum:
        return fail(f"{name} ({path}) does not know -march=armv9-a+sve2+i8mm+bf16 (needs GCC 12 or Clang 14)",
                    c.as_root("apt-get install -y gcc-12 g++-12") + " && export CC=gcc-12 CXX=g++-12")
    if c.host.arch != "aarch64":
        return ok(f"{name} ({path}); the armv9-a flag is not tried on a {c.host.arch} host")
    probe = capture([path, "-x", "c++", "-march=armv9-a+sve2+i8mm+bf16", "-fsyntax-only", "-"], timeout_s=20)
    if probe.returncode != 0:
        error = (probe.stderr.strip().splitlines() or ["(no message)"])[-1]
        return fail(f"{name} rejects -march=armv9-a+sve2+i8mm+bf16: {error}",
                    "install a newer compiler: " + c.as_root("apt-get install -y gcc-13 g++-13")
                    + " && export CC=gcc-13 CXX=g++-13")
    return ok(f"{name} ({path}) accepts -march=armv9-a+sve2+i8mm+bf16")


@check("toolchain.ccache", "toolchain", "ccache (optional, faster rebuilds)", live_only=True)
def tool_ccache(c: DoctorContext) -> Outcome:
    return _tool_present(c, "ccache", "ccache", "no ccache: every rebuild compiles everything again", required=False,
                         note="; builds use it (TRITON_BUILD_WITH_CCACHE=true)")


@check("toolchain.pkg-config", "toolchain", "pkg-config", live_only=True)
def tool_pkg_config(c: DoctorContext) -> Outcome:
    return _tool_present(c, "pkg-config", "pkg-config", "no pkg-config on PATH", required=False)


@check("toolchain.openmp", "toolchain", "OpenMP runtime (kernels link it)", live_only=True)
def tool_openmp(c: DoctorContext) -> Outcome:
    compiler = shutil.which(c.environ.get("CC", "cc"))
    for library in ("libgomp.so", "libomp.so"):
        if compiler:
            answer = capture([compiler, f"-print-file-name={library}"], timeout_s=10).stdout.strip()
            if answer and os.path.isabs(answer) and os.path.exists(answer):
                return ok(f"{library} at {answer}")
    return fail("no OpenMP runtime (libgomp/libomp) for the compiler: JIT-compiled kernels link it",
                c.as_root("apt-get install -y libomp-dev libgomp1"))


# --- Python -----------------------------------------------------------------------------------------


@check("python.version", "python", "Target Python interpreter", live_only=True)
def python_version(c: DoctorContext) -> Outcome:
    from packaging.specifiers import SpecifierSet

    requires = c.recipe.python.requires
    facts = python_facts(c)
    if facts is None:
        import sys

        version = ".".join(map(str, sys.version_info[:3]))
        where = (f"{c.python} does not exist yet; `flagtree-cpu build` creates it with {sys.executable} "
                 f"(Python {version})")
    else:
        version, where = facts["python"], f"{c.python}: Python {facts['python']}"
    if requires and not SpecifierSet(requires).contains(version, prereleases=True):
        return fail(f"{where}; the recipe needs Python {requires}",
                    "install a suitable Python and pass --python /path/to/python3.12 (or activate its venv)")
    return ok(where)


def _requirements_outcome(c: DoctorContext, requirements: Iterable, when: str) -> Outcome:
    from ..pythonenv import check as check_prerequisites
    from ..pythonenv import install_commands

    facts = python_facts(c)
    if facts is None:
        return skip(f"{c.python} does not exist yet; {when} installs them")
    report = check_prerequisites(c.python, list(requirements), os.pathsep.join(
        [str(c.python.parent), c.environ.get("PATH", "")]))
    if not report.missing:
        return ok(", ".join(p.describe() for p in report.prerequisites) or "none needed")
    import shlex

    commands = " && ".join(shlex.join(argv) for argv in install_commands(c.python, report.missing))
    return warn(f"missing or too old: {', '.join(p.describe() for p in report.missing)}; {when} installs them",
                commands)


@check("python.build-prerequisites", "python", "Build prerequisites in the target Python", live_only=True)
def python_build_prerequisites(c: DoctorContext) -> Outcome:
    return _requirements_outcome(c, c.recipe.python.build, "`flagtree-cpu build`")


@check("python.runtime-prerequisites", "python", "Run-time prerequisites (torch, numpy)", live_only=True)
def python_runtime_prerequisites(c: DoctorContext) -> Outcome:
    return _requirements_outcome(c, c.recipe.python.runtime, "`flagtree-cpu setup` (or validate --install-prereqs)")


@check("python.foreign-triton", "python", "A pip-installed triton the build would replace", live_only=True)
def python_foreign_triton(c: DoctorContext) -> Outcome:
    facts = python_facts(c)
    if facts is None:
        return skip(f"{c.python} does not exist yet")
    version = facts["found"].get("triton")
    if version is None:
        return ok("no triton installed yet")
    direct = json.loads(facts.get("direct_urls", {}).get("triton") or "{}")
    installed_from = Path(urlparse(direct.get("url", "")).path or "/nonexistent")
    if direct.get("dir_info", {}).get("editable") and installed_from.is_relative_to(c.workspace.root):
        return ok(f"triton {version} is this workspace's editable build ({installed_from})")
    return warn(f"triton {version} from elsewhere is installed in {c.python}: FlagTree's setup.py uninstalls it "
                "when it builds", f"{c.python} -m pip uninstall -y triton   # or build into another venv (--python)")


# --- C/C++ runtime ---------------------------------------------------------------------------------------

_LIB_DIRS = {"aarch64": ("lib/aarch64-linux-gnu", "usr/lib/aarch64-linux-gnu", "lib64", "usr/lib64"),
             "x86_64": ("lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib64", "usr/lib64")}


def _system_library(c: DoctorContext, name: str) -> Path | None:
    for folder in _LIB_DIRS.get(c.host.arch, ()):
        candidate = c.sysroot / folder / name
        if candidate.exists():
            return candidate
    return None


def _binaries(c: DoctorContext) -> list[Path]:
    """A sample of the LLVM prebuilt's executables and libraries, plus what the build produced."""
    found: list[Path] = []
    for artifact in c.recipe.artifacts.values():
        tree = Path(artifact.path)
        if read_stamp(tree) is None:
            continue
        for folder, pattern in (("bin", "*"), ("lib", "*.so*")):
            found += sorted(p for p in (tree / folder).glob(pattern) if p.is_file() and not p.is_symlink())[:6]
    if c.recipe.build:
        cwd = Path(c.recipe.build.cwd)
        found += [p for pattern in c.recipe.build.products for p in cwd.glob(pattern) if p.is_file()]
    return found


@check("runtime.glibc", "runtime", "GLIBC/GLIBCXX versions the binaries need", live_only=True)
def runtime_glibc(c: DoctorContext) -> Outcome:
    binaries = _binaries(c)
    if not binaries:
        return skip("no LLVM tree or build products yet (flagtree-cpu fetch / build)")
    needs: dict[str, set[str]] = {}
    foreign = set()
    for binary in binaries:
        try:
            versions = read_versions(binary)
        except (NotElf, OSError, ValueError):
            continue
        if versions.machine != c.host.arch:
            foreign.add(versions.machine)
            continue
        for library, names in versions.needs.items():
            needs.setdefault(library, set()).update(names)
    if foreign and not needs:
        return skip(f"the binaries are {', '.join(sorted(foreign))}; this machine ({c.host.arch}) cannot run them")
    problems, newest = [], {}
    for library in ("libc.so.6", "libstdc++.so.6", "libgcc_s.so.1"):
        wanted = needs.get(library)
        system = _system_library(c, library)
        if not wanted or system is None:
            continue
        provided = read_versions(system).defines
        missing = sorted(wanted - provided, key=version_key)
        if missing:
            problems.append(f"{', '.join(missing)} not in {system}")
            newest[library] = max((v for v in provided if v.startswith(missing[0].split('_')[0] + "_")),
                                  key=version_key, default="none")
    if not problems:
        return ok(f"{len(binaries)} binaries checked; the system libraries provide every version they need")
    return fail("the binaries need newer C/C++ runtime versions: " + "; ".join(problems) + " (newest here: "
                + ", ".join(newest.values()) + ")",
                "install a newer libstdc++/glibc (e.g. a newer GCC's runtime) and preload it, as FlagTree's FAQ "
                "says: export LD_PRELOAD=/path/to/newer/libstdc++.so.6")


# --- disk ------------------------------------------------------------------------------------------


@check("resources.disk", "resources", "Free disk in the workdir and under ~/.triton", live_only=True)
def resources_disk(c: DoctorContext) -> Outcome:
    from ..workspace import triton_home

    needs = {"workdir": (c.workspace.root, c.recipe.resources.workdir_disk_gb),
             "~/.triton": (triton_home(c.environ) / ".triton", c.recipe.resources.triton_home_disk_gb)}
    by_device: dict[int, list[tuple[str, Path, float]]] = {}
    for label, (path, gb) in needs.items():
        where = existing_parent(path)
        by_device.setdefault(os.stat(where).st_dev, []).append((label, where, gb))
    parts, short = [], []
    for entries in by_device.values():
        stats = os.statvfs(entries[0][1])
        free = stats.f_bavail * stats.f_frsize / GIB
        wanted = sum(gb for _, _, gb in entries)
        labels = " and ".join(label for label, _, _ in entries)
        parts.append(f"{labels}: {free:.1f} GiB free" + (f" (needs {wanted:g})" if wanted else ""))
        if free < wanted:
            short.append(f"{labels} ({entries[0][1]}): {free:.1f} of {wanted:g} GiB")
    if short:
        return fail("not enough free disk: " + "; ".join(short),
                    "free space, or use --workdir on a larger disk (and TRITON_HOME for ~/.triton)")
    return ok("; ".join(parts))
