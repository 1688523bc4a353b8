"""A capture rule that hashes a source's files (`sha256_of: {glob}`): triton-ascend names its LLVM tarball after the
first 8 hex characters of a sha256 over its sorted `third_party/ascend/llvm_patch/*.patch` files' contents."""

from __future__ import annotations

import hashlib
import os
from typing import Any

import pytest

from tests.integration.test_source_reads import Kit
from tests.integration.test_source_reads import kit as kit  # noqa: F401 (the fixture)

PATCHES = {"third_party/ascend/llvm_patch/b-second.patch": "--- b\n+++ b\n",
           "third_party/ascend/llvm_patch/a-first.patch": "--- a\n+++ a\n",
           "third_party/ascend/llvm_patch/notes.txt": "not a patch\n"}
RULE: dict[str, Any] = {"source": "triton", "sha256_of": {"glob": "third_party/ascend/llvm_patch/*.patch"},
                        "chars": 8, "as": "patchhash"}


def project_digest() -> str:
    """The project's own formula, written out: the .patch files sorted by name, contents concatenated, sha256."""
    names = sorted(n for n in PATCHES if n.endswith(".patch"))
    return hashlib.sha256("".join(PATCHES[n] for n in names).encode()).hexdigest()


def test_an_llvm_named_after_the_digest_of_the_sources_patches_is_fetched_and_the_value_locked(kit: Kit) -> None:
    for rel, text in PATCHES.items():
        kit.checkout(rel, text)
    short = project_digest()[:8]
    kit.serve(f"llvm-{short}.tar.gz")
    kit.write({"url": kit.base + "llvm-{match.patchhash}.tar.gz", "path": "tools/llvm-{match.patchhash}",
               "matches": RULE})
    result = kit.run("fetch")
    assert result.exit_code == 0, result.stderr
    assert (kit.ws / f"tools/llvm-{short}/bin/clang").is_file()
    entry = kit.lock()["reads"]["artifacts.llvm.match.patchhash"]
    assert entry["value"] == short and entry["file"] == "third_party/ascend/llvm_patch/*.patch"


@pytest.mark.parametrize("damage, said", [
    ("none", "matches no file"),
    ("link", "leads outside the checkout"),
    ("fifo", "cannot be read"),
])
def test_patches_that_cannot_be_hashed_stop_fetch_naming_the_glob(kit: Kit, damage: str, said: str) -> None:
    kit.checkout("README", "triton\n")
    folder = kit.ws / "triton/third_party/ascend/llvm_patch"
    folder.mkdir(parents=True)
    if damage == "link":
        (kit.root / "outside.patch").write_text("secret\n")
        (folder / "a.patch").symlink_to(kit.root / "outside.patch")
    elif damage == "fifo":
        os.mkfifo(folder / "a.patch")
    kit.write({"url": kit.base + "llvm-{match}.tar.gz", "path": "tools/llvm-{match}", "matches": RULE})
    result = kit.run("fetch")
    assert result.exit_code == 4, result.output
    text = " ".join(result.stderr.split())
    assert said in text and "third_party/ascend/llvm_patch/*.patch" in text, text


@pytest.mark.parametrize("rule, said", [
    ({"source": "triton", "file": "x", "sha256_of": {"glob": "*.patch"}}, "give `file` or `sha256_of`, not both"),
    ({"source": "triton"}, "give `file` or `sha256_of`"),
    ({**RULE, "regex": "x"}, "sha256_of takes no regex"),
    ({**RULE, "sha256_of": {"glob": "../*.patch"}}, "escapes the source's folder"),
    ({**RULE, "sha256_of": {"globb": "*.patch"}}, "did you mean 'glob'?"),
])
def test_a_sha256_of_rule_that_cannot_work_is_a_located_recipe_problem(kit: Kit, rule: dict[str, Any],
                                                                       said: str) -> None:
    kit.write({"url": kit.base + "llvm-{match}.tar.gz", "path": "tools/llvm-{match}", "matches": rule})
    result = kit.run("recipe", "validate", str(kit.recipe))
    assert result.exit_code == 2 and said in " ".join(result.output.split()), result.output
    assert "artifacts.llvm.matches" in result.output
