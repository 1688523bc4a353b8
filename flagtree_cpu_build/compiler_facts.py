"""Which C++ compiler this host builds with, and its version: what a recipe's `when: {compiler: {gcc: "<9.4"}}`
is judged against (triton-ascend's stdc++fs patch is for GCC below 9.4), and what doctor's toolchain.compiler
names.

The compiler is ``$CXX``, else ``c++``, asked ``--version`` once per process (a run opens its context more than
once): the answer is capped and time-limited, as any program's output the tool did not write."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping

_ASKED: dict[tuple[str, int, int], tuple[str, str] | None] = {}


def parse_version_text(text: str) -> tuple[str, str]:
    """(family, version) from a compiler's --version: ("Clang", "15.0.7"), ("GCC", "9.3.1"); version "" when it
    does not say."""
    clang = re.search(r"clang version (\d+(?:\.\d+)*)", text)
    gcc = re.search(r"\) (\d+(?:\.\d+)+)", text.splitlines()[0] if text else "")
    return ("Clang", clang.group(1)) if clang else ("GCC", gcc.group(1) if gcc else "")


def host_compiler(environ: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """("gcc" | "clang", version) of the compiler ``CXX`` (else ``c++``) names; None when there is none or it does
    not say its version."""
    from .proc import capture_bounded

    environ = os.environ if environ is None else environ
    command = environ.get("CXX", "").strip() or "c++"
    path = shutil.which(command, path=environ.get("PATH"))
    if path is None:
        return None
    try:
        stat = os.stat(path)
    except OSError:
        return None
    key = (os.path.realpath(path), stat.st_mtime_ns, stat.st_size)
    if key not in _ASKED:
        try:
            out = capture_bounded([path, "--version"], limit=64 << 10, timeout_s=10).stdout
        except OSError:
            out = ""
        family, version = parse_version_text(out)
        _ASKED[key] = (family.lower(), version) if version else None
    return _ASKED[key]
