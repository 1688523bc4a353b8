"""doctor checks of the machine itself — host, CPU, system packages, memory.

Everything here reads files under the sysroot (``/`` or a ``--sysroot`` snapshot of a
board), so a board can be diagnosed from a copy of its /proc, /sys and /etc.
"""

from __future__ import annotations

from pathlib import Path

from ..buildenv import compute_jobs
from ..cpuinfo import cpu_list
from ..system_packages import missing_apt_packages  # the one reading of dpkg's status file
from .kit import DoctorContext, Outcome, check, fail, ok, skip, warn

GIB = 1024**3


@check("host.os", "host", "Operating system and distribution")
def host_os(c: DoctorContext) -> Outcome:
    h = c.host
    if not h.os_id:
        return warn("no /etc/os-release: the distribution is unknown, so is the right LLVM tarball",
                    "check that this is a regular Linux installation (cat /etc/os-release)")
    tarballs = ", ".join(Path(a.url).name for a in c.recipe.artifacts.values()) or "no toolchain artifact"
    note = " (AlmaLinux gets its own LLVM build, as FlagTree's setup.py picks it)" if h.os_id == "almalinux" else ""
    return ok(f"{h.os_pretty_name or h.os_id} (ID={h.os_id}): {tarballs}{note}")


@check("host.arch", "host", "Architecture the recipe builds for")
def host_arch(c: DoctorContext) -> Outcome:
    targets = c.recipe.platform.arch
    if c.host.arch in targets:
        return ok(f"{c.host.arch}, as the recipe requires")
    return fail(f"this machine is {c.host.arch}; recipe {c.recipe.name} builds for {', '.join(targets)} "
                "(libtriton is compiled with -march=armv9-a+sve2+i8mm+bf16 and runs nowhere else)",
                "use an Armv9 aarch64 machine (Cortex-A720/X4, Neoverse V2/N2 class); here only sync, link and "
                "fetch are useful")


@check("cpu.features", "cpu", "CPU features the build needs")
def cpu_features(c: DoctorContext) -> Outcome:
    required = list(c.recipe.platform.cpu_features)
    if not c.cpu.cores:
        return skip("no /proc/cpuinfo to read")
    if not required:
        return ok("the recipe needs no particular CPU features")
    missing = [f for f in required if f not in c.cpu.features]
    if c.cpu.arch != "aarch64" and missing == required:
        return fail(f"{c.cpu.model} is an {c.cpu.arch} CPU: it has none of the Arm features the build needs "
                    f"({', '.join(required)})", "run on an Armv9 aarch64 CPU (Cortex-A720/X4, Neoverse V2 class)")
    source = " (/proc/cpuinfo and HWCAP)" if c.cpu.hwcap else " (/proc/cpuinfo)"
    if not missing:
        return ok(f"{c.cpu.model} has {', '.join(required)}{source}")
    return fail(f"{c.cpu.model} lacks {', '.join(missing)}{source}: libtriton is compiled with "
                "-march=armv9-a+sve2+i8mm+bf16 and would die here with an illegal instruction (SIGILL)",
                f"run on a CPU with {', '.join(required)} (Armv9: Cortex-A720/X4, Neoverse V2 class)")


@check("cpu.sve-length", "cpu", "SVE vector length the build assumes")
def cpu_sve_length(c: DoctorContext) -> Outcome:
    wanted = c.recipe.platform.sve_vector_bits
    if wanted is None:
        return skip("the recipe fixes no SVE vector length")
    if "sve" not in c.cpu.features:
        return skip("no SVE on this CPU (see cpu.features)")
    if c.cpu.sve_vector_bits is None:
        return warn("cannot read /proc/sys/abi/sve_default_vector_length", "check it by hand: "
                    "cat /proc/sys/abi/sve_default_vector_length (bytes; 16 means 128-bit)")
    if c.cpu.sve_vector_bits == wanted:
        return ok(f"{wanted}-bit SVE vectors, as the build assumes (-msve-vector-bits={wanted})")
    return fail(f"SVE vectors are {c.cpu.sve_vector_bits}-bit here; the build fixes them at {wanted} "
                f"(-msve-vector-bits={wanted}), so its SVE code would compute wrong results",
                f"echo {wanted // 8} | {c.as_root('tee')} /proc/sys/abi/sve_default_vector_length   "
                f"# new processes then get {wanted}-bit vectors")


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


@check("system.packages", "system", "System packages (apt)")
def system_packages(c: DoctorContext) -> Outcome:
    wanted = list(c.recipe.system_packages.apt)
    if not wanted:
        return skip("the recipe lists no system packages")
    missing = missing_apt_packages(wanted, c.sysroot)
    if missing is None:
        return skip(f"not a Debian/Ubuntu system (no dpkg); the recipe's apt names: {' '.join(wanted)}")
    if not missing:
        return ok(f"all {len(wanted)} installed")
    return warn(f"{len(missing)} of {len(wanted)} missing: {' '.join(missing)}",
                c.as_root(f"apt-get install -y {' '.join(missing)}"))


@check("resources.memory", "resources", "Memory and the parallel jobs the build will use")
def resources_memory(c: DoctorContext) -> Outcome:
    build = c.recipe.build
    if c.host.mem_total is None:
        return skip("no /proc/meminfo to read")
    per_job = build.memory_per_job_gb if build else 2.0
    per_link = build.memory_per_link_job_gb if build else 4.0
    jobs = compute_jobs(c.host.cpu_count, c.host.mem_available, per_job, per_link)
    total = c.host.mem_total / GIB
    detail = (f"{total:.1f} GiB total; the build will use MAX_JOBS={jobs.jobs} and TRITON_PARALLEL_LINK_JOBS="
              f"{jobs.link_jobs} ({jobs.reason})")
    needed = c.recipe.resources.memory_gb
    if needed and total < needed:
        return warn(f"{detail}; the recipe recommends {needed:g} GiB",
                    f"add swap ({c.as_root('fallocate -l 8G /swapfile')} && {c.as_root('mkswap /swapfile')} && "
                    f"{c.as_root('swapon /swapfile')}) "
                    "or build elsewhere and install the wheel (flagtree-cpu build --wheel DIR)")
    return ok(detail)
