"""The command line: parse options, call the core, render. Nothing else.

This is the only module that imports typer or decides exit codes. Every failure the
core raises is a ``FlagtreeCpuError``; ``FlagtreeGroup.invoke`` is the one place that
turns it into a message and an exit code, so no command has its own try/except.
Heavy modules (git, requests) are imported inside the commands that use them, to keep
``--help`` and ``--version`` fast.
"""

from __future__ import annotations

import copy as _copy
import os
import shlex
import signal
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperCommand, TyperGroup

from . import __version__
from .errors import ExitCode, FlagtreeCpuError, Interrupted, RecipeError
from .ui import UI, plain_width, survive_closed_pipes

# Global options may be written before or after the command (`flagtree-cpu --json
# recipe list` and `flagtree-cpu recipe list --json`); they are moved to the front
# before parsing, so they are still parsed once, by the top-level callback.
_GLOBAL_VALUE_OPTIONS = {"--recipe", "-r", "--workdir", "-w", "--set", "--recipes-dir", "--lock-file"}
_GLOBAL_FLAGS = {"--json", "--verbose", "-v", "--quiet", "-q", "--wait"}


def hoist_global_options(args: Sequence[str]) -> list[str]:
    """Move global options that follow the command name in front of it."""
    args = list(args)
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "--":  # leading globals
        name = args[i].split("=", 1)[0]
        i += 2 if name in _GLOBAL_VALUE_OPTIONS and "=" not in args[i] else 1
    head, rest = args[:i], args[i:]
    hoisted: list[str] = []
    kept: list[str] = []
    j = 0
    while j < len(rest):
        token = rest[j]
        if token == "--":
            kept += rest[j:]
            break
        name = token.split("=", 1)[0]
        if name in _GLOBAL_FLAGS:
            hoisted.append(token)
        elif name in _GLOBAL_VALUE_OPTIONS:
            if "=" in token:
                hoisted.append(token)
            elif j + 1 < len(rest):
                hoisted += [token, rest[j + 1]]
                j += 1
            else:
                kept.append(token)  # let the parser report the missing value
        else:
            kept.append(token)
        j += 1
    return head + hoisted + kept


def reflow(text: str | None) -> str | None:
    """Docstrings are wrapped for the source; help text is wrapped by the terminal. Join each
    paragraph's lines so a narrow or wide terminal does not break sentences in odd places."""
    if not text:
        return text
    paragraphs = [" ".join(line.strip() for line in block.splitlines()) for block in text.strip().split("\n\n")]
    return "\n\n".join(paragraphs)


class FlagtreeCommand(TyperCommand):
    """Every subcommand: its help also lists the global options, which work after the command too."""

    _GLOBAL_PANEL = "Global options (before or after the command)"

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.help = reflow(self.help)
        self._showing_help = False

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._showing_help = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._showing_help = False

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        if not self._showing_help:
            return params
        shown = []
        for param in ctx.find_root().command.params:
            if param.name in ("version", "install_completion", "show_completion") or param in params:
                continue
            copy = _copy.copy(param)
            copy.rich_help_panel = self._GLOBAL_PANEL  # type: ignore[attr-defined]
            shown.append(copy)
        return params + shown


def json_requested(args: Sequence[str]) -> bool:
    """Whether --json was given (before a `--`), for errors raised before the options are parsed."""
    args = list(args)
    return "--json" in (args[:args.index("--")] if "--" in args else args)


class FlagtreeGroup(TyperGroup):
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_global_options(args))

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True, **extra: Any) -> Any:
        """Click's main, except that a usage error (unknown command or option, a bad value) is also a
        JSON document on stdout under --json, as every other error is."""
        from typer._click.exceptions import ClickException

        argv = list(sys.argv[1:] if args is None else args)
        try:
            code = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except ClickException as exc:
            _report_usage_error(exc, json_requested(argv))
            code = exc.exit_code
        except typer.Abort:  # end of input where click asked for it; the tool itself never prompts
            UI().error(Interrupted("reading input"))
            code = int(ExitCode.INTERRUPTED)
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except FlagtreeCpuError as exc:
            _ui_of(ctx).error(exc)
            raise typer.Exit(int(exc.exit_code)) from None
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (errors.Terminated)
            error = Interrupted(cause=exc)
            _ui_of(ctx).error(error)
            raise typer.Exit(int(error.exit_code)) from None
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise
        except Exception as exc:  # noqa: BLE001 - the one place unexpected errors are reported
            _ui_of(ctx).unexpected(exc)
            raise typer.Exit(int(ExitCode.UNEXPECTED)) from None


def _report_usage_error(exc: Any, as_json: bool) -> None:
    from typer import rich_utils

    rich_utils.rich_format_error(exc)
    if as_json and exc.__class__.__name__ != "NoArgsIsHelpError":
        ctx = getattr(exc, "ctx", None)
        command = ctx.command_path if ctx is not None else "flagtree-cpu"
        UI(json_mode=True).emit_json({"ok": False, "error": {
            "kind": "usage", "exit_code": exc.exit_code, "message": exc.format_message(),
            "fix": f"`{command} --help` lists the commands and options", "details": []}})


@dataclass
class Options:
    """The global options, parsed once by the top-level callback."""

    recipe: str
    workdir: Optional[str]
    overrides: list[str] = field(default_factory=list)
    recipes_dirs: list[str] = field(default_factory=list)
    ui: UI = field(default_factory=UI)
    wait: bool = False  # queue behind another run that holds the workspace, instead of exiting 8
    lock_file: Optional[str] = None  # --lock-file: the lock kept outside the workspace


def _workspace(opts: Options) -> Any:
    from .workspace import workspace_at

    return workspace_at(opts.workdir, opts.lock_file)


def _ui_of(ctx: Any) -> UI:
    root = ctx.find_root()
    return root.obj.ui if isinstance(getattr(root, "obj", None), Options) else UI()


def _options(ctx: typer.Context) -> Options:
    return ctx.find_root().obj


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"flagtree-cpu {__version__}")
        raise typer.Exit()


