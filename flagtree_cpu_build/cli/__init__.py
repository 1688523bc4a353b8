"""The command line: parse options, open the context, call the core, render. Nothing else.

This package is the only place that imports typer or decides exit codes.

    app            the Typer app, the global options, the command classes, options several commands share
    session        one run: the parsed global options, the command that ran, the error that stopped it
    boundary       the error boundary (failures -> message, exit code, --json envelope), signals, pipes
    envelope       the --json envelope and its JSON Schema (`flagtree-cpu schema`)
    render         result objects -> tables for people, or the envelope's result
    recipe_cmds    recipe list / show / validate / schema
    stage_cmds     setup and its stages: sync, link, fetch, python, lock
    build_cmd      build (an install-only board asked about before the host is judged)
    validate_cmd   validate
    inspect_cmds   status, env, doctor, clean, schema
    bundle_cmds    bundle create (and the `bundle` group)
    bundle_import_cmds  bundle import / verify (setup --bundle calls the core importer directly)

Importing the command modules registers their commands on ``app``.
"""

from __future__ import annotations

from collections.abc import Sequence

# importing the command modules registers their commands
from . import (  # noqa: F401
    build_cmd,
    bundle_cmds,
    bundle_import_cmds,
    inspect_cmds,
    recipe_cmds,
    stage_cmds,
    validate_cmd,
)
from .app import app, hoist_global_options, reflow
from .boundary import prepare_process

__all__ = ["app", "hoist_global_options", "main", "reflow"]


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point."""
    import sys

    prepare_process()
    app(args=list(sys.argv[1:] if argv is None else argv), prog_name="flagtree-cpu")
