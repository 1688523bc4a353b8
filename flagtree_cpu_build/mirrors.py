"""URL rewriting for restricted networks: ``PREFIX=REPLACEMENT`` rules, tried in order.

``--mirror https://oaitriton.blob.core.windows.net/=https://mirror.corp/llvm/`` turns a
recipe URL into candidate URLs: every matching rule's rewrite, in the order given, then
the original. A replacement may be a ``file://`` URL or a plain folder path. Rules come
from the command line and from ``FLAGTREE_CPU_MIRRORS`` (whitespace-separated).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .errors import UsageError

MIRRORS_ENV = "FLAGTREE_CPU_MIRRORS"


@dataclass(frozen=True)
class MirrorRule:
    prefix: str
    replacement: str

    def rewrite(self, url: str) -> str | None:
        return self.replacement + url[len(self.prefix):] if url.startswith(self.prefix) else None


def parse_mirrors(cli_rules: Sequence[str] = (), environ: Mapping[str, str] | None = None) -> list[MirrorRule]:
    env = os.environ if environ is None else environ
    rules = []
    for text in [*cli_rules, *env.get(MIRRORS_ENV, "").split()]:
        prefix, sep, replacement = text.partition("=")
        if not sep or not prefix or not replacement:
            raise UsageError(f"mirror rule {text!r} must look like PREFIX=REPLACEMENT",
                             fix="e.g. --mirror https://oaitriton.blob.core.windows.net/=https://mirror.example/triton/")
        rules.append(MirrorRule(prefix, replacement))
    return rules


def candidate_urls(url: str, rules: Sequence[MirrorRule]) -> list[str]:
    """The rewritten URLs in rule order, then the original; duplicates removed."""
    candidates = [rewritten for rule in rules if (rewritten := rule.rewrite(url))]
    candidates.append(url)
    return list(dict.fromkeys(candidates))
