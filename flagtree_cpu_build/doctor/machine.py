"""doctor checks of the machine itself — host, CPU, devices, system packages, memory.

Nearly everything here reads files under the sysroot (``/`` or a ``--sysroot`` snapshot of a
board), so a board can be diagnosed from a copy of its /proc, /sys and /etc; a snapshot holds no /dev and no
PATH, only what ``gpu_facts`` records (the accelerator nodes, nvidia-smi's answer), so other device nodes and
commands are checked on the machine itself. What is checked
comes from the recipe's ``platform`` (host arches and requirements, the target's CPU features).
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path
from typing import Any

from ..buildenv import compute_jobs
from ..cpuinfo import SVE_FILE, SVE_PRCTL, cpu_list, sve_length_from_prctl
from ..gpu_facts import (
    GpuRecord,
    is_device_glob,
    live_device_matches,
    manifest_of,
    recorded_device_matches,
    recorded_gpu,
)
from ..recipe.reads import unread
from ..system_packages import (  # the one reading of dpkg's status file and of rpm's answer
    missing_apt_packages,
    missing_rpm_packages,
    system_install_argv,
    wanted_packages,
)
from .facts import applicable, builds, selector_facts
from .kit import BUILD, RUN, DoctorContext, Outcome, check, fail, ok, skip, warn, with_article

GIB = 1024**3
NO_GPU_RECORD = GpuRecord(frozenset(), None, None)


@check("host.os", "host", "Operating system and distribution")
def host_os(c: DoctorContext) -> Outcome:
    h = c.host
    if not h.os_id:
        return warn("no /etc/os-release: the distribution is unknown, so is which of the recipe's download "
                    "variants applies", "check that this is a regular Linux installation (cat /etc/os-release)")
    tarballs = _download_names(c.recipe.artifacts) or "no downloads"
    # an artifact variant chosen for this distribution: say so, the download differs from the default one
    facts = selector_facts(c)
    chosen = [name for name, a in c.recipe.artifacts.items()
              if any(v.when.os_id and v.when.matches(facts) for v in a.variants)]
    note = f" ({', '.join(chosen)}: the recipe's variant for {h.os_id})" if chosen else ""
    return ok(f"{h.os_pretty_name or h.os_id} (ID={h.os_id}): {tarballs}{note}")


def _download_names(artifacts: dict[str, Any]) -> str:
    """The files the artifacts download; a part of a name read from a source's file after sync (``{match}``) shows
    as `…`, not as the recipe's placeholder."""
    names = [_UNREAD.sub("…", Path(a.url).name) for a in artifacts.values()]
    later = any(unread(a) for a in artifacts.values())
    return ", ".join(names) + (" (… is read from the sources' files after sync)" if later else "")


_UNREAD = re.compile(r"\{match(\.[A-Za-z0-9_]+)?\}")


@check("host.arch", "host", "Architecture the recipe builds on", blocks=BUILD)
def host_arch(c: DoctorContext) -> Outcome:
    host = c.recipe.platform.host
    if c.host.arch in host.arch:
        target = c.recipe.target_arch(c.host.arch)
        cross = f"; the products run on {target} (a cross build)" if target != c.host.arch else ""
        return ok(f"{c.host.arch}, as the recipe requires{cross}")
    why = f" ({host.why})" if host.why else ""
    return fail(f"this machine is {c.host.arch}; recipe {c.recipe.name} builds on {', '.join(host.arch)}{why}",
                host.advice or f"build on {with_article(' or '.join(host.arch))} machine")


@check("host.os-version", "host", "OS release the recipe builds on (`platform.host.os_version`)", blocks=BUILD)
def host_os_version(c: DoctorContext) -> Outcome:
    from ..recipe.selector import os_version_matches

    host = c.recipe.platform.host
    if not host.os_version:
        return skip("the recipe builds on any release")
    wanted = ", ".join(host.os_version)
    if os_version_matches(host.os_version, c.host.os_version_id):
        return ok(f"{c.host.os_id} {c.host.os_version_id}, as the recipe requires ({wanted})")
    have = f"{c.host.os_id} {c.host.os_version_id}" if c.host.os_version_id else \
        f"{c.host.os_id or 'this system'} (its /etc/os-release has no VERSION_ID)"
    why = f" ({host.why})" if host.why else ""
    return fail(f"this machine is {have}; recipe {c.recipe.name} builds on release {wanted}{why}",
                host.advice or f"build on a machine whose /etc/os-release VERSION_ID is {wanted}")