def _count(n: int, noun: str) -> str:
    """``1 artifact``, ``2 artifacts``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _examples(*lines: str) -> str:
    """An epilog listing example invocations, one per line."""
    return "[b]Examples[/b]\n\n" + "\n\n".join(f"  [cyan]{line}[/cyan]" for line in lines)


def _complete_recipes(incomplete: str) -> list[str]:
    """Shell completion of --recipe: the names `recipe list` shows."""
    from .recipe_files import list_recipes, user_recipe_dirs

    return [r.name for r in list_recipes(user_recipe_dirs()) if r.name.startswith(incomplete)]


def _complete_kernels(incomplete: str) -> list[str]:
    from .validate import CATALOG

    return [k.name for k in CATALOG if k.name.startswith(incomplete)]


app = typer.Typer(
    name="flagtree-cpu",
    cls=FlagtreeGroup,
    help="Build FlagTree (Triton 3.3) with its Arm64 CPU backend from a pinned YAML recipe.",
    epilog=_examples(
        "flagtree-cpu recipe list",
        "flagtree-cpu recipe show flagtree-cpu-arm64",
        "flagtree-cpu --set sources.flagtree-cpu.commit=<sha> recipe validate",
    ),
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)


@app.callback()
def main_options(
    ctx: typer.Context,
    recipe: Annotated[str, typer.Option(
        "--recipe", "-r", envvar="FLAGTREE_CPU_RECIPE", metavar="NAME|PATH", autocompletion=_complete_recipes,
        help="Recipe to use: a name from `recipe list` or a YAML file.")] = "flagtree-cpu-arm64",
    workdir: Annotated[Optional[str], typer.Option(
        "--workdir", "-w", envvar="FLAGTREE_CPU_WORKDIR", metavar="DIR",
        help="Workspace folder.  \\[default: ./flagtree-workspace]")] = None,
    overrides: Annotated[Optional[list[str]], typer.Option(
        "--set", metavar="KEY=VALUE",
        help="Override a recipe value, e.g. --set sources.flagtree-cpu.commit=<sha>. Repeatable.")] = None,
    recipes_dirs: Annotated[Optional[list[str]], typer.Option(
        "--recipes-dir", metavar="DIR",
        help="Extra folder of user recipes (also FLAGTREE_CPU_RECIPES). Repeatable.")] = None,
    json_mode: Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="More detail; tracebacks on errors.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only warnings and errors.")] = False,
    wait: Annotated[bool, typer.Option("--wait", help="When another flagtree-cpu run is using the workspace, "
                                       "wait for it instead of exiting with code 8.")] = False,
    lock_file: Annotated[Optional[str], typer.Option(
        "--lock-file", envvar="FLAGTREE_CPU_LOCK_FILE", metavar="FILE",
        help="Keep the lock file here (e.g. ci/flagtree-cpu.lock.yaml, committed with your CI) instead of "
        "<workdir>/.flagtree-cpu/lock.yaml.")] = None,
    version: Annotated[bool, typer.Option(
        "--version", callback=_version_callback, is_eager=True, help="Print the version and exit.")] = False,
) -> None:
    """Build FlagTree (Triton 3.3) with its Arm64 CPU backend from a pinned YAML recipe.

    Global options may also be written after the command.
    """
    ctx.obj = Options(
        recipe=recipe,
        workdir=workdir,
        overrides=list(overrides or []),
        recipes_dirs=list(recipes_dirs or []),
        ui=UI(json_mode=json_mode, verbose=verbose, quiet=quiet and not verbose),
        wait=wait,
        lock_file=lock_file,
    )


recipe_app = typer.Typer(
    help="List, show, validate recipes; print the recipe JSON Schema.",
    no_args_is_help=True,
    rich_markup_mode="rich",
)
app.add_typer(recipe_app, name="recipe")


@recipe_app.command("list", cls=FlagtreeCommand, epilog=_examples(
    "flagtree-cpu recipe list",
    "flagtree-cpu recipe list --recipes-dir ~/my-recipes --json",
))
def recipe_list(ctx: typer.Context) -> None:
    """List bundled recipes and user recipes (--recipes-dir, FLAGTREE_CPU_RECIPES)."""
    from . import recipe_files as recipes

    opts = _options(ctx)
    entries = []
    user_dirs = recipes.user_recipe_dirs(opts.recipes_dirs)
    for folder in user_dirs:  # a typo in a folder name would otherwise just show fewer recipes
        if not folder.is_dir():
            opts.ui.warn(f"recipes folder {folder} ({'is not a folder' if folder.exists() else 'does not exist'}) "
                         "is skipped; check --recipes-dir and FLAGTREE_CPU_RECIPES")
    for ref in recipes.list_recipes(user_dirs):
        try:
            loaded = recipes.load_recipe_file(ref.path)
            status, description, problems = "valid", loaded.description, []
        except RecipeError as exc:
            status, description = f"invalid ({len(exc.problems)} problems)", ""
            problems = [p.to_json() for p in exc.problems]
        except FlagtreeCpuError as exc:
            status, description, problems = "unreadable", "", [{"message": exc.message}]
        entries.append({
            "name": ref.name, "origin": ref.origin, "file": str(ref.path), "status": status,
            "description": description, "shadows": str(ref.shadows) if ref.shadows else None,
            "problems": problems,
        })
    if opts.ui.json_mode:
        opts.ui.emit_json({"recipes": entries})
        return
    rows = []
    for e in entries:
        origin = e["origin"] + (" (hides bundled)" if e["shadows"] else "")
        rows.append([e["name"], origin, e["status"], e["description"] or e["file"]])
    opts.ui.table(["name", "origin", "status", "description"], rows)


@recipe_app.command("show", cls=FlagtreeCommand, epilog=_examples(
    "flagtree-cpu recipe show",
    "flagtree-cpu recipe show flagtree-cpu-arm64 --workdir /data/ft",
    "flagtree-cpu recipe show ./my-recipe.yaml --raw",
    "flagtree-cpu recipe show --set artifacts.llvm.url=https://mirror.example/llvm.tar.gz --json",
))
def recipe_show(
    ctx: typer.Context,
    name: Annotated[Optional[str], typer.Argument(
        metavar="[NAME|PATH]", help="Recipe to show.  \\[default: the --recipe option]")] = None,
    raw: Annotated[bool, typer.Option(
        "--raw", help="Show the recipe as written (placeholders and variants unresolved).")] = False,
) -> None:
    """Print a recipe as YAML, resolved for this workspace and host.

    Placeholders such as {workdir} and {artifacts.llvm.path} are filled in, and the
    artifact variant for this host is applied. Overrides given with --set are included.
    """
    from . import recipe_files as recipes
    from .recipe_schema import to_data

    opts = _options(ctx)
    loaded = recipes.load_recipe(name or opts.recipe, opts.overrides,
                                 recipes.user_recipe_dirs(opts.recipes_dirs))
    shown, context = loaded, "as written"
    if not raw:
        shown, context = _resolve_for_host(loaded, opts)
    for warning in recipes.recipe_warnings(loaded):
        opts.ui.warn(f"{warning.key}: {warning.message}")
    data = to_data(shown)
    if opts.ui.json_mode:
        opts.ui.emit_json({"file": loaded.file, "digest": loaded.digest, "resolved": not raw,
                           "context": context, "recipe": data})
        return
    import yaml

    header = (f"# {loaded.name} from {loaded.file}\n# digest: sha256:{loaded.digest}\n"
              f"# {context}\n")
    opts.ui.emit_text(header + yaml.safe_dump(data, sort_keys=False, width=100, allow_unicode=True))


def _resolve_for_host(loaded: Any, opts: Options) -> tuple[Any, str]:
    from .host import read_host
    from .recipe import resolve, select_variants
    from .workspace import placeholder_values

    host = read_host()
    ws = _workspace(opts)
    selected = select_variants(loaded, host.os_id, host.arch)
    values = placeholder_values(selected, ws, host, os.environ)
    context = (f"resolved for workdir {ws.root} on {host.arch} {host.os_id or 'unknown-os'} "
               f"({values['jobs']} jobs)")
    return resolve(selected, ws.root, values), context


@recipe_app.command("validate", cls=FlagtreeCommand, epilog=_examples(
    "flagtree-cpu recipe validate my-recipe.yaml other.yaml",
    "flagtree-cpu recipe validate --all",
    "flagtree-cpu --set sources.flagtree.commit=<sha> recipe validate",
))
def recipe_validate(
    ctx: typer.Context,
    targets: Annotated[Optional[list[str]], typer.Argument(
        metavar="[PATH|NAME]...", help="Recipes to check.  \\[default: the --recipe option]")] = None,
    all_recipes: Annotated[bool, typer.Option("--all", help="Check every recipe `recipe list` shows.")] = False,
) -> None:
    """Check recipes strictly and report every problem with file:line and a fix.

    Exit code 2 when any recipe is invalid. Overrides given with --set are applied to
    each recipe and checked like the file itself.
    """
    from . import recipe_files as recipes

    opts = _options(ctx)
    user_dirs = recipes.user_recipe_dirs(opts.recipes_dirs)
    if all_recipes:
        paths = [ref.path for ref in recipes.list_recipes(user_dirs)]
    else:
        paths = [recipes.find_recipe(t, user_dirs).path for t in (targets or [opts.recipe])]
    results, failures = [], []
    for path in paths:
        try:
            loaded = recipes.load_recipe_file(path, opts.overrides)
        except FlagtreeCpuError as exc:
            failures.append(exc)
            results.append({"file": str(path), "ok": False, "error": exc.to_json()})
            if not opts.ui.json_mode:
                opts.ui.error(exc)
            continue
        warnings = recipes.recipe_warnings(loaded)
        results.append({"file": str(path), "ok": True, "name": loaded.name, "digest": loaded.digest,
                        "warnings": [{"key": w.key, "message": w.message} for w in warnings]})
        if not opts.ui.json_mode:
            links = len(loaded.links.entries) if loaded.links else 0
            opts.ui.success(f"{path}: recipe {loaded.name} is valid ({_count(len(loaded.sources), 'source')}, "
                            f"{_count(len(loaded.artifacts), 'artifact')}, {_count(links, 'link')})")
            for warning in warnings:
                opts.ui.warn(f"{warning.key}: {warning.message}")
    if opts.ui.json_mode:
        opts.ui.emit_json({"ok": not failures, "results": results})
    if failures:
        raise typer.Exit(int(ExitCode.USAGE))


@recipe_app.command("schema", cls=FlagtreeCommand, epilog=_examples(
    "flagtree-cpu recipe schema > recipe.schema.json",
    "# VS Code / yaml-language-server: first line of a recipe",
    "# yaml-language-server: $schema=./recipe.schema.json",
))
def recipe_schema_cmd(ctx: typer.Context) -> None:
    """Print the recipe format as JSON Schema (draft 2020-12) on stdout, for editors and CI."""
    from .recipe_files import recipe_json_schema

    _options(ctx).ui.emit_json(recipe_json_schema())


# --- workspace stages --------------------------------------------------------------------


# Options several commands share (setup passes them to its stages).
_JobsOption = Annotated[Optional[int], typer.Option(
    "--jobs", "-j", metavar="N", min=1, help="Parallel compile jobs. \\[default: from CPU cores and available memory]")]
_GitCacheOption = Annotated[Optional[Path], typer.Option(
    "--git-cache", envvar="FLAGTREE_CPU_GIT_CACHE", metavar="DIR",
    help="Keep bare mirrors here; later workspaces clone from them without downloading.")]
_CacheDirOption = Annotated[Optional[Path], typer.Option(
    "--cache-dir", envvar="FLAGTREE_CPU_CACHE_DIR", metavar="DIR",
    help="Per-user cache folder (downloads in DIR/downloads). "
    "\\[default: ~/.cache/flagtree-cpu, or under $XDG_CACHE_HOME]")]
_MirrorsOption = Annotated[Optional[list[str]], typer.Option(
    "--mirror", metavar="PREFIX=URL", help="Try URL (an https:// or file:// URL, or a folder) in place of "
    "PREFIX first. Repeatable; also FLAGTREE_CPU_MIRRORS.")]
_ModelOption = Annotated[Optional[Path], typer.Option(
    "--model", metavar="DIR", exists=True, file_okay=False,
    help="Model folder for the decode-e2e kernel (skipped without one).")]
_TimeoutOption = Annotated[Optional[float], typer.Option(
    "--timeout", metavar="SECONDS", min=1, help="Stop each kernel after this long. \\[default: the recipe's]")]
_PythonOption = Annotated[Optional[Path], typer.Option(
    "--python", metavar="PATH", help="Target interpreter. \\[default: the active venv, else <workdir>/.venv, "
    "created when missing]")]


def _stage_context(opts: Options, *, python: Path | None = None, jobs: int | None = None,
                   wheel_dir: Path | None = None) -> Any:
    """Load the recipe (with overrides), select this host's variants, fill in placeholders."""
    from . import recipe_files
    from .host import read_host
    from .recipe import resolve, select_variants
    from .stages import StageContext
    from .workspace import placeholder_values

    loaded = recipe_files.load_recipe(opts.recipe, opts.overrides, recipe_files.user_recipe_dirs(opts.recipes_dirs))
    host = read_host()
    ws = _workspace(opts)
    selected = select_variants(loaded, host.os_id, host.arch)
    values = placeholder_values(selected, ws, host, os.environ, jobs=jobs, python=python, wheel_dir=wheel_dir)
    return StageContext(resolve(selected, ws.root, values), ws, host, opts.ui)


