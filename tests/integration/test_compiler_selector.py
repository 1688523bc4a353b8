"""A `when: {compiler: {gcc: "<9.4"}}` condition: the C++ compiler's version (CXX, else c++), asked once per run and
only of a recipe that uses it. triton-ascend's stdc++fs patch is for GCC below 9.4."""

from __future__ import annotations

import json
import os
from pathlib import Path

from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from tests.integration.test_source_reads import HOST, Kit, make_repo
from tests.integration.test_source_reads import kit as kit  # noqa: F401 (the fixture)

PATCH = "--- a/core.c\n+++ b/core.c\n@@ -1 +1 @@\n-int answer = 41;\n+int answer = 42;\n"


def fake_gcc(root: Path, version: str) -> tuple[Path, Path]:
    """A `g++` that says its version and counts how often it was asked."""
    calls = root / f"calls-{version}"
    script = root / f"g++-{version}"
    script.write_text(f"#!/bin/sh\necho x >> '{calls}'\necho 'g++ (GCC) {version} 20210728 (Red Hat {version}-1)'\n"
                      "echo 'Copyright (C) 2021 Free Software Foundation, Inc.'\n")
    script.chmod(0o755)
    return script, calls


def write(kit: Kit, url: str, when: dict | None) -> None:
    patch = {"file": "patches/fs.patch", "from": "triton", **({"when": when} if when else {})}
    data = {"schema_version": 2, "name": "compiler-when", "platform": {"host": {"arch": [HOST]}},
            "sources": {"triton": {"url": url, "ref": "main", "patches": [patch]}}}
    kit.recipe.write_text(json.dumps(data, indent=1))


def run(kit: Kit, cxx: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["-w", str(kit.ws), "--recipe", str(kit.recipe), *args],
                              env={"CXX": str(cxx), "PATH": os.environ["PATH"]})


def test_a_patch_for_old_gcc_applies_with_gcc_9_3_and_not_with_11_asking_the_compiler_once(kit: Kit) -> None:
    url, _work, _env = make_repo(kit.root / "repo", {"core.c": "int answer = 41;\n", "patches/fs.patch": PATCH})
    core = kit.ws / "triton" / "core.c"
    old, old_calls = fake_gcc(kit.root, "9.3.1")
    new, new_calls = fake_gcc(kit.root, "11.2.1")
    write(kit, url, {"compiler": {"gcc": "<9.4"}})
    result = run(kit, old, "sync")
    assert result.exit_code == 0, result.output
    assert core.read_text() == "int answer = 42;\n"
    assert len(old_calls.read_text().splitlines()) == 1  # once per run
    result = run(kit, new, "sync")
    assert result.exit_code == 0, result.output
    assert core.read_text() == "int answer = 41;\n"  # taken back: GCC 11 does not need it
    assert "not applied: its `when` does not hold here" in " ".join(result.output.split())


def test_a_recipe_without_a_compiler_condition_never_asks_the_compiler(kit: Kit) -> None:
    url, _work, _env = make_repo(kit.root / "repo", {"core.c": "int answer = 41;\n", "patches/fs.patch": PATCH})
    cxx, calls = fake_gcc(kit.root, "9.3.1")
    write(kit, url, None)
    assert run(kit, cxx, "sync").exit_code == 0
    assert not calls.exists()


def test_a_compiler_condition_naming_an_unknown_family_or_a_bad_range_is_a_located_recipe_problem(kit: Kit) -> None:
    write(kit, "https://example.invalid/t.git", {"compiler": {"gc": "<9.4", "clang": "=<15"}})
    result = kit.run("recipe", "validate", str(kit.recipe))
    assert result.exit_code == 2, result.output
    assert "sources.triton.patches[0].when.compiler.gc" in result.output and "did you mean 'gcc'?" in result.output
    assert "sources.triton.patches[0].when.compiler.clang" in result.output
