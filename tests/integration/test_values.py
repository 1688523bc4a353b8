"""Values computed when a command runs (issue 29, item 5), for real: the target interpreter asked for
{python.version}, {python.tag} and {platform.tag}; env values from a command's output (`env.from_command`);
`{glob:PATTERN}` in env values and check argv."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from tests.support.envelope import error_of, result_of

RECIPE = """\
schema_version: 2
name: values-demo
platform:
  host: {{arch: [x86_64, aarch64, riscv64]}}
sources:
  app:
    url: {url}
    ref: main
    commit: 0123456789abcdef0123456789abcdef01234567
    path: app
build:
  cwd: "{{sources.app.path}}"
  argv: ["{{python}}", -c, "pass"]
  env:
{env}
"""


def write_recipe(tmp_path: Path, env: str) -> Path:
    recipe = tmp_path / "values.yaml"
    recipe.write_text(RECIPE.format(url=(tmp_path / "app.git").as_uri(), env=env))
    return recipe


def fake_python(tmp_path: Path, answer: str, status: int = 0) -> Path:
    """An "interpreter" that answers the tags question with ``answer``: a stand-in for a riscv64 venv."""
    python = tmp_path / "target" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f"#!/bin/sh\nprintf '{answer}'\nexit {status}\n")
    python.chmod(0o755)
    return python


def env_build(recipe: Path, tmp_path: Path, python: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["-r", str(recipe), "-w", str(tmp_path / "ws"), "env", "--build", "--json",
                                    "--python", str(python), *args])


# --- {python.version}, {python.tag}, {platform.tag} ---------------------------------------------------------

TAGS_ENV = """\
    set:
      TRITON_BUILD_DIR: "{sources.app.path}/build/cmake.{platform.tag}-cpython-{python.version}"
      WHEEL_TAG: "{python.tag}"
