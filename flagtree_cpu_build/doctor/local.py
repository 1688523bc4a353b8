"""doctor checks of this machine's tools, C/C++ runtime and disk (the Python's are in ``interpreter``, the
network's in ``network``).

What they ask for is the recipe's: the compilers and libraries of ``platform.host.requires``, the
pre-provisioned ``toolchains``, the commands ``python.build`` may take from the system, the build's
``distribution`` and the ``resources.disk`` needs.

They are skipped for a ``--sysroot`` snapshot (a copy of a board's /proc, /sys and /etc
says nothing about the tools or the workspace on the machine doctor runs on).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from ..elfinfo import NotElf, read_versions, version_key
from ..extract import read_stamp
from ..proc import capture
from ..recipe import CompilerRequirement, LibraryRequirement
from ..recipe.platform import compiler_minimum
from .facts import applicable, build_env_value, builds, existing_parent, final_build_spec, selector_facts
from .kit import BUILD, DoctorContext, Outcome, check, fail, ok, skip, warn, with_article

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


def _tool_present(c: DoctorContext, command: str, package: str, missing: str, *, required: bool,
                  note: str = "") -> Outcome:
    path, version = _version_of(command)
    if path is not None:
        return ok(f"{command} {version} ({path}){note}")
    return (fail if required else warn)(missing, c.as_root(f"apt-get install -y {package}"))


@check("toolchain.git", "toolchain", "git", live_only=True, blocks=("sources",))
def tool_git(c: DoctorContext) -> Outcome:
    return _tool_present(c, "git", "git", "git is not installed", required=True)


@check("toolchain.build-commands", "toolchain", "System commands python.build accepts instead of pip packages",
       live_only=True, blocks=BUILD)
def tool_build_commands(c: DoctorContext) -> Outcome:
    from packaging.requirements import Requirement
    from packaging.version import InvalidVersion

    wanted = [r for r in c.recipe.python.build if r.system_command]
    if not wanted:
        return skip("the recipe's python.build names no system commands")
    found, short = [], []
    for requirement in wanted:
        command = requirement.system_command
        venv_tool = c.options.python.parent / command  # the build puts the venv's bin first on PATH
        path, version = _version_of(str(venv_tool)) if venv_tool.exists() else _version_of(command)
        specifier = Requirement(requirement.requirement).specifier
        try:
            fits = version is not None and specifier.contains(version, prereleases=True)
        except InvalidVersion:
            fits = False
        if path is not None and fits:
            found.append(f"{command} {version} ({path})")
        else:
            short.append((requirement.requirement, f"{command} {version} at {path} does not satisfy "
                          f"{requirement.requirement}" if path else f"no {command} on PATH"))
    if not short:
        return ok(", ".join(found))
    import shlex

    install = shlex.join([str(c.options.python), "-m", "pip", "install", *(r for r, _ in short)])
    return warn("; ".join(d for _, d in short) + "; `flagtree-cpu build` installs them into the venv with pip",
                f"{install}   # or let flagtree-cpu build install them")


def _compiler_name(path: str, command: str) -> tuple[str, str, tuple[int, ...]]:
    """(family, printable name, version) of a compiler: GCC or Clang, from its --version (9.3.1 -> (9, 3, 1);
    () when it does not say)."""
    from ..compiler_facts import parse_version_text

    text = capture([path, "--version"], timeout_s=10).stdout
    family, found = parse_version_text(text)  # what a recipe's `when: {compiler: ...}` is judged by, too
    version = tuple(int(part) for part in found.split(".")) if found else ()
    name = f"{family} {found}" if found else text.splitlines()[0] if text else command
    return family, name, version


def _one_compiler(c: DoctorContext, requirement: CompilerRequirement) -> Outcome:
    compiler = build_env_value(c, requirement.env, requirement.default)
    why = f": {requirement.why}" if requirement.why else ""
    fix = c.root_fix(requirement.fix)
    path = shutil.which(compiler)
    if path is None:
        return fail(f"no C++ compiler ({requirement.env}={compiler}) on PATH{why}",
                    fix or c.as_root("apt-get install -y build-essential"))
    family, name, version = _compiler_name(path, compiler)
    minimum = requirement.min.get(family.lower())
    # compared number by number, so 9.3.1 < 9.4 and 11 >= 9.4; a bare major (9) is (9,): any 9.x meets it
    if minimum is not None and version[:len(compiler_minimum(minimum))] < compiler_minimum(minimum):
        needs = " or ".join(f"{'GCC' if f == 'gcc' else 'Clang'} {m}" for f, m in requirement.min.items())
        return fail(f"{name} ({path}) is older than the recipe needs ({needs}){why}",
                    fix or f"install {needs} and point {requirement.env} at it")
    flags = " ".join(requirement.flags)
    if not requirement.flags:
        return ok(f"{name} ({path})")
    if c.host.arch not in c.recipe.platform.host.arch:  # another machine's flags: a wrong host is host.arch's news
        return ok(f"{name} ({path}); {flags} is not tried on {with_article(c.host.arch)} host")
    for flag in requirement.flags:
        probe = capture([path, "-x", "c++", flag, "-fsyntax-only", "-"], timeout_s=20)
        if probe.returncode != 0:
            error = (probe.stderr.strip().splitlines() or ["(no message)"])[-1]
            return fail(f"{name} rejects {flag}: {error}{why}",
                        fix or f"install a compiler that accepts {flag} and point {requirement.env} at it")
    return ok(f"{name} ({path}) accepts {flags}")


@check("toolchain.compiler", "toolchain", "C/C++ compiler the recipe asks for", live_only=True, blocks=BUILD)
def tool_compiler(c: DoctorContext) -> Outcome:
    wanted = applicable(c, c.recipe.platform.host.requires.compilers)
    if not wanted:
        return skip("the recipe asks nothing of the compiler")
    outcomes = [_one_compiler(c, requirement) for requirement in wanted]
    return _combined(outcomes)


def _combined(outcomes: list[Outcome]) -> Outcome:
    """One outcome for several requirements: the worst status, each detail, the fixes of the failures."""
    for status in ("fail", "warn"):
        bad = [o for o in outcomes if o.status == status]
        if bad:
            return Outcome(status, "; ".join(o.detail for o in bad), "; ".join(dict.fromkeys(o.fix for o in bad
                                                                                          if o.fix)))
    return ok("; ".join(o.detail for o in outcomes))


@check("toolchain.ccache", "toolchain", "ccache (optional, faster rebuilds)", live_only=True)
def tool_ccache(c: DoctorContext) -> Outcome:
    uses = list(dict.fromkeys(f"{k}={v}" for b in builds(c).values() for e in b.env.if_command
                              if e.command == "ccache" for k, v in e.set.items()))
    return _tool_present(c, "ccache", "ccache", "no ccache: every rebuild compiles everything again", required=False,
                         note=f"; builds use it ({', '.join(uses)})" if uses else "")


@check("toolchain.compile-cache", "toolchain", "The shared compile cache (ccache's remote storage)", live_only=True)
def tool_compile_cache(c: DoctorContext) -> Outcome:
    from .. import compile_cache as cc

    given = [b.compile_cache for b in builds(c).values() if b.compile_cache]  # the final build's first
    chosen = cc.configured(None, c.environ, given[-1] if given else None)
    if chosen is None:
        return skip(f"no compile cache configured (build --compile-cache URL, ${cc.ENV_VAR} or build.compile_cache)")
    try:
        url = cc.parse_url(chosen[0])
    except cc.CompileCacheUrlError as err:
        return warn(f"{chosen[1]}: {err.message}", err.fix or "")
    env = cc.lookup_env(c.options.python, c.environ)
    path, version = cc.ccache_version(env)
    why = cc.unsuitable(path, version)
    if why is not None:
        return warn(f"compile cache {url.shown}: {why}; builds go without it",
                    c.as_root("apt-get install -y ccache") + "  # 4.4 or newer has remote storage")
    assert path is not None and version is not None
    refused = cc.ccache_refuses(url, version, cc.storage_helper(url, path, version, env))
    if refused is not None:
        return warn(f"compile cache {url.shown} (from {chosen[1]}): {refused} ({path}); build and setup stop with "
                    "exit 2", cc.FIX)
    silent = cc.answers(url)
    if silent is not None:
        return warn(f"compile cache {url.shown} (from {chosen[1]}): {silent}; builds use the local ccache only",
                    f"check the server at {url.address} is running and reachable from here, or unset {cc.ENV_VAR}")
    return ok(f"compile cache {url.shown} answers (from {chosen[1]}); ccache {'.'.join(map(str, version))} ({path}) "
              "stores in it")


@check("toolchain.wheelhouse", "toolchain", "The fleet's wheelhouse (builds published by other machines)",
       live_only=True)
def tool_wheelhouse(c: DoctorContext) -> Outcome:
    import io
    import tempfile

    from .. import wheelhouse as wh
    from ..errors import UsageError
    from ..stages.build.prebuilt import read_wheels
    from ..ui import UI

    final = final_build_spec(c)  # the wheelhouse holds the final build's wheels
    chosen = wh.configured(None, c.environ, final.wheelhouse if final else None,
                           wh.imported_wheelhouse(c.workspace.recipe_state))
    if chosen is None:
        return skip(f"no wheelhouse configured (build/setup --wheelhouse, ${wh.ENV_VAR} or build.wheelhouse)")
    try:
        location = wh.parse_location(*chosen)
    except UsageError as err:
        return warn(err.message, err.fix or "")
    if c.options.offline and location.folder is None:
        return skip(f"--offline: the wheelhouse {location.given} was not asked")
    with tempfile.TemporaryDirectory(prefix="flagtree-cpu-doctor-") as scratch:
        wheels, why = read_wheels(location, UI(quiet=True, stderr=io.StringIO()), Path(scratch))
    if wheels is None:
        return warn(f"{why} (from {chosen[1]}); builds go on without it",
                    f"check {location.given} is reachable from here, or unset {wh.ENV_VAR}")
    mine = [w for w in wheels if w["recipe"] == c.recipe.name and w.get("variant") == c.recipe.variant]
    newest = max(mine, key=lambda w: str(w.get("built_on", {}).get("at", "")), default=None)
    latest = f"; the newest was built on {newest['built_on'].get('host', '?')} at " \
             f"{newest['built_on'].get('at', '?')}" if newest and isinstance(newest.get("built_on"), dict) else ""
    return ok(f"wheelhouse {location.given} (from {chosen[1]}): {len(wheels)} published builds, {len(mine)} of "
              f"{c.recipe.name}{latest}")


@check("toolchain.pkg-config", "toolchain", "pkg-config", live_only=True)
def tool_pkg_config(c: DoctorContext) -> Outcome:
    return _tool_present(c, "pkg-config", "pkg-config", "no pkg-config on PATH", required=False)


def _one_library(c: DoctorContext, requirement: LibraryRequirement) -> Outcome:
    compiler = shutil.which(build_env_value(c, requirement.compiler_env, requirement.compiler_default))
    for library in requirement.any_of:
        if compiler:
            answer = capture([compiler, f"-print-file-name={library}"], timeout_s=10).stdout.strip()
            if answer and os.path.isabs(answer) and os.path.exists(answer):
                return ok(f"{library} at {answer}")
    why = f": {requirement.why}" if requirement.why else ""
    return fail(f"no {requirement.name} ({' or '.join(requirement.any_of)}) for the compiler{why}",
                c.root_fix(requirement.fix) or f"install the package that provides {requirement.any_of[0]}")


@check("toolchain.libraries", "toolchain", "Libraries the compiler must find", live_only=True, blocks=BUILD)
def tool_libraries(c: DoctorContext) -> Outcome:
    wanted = applicable(c, c.recipe.platform.host.requires.libraries)
    if not wanted:
        return skip("the recipe asks for no libraries")
    return _combined([_one_library(c, requirement) for requirement in wanted])


@check("toolchain.provisioned", "toolchain", "Pre-provisioned toolchains the recipe names", live_only=True,
       blocks=BUILD)
def tool_provisioned(c: DoctorContext) -> Outcome:
    from ..buildenv import toolchain_shortfall
    from ..recipe.resolve import toolchain_override_var
    from ..toolchain_search import toolchain_verdict

    wanted = c.recipe.toolchains_on(selector_facts(c))
    if not wanted:
        return skip("the recipe names no pre-provisioned toolchains")
    variant = f" (recipe variant {c.recipe.variant})" if c.recipe.variant else ""
    problems, fixes, found = [], [], []
    for name, toolchain in wanted.items():
        shortfall = toolchain_shortfall(toolchain)
        if shortfall is None:
            found.append(_found(name, toolchain_verdict(toolchain).chosen))
            continue
        why = f"; {toolchain.why}" if toolchain.why else ""
        problems.append(f"toolchain {name}{variant}: {shortfall}{why}")
        override = toolchain_override_var(name)
        if toolchain.fix and override in toolchain.fix:  # the recipe's fix already says it: not twice
            fixes.append(c.root_fix(toolchain.fix))
        else:
            fixes.append((c.root_fix(toolchain.fix) + ", or " if toolchain.fix else "")
                         + f"export {override}=<where {name} is installed on this machine>")
    if problems:
        return fail("; ".join(problems), "; ".join(fixes))
    return ok(", ".join(found))


def _found(name: str, place: object) -> str:
    """``NAME at PATH`` with the version read and, when it was not a fixed folder, how it was found."""
    path, version, origin = (getattr(place, k, None) for k in ("path", "version", "origin"))
    how = f", {origin}" if origin and not (origin == "path" or origin.startswith("paths[")) else ""
    return f"{name} at {path}" + (f" ({version}{how})" if version else f" ({how[2:]})" if how else "")


# --- C/C++ runtime ---------------------------------------------------------------------------------------

# Debian's multiarch folder is lib/<triplet>; the triplet is <arch>-linux-gnu except for these
_MULTIARCH = {"ppc64le": "powerpc64le-linux-gnu", "armv7l": "arm-linux-gnueabihf", "i686": "i386-linux-gnu"}


def _lib_dirs(arch: str) -> tuple[str, ...]:
    """Where a distribution keeps the C/C++ runtime: multiarch (Debian, Ubuntu), lib64 (Fedora, SUSE), lib."""
    triplet = _MULTIARCH.get(arch, f"{arch}-linux-gnu")
    return (f"lib/{triplet}", f"usr/lib/{triplet}", "lib64", "usr/lib64", "usr/lib")


def _system_library(c: DoctorContext, name: str) -> Path | None:
    for folder in _lib_dirs(c.host.arch):
        candidate = c.sysroot / folder / name
        if candidate.exists():
            return candidate
    return None


def _binaries(c: DoctorContext) -> list[Path]:
    """A sample of each published download's executables and libraries, plus what the build produced."""
    found: list[Path] = []
    for artifact in c.recipe.artifacts.values():
        tree = Path(artifact.path)
        if read_stamp(tree) is None:
            continue
        for folder, pattern in (("bin", "*"), ("lib", "*.so*")):
            found += sorted(p for p in (tree / folder).glob(pattern) if p.is_file() and not p.is_symlink())[:6]
    for build in builds(c).values():
        found += [p for pattern in build.products for p in Path(build.cwd).glob(pattern) if p.is_file()]
    return found


