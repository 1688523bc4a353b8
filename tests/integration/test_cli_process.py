"""The real CLI in a real process: exit codes, streams, no tracebacks, fast imports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.support.corpus import corpus_cases
from tests.support.envelope import result_of

CLI = [sys.executable, "-m", "flagtree_cpu_build"]


def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)


def test_console_script_and_module_agree(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "flagtree-cpu"
    by_script = subprocess.run([str(script), "--version"], capture_output=True, text=True, cwd=tmp_path)
    by_module = run("--version", cwd=tmp_path)
    assert by_script.returncode == by_module.returncode == 0
    assert by_script.stdout == by_module.stdout
    assert by_module.stdout.startswith("flagtree-cpu ")


def test_whole_corpus_in_one_run_exit_2_no_traceback() -> None:
    cases = corpus_cases()
    result = run("recipe", "validate", *(str(c.path) for c in cases))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    for case in cases:
        assert f"{case.path}:{case.line}:" in result.stderr, case.id
        for fragment in case.expect:
            assert fragment in result.stderr, (case.id, fragment)
    assert result.stdout == ""


def test_a_folder_given_as_recipe_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "dir.yaml").mkdir()
    result = run("recipe", "show", str(tmp_path / "dir.yaml"))
    assert result.returncode == 2
    assert "cannot read recipe" in result.stderr
    assert "Traceback" not in result.stderr


def test_no_colour_codes_when_not_a_terminal() -> None:
    result = run("recipe", "validate", "--all")
    assert result.returncode == 0
    assert "\x1b[" not in result.stderr + result.stdout


def test_json_output_is_clean_json_on_stdout() -> None:
    result = run("recipe", "show", "--json")
    document = result_of(result.stdout)
    assert document["recipe"]["name"] == "flagtree-cpu-arm64"
    assert "note: the bundled recipe leaves" in result.stderr  # notes and warnings stay on stderr


HEAVY = ("git", "requests", "filelock", "urllib3")
PROBE = (
    "import sys\n"
    "from flagtree_cpu_build.cli import main\n"
    "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
    f"print('HEAVY=' + ','.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)\n"
)


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["recipe", "validate"], ["recipe", "show"],
                                  ["recipe", "list"], ["recipe", "schema"]])
def test_commands_of_this_release_import_no_heavy_modules(argv: list[str]) -> None:
    result = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True)
    assert "HEAVY=\n" in result.stderr, result.stderr[-500:]


def test_recipes_from_the_environment_variable(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text((REPO_ROOT / "tests/fixtures/recipes/valid/minimal.yaml").read_text())
    env = {**os.environ, "FLAGTREE_CPU_RECIPES": str(tmp_path)}
    result = run("--json", "recipe", "list", env=env)
    names = {r["name"]: r["origin"] for r in result_of(result.stdout)["recipes"]}
    assert names["mine"] == "user" and names["flagtree-cpu-arm64"] == "bundled"