@check("host.glibc", "host", "glibc the recipe builds with (platform.host.requires.glibc)", blocks=BUILD)
def host_glibc(c: DoctorContext) -> Outcome:
    from packaging.specifiers import SpecifierSet

    host = c.recipe.platform.host
    wanted = host.requires.glibc
    if wanted is None:
        return skip("the recipe needs no particular glibc")
    if c.host.glibc is None:
        where = "the snapshot does not record it" if not c.live else "this C library is not glibc (musl?)"
        return skip(f"glibc unknown: {where}; the recipe needs glibc {wanted}")
    if SpecifierSet(wanted).contains(c.host.glibc, prereleases=True):
        return ok(f"glibc {c.host.glibc}, as the recipe requires ({wanted})")
    why = f" ({host.why})" if host.why else ""
    return fail(f"this machine has glibc {c.host.glibc}; the recipe needs glibc {wanted}{why}",
                host.advice or f"build on a distribution whose glibc is {wanted} (ldd --version shows it)")


def _cross(c: DoctorContext) -> Outcome | None:
    """The target's CPU is not this one in a cross build: nothing about this CPU matters to the products."""
    if c.recipe.is_cross(c.host.arch):
        return skip(f"the products run on {c.recipe.target_arch(c.host.arch)}, not on this {c.host.arch} host")
    return None


def _machines(c: DoctorContext) -> str:
    machines = c.recipe.platform.target.machines
    return f", e.g. {machines}" if machines else ""


@check("cpu.features", "cpu", "CPU features the products need", blocks=RUN)
def cpu_features(c: DoctorContext) -> Outcome:
    target = c.recipe.platform.target
    required = list(target.cpu_features)
    if not c.cpu.cores:
        return skip("no /proc/cpuinfo to read")
    cross = _cross(c)
    if cross is not None:
        return cross
    if not required:
        return ok("the recipe needs no particular CPU features")
    missing = [f for f in required if f not in c.cpu.features]
    fix = f"run on a CPU with {', '.join(required)}{_machines(c)}"
    # /proc/cpuinfo of another architecture than uname's (an emulator's host): HWCAP alone, and say so
    note = f"; {c.cpu.cpuinfo_note}" if c.cpu.cpuinfo_note else ""
    if c.cpu.arch not in c.recipe.platform.host.arch and missing == required:
        # another architecture altogether: the feature names are not even its own
        return fail(f"{c.cpu.model} is {with_article(c.cpu.arch)} CPU; the recipe's target needs "
                    f"{', '.join(required)}{note}", fix)
    if note:
        source = " (HWCAP)" if c.cpu.hwcap is not None else ""
    else:
        source = " (/proc/cpuinfo and HWCAP)" if c.cpu.hwcap else " (/proc/cpuinfo)"
    if not missing:
        return ok(f"{c.cpu.model} has {', '.join(required)}{source}{note}")
    why = f": {target.why}" if target.why else ": the products would die here with an illegal instruction (SIGILL)"
    return fail(f"{c.cpu.model} lacks {', '.join(missing)}{source}{why}{note}", fix)


# blocks: code built with -msve-vector-bits=128 runs on wider SVE and computes wrong numbers, silently
@check("cpu.sve-length", "cpu", "SVE vector length the products assume", blocks=RUN)
def cpu_sve_length(c: DoctorContext) -> Outcome:
    wanted = c.recipe.platform.target.sve_vector_bits
    if wanted is None:
        return skip("the recipe fixes no SVE vector length")
    cross = _cross(c)
    if cross is not None:
        return cross
    if "sve" not in c.cpu.features:
        return skip("no SVE on this CPU (see cpu.features)")
    bits, source = _sve_length(c)
    default = c.cpu.sve_default_bits  # None: the kernel has no such file (QEMU user mode, some kernels)
    if bits is None:
        where = "prctl(PR_SVE_GET_VL) gave no answer" if c.live else "the snapshot recorded no prctl answer"
        return warn(f"cannot tell the SVE vector length: {SVE_FILE} cannot be read and {where}",
                    "check it on the machine: python3 -c 'import ctypes; print(ctypes.CDLL(None).prctl(51, 0, 0, "
                    "0, 0) & 0xffff)'   # PR_SVE_GET_VL: bytes; 16 means 128-bit")
    # the kernel's default for new processes, when the process itself was found to run with another length
    differs = f"; {SVE_FILE} says {default}-bit" if source == SVE_PRCTL and default not in (None, bits) else ""
    said = f" ({source})" if source == SVE_PRCTL else ""  # the file's wording is the one doctor always had
    if bits == wanted:
        return ok(f"{wanted}-bit SVE vectors{said}, as the build assumes (-msve-vector-bits={wanted}){differs}")
    silently = ", silently (nothing crashes)" if said else ""
    return fail(f"SVE vectors are {bits}-bit here{said}; the build fixes them at {wanted} "
                f"(-msve-vector-bits={wanted}), so its SVE code would compute wrong results{silently}{differs}",
                _sve_fix(c, wanted))


