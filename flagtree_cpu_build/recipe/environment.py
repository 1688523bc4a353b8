"""Environment operations (set, from_file, prepend/append, unset, source, if_command) and hazards, as recipe data.

``envops`` applies them; the build, steps, toolchains, the run time and checks all use the same type.
"""

from __future__ import annotations

from dataclasses import dataclass

from .checks import check_env_names, check_env_patterns, check_regex, check_script_path, escapes
from .placeholder_checks import INTERPOLATED, check_placeholders, check_placeholders_globs
from .schema import Context, Path_, spec

ENV_CHECKS = (check_env_names, check_placeholders_globs)  # values may hold {glob:PATTERN}


def check_file_paths(value: dict[str, str], ctx: Context, path: Path_) -> None:
    """``from_file`` paths: absolute, or relative to the workdir without leaving it (like a sourced script)."""
    for name, file in value.items():
        if not file.strip():
            ctx.report(path + (name,), f"the file to read {name} from is empty",
                       "give its path, e.g. \"{sources.NAME.path}/VERSION\"")
        elif not file.startswith(("/", "{")) and escapes(file):
            ctx.report(path + (name,), f"file {file!r} escapes the workdir",
                       "give an absolute path (e.g. {sources.NAME.path}/VERSION) or one inside the workdir")


@dataclass(frozen=True, kw_only=True)
class SourceScript:
    """A vendor script whose environment is captured (``source set_env.sh``)."""

    SHORTHAND = "script"

    script: str = spec("path of the script: absolute, or relative to the workdir", interpolate=True,
                       checks=(check_script_path, check_placeholders))
    args: tuple[str, ...] = spec("arguments given to it", default=(), interpolate=True, checks=INTERPOLATED)


@dataclass(frozen=True, kw_only=True)
class CommandEnv:
    """Variables set only when a command is available on PATH."""

    command: str = spec("executable name")
    set: dict[str, str] = spec("variables to set", checks=ENV_CHECKS, interpolate=True)


@dataclass(frozen=True, kw_only=True)
class CommandValue:
    """A variable's value from a command's output (a version a tool prints, a path a config program knows)."""

    argv: tuple[str, ...] = spec("the command, one list item per argument (never a shell string); it runs in the "
                                 "environment computed so far, in the workdir, stopped after 60 s or 64 KiB of output",
                                 interpolate=True, checks=INTERPOLATED)
    regex: str | None = spec("a regular expression searched in the output: the value is its first group (else the "
                             "whole match); without it, the whole output with surrounding whitespace stripped",
                             default=None, checks=check_regex)

    def check(self, ctx: Context, path: Path_) -> None:
        if not self.argv or not self.argv[0].strip():
            ctx.report(path + ("argv",), "the command is empty", "e.g. argv: [nvcc, --version]")


@dataclass(frozen=True, kw_only=True)
class EnvOps:
    """Changes to an inherited environment, applied in this order: unset, source, set, from_file,
    from_command, if_command, prepend, append."""

    unset: tuple[str, ...] = spec("inherited variables removed; globs like LLVM_* remove every match", default=(),
                                  checks=check_env_patterns)
    source: tuple[SourceScript, ...] = spec("scripts run in bash whose resulting environment is kept", default=())
    set: dict[str, str] = spec("variables set (replacing inherited values); a {glob:PATTERN} in a value is the one "
                               "path the pattern matches when the environment is made (none or several: an error)",
                               default_factory=dict,
                               interpolate=True, checks=ENV_CHECKS)
    from_file: dict[str, str] = spec("variables set to a file's content, surrounding whitespace stripped (e.g. a "
                                     "version file of a source: \"{sources.NAME.path}/VERSION_NUMBER\"); a relative "
                                     "path is inside the workdir", default_factory=dict, interpolate=True,
                                     checks=(check_env_names, check_placeholders, check_file_paths))
    from_command: dict[str, CommandValue] = spec(
        "variables set from a command's output (e.g. {CUDA_VERSION: {argv: [nvcc, --version], regex: "
        "'release ([0-9.]+)'}}); a command that fails, hangs or prints no match stops with its words",
        default_factory=dict, checks=check_env_names)
    if_command: tuple[CommandEnv, ...] = spec("variables set when a command exists (e.g. ccache)", default=())
    prepend: dict[str, tuple[str, ...]] = spec("entries put in front of PATH-like variables (':'-separated)",
                                               default_factory=dict, interpolate=True, checks=ENV_CHECKS)
    append: dict[str, tuple[str, ...]] = spec("entries added at the end of PATH-like variables", default_factory=dict,
                                              interpolate=True, checks=ENV_CHECKS)

    def is_empty(self) -> bool:
        return not (self.unset or self.source or self.set or self.from_file or self.from_command or self.if_command
                    or self.prepend or self.append)


@dataclass(frozen=True, kw_only=True)
class EnvHazard:
    """An inherited variable whose value misleads (a hand-run build, or the checks)."""

    name: str = spec("the variable")
    equals: str | None = spec("a hazard when it has exactly this value", default=None, interpolate=True,
                              checks=INTERPOLATED)
    not_equals: str | None = spec("a hazard when it is set to anything else", default=None, interpolate=True,
                                  checks=INTERPOLATED)
    matches: str | None = spec("a hazard when the whole value matches this regular expression", default=None,
                               checks=check_regex)
    why: str = spec("what it breaks")
    fix: str = spec("what to do instead (default: unset it)", default="")

    def check(self, ctx: Context, path: Path_) -> None:
        check_env_names((self.name,), ctx, path + ("name",))
        given = [k for k in ("equals", "not_equals", "matches") if getattr(self, k) is not None]
        if len(given) > 1:
            ctx.report(path, f"give one of equals, not_equals and matches, not {' and '.join(given)}")

    def applies(self, value: str | None) -> bool:
        import re

        if not value:  # unset, or set to nothing: nothing to mislead with
            return False
        if self.equals is not None:
            return value == self.equals
        if self.not_equals is not None:
            return value != self.not_equals
        if self.matches is not None:
            return re.fullmatch(self.matches, value) is not None
        return True
