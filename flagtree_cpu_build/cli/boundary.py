"""The error boundary: the one place a failure becomes a message, an exit code and the --json envelope.

Every failure the core raises is a ``FlagtreeCpuError``; ``guard_invoke`` turns it into a message
for people (stderr) and an exit code, so no command has its own try/except. ``guard_main`` wraps
click's parsing too, so a usage error (unknown command or option, a bad value) is reported the
same way, and prints the run's one ``--json`` document: the envelope with the command's result
and the error. Signals and closed pipes are set up here, once per process.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING

import typer

from ..errors import ExitCode, FlagtreeCpuError, Interrupted, UsageError
from ..ui import plain_width, survive_closed_pipes
from .envelope import crash_json, envelope, exit_json
from .session import Run, Verdict

if TYPE_CHECKING:
    from typer._click.exceptions import ClickException


def run_of(ctx: typer.Context) -> Run:
    """This invocation's record: the root context's ``obj`` (``guard_main`` puts it there)."""
    root = ctx.find_root()
    if not isinstance(root.obj, Run):  # invoked without FlagtreeGroup.main (a test calling a command directly)
        root.obj = Run(sys.argv[1:])
    return root.obj


def guard_main(run: Run, parse_and_invoke: Callable[[], object]) -> int:
    """Run click (in non-standalone mode) and return the exit code; usage errors and end of input are
    reported here, and under --json the envelope is printed, whatever happened."""
    from typer._click.exceptions import ClickException

    try:
        code = parse_and_invoke()
    except ClickException as exc:
        _report_usage_error(run, exc)
        code = exc.exit_code
    except typer.Abort:  # end of input where click asked for it; the tool itself never prompts
        run.error = Interrupted("reading input")
        run.ui.error(run.error)
        code = int(run.error.exit_code)
    code = code if isinstance(code, int) else 0
    if run.json_mode and (run.command is not None or run.error is not None or run.crash is not None):
        _print_envelope(run, code)  # not for --help or --version: they print what was asked for
    return code


def guard_invoke(ctx: typer.Context, invoke: Callable[[], object]) -> object:
    """Invoke the command; a failure is shown to people and recorded for the envelope, then exits."""
    run = run_of(ctx)
    try:
        return invoke()
    except Verdict as verdict:  # the command has shown it (a table of what failed)
        run.error = verdict.error
        raise typer.Exit(int(verdict.error.exit_code)) from None
    except FlagtreeCpuError as exc:
        run.error = exc
        run.ui.error(exc)
        raise typer.Exit(int(exc.exit_code)) from None
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (errors.Terminated)
        run.error = Interrupted(cause=exc)
        run.ui.error(run.error)
        raise typer.Exit(int(run.error.exit_code)) from None
    except (typer.Exit, typer.Abort, typer.TyperException):  # click's own, usage errors included
        raise
    except Exception as exc:  # noqa: BLE001 - the one place unexpected errors are reported
        full = _disk_full(exc)
        if full is not None:  # a full disk is foreseeable wherever the tool writes, not a bug to report
            run.error = full
            run.ui.error(full)
            raise typer.Exit(int(full.exit_code)) from None
        run.crash = exc
        run.ui.unexpected(exc)
        raise typer.Exit(int(ExitCode.UNEXPECTED)) from None


def _disk_full(exc: BaseException) -> FlagtreeCpuError | None:
    """A write that failed because the file system (or the user's quota) is full, as the error that says where and
    what to free; downloads and unpacks say it themselves, this covers every other write (state, logs, locks)."""
    from pathlib import Path

    from ..diskspace import DiskFull, disk_full, is_disk_full

    if not is_disk_full(exc):
        return None
    assert isinstance(exc, OSError)
    kept = "what this run finished is kept; the same command continues from there"
    if isinstance(exc.filename, str):
        return disk_full(Path(exc.filename), None, f"writing {exc.filename}", None, keep_note=kept)
    return DiskFull(f"a file system filled while this run was writing ({exc.strerror})", details=(kept,),
                    fix="free space where the workspace, the download cache and ~/.triton live (flagtree-cpu "
                    "doctor --only resources.disk shows each), then run the same command again")


def _report_usage_error(run: Run, exc: ClickException) -> None:
    if exc.__class__.__name__ == "NoArgsIsHelpError":  # `flagtree-cpu` alone: the help, not an error
        from typer import rich_utils

        rich_utils.rich_format_error(exc)
        return
    ctx = getattr(exc, "ctx", None)
    path = ctx.command_path if ctx is not None else "flagtree-cpu"
    if run.command is None and ctx is not None and ctx.parent is not None:
        run.command = path.partition(" ")[2] or None  # `status --bogus`: the command is known
    # the same error:/fix: lines as every other error (not click's box), the fix a command to copy
    error = UsageError(exc.format_message(), fix=f"{path} --help")
    try:  # click's usage errors are 2 (ours too); its few other errors 1
        error.exit_code = ExitCode(exc.exit_code)
    except ValueError:
        pass
    run.error = error
    run.ui.error(error)


def _print_envelope(run: Run, code: int) -> None:
    if run.crash is not None:
        error = crash_json(run.crash)
    elif run.error is not None:
        error = run.error.to_json()
        error["fix"] = run.ui.in_context(run.error.fix)  # the command the user copies, in this run's context
    else:
        error = exit_json(code) if code else None
    result = run.options.ui.json_result if run.options is not None else None
    run.ui.write_json(envelope(run.command, result, error))


# --- the process ------------------------------------------------------------------------------------------


def stop_on_sigterm() -> None:
    """SIGTERM (CI cancelling a job, `timeout`, `kill`) and SIGHUP (the terminal closed; git and the build
    run in their own process groups, so it reaches only us) stop the run the way Ctrl-C does: the same
    cleanup, then exit 143 / 129. Raised once; a second signal during the cleanup is ignored so the
    cleanup can finish (SIGKILL still works, and later runs sweep what it leaves). A stop a finalizer dropped
    is delivered again (interrupts.keep_interrupts_from_finalizers), Ctrl-C's too."""
    from ..errors import Terminated
    from ..interrupts import first_stop, keep_interrupts_from_finalizers

    keep_interrupts_from_finalizers()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if first_stop(signum):
            raise Terminated(signum)

    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) == signal.SIG_DFL:  # `nohup flagtree-cpu ...` keeps SIGHUP ignored
            signal.signal(signum, on_signal)


def _help_width() -> None:
    """Help read through a pipe or in a log uses the same width as the tool's other plain output,
    not rich's default 80 columns, which cut option names such as --install-system-packages."""
    from typer import rich_utils

    if rich_utils.MAX_WIDTH is None and not sys.stdout.isatty():
        rich_utils.MAX_WIDTH = plain_width()


def prepare_process() -> None:
    """Once per process, before the command line is parsed: signals, closed pipes, help width."""
    stop_on_sigterm()
    survive_closed_pipes()
    _help_width()