def _sve_length(c: DoctorContext) -> tuple[int | None, str | None]:
    """The SVE vector length in bits and where it came from: on this machine what prctl says a process of the
    target interpreter runs with (else doctor's own process), over the kernel's default; a snapshot's files."""
    if c.live:
        target = c.options.python if c.options.python.exists() else None
        bits = sve_length_from_prctl(target)
        if bits is None and target is not None:
            bits = sve_length_from_prctl(None)
        if bits is not None:
            return bits, SVE_PRCTL
    return c.cpu.sve_vector_bits, c.cpu.sve_source


def _sve_fix(c: DoctorContext, wanted: int) -> str:
    if c.cpu.sve_default_bits is not None:
        return f"echo {wanted // 8} | {c.as_root('tee')} {SVE_FILE}   # new processes then get {wanted}-bit vectors"
    # no such file to write to (QEMU user mode, some kernels): the length comes with the CPU's definition
    model = " or a 128-bit core model such as QEMU_CPU=neoverse-n2" if wanted == 128 else ""
    return (f"the SVE vector length is set where the CPU is defined: under QEMU user mode run with "
            f"QEMU_CPU=max,sve{wanted}=on{model}; on hardware, run on a board whose SVE is {wanted}-bit{_machines(c)}")


@check("host.devices", "host", "Device nodes the recipe needs", blocks=RUN)
def host_devices(c: DoctorContext) -> Outcome:
    wanted = applicable(c, c.recipe.platform.host.requires.devices)
    if not wanted:
        return skip("the recipe needs no device nodes")
    gpu = None if c.live else recorded_gpu(c.sysroot, manifest_of(c.sysroot))
    if not c.live:  # a snapshot holds no /dev: only the accelerator nodes its manifest lists can be judged
        judged = [d for d in wanted if gpu is not None and gpu.covers(d.path)]
        if not judged:
            return skip(f"a --sysroot snapshot has no /dev: {', '.join(d.path for d in wanted)} checked on the "
                        "machine itself")
        wanted, matches = judged, (lambda path: recorded_device_matches(path, gpu.devices))
    else:
        matches = live_device_matches
    found = {d.path: matches(d.path) for d in wanted}
    missing = [d for d in wanted if not found[d.path]]
    if not missing:
        seen = f" ({gpu.describe()})" if gpu is not None and gpu.describe() else ""
        named = ", ".join(_device_found(d.path, found[d.path]) for d in wanted)
        return ok(named + (" (recorded in the snapshot)" if gpu else "") + seen)
    detail = "; ".join(("nothing matches " if is_device_glob(d.path) else "no ") + d.path
                       + (f" ({d.why})" if d.why else "") for d in missing)
    fixes = [d.fix for d in missing if d.fix]
    return fail(detail, c.root_fix("; ".join(fixes)) or "install the driver that creates "
                + ", ".join(d.path for d in missing) + " (in a container: pass the device through)")


def _device_found(path: str, matched: list[str]) -> str:
    if not is_device_glob(path):
        return path
    shown = ", ".join(matched[:4]) + (f" and {len(matched) - 4} more" if len(matched) > 4 else "")
    return f"{path}: {shown}"


@check("host.commands", "host", "Commands the recipe needs on PATH", blocks=BUILD)
def host_commands(c: DoctorContext) -> Outcome:
    wanted = applicable(c, c.recipe.platform.host.requires.commands)
    if not wanted:
        return skip("the recipe needs no particular commands")
    if not c.live:
        return _commands_in_snapshot(c, wanted)
    found = {r.command: shutil.which(r.command, path=c.environ.get("PATH")) for r in wanted}
    missing = [r for r in wanted if found[r.command] is None]
    if not missing:
        return ok(", ".join(f"{name} ({path})" for name, path in found.items()))
    detail = "; ".join(f"no {r.command} on PATH" + (f" ({r.why})" if r.why else "") for r in missing)
    fixes = [r.fix for r in missing if r.fix]
    return fail(detail, c.root_fix("; ".join(fixes)) or f"install {', '.join(r.command for r in missing)} and put "
                "it on PATH")


def _commands_in_snapshot(c: DoctorContext, wanted: list) -> Outcome:
    """A snapshot records nvidia-smi (present, and what it answered); every other command is the board's own."""
    smi = (recorded_gpu(c.sysroot, manifest_of(c.sysroot)) or NO_GPU_RECORD).nvidia_smi
    judged = [r for r in wanted if r.command == "nvidia-smi" and smi is not None]
    if not judged:
        return skip(f"a --sysroot snapshot records no PATH: {', '.join(r.command for r in wanted)} checked on the "
                    "machine itself")
    [requirement] = judged
    if smi.get("present") and not smi.get("error"):
        gpus = ", ".join(g["name"] for g in smi.get("gpus", [])) or "no GPU listed"
        return ok(f"nvidia-smi (recorded in the snapshot: {gpus})")
    why = f" ({requirement.why})" if requirement.why else ""
    detail = f"nvidia-smi {smi['error']} on the board" if smi.get("present") else "no nvidia-smi on the board's PATH"
    return fail(detail + why, c.root_fix(requirement.fix) or "install the NVIDIA driver and put nvidia-smi on PATH")


