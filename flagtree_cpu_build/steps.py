"""The recipe's steps: commands before the build command (pre-build) and after it installs (post-install).

A step runs only where its ``when`` matches this host, the recipe's target and variant. Each of its
commands runs like the build command: an argv list (never a shell string) in the step's ``cwd``, with
the build environment plus the step's own env operations, its output in ``logs/step-<name>-<time>.log``
and a failure diagnosed from that log with the recipe's known failures first. Steps are part of the
build stamp (their commands, env, and a digest of their ``inputs`` files), so changing one re-runs the
build; a file a step ``creates`` that is gone makes the build stale, as a missing product does.

The log diagnosis shared by the build and its steps lives here too.
"""

from __future__ import annotations

import glob
import json
import os
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .digest import hash_file, hash_text
from .errors import BuildError
from .proc import ProcResult, log_path, run_logged
from .recipe import Recipe, Step

if TYPE_CHECKING:
    from .buildenv import BuildEnv
    from .host import HostFacts
    from .ui import UI

PHASES = ("pre-build", "post-install")


def applicable_steps(recipe: Recipe, host: HostFacts, phase: str | None = None) -> list[Step]:
    """The steps that run on this host (their ``when`` matches), in recipe order; of one phase if given."""
    facts = recipe.facts_on(host)
    return [s for s in recipe.steps
            if (s.when is None or s.when.matches(facts)) and (phase is None or s.phase == phase)]


# --- the stamp ---------------------------------------------------------------------------------------------


def steps_stamp(recipe: Recipe, host: HostFacts) -> dict[str, dict[str, Any]]:
    """What the build stamp records of each applicable step: changing any of it re-runs the build.
    Keyed by name, so a change is reported as "steps.NAME.inputs changed"."""
    from .recipe.schema import to_data

    return {s.name: {"order": i, "phase": s.phase, "cwd": s.cwd, "run": [list(argv) for argv in s.run],
                     "env": {k: v for k, v in to_data(s.env).items() if v},
                     "inputs": _inputs_digest(s) if s.inputs else None}
            for i, s in enumerate(applicable_steps(recipe, host))}


def _inputs_digest(step: Step) -> str:
    """One digest over the files the step's ``inputs`` globs match now (names and contents)."""
    cwd = Path(step.cwd)
    files = sorted({p for pattern in step.inputs for p in matching(cwd, pattern) if p.is_file()})
    listing = "\n".join(f"{p.relative_to(cwd)} {hash_file(p)}" for p in files)
    return hash_text(f"{len(files)}\n{listing}")


def missing_creates(recipe: Recipe, host: HostFacts) -> list[str]:
    """The ``creates`` globs of applicable steps that match nothing now ("step NAME: GLOB")."""
    return [f"step {s.name}: {pattern}" for s in applicable_steps(recipe, host) for pattern in s.creates
            if not any(matching(Path(s.cwd), pattern))]


def unverified(recipe: Recipe, host: HostFacts, python: Path) -> list[str]:
    """The ``verify`` marks of applicable steps that ``python``'s installed distributions no longer hold
    ("step NAME: DIST's FILE does not hold 'TEXT'"): one short run of the interpreter for all of them."""
    wanted = [(s, v) for s in applicable_steps(recipe, host) for v in s.verify]
    if not wanted or not python.exists():
        return []
    from .proc import capture

    answer = capture([str(python), "-c", _VERIFY, json.dumps([[v.distribution, v.file, v.contains]
                                                              for _, v in wanted])])
    try:
        found = json.loads(answer.stdout) if answer.returncode == 0 else None
    except ValueError:
        found = None
    if not isinstance(found, list) or len(found) != len(wanted):  # the interpreter cannot tell: run the step
        return [f"step {s.name}: {python} could not say whether {v.distribution}'s {v.file} holds {v.contains!r}"
                for s, v in wanted]
    return [f"step {s.name}: {v.distribution}'s {v.file} {state}" for (s, v), state in zip(wanted, found, strict=True)
            if state != "ok"]


