"""The commands that read and never change the workspace: status, env, doctor, clean (which removes only
the tool's own caches), and `schema`, the JSON Schema of every command's --json output."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..invocation import elsewhere
from . import completion, render
from .app import (
    CacheDirOption,
    FlagtreeCommand,
    MirrorsOption,
    PythonOption,
    app,
    deprecated_check,
    examples,
    options,
)
from .opening import opened
from .session import Verdict

if TYPE_CHECKING:
    from ..recipe import Recipe


@app.command(cls=FlagtreeCommand, epilog=examples(
    "flagtree-cpu status",
    "flagtree-cpu status --json | jq .result.items",
    "flagtree-cpu status --check          # CI gate: exit 9 unless everything is current",
))
def status(
    ctx: typer.Context,
    python: PythonOption = None,
    check: Annotated[bool, typer.Option("--check", help="Exit with code 9 unless everything is current (for CI "
                                        "gates); prints the same report.")] = False,
) -> None:
    """What the workspace holds compared with the recipe: commits, links, artifacts, build stamp, last validation.

    Read-only and offline. `setup --dry-run` shows the same with what setup would do about each item.
    """
    from ..errors import NotCurrent
    from ..stagekit.stage import RunOptions
    from ..status import inspect_workspace

    opts, stage_ctx, target = opened(ctx, python=python)
    found = inspect_workspace(stage_ctx, RunOptions(python=target))
    render.status(opts.ui, found)
    behind = [i for i in found.items if not i.current]
    if check and behind:
        listed = ", ".join(f"{i.area} {i.subject} ({i.state})" for i in behind)
        if not opts.ui.json_mode:
            opts.ui.warn("not current: " + listed)
        raise Verdict(NotCurrent(f"{len(behind)} of {len(found.items)} items are not current: {listed}",
                                 fix="`flagtree-cpu setup` brings them up to date (`setup --dry-run` shows how)"))


@app.command("env", cls=FlagtreeCommand, epilog=examples(
    'eval "$(flagtree-cpu env)"            # before running Triton kernels',
    "flagtree-cpu env --shell fish | source",
    "flagtree-cpu env --build              # what a build gets (and what it drops)",
    "flagtree-cpu env --build --only NAME  # what the recipe's build NAME (under `builds:`) gets",
    "flagtree-cpu env --json",
))
def env_command(
    ctx: typer.Context,
    build_env: Annotated[bool, typer.Option("--build", help="The build environment instead of the run-time one.")]
    = False,
    offline: Annotated[bool, typer.Option("--offline", help="With --build: the offline build's environment.")]
    = False,
    shell: Annotated[str, typer.Option("--shell", help="bash, zsh or fish.")] = "bash",
    python: PythonOption = None,
    only: Annotated[Optional[str], typer.Option(
        "--only", metavar="NAME", help="With --build: the environment of the recipe's build NAME (`build`, or a name "
        "under `builds:`) instead of the final build's.")] = None,
) -> None:
    """Print shell exports of the recipe's run-time environment (runtime.env), or with --build the build's.

    The recipe's env operations (unset, source, set, if_command, prepend, append) and those of its toolchains are
    applied to this shell's environment; the output sets what they changed (whole values: a prepended PATH is
    printed in full) and unsets what they removed. A sourced vendor script is run once here, and what it changed
    is printed like the rest (a line on stderr names the script). Only the exports go to stdout.

    A JIT compiler reads its variables when it first compiles, so the run-time variables matter then too (a
    backend selected by an environment variable, a toolchain found on PATH).
    """
    from ..buildenv import not_shell_names, render_exports
    from ..errors import UsageError

    if shell not in ("bash", "zsh", "fish"):
        raise UsageError(f"--shell {shell!r} is not supported", fix="use bash, zsh or fish")
    if offline and not build_env:  # an option that would do nothing is a mistake worth naming
        raise UsageError("--offline changes only the build environment, and this prints the run-time one",
                         fix="add --build (flagtree-cpu env --build --offline), or drop --offline")
    if only is not None and not build_env:
        raise UsageError("--only names one of the recipe's builds, and this prints the run-time environment",
                         fix=f"add --build (flagtree-cpu env --build --only {only}), or drop --only")
    opts, stage_ctx, target = opened(ctx, python=python)
    recipe, host = stage_ctx.recipe, stage_ctx.host
    if build_env:
        from ..buildenv import build_environment

        computed = build_environment(_build_seen(recipe, only), target, offline=offline, host=host,
                                     workdir=stage_ctx.workspace.root)
        values, unset = computed.settings(), computed.removed()
        for conflict in computed.conflicts:
            opts.ui.warn(f"inherited {conflict.describe()}")
    else:
        from ..buildenv import runtime_env

        computed = runtime_env(recipe, os.environ, facts=recipe.facts_on(host),
                               workdir=stage_ctx.workspace.root)
        values, unset = computed.exports(), computed.removed()
    if opts.ui.json_mode:
        opts.ui.emit_json({"kind": "build" if build_env else "runtime", "set": values, "unset": unset,
                           "changes": [c.to_json() for c in computed.changes],
                           "sourced": [s.to_json() for s in computed.sourced]})
    else:
        # Which script changed what goes to stderr, not into the output as `#` comments: an interactive zsh reads
        # `#` as a comment only with INTERACTIVE_COMMENTS set (off by default), and the line holds the script's
        # path, which the recipe chose — the shell would run it, or stop the whole eval at its '('.
        for s in computed.sourced:
            opts.ui.info(f"from {s.script} ({s.key}): {len(s.changed)} variable{'' if len(s.changed) == 1 else 's'} "
                         "changed")
        for name in not_shell_names(values, unset):  # inherited (an unset glob matched it): never printed
            opts.ui.warn(f"{name!r} is not a name a shell can set; left out of the output")
        opts.ui.emit_text(render_exports(values, unset, shell))  # type: ignore[arg-type]


def _build_seen(recipe: Recipe, only: str | None) -> Recipe:
    """The recipe as its build ``only`` (default: the final build, the one `build` ends with) sees it."""
    from ..build_stamp import build_view
    from ..errors import UsageError
    from ..recipe.builds import final_build
    from ..stages.build.plan import chosen_builds

    final = final_build(recipe)
    if final is None:
        raise UsageError(f"recipe {recipe.name} has no build section", fix="add `build:` to the recipe")
    if only is not None:
        chosen_builds(recipe, only)  # an unknown name: a usage error naming the recipe's builds
    return build_view(recipe, only or final)


@app.command(cls=FlagtreeCommand, epilog=examples(
    "flagtree-cpu doctor",
    "flagtree-cpu doctor --json > doctor.json      # for CI and bug reports",
    "flagtree-cpu doctor --only cpu.features --only cpu.topology",
    "flagtree-cpu doctor --snapshot board.tar.gz   # on a board: what doctor reads about it, in one file",
    "flagtree-cpu doctor --sysroot board.tar.gz    # anywhere: check that board from its snapshot",
    "flagtree-cpu doctor --mirror https://oaitriton.blob.core.windows.net/=https://mirror.example/triton/",
    "flagtree-cpu doctor --list",
))
def doctor(
    ctx: typer.Context,
    only: Annotated[Optional[list[str]], typer.Option(
        "--only", metavar="ID", help="Run only this check. Repeatable.", autocompletion=completion.doctor_checks)]
    = None,
    old_checks: Annotated[Optional[list[str]], typer.Option(  # deprecated: --check is status's and link's gate
        "--check", hidden=True, autocompletion=completion.doctor_checks)] = None,
    list_checks: Annotated[bool, typer.Option("--list", help="List the checks and exit.")] = False,
    sysroot: Annotated[Optional[Path], typer.Option("--sysroot", metavar="FILE.tar.gz|DIR", help="Read /proc, /sys "
                                                    "and /etc from a board's snapshot (made there with --snapshot) "
                                                    "or a folder, instead of /.")] = None,
    snapshot: Annotated[Optional[Path], typer.Option("--snapshot", metavar="FILE.tar.gz", help="Write what doctor "
                                                     "reads about this machine to FILE, for --sysroot elsewhere, "
                                                     "and exit.")] = None,
    offline: Annotated[bool, typer.Option("--offline", help="Skip the network checks.")] = False,
    mirrors: MirrorsOption = None,
    python: PythonOption = None,
    schema: Annotated[bool, typer.Option("--schema", help="Print the JSON Schema of --json output and exit.")]
    = False,
) -> None:
    """Check host, CPU, toolchain, Python, network and workspace; say what is wrong and how to fix it.

    Read-only and fast: nothing is written (but the file --snapshot names), downloaded or built. Exit code 7 when a
    check fails (warnings do not fail). Each check has a stable id; --json output is versioned
    (flagtree-cpu/doctor/v1).
    """
    import dataclasses
    from contextlib import nullcontext

    from ..context import chosen_python, open_context
    from ..cpuinfo import read_cpu
    from ..doctor import AREAS, DOCTOR_SCHEMA, DoctorContext, all_checks, run_doctor
    from ..errors import DoctorFailed, UsageError
    from ..mirrors import parse_mirrors
    from ..snapshot import open_sysroot, write_snapshot
    from ..stagekit.stage import RunOptions

    opts = options(ctx)
    check_ids = [*(only or ()), *deprecated_check(opts.ui, "doctor", old_checks)]
    if schema:
        opts.ui.emit_json(DOCTOR_SCHEMA)
        return
    if list_checks:
        render.check_list(opts.ui, all_checks())
        return
    if snapshot is not None:
        if sysroot is not None:
            raise UsageError("--snapshot records this machine and --sysroot reads another one: pass one of them",
                             fix=f"on the board: {elsewhere('doctor', '--snapshot', 'board.tar.gz')}; anywhere: "
                             "flagtree-cpu doctor --sysroot board.tar.gz")
        render.snapshot(opts.ui, write_snapshot(snapshot.expanduser()))
        return
    rules = tuple(parse_mirrors(mirrors or []))  # with FLAGTREE_CPU_MIRRORS, as fetch reads them
    with open_sysroot(sysroot) if sysroot else nullcontext() as board:  # a tarball's folder is removed after
        root = board.root if board else Path("/")
        request = dataclasses.replace(opts.request(python=python), sysroot=root)
        stage_ctx = open_context(request, opts.ui)
        target = chosen_python(request, stage_ctx.workspace)
        euid = os.geteuid() if board is None or root == Path("/") else board.euid  # a board's: its snapshotter's
        run_options = RunOptions(python=target, offline=offline, mirrors=rules, installer=opts.installer)
        report = run_doctor(DoctorContext(stage_ctx.recipe, stage_ctx.workspace, stage_ctx.host, read_cpu(root), root,
                                          run_options, dict(os.environ), euid=euid),
                            check_ids)
        if board:
            report = dataclasses.replace(report, sysroot=board.label)
    render.doctor(opts.ui, report, AREAS, board.describe() if board else None)
    if report.failed:
        failed = [f for f in report.findings if f.status == "fail"]
        raise Verdict(DoctorFailed(f"{len(failed)} check{'s' if len(failed) > 1 else ''} failed: "
                                   + ", ".join(f.id for f in failed),
                                   details=tuple(f"{f.id}: {f.detail}" for f in failed),
                                   fix="the fixes are listed with each check (`result.checks[].fix` in --json)"))


@app.command(cls=FlagtreeCommand, epilog=examples(
    "flagtree-cpu clean --dry-run --all       # what would be freed, and how much",
    "flagtree-cpu clean                       # half-made folders a killed run left",
    "flagtree-cpu clean --downloads           # the download cache (the published trees stay)",
    "flagtree-cpu clean --trees               # LLVM trees flagtree-cpu published that this recipe no longer uses",
))
def clean(
    ctx: typer.Context,
    downloads: Annotated[bool, typer.Option("--downloads", help="Also remove the download cache: tarballs and "
                                            "partial downloads (the published trees stay).")] = False,
    trees: Annotated[bool, typer.Option("--trees", help="Also remove toolchain trees flagtree-cpu published that "
                                        "the recipe does not use (never a tree it did not publish).")] = False,
    all_: Annotated[bool, typer.Option("--all", help="Both --downloads and --trees.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be removed, with sizes; remove "
                                          "nothing.")] = False,
    cache_dir: CacheDirOption = None,
) -> None:
    """Free the disk flagtree-cpu's own caches take; never anything it did not make, never the workspace.

    Without options: half-made folders a killed run left (removed by later runs anyway). --downloads: the
    download cache. --trees: older toolchain trees (e.g. the LLVM of a previous pin) that carry flagtree-cpu's
    stamp; the recipe's own tree, and trees unpacked by hand or by FlagTree's setup.py, are left alone. Anything
    another run is using is left alone too.
    """
    from ..clean import CleanOptions, run_clean

    opts, stage_ctx, _ = opened(ctx)
    report = run_clean(stage_ctx, CleanOptions(downloads=downloads or all_, trees=trees or all_, dry_run=dry_run,
                                               cache_dir=cache_dir.expanduser() if cache_dir else None))
    render.clean(opts.ui, report, asked_for_more=downloads or trees or all_)


@app.command("schema", cls=FlagtreeCommand, epilog=examples(
    "flagtree-cpu schema > flagtree-cpu-output.schema.json",
    "flagtree-cpu status --json | check-jsonschema --schemafile flagtree-cpu-output.schema.json -",
))
def schema_command(ctx: typer.Context) -> None:
    """Print the JSON Schema (draft 2020-12) of the envelope every command prints with --json.

    One document per run on stdout: {"schema", "version", "command", "ok", "result", "error"}; the error has a
    stable code, the exit code, the message and the fix. `recipe schema` describes recipe files instead.
    """
    from .envelope import ENVELOPE_SCHEMA

    options(ctx).ui.emit_json(ENVELOPE_SCHEMA)
