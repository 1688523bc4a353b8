"""Validation checks and known failures, as recipe data: what `validate` runs and how failures are explained.

A check is a command with expectations, a preset from the bundled library (``presets``), an import, or
a wheel inspection; ``check_run`` runs them and knows no preset by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .checks import check_arch, check_arches, check_device_path, check_name, check_regex, check_specifier
from .environment import EnvOps
from .placeholder_checks import GLOBBED, INTERPOLATED
from .schema import Context, Path_, json_rule, spec, suggest
from .selector import Selector


@dataclass(frozen=True, kw_only=True)
class Expect:
    """What a check's command must show."""

    exit: int = spec("exit status", default=0)
    output: str | None = spec("a regular expression that must occur in the output", default=None,
                              checks=check_regex)
    absent: str | None = spec("a regular expression that must not occur in the output", default=None,
                              checks=check_regex)
    pytest: dict[str, int] | None = spec("counts from pytest's summary line, e.g. {passed: 7, failed: 0}",
                                         default=None)

    def check(self, ctx: Context, path: Path_) -> None:
        for key, count in (self.pytest or {}).items():
            if key not in PYTEST_OUTCOMES:
                ctx.report(path + ("pytest", key), f"pytest reports no {key!r} count",
                           f"use: {', '.join(PYTEST_OUTCOMES)}")
            elif count < 0:
                ctx.report(path + ("pytest", key), "a count cannot be negative")


PYTEST_OUTCOMES = ("passed", "failed", "skipped", "errors", "xfailed", "xpassed", "deselected", "warnings")


@dataclass(frozen=True, kw_only=True)
class ImportCheck:
    """A module the target interpreter must import, optionally with a version range."""

    module: str = spec("the module, e.g. torch_fl")
    version: str | None = spec("range its __version__ must satisfy", default=None, checks=check_specifier)


@dataclass(frozen=True, kw_only=True)
class WheelCheck:
    """A built wheel whose shared objects must be for the target."""

    path: str = spec("glob of the wheel(s) to inspect, e.g. {wheel_dir}/*.whl", interpolate=True,
                     checks=INTERPOLATED)
    arch: str | None = spec("every ELF object in the wheel must be for this architecture", default=None,
                            checks=check_arch)
    forbid: tuple[str, ...] = spec("no ELF object may be for these", default=(), checks=check_arches)
    tags: tuple[str, ...] = spec("platform tags the wheel's file name must carry, e.g. linux_riscv64", default=())

    def check(self, ctx: Context, path: Path_) -> None:
        if self.arch is None and not self.forbid and not self.tags:
            ctx.report(path, "a wheel check needs arch, forbid or tags",
                       "e.g. arch: riscv64 (every ELF object is for it), forbid: [x86_64], or tags: [linux_riscv64]")


@json_rule({"items": {"pattern": "^/dev/"}})
def check_devices(value: tuple[str, ...], ctx: Context, path: Path_) -> None:
    for i, device in enumerate(value):
        check_device_path(device, ctx, path + (i,))


def check_toolchain_refs(value: tuple[str, ...], ctx: Context, path: Path_) -> None:
    """Each name must be one of the recipe's `toolchains` (as a source reference must name a source)."""
    names = ctx.facts.get("toolchains", set())
    for i, name in enumerate(value):
        if name not in names:
            have = ", ".join(sorted(names)) or "none"
            ctx.report(path + (i,), f"there is no toolchain named {name!r}{suggest(name, names)}",
                       f"use one of the recipe's toolchains: {have}" if names else
                       "declare it under `toolchains:` (its path and expected files), or remove it from `needs`")


@dataclass(frozen=True, kw_only=True)
class Needs:
    """What a check needs of the machine it runs on; when any of it is absent the check is skipped (with the
    reason), never failed: a check for hardware this host lacks is declared, not hidden."""

    devices: tuple[str, ...] = spec("device nodes, e.g. /dev/davinci_manager; a glob (/dev/dri/renderD*) is met by "
                                    "any one match", default=(), checks=check_devices)
    paths: tuple[str, ...] = spec("files or folders (placeholders allowed)", default=(), interpolate=True,
                                  checks=INTERPOLATED)
    commands: tuple[str, ...] = spec("commands on the check's PATH, e.g. npu-smi", default=())
    toolchains: tuple[str, ...] = spec("the recipe's toolchains (their folder and `expect` files)", default=(),
                                       checks=check_toolchain_refs)

    def is_empty(self) -> bool:
        return not (self.devices or self.paths or self.commands or self.toolchains)