@check("runtime.glibc", "runtime", "GLIBC/GLIBCXX versions the binaries need", live_only=True, blocks=("validate",))
def runtime_glibc(c: DoctorContext) -> Outcome:
    binaries = _binaries(c)
    if not binaries:
        return skip("no published downloads or build products yet (flagtree-cpu fetch / build)")
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
                "install a newer libstdc++/glibc (e.g. a newer GCC's runtime) and preload it: "
                "export LD_PRELOAD=/path/to/newer/libstdc++.so.6")


# --- disk ------------------------------------------------------------------------------------------


@check("resources.disk", "resources", "Free disk where the recipe needs it", live_only=True,
       blocks=("sources", "artifacts"))
def resources_disk(c: DoctorContext) -> Outcome:
    needs = c.recipe.resources.disk
    if not needs:
        return skip("the recipe states no disk needs")
    # folders on one file system share its free space: their needs add up
    by_device: dict[int, list[tuple[str, Path, float]]] = {}
    for need in needs:
        where = existing_parent(c.workspace.root / need.path)  # a relative path is inside the workdir
        by_device.setdefault(os.stat(where).st_dev, []).append((need.label or need.path, where, need.gb))
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
        from ..workspace import triton_home

        home = triton_home(c.environ)  # {triton_home} follows TRITON_HOME: a need under it can move
        moves = any((c.workspace.root / n.path).is_relative_to(home) for n in needs)
        return fail("not enough free disk: " + "; ".join(short), "free space, or use --workdir on a larger disk"
                    + (f" (and TRITON_HOME for what is under {home})" if moves else ""))
    return ok("; ".join(parts))
