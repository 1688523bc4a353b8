"""The `from_file` env operation: a variable set to a file's stripped text (spine-triton's VERSION_NUMBER), after
`set` and before `if_command`; a file that is missing or cannot be a value is named with the recipe key."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.envops import EnvFileError, EnvLayer, apply_layers, apply_ops
from flagtree_cpu_build.errors import RecipeError
from flagtree_cpu_build.recipe import CommandEnv, EnvOps
from flagtree_cpu_build.recipe.files import parse_recipe
from tests.support.envelope import error_of, result_of

BASE = {"HOME": "/home/edge", "PATH": "/usr/bin:/bin"}


def no_source(*_args: object) -> dict[str, str]:
    raise AssertionError("nothing is sourced here")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "VERSION_NUMBER").write_text("spacemit.a5\n")
    return tmp_path


# --- applying -------------------------------------------------------------------------------------------


def test_a_relative_file_is_read_in_the_workdir_and_stripped(workdir: Path) -> None:
    (workdir / "app" / "PADDED").write_text("  \n 3.6.0 \t\n\n")
    ops = EnvOps(from_file={"SPINE_TRITON_VERSION_NUMBER": "app/VERSION_NUMBER", "PADDED": "app/PADDED"})
    applied = apply_ops(ops, BASE, workdir=workdir, key="build.env", source=no_source)
    assert applied.env == {**BASE, "SPINE_TRITON_VERSION_NUMBER": "spacemit.a5", "PADDED": "3.6.0"}
    assert {c.name: (c.action, c.by) for c in applied.changes} == {
        "SPINE_TRITON_VERSION_NUMBER": ("set", "build.env.from_file"), "PADDED": ("set", "build.env.from_file")}
    assert applied.named == ("SPINE_TRITON_VERSION_NUMBER", "PADDED")


def test_an_absolute_file_and_an_inherited_value_overridden(workdir: Path, tmp_path: Path) -> None:
    ops = EnvOps(from_file={"V": str(workdir / "app" / "VERSION_NUMBER")})
    applied = apply_ops(ops, {**BASE, "V": "old"}, workdir=tmp_path / "elsewhere", source=no_source)
    [change] = applied.changes
    assert change.describe() == "V overridden: 'old' -> 'spacemit.a5'"


def test_it_comes_after_set_and_before_if_command_and_prepend(workdir: Path) -> None:
    (workdir / "bin-dir").write_text("/opt/from-file/bin\n")
    ops = EnvOps(set={"V": "from-set", "W": "from-set"},
                 from_file={"V": "app/VERSION_NUMBER", "W": "app/VERSION_NUMBER", "TOOLS": "bin-dir"},
                 if_command=(CommandEnv(command="ccache", set={"W": "from-if-command"}),),
                 prepend={"TOOLS": ("/first",)})
    applied = apply_ops(ops, BASE, workdir=workdir, has_command=lambda c, p: True, source=no_source)
    assert applied.env["V"] == "spacemit.a5"  # from_file after set
    assert applied.env["W"] == "from-if-command"  # if_command after from_file
    assert applied.env["TOOLS"] == "/first:/opt/from-file/bin"  # prepend onto the file's value


def test_a_later_layer_reads_again_and_an_empty_file_gives_an_empty_value(workdir: Path) -> None:
    (workdir / "EMPTY").write_text("\n")
    layers = [EnvLayer(EnvOps(from_file={"V": "app/VERSION_NUMBER"}), "build.env"),
              EnvLayer(EnvOps(from_file={"V": "EMPTY"}), "steps.prep.env")]
    applied = apply_layers(layers, BASE, workdir=workdir, source=no_source)
    assert applied.env["V"] == ""
    assert applied.changes[0].by == "steps.prep.env.from_file"


def test_ops_with_only_from_file_are_not_empty() -> None:
    assert not EnvOps(from_file={"V": "x"}).is_empty()
    assert EnvOps().is_empty()


# --- a file that cannot give a value --------------------------------------------------------------------


def test_a_missing_file_names_the_key_the_path_and_the_fix(workdir: Path) -> None:
    ops = EnvOps(from_file={"V": "app/NOT_THERE"})
    with pytest.raises(EnvFileError) as caught:
        apply_ops(ops, BASE, workdir=workdir, key="build.env", source=no_source)
    error = caught.value
    assert error.message == f"build.env.from_file.V reads {workdir}/app/NOT_THERE, which does not exist"
    assert "flagtree-cpu sync" in (error.fix or "") and "build.env.from_file.V" in (error.fix or "")
    assert error.exit_code == 5


def test_a_toolchain_layer_gives_its_own_advice(workdir: Path) -> None:
    layer = EnvLayer(EnvOps(from_file={"SDK_VERSION": "/nowhere/sdk/version.txt"}), "toolchains.sdk.env",
                     fix="install the SDK into /nowhere/sdk")
    with pytest.raises(EnvFileError) as caught:
        apply_layers([layer], BASE, workdir=workdir, source=no_source)
    assert caught.value.message == ("toolchains.sdk.env.from_file.SDK_VERSION reads /nowhere/sdk/version.txt, which "
                                    "does not exist")
    assert caught.value.fix == "install the SDK into /nowhere/sdk"


@pytest.mark.parametrize(("make", "why"), [
    (lambda p: p.mkdir(), "which is a folder, not a file"),
    (lambda p: p.write_bytes(b"v1\x00v2"), "which holds a NUL byte (a binary file?)"),
    (lambda p: p.write_bytes(b"\xff\xfe version"), "which is not UTF-8 text"),
    (lambda p: p.write_text("x" * (64 * 1024 + 1)), "which is over 64 KiB: too long for an environment variable"),
], ids=["folder", "nul", "not-utf8", "too-long"])
def test_a_file_that_cannot_be_a_value_says_why(workdir: Path, make, why: str) -> None:
    make(workdir / "odd")
    with pytest.raises(EnvFileError) as caught:
        apply_ops(EnvOps(from_file={"V": "odd"}), BASE, workdir=workdir, key="runtime.env", source=no_source)
    assert caught.value.message == f"runtime.env.from_file.V reads {workdir}/odd, {why}"


# --- in a recipe -----------------------------------------------------------------------------------------

RECIPE = """\
schema_version: 2
name: from-file-demo
platform:
  host: {{arch: [x86_64, aarch64, riscv64]}}
