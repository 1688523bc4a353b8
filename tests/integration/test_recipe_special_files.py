"""A FIFO, a socket or a device where a recipe belongs — in a recipes folder, given by path, named by `extends` or
by a recipe's `from_file` — against the real CLI in real processes.

Reading a FIFO nobody writes waits forever, so these tests run the tool as a process with a timeout only a hang
reaches: a special file is skipped with a warning naming it when it sits in a folder of recipes, and is exit 2
naming it when a command is pointed at it. /dev/zero behind a symlink never ends either; it must be refused, not
read.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "flagtree_cpu_build"]
HANG = 60  # seconds: a run here takes about one; only a process blocked on a FIFO gets this far

RECIPE = """\
schema_version: 2
name: {name}
platform:
  host: {{arch: [x86_64, aarch64, riscv64]}}
sources:
  main: {{url: https://example.invalid/main.git, commit: 0123456789abcdef0123456789abcdef01234567}}
"""


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=HANG,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)


def make_fifo(path: Path) -> None:
    os.mkfifo(path)


def make_socket(path: Path) -> None:
    here = Path.cwd()
    os.chdir(path.parent)  # a Unix socket's path is limited to 108 bytes; pytest's folders can be longer
    try:
        with socket.socket(socket.AF_UNIX) as server:
            server.bind(path.name)  # the socket file stays after close
    finally:
        os.chdir(here)


def link_to_dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def link_to_a_fifo(path: Path) -> None:
    os.mkfifo(path.with_name("the-fifo"))
    path.symlink_to(path.with_name("the-fifo"))


SPECIALS: dict[str, Callable[[Path], None]] = {
    "fifo": make_fifo, "socket": make_socket, "symlink-to-dev-zero": link_to_dev_zero,
    "symlink-to-fifo": link_to_a_fifo,
}
KINDS = {"fifo": "a FIFO", "socket": "a socket", "symlink-to-dev-zero": "a character device",
         "symlink-to-fifo": "a FIFO"}


@pytest.fixture(params=sorted(SPECIALS))
def folder(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, Path, str]:
    """A folder of recipes: good.yaml, and odd.yaml, a special file of the kind the test is run for."""
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "good.yaml").write_text(RECIPE.format(name="good"))
    odd = recipes / "odd.yaml"
    SPECIALS[request.param](odd)
    return recipes, odd, KINDS[request.param]


def assert_skipped_with_a_warning(result: subprocess.CompletedProcess[str], odd: Path, kind: str) -> None:
    assert f"warning: skipped {odd}" in result.stderr, result.stderr[-1500:]
    assert kind in result.stderr
    assert "Traceback" not in result.stderr


def test_recipe_list_skips_a_special_file_with_a_warning_naming_it(folder: tuple[Path, Path, str]) -> None:
    recipes, odd, kind = folder
    result = run("--recipes-dir", str(recipes), "recipe", "list", "--json")
    assert result.returncode == 0, result.stderr[-1500:]
    listing = json.loads(result.stdout)["result"]
    names = {entry["name"]: entry for entry in listing["recipes"]}
    assert names["good"]["status"] == "valid" and "odd" not in names
    assert listing["skipped"] == [{"file": str(odd), "why": listing["skipped"][0]["why"]}]
    assert kind in listing["skipped"][0]["why"]
    assert_skipped_with_a_warning(result, odd, kind)


def test_recipe_validate_all_skips_a_special_file_with_a_warning_naming_it(folder: tuple[Path, Path, str]) -> None:
    recipes, odd, kind = folder
    result = run("recipe", "validate", "--all", env={"FLAGTREE_CPU_RECIPES": str(recipes)})
    assert result.returncode == 0, result.stderr[-1500:]
    assert f"{recipes / 'good.yaml'}: recipe good is valid" in result.stderr
    assert_skipped_with_a_warning(result, odd, kind)


@pytest.mark.parametrize("command", [("recipe", "show", "--raw"), ("recipe", "validate", "odd")],
                         ids=["recipe-show", "recipe-validate"])
def test_naming_a_recipe_that_is_a_special_file_is_exit_2_naming_it(folder: tuple[Path, Path, str],
                                                                    command: tuple[str, ...]) -> None:
    recipes, odd, kind = folder
    result = run("--recipes-dir", str(recipes), "--recipe", "odd", *command)
    assert result.returncode == 2, result.stderr[-1500:]
    assert str(odd) in result.stderr and kind in result.stderr and "fix:" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("command", [("recipe", "validate", "{odd}"), ("--recipe", "{odd}", "recipe", "show", "--raw")],
                         ids=["recipe-validate", "recipe-show"])
def test_a_special_file_given_by_path_is_exit_2_naming_it(folder: tuple[Path, Path, str],
                                                          command: tuple[str, ...]) -> None:
    _recipes, odd, kind = folder
    result = run(*(part.format(odd=odd) for part in command))
    assert result.returncode == 2, result.stderr[-1500:]
    assert str(odd) in result.stderr and kind in result.stderr and "fix:" in result.stderr


@pytest.mark.parametrize("extends", ["odd", "odd.yaml"], ids=["by-name", "by-path"])
def test_a_base_that_is_a_special_file_is_exit_2_naming_it(folder: tuple[Path, Path, str], extends: str) -> None:
    recipes, odd, kind = folder
    top = recipes / "top.yaml"
    top.write_text(RECIPE.format(name="top") + f"extends: {extends}\n")
    result = run("--recipes-dir", str(recipes), "recipe", "validate", str(top))
    assert result.returncode == 2, result.stderr[-1500:]
    assert f"{top}:7: extends:" in result.stderr
    assert str(odd) in result.stderr and kind in result.stderr


def test_a_from_file_that_is_a_special_file_is_refused_naming_it(folder: tuple[Path, Path, str],
                                                                 tmp_path: Path) -> None:
    _recipes, odd, kind = folder
    recipe = tmp_path / "env.yaml"
    recipe.write_text(RECIPE.format(name="env") + f"runtime:\n  env:\n    from_file: {{VERSION: {odd}}}\n")
    result = run("--recipe", str(recipe), "-w", str(tmp_path / "ws"), "env")
    assert result.returncode == 5, result.stderr[-1500:]
    assert f"runtime.env.from_file.VERSION reads {odd}, which is " in result.stderr
    assert f"{kind}" in result.stderr and "not a regular file" in result.stderr
    assert result.stdout == ""


def test_a_fifo_where_the_constraints_file_goes_is_replaced_not_read(tmp_path: Path) -> None:
    """The pip constraints a recipe's python.constraints make are kept in its state folder; what is there is read
    first (to leave an unchanged file alone), and a FIFO there would stop every build and pip run."""
    state = tmp_path / "ws" / ".flagtree-cpu"
    state.mkdir(parents=True)
    os.mkfifo(state / "constraints.txt")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.format(name="r") + "python:\n  constraints: [numpy==1.26.4]\n")
    probe = ("import sys\nfrom pathlib import Path\nfrom flagtree_cpu_build.pip_constraints import constraints_file\n"
             "from flagtree_cpu_build.recipe.files import load_recipe_file\n"
             "from flagtree_cpu_build.workspace import Workspace\n"
             "print(constraints_file(load_recipe_file(Path(sys.argv[1])), Workspace(Path(sys.argv[2]))))\n")
    result = subprocess.run([sys.executable, "-c", probe, str(recipe), str(tmp_path / "ws")], capture_output=True,
                            text=True, timeout=HANG)
    assert result.returncode == 0, result.stderr[-1500:]
    written = state / "constraints.txt"
    assert result.stdout.strip() == str(written)
    assert written.is_file() and "numpy==1.26.4" in written.read_text()


def test_recipe_upgrade_does_not_read_a_fifo_where_its_backup_goes(tmp_path: Path) -> None:
    from tests.support.corpus import VALID

    recipe = tmp_path / "minimal.yaml"
    recipe.write_text((VALID / "minimal.yaml").read_text())  # schema version 1: upgrade keeps a backup
    os.mkfifo(tmp_path / "minimal.yaml.v1.bak")
    result = run("recipe", "upgrade", str(recipe))
    assert result.returncode == 2, result.stderr[-1500:]
    assert f"{tmp_path / 'minimal.yaml.v1.bak'} already exists" in result.stderr
    assert "schema_version: 1" in recipe.read_text()  # nothing was written


def test_a_fifo_where_the_lock_file_goes_is_exit_2_naming_it(tmp_path: Path) -> None:
    """The lock is read by the same bounded reader as recipes."""
    lock = tmp_path / "ws" / ".flagtree-cpu" / "lock.yaml"
    lock.parent.mkdir(parents=True)
    os.mkfifo(lock)
    result = run("-w", str(tmp_path / "ws"), "lock")
    assert result.returncode == 2, result.stderr[-1500:]
    assert f"cannot read lock file {lock}: it is a FIFO (named pipe), not a regular file" in result.stderr
    assert f"mv {lock} {lock}.damaged" in result.stderr
