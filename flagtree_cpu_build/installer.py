"""The one installer every pip-style install of the tool goes through: uv (``uv pip install --python <target>``)
when chosen or found, pip (``<target> -m pip install``) otherwise.

Which one: ``--installer`` (a global option), else ``$FLAGTREE_CPU_INSTALLER``, else the recipe's
``python.installer``, else ``auto``. ``auto`` is uv when a usable ``uv`` is found, pip otherwise; ``uv`` must find
one or stops (exit 2); ``pip`` never looks. A ``uv`` is looked for on ``PATH`` first, then beside the interpreter
flagtree-cpu runs from (its own venv's ``bin/``, where ``pip install uv`` puts it). A candidate is asked
``uv --version`` once, bounded in time and output (a hung or chattering binary cannot stall the run), and is used
only when it says a version of at least ``MIN_UV``: older ones lack options this module passes (they are passed
over, and said so).

pip's own settings are not uv's: uv reads no ``pip.conf`` and no ``PIP_*`` variable. The variables with a uv
equivalent are carried over (``PIP_INDEX_URL`` -> ``UV_INDEX_URL``, ...; a ``UV_*`` the user set wins;
``PIP_NO_INDEX``, which uv has no variable for, becomes ``--no-index``); a pip
setting uv has no equivalent for (a pip configuration file, another ``PIP_*`` variable that changes what is
installed) makes ``auto`` choose pip, and an explicit ``uv`` stop naming it, rather than be dropped silently.

uv's cache is uv's own default (``$UV_CACHE_DIR``, else ``~/.cache/uv``): shared with the user's other uv runs,
managed by ``uv cache clean``. The venv is still made by ``python -m venv``: it then has pip, which the fixes this
tool prints (``python -m pip install ...``) and a bundle's ``pip download`` use.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from .errors import UsageError

if TYPE_CHECKING:
    from .recipe import Recipe

__all__ = ["CHOICES", "ENV_VAR", "MIN_UV", "InstallFlags", "Installer", "choose", "choose_for", "pip_settings"]

CHOICES = ("auto", "uv", "pip")
ENV_VAR = "FLAGTREE_CPU_INSTALLER"
MIN_UV = (0, 5, 0)  # `uv pip install --python/-c/--no-build-isolation/--require-hashes/--reinstall`, UV_HTTP_*
PROBE_TIMEOUT_S = 10.0
_PROBE_LIMIT = 4096

# pip variable -> uv variable with the same meaning (pip's lists are space-separated; so are uv's)
_CARRIED = {"PIP_INDEX_URL": "UV_INDEX_URL", "PIP_EXTRA_INDEX_URL": "UV_EXTRA_INDEX_URL",
            "PIP_FIND_LINKS": "UV_FIND_LINKS", "PIP_CONSTRAINT": "UV_CONSTRAINT", "PIP_TIMEOUT": "UV_HTTP_TIMEOUT",
            "PIP_DEFAULT_TIMEOUT": "UV_HTTP_TIMEOUT", "PIP_RETRIES": "UV_HTTP_RETRIES",
            "PIP_TRUSTED_HOST": "UV_INSECURE_HOST"}
_NO_INDEX = "PIP_NO_INDEX"  # uv (0.13) has no variable for it: carried as the option --no-index
# pip settings that change how pip talks or trusts, not what it installs nor from where: nothing to carry (a CA
# that uv lacks makes uv fail loudly, it cannot make it install something else); as pip.conf keys
_HARMLESS = {"disable-pip-version-check", "no-input", "progress-bar", "quiet", "verbose", "root-user-action",
             "no-color", "cache-dir", "no-cache-dir", "log", "cert", "client-cert", "break-system-packages", "timeout",
             "default-timeout", "retries"}
_CONFIG_LIMIT = 1 << 20
_TRUE = {"1", "true", "yes", "on", "y"}


@dataclass(frozen=True)
class InstallFlags:
    """What one install asks for, in pip's words; each has a uv equivalent (``Installer.install_argv``)."""

    index_url: str | None = None
    find_links: Path | None = None
    no_index: bool = False
    constraints: Path | None = None
    no_deps: bool = False
    reinstall: bool = False  # pip's --force-reinstall: a rebuilt wheel of the same version replaces the installed
    no_build_isolation: bool = False
    require_hashes: bool = False


