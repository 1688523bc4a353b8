"""The Typer app: the global options, the command and group classes, the options commands share.

Global options may be written before or after the command (`flagtree-cpu --json recipe list` and
`flagtree-cpu recipe list --json`); they are moved to the front before parsing, so they are still
parsed once, by the top-level callback. Heavy modules (git, requests) are imported inside the
commands that use them, to keep ``--help`` and ``--version`` fast.
"""

from __future__ import annotations

import copy as _copy
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from typer.core import TyperCommand, TyperGroup

from .. import __version__
from ..ui import UI
from . import completion
from .boundary import guard_invoke, guard_main, run_of
from .session import Options, Run

if TYPE_CHECKING:
    from typer._click.core import Context, HelpFormatter, Parameter

    from ..stagekit.stage import StageContext

_GLOBAL_VALUE_OPTIONS = {"--recipe", "-r", "--variant", "--workdir", "-w", "--set", "--recipes-dir", "--lock-file",
                         "--installer"}
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


def command_words(args: Sequence[str]) -> tuple[str, ...]:
    """The command and its own arguments as typed, without the global options (a fix that repeats the command
    renders the context options itself)."""
    args = hoist_global_options(args)
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "--":
        name = args[i].split("=", 1)[0]
        i += 2 if name in _GLOBAL_VALUE_OPTIONS and "=" not in args[i] else 1
    return tuple(args[i:])


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

    def __init__(self, *args: object, **kwargs: object):
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.help = reflow(self.help)
        self._showing_help = False

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        self._showing_help = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._showing_help = False

    def get_params(self, ctx: Context) -> list[Parameter]:
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

    def invoke(self, ctx: Context) -> object:
        run = run_of(ctx)
        run.command = ctx.command_path.partition(" ")[2]  # its options parsed: this command runs
        if run.options is not None:
            run.options.command = command_words(run.argv)
        return super().invoke(ctx)


# The order `--help` lists the commands in: the whole job, then its stages in setup's order (from the stage
# list), then the rest (the modules that define them are imported in another order).
COMMANDS_BEFORE_STAGES = ("recipe", "setup", "status")
COMMANDS_AFTER_STAGES = ("env", "doctor", "bundle", "clean", "lock", "schema")


def command_order() -> tuple[str, ...]:
    from ..stages.registry import STAGE_COMMANDS

    return (*COMMANDS_BEFORE_STAGES, *STAGE_COMMANDS, *COMMANDS_AFTER_STAGES)


class FlagtreeGroup(TyperGroup):
    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_global_options(args))

    def list_commands(self, ctx: Context) -> list[str]:
        names, order = super().list_commands(ctx), command_order()
        return sorted(names, key=lambda n: order.index(n) if n in order else len(order))

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,  # type: ignore[override]
             complete_var: str | None = None, standalone_mode: bool = True, **extra: object) -> object:
        """Click's main inside the error boundary: a usage error is reported like every other error, and
        under --json the run prints exactly one document (the envelope)."""
        argv = list(sys.argv[1:] if args is None else args)
        run = Run(argv)
        code = guard_main(run, partial(super().main, argv, prog_name, complete_var, standalone_mode=False,
                                       obj=run, **extra))
        if not standalone_mode:
            return code
        sys.exit(code)

    def invoke(self, ctx: Context) -> object:
        return guard_invoke(ctx, partial(super().invoke, ctx))


def options(ctx: typer.Context) -> Options:
    """The global options (parsed by the top-level callback before any command runs)."""
    parsed = run_of(ctx).options
    assert parsed is not None, "the top-level callback sets the options"
    return parsed


def examples(*lines: str) -> str:
    """An epilog listing example invocations, one per line."""
    return "[b]Examples[/b]\n\n" + "\n\n".join(f"  [cyan]{line}[/cyan]" for line in lines)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"flagtree-cpu {__version__}")
        raise typer.Exit()


def deprecated_check(ui: UI, command: str, values: list[str] | None) -> list[str]:
    """doctor and validate once selected items with --check, which status and link use as their CI gate: one
    meaning per flag name, so the selector is --only; --check still selects here, hidden, with a warning."""
    if values:
        ui.warn(f"`{command} --check` is deprecated (--check is the CI gate of status and link): use "
                f"`{command} " + " ".join(f"--only {v}" for v in values) + "`")
    return list(values or ())


def _installer_choice(value: Optional[str]) -> Optional[str]:
    """--installer's callback: a name that is not an installer is a usage error (exit 2) before anything runs."""
    from ..installer import CHOICES

    if value is not None and value.strip().lower() not in CHOICES:
        raise typer.BadParameter(f"{value!r} is not an installer: choose one of {', '.join(CHOICES)}")
    return value.strip().lower() if value is not None else None