@contextmanager
def _exclusive(opts: Options, stage_ctx: Any, command: str) -> Iterator[None]:
    """Hold the workspace for a command that changes it (exit 8 if another run has it, unless --wait).
    A command that created the workspace and then failed before making anything leaves no trace."""
    from .workspace import exclusive_use

    with exclusive_use(stage_ctx.workspace, command, wait=opts.wait, on_wait=opts.ui.info):
        yield


def _build_jobs(stage_ctx: Any) -> int:
    """MAX_JOBS as the build's environment gets it (for the out-of-memory advice)."""
    return int(stage_ctx.recipe.build.env.get("MAX_JOBS", "1")) if stage_ctx.recipe.build else 1


def _target_python(opts: Options, python: Path | None) -> Path:
    from .workspace import target_python

    if python is not None:
        return Path(os.path.abspath(python.expanduser()))
    return target_python(_workspace(opts), os.environ)


def _named_paths(option: str, values: list[str], names: list[str], kind: str) -> dict[str, Path]:
    """Parse repeated ``NAME=PATH`` values of ``option``; a bare PATH is fine when only one name exists."""
    from .errors import UsageError

    parsed = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep:
            if len(names) != 1:
                raise UsageError(f"{option} {value!r} must look like NAME=PATH",
                                 fix=f"the recipe's {kind} are: {', '.join(names) or 'none'}")
            name, path = names[0], value
        if name not in names or not path:
            raise UsageError(f"{option} {value!r}: the recipe has no {kind[:-1]} named {name!r}",
                             fix=f"the recipe's {kind} are: {', '.join(names) or 'none'}")
        parsed[name] = Path(path).expanduser()
    return parsed


