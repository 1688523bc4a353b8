"""The site's references are the code's: each docs/reference/*.md is what tools/gen_docs.py writes from the Typer
app, the recipe model's field specs, the exit code table and doctor's check list."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


def load_generator():
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "tools" / "gen_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATOR = load_generator()
GENERATED = GENERATOR.generate()


@pytest.mark.parametrize("path", sorted(GENERATED), ids=str)
def test_the_committed_reference_is_what_the_code_generates(path: Path) -> None:
    committed = ROOT / path
    assert committed.is_file(), f"{path} is missing: run `python tools/gen_docs.py` and commit it"
    assert committed.read_text(encoding="utf-8") == GENERATED[path], (
        f"{path} differs from what the code generates: run `python tools/gen_docs.py` and commit it")


def test_every_command_and_option_is_in_the_commands_reference() -> None:
    import typer.main

    from flagtree_cpu_build.cli import app

    text = GENERATED[Path("docs/reference/commands.md")]
    root = typer.main.get_command(app)
    for path, command in GENERATOR._walk(root, ()):
        assert f"## `flagtree-cpu {' '.join(path)}`" in text, path
        for param in command.params:
            if param.param_type_name == "option" and not param.hidden:
                assert f"`{param.opts[0]}" in text, (path, param.opts)


def test_every_exit_code_doctor_check_and_recipe_key_is_listed() -> None:
    from flagtree_cpu_build.doctor import all_checks
    from flagtree_cpu_build.errors import ExitCode
    from flagtree_cpu_build.recipe.model import Recipe
    from flagtree_cpu_build.recipe.schema import public_fields, yaml_key

    codes = GENERATED[Path("docs/reference/exit-codes.md")]
    assert all(f"| {int(c)} | `{c.name}` |" in codes for c in ExitCode)
    checks = GENERATED[Path("docs/reference/doctor-checks.md")]
    assert all(f"| `{c.id}` |" in checks for c in all_checks())
    keys = GENERATED[Path("docs/reference/recipe.md")]
    for cls in GENERATOR._model_classes(Recipe):
        assert all(f"| `{yaml_key(f)}` |" in keys for f in public_fields(cls)), cls


def test_a_stale_reference_is_named_with_the_command_that_regenerates_it(tmp_path: Path) -> None:
    for path, text in GENERATED.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    assert GENERATOR.stale(tmp_path) == []
    edited = tmp_path / "docs/reference/exit-codes.md"
    edited.write_text(edited.read_text().replace("| 8 |", "| 88 |"))
    assert GENERATOR.stale(tmp_path) == [Path("docs/reference/exit-codes.md")]
