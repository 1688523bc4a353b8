"""A compile farm: other machines compile the build's C++ with distcc, reached through ccache's prefix command.

ccache runs each compilation as ``$CCACHE_PREFIX compiler args`` when it misses (``CCACHE_PREFIX=distcc``), so
cache and farm compose: a unit in the (local or shared) cache is never sent anywhere, a miss is compiled by a
helper and then cached. The tool runs no farm itself: it tells the build's ccache to prefix ``distcc``, and
distcc which helpers answer (``DISTCC_HOSTS``), with short timeouts.

Where the hosts come from: ``--compile-farm HOSTS``, else ``$FLAGTREE_CPU_COMPILE_FARM``, else the recipe's
``build.compile_farm`` (``farm_hosts.py`` reads them). The farm is not a build input: its variables are added after
the build stamp is computed, never change it, and never reach a wheelhouse key.

The farm never fails a build. Before the build every host is asked for a real one-line compile under one deadline
(``farm_probe.py``); only hosts that compiled it for this board, with this compiler's version, are used. None
answers, or distcc or ccache is missing: one warning, and a local build. A helper that dies mid-build: distcc
compiles that unit here (its fallback) and leaves the host alone for DISTCC_BACKOFF_PERIOD.

Without ccache there is no farm: the recipe's build command picks its compiler (FlagTree's CMake prefixes ccache
when it finds one); the tool could only reach distcc through ccache's prefix without editing that command.

``{jobs}`` with the farm: the build's own jobs (cores and memory, or --jobs) plus each answering host's slots
(``/LIMIT``, distcc's default 4), in the build command and its environment (``placeholders.build_jobs``). Only
compilations go to the farm, and ccache's preprocessing here takes little memory, so the board's memory limit
holds for what stays local; link jobs do not grow. Steps (pre-build, post-install) keep the local {jobs}.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .farm_hosts import FarmHost, parse_hosts
from .farm_probe import Compiler, HostAnswer, probe_all
from .proc import capture

ENV_VAR = "FLAGTREE_CPU_COMPILE_FARM"
# distcc's waits, shortened: IO_TIMEOUT bounds each read/write of a job (default 300 s), so a helper that stops
# answering mid-compile costs that unit this much before distcc compiles it here; the largest unit a helper
# compiles must fit in it. A user's own values stay.
FARM_ENV = {"DISTCC_IO_TIMEOUT": "60", "DISTCC_BACKOFF_PERIOD": "60", "DISTCC_FALLBACK": "1"}


def configured(option: str | None, environ: Mapping[str, str], recipe_value: str | None) -> tuple[str, str] | None:
    """(hosts, where they came from): the command line, else the environment, else the recipe; None when unset."""
    for value, origin in ((option, "--compile-farm"), (environ.get(ENV_VAR), ENV_VAR),
                          (recipe_value, "the recipe's build.compile_farm")):
        if value and value.strip():
            return value.strip(), origin
    return None


def check_configured(option: str | None, environ: Mapping[str, str], recipe_value: str | None
                     ) -> tuple[FarmHost, ...] | None:
    """The hosts `build` and `setup` would use, read when the command starts (exit 2 for words distcc would
    misread); None when no farm is configured."""
    chosen = configured(option, environ, recipe_value)
    return None if chosen is None else parse_hosts(chosen[0], chosen[1])


def build_compiler(env: Mapping[str, str], arch: str) -> Compiler | None:
    """The C++ compiler ccache will hand distcc (``$CXX``, else ``c++``, else ``g++``; by absolute path, as ccache
    passes it), with its gcc version; None when there is none on the build's PATH."""
    names = [env["CXX"].split()[0]] if env.get("CXX", "").strip() else ["c++", "g++"]
    path = next(filter(None, (shutil.which(n, path=env.get("PATH")) for n in names)), None)
    if path is None:
        return None
    try:
        done = capture([path, "-dumpfullversion"], env=env, timeout_s=10)
        version = done.stdout.strip() if done.returncode == 0 and len(done.stdout) < 40 else None
    except Exception:  # noqa: BLE001 - no version: the probe then judges the machine only
        version = None
    return Compiler(path, version or None, arch)