@app.command(cls=FlagtreeCommand, epilog=_examples(
    "flagtree-cpu setup",
    "flagtree-cpu setup --dry-run                  # the plan with reasons and the download size",
    "flagtree-cpu setup --install-system-packages  # a bare Ubuntu/Debian machine (apt-get, with sudo)",
    "flagtree-cpu setup --offline --cache-dir /media/usb/flagtree-cache",
    "flagtree-cpu setup --frozen --require-hashes --junit reports/validate.xml   # CI",
    "flagtree-cpu setup --skip-build --ignore-host # sources, LLVM and links on any machine",
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
    skip_build: Annotated[bool, typer.Option("--skip-build", help="Stop after sources, LLVM and links (no venv, "
                                             "build or validation).")] = False,
    skip_validate: Annotated[bool, typer.Option("--skip-validate", help="Do not run the validation "
                                                "kernels.")] = False,
    ignore_host: Annotated[bool, typer.Option("--ignore-host", help="Go on when preflight finds this machine "
                                              "unsuitable (testing).")] = False,
    install_system_packages: Annotated[bool, typer.Option("--install-system-packages", help="Run `apt-get "
                                                          "install -y` (with sudo unless root) for the recipe's "
                                                          "missing system packages.")] = False,
    jobs: _JobsOption = None,
    python: _PythonOption = None,
    git_cache: _GitCacheOption = None,
    cache_dir: _CacheDirOption = None,
    mirrors: _MirrorsOption = None,
    model: _ModelOption = None,
    junit: Annotated[Optional[Path], typer.Option("--junit", metavar="FILE", help="Write the validation as JUnit "
                                                  "XML (the kernels always run then).")] = None,
    timeout: _TimeoutOption = None,
) -> None:
    """Do everything: preflight, sources and LLVM (concurrently), links, venv and prerequisites, build, validate.

    Each stage is the same code as its own command and does only what is missing, so setup resumes after Ctrl-C or a
    failure, and a re-run when everything is current takes a second with no network, pip or build. Another run on the
    same workspace makes this one exit with code 8 (or wait, with --wait). The exit code is the failing stage's.
    """
    from .mirrors import parse_mirrors
    from .pipeline import SetupOptions

    opts = _options(ctx)
    target = _target_python(opts, python)
    stage_ctx = _stage_context(opts, python=target, jobs=jobs)
    options = SetupOptions(
        python=target, offline=offline, frozen=frozen, require_hashes=require_hashes, update=update,
        allow_dirty=allow_dirty, skip_build=skip_build, skip_validate=skip_validate, ignore_host=ignore_host,
        install_system_packages=install_system_packages, git_cache=git_cache.expanduser() if git_cache else None,
        cache_dir=cache_dir.expanduser() if cache_dir else None, mirrors=tuple(parse_mirrors(mirrors or [])),
        jobs=_build_jobs(stage_ctx), model=Path(os.path.abspath(model.expanduser())) if model else None,
        junit=Path(os.path.abspath(junit.expanduser())) if junit else None, timeout=timeout, verbose=opts.ui.verbose)
    if dry_run:
        stop = _render_plan(opts, stage_ctx, options)
        if stop is not None:  # exits as the real run would (documented): CI can gate on a dry run
            raise typer.Exit(stop)
        return
    from .pipeline import run_setup

    with _exclusive(opts, stage_ctx, "setup"):
        report = run_setup(stage_ctx, options)
    if opts.ui.json_mode:
        opts.ui.emit_json(report.to_json())
    _render_setup(opts, report)
    if report.error is not None:
        opts.ui.error(report.error, as_json=False)
        raise typer.Exit(int(report.error.exit_code))


def _render_setup(opts: Options, report: Any) -> None:
    ui = opts.ui
    rows = [[r.stage, ui.styled(r.status), r.detail, f"{r.seconds:.1f}s" if r.seconds else ""] for r in report.records]
    ui.table(["stage", "status", "detail", "time"], rows, title=f"setup of {report.recipe} in {report.workspace}")
    ui.info(f"logs: {report.workspace / 'logs'} (this run's report: .flagtree-cpu/last-setup.json)")
    if report.error is None:
        ui.success(f"setup finished in {report.seconds:.1f}s")
        workdir = f" -w {shlex.quote(str(report.workspace))}" if opts.workdir else ""  # works from any folder
        ui.info("next:")
        if report.record("build").status not in ("skipped", "not run"):
            ui.info(f"  source {shlex.quote(str(report.python.parent / 'activate'))}")
        ui.info(f'  eval "$(flagtree-cpu{workdir} env)"   # FLAGTREE_BACKEND=cpu and the run-time variables')
        ui.info(f"  flagtree-cpu{workdir} status")


def _render_plan(opts: Options, stage_ctx: Any, options: Any) -> int | None:
    """The plan of `setup --dry-run`; returns the exit code the real run would stop with, if it would."""
    from rich.text import Text

    from .pipeline import PLAN_SCHEMA
    from .preflight import blocking, run_preflight_checks, would_stop
    from .progress import human_bytes
    from .status import Scope, inspect_workspace

    preflight = run_preflight_checks(stage_ctx, options)
    stops = blocking(preflight.findings, options)
    status = inspect_workspace(stage_ctx, Scope(python=options.python, cache_dir=options.cache_dir,
                                                skip_build=options.skip_build,
                                                skip_validate=not options.validating, model=options.model,
                                                ask_sizes=not options.offline, mirrors=options.mirrors))
    stop = would_stop(stops, status.items)
    ui = opts.ui
    if ui.json_mode:
        ui.emit_json({**status.to_json(), "schema": PLAN_SCHEMA, "changes_nothing": True,
                      "preflight": {"ok": not stops, "checks": [f.to_json() for f in preflight.findings]},
                      "would_stop": stop})
        return stop["exit_code"] if stop else None
    failing = [f for f in preflight.findings if f.status == "fail"]
    rows = [["preflight", f"stop: {f.id}", f.detail] for f in stops] or \
           [["preflight", "", f"{preflight.summary()['ok']} of {len(preflight.findings)} checks ok"
             + (f", {len(failing)} failed (ignored: --ignore-host)" if failing else "")]]
    for item in status.items:
        doing = item.action or Text.assemble(f"{item.subject}: ", ui.styled(item.state))
        rows.append([item.area, doing, f"{item.reason}: {item.detail}" if item.reason else item.detail])
    ui.table(["stage", "would do", "why"], rows, title=f"setup plan for {status.recipe} in {status.workspace}")
    size = status.download_bytes
    downloads = [i for i in status.items if i.action.startswith(("download", "resume"))]
    if downloads:
        ui.info(f"download: {human_bytes(size) if size is not None else 'size unknown'}")
    if stop:
        ui.warn(f"setup would stop at {stop['stage']} (exit code {stop['exit_code']}): {stop['reason']}")
    ui.info("nothing to do: everything is current" if status.current and not stops
            else "nothing was changed (--dry-run)")
    return stop["exit_code"] if stop else None


@app.command(cls=FlagtreeCommand, epilog=_examples(
    "flagtree-cpu status",
    "flagtree-cpu status --json | jq .items",
))
def status(
    ctx: typer.Context,
    python: _PythonOption = None,
    check: Annotated[bool, typer.Option("--check", help="Exit with code 9 unless everything is current (for CI "
                                        "gates); prints the same report.")] = False,
) -> None:
    """What the workspace holds compared with the recipe: commits, links, LLVM, build stamp, last validation.

    Read-only and offline. `setup --dry-run` shows the same with what setup would do about each item.
    """
    from .status import Scope, inspect_workspace

    opts = _options(ctx)
    target = _target_python(opts, python)
    stage_ctx = _stage_context(opts, python=target)
    found = inspect_workspace(stage_ctx, Scope(python=target))
    ui = opts.ui
    behind = [i for i in found.items if not i.current]
    if ui.json_mode:
        ui.emit_json(found.to_json())
    else:
        ui.table(["area", "item", "state", "detail"],
                 [[i.area, i.subject, ui.styled(i.state), i.detail] for i in found.items],
                 title=f"{found.recipe} in {found.workspace}")
        if not behind:
            ui.success("everything is current")
        else:
            ui.info(f"{len(behind)} of {len(found.items)} items are not current: `flagtree-cpu setup` brings them "
                    "up to date (`setup --dry-run` shows how)")
    if check and behind:
        if not ui.json_mode:
            ui.warn("not current: " + ", ".join(f"{i.area} {i.subject} ({i.state})" for i in behind))
        raise typer.Exit(int(ExitCode.NOT_CURRENT))


@app.command(cls=FlagtreeCommand, epilog=_examples(
    "flagtree-cpu sync",
    "flagtree-cpu sync --git-cache ~/.cache/flagtree-cpu/git",
    "flagtree-cpu sync --source-path flagtree-cpu=~/src/flagtree-cpu",
    "flagtree-cpu sync --update           # move unpinned sources to their branch tips",
    "flagtree-cpu sync --frozen --offline # CI: exactly the lock, no network",
))
def sync(
    ctx: typer.Context,
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
    git_cache: _GitCacheOption = None,
    source_paths: Annotated[Optional[list[str]], typer.Option("--source-path", metavar="NAME=PATH",
                                                              help="Use an existing clone for a source (a "
                                                              "relative symlink is made). Repeatable.")] = None,
) -> None:
    """Clone or move every source to its pinned commit (submodules too), apply patches, run probes.

    Safe for your work: a checkout with changes to tracked files, commits no branch keeps, or another
    origin is never moved or deleted. Unpinned refs are resolved once and recorded in
    .flagtree-cpu/lock.yaml. When everything is at its pin, sync does no network I/O.
    """
    opts = _options(ctx)
    stage_ctx = _stage_context(opts)
    named = _named_paths("--source-path", source_paths or [], list(stage_ctx.recipe.sources), "sources")
    from .sources import SyncOptions, run_sync  # after the options are known to be good: git is slow to import

    options = SyncOptions(update=update, frozen=frozen, offline=offline, allow_dirty=allow_dirty, force=force,
                          git_cache=git_cache.expanduser() if git_cache else None, source_paths=named)
    with _exclusive(opts, stage_ctx, "sync"):
        result = run_sync(stage_ctx, options)
    opts.ui.stage_result(result, "source")


@app.command(cls=FlagtreeCommand, epilog=_examples(
    "flagtree-cpu link",
    "flagtree-cpu link --dry-run",
    "flagtree-cpu link --check            # CI: non-zero unless every link is correct",
))
def link(
    ctx: typer.Context,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; change nothing.")] = False,
    check: Annotated[bool, typer.Option("--check", help="Change nothing; exit 3 unless every link is ok.")] = False,
) -> None:
    """Create or verify the recipe's symlinks (FlagTree's 12 links into flagtree-cpu).

    The plan is made first: ok, create, update (a wrong symlink), conflict (a file or folder in the way),
    dangling (target missing). With any conflict or dangling link nothing is changed and all are listed.
    """
    from .errors import SourceError
    from .links import run_link

    opts = _options(ctx)
    stage_ctx = _stage_context(opts)
    if dry_run or check:
        plan, result = run_link(stage_ctx, dry_run=True)
    else:
        with _exclusive(opts, stage_ctx, "link"):
            plan, result = run_link(stage_ctx)
    planning = dry_run or check
    # after linking, say what was done (created, updated); a plan says what would be (create, update)
    states = [p.state for p in plan.links] if planning else [a.status for a in result.actions]
    if opts.ui.json_mode:
        opts.ui.emit_json({"ok": plan.all_ok or not check, "root": str(plan.root),
                           "links": [{**p.to_json(), **({} if planning else {"done": state})}
                                     for p, state in zip(plan.links, states, strict=True)],
                           "seconds": round(result.seconds, 3)})
    else:
        opts.ui.table(["link", "state", "detail"],
                      [[p.path, opts.ui.styled(state), p.detail or ("" if p.state == "ok" else f"-> {p.target}")]
                       for p, state in zip(plan.links, states, strict=True)])
        counts = {state: states.count(state) for state in dict.fromkeys(states)}
        summary = ", ".join(f"{n} {s}" for s, n in counts.items())
        opts.ui.info(f"{len(plan.links)} links in {plan.root}: {summary}"
                     + (" (nothing was changed)" if planning and not plan.all_ok else ""))
    if check and not plan.all_ok:
        bad = [p for p in plan.links if p.state != "ok"]
        raise SourceError(f"{len(bad)} of {len(plan.links)} links are not as the recipe says",
                          details=tuple(f"{p.state}: {p.path}" for p in bad), fix="run `flagtree-cpu link`")


@app.command(cls=FlagtreeCommand, epilog=_examples(
    "flagtree-cpu fetch",
    "flagtree-cpu fetch --mirror https://oaitriton.blob.core.windows.net/=https://mirror.example/triton/",
    "flagtree-cpu fetch --from ~/Downloads/llvm-a66376b0-ubuntu-arm64.tar.gz",
    "flagtree-cpu fetch --offline --cache-dir /media/usb/flagtree-cache",
    "flagtree-cpu fetch --require-hashes  # CI: every download must have a known sha256",
))
def fetch(
    ctx: typer.Context,
    offline: Annotated[bool, typer.Option("--offline", help="Use only the download cache; list what is "
                                          "missing and how to get it.")] = False,
    require_hashes: Annotated[bool, typer.Option("--require-hashes", help="Refuse to trust a download on first "
                                                 "use: the recipe or lock must give its sha256.")] = False,
    frozen: Annotated[bool, typer.Option("--frozen", help="The lock must already record every artifact's sha256; "
                                         "never write the lock.")] = False,
    cache_dir: _CacheDirOption = None,
    mirrors: _MirrorsOption = None,
    from_files: Annotated[Optional[list[str]], typer.Option("--from", metavar="[NAME=]FILE",
                                                            help="Import a tarball you downloaded yourself "
                                                            "(verified like a download). Repeatable.")] = None,
) -> None:
    """Download, verify and unpack the recipe's toolchain artifacts (the LLVM prebuilt).

    Downloads resume after a dropped connection or Ctrl-C, are verified by sha256 (recorded in the lock file on
    first use when the recipe has none), and are unpacked safely into a temporary folder, then published where
    Triton looks ($TRITON_HOME/.triton/llvm/<name>/) with the version.txt FlagTree's setup.py expects. When the
    published tree is current, fetch does no network I/O.
    """
    from .fetch import FetchOptions, run_fetch
    from .mirrors import parse_mirrors

    opts = _options(ctx)
    stage_ctx = _stage_context(opts)
    options = FetchOptions(offline=offline, require_hashes=require_hashes, frozen=frozen,
                           cache_dir=cache_dir.expanduser() if cache_dir else None,
                           mirrors=parse_mirrors(mirrors or []),
                           from_files=_named_paths("--from", from_files or [], list(stage_ctx.recipe.artifacts),
                                                   "artifacts"))
    with _exclusive(opts, stage_ctx, "fetch"):
        result = run_fetch(stage_ctx, options)
    opts.ui.stage_result(result, "artifact")



@app.command(cls=FlagtreeCommand, epilog=_examples(
    "flagtree-cpu build",
    "flagtree-cpu build --jobs 4          # an 8 GB board",
    "flagtree-cpu build --offline         # check every input first, then build without network",
    "flagtree-cpu build --wheel dist/     # one build, a wheel for many boards",
    "flagtree-cpu build --force --verbose # rebuild and watch every line",
))
def build(
    ctx: typer.Context,
    offline: Annotated[bool, typer.Option("--offline", help="Check that every input is here, then build "
                                          "without network (TRITON_OFFLINE_BUILD=1, PIP_NO_INDEX=1).")] = False,
    force: Annotated[bool, typer.Option("--force", help="Build even when the stamp says up to date.")] = False,
    jobs: _JobsOption = None,
    python: _PythonOption = None,
    wheel: Annotated[Optional[Path], typer.Option("--wheel", metavar="DIR", help="Build a wheel into DIR "
                                                  "instead of the editable install.")] = None,
    ignore_host: Annotated[bool, typer.Option("--ignore-host", help="Build even though this machine is not a "
                                              "target of the recipe (testing).")] = False,
) -> None:
    """Install the build prerequisites and run the recipe's build (pip install -e python/) in the right env.

    Every input is checked first (sources at their pins, links, the LLVM tree, prerequisites) and all missing ones
    are listed at once. Full output goes to <workdir>/logs/build-<time>.log; a failure is diagnosed from it. When
    nothing changed since the last build, build says so in about a second and runs nothing.
    """
    from .build import BuildOptions, run_build

    opts = _options(ctx)
    target = _target_python(opts, python)
    wheel_dir = Path(os.path.abspath(wheel.expanduser())) if wheel else None
    stage_ctx = _stage_context(opts, python=target, jobs=jobs, wheel_dir=wheel_dir)
    options = BuildOptions(python=target, offline=offline, force=force, ignore_host=ignore_host,
                           wheel_dir=wheel_dir, verbose=opts.ui.verbose, jobs=_build_jobs(stage_ctx))
    with _exclusive(opts, stage_ctx, "build"):
        result = run_build(stage_ctx, options)
    opts.ui.stage_result(result, "step")
    wheel_info = result.actions[0].data.get("wheel")
    if wheel_info and not opts.ui.json_mode:  # on their own lines, to copy
        opts.ui.info(f"wheel:  {wheel_info['path']}")
        opts.ui.info(f"sha256: {wheel_info['sha256']}")


@app.command("env", cls=FlagtreeCommand, epilog=_examples(
    'eval "$(flagtree-cpu env)"            # before running Triton kernels',
    "flagtree-cpu env --shell fish | source",
    "flagtree-cpu env --build              # what a build gets (and what it drops)",
    "flagtree-cpu env --json",
))
def env_command(
    ctx: typer.Context,
    build_env: Annotated[bool, typer.Option("--build", help="The build environment instead of the run-time one.")]
    = False,
    offline: Annotated[bool, typer.Option("--offline", help="With --build: the offline build's environment.")]
    = False,
    shell: Annotated[str, typer.Option("--shell", help="bash, zsh or fish.")] = "bash",
    python: _PythonOption = None,
) -> None:
    """Print shell exports of the run-time environment (FLAGTREE_BACKEND=cpu ...), or with --build the build's.

    Kernels JIT-compile when they first run, so the run-time variables matter then too: without FLAGTREE_BACKEND=cpu
    the GNU assembler rejects the generated kernel.s ("junk at end of line").
    """
    from .buildenv import render_exports
    from .errors import UsageError

    if shell not in ("bash", "zsh", "fish"):
        raise UsageError(f"--shell {shell!r} is not supported", fix="use bash, zsh or fish")
    if offline and not build_env:  # an option that would do nothing is a mistake worth naming
        raise UsageError("--offline changes only the build environment, and this prints the run-time one",
                         fix="add --build (flagtree-cpu env --build --offline), or drop --offline")
    opts = _options(ctx)
    target = _target_python(opts, python)
    recipe = _stage_context(opts, python=target).recipe
    if build_env:
        if recipe.build is None:
            raise UsageError(f"recipe {recipe.name} has no build section")
        from .build import build_environment

        computed = build_environment(recipe, target, offline=offline)
        values, unset = computed.settings(), computed.removed()
        for conflict in computed.conflicts:
            opts.ui.warn(f"inherited {conflict.describe()}")
    else:
        values, unset = dict(recipe.runtime.env), []
    if opts.ui.json_mode:
        opts.ui.emit_json({"kind": "build" if build_env else "runtime", "set": values, "unset": unset})
    else:
        opts.ui.emit_text(render_exports(values, unset, shell))  # type: ignore[arg-type]


@app.command(cls=FlagtreeCommand, epilog=_examples(
    "flagtree-cpu validate",
    "flagtree-cpu validate --kernel backend --kernel tle-rms-norm",
    "flagtree-cpu validate --junit reports/validate.xml   # for CI test reports",
    "flagtree-cpu validate --install-prereqs              # pip install torch, numpy first",
    "flagtree-cpu validate --model ~/models/MiniCPM5-0.9B-int8 --kernel decode-e2e",
    "flagtree-cpu validate --list",
))
def validate(
    ctx: typer.Context,
    kernels: Annotated[Optional[list[str]], typer.Option("--kernel", "-k", metavar="NAME", help="Run only this "
                                                         "kernel. Repeatable.", autocompletion=_complete_kernels)]
    = None,
    python: _PythonOption = None,
    model: _ModelOption = None,
    timeout: _TimeoutOption = None,
    junit: Annotated[Optional[Path], typer.Option("--junit", metavar="FILE", help="Also write a JUnit XML report "
                                                  "(one testcase per kernel) for CI.")] = None,
    install_prereqs: Annotated[bool, typer.Option("--install-prereqs", help="pip install missing run-time "
                                                  "prerequisites (torch from the recipe's index) first.")] = False,
    list_kernels: Annotated[bool, typer.Option("--list", help="List the kernels, what each proves and where its "
                                               "script is, and exit.")] = False,
) -> None:
    """Run the validation kernels (the FEP's three phases) in the build's interpreter and judge them.

    Each kernel runs in its own process with the recipe's run-time environment (FLAGTREE_BACKEND=cpu ...) and a
    timeout; its output goes to <workdir>/logs/validate-<kernel>-<time>.log and a failure comes with its cause and
    fix. Never installs anything unless --install-prereqs. Exit code 6 when a required kernel fails.
    """
    from .junit import write_junit, write_junit_verdict
    from .validate import (
        CATALOG,
        KERNELS_DIR,
        ValidateOptions,
        configured,
        run_validate,
    )

    opts = _options(ctx)
    target = _target_python(opts, python)
    stage_ctx = _stage_context(opts, python=target)
    if list_kernels:
        settings = dict((info.name, cfg) for info, cfg in configured(stage_ctx.recipe))
        rows = [{"kernel": info.name, "configured": info.name in settings,
                 "required": bool(settings[info.name].required) if info.name in settings else None,
                 "proves": info.proves, "script": str(KERNELS_DIR / info.script)} for info in CATALOG]
        if opts.ui.json_mode:
            opts.ui.emit_json({"folder": str(KERNELS_DIR), "kernels": rows})
        else:
            opts.ui.table(["kernel", "in recipe", "proves"],
                          [[r["kernel"], ("required" if r["required"] else "optional") if r["configured"] else "no",
                            r["proves"]] for r in rows])
            opts.ui.info(f"scripts: {KERNELS_DIR} (run one by hand: {target} {KERNELS_DIR / 'vector_add.py'})")
        return
    options = ValidateOptions(python=target, kernels=tuple(kernels or ()),
                              model=Path(os.path.abspath(model.expanduser())) if model else None, timeout=timeout,
                              install_prereqs=install_prereqs, verbose=opts.ui.verbose)
    junit_path = Path(os.path.abspath(junit.expanduser())) if junit else None
    try:
        with _exclusive(opts, stage_ctx, "validate"):
            report = run_validate(stage_ctx, options)
    except FlagtreeCpuError as exc:  # CI uploads the file whatever happened: it says what stopped the kernels
        if junit_path is not None:
            write_junit_verdict(junit_path, stage_ctx.recipe.name, "error", exc.message,
                                "\n".join([*exc.details, f"fix: {exc.fix}" if exc.fix else ""]))
        raise
    if junit_path is not None:
        write_junit(report, junit_path)
    if opts.ui.json_mode:
        opts.ui.emit_json(report.to_json())
    else:
        _render_validation(opts.ui, report, junit_path)
    if report.failed:
        raise typer.Exit(int(ExitCode.VALIDATION))


def _render_validation(ui: Any, report: Any, junit: Path | None) -> None:
    symbols = {"pass": "pass", "fail": "FAIL", "skip": "skip"}
    rows = []
    for r in report.results:
        status = symbols[r.status] if r.required or r.status != "fail" else "fail (optional)"
        rows.append([r.kernel, ui.styled(status), r.figure or r.message, f"{r.seconds:.1f}s"])
    ui.table(["kernel", "status", "result", "time"], rows)
    for warning in report.warnings:
        ui.warn(warning)
    problems = [r for r in report.results if r.status == "fail"]
    for number, r in enumerate(problems, 1):
        ui.info(f"{number}. {r.kernel}: {r.message}" + (f"\n   log: {r.log}" if r.log else ""))
        if r.fix:
            ui.info(f"   fix: {r.fix}")
    counts = report.counts()
    ui.info(f"validate: {counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped in "
            f"{report.seconds:.1f}s with {report.python}" + (f"; JUnit report: {junit}" if junit else ""))


@app.command(cls=FlagtreeCommand, epilog=_examples(
    "flagtree-cpu doctor",
    "flagtree-cpu doctor --json > doctor.json      # for CI and bug reports",
    "flagtree-cpu doctor --check cpu.features --check cpu.topology",
    "flagtree-cpu doctor --snapshot board.tar.gz   # on a board: what doctor reads about it, in one file",
    "flagtree-cpu doctor --sysroot board.tar.gz    # anywhere: check that board from its snapshot",
    "flagtree-cpu doctor --mirror https://oaitriton.blob.core.windows.net/=https://mirror.example/triton/",
    "flagtree-cpu doctor --list",
))
def doctor(
    ctx: typer.Context,
    check_ids: Annotated[Optional[list[str]], typer.Option("--check", metavar="ID",
                                                           help="Run only this check. Repeatable.")] = None,
    list_checks: Annotated[bool, typer.Option("--list", help="List the checks and exit.")] = False,
    sysroot: Annotated[Optional[Path], typer.Option("--sysroot", metavar="FILE.tar.gz|DIR", help="Read /proc, /sys "
                                                    "and /etc from a board's snapshot (made there with --snapshot) "
                                                    "or a folder, instead of /.")] = None,
    snapshot: Annotated[Optional[Path], typer.Option("--snapshot", metavar="FILE.tar.gz", help="Write what doctor "
                                                     "reads about this machine to FILE, for --sysroot elsewhere, "
                                                     "and exit.")] = None,
    offline: Annotated[bool, typer.Option("--offline", help="Skip the network checks.")] = False,
    mirrors: _MirrorsOption = None,
    python: _PythonOption = None,
    schema: Annotated[bool, typer.Option("--schema", help="Print the JSON Schema of --json output and exit.")]
    = False,
) -> None:
    """Check host, CPU, toolchain, Python, network and workspace; say what is wrong and how to fix it.

    Read-only and fast: nothing is written (but the file --snapshot names), downloaded or built. Exit code 7 when a
    check fails (warnings do not fail). Each check has a stable id; --json output is versioned
    (flagtree-cpu/doctor/v1).
    """
    from .doctor import AREAS, DOCTOR_SCHEMA, DoctorContext, all_checks, run_doctor

    opts = _options(ctx)
    if schema:
        opts.ui.emit_json(DOCTOR_SCHEMA)
        return
    if list_checks:
        checks = all_checks()
        if opts.ui.json_mode:
            opts.ui.emit_json({"checks": [{"id": c.id, "area": c.area, "title": c.title} for c in checks]})
        else:
            opts.ui.table(["check", "area", "what it looks at"], [[c.id, c.area, c.title] for c in checks])
        return
    import dataclasses
    from contextlib import nullcontext

    from . import recipe_files
    from .cpuinfo import read_cpu
    from .errors import UsageError
    from .host import read_host
    from .mirrors import parse_mirrors
    from .recipe import resolve, select_variants
    from .snapshot import open_sysroot, write_snapshot
    from .workspace import placeholder_values

    if snapshot is not None:
        if sysroot is not None:
            raise UsageError("--snapshot records this machine and --sysroot reads another one: pass one of them",
                             fix="on the board: flagtree-cpu doctor --snapshot board.tar.gz; anywhere: "
                             "flagtree-cpu doctor --sysroot board.tar.gz")
        written = write_snapshot(snapshot.expanduser())
        if opts.ui.json_mode:
            opts.ui.emit_json(written.to_json())
            return
        opts.ui.success(f"snapshot: {written.path} ({len(written.files)} files, {written.size / 1024:.0f} KiB); "
                        f"check this machine anywhere with `flagtree-cpu doctor --sysroot {written.path.name}`")
        if written.absent:
            opts.ui.info(f"not on this machine (doctor reads them when present): {', '.join(written.absent)}")
        return
    rules = tuple(parse_mirrors(mirrors or []))  # with FLAGTREE_CPU_MIRRORS, as fetch reads them
    loaded = recipe_files.load_recipe(opts.recipe, opts.overrides, recipe_files.user_recipe_dirs(opts.recipes_dirs))
    with open_sysroot(sysroot) if sysroot else nullcontext() as board:  # a tarball's folder is removed after
        root = board.root if board else Path("/")
        host = read_host(root)
        ws = _workspace(opts)
        target = _target_python(opts, python)
        selected = select_variants(loaded, host.os_id, host.arch)
        recipe = resolve(selected, ws.root, placeholder_values(selected, ws, host, os.environ, python=target))
        euid = os.geteuid() if root == Path("/") else board.euid  # a board's fixes: for whoever snapshotted it
        report = run_doctor(DoctorContext(recipe, ws, host, read_cpu(root), root, target, dict(os.environ),
                                          offline=offline, mirrors=rules, euid=euid), check_ids or [])
        if board:
            report = dataclasses.replace(report, sysroot=board.label)
    if opts.ui.json_mode:
        opts.ui.emit_json(report.to_json())
    else:
        opts.ui.findings(report.findings, AREAS)
        counts = report.summary()
        opts.ui.info(f"doctor: {counts['ok']} ok, {counts['warn']} warnings, {counts['fail']} failed, "
                     f"{counts['skip']} skipped in {report.seconds:.2f}s"
                     + (f" (sysroot {board.describe()})" if board else ""))
    if report.failed:
        raise typer.Exit(int(ExitCode.DOCTOR))


@app.command(cls=FlagtreeCommand, epilog=_examples(
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
    cache_dir: _CacheDirOption = None,
) -> None:
    """Free the disk flagtree-cpu's own caches take; never anything it did not make, never the workspace.

    Without options: half-made folders a killed run left (removed by later runs anyway). --downloads: the
    download cache. --trees: older toolchain trees (e.g. the LLVM of a previous pin) that carry flagtree-cpu's
    stamp; the recipe's own tree, and trees unpacked by hand or by FlagTree's setup.py, are left alone. Anything
    another run is using is left alone too.
    """
    from .clean import CleanOptions, run_clean
    from .progress import human_bytes

    opts = _options(ctx)
    stage_ctx = _stage_context(opts)
    report = run_clean(stage_ctx, CleanOptions(downloads=downloads or all_, trees=trees or all_, dry_run=dry_run,
                                               cache_dir=cache_dir.expanduser() if cache_dir else None))
    ui = opts.ui
    if ui.json_mode:
        ui.emit_json(report.to_json())
        return
    verb = "would remove" if dry_run else "removed"
    if report.items:
        ui.table(["", "what", "path", "size", "why"],
                 [[ui.styled(verb if i.removed else "kept"), i.kind, str(i.path), human_bytes(i.size) if i.size else "",
                   i.reason] for i in report.items])
    removed = [i for i in report.items if i.removed]
    summary = f"{verb} {_count(len(removed), 'item')}, {human_bytes(report.freed)}"
    if not removed:
        summary = "nothing to clean" + ("" if downloads or trees or all_ else " (see --downloads, --trees, --all)")
    ui.info(summary + (" (--dry-run: nothing was removed)" if dry_run and removed else ""))


@app.command(cls=FlagtreeCommand, epilog=_examples(
    "flagtree-cpu lock",
    "flagtree-cpu lock --update           # follow the branches again",
))
def lock(
    ctx: typer.Context,
    update: Annotated[bool, typer.Option("--update", help="Re-resolve every unpinned ref.")] = False,
) -> None:
    """Resolve unpinned refs to commits and write .flagtree-cpu/lock.yaml, without checking anything out."""
    from .sources import SyncOptions, run_lock

    opts = _options(ctx)
    ctx_ = _stage_context(opts)
    with _exclusive(opts, ctx_, "lock"):
        result = run_lock(ctx_, SyncOptions(update=update))
    opts.ui.stage_result(result, "source")
    if not opts.ui.json_mode:
        opts.ui.info(f"lock file: {ctx_.workspace.lock_file}")


def _stop_on_sigterm() -> None:
    """SIGTERM (CI cancelling a job, `timeout`, `kill`) and SIGHUP (the terminal closed; git and the build
    run in their own process groups, so it reaches only us) stop the run the way Ctrl-C does: the same
    cleanup, then exit 143 / 129. Raised once; a second signal during the cleanup is ignored so the
    cleanup can finish (SIGKILL still works, and later runs sweep what it leaves)."""
    from .errors import Terminated

    def on_signal(signum: int, frame: Any) -> None:
        for ignored in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(ignored, signal.SIG_IGN)
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


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point."""
    _stop_on_sigterm()
    survive_closed_pipes()
    _help_width()
    app(args=list(sys.argv[1:] if argv is None else argv), prog_name="flagtree-cpu")


if __name__ == "__main__":  # pragma: no cover
    main()
