"""Where things live: the workdir and its state, the per-user caches, Triton's home.

Every path the tool writes to is derived here, from the command line and the
environment, so the rest of the code never guesses a location. Recipes are above
this module (``placeholders`` joins the two), so it imports none of them.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .errors import UsageError, WorkspaceBusy
from .locking import Held, exclusive
from .workspace_record import RECORD_NAME, WorkspaceRecord, read_record, write_record

DEFAULT_WORKDIR = "flagtree-workspace"  # the default recipe's, as it always was; another recipe's: <name>-workspace
DEFAULT_WORKDIR_RECIPE = "flagtree-cpu-arm64"
CACHE_ENV = "FLAGTREE_CPU_CACHE_DIR"
STATE_DIRNAME = ".flagtree-cpu"


@dataclass(frozen=True)
class Workspace:
    root: Path  # absolute
    # --lock-file: a lock kept elsewhere (next to a CI config, in version control), not in the state folder
    lock_path: Path | None = None
    # a stacked recipe (one that `extends` another) keeps its lock, stamps and reports in a folder of its own, so
    # the base's stay exactly as they were; None: the workspace's first recipe, whose state is the state folder
    layer: str | None = None
    # what this run's recipe, variant and lock are (workspace_record): written into the state folder by the
    # first command that changes the workspace, and again when it changed (an edited recipe file, a moved lock)
    record: WorkspaceRecord | None = None

    @property
    def state_dir(self) -> Path:
        """The workspace's own state: the busy lock, the empty folder, and the first recipe's state."""
        return self.root / STATE_DIRNAME

    @property
    def recipe_state(self) -> Path:
        """This recipe's lock, build stamps, step markers and last reports."""
        return self.state_dir / "recipes" / self.layer if self.layer else self.state_dir

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs"

    @property
    def lock_file(self) -> Path:
        return self.lock_path or self.recipe_state / "lock.yaml"

    @property
    def empty_dir(self) -> Path:
        return self.state_dir / "empty"

    @property
    def venv_dir(self) -> Path:
        return self.root / ".venv"

    @property
    def busy_lock(self) -> Path:
        return self.state_dir / "workspace.lock"


@contextmanager
def exclusive_use(ws: Workspace, command: str, *, wait: bool, on_wait: Callable[[str], None]) -> Iterator[None]:
    """Held by every command that changes the workspace: two builds (or a sync under a build) in one tree
    would corrupt both. A second run stops at once with who holds it, or with ``wait`` queues behind it."""
    made_root, made_state = not ws.root.exists(), not ws.state_dir.exists()
    try:
        with exclusive(ws.busy_lock, wait=wait, on_wait=on_wait, note=command):
            try:
                if made_state:  # a new workspace knows its recipe from the start (a kill mid-run keeps that)
                    _keep_record(ws)
                yield
                # an existing one is updated only by a run that finished: a refused run changes nothing
                _keep_record(ws)
            finally:
                if made_state:
                    _forget_if_empty(ws, made_root)
    except Held as held:
        pid, _, what = held.holder.partition(" ")
        raise WorkspaceBusy(f"the workspace {ws.root} is in use by another flagtree-cpu run "
                            f"({what or 'a command'}, pid {pid}); nothing was changed",
                            fix="wait for it to finish, or pass --wait to start as soon as it has") from None


def _keep_record(ws: Workspace) -> None:
    """The workspace's record, written when it has none or says something else than this run (context.py has
    refused a run whose recipe or variant differs from the record's, so what changes here is the recipe file's
    digest, its path, or the lock's location). Held under the busy lock: two runs never write it at once."""
    if ws.record is not None and read_record(ws.state_dir) != ws.record:
        write_record(ws.state_dir, ws.record)


def _forget_if_empty(ws: Workspace, made_root: bool) -> None:
    """A run that created the workspace and then stopped before making anything in it (a failed preflight, a
    recipe problem) leaves nothing behind — not its lock file, nor its record. Still holding the lock here;
    locking re-checks that a lock it waited for is still the file at that path, so removing it is safe."""
    leftovers = sorted(p.name for p in ws.state_dir.iterdir()) if ws.state_dir.is_dir() else []
    if not leftovers or set(leftovers) - {ws.busy_lock.name, RECORD_NAME}:
        return
    (ws.state_dir / RECORD_NAME).unlink(missing_ok=True)
    ws.busy_lock.unlink(missing_ok=True)
    ws.state_dir.rmdir()
    if made_root and not any(ws.root.iterdir()):
        ws.root.rmdir()


