"""A command printed for ANOTHER machine (issue 28, section 1): "on a connected machine run `flagtree-cpu fetch
--cache-dir DIR`", "make the bundle again (bundle create)", "on the board: doctor --snapshot". Every printed command
carries this run's context (invocation.py), but this machine's `-w` and `--lock-file` paths mean nothing on the
other machine: such a command carries the recipe (always named, a recipe file by its file name) and the variant,
and no path of this machine. Commands for this machine in the same fix keep their `-w`."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.invocation import Invocation, elsewhere, in_context
from tests.conftest import REPO_ROOT
from tests.support.envelope import error_of
from tests.support.fetching import PATH_SET
from tests.support.httpserver import LoopbackHTTPServer

DEFAULT = "flagtree-cpu-arm64"


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def quoted(fix: str, before: str) -> list[str]:
    """The command between backquotes that follows ``before`` in ``fix``, as argv."""
    found = re.search(re.escape(before) + r"\s*`([^`]+)`", " ".join(fix.split()))
    assert found, fix
    return shlex.split(found.group(1))


def test_fetch_offline_names_the_connected_machines_command_without_this_workdir(
        tmp_path: Path, http_server: LoopbackHTTPServer) -> None:
    ws, lock = tmp_path / "ws", tmp_path / "ci" / "lock.yaml"
    url = http_server.url("/llvm.tar.gz")
    result = cli("-w", str(ws), "--lock-file", str(lock), "--set", f"artifacts.llvm.url={url}", "--set", PATH_SET,
                 "--set", "artifacts.llvm.sha256=" + "a" * 64, "--json", "fetch", "--offline")
    assert result.exit_code == 4, result.stderr
    fix = error_of(result.stdout)["fix"]
    there = quoted(fix, "on a connected machine run")
    assert there == ["flagtree-cpu", "--recipe", DEFAULT, "fetch", "--cache-dir", "DIR"], fix
    assert str(tmp_path) not in " ".join(there)
    # the command for this machine, in the same fix, keeps this run's context
    assert f"flagtree-cpu -w {ws} --lock-file {lock} fetch --offline --from NAME=FILE" in " ".join(fix.split())
    assert http_server.requests == []


def test_a_recipe_file_is_named_by_its_file_name_for_another_machine(
        tmp_path: Path, http_server: LoopbackHTTPServer) -> None:
    recipe = tmp_path / "mine" / "sleefdemo.yaml"
    recipe.parent.mkdir()
    recipe.write_text((REPO_ROOT / "recipes" / f"{DEFAULT}.yaml").read_text().replace(
        f"name: {DEFAULT}", "name: sleefdemo", 1))
    url = http_server.url("/llvm.tar.gz")
    result = cli("-w", str(tmp_path / "ws"), "--recipe", str(recipe), "--set", f"artifacts.llvm.url={url}",
                 "--set", PATH_SET, "--set", "artifacts.llvm.sha256=" + "a" * 64, "fetch", "--offline")
    assert result.exit_code == 4, result.stderr
    there = quoted(result.stderr, "on a connected machine run")
    assert there == ["flagtree-cpu", "--recipe", "sleefdemo.yaml", "fetch", "--cache-dir", "DIR"], result.stderr


def test_bundle_import_of_a_missing_file_names_bundle_create_for_the_connected_machine(tmp_path: Path) -> None:
    ws = tmp_path / "board"
    result = cli("-w", str(ws), "--recipe", "triton-cpu", "--json", "bundle", "import", str(tmp_path / "no.bundle"))
    assert result.exit_code == 2, result.stderr
    fix = error_of(result.stdout)["fix"]
    assert quoted(fix, "give the file") == ["flagtree-cpu", "--recipe", "triton-cpu", "bundle", "create", "-o",
                                            "FILE"], fix
    assert str(ws) not in fix


def test_a_command_for_another_machine_is_rendered_once_and_plain_without_a_context() -> None:
    text = f"run `{elsewhere('fetch', '--cache-dir', 'DIR')}` there, then flagtree-cpu fetch --offline here"
    inv = Invocation(Path("/ws"), None, "metax", Path("/ci/lock.yaml"), portable_recipe="torch-fl")
    once = inv.apply(text)
    assert once == ("run `flagtree-cpu --recipe torch-fl --variant metax fetch --cache-dir DIR` there, then "
                    "flagtree-cpu -w /ws --variant metax --lock-file /ci/lock.yaml fetch --offline here")
    assert inv.apply(once) == once  # a fix rendered by setup's report and printed again is not changed twice
    assert in_context(text, None) == "run `flagtree-cpu fetch --cache-dir DIR` there, then flagtree-cpu fetch " \
        "--offline here"