app = typer.Typer(
    name="flagtree-cpu",
    cls=FlagtreeGroup,
    help="Build a Triton-family compiler (sources, toolchains, Python environment, checks) from a pinned YAML recipe.",
    epilog=examples(
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
    recipe: Annotated[Optional[str], typer.Option(
        "--recipe", "-r", envvar="FLAGTREE_CPU_RECIPE", metavar="NAME|PATH", autocompletion=completion.recipes,
        help="Recipe to use: a name from `recipe list` or a YAML file.  \\[default: the one the workspace was set "
        "up with, else flagtree-cpu-arm64]")] = None,
    variant: Annotated[Optional[str], typer.Option(
        "--variant", envvar="FLAGTREE_CPU_VARIANT", metavar="NAME", autocompletion=completion.variants,
        help="The recipe's variant to use (`recipe show` lists them).  \\[default: the recipe's own default]")] = None,
    workdir: Annotated[Optional[str], typer.Option(
        "--workdir", "-w", envvar="FLAGTREE_CPU_WORKDIR", metavar="DIR",
        help="Workspace folder.  \\[default: the workspace the current folder is in, else ./<recipe>-workspace "
        "for another recipe than the default, else ./flagtree-workspace]")] = None,
    overrides: Annotated[Optional[list[str]], typer.Option(
        "--set", metavar="KEY=VALUE",
        help="Override a recipe value, e.g. --set sources.flagtree-cpu.commit=<sha>. Repeatable.")] = None,
    recipes_dirs: Annotated[Optional[list[str]], typer.Option(
        "--recipes-dir", metavar="DIR",
        help="Extra folder of user recipes (also FLAGTREE_CPU_RECIPES). Repeatable.")] = None,
    json_mode: Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout: one document, "
                                            "errors included (`flagtree-cpu schema` describes it).")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="More detail; tracebacks on errors.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only warnings and errors.")] = False,
    wait: Annotated[bool, typer.Option("--wait", help="When another flagtree-cpu run is using the workspace, "
                                       "wait for it instead of exiting with code 8.")] = False,
    lock_file: Annotated[Optional[str], typer.Option(
        "--lock-file", envvar="FLAGTREE_CPU_LOCK_FILE", metavar="FILE",
        help="Keep the lock file here (e.g. ci/flagtree-cpu.lock.yaml, committed with your CI) instead of "
        "<workdir>/.flagtree-cpu/lock.yaml.")] = None,
    installer: Annotated[Optional[str], typer.Option(
        "--installer", metavar="auto|uv|pip", callback=_installer_choice,
        help="What installs into the target Python (setup, python, build, validate --install-prereqs): uv, pip, or "
        "auto: uv when a usable one is on PATH or in flagtree-cpu's own venv, else pip. Also "
        "$FLAGTREE_CPU_INSTALLER.  \\[default: the recipe's python.installer, else auto]")] = None,
    version: Annotated[bool, typer.Option(
        "--version", callback=_version_callback, is_eager=True, help="Print the version and exit.")] = False,
) -> None:
    """Build a Triton-family compiler (sources, toolchains, Python environment, checks) from a pinned YAML recipe.

    Global options may also be written after the command.
    """
    _refuse_missing_folders(recipes_dirs or [])
    run_of(ctx).options = Options(
        recipe=recipe or None,  # FLAGTREE_CPU_RECIPE= (empty) means the default, as if unset
        variant=variant or None,  # FLAGTREE_CPU_VARIANT= (empty) means the default, as if unset
        workdir=workdir,
        overrides=list(overrides or []),
        recipes_dirs=list(recipes_dirs or []),
        ui=UI(json_mode=json_mode, verbose=verbose, quiet=quiet and not verbose),
        wait=wait,
        lock_file=lock_file,
        installer=installer,
    )


def _refuse_missing_folders(folders: list[str]) -> None:
    """A --recipes-dir that is not a folder is a typo the user made just now: refused (exit 2), not skipped."""
    import shlex

    from ..errors import UsageError
    from ..recipe.locate import unusable_folder

    for folder in folders:
        why = unusable_folder(Path(folder).expanduser())
        if why is not None:
            raise UsageError(f"--recipes-dir {folder} {why}",
                             fix=f"ls -d {shlex.quote(folder)}   # check the name, or create it: mkdir -p "
                             f"{shlex.quote(folder)}")


recipe_app = typer.Typer(
    help="List, show, validate recipes; print the recipe JSON Schema.",
    no_args_is_help=True,
    rich_markup_mode="rich",
)
app.add_typer(recipe_app, name="recipe")


# --- options several commands share (setup passes them to its stages) --------------------------------------

JobsOption = Annotated[Optional[int], typer.Option(
    "--jobs", "-j", metavar="N", min=1, help="Parallel compile jobs. \\[default: from CPU cores and available memory]")]
GitCacheOption = Annotated[Optional[Path], typer.Option(
    "--git-cache", envvar="FLAGTREE_CPU_GIT_CACHE", metavar="DIR",
    help="Keep bare mirrors here; later workspaces clone from them without downloading.")]
CacheDirOption = Annotated[Optional[Path], typer.Option(
    "--cache-dir", envvar="FLAGTREE_CPU_CACHE_DIR", metavar="DIR",
    help="Per-user cache folder (downloads in DIR/downloads). "
    "\\[default: ~/.cache/flagtree-cpu, or under $XDG_CACHE_HOME]")]