# --- one build -----------------------------------------------------------------------------------------


@dataclass
class FarmSession:
    """The farm for one build: the hosts asked, what each said, the variables the build gets."""

    hosts: tuple[FarmHost, ...]
    origin: str
    answers: list[HostAnswer] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    problem: str | None = None  # why the build goes without the farm

    @property
    def answered(self) -> list[FarmHost]:
        return [a.host for a in self.answers if a.problem is None]

    @property
    def slots(self) -> int:
        """What the farm adds to {jobs}: the slots of the hosts in use."""
        return sum(h.limit for h in self.answered) if self.env else 0

    def data(self) -> dict[str, Any]:
        return {"hosts": [h.spec() for h in self.hosts], "from": self.origin, "active": bool(self.env),
                "used": [h.spec() for h in self.answered] if self.env else [],
                "refused": {a.host.address: a.problem for a in self.answers if a.problem},
                "slots": self.slots, **({"problem": self.problem} if self.problem else {})}

    def summary(self) -> str:
        if not self.env:
            return f"compile farm: not used ({self.problem})"
        used = self.answered
        return (f"compile farm: {len(used)} of {len(self.hosts)} host{'s' if len(self.hosts) != 1 else ''} "
                f"({self.slots} slots added to the build's jobs): {' '.join(h.address for h in used)}")


def prepare(option: str | None, recipe_value: str | None, build_env: Mapping[str, str], arch: str,
            state_dir: Path, warn: Any) -> FarmSession | None:
    """The farm for this build, or None when none is configured; ``warn`` says (once) why it is not used."""
    chosen = configured(option, build_env, recipe_value)
    if chosen is None:
        return None
    session = FarmSession(parse_hosts(chosen[0], chosen[1]), chosen[1])
    named = f"compile farm ({session.origin})"
    session.problem = missing_programs(build_env)
    compiler = build_compiler(build_env, arch) if session.problem is None else None
    if session.problem is None and compiler is None:
        session.problem = "no C++ compiler on the build's PATH ($CXX, c++ or g++)"
    if session.problem is not None:
        warn(f"{named}: {session.problem}; building locally")
        return session
    assert compiler is not None
    session.answers = probe_all(session.hosts, compiler)
    if not session.answered:
        session.problem = "no host answered: " + "; ".join(f"{a.host.address} {a.problem}" for a in session.answers)
        warn(f"{named}: {session.problem}; building locally")
        return session
    for refused in (a for a in session.answers if a.problem):
        warn(f"{named}: {refused.host.address} {refused.problem}; building without it")
    session.env = farm_env(session.answered, build_env, state_dir)
    return session


def missing_programs(env: Mapping[str, str]) -> str | None:
    if shutil.which("ccache", path=env.get("PATH")) is None:
        return ("ccache is not on the build's PATH, and the farm is reached through ccache's prefix command "
                "(apt-get install ccache)")
    if shutil.which("distcc", path=env.get("PATH")) is None:
        return "distcc is not on the build's PATH (apt-get install distcc)"
    return None


def farm_env(answered: list[FarmHost], inherited: Mapping[str, str], state_dir: Path) -> dict[str, str]:
    """ccache's prefix and distcc's hosts, timeouts and state folder (its host back-off marks and slot locks, kept
    with the workspace's state, not in the user's ~/.distcc)."""
    distcc = shutil.which("distcc", path=inherited.get("PATH"))
    assert distcc is not None
    env = {"CCACHE_PREFIX": distcc, "DISTCC_HOSTS": " ".join(h.spec() for h in answered)}
    env.update({k: v for k, v in FARM_ENV.items() if not inherited.get(k)})
    if not inherited.get("DISTCC_DIR"):
        env["DISTCC_DIR"] = str(state_dir / "distcc")
        os.makedirs(env["DISTCC_DIR"], exist_ok=True)
    return env