@check("cpu.topology", "cpu", "Heterogeneous (big.LITTLE) cores")
def cpu_topology(c: DoctorContext) -> Outcome:
    if not c.cpu.cores:
        return skip("no /proc/cpuinfo to read")
    big = c.cpu.big_cores()
    if big is None:
        return ok(f"{c.cpu.model}: all cores alike")
    return warn(f"{c.cpu.model}: little cores stall OpenMP kernels at every barrier (about half speed); "
                f"pin to the big cores {cpu_list(big)}",
                f"taskset -c {cpu_list(big)} python your_program.py")


@check("cpu.governor", "cpu", "CPU frequency governor")
def cpu_governor(c: DoctorContext) -> Outcome:
    governors = [core.governor for core in c.cpu.cores if core.governor]
    if not governors:
        return skip("no cpufreq governors exposed (a VM, or a kernel without cpufreq)")
    others = sorted({g for g in governors if g != "performance"})
    if not others:
        return ok(f"performance on all {len(governors)} cores")
    return warn(f"{', '.join(others)} on {sum(g != 'performance' for g in governors)} of {len(governors)} cores: "
                "benchmarks and decode speed vary with the clock",
                "for g in /sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor; do "
                f"echo performance | {c.as_root('tee')} $g >/dev/null; done")


# a warning only; setup reports it (and installs them with --install-system-packages) before any stage
@check("system.packages", "system", "System packages (apt, or dnf on a RHEL-family host)", blocks=("sources",))
def system_packages(c: DoctorContext) -> Outcome:
    manager, listed = wanted_packages(c.recipe, c.host)
    wanted = list(listed)
    if not wanted:
        return skip(f"the recipe lists no system packages for {manager}")
    if manager == "dnf":
        missing = missing_rpm_packages(wanted, c.sysroot)
        if missing is None:
            where = "a --sysroot snapshot's rpm database is read on the machine itself" if not c.live else \
                "no rpm command to ask"
            return skip(f"{where}; the recipe's dnf names: {' '.join(wanted)}")
    else:
        missing = missing_apt_packages(wanted, c.sysroot)
        if missing is None:
            return skip(f"not a Debian/Ubuntu system (no dpkg); the recipe's apt names: {' '.join(wanted)}")
    if not missing:
        return ok(f"all {len(wanted)} installed")
    return warn(f"{len(missing)} of {len(wanted)} missing: {' '.join(missing)}",
                c.as_root(shlex.join(system_install_argv(missing, 0, manager))))


_Limits = tuple[float, float, "float | None"]  # memory per compile job, per link job; cores per job


def _by_limits(limits: dict[str, _Limits]) -> dict[_Limits, list[str]]:
    """The builds grouped by their (per compile job, per link job, cores per job) limits."""
    grouped: dict[_Limits, list[str]] = {}
    for name, pair in limits.items():
        grouped.setdefault(pair, []).append(name)
    return grouped


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


@check("resources.memory", "resources", "Memory and the parallel jobs the build will use", blocks=BUILD)
def resources_memory(c: DoctorContext) -> Outcome:
    if c.host.mem_total is None:
        return skip("no /proc/meminfo to read")
    limits: dict[str, _Limits] = {name: (b.memory_per_job_gb, b.memory_per_link_job_gb, b.cores_per_job)
                                  for name, b in builds(c).items()} or {"build": (2.0, 4.0, None)}
    total = c.host.mem_total / GIB
    uses = []
    for (per_job, per_link, per_core), names in _by_limits(limits).items():  # each build's own limits
        jobs = compute_jobs(c.host.cpu_count, c.host.mem_available, per_job, per_link, cores_per_job=per_core)
        called = f"build {', '.join(names)}" if len(limits) > 1 else "the build"
        uses.append(f"{called} will use {_count(jobs.jobs, 'compile job')} and {_count(jobs.link_jobs, 'link job')} "
                    f"({jobs.reason})")
    detail = f"{total:.1f} GiB total; " + "; ".join(uses)
    needed = c.recipe.resources.memory_gb
    if needed and total < needed:
        return warn(f"{detail}; the recipe recommends {needed:g} GiB",
                    f"add swap ({c.as_root('fallocate -l 8G /swapfile')} && {c.as_root('mkswap /swapfile')} && "
                    f"{c.as_root('swapon /swapfile')}) "
                    "or build elsewhere and install the wheel (flagtree-cpu build --wheel DIR)")
    return ok(detail)
