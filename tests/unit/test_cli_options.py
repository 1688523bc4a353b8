"""Global options are parsed once, wherever they are written; output goes where it should."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from flagtree_cpu_build import __version__
from flagtree_cpu_build.cli import app, hoist_global_options
from tests.support.envelope import error_of, result_of


@pytest.mark.parametrize("argv, expected", [
    (["recipe", "list", "--json"], ["--json", "recipe", "list"]),
    (["recipe", "show", "x", "--set", "a=b", "-v"], ["--set", "a=b", "-v", "recipe", "show", "x"]),
    (["--workdir", "/w", "recipe", "show", "--raw"], ["--workdir", "/w", "recipe", "show", "--raw"]),
    (["recipe", "validate", "--recipe=r.yaml", "f.yaml"], ["--recipe=r.yaml", "recipe", "validate", "f.yaml"]),
    (["recipe", "show", "--", "--json"], ["recipe", "show", "--", "--json"]),
    (["recipe", "show", "--set"], ["recipe", "show", "--set"]),  # missing value: left for the parser
])
def test_hoisting(argv: list[str], expected: list[str]) -> None:
    assert hoist_global_options(argv) == expected


def test_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"flagtree-cpu {__version__}"


def test_json_after_the_command_is_honoured() -> None:
    result = CliRunner().invoke(app, ["recipe", "list", "--json"])
    assert result.exit_code == 0, result.stderr
    names = [r["name"] for r in result_of(result.stdout)["recipes"]]
    assert "flagtree-cpu-arm64" in names


def test_every_command_has_help_with_examples() -> None:
    for argv in (["--help"], ["recipe", "--help"], ["recipe", "list", "--help"], ["recipe", "show", "--help"],
                 ["recipe", "validate", "--help"], ["recipe", "schema", "--help"]):
        result = CliRunner().invoke(app, argv)
        assert result.exit_code == 0, argv
        if argv != ["recipe", "--help"]:
            assert "Examples" in result.stdout and "flagtree-cpu " in result.stdout, argv


def test_unknown_command_is_a_usage_error() -> None:
    result = CliRunner().invoke(app, ["recipes"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_json_error_document_on_stdout_human_text_on_stderr(tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema_version: 1\nname: x\nplatform: {arch: [aarch64]}\nsources: {a: {url: nope, ref: m}}\n")
    result = CliRunner().invoke(app, ["recipe", "show", str(bad), "--json"])
    assert result.exit_code == 2
    error = error_of(result.stdout)
    assert error["code"] == "recipe" and error["exit_code"] == 2
    assert error["problems"][0]["key"] == "sources.a.url"
    assert error["problems"][0]["line"] == 4
    assert "error: recipe" in result.stderr


def test_validate_json_reports_each_file(tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema_version: 3\n")
    result = CliRunner().invoke(app, ["--json", "recipe", "validate", "flagtree-cpu-arm64", str(bad)])
    assert result.exit_code == 2
    document = result_of(result.stdout)
    assert error_of(result.stdout)["code"] == "recipe"
    assert [r["ok"] for r in document["results"]] == [True, False]
    assert document["results"][0]["warnings"][0]["key"] == "sources.flagtree-cpu"


def test_unexpected_errors_have_no_traceback_unless_verbose(monkeypatch) -> None:
    from flagtree_cpu_build.recipe import catalog as recipe  # what `recipe list` calls

    def explode(*args, **kwargs):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(recipe, "list_recipes", explode)
    quiet = CliRunner().invoke(app, ["recipe", "list"])
    assert quiet.exit_code == 1
    assert "unexpected ZeroDivisionError: boom" in quiet.stderr
    assert "Traceback" not in quiet.stderr and "--verbose" in quiet.stderr
    loud = CliRunner().invoke(app, ["recipe", "list", "--verbose"])
    assert loud.exit_code == 1
    assert "Traceback" in loud.stderr


def test_keyboard_interrupt_exits_130(monkeypatch) -> None:
    from flagtree_cpu_build.recipe import catalog as recipe  # what `recipe list` calls

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(recipe, "list_recipes", interrupt)
    result = CliRunner().invoke(app, ["recipe", "list"])
    assert result.exit_code == 130
    assert "interrupted" in result.stderr


def test_list_shows_a_broken_user_recipe_as_invalid_instead_of_failing(tmp_path) -> None:
    (tmp_path / "broken.yaml").write_text("schema_version: 1\nname: broken\n")
    result = CliRunner().invoke(app, ["--json", "recipe", "list", "--recipes-dir", str(tmp_path)])
    assert result.exit_code == 0, result.stderr
    [entry] = [r for r in result_of(result.stdout)["recipes"] if r["name"] == "broken"]
    assert entry["status"] == "invalid (2 problems)"
    assert {p["message"] for p in entry["problems"]} == {"missing required key 'platform'",
                                                         "missing required key 'sources'"}


@pytest.mark.parametrize("argv, fragment", [
    (["sync", "--source-path", "flagtree-cpux=/tmp/x"], "the recipe has no source named 'flagtree-cpux'"),
    (["sync", "--source-path", "/tmp/x"], "must look like NAME=PATH"),  # two sources: the name is needed
    (["fetch", "--from", "clang=/tmp/x.tgz"], "the recipe has no artifact named 'clang'"),
])
def test_named_path_options_are_checked_against_the_recipe(argv: list[str], fragment: str) -> None:
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2
    assert fragment in result.stderr
