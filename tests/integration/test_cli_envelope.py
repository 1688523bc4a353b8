"""Every --json run prints exactly one document on stdout: the envelope {schema, version, command, ok, result,
error}, on success, on a failure, on a usage error; `flagtree-cpu schema` publishes its JSON Schema and the
envelopes of real runs validate against it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from tests.support.cli import new_workspace
from tests.support.envelope import envelope_of, error_of, result_of
from tests.support.gitworld import GitWorld


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    published = CliRunner().invoke(app, ["schema"])
    assert published.exit_code == 0, published.stderr
    schema = json.loads(published.stdout)  # without --json: the schema itself, for `> file.json`
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def invoke(*argv: str) -> Result:
    return CliRunner().invoke(app, list(argv))


def valid(result: Result, validator: jsonschema.Draft202012Validator) -> dict:
    document = envelope_of(result.stdout)
    validator.validate(document)
    assert document["ok"] is (result.exit_code == 0)
    if document["error"] is not None:
        assert document["error"]["exit_code"] == result.exit_code
    return document


def test_success_carries_the_result_and_no_error(tmp_path: Path, validator: jsonschema.Draft202012Validator) -> None:
    listed = valid(invoke("recipe", "list", "--json"), validator)
    assert listed["command"] == "recipe list" and listed["error"] is None
    assert any(r["name"] == "flagtree-cpu-arm64" for r in listed["result"]["recipes"])
    shown = valid(invoke("--json", "-w", str(tmp_path / "ws"), "recipe", "show"), validator)
    assert shown["command"] == "recipe show" and shown["result"]["recipe"]["name"] == "flagtree-cpu-arm64"
    env = valid(invoke("-w", str(tmp_path / "ws"), "env", "--json"), validator)
    assert env["result"]["set"]["FLAGTREE_BACKEND"] == "cpu"
    schema = valid(invoke("schema", "--json"), validator)  # with --json the schema is the result, like any other
    assert schema["result"]["properties"]["schema"]["const"] == "flagtree-cpu/envelope/v1"


def test_a_stage_failure_has_code_exit_code_and_fix(world: GitWorld, tmp_path: Path,
                                                    validator: jsonschema.Draft202012Validator) -> None:
    ws = new_workspace(world, tmp_path / "empty")
    result = ws.run("link", "--json")
    assert result.exit_code == 3
    document = valid(result, validator)
    assert document["command"] == "link" and document["result"] is None
    error = document["error"]
    assert error["code"] == "source" and error["exit_code"] == 3
    assert f"flagtree-cpu -w {ws.root} sync" in error["fix"]  # the fix carries the workspace: any folder works
    assert "not checked out" in result.stderr  # people still read it on stderr


def test_a_verdict_carries_the_result_and_the_error(tmp_path: Path, validator: jsonschema.Draft202012Validator) -> None:
    """doctor exit 7: the report is the result, the failed checks the error (stdout: still one document)."""
    result = invoke("doctor", "--json", "--offline", "-w", str(tmp_path / "ws"),
                    "--set", "platform.host.arch=[riscv64]")
    assert result.exit_code == 7
    document = valid(result, validator)
    assert document["result"]["schema"] == "flagtree-cpu/doctor/v1" and document["result"]["ok"] is False
    assert document["error"]["code"] == "doctor" and "host.arch" in document["error"]["message"]


@pytest.mark.parametrize("argv, command, message", [
    (["status", "--bogus", "--json"], "status", "No such option: --bogus"),
    (["nosuch", "--json"], None, "No such command 'nosuch'"),
    (["--json", "build", "--jobs", "0"], "build", "0 is not in the range"),
    (["--json", "env", "--shell", "tcsh"], "env", "--shell 'tcsh' is not supported"),
], ids=["unknown-option", "unknown-command", "bad-value", "bad-combination"])
def test_usage_errors_print_the_envelope_on_stdout(argv: list[str], command: str | None, message: str,
                                                   validator: jsonschema.Draft202012Validator) -> None:
    result = invoke(*argv)
    assert result.exit_code == 2
    document = valid(result, validator)
    assert document["command"] == command and document["result"] is None
    assert document["error"]["code"] == "usage" and message in document["error"]["message"]
    assert document["error"]["fix"]


def test_unexpected_and_interrupted_runs_are_envelopes_too(monkeypatch: pytest.MonkeyPatch,
                                                           validator: jsonschema.Draft202012Validator) -> None:
    from flagtree_cpu_build.recipe import catalog as files  # what `recipe list` calls

    def explode(*args: object) -> None:
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(files, "list_recipes", explode)
    crashed = invoke("recipe", "list", "--json")
    assert crashed.exit_code == 1
    assert valid(crashed, validator)["error"]["code"] == "unexpected" and "boom" in error_of(crashed.stdout)["message"]

    def interrupt(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(files, "list_recipes", interrupt)
    stopped = invoke("recipe", "list", "--json")
    assert stopped.exit_code == 130 and valid(stopped, validator)["error"]["code"] == "interrupted"


def test_help_and_version_print_what_was_asked_and_no_envelope() -> None:
    assert invoke("--json", "--version").stdout.startswith("flagtree-cpu ")
    assert "Usage" in invoke("status", "--help", "--json").stdout
    assert not invoke("status", "--help", "--json").stdout.lstrip().startswith("{")


def test_a_real_process_writes_exactly_one_document(tmp_path: Path) -> None:
    """Through the console entry point: stdout parses as one JSON document, a recipe failure included."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema_version: 1\nname: x\n")
    result = subprocess.run([sys.executable, "-m", "flagtree_cpu_build", "--json", "recipe", "validate",
                             "flagtree-cpu-arm64", str(bad)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    document = envelope_of(result.stdout)  # json.loads refuses a second document after the first
    assert document["error"]["code"] == "recipe" and [r["ok"] for r in result_of(result.stdout)["results"]] == \
        [True, False]
