"""Reading the commands the tool prints: every one carries the run's context (`-w WS`, `--recipe`, `--variant`,
`--lock-file`; flagtree_cpu_build.invocation), which a test about *which* command is named takes out again."""

from __future__ import annotations

import re

_CONTEXT = re.compile(r"flagtree-cpu -w \S+(?: --recipe \S+)?(?: --variant \S+)?(?: --lock-file \S+)?")


def without_context(text: str) -> str:
    """``text`` with its whitespace joined and each printed command's context options taken out."""
    return _CONTEXT.sub("flagtree-cpu", " ".join(text.split()))
