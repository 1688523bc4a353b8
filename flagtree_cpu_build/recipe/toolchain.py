"""Pre-provisioned toolchains: a toolkit installed on the host by other means (CUDA, a vendor SDK, a CUDA build of
torch), checked and never downloaded.

Users keep these in more than one place (``/opt/vendor`` or ``~/vendor``; a torch in whichever venv they work in), so
a toolchain may list alternative folders (``paths``) and ask an interpreter where a module lives (``discover``);
``version`` reads its version from a file or a command and judges it against a range. The search itself (it reads
the host and runs interpreters) is ``toolchain_search``; this module is the format.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .checks import check_file_in_source, check_regex, check_specifier
from .environment import EnvOps
from .placeholder_checks import INTERPOLATED
from .schema import Context, Path_, spec
from .selector import Selector


def _check_files(value: tuple[str, ...], ctx: Context, path: Path_) -> None:
    for i, item in enumerate(value):
        check_file_in_source(item, ctx, path + (i,))


@dataclass(frozen=True, kw_only=True)
class ToolchainVersion:
    """How a toolchain's version is read, and the range it must be in."""

    file: str | None = spec("a file (relative to the toolchain's folder) holding the version, e.g. version.json",
                            default=None, checks=check_file_in_source)
    command: tuple[str, ...] = spec("a command printing the version, e.g. [bin/nvcc, --version] (a relative program "
                                    "is in the toolchain's folder)", default=())
    regex: str | None = spec("where the version is in that text: the first group, else the whole match (default: "
                             "the first dotted number)", default=None, checks=check_regex)
    range: str | None = spec("the versions the recipe accepts, e.g. '>=12.6' (absent: any, the version is only "
                             "reported); without file or command it judges the value `discover` read (a folder "
                             "found otherwise is not judged)", default=None, checks=check_specifier)

    def check(self, ctx: Context, path: Path_) -> None:
        if self.file is not None and self.command:
            ctx.report(path, "give file or command, not both", "keep the one the toolkit itself keeps up to date")


@dataclass(frozen=True, kw_only=True)
class PythonDiscovery:
    """A module an interpreter can import: its package folder is the toolchain's folder."""

    module: str = spec("the module to import, e.g. torch")
    attr: str | None = spec("a dotted attribute of it that must be set (not None), e.g. version.cuda; its value is "
                            "the toolchain's version when `version` reads no file or command", default=None)

    def check(self, ctx: Context, path: Path_) -> None:
        for key, value in (("module", self.module), ("attr", self.attr)):
            if value is not None and not all(part.isidentifier() for part in value.split(".")):
                ctx.report(path + (key,), f"{value!r} is not a dotted Python name", "e.g. torch, or version.cuda")


@dataclass(frozen=True, kw_only=True)
class ToolchainDiscovery:
    """Where the user's own environment has the toolchain, asked before any fixed folder."""

    python: PythonDiscovery = spec("ask the target interpreter, then the python3 on PATH, then the active venv "
                                   "(VIRTUAL_ENV) where this module is")


@dataclass(frozen=True, kw_only=True)
class Toolchain:
    """A toolkit installed on the host by other means (CUDA, a vendor SDK): checked, never downloaded.

    Where it is: FLAGTREE_CPU_TOOLCHAIN_<NAME> when set (then only there); else the first place that has every
    `expect` file and a version in range, looked for with `discover`, then in `path`, then in each of `paths`."""

    path: str | None = spec("its folder (placeholders allowed; FLAGTREE_CPU_TOOLCHAIN_<NAME> overrides it per host)",
                            default=None, interpolate=True, checks=INTERPOLATED)
    paths: tuple[str, ...] = spec("more folders it may be in, tried in order after `path` (placeholders and a "
                                  "leading ~/ allowed), e.g. [/opt/vendor, ~/vendor]", default=(), interpolate=True,
                                  checks=INTERPOLATED)
    discover: ToolchainDiscovery | None = spec("find it through the user's environment first (e.g. the torch the "
                                               "venv on PATH imports)", default=None)
    expect: tuple[str, ...] = spec("files (relative to path) that must exist", default=(), checks=_check_files)
    version: ToolchainVersion | None = spec("read its version and judge it against a range", default=None)
    env: EnvOps = spec("what it adds to the build and run environments", default_factory=EnvOps)
    why: str = spec("what needs it", default="")
    fix: str = spec("how to install it", default="")
    when: Selector | None = spec("when it is needed (default: always)", default=None)

    searched: Any = spec("where it was looked for on this host and what was found (set when a context is opened)",
                         default=None, internal=True)

    def check(self, ctx: Context, path: Path_) -> None:
        if self.path is None and not self.paths and self.discover is None:
            ctx.report(path, "a toolchain needs `path`, `paths` or `discover`", "e.g. path: /usr/local/cuda")

    @property
    def places(self) -> tuple[str, ...]:
        """The fixed folders, in the order they are tried."""
        return (*((self.path,) if self.path else ()), *self.paths)