MirrorsOption = Annotated[Optional[list[str]], typer.Option(
    "--mirror", metavar="PREFIX=URL", help="Try URL (an https:// or file:// URL, or a folder) in place of "
    "PREFIX first. Repeatable; also FLAGTREE_CPU_MIRRORS.")]
ModelOption = Annotated[Optional[Path], typer.Option(
    "--model", metavar="DIR", exists=True, file_okay=False,
    help="Model folder for checks that need one (the flagtree preset decode-e2e; skipped without one).")]
TimeoutOption = Annotated[Optional[float], typer.Option(
    "--timeout", metavar="SECONDS", min=1, help="Stop each check after this long. \\[default: the recipe's]")]
PythonOption = Annotated[Optional[Path], typer.Option(
    "--python", metavar="PATH", help="Target interpreter. \\[default: the active venv (never the one flagtree-cpu "
    "runs from), else <workdir>/.venv, created when missing]")]


def _checked_by(parse: Callable[[str], object]) -> Callable[[Optional[str]], Optional[str]]:
    """An option callback: a value ``parse`` refuses (a UsageError) is a usage error (exit 2) before anything
    runs, with the parser's message and fix."""

    def callback(value: Optional[str]) -> Optional[str]:
        from ..errors import UsageError

        if value is not None:
            try:
                parse(value)
            except UsageError as err:
                raise typer.BadParameter(f"{err.message}; {err.fix}") from None
        return value

    return callback


def _compile_cache_url(value: str) -> object:
    import os

    from ..compile_cache import check_url

    # a URL ccache would not take, or would take and fail every compilation on (this ccache: the one on PATH)
    return check_url(value, "--compile-cache", os.environ)


def check_compile_cache(option: Optional[str], stage_ctx: StageContext, python: Path) -> None:
    """A compile cache URL from $FLAGTREE_CPU_COMPILE_CACHE or the recipe that the build's ccache could not use is
    exit 2 when `build` or `setup` starts, as the option's is when it is read: not in every compilation."""
    import os

    from ..compile_cache import check_configured

    build = stage_ctx.recipe.build
    check_configured(option, os.environ, build.compile_cache if build else None, python)


def _farm_hosts(value: str) -> object:
    from ..farm_hosts import parse_hosts

    return parse_hosts(value, "--compile-farm")


def check_compile_farm(option: Optional[str], stage_ctx: StageContext) -> None:
    """Hosts from $FLAGTREE_CPU_COMPILE_FARM that distcc would misread are exit 2 when `build` or `setup` starts
    (the recipe's were checked when it loaded, the option's when it was read)."""
    import os

    from ..compile_farm import check_configured

    build = stage_ctx.recipe.build
    check_configured(option, os.environ, build.compile_farm if build else None)


def _wheelhouse_location(value: str) -> object:
    from ..wheelhouse import parse_location

    return parse_location(value)  # neither a folder nor file:// or http(s)://


CompileCacheOption = Annotated[Optional[str], typer.Option(
    "--compile-cache", metavar="URL", callback=_checked_by(_compile_cache_url),
    # \\[: rich markup would read [/DB] as a closing tag (help is rendered as markup)
    help="Share compiled objects through ccache's remote storage: redis://\\[PASSWORD@]HOST\\[:PORT]\\[/DB] or "
    "http://\\[USER:PASSWORD@]HOST\\[:PORT]/PATH (also FLAGTREE_CPU_COMPILE_CACHE). A server that does not answer "
    "within 2 s is one warning and a build with the local ccache only. Never a build input.")]


CompileFarmOption = Annotated[Optional[str], typer.Option(
    "--compile-farm", metavar="HOSTS", callback=_checked_by(_farm_hosts),
    help="Compile the build's C++ on distcc helpers through ccache (CCACHE_PREFIX=distcc): 'HOST\\[:PORT]\\[/LIMIT] "
    "...' (also FLAGTREE_CPU_COMPILE_FARM). Each host is probed with a one-line compile first; none answers: one "
    "warning and a local build. The hosts' slots are added to {jobs}. Never a build input.")]


WheelhouseOption = Annotated[Optional[str], typer.Option(
    "--wheelhouse", metavar="DIR|URL", callback=_checked_by(_wheelhouse_location),
    help="Before building, look for a build another machine published there (a folder, file:// or http(s)://; "
    "also FLAGTREE_CPU_WHEELHOUSE): a wheel whose build key and target class fit is verified and installed "
    "instead of building.")]


BundleWheelhouseOption = Annotated[Optional[str], typer.Option(
    "--wheelhouse", metavar="DIR|URL", callback=_checked_by(_wheelhouse_location),
    help="With --for-wheelhouse: the wheelhouse to take the build from (a folder, file:// or http(s)://; also "
    "FLAGTREE_CPU_WHEELHOUSE, else the recipe's build.wheelhouse).")]


ReplaceOption = Annotated[Optional[list[str]], typer.Option(
    "--replace", metavar="NAME", help="Replace artifact NAME's tree although another recipe or workspace published "
    "it (fetch refuses otherwise, naming them). Repeatable. A shared tree is never replaced.")]
