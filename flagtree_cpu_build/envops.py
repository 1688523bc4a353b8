"""Environment operations (a recipe's ``env:`` keys) applied to an inherited environment.

One ``EnvOps`` is applied in a fixed order: ``unset`` (names, or globs like ``LLVM_*``), ``source``
(vendor scripts run by bash; the environment they leave is taken over), ``set``, ``from_file`` (a file's
stripped text, e.g. a source's VERSION file), ``if_command`` (set when a command is on PATH), ``prepend``
and ``append`` (``os.pathsep``-joined lists; an entry already there is moved to the front by prepend and
never repeated by append). Several of them — the build's, a toolchain's, the offline build's — are
applied one after the other as ``EnvLayer``s.

Besides the new environment the result says what changed against the inherited one, one
``EnvChange`` per variable, so `env --build`, the build log's header and the build stamp can show it.
The rules are pure but for reading ``from_file`` files; the two ways they reach further — running a script
(``source_script``, in ``envscript``) and looking a command up on PATH (``on_path``) — are parameters, so
tests can replace them.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .envreads import (
    MAX_FILE_VALUE,
    CommandRunner,
    EnvCommandError,
    EnvFileError,
    expand_globs,
    read_file_value,
    run_command,
    value_of,
)
from .envscript import SOURCE_TIMEOUT_S, SourceScriptError, source_script
from .recipe import EnvOps, SourceScript
from .recipe.environment import CommandValue

__all__ = ["MAX_FILE_VALUE", "SEP", "SOURCE_TIMEOUT_S", "Applied", "EnvChange", "EnvCommandError", "EnvFileError",
           "EnvLayer", "SourceScriptError", "Sourced", "apply_layers", "apply_ops", "on_path", "source_script"]

SEP = os.pathsep
# bash sets these for itself; they describe the script's shell, not an environment to hand on
BASH_OWN = frozenset({"PWD", "OLDPWD", "SHLVL", "_"})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

Action = Literal["set", "overridden", "dropped", "prepended", "appended", "sourced"]


@dataclass(frozen=True)
class EnvChange:
    """How one variable differs from the inherited environment.

    ``new`` is the resulting value (None when dropped); for ``prepended`` / ``appended`` the inherited
    value was kept and ``front`` / ``back`` are the entries put around it. ``by`` names what made the
    change: a recipe key (build.env) or a sourced script's path.
    """

    name: str
    action: Action
    old: str | None
    new: str | None
    front: tuple[str, ...] = ()
    back: tuple[str, ...] = ()
    by: str = ""

    def describe(self) -> str:
        if self.action == "dropped":
            return f"{self.name} dropped (was {self.old!r})"
        if self.action == "overridden":
            return f"{self.name} overridden: {self.old!r} -> {self.new!r}"
        if self.action in ("prepended", "appended"):
            parts = [f"starts with {SEP.join(self.front)}"] if self.front else []
            parts += [f"ends with {SEP.join(self.back)}"] if self.back else []
            return f"{self.name} {' and '.join(parts)}"
        if self.action == "sourced":
            was = f" (was {self.old!r})" if self.old is not None else ""
            return f"{self.name}={self.new!r} from {self.by}{was}"
        return f"{self.name}={self.new!r}"

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "action": self.action, "old": self.old, "new": self.new,
                "front": list(self.front), "back": list(self.back), "by": self.by}


@dataclass(frozen=True)
class Sourced:
    """What one sourced script changed: variables set (value) or removed (None)."""

    script: str
    key: str  # the recipe key that asked for it, e.g. toolchains.cann.env.source[0]
    changed: dict[str, str | None]

    def to_json(self) -> dict[str, object]:
        return {"script": self.script, "key": self.key,
                "set": {k: v for k, v in self.changed.items() if v is not None},
                "unset": [k for k, v in self.changed.items() if v is None]}


@dataclass(frozen=True)
class EnvLayer:
    """One ``EnvOps`` and where it comes from, for messages."""

    ops: EnvOps
    key: str  # the recipe key, e.g. build.env, toolchains.cann.env
    fix: str = ""  # what provides its scripts (a toolchain's install advice), for a missing script
    # (variable, arguments): appended shell-quoted to the variable after the ops (build.cmake's CMake arguments)
    arguments: tuple[str, tuple[str, ...]] | None = None


@dataclass(frozen=True)
class Applied:
    env: dict[str, str]
    changes: tuple[EnvChange, ...]
    sourced: tuple[Sourced, ...] = ()
    named: tuple[str, ...] = ()  # every variable the ops assign (set, if_command, prepend, append), in order


# (script path, its arguments, the environment so far, cwd) -> the environment it leaves
SourceRunner = Callable[[Path, Sequence[str], Mapping[str, str], Path | None], dict[str, str]]
# (command, PATH) -> whether the command is there
CommandLookup = Callable[[str, str], bool]


def on_path(command: str, path: str) -> bool:
    return shutil.which(command, path=path or None) is not None


# --- applying ------------------------------------------------------------------------------------------


@dataclass
class _Trace:
    """What the ops did to one variable: its base value and the entries put around it."""

    base: Literal["inherited", "set", "sourced", "dropped"] = "inherited"
    front: list[str] = field(default_factory=list)
    back: list[str] = field(default_factory=list)
    by: str = ""

    def rebase(self, base: Literal["set", "sourced", "dropped"], by: str) -> None:
        self.base, self.front, self.back, self.by = base, [], [], by


class _Applier:
    def __init__(self, inherited: Mapping[str, str], *, workdir: Path | None, has_command: CommandLookup,
                 source: SourceRunner, command_path: str | None, run_command: CommandRunner = run_command):
        self.inherited = dict(inherited)
        self.env = dict(inherited)
        self.traces: dict[str, _Trace] = {}
        self.sourced: list[Sourced] = []
        self.named: list[str] = []
        self.workdir = workdir
        self.has_command = has_command
        self.source = source
        self.command_path = command_path
        self.run_command = run_command

    def trace(self, name: str) -> _Trace:
        return self.traces.setdefault(name, _Trace())

    def name(self, name: str) -> None:
        if name not in self.named:
            self.named.append(name)

    def apply(self, layer: EnvLayer) -> None:
        ops, key = layer.ops, layer.key
        for name in [n for n in self.env if any(fnmatch.fnmatchcase(n, p) for p in ops.unset)]:
            del self.env[name]
            self.trace(name).rebase("dropped", f"{key}.unset")
        for i, script in enumerate(ops.source):
            self.run_source(script, f"{key}.source[{i}]", layer.fix)
        for name, value in ops.set.items():
            self.set(name, self.globbed(value, f"{key}.set.{name}"), f"{key}.set")
        for name, file in ops.from_file.items():
            self.set(name, self.read_value(file, f"{key}.from_file.{name}", layer.fix), f"{key}.from_file")
        for name, command in ops.from_command.items():
            self.set(name, self.command_value(command, f"{key}.from_command.{name}", layer.fix),
                     f"{key}.from_command")
        for i, optional in enumerate(ops.if_command):
            path = self.env.get("PATH", "")
            if self.command_path:  # where the build will look first (the target Python's bin)
                path = SEP.join([self.command_path, path]) if path else self.command_path
            if self.has_command(optional.command, path):
                for name, value in optional.set.items():
                    self.set(name, self.globbed(value, f"{key}.if_command[{i}].set.{name}"), f"{key}.if_command[{i}]")
        for name, entries in ops.prepend.items():
            self.prepend(name, [self.globbed(e, f"{key}.prepend.{name}") for e in entries], f"{key}.prepend")
        for name, entries in ops.append.items():
            self.append(name, [self.globbed(e, f"{key}.append.{name}") for e in entries], f"{key}.append")
        if layer.arguments is not None:
            self.add_arguments(*layer.arguments, key)

    def set(self, name: str, value: str, by: str) -> None:
        self.env[name] = value
        self.trace(name).rebase("set", by)
        self.name(name)

    def prepend(self, name: str, entries: Iterable[str], by: str, *, named: bool = True) -> None:
        added = _unique(entries)
        if named:
            self.name(name)
        if not added:
            return
        current = _split(self.env.get(name))
        self.env[name] = SEP.join([*added, *(p for p in current if p not in added)])
        trace = self.trace(name)
        if trace.base == "dropped":  # removed, then given: the value is the recipe's alone
            trace.rebase("set", by)
        elif trace.base == "inherited":
            trace.front = [*added, *(f for f in trace.front if f not in added)]
            trace.back = [b for b in trace.back if b not in added]
            trace.by = by

    def append(self, name: str, entries: Iterable[str], by: str) -> None:
        current = _split(self.env.get(name))
        added = [e for e in _unique(entries) if e not in current]
        self.name(name)
        if not added:
            return
        self.env[name] = SEP.join([*current, *added])
        trace = self.trace(name)
        if trace.base == "dropped":
            trace.rebase("set", by)
        elif trace.base == "inherited":
            trace.back = [*trace.back, *added]
            trace.by = by

    def add_arguments(self, name: str, arguments: Sequence[str], by: str) -> None:
        """Arguments after the variable's value, quoted so that a shell-like split (Triton's setup.py:
        ``shlex.split``) gives each back whole, a path with a space included."""
        if not arguments:
            return
        current = self.env.get(name, "")
        self.set(name, " ".join(x for x in (current, shlex.join(arguments)) if x), by)

    def globbed(self, value: str, key: str) -> str:
        """A recipe's value with its {glob:PATTERN}s matched now (never a file's or a command's text)."""
        return expand_globs(value, self.workdir or Path.cwd(), key) if "{glob:" in value else value

    def read_value(self, file: str, key: str, fix: str) -> str:
        return read_file_value(Path(file), self.workdir or Path.cwd(), key, fix)

    def command_value(self, command: CommandValue, key: str, fix: str) -> str:
        path = self.env.get("PATH", "")
        if self.command_path:  # where the build will look first (the target Python's bin)
            path = SEP.join([self.command_path, path]) if path else self.command_path
        try:
            answer = self.run_command(command.argv, dict(self.env), self.workdir, path)
        except FileNotFoundError:
            raise EnvCommandError(f"{key} runs {command.argv[0]}, which is not on PATH ({path})",
                                  fix=fix or f"install {command.argv[0]}, or correct the recipe's {key}") from None
        return value_of(answer, command.argv, key, command.regex)

    def run_source(self, script: SourceScript, key: str, fix: str) -> None:
        path = Path(script.script)
        if not path.is_absolute():
            path = (self.workdir or Path.cwd()) / path
        try:
            after = dict(self.source(path, tuple(script.args), dict(self.env), self.workdir))
        except FileNotFoundError as exc:
            if exc.filename != str(path):
                raise
            raise SourceScriptError(f"{key} sources {path}, {exc.strerror or 'which does not exist'}",
                                    fix=fix or f"install what provides {path.name}, or correct the path in the "
                                    f"recipe's {key}") from None
        except SourceScriptError as exc:  # say which recipe key asked for the script
            raise SourceScriptError(f"{key}: {exc.message}", fix=exc.fix, details=exc.details) from None
        before = self.env
        for name in BASH_OWN:  # bash's own bookkeeping is not the script's doing
            after.pop(name, None)
            if name in before:
                after[name] = before[name]
        for name in [n for n in after if n not in before and not _NAME.fullmatch(n)]:
            del after[name]  # exported bash functions (BASH_FUNC_f%%): not variables a shell can export
        changed: dict[str, str | None] = {}
        for name in [*before, *(n for n in after if n not in before)]:
            old, new = before.get(name), after.get(name)
            if old == new:
                continue
            changed[name] = new
            trace = self.trace(name)
            if new is None:
                trace.rebase("dropped", str(path))
                continue
            around = _around(old, new)
            if around is not None and trace.base == "inherited":
                # the script extended the value (export PATH=/opt/x/bin:$PATH): keep the inherited part apart,
                # so the stamp does not hold this machine's own PATH
                front, back = around
                trace.front = [*front, *(f for f in trace.front if f not in front)]
                trace.back = [*(b for b in trace.back if b not in back), *back]
                trace.by = str(path)
            else:
                trace.rebase("sourced", str(path))
        self.env = after
        self.sourced.append(Sourced(str(path), key, changed))

    def result(self) -> Applied:
        changes = []
        for name, trace in self.traces.items():
            old, new = self.inherited.get(name), self.env.get(name)
            if old == new:
                continue  # inherited exactly as wanted: nothing to say
            if new is None:
                changes.append(EnvChange(name, "dropped", old, None, by=trace.by))
            elif trace.base in ("set", "dropped"):
                changes.append(EnvChange(name, "set" if old is None else "overridden", old, new, by=trace.by))
            elif trace.base == "sourced":
                changes.append(EnvChange(name, "sourced", old, new, by=trace.by))
            else:
                action: Action = "prepended" if trace.front or not trace.back else "appended"
                changes.append(EnvChange(name, action, old, new, tuple(trace.front), tuple(trace.back), trace.by))
        return Applied(dict(self.env), tuple(changes), tuple(self.sourced), tuple(self.named))


