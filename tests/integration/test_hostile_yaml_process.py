"""Hostile YAML against the real CLI in a real process: exit 2, no crash, bounded time and memory.

In-process tests cannot show these: 200,000 levels of nesting used to kill the interpreter
with SIGSEGV (a C stack overflow in the YAML composer), and an alias bomb grows memory until
the machine swaps. Here the process runs with its address space capped, so a regression
shows up as a MemoryError or a signal instead of a slow machine.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.corpus import CORPUS

CLI = [sys.executable, "-m", "flagtree_cpu_build"]
ADDRESS_SPACE = 512 << 20  # the CLI validating a recipe needs ~100 MiB; an alias bomb, gigabytes


def cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def run_capped(*args: str) -> subprocess.CompletedProcess:
    """The CLI in a process with a capped address space; 60 s is a bound only a hang reaches (the YAML part
    takes milliseconds: bench_startup times `recipe validate`)."""
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60, preexec_fn=cap_memory)


def assert_clean_usage_error(result: subprocess.CompletedProcess, where: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr[-800:])
    assert where in result.stderr
    assert "fix:" in result.stderr
    assert "Traceback" not in result.stderr and "unexpected" not in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("nested", ["[" * 200_000 + "]" * 200_000, "{a: " * 200_000 + "1" + "}" * 200_000],
                         ids=["lists", "mappings"])
def test_200000_levels_of_nesting_exit_2_instead_of_sigsegv(tmp_path: Path, nested: str) -> None:
    recipe = tmp_path / "deep.yaml"
    recipe.write_text("schema_version: 1\nname: deep\ndeep: " + nested + "\n")
    result = run_capped("recipe", "validate", str(recipe))
    assert_clean_usage_error(result, f"{recipe}:3:")
    assert "nested more than 64 levels deep" in result.stderr


def test_alias_bomb_exits_2_within_a_capped_address_space() -> None:
    recipe = CORPUS / "28-alias-bomb.yaml"
    result = run_capped("recipe", "validate", str(recipe))
    assert_clean_usage_error(result, f"{recipe}:17:")
    assert "alias bomb" in result.stderr


def test_peak_memory_of_the_alias_bomb_is_that_of_a_normal_recipe() -> None:
    def peak_kib(path: Path) -> int:
        probe = ("import resource, sys\nfrom flagtree_cpu_build.cli import main\n"
                 "try:\n    main(['recipe', 'validate', sys.argv[1]])\nexcept SystemExit:\n    pass\n"
                 "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n")
        result = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True,
                                timeout=60, preexec_fn=cap_memory)
        return int(result.stdout.split()[-1])

    normal = peak_kib(CORPUS / "01-unknown-key-typo.yaml")
    bomb = peak_kib(CORPUS / "28-alias-bomb.yaml")
    assert bomb < normal + 16 * 1024, (normal, bomb)


def test_hostile_set_value_is_plain_text_in_a_real_process() -> None:
    deep = "[" * 30_000 + "]" * 30_000  # Linux caps one argument at 128 KiB
    result = run_capped("--set", f"description={deep}", "recipe", "show", "--raw", "--json")
    assert result.returncode == 0, result.stderr[-800:]
    assert deep in result.stdout


def test_hostile_lock_file_through_the_cli(tmp_path: Path) -> None:
    lock = tmp_path / "ws" / ".flagtree-cpu" / "lock.yaml"
    lock.parent.mkdir(parents=True)
    lock.write_text("lock_version: 1\nsources: " + "[" * 200_000 + "]" * 200_000 + "\n")
    result = run_capped("--workdir", str(tmp_path / "ws"), "lock")
    assert_clean_usage_error(result, f"{lock}:2")
    assert f"mv {lock} {lock}.damaged" in result.stderr


def test_a_recipe_with_thousands_of_variants_is_refused_not_validated_once_per_variant(tmp_path: Path) -> None:
    # `recipe validate` checks a recipe as each of its variants, one full load each: 3,000 variants in 120 KB
    # took 11 minutes, and a 1 MiB file holds 25,000.
    lines = ["schema_version: 2", "name: many", "variant: v0", "platform:", "  host: {arch: [x86_64]}", "sources:",
             "  m: {url: https://example.invalid/m.git, ref: main}", "variants:"]
    lines += [f"  v{i}: {{overlay: {{description: d{i}}}}}" for i in range(3_000)]
    recipe = tmp_path / "many.yaml"
    recipe.write_text("\n".join(lines) + "\n")
    result = run_capped("recipe", "validate", str(recipe))
    assert_clean_usage_error(result, f"{recipe}:8: variants:")
    assert "3000 variants; a recipe has at most 32" in result.stderr
