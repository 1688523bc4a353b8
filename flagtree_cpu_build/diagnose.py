"""Known build failures: a signature in the log -> what went wrong and what fixes it.

The table below is the single source of the README's build troubleshooting section (a test
keeps them in sync). A log matches the first signature that occurs in it earliest, and the
report shows the lines around that match — the first real error, not the last twenty
lines of pip noise. An unknown failure still gets the first error-looking lines and the
log path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Signature:
    id: str
    pattern: str  # a regular expression, searched line by line (case-insensitive)
    cause: str
    fix: str  # may use {jobs_half} and {log}


_GLIBC_NOT_FOUND = r"(GLIBCXX|GLIBC|CXXABI)_[0-9.]+'? not found"

SIGNATURES: tuple[Signature, ...] = (
    Signature(
        "install-permission",
        r"/usr/local\S*:? Permission denied|Permission denied.*/usr/local|(file INSTALL|cmake --install)"
        r".*Permission denied",
        "the install step (sleef's `cmake --install`) writes into /usr/local and is denied",
        "keep the recipe's TRITON_APPEND_CMAKE_ARGS=-DCMAKE_INSTALL_PREFIX=$HOME/.flagtree_install "
        "(check `flagtree-cpu env --build`); do not build as root to get around it",
    ),
    Signature(
        "nvidia-download",
        r"FileNotFoundError: .*(ptxas|cuobjdump|nvdisasm|cudart|cupti)|\.triton/nvidia/",
        "FlagTree's setup.py looked for NVIDIA tools, which a CPU build never needs: the TRITON_*_PATH "
        "variables were not set",
        "build through `flagtree-cpu build` (it sets all seven); by hand: eval \"$(flagtree-cpu env --build)\"",
    ),
    Signature(
        "llvm-incomplete",
        r"(Could not find a package configuration file provided by \"(MLIR|LLVM)\"|MLIRConfig\.cmake|"
        r"LLVMConfig\.cmake|include could not find (requested|load) file:?\s*(TableGen|AddLLVM|AddMLIR)|"
        r"Unknown CMake command \"(add_mlir|mlir_tablegen|add_llvm))",
        "the LLVM tree at LLVM_SYSPATH is incomplete or for another architecture (CMake cannot load its "
        "MLIR/LLVM configuration)",
        "run `flagtree-cpu fetch` (it verifies and republishes the tree); `file $LLVM_SYSPATH/bin/mlir-tblgen` "
        "must say aarch64",
    ),
    Signature(
        "out-of-memory",
        r"(Killed signal terminated program|fatal error: Killed|virtual memory exhausted|"
        r"internal compiler error: Killed|c\+\+: fatal error: Killed|out of memory)",
        "the compiler was killed for lack of memory: too many parallel jobs for this machine's RAM",
        "re-run with fewer jobs: flagtree-cpu build --jobs {jobs_half}",
    ),
    Signature(
        "compiler-too-old",
        r"(unrecognized|unknown|invalid).*(armv9-a|-march=armv9|sve2)|error: unknown target CPU|"
        r"invalid feature modifier",
        "the C++ compiler does not know -march=armv9-a+sve2+i8mm+bf16 (FlagTree's CMake adds it on aarch64; "
        "it needs GCC 12 or Clang 14)",
        "install a newer compiler (sudo apt-get install -y gcc-12 g++-12) and build with CC=gcc-12 CXX=g++-12",
    ),
    Signature(
        "ninja-missing",
        r"\"-DCMAKE_MAKE_PROGRAM=\" \+|can only concatenate str \(not \"NoneType\"\) to str|"
        r"ninja: (command )?not found|CMAKE_MAKE_PROGRAM is not set",
        "ninja is not on PATH (FlagTree's setup.py passes shutil.which('ninja') to CMake)",
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
        "compare `strings /usr/lib/aarch64-linux-gnu/libstdc++.so.6 | grep GLIBCXX` with what is asked for; "
        "install a newer libstdc++, or LD_PRELOAD the system library as FlagTree's guide describes",
    ),
    Signature(
        "cmake-too-old",
        r"CMake [0-9.]+ or higher is required\.\s*You are running version",
        "CMake is older than FlagTree needs (3.18)",
        "keep cmake in the recipe's python.build prerequisites (pip's cmake is recent) or upgrade the system one",
    ),
    Signature(
        "disk-full",
        r"No space left on device",
        "the disk is full",
        "free space (the build needs several GB in the workdir and in ~/.triton), or use another --workdir",
    ),
    Signature(
        "flagtree-offline-on",
        r"FLAGTREE_OFFLINE_BUILD_DIR|OfflineBuildManager",
        "TRITON_OFFLINE_BUILD=ON switched on FlagTree's own offline mode, which needs FLAGTREE_OFFLINE_BUILD_DIR",
        "use TRITON_OFFLINE_BUILD=1 (flagtree-cpu build --offline does)",
    ),
    Signature(
        "network-during-build",
        r"(Could not resolve host|Temporary failure in name resolution|Failed to establish a new connection|"
        r"urlopen error|Network is unreachable)",
        "the build tried to download something",
        "check which download in the log; `flagtree-cpu build --offline` checks every input first",
    ),
)

# What goes wrong when a built FlagTree runs kernels (validate). SIGILL and timeouts are told by the
# exit status, not the output.
RUNTIME_SIGNATURES: tuple[Signature, ...] = (
    Signature(
        "assembler-junk",
        r"junk at end of line",
        "the generated kernel.s was assembled without FlagTree's CPU handling: FLAGTREE_BACKEND=cpu was not "
        "set when the kernel was compiled",
        'export the run-time variables before running kernels: eval "$(flagtree-cpu env)"',
    ),
    Signature(
        "tle-missing",
        r"No module named '?triton\.language\.extra\.cpu|cannot import name '?tle_ops",
        "the TLE builtins (triton.language.extra.cpu.tle_ops) are not reachable: FlagTree's links into "
        "flagtree-cpu are incomplete",
        "flagtree-cpu link   # then rebuild if python/triton/language/extra/cpu was missing during the build",
    ),
    Signature(
        "glibc-version",
        _GLIBC_NOT_FOUND,
        "libtriton (or a JIT-compiled kernel) needs a newer libstdc++/glibc than this system provides",
        "install a newer libstdc++ and preload it: export LD_PRELOAD=/path/to/newer/libstdc++.so.6 "
        "(flagtree-cpu doctor --check runtime.glibc shows which versions are missing)",
    ),
    Signature(
        "prerequisite-missing",
        r"No module named '?(torch|numpy|transformers)'?",
        "a run-time Python package is missing in the target interpreter",
        "flagtree-cpu validate --install-prereqs",
    ),
    Signature(
        "triton-missing",
        r"No module named 'triton'|libtriton[^ ]*\.so: cannot open shared object file|"
        r"No module named '?triton\._C",
        "triton is not built and installed in the target interpreter",
        "flagtree-cpu build   # or pass --python with the interpreter the build installed into",
    ),
)

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


def diagnose_file(log: Path) -> Diagnosis:
    return diagnose(log.read_text(encoding="utf-8", errors="replace"))


def _excerpt(lines: list[str], body: list[int], number: int, context: int) -> tuple[str, ...]:
    where = body.index(number)
    chosen = body[max(0, where - context):where + context + 1]
    return tuple(lines[n] for n in chosen if lines[n].strip() or n == number)


def markdown_table() -> str:
    """The README's build troubleshooting table (`python -m flagtree_cpu_build.diagnose` prints it)."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    rows = ["| failure | what it means | fix |", "|---|---|---|"]
    for s in SIGNATURES:
        fix = s.fix.format(jobs_half="<half the jobs>", log="<log>")
        rows.append(f"| `{s.id}` | {cell(s.cause)} | {cell(fix)} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # pragma: no cover - regenerates the README table
    print(markdown_table(), end="")
