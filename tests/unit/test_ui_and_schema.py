"""Output conventions and the JSON Schema."""

from __future__ import annotations

import io
import json

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.errors import RecipeError, RecipeProblem
from flagtree_cpu_build.recipe.files import bundled_dir
from flagtree_cpu_build.recipe.json_schema import recipe_json_schema
from flagtree_cpu_build.ui import UI


def test_plain_output_when_not_a_terminal_and_markup_is_not_interpreted() -> None:
    err, out = io.StringIO(), io.StringIO()
    ui = UI(stderr=err, stdout=out)
    ui.warn("arch [aarch64] is [bold]required[/bold]")
    ui.table(["a", "b"], [["[x]", "y"]])
    text = err.getvalue()
    assert "\x1b[" not in text  # no colour codes in logs
    assert "arch [aarch64] is [bold]required[/bold]" in text
    assert "[x]" in text
    assert out.getvalue() == ""


def test_errors_in_json_mode_go_to_stderr_and_leave_stdout_to_the_envelope() -> None:
    err, out = io.StringIO(), io.StringIO()
    error = RecipeError("r.yaml", [RecipeProblem("r.yaml", 3, "name", "bad name", "rename it")])
    UI(json_mode=True, stderr=err, stdout=out).error(error)
    assert "r.yaml:3: name: bad name" in err.getvalue()
    assert out.getvalue() == ""  # the CLI's error boundary prints the one --json document
    assert error.to_json()["code"] == "recipe" and error.to_json()["problems"][0]["fix"] == "rename it"


def test_quiet_hides_info_but_not_warnings() -> None:
    err = io.StringIO()
    ui = UI(quiet=True, stderr=err, stdout=io.StringIO())
    ui.info("chatter")
    ui.success("done")
    ui.warn("careful")
    assert err.getvalue().strip() == "warning: careful"


@pytest.fixture(scope="module")
def schema() -> dict:
    result = CliRunner().invoke(app, ["recipe", "schema"])
    assert result.exit_code == 0
    return json.loads(result.stdout)


def test_schema_is_valid_json_schema_and_accepts_the_bundled_recipe(schema: dict) -> None:
    jsonschema.Draft202012Validator.check_schema(schema)
    for path in bundled_dir("recipes").glob("*.yaml"):
        jsonschema.Draft202012Validator(schema).validate(yaml.safe_load(path.read_text()))


# Which invalid fixtures the schema refuses (all but the listed loader-only rules): test_schema_agreement.py.


def test_schema_documents_keys_for_editors(schema: dict) -> None:
    source = schema["$defs"]["Source"]["properties"]
    assert "pinned commit" in source["commit"]["description"]
    check = schema["$defs"]["Check"]["properties"]
    assert check["import"]["anyOf"][0]["$ref"].endswith("ImportCheck")  # YAML keys, not attribute names
    assert check["with"] == {"description": "the preset's parameters", "type": "object", "additionalProperties": {}}
    assert schema["properties"]["schema_version"]["enum"] == [1, 2, 3]
    assert "describes version 3" in schema["description"]
    assert schema["title"].endswith("(schema version 3)")


def test_schema_describes_the_v2_shapes(schema: dict) -> None:
    defs = schema["$defs"]
    strings = {"type": "array", "items": {"type": "string"}}
    assert {k: v for k, v in defs["Step"]["properties"]["run"].items() if k != "description"} == {
        "type": "array", "items": strings}
    assert defs["EnvOps"]["properties"]["prepend"]["additionalProperties"] == strings
    assert defs["Variant"]["properties"]["overlay"]["type"] == "object"
    assert defs["Variant"]["properties"]["overlay"]["additionalProperties"] == {}
    # an optional field's extra keywords apply to its value, not to its null
    arch = defs["TargetPlatform"]["properties"]["arch"]
    assert arch["anyOf"][0]["enum"][0] == "aarch64" and arch["anyOf"][1] == {"type": "null"}
    validator = jsonschema.Draft202012Validator(schema)
    overlaid = {"schema_version": 2, "name": "x", "platform": {"host": {"arch": ["x86_64"]}, "target": {"arch": None}},
                "sources": {}, "variant": "a",
                "variants": {"a": {"overlay": {"build": None, "anything": [1, {"goes": True}]}}},
                "steps": [{"name": "s", "phase": "pre-build", "cwd": "{workdir}",
                           "run": [["make"], ["make", "install"]]}],
                "checks": [{"uses": "flagtree/vector-add", "with": {"size": 8}}]}
    assert not list(validator.iter_errors(overlaid))
    assert list(validator.iter_errors({**overlaid, "steps": [{**overlaid["steps"][0], "run": ["make"]}]}))


def test_recipe_json_schema_is_deterministic() -> None:
    assert json.dumps(recipe_json_schema()) == json.dumps(recipe_json_schema())


def test_show_resolves_and_raw_does_not(tmp_path) -> None:
    # FlagTree's checkout as sync leaves it: the LLVM's hash is read from its cmake/llvm-hash.txt
    (tmp_path / "FlagTree" / "cmake").mkdir(parents=True)
    (tmp_path / "FlagTree" / "cmake" / "llvm-hash.txt").write_text("a66376b0dc3b2ea8a84fda26faca287980986f78\n")
    resolved = CliRunner().invoke(app, ["--workdir", str(tmp_path), "recipe", "show"])
    assert resolved.exit_code == 0, resolved.stderr
    data = yaml.safe_load(resolved.stdout)
    assert data["build"]["cwd"] == str(tmp_path / "FlagTree")
    assert "{" not in data["build"]["env"]["set"]["LLVM_SYSPATH"]
    assert data["build"]["env"]["set"]["LLVM_SYSPATH"].endswith("/llvm-a66376b0-ubuntu-arm64")
    raw = CliRunner().invoke(app, ["recipe", "show", "--raw"])
    assert yaml.safe_load(raw.stdout)["build"]["cwd"] == "{sources.flagtree.path}"
    assert "# digest: sha256:" in raw.stdout
