"""Known build failures: a signature in the log -> what went wrong and what fixes it.

The generic signatures live here; a recipe adds its own (``diagnosis:``), tried first
(``signatures_for``). The bundled recipe's and the generic build signatures together are the
single source of the README's build troubleshooting section (a test keeps them in sync). A log
matches the first signature that occurs in it earliest, and the report shows the lines around
that match — the first real error, not the last twenty lines of pip noise. An unknown failure
still gets the first error-looking lines and the log path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from .recipe import Recipe

BUNDLED_RECIPE = "flagtree-cpu-arm64"  # whose signatures the README's table shows with the generic ones


@dataclass(frozen=True)
class Signature:
    id: str
    pattern: str  # a regular expression, searched line by line (case-insensitive)
    cause: str
    fix: str  # may use {jobs_half} and {log}


_GLIBC_NOT_FOUND = r"(GLIBCXX|GLIBC|CXXABI)_[0-9.]+'? not found"

# Failures of any C++/CMake build driven by pip. What one project's build does wrong (its own variables,
# its downloads) is that recipe's `diagnosis.build`, tried first (``signatures_for``).
SIGNATURES: tuple[Signature, ...] = (
    Signature(
        "llvm-incomplete",
        r"(Could not find a package configuration file provided by \"(MLIR|LLVM)\"|MLIRConfig\.cmake|"
        r"LLVMConfig\.cmake|include could not find (requested|load) file:?\s*(TableGen|AddLLVM|AddMLIR)|"
        r"Unknown CMake command \"(add_mlir|mlir_tablegen|add_llvm))",
        "a downloaded LLVM/MLIR tree is incomplete or for another architecture (CMake cannot load its "
        "MLIR/LLVM configuration)",
        "run `flagtree-cpu fetch` (it verifies and republishes the tree); `file <tree>/bin/*` must name this "
        "machine's architecture",
    ),
    Signature(
        "out-of-memory",
        r"(Killed signal terminated program|fatal error: Killed|virtual memory exhausted|"
        r"internal compiler error: Killed|c\+\+: fatal error: Killed|out of memory)",
        "the compiler was killed for lack of memory: too many parallel jobs for this machine's RAM",
        "re-run with fewer jobs: flagtree-cpu build --jobs {jobs_half}",
    ),
    Signature(
        "ninja-missing",
        r"\"-DCMAKE_MAKE_PROGRAM=\" \+|can only concatenate str \(not \"NoneType\"\) to str|"
        r"ninja: (command )?not found|CMAKE_MAKE_PROGRAM is not set",
        "ninja is not on PATH (a setup.py that hands shutil.which('ninja') to CMake then fails on None)",
        "keep ninja in the recipe's python.build prerequisites (flagtree-cpu installs it into the venv and "
        "puts the venv's bin on PATH), or install ninja-build",
    ),
    Signature(
        "pybind11-missing",
        r"No module named '?pybind11|provided by \"pybind11\"",
        "pybind11 is not installed in the target Python (pip's --no-build-isolation does not install it)",
        "keep pybind11 in the recipe's python.build prerequisites; flagtree-cpu build installs them",
    ),
    Signature(
        "glibc-version",
        _GLIBC_NOT_FOUND,
        "a binary needs a newer libstdc++/glibc than this system provides",
        "compare `strings $(g++ -print-file-name=libstdc++.so.6) | grep GLIBCXX` with what is asked for; "
        "install a newer libstdc++, or LD_PRELOAD one that has the version",
    ),
    Signature(
        "cmake-too-old",
        r"CMake [0-9.]+ or higher is required\.\s*You are running version",
        "CMake is older than the project's cmake_minimum_required",
        "keep cmake in the recipe's python.build prerequisites (pip's cmake is recent) or upgrade the system one",
    ),
    Signature(
        "disk-full",
        r"No space left on device",
        "the disk is full",
        "free space (`flagtree-cpu doctor --only resources.disk` shows what the recipe needs where), or use "
        "another --workdir",
    ),
    Signature(
        "network-during-build",
        r"(Could not resolve host|Temporary failure in name resolution|Failed to establish a new connection|"
        r"urlopen error|Network is unreachable)",
        "the build tried to download something",
        "check which download in the log; `flagtree-cpu build --offline` checks every input first",
    ),
)

# What goes wrong when the products run (validate checks); the recipe's `diagnosis.run` is tried first.
# SIGILL and timeouts are told by the exit status, not the output.
RUNTIME_SIGNATURES: tuple[Signature, ...] = (
    Signature(
        "glibc-version",
        _GLIBC_NOT_FOUND,
        "a built library (or a JIT-compiled kernel) needs a newer libstdc++/glibc than this system provides",
        "install a newer libstdc++ and preload it: export LD_PRELOAD=/path/to/newer/libstdc++.so.6 "
        "(flagtree-cpu doctor --only runtime.glibc shows which versions are missing)",
    ),
    Signature(
        "prerequisite-missing",
        r"No module named '?(torch|numpy|transformers)'?",
        "a run-time Python package is missing in the target interpreter",
        "flagtree-cpu validate --install-prereqs",
    ),
)

GENERIC: dict[str, tuple[Signature, ...]] = {"build": SIGNATURES, "run": RUNTIME_SIGNATURES}


def signatures_for(recipe: Recipe | None, kind: Literal["build", "run"]) -> tuple[Signature, ...]:
    """The signatures a ``kind`` failure is matched against: the recipe's ``diagnosis`` first (its known
    failures are more specific), then the generic ones."""
    specs = getattr(recipe.diagnosis, kind) if recipe is not None else ()
    return tuple(Signature(s.id, s.pattern, s.cause, s.fix) for s in specs) + GENERIC[kind]


_ERRORISH = re.compile(r"(error|fatal|failed|traceback|exception|killed|not found|cannot|denied)", re.I)


@dataclass(frozen=True)
class Diagnosis:
    signature: Signature | None
    excerpt: tuple[str, ...]  # the first real error and a few lines around it
    line: int | None  # 1-based line of the match in the log

    def cause(self) -> str:
        return self.signature.cause if self.signature else "an unrecognized build failure"

    def to_json(self) -> dict[str, object]:
        """The ``diagnosis`` of an error in ``--json`` output."""
        return {"signature": self.signature.id if self.signature else None, "cause": self.cause(),
                "line": self.line, "excerpt": list(self.excerpt)}


def diagnose(log_text: str, context: int = 3, signatures: tuple[Signature, ...] = SIGNATURES) -> Diagnosis:
    """The first known signature in the log's output; else its first error-looking line.

    Our own log header (the command, the environment it got) and trailer are not output:
    they are skipped, so an excerpt never quotes them.
    """
    lines = log_text.splitlines()
    body = [n for n, line in enumerate(lines) if not (line.startswith("# ") or line.startswith("+ "))]
    compiled = [(s, re.compile(s.pattern, re.I)) for s in signatures]
    for number in body:
        for signature, pattern in compiled:
            if pattern.search(lines[number]):
                return Diagnosis(signature, _excerpt(lines, body, number, context), number + 1)
    for number in body:
        if _ERRORISH.search(lines[number]):
            return Diagnosis(None, _excerpt(lines, body, number, context * 2), number + 1)
    return Diagnosis(None, tuple(lines[n] for n in body[-10:]), None)


def diagnose_file(log: Path, signatures: tuple[Signature, ...] = SIGNATURES) -> Diagnosis:
    return diagnose(log.read_text(encoding="utf-8", errors="replace"), signatures=signatures)


def _excerpt(lines: list[str], body: list[int], number: int, context: int) -> tuple[str, ...]:
    where = body.index(number)
    chosen = body[max(0, where - context):where + context + 1]
    return tuple(lines[n] for n in chosen if lines[n].strip() or n == number)


def markdown_table() -> str:
    """The README's build troubleshooting table (`python -m flagtree_cpu_build.diagnose` prints it): the
    bundled recipe's build signatures, then the generic ones — the order a build log is matched in."""
    from .recipe.files import load_recipe

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    rows = ["| failure | what it means | fix |", "|---|---|---|"]
    for s in signatures_for(load_recipe(BUNDLED_RECIPE), "build"):
        fix = s.fix.format(jobs_half="<half the jobs>", log="<log>")
        rows.append(f"| `{s.id}` | {cell(s.cause)} | {cell(fix)} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # pragma: no cover - regenerates the README table
    print(markdown_table(), end="")