# run in the target interpreter: for each [distribution, file, text], "ok" or what is wrong
_VERIFY = """import json, sys
from importlib import metadata
out = []
for dist, name, text in json.loads(sys.argv[1]):
    try:
        path = metadata.distribution(dist).locate_file(name)
    except metadata.PackageNotFoundError:
        out.append("cannot be read: " + dist + " is not installed"); continue
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            out.append("ok" if text in f.read() else "does not hold " + repr(text))
    except OSError as exc:
        out.append("cannot be read: " + (exc.strerror or str(exc)))
print(json.dumps(out))
"""


def matching(cwd: Path, pattern: str) -> list[Path]:
    """What a step's ``inputs``/``creates`` glob matches: relative to its cwd, or absolute (a step that
    installs into an artifact's tree names it with a placeholder, e.g. {artifacts.toolchain.path}/...)."""
    if os.path.isabs(pattern):
        return [Path(p) for p in glob.glob(pattern, recursive=True)]
    return list(cwd.glob(pattern))


# --- running -----------------------------------------------------------------------------------------------


def run_steps(phase: str, recipe: Recipe, host: HostFacts, *, env_for: Callable[[Step], BuildEnv],
              logs_dir: Path, ui: UI, jobs: int = 1, verbose: bool = False) -> list[dict[str, Any]]:
    """Run the applicable steps of ``phase`` in order; the first failing command stops the build
    (a BuildError naming the step and the command, diagnosed from its log). Returns what ran."""
    ran = []
    for step in applicable_steps(recipe, host, phase):
        build_env = env_for(step)
        cwd = Path(step.cwd)
        if not cwd.is_dir():
            raise BuildError(f"step {step.name} ({step.phase}): its cwd {cwd} does not exist",
                             fix=f"check the recipe's steps entry {step.name!r} (cwd), or the stage that "
                             "should create that folder")
        for argv in step.run:
            log = log_path(logs_dir, f"step-{step.name}")
            ui.info(f"step {step.name} ({step.phase}): + {shlex.join(argv)}")
            header = [f"step {step.name} ({step.phase})", *(c.describe() for c in build_env.changes)]
            with ui.progress(f"step {step.name}") as task:
                def line(text: str, task: Any = task) -> None:
                    if verbose:
                        ui.console.print(text, markup=False, highlight=False, soft_wrap=True)
                    task.update(0, None, detail=text[:80] if ui.interactive else "running")

                try:
                    result = run_logged(argv, cwd=cwd, env=build_env.env, log=log, header=header, on_line=line)
                except FileNotFoundError as exc:  # the program itself is missing: there is no log to read
                    raise BuildError(f"step {step.name} ({step.phase}) could not start {shlex.join(argv)}: "
                                     f"{exc.filename or argv[0]} not found", log=log,
                                     fix="install it, or correct the recipe's steps entry "
                                     f"{step.name!r}") from None
            if not result.ok:
                raise failure(result, recipe, jobs, f"step {step.name} ({step.phase}) failed running "
                              f"{shlex.join(argv)}")
            ran.append({"step": step.name, "phase": step.phase, "argv": list(argv), "log": str(log)})
    return ran


# --- diagnosis of a failed build or step ----------------------------------------------------------------------


def failure(result: ProcResult, recipe: Recipe, jobs: int, what: str) -> BuildError:
    """The error for a failed command, with what its log says went wrong (the recipe's known build failures
    first, then the generic ones); ``what`` names the command."""
    from .diagnose import diagnose_file, signatures_for

    diagnosis = diagnose_file(result.log, signatures=signatures_for(recipe, "build"))
    how = f"killed by {result.signal_name}" if result.signal_name else f"exit status {result.returncode}"
    details = [f"cause: {diagnosis.cause()}",
               f"log: {result.log}" + (f" (line {diagnosis.line})" if diagnosis.line else "")]
    details += [f"| {line}" for line in diagnosis.excerpt]
    fix = (_fill(diagnosis.signature.fix, max(1, jobs // 2), result.log) if diagnosis.signature
           else f"read the log ({result.log}); re-run with --verbose to watch every line")
    return BuildError(f"{what} ({how})", details=tuple(details), fix=fix, log=result.log,
                      diagnosis=diagnosis.to_json())


def _fill(text: str, jobs_half: int, log: Path) -> str:
    try:
        return text.format(jobs_half=jobs_half, log=log)
    except (KeyError, IndexError, ValueError):  # a recipe's fix with other braces: shown as written
        return text
