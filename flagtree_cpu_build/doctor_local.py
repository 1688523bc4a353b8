"""doctor checks of this machine's tools, Python, C/C++ runtime, disk, network and workspace.

They are skipped for a ``--sysroot`` snapshot (a copy of a board's /proc, /sys and /etc
says nothing about the tools or the workspace on the machine doctor runs on).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlparse

from .doctor import DoctorContext, Outcome, check, fail, ok, skip, warn
from .elfinfo import NotElf, read_versions, version_key
from .extract import read_stamp
from .proc import capture

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


@check("toolchain.git", "toolchain", "git", live_only=True)
def tool_git(c: DoctorContext) -> Outcome:
    path, version = _version_of("git")
    if path is None:
        return fail("git is not installed", "sudo apt-get install -y git")
    return ok(f"git {version} ({path})")


def _build_tool(c: DoctorContext, command: str, minimum: tuple[int, ...], package: str) -> Outcome:
    venv_tool = c.python.parent / command
    path, version = _version_of(str(venv_tool)) if venv_tool.exists() else _version_of(command)
    wanted = ".".join(map(str, minimum))
    if path is not None and _at_least(version, minimum):
        return ok(f"{command} {version} ({path})")
    found = f"{command} {version} at {path} is older than {wanted}" if path else f"no {command} on PATH"
    return warn(f"{found}; `flagtree-cpu build` installs a recent one into the venv with pip",
                f"sudo apt-get install -y {package}   # or let flagtree-cpu build install it")


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
        return fail(f"no C++ compiler ({compiler}) on PATH", "sudo apt-get install -y build-essential")
    text = capture([path, "--version"], timeout_s=10).stdout
    clang = re.search(r"clang version (\d+)\.", text)
    gcc = re.search(r"\) (\d+)\.\d+", text.splitlines()[0] if text else "")
    family, major = ("Clang", int(clang.group(1))) if clang else ("GCC", int(gcc.group(1)) if gcc else 0)
    minimum = 14 if family == "Clang" else 12
    name = f"{family} {major}" if major else text.splitlines()[0] if text else compiler
    if major < minimum:
        return fail(f"{name} ({path}) does not know -march=armv9-a+sve2+i8mm+bf16 (needs GCC 12 or Clang 14)",
                    "sudo apt-get install -y gcc-12 g++-12 && export CC=gcc-12 CXX=g++-12")
    if c.host.arch != "aarch64":
        return ok(f"{name} ({path}); the armv9-a flag is not tried on a {c.host.arch} host")
    probe = capture([path, "-x", "c++", "-march=armv9-a+sve2+i8mm+bf16", "-fsyntax-only", "-"], timeout_s=20)
    if probe.returncode != 0:
        error = (probe.stderr.strip().splitlines() or ["(no message)"])[-1]
        return fail(f"{name} rejects -march=armv9-a+sve2+i8mm+bf16: {error}",
                    "install a newer compiler: sudo apt-get install -y gcc-13 g++-13 && export CC=gcc-13 CXX=g++-13")
    return ok(f"{name} ({path}) accepts -march=armv9-a+sve2+i8mm+bf16")


@check("toolchain.ccache", "toolchain", "ccache (optional, faster rebuilds)", live_only=True)
def tool_ccache(c: DoctorContext) -> Outcome:
    path, version = _version_of("ccache")
    if path:
        return ok(f"ccache {version}: builds use it (TRITON_BUILD_WITH_CCACHE=true)")
    return warn("no ccache: every rebuild compiles everything again", "sudo apt-get install -y ccache")


@check("toolchain.pkg-config", "toolchain", "pkg-config", live_only=True)
def tool_pkg_config(c: DoctorContext) -> Outcome:
    path, version = _version_of("pkg-config")
    if path:
        return ok(f"pkg-config {version}")
    return warn("no pkg-config on PATH", "sudo apt-get install -y pkg-config")


@check("toolchain.openmp", "toolchain", "OpenMP runtime (kernels link it)", live_only=True)
def tool_openmp(c: DoctorContext) -> Outcome:
    compiler = shutil.which(c.environ.get("CC", "cc"))
    for library in ("libgomp.so", "libomp.so"):
        if compiler:
            answer = capture([compiler, f"-print-file-name={library}"], timeout_s=10).stdout.strip()
            if answer and os.path.isabs(answer) and os.path.exists(answer):
                return ok(f"{library} at {answer}")
    return fail("no OpenMP runtime (libgomp/libomp) for the compiler: JIT-compiled kernels link it",
                "sudo apt-get install -y libomp-dev libgomp1")


# --- Python -----------------------------------------------------------------------------------------


def _python_facts(c: DoctorContext) -> dict | None:
    """One run of the target interpreter for every Python check (cached)."""
    if "python" not in c.cache:
        if not c.python.exists():
            c.cache["python"] = None
        else:
            from packaging.requirements import Requirement

            from .pythonenv import inspect

            names = [Requirement(r.requirement).name for r in (*c.recipe.python.build, *c.recipe.python.runtime)]
            c.cache["python"] = inspect(c.python, [*names, "triton", "flag_gems"])
    return c.cache["python"]


@check("python.version", "python", "Target Python interpreter", live_only=True)
def python_version(c: DoctorContext) -> Outcome:
    from packaging.specifiers import SpecifierSet

    requires = c.recipe.python.requires
    facts = _python_facts(c)
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
    from .pythonenv import check as check_prerequisites
    from .pythonenv import install_commands

    facts = _python_facts(c)
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
    facts = _python_facts(c)
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


# --- disk and network ------------------------------------------------------------------------------------------


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


@check("resources.disk", "resources", "Free disk in the workdir and under ~/.triton", live_only=True)
def resources_disk(c: DoctorContext) -> Outcome:
    from .workspace import triton_home

    needs = {"workdir": (c.workspace.root, c.recipe.resources.workdir_disk_gb),
             "~/.triton": (triton_home(c.environ) / ".triton", c.recipe.resources.triton_home_disk_gb)}
    by_device: dict[int, list[tuple[str, Path, float]]] = {}
    for label, (path, gb) in needs.items():
        where = _existing(path)
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


def _endpoints(c: DoctorContext) -> list[tuple[str, int, str]]:
    """(host, port, who uses it) for each place a clone or download would connect to, after git's
    insteadOf rules; each host:port once."""
    from .gitcmd import git_result

    users: dict[tuple[str, int], list[str]] = {}
    for name, source in c.recipe.sources.items():
        status, url, _ = git_result(["ls-remote", "--get-url", source.url])
        for host, port in _endpoint(url.strip() if status == 0 else source.url):
            users.setdefault((host, port), []).append(f"sources.{name}")
    for name, artifact in c.recipe.artifacts.items():
        for host, port in _endpoint(artifact.url):
            users.setdefault((host, port), []).append(f"artifacts.{name}")
    return [(host, port, ", ".join(names)) for (host, port), names in users.items()]


def _endpoint(url: str) -> list[tuple[str, int]]:
    parsed = urlparse(url)
    default = {"https": 443, "http": 80, "git": 9418, "ssh": 22}.get(parsed.scheme)
    if not parsed.hostname or default is None:
        return []  # a local path or file:// URL: nothing to reach
    return [(parsed.hostname, parsed.port or default)]


def _proxy_for(c: DoctorContext, host: str, port: int) -> tuple[str, int] | None:
    if port not in (80, 443):
        return None
    no_proxy = (c.environ.get("no_proxy") or c.environ.get("NO_PROXY") or "").split(",")
    if any(entry.strip() and (host == entry.strip().lstrip(".") or host.endswith("." + entry.strip().lstrip(".")))
           for entry in no_proxy):
        return None
    names = ("https_proxy", "HTTPS_PROXY") if port == 443 else ("http_proxy", "HTTP_PROXY")
    value = next((c.environ[n] for n in (*names, "all_proxy", "ALL_PROXY") if c.environ.get(n)), None)
    if not value:
        return None
    proxy = urlparse(value if "://" in value else f"http://{value}")
    return (proxy.hostname, proxy.port or 3128) if proxy.hostname else None


@check("network.hosts", "network", "Recipe hosts reachable", live_only=True)
def network_hosts(c: DoctorContext) -> Outcome:
    if c.offline:
        return skip("--offline")
    endpoints = _endpoints(c)
    if not endpoints:
        return ok("every source and artifact is local")

    def probe(endpoint: tuple[str, int, str]) -> tuple[tuple[str, int, str], str | None, str]:
        host, port, _what = endpoint
        target = _proxy_for(c, host, port)
        dial = target or (host, port)
        via = f" via proxy {dial[0]}:{dial[1]}" if target else ""
        try:
            with socket.create_connection(dial, timeout=c.network_timeout_s):
                return endpoint, None, via
        except OSError as exc:
            return endpoint, f"{exc.__class__.__name__}: {exc}", via

    with ThreadPoolExecutor(max_workers=len(endpoints)) as pool:
        results = list(pool.map(probe, endpoints))
    bad = [f"{host}:{port} ({what}){via}: {error}" for (host, port, what), error, via in results if error]
    if not bad:
        return ok(", ".join(f"{h}:{p}{via}" for (h, p, _), _, via in results) + " reachable")
    return fail(f"{len(bad)} of {len(results)} unreachable: " + "; ".join(bad),
                "check the network and proxy (https_proxy); or mirrors: --mirror for artifacts, git's "
                "url.<mirror>.insteadOf for sources; or work offline: sync --git-cache, fetch --offline --from")


@check("network.proxy", "network", "Proxy settings in effect", live_only=True)
def network_proxy(c: DoctorContext) -> Outcome:
    names = ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY")
    settings = [f"{n}={c.environ[n]}" for n in names if c.environ.get(n)]
    return ok("; ".join(settings) if settings else "no proxy variables set")


# --- workspace --------------------------------------------------------------------------------------------------


def _workspace_exists(c: DoctorContext) -> bool:
    return c.workspace.root.is_dir()


@check("workspace.sources", "workspace", "Sources at their pins", live_only=True)
def workspace_sources(c: DoctorContext) -> Outcome:
    from .gitcmd import git_result
    from .lockfile import read_lock

    if not _workspace_exists(c):
        return skip(f"no workspace at {c.workspace.root} yet")
    lock = read_lock(c.workspace.lock_file)
    problems, dirty, good = [], [], []
    for name, source in c.recipe.sources.items():
        checkout = c.workspace.root / c.recipe.source_path(name)
        locked = lock.sources.get(name) if lock else None
        wanted = (source.commit or "").lower() or (locked.commit if locked else None)
        if not (checkout / ".git").exists():
            problems.append(f"{name} not checked out")
            continue
        head = git_result(["rev-parse", "HEAD"], cwd=checkout)[1].strip()
        if wanted and head != wanted:
            problems.append(f"{name} at {head[:12]}, pinned {wanted[:12]}")
            continue
        changes = git_result(["status", "--porcelain", "--untracked-files=no"], cwd=checkout)[1].strip()
        (dirty if changes else good).append(f"{name} @{head[:12]}")
    if problems:
        return fail("; ".join(problems), "flagtree-cpu sync")
    if dirty:
        return warn(f"local changes to tracked files in {', '.join(dirty)} (the build includes them)",
                    "git -C <checkout> status   # commit or stash them if they are not meant for the build")
    return ok(", ".join(good))


@check("workspace.links", "workspace", "The recipe's symlinks", live_only=True)
def workspace_links(c: DoctorContext) -> Outcome:
    from .links import plan_links

    if c.recipe.links is None:
        return skip("the recipe has no links")
    root = c.workspace.root / c.recipe.source_path(c.recipe.links.root)
    if not root.is_dir():
        return skip(f"{c.recipe.links.root} is not checked out yet")
    bad = [link for link in plan_links(c.recipe, c.workspace).links if link.state != "ok"]
    if bad:
        return fail(f"{len(bad)} of {len(c.recipe.links.entries)} not as the recipe says: "
                    + ", ".join(f"{b.path} ({b.state})" for b in bad[:4]) + (" ..." if len(bad) > 4 else ""),
                    "flagtree-cpu link   # No module named ...tle_ops at run time means exactly this")
    return ok(f"all {len(c.recipe.links.entries)} in place")


@check("workspace.llvm", "workspace", "The published LLVM tree", live_only=True)
def workspace_llvm(c: DoctorContext) -> Outcome:
    from .lockfile import read_lock

    if not c.recipe.artifacts:
        return skip("the recipe has no artifacts")
    lock = read_lock(c.workspace.lock_file) if _workspace_exists(c) else None
    problems, good = [], []
    for name, artifact in c.recipe.artifacts.items():
        stamp = read_stamp(Path(artifact.path))
        locked = lock.artifacts.get(name) if lock else None
        wanted = (artifact.sha256 or "").lower() or (locked.sha256 if locked and locked.url == artifact.url else None)
        if stamp is None and not _workspace_exists(c):
            return skip(f"no workspace at {c.workspace.root} yet, and nothing published at {artifact.path}")
        if stamp is None:
            problems.append(f"{name}: nothing published at {artifact.path}")
        elif stamp.get("url") != artifact.url or (wanted and stamp.get("sha256") != wanted):
            problems.append(f"{name}: {artifact.path} holds another download")
        else:
            good.append(f"{name} {stamp['sha256'][:12]} at {artifact.path}")
    if problems:
        return fail("; ".join(problems), "flagtree-cpu fetch")
    return ok(", ".join(good))


@check("workspace.build", "workspace", "The last build is current", live_only=True)
def workspace_build(c: DoctorContext) -> Outcome:
    from .gitcmd import git_result

    stamp_file = c.workspace.state_dir / "build-editable.json"
    if not stamp_file.is_file():
        return skip("no build yet" if _workspace_exists(c) else f"no workspace at {c.workspace.root} yet")
    stored = json.loads(stamp_file.read_text())["components"]
    changed = []
    for name, recorded in stored.get("sources", {}).items():
        if name in c.recipe.sources:
            head = git_result(["rev-parse", "HEAD"], cwd=c.workspace.root / c.recipe.source_path(name))[1].strip()
            if head != recorded.get("commit"):
                changed.append(f"{name} moved to {head[:12]}")
    for name, sha in stored.get("artifacts", {}).items():
        artifact = c.recipe.artifacts.get(name)
        if artifact is not None and (read_stamp(Path(artifact.path)) or {}).get("sha256") != sha:
            changed.append(f"{name} changed")
    if changed:
        return warn(f"built before: {', '.join(changed)}", "flagtree-cpu build")
    return ok("built from the sources and LLVM now in place")


@check("workspace.build-env", "workspace", "Inherited variables that would mislead a manual build", live_only=True)
def workspace_build_env(c: DoctorContext) -> Outcome:
    llvm_paths = {a.path for a in c.recipe.artifacts.values()}
    notes = []
    if c.environ.get("LLVM_SYSPATH") and c.environ["LLVM_SYSPATH"] not in llvm_paths:
        notes.append(f"LLVM_SYSPATH={c.environ['LLVM_SYSPATH']} is not the recipe's LLVM")
    if c.environ.get("TRITON_OFFLINE_BUILD", "").upper() == "ON":
        notes.append("TRITON_OFFLINE_BUILD=ON turns on FlagTree's own offline mode (needs FLAGTREE_OFFLINE_BUILD_DIR)")
    backend = c.environ.get("FLAGTREE_BACKEND")
    if backend and backend != "cpu":
        notes.append(f"FLAGTREE_BACKEND={backend}")
    if notes:
        names = " ".join(sorted({n.split("=")[0] for n in notes}))
        return warn("; ".join(notes) + " (flagtree-cpu build overrides them; a hand-run pip install would not)",
                    f"unset {names}")
    return ok("nothing that conflicts")


@check("workspace.runtime-env", "workspace", "Run-time variables for JIT-compiled kernels", live_only=True)
def workspace_runtime_env(c: DoctorContext) -> Outcome:
    missing = [f"{k}={v}" for k, v in c.recipe.runtime.env.items() if c.environ.get(k) != v]
    facts = _python_facts(c) if c.python.exists() else None
    gems = bool(facts and facts["found"].get("flag_gems"))
    important = [m for m in missing if not m.startswith("FLAGGEMS_VENDOR=") or gems]
    if important:
        why = " (kernels fail: kernel.s: Error: junk at end of line)" if any(
            m.startswith("FLAGTREE_BACKEND=") for m in important) else ""
        return warn(f"not exported in this shell: {', '.join(important)}{why}", 'eval "$(flagtree-cpu env)"')
    return ok("the recipe's run-time variables are exported" if not missing else
              "FLAGTREE_BACKEND is set; FLAGGEMS_VENDOR matters only once FlagGems is installed")


@check("workspace.install-prefix", "workspace", "The per-user install prefix is writable", live_only=True)
def workspace_install_prefix(c: DoctorContext) -> Outcome:
    arguments = c.recipe.build.env.get("TRITON_APPEND_CMAKE_ARGS", "") if c.recipe.build else ""
    match = re.search(r"-DCMAKE_INSTALL_PREFIX=(\S+)", arguments)
    if not match:
        return skip("the recipe sets no install prefix")
    prefix = Path(match.group(1))
    where = _existing(prefix)
    if os.access(where, os.W_OK):
        return ok(f"{prefix} {'is' if where == prefix else 'can be created'} writable")
    return fail(f"{prefix} is not writable (sleef's install step would fail with Permission denied)",
                f"sudo chown -R $USER {where}   # or set a prefix you own in the recipe")
