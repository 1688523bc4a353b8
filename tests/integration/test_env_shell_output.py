"""`eval "$(flagtree-cpu env)"` runs what the tool prints in the user's shell, so every line of it is an attack
surface: an inherited variable's *name* can hold `;`, `$(...)`, spaces or a newline (any byte but `=` and NUL —
set here with `env` in a real process), and values hold whatever the recipe or the inherited environment gave.

Real processes end to end: the tool runs with the hostile environment, and a real `sh` / `bash` evaluates its
output; the only effect may be the variables it names being set to exactly their values.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "flagtree_cpu_build"]
HOSTILE_NAMES = [
    "EVIL_X;touch {canary}-semicolon;",
    "EVIL_$(touch {canary}-substitution)",
    "EVIL_`touch {canary}-backtick`",
    "EVIL_a b;touch {canary}-space",
    "EVIL_\ntouch {canary}-newline\n",
    "EVIL_é",
]
HOSTILE_VALUES = {
    "QUOTES": "it's \"quoted\" and 'again'",
    "SUBST": "$(touch {canary}-in-value) `touch {canary}-tick` $HOME",
    "NEWLINES": "line one\nline two\n\n",
    "BACKSLASH": "a\\b\\\\c\\n\\'",
    "SPACES": "  leading and trailing  ",
    "GLOB": "* ? [a-z]",
}

RECIPE = """\
schema_version: 2
name: env-hostile
platform:
  host: {{arch: [x86_64, aarch64, riscv64]}}
sources:
  main: {{url: https://example.invalid/main.git, commit: 0123456789abcdef0123456789abcdef01234567}}
build:
  cwd: "{{{{workdir}}}}"
  argv: [python, -c, pass]
  env:
    unset: ["EVIL_*"]
    set: {{BUILD_MODE: cpu}}
runtime:
  env:
    unset: ["EVIL_*"]
    set: {sets}
    prepend: {{INHERITED_PATH: [/opt/front]}}
"""


def recipe(tmp_path: Path) -> Path:
    path = tmp_path / "env-hostile.yaml"
    path.write_text(RECIPE.format(sets=json.dumps(values(tmp_path))))
    return path


def values(tmp_path: Path) -> dict[str, str]:
    return {name: value.replace("{canary}", str(tmp_path / "ran")) for name, value in HOSTILE_VALUES.items()}


def hostile_env(tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "EVIL_PLAIN": "dropped"}
    env.update({name.format(canary=tmp_path / "ran"): "1" for name in HOSTILE_NAMES})
    env["INHERITED_PATH"] = f"/usr/x:$(touch {tmp_path / 'ran'}-inherited)\n'q'"
    return env


def env_output(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([*CLI, "--recipe", str(recipe(tmp_path)), "-w", str(tmp_path / "ws"), "env", *args],
                            capture_output=True, text=True, timeout=120, env=hostile_env(tmp_path))
    assert result.returncode == 0, result.stderr[-1500:]
    return result


def evaluated(tmp_path: Path, shell: str, output: str, show: str) -> str:
    """What ``show`` prints after ``shell`` evaluated ``output`` (in the same hostile environment)."""
    script = tmp_path / "output.txt"
    script.write_text(output)
    run = subprocess.run([shell, "-c", f'eval "$(cat "$1")"; {show}', shell, str(script)], capture_output=True,
                         text=True, timeout=60, cwd=tmp_path, env=hostile_env(tmp_path))
    assert run.returncode == 0, (run.stderr, output)
    return run.stdout


def nothing_ran(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("ran"))


@pytest.mark.parametrize("args", [(), ("--build",), ("--shell", "fish"), ("--build", "--shell", "zsh")],
                         ids=["runtime", "build", "fish", "build-zsh"])
def test_a_name_that_is_not_a_shell_name_is_never_printed_and_is_named_on_stderr(tmp_path: Path,
                                                                                 args: tuple[str, ...]) -> None:
    result = env_output(tmp_path, *args)
    assert "EVIL_PLAIN" in result.stdout  # a valid name the glob matched is still unset
    for name in HOSTILE_NAMES:
        assert name.format(canary=tmp_path / "ran") not in result.stdout
    for line in result.stdout.splitlines():
        if line.startswith(("unset ", "set -e ")):
            name = line.split()[-1].rstrip(";")
            assert name.isidentifier() and name.isascii(), line
    assert result.stderr.count("is not a name a shell can set; left out of the output") == len(HOSTILE_NAMES)
    assert repr(HOSTILE_NAMES[4].format(canary=tmp_path / "ran")) in result.stderr  # named, newline and all


@pytest.mark.parametrize("shell", ["sh", "bash"])
@pytest.mark.parametrize("args", [(), ("--build",)], ids=["runtime", "build"])
def test_evaluating_the_output_runs_nothing_the_names_carry(tmp_path: Path, shell: str,
                                                            args: tuple[str, ...]) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"no {shell} here")
    output = env_output(tmp_path, *args).stdout
    assert evaluated(tmp_path, shell, output, 'printf %s "${EVIL_PLAIN-gone}"') == "gone"
    assert nothing_ran(tmp_path) == []


@pytest.mark.parametrize("shell", ["sh", "bash"])
@pytest.mark.parametrize("name", [*HOSTILE_VALUES, "INHERITED_PATH"])
def test_evaluating_the_output_sets_exactly_each_value(tmp_path: Path, shell: str, name: str) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"no {shell} here")
    output = env_output(tmp_path).stdout
    expected = values(tmp_path).get(name) or "/opt/front:" + hostile_env(tmp_path)["INHERITED_PATH"]
    assert evaluated(tmp_path, shell, output, f'printenv {name}; printf "<end>"') == expected + "\n<end>"
    assert nothing_ran(tmp_path) == []


def test_the_output_runs_nothing_where_a_hash_does_not_start_a_comment(tmp_path: Path) -> None:
    """An interactive zsh reads `#` as a comment only with INTERACTIVE_COMMENTS set, which is off by default; an
    interactive bash with interactive_comments off does the same. What a recipe names (a sourced script's path)
    must not reach the output as a comment that such a shell would run."""
    vendor = tmp_path / "vendor;touch ran-note;"  # the shell runs in tmp_path
    vendor.mkdir()
    (vendor / "set_env.sh").write_text("export VENDOR_ON=1\n")
    path = recipe(tmp_path)
    path.write_text(path.read_text() + f"    source: [{json.dumps(str(vendor / 'set_env.sh'))}]\n")
    result = subprocess.run([*CLI, "--recipe", str(path), "-w", str(tmp_path / "ws"), "env"], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-1500:]
    script = tmp_path / "output.txt"
    script.write_text(result.stdout)
    shell = subprocess.run(["bash", "--norc", "--noprofile", "-i", "-c",
                            f'shopt -u interactive_comments; eval "$(cat {script})"; printf %s "$VENDOR_ON"'],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert shell.stdout.endswith("1"), shell.stderr
    assert nothing_ran(tmp_path) == [], result.stdout
    assert f"from {vendor / 'set_env.sh'} (runtime.env.source[0]): 1 variable changed" in result.stderr