@dataclass(frozen=True, kw_only=True)
class Check:
    """One validation check: a command with expectations, a bundled preset, an import, or a wheel inspection."""

    name: str | None = spec("check name (default for a preset: its own name)", default=None, checks=check_name)
    argv: tuple[str, ...] = spec("a command (one list item per argument); {glob:PATTERN} is the one path the "
                                 "pattern matches when the check runs", default=(), interpolate=True, checks=GLOBBED)
    uses: str | None = spec("a bundled preset, LIBRARY/NAME (flagtree-cpu validate --list shows them)", default=None)
    with_: dict[str, object] = spec("the preset's parameters", default_factory=dict, key="with")
    import_: ImportCheck | None = spec("a module the target Python must import", default=None, key="import")
    wheel: WheelCheck | None = spec("a wheel whose objects must be for the target", default=None)
    cwd: str | None = spec("working folder (default: the workdir)", default=None, interpolate=True,
                           checks=INTERPOLATED)
    env: EnvOps = spec("changes on top of the run-time environment", default_factory=EnvOps)
    where: Literal["target", "host"] = spec(
        "target: it runs the products, so it is skipped on a build host of another architecture; host: it "
        "inspects them (runs anywhere)", default="target")
    required: bool = spec("a failure fails validation (otherwise it is reported only)", default=True)
    timeout: float = spec("seconds before it is stopped", default=600.0, json={"exclusiveMinimum": 0})
    when: Selector | None = spec("when it runs (default: always)", default=None)
    needs: Needs = spec("devices, paths, commands and toolchains it needs; absent on this host: skipped",
                        default_factory=Needs)
    expect: Expect = spec("what a command must show", default_factory=Expect)
    before: str | None = spec(
        "a gate: the build it guards (`build`, or a name under `builds:`) runs it before its command, and stops "
        "with its words when it fails; it runs in the build environment", default=None)

    def check(self, ctx: Context, path: Path_) -> None:
        kinds = [k for k, given in (("argv", bool(self.argv)), ("uses", self.uses is not None),
                                    ("import", self.import_ is not None), ("wheel", self.wheel is not None)) if given]
        if len(kinds) != 1:
            what = "none of them" if not kinds else " and ".join(kinds)
            ctx.report(path, f"a check is exactly one of argv, uses, import and wheel; this one has {what}",
                       "split it into one check per kind" if kinds else "e.g. argv: [\"{python}\", -c, "
                       "\"import torch\"]")
        if self.uses is None and self.with_:
            ctx.report(path + ("with",), "`with` gives a preset's parameters; this check uses no preset")
        if self.uses is not None:
            from ..presets import preset_problems

            for key, message, fix in preset_problems(self.uses, self.with_):
                ctx.report(path + (("uses",) if key is None else ("with", key)), message, fix)
        elif self.name is None:
            ctx.report(path, "missing required key 'name'", "add `name:` — what the report calls this check")

    @property
    def label(self) -> str:
        """The check's name: given, or the preset's own (flagtree/backend -> backend)."""
        return self.name or (self.uses or "check").rsplit("/", 1)[-1]


@dataclass(frozen=True, kw_only=True)
class SignatureSpec:
    """A known failure: a line pattern, what it means, and the fix."""

    id: str = spec("short name, e.g. install-permission", checks=check_name)
    pattern: str = spec("regular expression searched line by line (case-insensitive)", checks=check_regex)
    cause: str = spec("what went wrong")
    fix: str = spec("what fixes it (may use {jobs_half} and {log})")


@dataclass(frozen=True, kw_only=True)
class Diagnosis:
    """The recipe's known failures, tried before the generic ones."""

    build: tuple[SignatureSpec, ...] = spec("in build and step logs", default=())
    run: tuple[SignatureSpec, ...] = spec("in check output", default=())
