"""Seeded random damage to the bundled recipe: the loader answers with located problems, nothing else.

A fault campaign found that about one in ten random edits of the bundled recipe ended in
"unexpected TypeError/ConstructorError/RecursionError" (exit 1) instead of a recipe error.
Each mutant here is deterministic (its seed names it), so a failure is reproducible with
``mutant(seed)``.
"""

from __future__ import annotations

import random

import pytest

from flagtree_cpu_build.errors import RecipeError
from flagtree_cpu_build.recipe.files import bundled_dir, parse_recipe, patch_dirs

RECIPE = bundled_dir("recipes") / "flagtree-cpu-arm64.yaml"
TEXT = RECIPE.read_text()
SYNTAX = "[]{}&*!?:|>-#'\""
TAGS = ("!custom ", "!!python/object/apply:os.system ", "!!binary ", "!!set ", "!!int ", "!!timestamp ",
        "!!bool ", "!!map ", "!!str ", "! ")
BOMB = "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10) if i else '1'}]\n" for i in range(7))
SNIPPETS = ("? [a, b]\n: x\n", "? {a: 1}\n: x\n", "<<: 5\n", "x: [[[[[[[[\n", "---\n", "*nowhere\n",
            "y: 2024-99-99\n", "z: 0b2\n", "=: =\n", "deep: " + "[" * 5000 + "]" * 5000 + "\n", BOMB)
SEEDS = range(200)


def _insert_char(text: str, rng: random.Random) -> str:
    at = rng.randrange(len(text) + 1)
    return text[:at] + rng.choice(SYNTAX) + text[at:]


def _delete_chars(text: str, rng: random.Random) -> str:
    at = rng.randrange(len(text))
    return text[:at] + text[at + rng.randint(1, 3):]


def _replace_char(text: str, rng: random.Random) -> str:
    at = rng.randrange(len(text))
    return text[:at] + rng.choice(SYNTAX) + text[at + 1:]


def _on_a_line(change):  # noqa: ANN001, ANN202 - a tiny decorator local to this test
    def mutate(text: str, rng: random.Random) -> str:
        lines = text.splitlines(keepends=True)
        at = rng.randrange(len(lines))
        lines[at:at + 1] = change(lines[at], rng)
        return "".join(lines)
    return mutate


@_on_a_line
def _duplicate_line(line: str, rng: random.Random) -> list[str]:
    return [line, line]


@_on_a_line
def _indent_line(line: str, rng: random.Random) -> list[str]:
    return [" " * rng.choice((1, 2, 4)) + line]


@_on_a_line
def _dedent_line(line: str, rng: random.Random) -> list[str]:
    return [line[min(len(line) - len(line.lstrip(" ")), rng.choice((1, 2, 4))):]]


@_on_a_line
def _insert_snippet(line: str, rng: random.Random) -> list[str]:
    indent = " " * (len(line) - len(line.lstrip(" ")))
    return [line, *(indent + part for part in rng.choice(SNIPPETS).splitlines(keepends=True))]


def _value_starts(text: str) -> list[int]:
    return [i + 1 for i, c in enumerate(text) if c == ":" and text[i + 1:i + 2] in (" ", "\n")]


def _insert_tag(text: str, rng: random.Random) -> str:
    at = rng.choice(_value_starts(text))
    return f"{text[:at]} {rng.choice(TAGS)}{text[at:]}"


def _anchor_and_alias(text: str, rng: random.Random) -> str:
    """An anchor on one value and an alias on a later one — after it, or inside it (recursive)."""
    first, second = sorted(rng.sample(_value_starts(text), 2))
    alias = rng.choice(("*a", "*a\n", "[*a, *a]", "{<<: *a}"))
    return f"{text[:first]} &a{text[first:second]} {alias}{text[second:]}"


MUTATIONS = (_insert_char, _delete_chars, _replace_char, _duplicate_line, _indent_line, _dedent_line,
             _insert_snippet, _insert_tag, _anchor_and_alias)


def mutant(seed: int) -> str:
    rng = random.Random(seed)
    text = TEXT
    for _ in range(rng.randint(1, 3)):
        text = rng.choice(MUTATIONS)(text, rng)
    return text


def test_mutants_are_deterministic_and_differ_from_the_recipe() -> None:
    assert mutant(7) == mutant(7)
    assert sum(mutant(seed) != TEXT for seed in SEEDS) >= 195


def test_every_mutant_loads_or_fails_with_located_problems() -> None:
    dirs = patch_dirs(RECIPE)
    failures, rejected = [], 0
    for seed in SEEDS:
        origin = f"mutant-{seed}.yaml"
        try:
            parse_recipe(mutant(seed), origin, patch_dirs=dirs)
        except RecipeError as exc:
            rejected += 1
            unlocated = [p for p in exc.problems if p.origin != origin or not isinstance(p.line, int) or p.line < 1]
            if unlocated or not exc.problems or not all(p.message for p in exc.problems):
                failures.append(f"seed {seed}: problems without origin:line: {unlocated or exc.problems}")
        except Exception as exc:  # noqa: BLE001 - exactly what this test hunts for
            failures.append(f"seed {seed}: {type(exc).__name__}: {exc}"[:300])
    assert not failures, "\n".join(failures)
    assert rejected >= 100  # the mutations really damage the recipe, most of the time


@pytest.mark.parametrize("seed", [3, 11])
def test_a_mutant_error_names_its_file(seed: int) -> None:
    """Two fixed mutants the loader rejects, as a readable example of the contract above."""
    with pytest.raises(RecipeError) as info:
        parse_recipe(mutant(seed), "m.yaml", patch_dirs=patch_dirs(RECIPE))
    assert all(p.where.startswith("m.yaml:") for p in info.value.problems)