def apply_layers(
    layers: Sequence[EnvLayer],
    inherited: Mapping[str, str],
    *,
    workdir: Path | None = None,
    has_command: CommandLookup = on_path,
    source: SourceRunner | None = None,
    path_prefix: str | None = None,
    prefix_key: str = "the target Python's bin",
    command: CommandRunner | None = None,
) -> Applied:
    """``inherited`` with each layer's ops applied in turn, then ``path_prefix`` (if any) put in front of PATH.

    A relative ``source`` script is found under ``workdir``. ``if_command`` commands are looked up on the
    PATH computed so far, with ``path_prefix`` in front (where the command will run), and so are ``from_command``
    programs. ``source`` runs a script (default: bash, ``source_script``); ``command`` a ``from_command`` command
    (default: ``envreads.run_command``).
    """
    applier = _Applier(inherited, workdir=workdir, has_command=has_command, source=source or source_script,
                       command_path=path_prefix, run_command=command or run_command)
    for layer in layers:
        applier.apply(layer)
    if path_prefix:
        applier.prepend("PATH", [path_prefix], prefix_key, named=False)
    return applier.result()


def apply_ops(ops: EnvOps, inherited: Mapping[str, str], *, key: str = "env", **kwargs: object) -> Applied:
    """One ``EnvOps`` applied (see ``apply_layers`` for the keyword arguments)."""
    return apply_layers([EnvLayer(ops, key)], inherited, **kwargs)  # type: ignore[arg-type]


def _split(value: str | None) -> list[str]:
    return value.split(SEP) if value else []


def _unique(entries: Iterable[str]) -> list[str]:
    out: list[str] = []
    for entry in entries:
        if entry and entry not in out:
            out.append(entry)
    return out


def _around(old: str | None, new: str) -> tuple[list[str], list[str]] | None:
    """When ``new`` is ``old`` with entries put in front and/or at the end: those entries."""
    if not old:
        return None
    before, after = old.split(SEP), new.split(SEP)
    for i in range(len(after) - len(before) + 1):
        if after[i:i + len(before)] == before:
            return after[:i], after[i + len(before):]
    return None