sources:
  app:
    url: https://example.invalid/app.git
    commit: 0123456789abcdef0123456789abcdef01234567
runtime:
  env:
    set: {{MODE: cpu}}
    from_file:
{entries}
"""


def recipe_text(**entries: str) -> str:
    return RECIPE.format(entries="\n".join(f"      {k}: {v!r}" for k, v in entries.items()))


def test_env_shows_the_files_value_with_its_placeholder_filled_in(workdir: Path, tmp_path: Path) -> None:
    recipe = tmp_path / "demo.yaml"
    recipe.write_text(recipe_text(APP_VERSION="{sources.app.path}/VERSION_NUMBER"))
    result = CliRunner().invoke(app, ["-r", str(recipe), "-w", str(workdir), "env", "--json"])
    assert result.exit_code == 0, result.stderr
    document = result_of(result.stdout)
    assert document["set"]["APP_VERSION"] == "spacemit.a5" and document["set"]["MODE"] == "cpu"
    changes = {c["name"]: c for c in document["changes"]}
    assert changes["APP_VERSION"]["by"] == "runtime.env.from_file"


def test_env_with_the_file_missing_is_a_build_error_naming_it(workdir: Path, tmp_path: Path) -> None:
    recipe = tmp_path / "demo.yaml"
    recipe.write_text(recipe_text(APP_VERSION="{sources.app.path}/VERSION"))
    result = CliRunner().invoke(app, ["-r", str(recipe), "-w", str(workdir), "env", "--json"])
    assert result.exit_code == 5, result.stdout
    error = error_of(result.stdout)
    assert error["message"] == f"runtime.env.from_file.APP_VERSION reads {workdir}/app/VERSION, which does not exist"


@pytest.mark.parametrize(("entries", "message"), [
    ({"BAD-NAME": "app/V"}, "'BAD-NAME' is not an environment variable name"),
    ({"V": "../outside/V"}, "file '../outside/V' escapes the workdir"),
    ({"V": " "}, "the file to read V from is empty"),
    ({"V": "{sources.nope.path}/V"}, "unknown placeholder {sources.nope.path}"),
], ids=["name", "escapes", "empty", "placeholder"])
def test_a_wrong_entry_is_a_recipe_problem(entries: dict[str, str], message: str) -> None:
    with pytest.raises(RecipeError) as caught:
        parse_recipe(recipe_text(**entries), "r.yaml")
    [problem] = caught.value.problems
    assert message in problem.message
    assert problem.key.startswith("runtime.env.from_file")


def test_a_file_name_with_a_nul_byte_is_a_missing_file(workdir: Path) -> None:
    with pytest.raises(EnvFileError) as caught:
        apply_ops(EnvOps(from_file={"V": "odd\0name"}), BASE, workdir=workdir, key="runtime.env", source=no_source)
    assert caught.value.message.startswith("runtime.env.from_file.V reads ") and "which does not exist" in \
        caught.value.message
