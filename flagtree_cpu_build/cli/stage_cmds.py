"""The commands that change the workspace: setup and each of its stages (sync, fetch, link, python,
build, lock). Each opens the context, holds the workspace, runs one stage and renders its result."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from . import render
from .app import (
    CacheDirOption,
    CompileCacheOption,
    CompileFarmOption,
    FlagtreeCommand,
    GitCacheOption,
    JobsOption,
    MirrorsOption,
    ModelOption,
    PythonOption,
    ReplaceOption,
    TimeoutOption,
    WheelhouseOption,
    app,
    check_compile_cache,
    check_compile_farm,
    examples,
)
from .bundle_trust import ExpectDigestOption, TrustedKeysOption, import_for_setup, trust_of
from .opening import absolute, build_jobs, carried_recipe, exclusive, opened
from .session import Verdict, artifact_names, named_paths
from .stage_dry_run import DryRunOption, dry_run_stage

if TYPE_CHECKING:
    pass


@app.command(cls=FlagtreeCommand, epilog=examples(
    "flagtree-cpu setup",
    "flagtree-cpu setup --dry-run                  # the plan with reasons and the download size",
    "flagtree-cpu setup --install-system-packages  # a bare Ubuntu/Debian machine (apt-get, with sudo)",
    "flagtree-cpu setup --offline --cache-dir /media/usb/flagtree-cache",
    "flagtree-cpu setup --frozen --require-hashes --junit reports/validate.xml   # CI",
    "flagtree-cpu setup --skip-build --ignore-host # sources, artifacts and links on any machine",
    "flagtree-cpu setup --bundle board.bundle      # no network: import the bundle, then setup --offline",
    "flagtree-cpu setup --bundle board.bundle --trusted-keys allowed_signers   # only a bundle signed by them",
    "flagtree-cpu setup --wheelhouse http://wheels.lan/flagtree/  # install the fleet's build if one fits",
))
def setup(
    ctx: typer.Context,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print what would be done and why, with the download "
                                          "size; change nothing.")] = False,
    offline: Annotated[bool, typer.Option("--offline", help="No network: sources, downloads and Python packages "
                                          "must already be here; every missing one is listed.")] = False,
    frozen: Annotated[bool, typer.Option("--frozen", help="The lock file must match the recipe and name every "
                                         "commit and sha256; never write it (CI).")] = False,
    require_hashes: Annotated[bool, typer.Option("--require-hashes", help="Every download needs a known sha256 "
                                                 "(recipe or lock).")] = False,
    update: Annotated[bool, typer.Option("--update", help="Move unpinned sources to their branch tips.")] = False,
    allow_dirty: Annotated[bool, typer.Option("--allow-dirty", help="Move checkouts with changes to tracked "
                                              "files (git still refuses if they conflict).")] = False,
    skip_build: Annotated[bool, typer.Option("--skip-build", help="Stop after sources, artifacts and links (no venv, "
                                             "build or validation).")] = False,
    skip_validate: Annotated[bool, typer.Option("--skip-validate", help="Do not run the recipe's "
                                                "checks.")] = False,
    ignore_host: Annotated[bool, typer.Option("--ignore-host", help="Go on when preflight finds this machine "
                                              "unsuitable (testing).")] = False,
    install_system_packages: Annotated[bool, typer.Option("--install-system-packages", help="Run `apt-get "
                                                          "install -y` (with sudo unless root) for the recipe's "
                                                          "missing system packages.")] = False,
    jobs: JobsOption = None,
    python: PythonOption = None,
    git_cache: GitCacheOption = None,
    cache_dir: CacheDirOption = None,
    mirrors: MirrorsOption = None,
    model: ModelOption = None,
    junit: Annotated[Optional[Path], typer.Option("--junit", metavar="FILE", help="Write the validation as JUnit "
                                                  "XML (the checks always run then).")] = None,
    timeout: TimeoutOption = None,
    bundle: Annotated[Optional[Path], typer.Option("--bundle", metavar="FILE", help="Import this bundle first "
                                                   "(`bundle import`), then set up with --offline.")] = None,
    trusted_keys: TrustedKeysOption = None,
    expect_digest: ExpectDigestOption = None,
    compile_cache: CompileCacheOption = None,
    compile_farm: CompileFarmOption = None,
    wheelhouse: WheelhouseOption = None,
    replace: ReplaceOption = None,
) -> None:
    """Do everything: preflight, sources and artifacts (concurrently), links, venv and prerequisites, build, validate.

    Each stage is the same code as its own command and does only what is missing, so setup resumes after Ctrl-C or a
    failure, and a re-run when everything is current takes a second with no network, pip or build. Another run on the
    same workspace makes this one exit with code 8 (or wait, with --wait). The exit code is the failing stage's.
    """
    from ..mirrors import parse_mirrors
    from ..stagekit.stage import FetchExtras, RunOptions

    trust = trust_of(trusted_keys, expect_digest) if bundle is not None else None
    carried = (carried_recipe(ctx, bundle, trust, python=python, jobs=jobs)
               if bundle is not None and not dry_run else None)
    # a setup refused before it ran leaves no recipe file the bundle brought (nor a workspace made for it)
    undone_on_failure = carried.undone_on_failure if carried is not None else contextlib.nullcontext
    with undone_on_failure():
        opts, stage_ctx, target = opened(ctx, python=python, jobs=jobs,
                                         request=carried.request if carried is not None else None)
    check_compile_cache(compile_cache, stage_ctx, target)
    check_compile_farm(compile_farm, stage_ctx)
    if bundle is not None and dry_run:
        from ..errors import UsageError

        raise UsageError("--dry-run cannot show a plan for a bundle it does not import",
                         fix=f"import it first (flagtree-cpu bundle import {bundle}), then: flagtree-cpu setup "
                         "--dry-run --offline")
    setup_options = RunOptions(
        python=target, offline=offline or bundle is not None, frozen=frozen, require_hashes=require_hashes,
        update=update, allow_dirty=allow_dirty, skip_build=skip_build, skip_validate=skip_validate,
        ignore_host=ignore_host, install_system_packages=install_system_packages,
        git_cache=git_cache.expanduser() if git_cache else None,
        cache_dir=cache_dir.expanduser() if cache_dir else None, mirrors=tuple(parse_mirrors(mirrors or [])),
        jobs=build_jobs(stage_ctx), model=absolute(model), junit=absolute(junit), timeout=timeout,
        verbose=opts.ui.verbose, compile_cache=compile_cache, compile_farm=compile_farm, wheelhouse=wheelhouse,
        installer=opts.installer,
        fetch=FetchExtras(replace=artifact_names("--replace", replace or [], list(stage_ctx.recipe.artifacts))))
    if dry_run:
        from ..setup_plan import plan_setup

        plan = plan_setup(stage_ctx, setup_options)
        render.setup_plan(opts.ui, plan)
        if plan.stop is not None:  # exits as the real run would (documented): CI can gate on a dry run
            from ..errors import WouldStop

            raise Verdict(WouldStop(f"setup would stop at {plan.stop.stage}: {plan.stop.reason}; nothing was changed "
                                    "(--dry-run)", error=plan.stop.error, fix="fix what the plan names, or see "
                                    "`flagtree-cpu setup --dry-run` for each item and why"))
        return
    from ..pipeline import run_setup

    with exclusive(opts, stage_ctx, "setup"):
        imported = None
        if bundle is not None and trust is not None:  # for a machine without network: all after it is --offline
            with undone_on_failure():
                imported = import_for_setup(opts.ui, stage_ctx, absolute(bundle) or bundle, setup_options, trust,
                                            carried.checked if carried is not None else None)
        report = run_setup(stage_ctx, setup_options, bundle=imported)
    render.setup(opts.ui, report)
    if report.error is not None:
        raise report.error


@app.command(cls=FlagtreeCommand, epilog=examples(
    "flagtree-cpu sync",
    "flagtree-cpu sync --git-cache ~/.cache/flagtree-cpu/git",
    "flagtree-cpu sync --source-path flagtree-cpu=~/src/flagtree-cpu",
    "flagtree-cpu sync --update           # move unpinned sources to their branch tips",
    "flagtree-cpu sync --frozen --offline # CI: exactly the lock, no network",
    "flagtree-cpu sync --dry-run          # what would be cloned or moved, and why",
))
def sync(
    ctx: typer.Context,
    dry_run: DryRunOption = False,
    update: Annotated[bool, typer.Option("--update", help="Re-resolve unpinned refs (e.g. flagtree-cpu main) "
                                         "instead of using the lock file.")] = False,
    frozen: Annotated[bool, typer.Option("--frozen", help="Fail instead of resolving, or when the lock disagrees "
                                         "with the recipe; never write the lock.")] = False,
    offline: Annotated[bool, typer.Option("--offline", help="No network: fail if a commit is not already "
                                          "here (or in the git cache).")] = False,
    allow_dirty: Annotated[bool, typer.Option("--allow-dirty", help="Move checkouts that have changes to "
                                              "tracked files (git still refuses if they conflict).")] = False,
    force: Annotated[bool, typer.Option("--force", help="Move a detached HEAD even if its commits would become "
                                        "unreachable.")] = False,
    git_cache: GitCacheOption = None,
    source_paths: Annotated[Optional[list[str]], typer.Option("--source-path", metavar="NAME=PATH",
                                                              help="Use an existing clone for a source (a "
                                                              "relative symlink is made). Repeatable.")] = None,
) -> None:
    """Clone or move every source to its pinned commit (submodules too), apply patches, run probes.

    Safe for your work: a checkout with changes to tracked files, commits no branch keeps, or another
    origin is never moved or deleted. Unpinned refs are resolved once and recorded in
    .flagtree-cpu/lock.yaml. When everything is at its pin, sync does no network I/O.
    """
    opts, stage_ctx, target = opened(ctx)
    named = named_paths("--source-path", source_paths or [], list(stage_ctx.recipe.sources), "sources")
    from ..stagekit.stage import RunOptions, SyncExtras
    from ..stages.registry import (  # after the options are known to be good: git is slow to import
        run_stage,
        stage_named,
    )

    sync_options = RunOptions(python=target, update=update, frozen=frozen, offline=offline, allow_dirty=allow_dirty,
                              force=force, git_cache=git_cache.expanduser() if git_cache else None,
                              sync=SyncExtras(named))
    if dry_run:
        return dry_run_stage(stage_ctx, "sources", sync_options)
    with exclusive(opts, stage_ctx, "sync"):
        result = run_stage(stage_named("sources"), stage_ctx, sync_options)
    render.stage_result(opts.ui, result, "source")


@app.command(cls=FlagtreeCommand, epilog=examples(
    "flagtree-cpu link",
    "flagtree-cpu link --dry-run",
    "flagtree-cpu link --check            # CI: non-zero unless every link is correct",
))
def link(
    ctx: typer.Context,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; change nothing.")] = False,
    check: Annotated[bool, typer.Option("--check", help="Change nothing; exit 3 unless every link is ok.")] = False,
) -> None:
    """Create or verify the recipe's symlinks (its `links:`, e.g. a backend's folders linked into a source).

    The plan is made first: ok, create, update (a wrong symlink), conflict (a file or folder in the way),
    dangling (target missing). With any conflict or dangling link nothing is changed and all are listed.
    """
    from ..errors import SourceError
    from ..stages.links.link import run_link

    opts, stage_ctx, _ = opened(ctx)
    if dry_run or check:
        plan, result = run_link(stage_ctx, dry_run=True)
    else:
        with exclusive(opts, stage_ctx, "link"):
            plan, result = run_link(stage_ctx)
    render.links(opts.ui, plan, result, planning=dry_run or check)
    if check and not plan.all_ok:
        bad = [p for p in plan.links if p.state != "ok"]
        raise SourceError(f"{len(bad)} of {len(plan.links)} links are not as the recipe says",
                          details=tuple(f"{p.state}: {p.path}" for p in bad), fix="run `flagtree-cpu link`")


@app.command(cls=FlagtreeCommand, epilog=examples(
    "flagtree-cpu fetch",
    "flagtree-cpu fetch --mirror https://oaitriton.blob.core.windows.net/=https://mirror.example/triton/",
    "flagtree-cpu fetch --from ~/Downloads/llvm-a66376b0-ubuntu-arm64.tar.gz",
    "flagtree-cpu fetch --offline --cache-dir /media/usb/flagtree-cache",
    "flagtree-cpu fetch --require-hashes  # CI: every download must have a known sha256",
    "flagtree-cpu fetch --dry-run         # what would be downloaded, and why",
))
def fetch(
    ctx: typer.Context,
    dry_run: DryRunOption = False,
    offline: Annotated[bool, typer.Option("--offline", help="Use only the download cache; list what is "
                                          "missing and how to get it.")] = False,
    require_hashes: Annotated[bool, typer.Option("--require-hashes", help="Refuse to trust a download on first "
                                                 "use: the recipe or lock must give its sha256.")] = False,
    frozen: Annotated[bool, typer.Option("--frozen", help="The lock must already record every artifact's sha256; "
                                         "never write the lock.")] = False,
    cache_dir: CacheDirOption = None,
    mirrors: MirrorsOption = None,
    from_files: Annotated[Optional[list[str]], typer.Option("--from", metavar="[NAME=]FILE",
                                                            help="Import a tarball you downloaded yourself "
                                                            "(verified like a download). Repeatable.")] = None,
    replace: ReplaceOption = None,
) -> None:
    """Download, verify and unpack the recipe's artifacts (prebuilt toolchains such as an LLVM tree).

    Downloads resume after a dropped connection or Ctrl-C, are verified by their digests (the sha256 is recorded in
    the lock file on first use when the recipe has none), and are unpacked safely into a temporary folder, then
    published at the artifact's `path` (e.g. where Triton looks: $TRITON_HOME/.triton/llvm/<name>/). When the
    published tree is current, fetch does no network I/O.
    """
    from ..mirrors import parse_mirrors
    from ..stagekit.stage import FetchExtras, RunOptions
    from ..stages.registry import run_stage, stage_named

    opts, stage_ctx, target = opened(ctx)
    fetch_options = RunOptions(python=target, offline=offline, require_hashes=require_hashes, frozen=frozen,
                               cache_dir=cache_dir.expanduser() if cache_dir else None,
                               mirrors=tuple(parse_mirrors(mirrors or [])),
                               fetch=FetchExtras(named_paths("--from", from_files or [],
                                                             list(stage_ctx.recipe.artifacts), "artifacts"),
                                                 artifact_names("--replace", replace or [],
                                                                list(stage_ctx.recipe.artifacts))))
    if dry_run:
        return dry_run_stage(stage_ctx, "artifacts", fetch_options)
    with exclusive(opts, stage_ctx, "fetch"):
        result = run_stage(stage_named("artifacts"), stage_ctx, fetch_options)
    render.stage_result(opts.ui, result, "artifact")


@app.command("python", cls=FlagtreeCommand, epilog=examples(
    "flagtree-cpu python                         # <workdir>/.venv with the build and run-time prerequisites",
    "flagtree-cpu python --skip-runtime          # the build prerequisites only (no torch)",
    "flagtree-cpu python --python ~/venvs/ft/bin/python",
    "PIP_FIND_LINKS=/media/usb/wheels flagtree-cpu python --offline",
))
def python_env(
    ctx: typer.Context,
    python: PythonOption = None,
    offline: Annotated[bool, typer.Option("--offline", help="No pip downloads: list every missing prerequisite "
                                          "and how to install it from local wheels.")] = False,
    skip_runtime: Annotated[bool, typer.Option("--skip-runtime", help="Only the build prerequisites (python.build), "
                                               "not the run-time ones the checks need (python.runtime).")] = False,
) -> None:
    """Create the workspace venv when needed and install the recipe's Python prerequisites into the interpreter.

    Setup's python stage: the build prerequisites (python.build), and the run-time ones (python.runtime, each from
    its index_url when it names one) unless --skip-runtime; then the distributions python.uninstall names are
    removed. What is already installed at a fitting version is left alone.
    """
    from ..stagekit.stage import RunOptions
    from ..stages.registry import run_stage, stage_named

    opts, stage_ctx, target = opened(ctx, python=python)
    python_options = RunOptions(python=target, offline=offline, skip_validate=skip_runtime,
                                runtime_flag="--skip-runtime", installer=opts.installer)
    with exclusive(opts, stage_ctx, "python"):
        result = run_stage(stage_named("python"), stage_ctx, python_options)
    render.stage_result(opts.ui, result, "step")


@app.command(cls=FlagtreeCommand, epilog=examples(
    "flagtree-cpu lock",
    "flagtree-cpu lock --update           # follow the branches again",
))
def lock(
    ctx: typer.Context,
    update: Annotated[bool, typer.Option("--update", help="Re-resolve every unpinned ref.")] = False,
) -> None:
    """Resolve unpinned refs to commits and write .flagtree-cpu/lock.yaml, without checking anything out."""
    from ..stagekit.stage import RunOptions
    from ..stages.sources.sync import run_lock

    opts, stage_ctx, target = opened(ctx)
    with exclusive(opts, stage_ctx, "lock"):
        result = run_lock(stage_ctx, RunOptions(python=target, update=update))
    render.stage_result(opts.ui, result, "source", listing=True)
    if not opts.ui.json_mode:
        opts.ui.info(f"lock file: {stage_ctx.workspace.lock_file}")
