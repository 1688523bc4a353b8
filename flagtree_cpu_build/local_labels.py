"""Which build of a package an interpreter has, when its distribution metadata does not say: the package's
own ``__version__``.

A pin with a local version label (``torch==2.10.0+cpu``) names a build variant. PyPI's aarch64 torch wheels
are CPU builds whose metadata version is ``2.10.0`` (no label) while ``torch.__version__`` is ``2.10.0+cpu``;
``versions.reads_runtime_label`` says when that is the case, and this module reads ``__version__`` for all
such packages in one run of the target interpreter (importing torch takes a second, ten under emulation).
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .proc import capture

__all__ = ["RuntimeVersion", "runtime_versions"]

_MARK = "@flagtree-cpu-runtime-version "
_TIMEOUT_S = 300  # torch under qemu-user takes tens of seconds to import; a hung import must still end

# One line per package, printed as soon as it is known: a package whose import kills the interpreter (a
# native crash) does not take the answers of the others with it.
_SCRIPT = (
    "import json, re, signal, sys\n"
    # SIGALRM's default action ends even an import hung in native code (no Python handler needs the GIL)
    f"signal.alarm({_TIMEOUT_S})\n"
    # python -c puts the working folder first: a folder named torch there is not the installed package
    "sys.path[:] = [p for p in sys.path if p]\n"
    "from importlib import metadata\n"
    "for name in sys.argv[1:]:\n"
    "    module = re.sub(r'[-_.]+', '_', name).lower()\n"
    "    answer = {'name': name, 'module': module, 'version': None, 'error': None}\n"
    "    try:\n"
    "        tops = (metadata.distribution(name).read_text('top_level.txt') or '').split()\n"
    "        if module not in tops and len(tops) == 1:\n"
    "            module = answer['module'] = tops[0]\n"
    "        version = getattr(__import__(module), '__version__', None)\n"
    "        if version is None:\n"
    "            answer['error'] = '%s has no __version__' % module\n"
    "        else:\n"
    "            answer['version'] = str(version)\n"
    "    except (Exception, SystemExit) as exc:\n"
    "        text = (str(exc).strip().splitlines() or [''])[0][:200]\n"
    "        answer['error'] = 'import %s failed: %s%s' % (module, type(exc).__name__, ': ' + text if text else '')\n"
    f"    print({_MARK!r} + json.dumps(answer), flush=True)\n"
)


@dataclass(frozen=True)
class RuntimeVersion:
    """A package's own ``__version__`` in the target interpreter, or why it could not be read."""

    module: str  # the module imported (torch for the distribution torch)
    version: str | None
    error: str | None = None

    def note(self, satisfied: bool) -> str:
        """Which build it is, after the metadata version: ``torch.__version__ 2.10.0+cu128: another build``."""
        if self.version is None:
            return f"{self.error or f'{self.module} has no __version__'}: cannot tell which build it is"
        if satisfied:
            return f"{self.module}.__version__ {self.version}"
        if "+" not in self.version:
            return f"{self.module}.__version__ {self.version}: names no build"
        return f"{self.module}.__version__ {self.version}: another build"


def runtime_versions(python: Path, names: Sequence[str], env: Mapping[str, str]) -> dict[str, RuntimeVersion]:
    """``__version__`` of each distribution's top-level module (top_level.txt, else its name with ``_``), read
    by importing it in one run of ``python``; a package that cannot be imported gets the reason instead."""
    if not names:
        return {}
    result = capture([str(python), "-c", _SCRIPT, *names], env=env, timeout_s=_TIMEOUT_S + 30)
    out, ended = result.stdout, _how_it_ended(result.returncode)
    found: dict[str, RuntimeVersion] = {}
    for line in out.splitlines():
        if line.startswith(_MARK):
            answer = json.loads(line[len(_MARK):])
            found[answer["name"]] = RuntimeVersion(answer["module"], answer["version"], answer["error"])
    for name in names:
        if name not in found:  # the interpreter died or hung importing it (or a package before it)
            module = re.sub(r"[-_.]+", "_", name).lower()
            found[name] = RuntimeVersion(module, None, f"importing {module} in {python} ended badly ({ended})")
    return found


def _how_it_ended(returncode: int) -> str:
    if returncode == 0:
        return "it gave no answer"
    if returncode == -signal.SIGALRM:
        return f"it did not finish in {_TIMEOUT_S} s"
    return f"killed by signal {-returncode}" if returncode < 0 else f"exit status {returncode}"
