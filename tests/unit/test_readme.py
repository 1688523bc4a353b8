"""The README stays true: its annotated recipe is valid, its commands exist, CI runs its test command."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.recipe.files import load_recipe_file

ROOT = Path(__file__).resolve().parent.parent.parent
README = (ROOT / "README.md").read_text()


def test_the_annotated_example_recipe_is_valid(tmp_path: Path) -> None:
    section = README.split("## The recipe format", 1)[1]
    example = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    (tmp_path / "patches").mkdir()
    (tmp_path / "patches" / "fix-something.patch").write_text("")  # the example names one
    path = tmp_path / "example.yaml"
    path.write_text(example)
    recipe = load_recipe_file(path)
    # every kind of check, variants and env operations are in the example (so the reference shows them)
    assert {c.label for c in recipe.checks} >= {"backend", "vector-add-tutorial", "unit-tests", "imports",
                                                "wheel-is-riscv"}
    assert set(recipe.variants) == {"cuda", "ascend"} and recipe.build.env.unset
    assert recipe.sources["flagtree-cpu"].filter == "blob:none"


def test_ci_runs_the_readme_test_command() -> None:
    assert re.search(r"^make test +# .*the whole test suite", README, re.M)
    assert re.search(r"^make test$", (ROOT / ".ci/run").read_text(), re.M)


def test_every_command_in_the_reference_exists() -> None:
    headings = re.findall(r"^### `([\w ]+?)(?: \[|`)", README, re.M)
    assert {"setup", "status", "recipe list", "sync", "link", "fetch", "build", "validate", "env", "doctor",
            "lock", "clean"} <= set(headings)
    for command in headings:
        assert CliRunner().invoke(app, [*command.split(), "--help"]).exit_code == 0, command


def test_the_build_troubleshooting_table_is_the_diagnosis_table() -> None:
    from flagtree_cpu_build.diagnose import markdown_table

    section = README.split("<!-- diagnosis:start", 1)[1].split("-->", 1)[1].split("<!-- diagnosis:end -->")[0]
    assert section.strip() == markdown_table().strip(), "regenerate it: python -m flagtree_cpu_build.diagnose"


def test_every_doctor_check_is_documented() -> None:
    from flagtree_cpu_build.doctor import all_checks

    for check in all_checks():
        assert f"| `{check.id}` | {check.title} |" in README, check.id
