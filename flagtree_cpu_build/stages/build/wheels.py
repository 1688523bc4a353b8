"""`install_wheels`: the wheels a build's command made, installed into the target Python without a shell.

A build that makes wheels (a framework's ``setup.py bdist_wheel``) names them with globs, absolute or relative to
its cwd (``["{sources.pytorch.path}/dist/*.whl"]``); after its command succeeds, every match is installed by one
``pip install --no-deps --force-reinstall`` (a rebuilt wheel of the same version must replace the one installed;
its dependencies are the recipe's ``python`` requirements). A glob that matches nothing, a match that is not a
regular ``.whl`` file, or two wheels of one distribution that this run's command both wrote, stop the build naming
the recipe key, before pip runs. A wheel an earlier build left next to the one this run wrote (a pin moved from
1.0 to 1.1, and `dist/` still holds the 1.0 wheel) is passed over, and said so.
"""

from __future__ import annotations

import re
import shlex
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import BuildError
from ...installer import InstallFlags, choose_for
from ...proc import log_path, run_logged
from ...recipe.builds import MAIN
from ...steps import matching

if TYPE_CHECKING:
    from ...buildenv import BuildEnv
    from ...stagekit.stage import RunOptions, StageContext


Marks = dict[Path, tuple[int, int, int]]  # a wheel file -> (inode, size, mtime in ns): what was there before


def wheel_marks(patterns: tuple[str, ...], cwd: Path) -> Marks:
    """The files the globs match now, as they are: taken before the build's command, so that afterwards a wheel it
    wrote or rewrote can be told from one an earlier build left (no clock is compared)."""
    marks: Marks = {}
    for pattern in patterns:
        for path in matching(cwd, pattern):
            try:
                st = path.lstat()
            except OSError:
                continue
            marks[path] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return marks


def install_wheels(ctx: StageContext, options: RunOptions, name: str, build_env: BuildEnv, before: Marks) -> Path:
    """Install the build's `install_wheels` matches into the target Python; returns the pip log. ``before``: the
    matches as they were before the build's command ran (``wheel_marks``)."""
    recipe = ctx.recipe
    assert recipe.build is not None
    cwd = Path(recipe.build.cwd)
    wheels, stale = found_wheels(recipe.build.install_wheels, cwd, _key(name), recipe.file, before=before)
    for old in stale:
        ctx.ui.info(f"{_key(name)}.install_wheels: passing over {old}, an earlier build's wheel (this build wrote "
                    "a newer one of the same distribution)")
    installer = choose_for(recipe, options.installer, options.python)
    argv = installer.install_argv(options.python, [str(w) for w in wheels], InstallFlags(no_deps=True, reinstall=True))
    log = log_path(ctx.workspace.logs_dir, "install-wheels" if name == MAIN else f"install-wheels-{name}")
    ctx.ui.info(f"+ {shlex.join(argv)}")
    with ctx.ui.progress(f"installing {len(wheels)} wheel{'s' if len(wheels) > 1 else ''}") as task:
        result = run_logged(argv, cwd=cwd, env=installer.env(build_env.env), log=log,
                            on_line=lambda line: task.update(0, None, detail="installing"))
    if not result.ok:
        raise BuildError(f"{installer.name} could not install the wheels of {_key(name)}.install_wheels into "
                         f"{options.python}",
                         details=(f"log: {log}", *(f"wheel: {w}" for w in wheels)), log=log,
                         fix=f"read the log; run `{shlex.join(argv)}` to see it again")
    return log


def found_wheels(patterns: tuple[str, ...], cwd: Path, key: str, origin: str = "", *,
                 before: Marks | None = None) -> tuple[list[Path], list[Path]]:
    """The wheels the globs match, in pattern order, and those passed over; every glob must match, only regular .whl
    files, one wheel per distribution: of several, the one the command wrote (not in ``before``, or changed since)
    when there is exactly one such, the others passed over."""
    where = f" (recipe {origin})" if origin else ""
    wheels: list[Path] = []
    for i, pattern in enumerate(patterns):
        found = sorted(set(matching(cwd, pattern)))
        if not found:
            raise BuildError(f"{key}.install_wheels[{i}]{where}: {pattern!r} matched no wheel in {cwd}",
                             fix="check the build wrote its wheels there (its log), or correct the glob in the "
                             "recipe")
        for path in found:
            if not path.name.endswith(".whl") or not stat.S_ISREG(path.lstat().st_mode):
                raise BuildError(f"{key}.install_wheels[{i}]{where}: {path} is not a wheel file",
                                 fix="make the glob match only .whl files, e.g. dist/*.whl")
        wheels += [p for p in found if p not in wheels]
    by_project: dict[str, list[Path]] = {}
    for wheel in wheels:
        by_project.setdefault(_project(wheel.name), []).append(wheel)
    stale: list[Path] = []
    for project, paths in by_project.items():
        fresh = [p for p in paths if before is not None and _mark(p) != before.get(p)]
        if len(paths) > 1 and len(fresh) == 1:
            stale += [p for p in paths if p not in fresh]
        elif len(paths) > 1:
            written = f"{len(fresh)} of them written by this build" if fresh else "none written by this build"
            raise BuildError(f"{key}.install_wheels{where} matched {len(paths)} wheels of {project} ({written}): "
                             "pip installs one", details=tuple(str(p) for p in paths),
                             fix="remove the wheels an earlier build left (or clean the folder in the build "
                             "command), then build again")
    return [w for w in wheels if w not in stale], stale


def _mark(path: Path) -> tuple[int, int, int]:
    st = path.lstat()
    return st.st_ino, st.st_size, st.st_mtime_ns


def _project(filename: str) -> str:
    """A wheel's distribution name, normalized (PEP 427: the file name's first part)."""
    return re.sub(r"[-_.]+", "-", filename.split("-", 1)[0]).lower()


def _key(name: str) -> str:
    return "build" if name == MAIN else f"builds.{name}"