"""


def test_the_computed_placeholders_are_the_target_interpreters(tmp_path: Path) -> None:
    python = fake_python(tmp_path, "3.9\\ncpython\\nlinux-riscv64\\n")
    result = env_build(write_recipe(tmp_path, TAGS_ENV), tmp_path, python)
    assert result.exit_code == 0, result.stdout
    values = result_of(result.stdout)["set"]
    assert values["TRITON_BUILD_DIR"] == f"{tmp_path}/ws/app/build/cmake.linux-riscv64-cpython-3.9"
    assert values["WHEEL_TAG"] == "cp39"


@pytest.mark.parametrize(("answer", "status", "said"), [
    ("Segmentation fault\\n", 139, "exit status 139, 'Segmentation fault'"),
    ("3.11 on linux\\n", 0, "exit status 0, '3.11 on linux'"),
])
def test_an_interpreter_that_cannot_say_its_tags_is_a_build_error_naming_it(
        tmp_path: Path, answer: str, status: int, said: str) -> None:
    python = fake_python(tmp_path, answer, status)
    result = env_build(write_recipe(tmp_path, TAGS_ENV), tmp_path, python)
    assert result.exit_code == 5, result.stdout
    error = error_of(result.stdout)
    assert error["message"] == (f"{python} did not say its version and platform ({{python.version}}, "
                                f"{{python.tag}}, {{platform.tag}}): {said}")
    assert str(python) in error["fix"]


def test_an_interpreter_that_prints_without_end_is_cut_short(tmp_path: Path) -> None:
    python = fake_python(tmp_path, "")
    python.write_text("#!/bin/sh\nexec yes 3.11\n")
    result = env_build(write_recipe(tmp_path, TAGS_ENV), tmp_path, python)
    assert result.exit_code == 5, result.stdout
    assert error_of(result.stdout)["message"] == (f"{python} did not say its version and platform in three short "
                                                  "lines ({python.version}, {python.tag}, {platform.tag})")


def test_a_recipe_without_them_never_runs_the_interpreter(tmp_path: Path) -> None:
    python = fake_python(tmp_path, "broken\\n", 1)  # asked, it would fail the command
    result = env_build(write_recipe(tmp_path, "    set: {MODE: cpu}\n"), tmp_path, python)
    assert result.exit_code == 0, result.stdout
    assert os.access(python, os.X_OK)


# --- env.from_command -------------------------------------------------------------------------------------------


def tool(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / "tools" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def gone(pid: int, within_s: float = 30.0) -> bool:
    """Whether process ``pid`` has ended (a stopped orphan is reaped by init a moment later)."""
    import time

    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def test_a_commands_output_is_the_value_in_env_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tool(tmp_path, "nvcc", 'echo "Cuda compilation tools, release 12.8, V12.8.61"; echo "noise" >&2')
    monkeypatch.setenv("PATH", f"{tmp_path / 'tools'}:/usr/bin:/bin")
    env = '    from_command:\n      CUDA_VERSION: {argv: [nvcc, --version], regex: "release ([0-9.]+)"}\n'
    result = env_build(write_recipe(tmp_path, env), tmp_path, tmp_path / "venv/bin/python")
    assert result.exit_code == 0, result.stdout
    assert result_of(result.stdout)["set"]["CUDA_VERSION"] == "12.8"


def test_a_hanging_command_is_stopped_with_what_it_started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from flagtree_cpu_build import envreads

    pids = tmp_path / "pids"
    tool(tmp_path, "hangs", f"sleep 600 & echo $! > {pids}; wait")
    monkeypatch.setenv("PATH", f"{tmp_path / 'tools'}:/usr/bin:/bin")
    monkeypatch.setattr(envreads, "COMMAND_TIMEOUT_S", 1.0)
    env = "    from_command:\n      V: {argv: [hangs]}\n"
    result = env_build(write_recipe(tmp_path, env), tmp_path, tmp_path / "venv/bin/python")
    assert result.exit_code == 5, result.stdout
    assert error_of(result.stdout)["message"] == "build.env.from_command.V: `hangs` did not finish within 1 s"
    assert gone(int(pids.read_text()))


def test_endless_output_is_cut_at_the_cap_and_the_command_stopped(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    pids = tmp_path / "pids"
    tool(tmp_path, "chatty", f"echo $$ > {pids}; exec yes 0123456789")
    monkeypatch.setenv("PATH", f"{tmp_path / 'tools'}:/usr/bin:/bin")
    env = "    from_command:\n      V: {argv: [chatty]}\n"
    result = env_build(write_recipe(tmp_path, env), tmp_path, tmp_path / "venv/bin/python")
    assert result.exit_code == 5, result.stdout
    assert "`chatty` printed more than 64 KiB" in error_of(result.stdout)["message"]
    assert gone(int(pids.read_text()))


# --- {glob:PATTERN} in a check's argv ---------------------------------------------------------------------------


def test_a_checks_argv_gets_the_one_match_and_no_match_fails_that_check_by_name(tmp_path: Path) -> None:
    from tests.integration.test_checks import Checks

    checks = Checks(tmp_path)
    (checks.ws / "build/lib.linux-x86_64-cpython-3.11").mkdir(parents=True)
    show = ["{python}", "-c", "import sys; print('got', sys.argv[1])"]
    result = checks.validate([
        {"name": "one-match", "argv": [*show, "{glob:{workdir}/build/lib.*}"], "expect": {"output": "^got /"}},
        {"name": "no-match", "argv": [*show, "{glob:build/*.so}"]},
    ])
    assert result.exit_code == 6, result.stderr
    found = {r.get("check") or r.get("kernel"): r for r in result_of(result.stdout)["results"]}
    assert found["one-match"]["status"] == "pass", found["one-match"]
    log = Path(found["one-match"]["log"]).read_text()
    assert f"got {checks.ws}/build/lib.linux-x86_64-cpython-3.11" in log
    assert found["no-match"]["status"] == "fail"
    assert found["no-match"]["message"] == f"check no-match: argv[3]: {{glob:{checks.ws}/build/*.so}} matches nothing"


def test_a_relative_program_is_the_workdirs_and_a_missing_one_is_named(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    script = ws / "tools" / "version.sh"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\necho 4.2\n")
    script.chmod(0o755)
    env = "    from_command:\n      V: {argv: [tools/version.sh]}\n      W: {argv: [no-such-tool-here, -v]}\n"
    result = env_build(write_recipe(tmp_path, env), tmp_path, tmp_path / "venv/bin/python")
    assert result.exit_code == 5, result.stdout
    message = error_of(result.stdout)["message"]
    assert message.startswith("build.env.from_command.W runs no-such-tool-here, which is not on PATH ("), message
    recipe = write_recipe(tmp_path, "    from_command:\n      V: {argv: [tools/version.sh]}\n")
    result = env_build(recipe, tmp_path, tmp_path / "venv/bin/python")
    assert result.exit_code == 0, result.stdout
    assert result_of(result.stdout)["set"]["V"] == "4.2"
