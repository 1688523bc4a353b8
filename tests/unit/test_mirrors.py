"""Mirror rules: PREFIX=REPLACEMENT, in order, then the original."""

from __future__ import annotations

import pytest

from flagtree_cpu_build.errors import UsageError
from flagtree_cpu_build.mirrors import candidate_urls, parse_mirrors

URL = "https://oaitriton.blob.core.windows.net/public/llvm-builds/llvm-a66376b0-ubuntu-arm64.tar.gz"


def test_rules_apply_in_order_and_the_original_comes_last() -> None:
    rules = parse_mirrors(["https://oaitriton.blob.core.windows.net/public/=https://mirror.a/triton/",
                           "https://oaitriton.blob.core.windows.net/=file:///srv/mirror/"],
                          environ={"FLAGTREE_CPU_MIRRORS": "https://other.example/=/never/"})
    assert candidate_urls(URL, rules) == [
        "https://mirror.a/triton/llvm-builds/llvm-a66376b0-ubuntu-arm64.tar.gz",
        "file:///srv/mirror/public/llvm-builds/llvm-a66376b0-ubuntu-arm64.tar.gz",
        URL,
    ]


def test_environment_rules_follow_command_line_rules() -> None:
    rules = parse_mirrors(["https://oaitriton.blob.core.windows.net/=/a/"],
                          environ={"FLAGTREE_CPU_MIRRORS": "https://oaitriton.blob.core.windows.net/=/b/ x=/c/"})
    assert [r.replacement for r in rules] == ["/a/", "/b/", "/c/"]
    assert candidate_urls(URL, rules)[:2] == ["/a/public/llvm-builds/llvm-a66376b0-ubuntu-arm64.tar.gz",
                                              "/b/public/llvm-builds/llvm-a66376b0-ubuntu-arm64.tar.gz"]


def test_duplicates_are_tried_once() -> None:
    rules = parse_mirrors(["https://oaitriton.blob.core.windows.net/=https://oaitriton.blob.core.windows.net/"],
                          environ={})
    assert candidate_urls(URL, rules) == [URL]


@pytest.mark.parametrize("rule", ["no-equals-sign", "=https://x/", "https://x/="])
def test_malformed_rules_are_usage_errors(rule: str) -> None:
    with pytest.raises(UsageError, match="PREFIX=REPLACEMENT"):
        parse_mirrors([rule], environ={})
