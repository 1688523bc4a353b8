#!/usr/bin/env python3
"""The test environment's pins: constraints.txt, written from a venv and compared with one.

`make test` installs the dev/test extras under constraints.txt, so the suite runs on the versions it last
passed with, whatever was released since. `make test-latest` installs the newest versions pyproject.toml
allows into .venv-latest; `compare` then names each package whose version differs from constraints.txt, so
an upstream release shows up as a named difference (and, if the suite fails there, a named failure).

    pins.py freeze PYTHON            constraints for the packages installed in PYTHON's environment (stdout)
    pins.py compare PYTHON FILE      the differences; exit 0 when there are none, 10 when there are

Packages the [test] extra pins per machine with `==` (torch, triton: a CPU build on each kind of machine) are
left out: the extra pins them already, and one line for every machine would contradict it on another.
Standard library only: this runs with whatever python3 the machine has.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADER = """\
# The versions `make test` (and so .ci/run) installs the dev and test extras at: the set the suite last passed
# with. `make test-latest` installs the newest versions pyproject.toml allows instead and names each package
# that differs from this file; .ci/run runs the suite there too when any does. To move the pins: when
# `make test-latest` passes, `make constraints` writes its versions here. Written by .ci/pins.py freeze.
# torch and triton are not here: the [test] extra pins them per machine (a CPU build on each).
"""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned_by_extra() -> set[str]:
    """Distributions the [test] extra pins with == on some machine."""
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    return {canonical(re.split(r"[\s=<>!~;\[]", line, maxsplit=1)[0]) for line in extra if "==" in line}


def installed(python: str) -> dict[str, str]:
    """name -> version of every distribution in that interpreter's environment but editable ones (the project)."""
    out = subprocess.run([python, "-m", "pip", "freeze", "--all", "--exclude-editable"], check=True,
                         capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        match = re.fullmatch(r"([A-Za-z0-9._-]+)==([^\s;]+)", line.strip())
        if match:
            found[canonical(match[1])] = match[2]
    return found


def read_constraints(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text().splitlines():
        match = re.fullmatch(r"([A-Za-z0-9._-]+)==([^\s;]+)", line.split("#", 1)[0].strip())
        if match:
            found[canonical(match[1])] = match[2]
    return found


def freeze(python: str) -> int:
    skip = pinned_by_extra()
    versions = {name: v for name, v in installed(python).items() if name not in skip}
    sys.stdout.write(HEADER + "".join(f"{name}=={versions[name]}\n" for name in sorted(versions)))
    return 0


def compare(python: str, constraints: Path) -> int:
    skip = pinned_by_extra()
    have = {name: v for name, v in installed(python).items() if name not in skip}
    pinned = read_constraints(constraints)
    lines = [f"  {name}: {pinned[name]} -> {have[name]}" for name in sorted(have.keys() & pinned.keys())
             if have[name] != pinned[name]]
    lines += [f"  {name}: new, {have[name]} (not in {constraints.name})" for name in sorted(have.keys() - pinned.keys())]
    lines += [f"  {name}: {pinned[name]} no longer installed" for name in sorted(pinned.keys() - have.keys())]
    if not lines:
        print(f"the newest versions pyproject.toml allows are the ones in {constraints.name}", file=sys.stderr)
        return 0
    print(f"the newest versions pyproject.toml allows differ from {constraints.name} in {len(lines)} "
          f"package(s):", file=sys.stderr)
    print("\n".join(lines), file=sys.stderr)
    return 10


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "freeze":
        return freeze(argv[1])
    if len(argv) == 3 and argv[0] == "compare":
        return compare(argv[1], Path(argv[2]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