@dataclass(frozen=True)
class Installer:
    kind: Literal["uv", "pip"]
    why: str  # how it was chosen, for doctor and the log: "uv 0.13.9 at /x/bin/uv (auto: found on PATH)"
    uv: Path | None = None
    version: str | None = None
    passed_over: tuple[str, ...] = ()  # uv binaries found but not usable, each with the reason
    no_index: bool = False  # $PIP_NO_INDEX was set: every uv install gets --no-index (uv has no variable for it)

    @property
    def name(self) -> str:
        return self.kind

    def install_argv(self, python: Path, targets: Sequence[str], flags: InstallFlags = InstallFlags()) -> list[str]:
        """The command that installs ``targets`` (requirements, folders, wheel files) into ``python``."""
        before, after = [], []
        before += ["--no-deps"] * flags.no_deps
        before += (["--reinstall"] if self.kind == "uv" else ["--force-reinstall"]) * flags.reinstall
        before += ["--no-build-isolation"] * flags.no_build_isolation
        before += ["--require-hashes"] * flags.require_hashes
        after += ["--no-index"] * (flags.no_index or (self.kind == "uv" and self.no_index))
        after += ["--find-links", str(flags.find_links)] if flags.find_links is not None else []
        after += ["--index-url", flags.index_url] if flags.index_url else []
        after += ["-c", str(flags.constraints)] if flags.constraints is not None else []
        if self.kind == "uv":
            return [str(self.uv), "pip", "install", "--python", str(python), *before, *targets, *after]
        return [str(python), "-m", "pip", "install", *before, *targets, *after]

    def uninstall_argv(self, python: Path, names: Sequence[str]) -> list[str]:
        if self.kind == "uv":
            return [str(self.uv), "pip", "uninstall", "--python", str(python), *names]
        return [str(python), "-m", "pip", "uninstall", "-y", "--disable-pip-version-check", "--no-input", *names]

    def env(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` for this installer's run: for uv, pip's variables carried over to uv's (a UV_* already set
        wins)."""
        env = dict(base)
        if self.kind == "uv":
            for pip_name, uv_name in _CARRIED.items():
                if base.get(pip_name) and uv_name not in env:
                    env[uv_name] = base[pip_name]
            if base.get("PIP_EXTRA_INDEX_URL") and "UV_INDEX_STRATEGY" not in env:
                # pip takes the best version across all indexes; uv, unless told, the first index that has the name
                env["UV_INDEX_STRATEGY"] = "unsafe-best-match"
        return env


PIP = Installer("pip", "pip")  # what a printed fix says: every venv this tool makes has pip


def pip_settings(environ: Mapping[str, str], python: Path | None = None) -> list[str]:
    """The pip settings uv would not honour: pip configuration files pip reads here, and PIP_* variables with no
    uv equivalent. Each as "what (where)"."""
    found = [f"${name}" for name in sorted(environ) if name.startswith("PIP_") and name not in _CARRIED
             and name != _NO_INDEX and name != "PIP_CONFIG_FILE"
             and name.removeprefix("PIP_").lower().replace("_", "-") not in _HARMLESS]
    given = environ.get("PIP_CONFIG_FILE")
    if given is not None:  # pip reads that file alone; os.devnull: none at all
        files = [] if given in ("", os.devnull) else [Path(given)]
    else:
        home = Path(environ.get("HOME") or Path.home())
        config = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
        dirs = [Path(d) for d in (environ.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(":") if d]
        files = [Path("/etc/pip.conf"), *(d / "pip" / "pip.conf" for d in dirs), home / ".pip" / "pip.conf",
                 config / "pip" / "pip.conf"]
        if python is not None:
            files.append(python.parent.parent / "pip.conf")  # the target venv's own (sys.prefix)
    for file in files:
        keys = _config_keys(file)
        if keys:
            found.append(f"pip configuration file {file} ({', '.join(keys)})")
    return found


def _config_keys(file: Path) -> list[str]:
    """The settings of a pip configuration file that change what pip installs (``[section] key``); a file that
    cannot be read as one counts whole ("unreadable"), as pip would stop on it."""
    import configparser

    from .regular_file import read_regular

    if not file.exists():
        return []
    try:
        text = read_regular(file, _CONFIG_LIMIT)
        if len(text) > _CONFIG_LIMIT:
            return ["larger than 1 MiB"]
        parser = configparser.RawConfigParser(strict=False, interpolation=None)
        parser.read_string(text.decode("utf-8", "replace"), str(file))
    except (OSError, ValueError, configparser.Error) as error:
        return [f"unreadable: {getattr(error, 'strerror', None) or type(error).__name__}"]
    return [f"[{section}] {key}" for section in parser.sections() for key in parser[section]
            if key.replace("_", "-") not in _HARMLESS]


def choose(option: str | None, recipe_choice: str | None, environ: Mapping[str, str],
           python: Path | None = None, recipe_file: str = "") -> Installer:
    """The installer for this run, from the option, the environment, the recipe (in that order) or ``auto``."""
    choice, origin = _choice(option, recipe_choice, environ, recipe_file)
    if choice == "pip":
        return Installer("pip", f"pip ({origin})")
    found, passed = _find_uv(environ)
    if choice == "uv":
        if found is None:
            raise UsageError(f"no usable uv ({origin})" + (": " + "; ".join(passed) if passed else
                                                           ": none on PATH nor in flagtree-cpu's own venv"),
                             fix=f"{sys.executable} -m pip install 'uv>={'.'.join(map(str, MIN_UV))}'   "
                             "(or choose pip: --installer pip)")
        unhonoured = pip_settings(environ, python)
        if unhonoured:
            raise UsageError(f"uv was chosen ({origin}) but uv does not read {', '.join(unhonoured)}",
                             fix="give the same settings to uv (UV_INDEX_URL, uv.toml), or unset them; or choose "
                             "pip: --installer pip")
        path, version = found
        return Installer("uv", f"uv {version} at {path} ({origin})", path, version, tuple(passed),
                         _pip_no_index(environ))
    if found is None:
        why = "; ".join(passed) if passed else "no uv on PATH nor in flagtree-cpu's own venv"
        return Installer("pip", f"pip (auto: {why})", passed_over=tuple(passed))
    unhonoured = pip_settings(environ, python)
    path, version = found
    if unhonoured:
        return Installer("pip", f"pip (auto: uv {version} at {path} found, but it does not read "
                         f"{', '.join(unhonoured)})", passed_over=tuple(passed))
    return Installer("uv", f"uv {version} at {path} (auto: found)", path, version, tuple(passed),
                     _pip_no_index(environ))


def _pip_no_index(environ: Mapping[str, str]) -> bool:
    return environ.get(_NO_INDEX, "").strip().lower() in _TRUE


def choose_for(recipe: Recipe, option: str | None, python: Path | None) -> Installer:
    """``choose`` for a stage: the run's ``--installer``, this process's environment, the recipe's choice."""
    return choose(option, recipe.python.installer, os.environ, python, recipe.file or recipe.name)


def _choice(option: str | None, recipe_choice: str | None, environ: Mapping[str, str],
            recipe_file: str) -> tuple[str, str]:
    if option:
        return _checked(option, "--installer"), "--installer"
    if environ.get(ENV_VAR):
        return _checked(environ[ENV_VAR], f"${ENV_VAR}"), f"${ENV_VAR}"
    if recipe_choice:
        return recipe_choice, f"python.installer of {recipe_file}" if recipe_file else "python.installer"
    return "auto", "auto"


def _checked(value: str, where: str) -> str:
    choice = value.strip().lower()
    if choice not in CHOICES:
        raise UsageError(f"{where} {value!r} is not an installer: choose one of {', '.join(CHOICES)}",
                         fix=f"{'export ' + ENV_VAR + '=auto' if where.startswith('$') else '--installer auto'}")
    return choice


def _find_uv(environ: Mapping[str, str]) -> tuple[tuple[Path, str] | None, list[str]]:
    """The first usable uv (path, version) on PATH, then beside this interpreter; and those passed over, why."""
    candidates = []
    on_path = shutil.which("uv", path=environ.get("PATH", os.defpath))
    if on_path:
        candidates.append(Path(on_path))
    own = Path(sys.executable).parent / "uv"
    if own.exists() and own not in candidates:
        candidates.append(own)
    passed = []
    for candidate in candidates:
        version, problem = probe(candidate, environ)
        if version is not None:
            return (candidate, version), passed
        passed.append(f"{candidate}: {problem}")
    return None, passed


def probe(uv: Path, environ: Mapping[str, str]) -> tuple[str | None, str]:
    """(version, "") of a usable uv, or (None, why not): run once, bounded in time and output."""
    from .proc import capture_bounded

    if not os.access(uv, os.X_OK) or not uv.is_file():
        return None, "not an executable file"
    try:
        answer = capture_bounded([str(uv), "--version"], limit=_PROBE_LIMIT, timeout_s=PROBE_TIMEOUT_S,
                                 env=dict(environ))
    except OSError as error:
        return None, f"does not run ({error.strerror or error})"
    if answer.timed_out:
        return None, f"`uv --version` did not answer within {PROBE_TIMEOUT_S:g} s"
    match = re.match(r"uv (\d+)\.(\d+)\.(\d+)", answer.stdout.strip())
    if answer.returncode != 0 or match is None:
        said = (answer.stdout.strip() or answer.stderr.strip())[:80]
        return None, f"`uv --version` did not say a uv version (exit {answer.returncode}: {said!r})"
    version = tuple(int(n) for n in match.groups())
    if version < MIN_UV:
        return None, (f"uv {'.'.join(map(str, version))} is older than {'.'.join(map(str, MIN_UV))}, the oldest "
                      "whose `uv pip install` has every option flagtree-cpu passes")
    return ".".join(map(str, version)), ""
