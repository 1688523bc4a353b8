"""The recipe's platforms: the build host (and what it must have) and the target the products run on.

Nothing here is checked by the engine unless a recipe asks for it: doctor and setup's preflight read
``platform.host.requires``; the CPU checks read ``platform.target``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from .checks import (
    check_arch,
    check_arches,
    check_device_path,
    check_env_names,
    check_specifier,
)
from .schema import Context, Path_, json_rule, spec
from .selector import Selector, check_os_versions

_VERSION = r"^[0-9]+(\.[0-9]+){0,3}$"


@json_rule({"additionalProperties": {"anyOf": [{"type": "integer", "minimum": 1},
                                               {"type": "string", "pattern": _VERSION}]}})
def check_compiler_minimums(value: dict[str, object], ctx: Context, path: Path_) -> None:
    for family, minimum in value.items():
        if isinstance(minimum, bool) or not isinstance(minimum, (int, str)):
            ctx.report(path + (family,), f"expected a version (9 or '9.4'), got {minimum!r}")
        elif isinstance(minimum, int) and minimum < 1:
            ctx.report(path + (family,), f"a major version is at least 1, got {minimum}")
        elif isinstance(minimum, str) and not re.fullmatch(_VERSION, minimum):
            ctx.report(path + (family,), f"{minimum!r} is not a compiler version", "write it as 9, '9.4' or '9.4.0'")


def compiler_minimum(minimum: object) -> tuple[int, ...]:
    """A recipe's minimum (9 or '9.4') as numbers to compare with a compiler's version (9.3.1 -> (9, 3, 1))."""
    return tuple(int(part) for part in str(minimum).split("."))


@dataclass(frozen=True, kw_only=True)
class CompilerRequirement:
    """A compiler the build needs: its family's minimum major version and flags it must accept."""

    env: str = spec("the build-environment variable naming the compiler", default="CXX",
                    checks=check_env_names)
    default: str = spec("the compiler when that variable is unset", default="c++")
    min: dict[str, object] = spec(
        "minimum version per family (gcc, clang): a major (9) or a fuller version ('9.4'), judged against the "
        "compiler's full version (GCC 9.3.1 is older than '9.4')", default_factory=dict,
        checks=check_compiler_minimums)
    flags: tuple[str, ...] = spec("flags it must accept (probed on the hosts the recipe builds on)", default=())
    why: str = spec("what an older compiler breaks, shown with a failure", default="")
    fix: str = spec("how to get a suitable compiler", default="")
    when: Selector | None = spec("when this applies (default: always)", default=None)

    def check(self, ctx: Context, path: Path_) -> None:
        for family in self.min:
            if family not in ("gcc", "clang"):
                ctx.report(path + ("min", family), f"unknown compiler family {family!r}", "use gcc or clang")


@dataclass(frozen=True, kw_only=True)
class LibraryRequirement:
    """A library the compiler must find (asked with -print-file-name)."""

    name: str = spec("what it is, e.g. OpenMP runtime")
    any_of: tuple[str, ...] = spec("file names; one of them must be found, e.g. libgomp.so")
    compiler_env: str = spec("the variable naming the compiler to ask", default="CC", checks=check_env_names)
    compiler_default: str = spec("the compiler when that variable is unset", default="cc")
    why: str = spec("what is broken without it", default="")
    fix: str = spec("how to install it", default="")
    when: Selector | None = spec("when this applies (default: always)", default=None)

    def check(self, ctx: Context, path: Path_) -> None:
        if not self.any_of:
            ctx.report(path + ("any_of",), "list at least one file name, e.g. libgomp.so")


@dataclass(frozen=True, kw_only=True)
class DeviceRequirement:
    """A device node the products need (an accelerator)."""

    path: str = spec("absolute path of the device node, e.g. /dev/davinci_manager, or a glob of them met by any one "
                     "match, e.g. /dev/dri/renderD* (the render node's number differs per host)")
    why: str = spec("what needs it", default="")
    fix: str = spec("how to get it (driver, container option)", default="")
    when: Selector | None = spec("when this applies (default: always)", default=None)

    def check(self, ctx: Context, path: Path_) -> None:
        check_device_path(self.path, ctx, path + ("path",))


@dataclass(frozen=True, kw_only=True)
class CommandRequirement:
    """A command that must be on PATH."""

    command: str = spec("executable name")
    why: str = spec("what needs it", default="")
    fix: str = spec("how to install it", default="")
    when: Selector | None = spec("when this applies (default: always)", default=None)


@dataclass(frozen=True, kw_only=True)
class HostRequirements:
    """What doctor and setup's preflight check on the build host; nothing is checked that is not asked here."""

    compilers: tuple[CompilerRequirement, ...] = spec("compilers and their minimums", default=())
    libraries: tuple[LibraryRequirement, ...] = spec("libraries the compiler must find", default=())
    devices: tuple[DeviceRequirement, ...] = spec("device nodes", default=())
    commands: tuple[CommandRequirement, ...] = spec("commands on PATH", default=())
    glibc: str | None = spec(
        "a version range the host's glibc must satisfy, e.g. '>=2.28' (prebuilt toolchains linked against a newer "
        "one do not run); doctor and build's preflight fail outside it", default=None, checks=check_specifier)


@dataclass(frozen=True, kw_only=True)
class HostPlatform:
    """The machines a build from this recipe runs on."""

    os: Literal["linux"] = spec("operating system", default="linux")
    arch: tuple[str, ...] = spec("architectures that can build (uname -m names)", checks=check_arches)
    os_version: tuple[str, ...] = spec(
        "/etc/os-release VERSION_ID values or ranges the host must be one of, e.g. ['22.04', '24.04'] or "
        "['>=22.04'] (a host whose os-release has no VERSION_ID is none); doctor and build's preflight fail on "
        "another release; absent = any", default=(), checks=check_os_versions)
    why: str = spec("why other machines cannot build it, shown with a host.arch, host.os-version or host.glibc "
                    "failure", default="")
    advice: str = spec("what to use instead, shown as the fix of a host.arch, host.os-version or host.glibc "
                       "failure", default="")
    requires: HostRequirements = spec("compilers, libraries, devices and commands the host must have",
                                      default_factory=HostRequirements)

    def check(self, ctx: Context, path: Path_) -> None:
        if not self.arch:
            ctx.report(path + ("arch",), "list at least one architecture", "e.g. arch: [x86_64, aarch64]")


@dataclass(frozen=True, kw_only=True)
class TargetPlatform:
    """The machines the products run on; by default the build host itself."""

    arch: str | None = spec("architecture the products run on; absent = the build host's (a native build)",
                            default=None, checks=check_arch)
    cpu_features: tuple[str, ...] = spec(
        "CPU features the products need, as /proc/cpuinfo spells them", default=())
    sve_vector_bits: int | None = spec(
        "SVE vector length (bits) the products assume, if any", default=None, json={"minimum": 128})
    why: str = spec("what happens on a CPU without those features, shown with a cpu.features failure", default="")
    machines: str = spec("examples of suitable CPUs, shown in fixes", default="")


@dataclass(frozen=True, kw_only=True)
class Platform:
    """Where the build runs (host) and where its products run (target)."""

    host: HostPlatform = spec("the build host")
    target: TargetPlatform = spec("where the products run", default_factory=TargetPlatform)
