"""Every failure the tool reports on purpose, with its exit code.

Core modules raise these; only ``cli`` turns them into output and an exit code. The
exit codes are a public contract (CI pipelines branch on them), so they live in this
one table and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Any


class ExitCode(IntEnum):
    OK = 0  # success
    UNEXPECTED = 1  # an unexpected error: a bug; --verbose shows the traceback to report
    USAGE = 2  # bad command line or bad recipe
    SOURCE = 3  # git: clone, fetch, pin, dirty checkout
    ARTIFACT = 4  # download, checksum, extraction
    BUILD = 5  # the build failed (the error names its log and what was diagnosed in it)
    VALIDATION = 6  # a required validation check failed
    DOCTOR = 7  # doctor (or setup's preflight) found a blocking problem
    BUSY = 8  # another flagtree-cpu run holds the workspace
    NOT_CURRENT = 9  # status --check: the workspace is not what the recipe says
    HANGUP = 129  # SIGHUP (the terminal was closed): 128 + 1
    INTERRUPTED = 130  # Ctrl-C (SIGINT): 128 + 2, as shells report it
    TERMINATED = 143  # SIGTERM (a CI runner cancelling the job, `timeout`): 128 + 15


class FlagtreeCpuError(Exception):
    """A failure with a message for humans, an optional fix, and an exit code.

    ``message`` says what failed and where; ``fix`` is the command or action that
    resolves it (rendered as "fix: ..."); ``details`` are extra lines (file lists,
    expected/actual values). A failed build or kernel also names its ``log`` and what
    was read from it (``diagnosis``: signature, cause, line, excerpt).

    ``kind`` is the stable short id machines branch on: the ``code`` of the error in
    every ``--json`` document (see the README's "JSON output").
    """

    exit_code: ExitCode = ExitCode.UNEXPECTED
    kind: str = "error"
    # the host names that got no DNS answer (no network here, or a wrong name): setup makes one error of the stages
    # that failed for that side by side, naming every host (``no_network``)
    unresolved_hosts: tuple[str, ...] = ()

    def __init__(self, message: str, *, fix: str | None = None, details: tuple[str, ...] = (),
                 log: str | Path | None = None, diagnosis: dict[str, object] | None = None):
        super().__init__(message)
        self.message = message
        self.fix = fix
        self.details = tuple(details)
        self.log = str(log) if log else None
        self.diagnosis = diagnosis

    def to_json(self) -> dict[str, object]:
        return {
            "code": self.kind,
            "exit_code": int(self.exit_code),
            "message": self.message,
            "fix": self.fix,
            "details": list(self.details),
            "log": self.log,
            "diagnosis": self.diagnosis,
        }


class UsageError(FlagtreeCpuError):
    exit_code = ExitCode.USAGE
    kind = "usage"


class OtherRecipe(UsageError):
    """A recipe (or variant) other than the one the workspace records: refused, never used there."""

    kind = "other-recipe"


@dataclass(frozen=True)
class RecipeProblem:
    """One thing wrong with a recipe, located as precisely as we can."""

    origin: str  # the recipe file, or "--set KEY=VALUE" for an override
    line: int | None
    key: str  # dotted key path, e.g. "sources.flagtree.commit"; "" for the whole file
    message: str
    fix: str | None = None

    @property
    def where(self) -> str:
        return f"{self.origin}:{self.line}" if self.line else self.origin

    def to_json(self) -> dict[str, object]:
        return {
            "file": self.origin,
            "line": self.line,
            "key": self.key,
            "message": self.message,
            "fix": self.fix,
        }


@dataclass(frozen=True)
class RecipeWarning:
    key: str
    message: str


class RecipeError(FlagtreeCpuError):
    """A recipe that cannot be used; carries every problem found, not only the first.

    ``fix`` is the closing advice for the whole list. The default fits the usual case, keys
    the format does not accept; the loader passes its own when the file is not YAML it can
    read, or is empty, where "correct the keys" would send the user the wrong way.
    """

    exit_code = ExitCode.USAGE
    kind = "recipe"
    KEYS_FIX = "correct the keys listed above; `flagtree-cpu recipe schema` prints every key the recipe format accepts"

    def __init__(self, origin: str, problems: list[RecipeProblem] | tuple[RecipeProblem, ...], *,
                 fix: str | None = None):
        self.origin = origin
        self.problems = tuple(problems)
        count = len(self.problems)
        noun = "problem" if count == 1 else "problems"
        super().__init__(
            f"recipe {origin} has {count} {noun}",
            fix=fix or self.KEYS_FIX,
            details=tuple(_format_problem(p) for p in self.problems),
        )

    def to_json(self) -> dict[str, object]:
        data = super().to_json()
        data["problems"] = [p.to_json() for p in self.problems]
        return data


def _format_problem(problem: RecipeProblem) -> str:
    key = f" {problem.key}:" if problem.key else ""
    text = f"{problem.where}:{key} {problem.message}"
    if problem.fix:
        text += f"\n    fix: {problem.fix}"
    return text


class RecipeNotFound(FlagtreeCpuError):
    exit_code = ExitCode.USAGE
    kind = "recipe"


class SourceError(FlagtreeCpuError):
    exit_code = ExitCode.SOURCE
    kind = "source"


class ArtifactError(FlagtreeCpuError):
    exit_code = ExitCode.ARTIFACT
    kind = "artifact"


class BuildError(FlagtreeCpuError):
    exit_code = ExitCode.BUILD
    kind = "build"


class ValidationFailed(FlagtreeCpuError):
    exit_code = ExitCode.VALIDATION
    kind = "validation"
    # what setup's report keeps of the failed run (the validation report, whether JUnit was written)
    record: dict[str, Any] | None = None


class WouldStop(FlagtreeCpuError):
    """A dry run's verdict: setup would stop with ``error``. Exits with that error's exit code and reports its
    kind, so a CI gate on `setup --dry-run` sees what the real run would show (the class says the code: no
    table maps codes back to classes)."""

    def __init__(self, message: str, *, error: type[FlagtreeCpuError] = FlagtreeCpuError, **kwargs: Any):
        super().__init__(message, **kwargs)
        self.exit_code = error.exit_code
        self.kind = error.kind


class DoctorFailed(FlagtreeCpuError):
    exit_code = ExitCode.DOCTOR
    kind = "doctor"


class WorkspaceBusy(FlagtreeCpuError):
    exit_code = ExitCode.BUSY
    kind = "busy"


class NotCurrent(FlagtreeCpuError):
    """status --check: the workspace is not what the recipe says (a verdict, not a failure of the tool)."""

    exit_code = ExitCode.NOT_CURRENT
    kind = "not-current"


class Terminated(KeyboardInterrupt):
    """SIGTERM (or SIGHUP), raised in the main thread by the CLI's signal handler.

    A KeyboardInterrupt on purpose: every cleanup path written for Ctrl-C (stopping child
    process groups, removing half-made folders, keeping a download's ``.part``) runs for it too.
    """

    def __init__(self, signum: int = 15):
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return {1: "SIGHUP", 15: "SIGTERM"}.get(self.signum, f"signal {self.signum}")


class Interrupted(FlagtreeCpuError):
    """Ctrl-C or SIGTERM: the run stopped; whatever was finished stays finished."""

    exit_code = ExitCode.INTERRUPTED
    kind = "interrupted"

    def __init__(self, what: str = "the run", *, cause: BaseException | None = None):
        super().__init__(
            f"{f'stopped by {cause.name}' if isinstance(cause, Terminated) else 'interrupted'} during {what}",
            fix="re-run the same command; finished steps are not repeated",
        )
        if isinstance(cause, Terminated):  # 128 + the signal, as a shell reports a process it ended
            self.exit_code = ExitCode(128 + cause.signum)