def default_workdir(recipe: str | None) -> str:
    """The folder a recipe's workspace gets outside every workspace without --workdir: ./flagtree-workspace for
    the default recipe (where it always was), ./<name>-workspace for any other (./flagtree-recipe-workspace for a
    recipe named `flagtree`), so two recipes set up from the same folder never share one workspace (or one .venv)."""
    if recipe is None or recipe == DEFAULT_WORKDIR_RECIPE:
        return DEFAULT_WORKDIR
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", recipe).strip(".-")[:100]
    folder = f"{safe or 'recipe'}-workspace"
    # a recipe named `flagtree` (bundled) would land in the default recipe's folder: give it a name of its own
    return f"{safe}-recipe-workspace" if folder == DEFAULT_WORKDIR else folder


def located_workspace(workdir: str | Path | None, *, cwd: Path | None = None) -> Path | None:
    """The workspace named by --workdir (or FLAGTREE_CPU_WORKDIR, which arrives here the same way); without one,
    the workspace the current folder is in, found the way git finds its repository: the nearest folder at or
    above ``cwd`` holding a state folder. None outside every workspace: the recipe then names the folder."""
    if workdir:
        return Path(os.path.abspath(Path(workdir).expanduser()))
    return enclosing_workspace(cwd or Path.cwd())


def open_workspace(workdir: str | Path | None, lock_file: str | Path | None = None, *,
                   cwd: Path | None = None, recipe: str | None = None) -> Workspace:
    """The workspace ``located_workspace`` finds; outside every workspace, ./flagtree-workspace for the default
    recipe and ./<recipe>-workspace for another (``recipe``), so `cd flagtree-workspace/FlagTree && flagtree-cpu
    sync` works on that workspace instead of cloning a second one inside it. A workdir that is a file is refused
    rather than written into."""
    here = cwd or Path.cwd()
    path = located_workspace(workdir, cwd=here) or here / default_workdir(recipe)
    if path.exists() and not path.is_dir():
        raise UsageError(f"the workdir {path} is a file, not a folder",
                         fix="pass --workdir with a folder (it is created when missing), or move the file away")
    lock = Path(os.path.abspath(Path(lock_file).expanduser())) if lock_file else None
    if lock is not None and lock.is_dir():
        raise UsageError(f"--lock-file {lock} is a folder",
                         fix="give the path of a file, e.g. ci/flagtree-cpu.lock.yaml")
    return Workspace(path, lock)


def enclosing_workspace(folder: Path) -> Path | None:
    """The workspace ``folder`` is in (or is), if any: the nearest ancestor holding a state folder."""
    for candidate in (folder, *folder.parents):
        try:
            if (candidate / STATE_DIRNAME).is_dir():
                return candidate
        except OSError:  # a folder above that this user may not look into (EACCES): not a workspace of theirs
            continue
    return None


def home_dir(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("HOME") or Path.home())


def triton_home(environ: Mapping[str, str]) -> Path:
    """Triton's setup.py and runtime use $TRITON_HOME/.triton, TRITON_HOME defaulting to HOME."""
    return Path(environ.get("TRITON_HOME") or home_dir(environ))


def user_cache_dir(environ: Mapping[str, str]) -> Path:
    if environ.get(CACHE_ENV):
        return Path(environ[CACHE_ENV]).expanduser()
    xdg = environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else home_dir(environ) / ".cache"
    return base / "flagtree-cpu"


def user_config_dir(environ: Mapping[str, str]) -> Path:
    """``$XDG_CONFIG_HOME/flagtree-cpu`` (``~/.config/flagtree-cpu``): what a user configures once per machine
    (the keys bundles must be signed with)."""
    xdg = environ.get("XDG_CONFIG_HOME")
    return (Path(xdg) if xdg else home_dir(environ) / ".config") / "flagtree-cpu"


def target_python(ws: Workspace, environ: Mapping[str, str]) -> Path:
    """The interpreter builds go into: an active venv, else the workspace's own venv. The venv flagtree-cpu
    itself runs from is never taken by default (activating the checkout's `.venv` to reach the tool must not
    make pip install torch into it): only ``--python`` naming it makes it the target."""
    active = environ.get("VIRTUAL_ENV")
    if active and own_venv(environ) is None:
        return Path(active) / "bin" / "python"
    return ws.venv_dir / "bin" / "python"


def own_venv(environ: Mapping[str, str]) -> Path | None:
    """The active venv (``VIRTUAL_ENV``) when it is the one this tool runs from (``sys.prefix``); else None."""
    active = environ.get("VIRTUAL_ENV")
    if not active:
        return None
    try:
        same = os.path.samefile(active, sys.prefix)
    except OSError:  # a VIRTUAL_ENV that names nothing is not the tool's
        return None
    return Path(active) if same else None


def own_venv_note(ws: Workspace, python: Path, environ: Mapping[str, str]) -> str | None:
    """What to tell the user when the target is the workspace venv because the active venv is the tool's own."""
    own = own_venv(environ)
    if own is None or python != ws.venv_dir / "bin" / "python":
        return None
    return (f"the active venv {own} is flagtree-cpu's own, not the build's target: using {ws.venv_dir} "
            f"(--python {own / 'bin' / 'python'} to build into it)")
