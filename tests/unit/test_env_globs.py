"""`{glob:PATTERN}` in env values and check argv (issue 29, item 5): resolved with its placeholders filled in as
literal text, matched when the value is used; none or several matches is an error naming the key and what it
found. (A check's argv for real: tests/integration/test_values.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from flagtree_cpu_build.envops import EnvFileError, EnvLayer, apply_layers
from flagtree_cpu_build.errors import RecipeError
from flagtree_cpu_build.host import HostFacts
from flagtree_cpu_build.placeholders import placeholder_values
from flagtree_cpu_build.recipe import EnvOps, resolve
from flagtree_cpu_build.recipe.files import parse_recipe
from flagtree_cpu_build.workspace import Workspace
from tests.unit.test_computed_placeholders import RECIPE

HOST = HostFacts("linux", "x86_64", "ubuntu", "22.04", "Ubuntu", 4, None, 16 * 2**30)
GLOB_DIR = 'build.env.set.LIBDIR="{glob:{sources.app.path}/build/lib.*}"'


def resolved_env(tmp_path: Path, *overrides: str) -> EnvOps:
    recipe = parse_recipe(RECIPE, "t.yaml", list(overrides))
    ws = Workspace(tmp_path)
    return resolve(recipe, ws.root, placeholder_values(recipe, ws, HOST, {}), {}).build.env


def apply(ops: EnvOps, workdir: Path):
    return apply_layers([EnvLayer(ops, "build.env")], {"PATH": "/usr/bin"}, workdir=workdir)


def test_a_glob_is_kept_for_later_with_its_placeholders_filled_in_literally(tmp_path: Path) -> None:
    ws = tmp_path / "w[1]*"  # glob characters in the workdir match themselves, not other folders
    assert resolved_env(ws, GLOB_DIR).set["LIBDIR"] == "{glob:" + str(tmp_path) + "/w[[]1][*]/app/build/lib.*}"


def test_the_one_match_is_the_value(tmp_path: Path) -> None:
    ws = tmp_path / "w[1]"
    (ws / "app/build/lib.linux-x86_64-cpython-3.11").mkdir(parents=True)
    (tmp_path / "w1/app/build/lib.other").mkdir(parents=True)  # what `w[1]` as a pattern would match
    applied = apply(resolved_env(ws, GLOB_DIR, 'build.env.prepend.PATH=["{glob:app/build/lib.*}"]'), ws)
    assert applied.env["LIBDIR"] == f"{ws}/app/build/lib.linux-x86_64-cpython-3.11"
    assert applied.env["PATH"] == f"{ws}/app/build/lib.linux-x86_64-cpython-3.11:/usr/bin"  # relative: the workdir


def test_no_match_and_several_matches_are_errors_naming_key_pattern_and_matches(tmp_path: Path) -> None:
    ops = resolved_env(tmp_path, GLOB_DIR)
    with pytest.raises(EnvFileError) as none:
        apply(ops, tmp_path)
    assert none.value.message == f"build.env.set.LIBDIR: {{glob:{tmp_path}/app/build/lib.*}} matches nothing"
    assert none.value.exit_code == 5 and "build" in none.value.fix
    for suffix in ("a", "b"):
        (tmp_path / f"app/build/lib.{suffix}").mkdir(parents=True)
    with pytest.raises(EnvFileError) as several:
        apply(ops, tmp_path)
    lib = tmp_path / "app/build/lib"
    assert several.value.message == (f"build.env.set.LIBDIR: {{glob:{lib}.*}} matches several paths, it must match "
                                     f"one: {lib}.a, {lib}.b")


def test_text_read_from_a_file_is_never_globbed(tmp_path: Path) -> None:
    (tmp_path / "VERSION").write_text("{glob:/*}\n")
    applied = apply(EnvOps(from_file={"V": "VERSION"}), tmp_path)
    assert applied.env["V"] == "{glob:/*}"


@pytest.mark.parametrize(("override", "message"), [
    ('build.argv=["{glob:dist/*.whl}"]', "build.argv[0]: {glob:dist/*.whl} works only in env values and check argv"),
    ('build.env.set.X="{glob:}"', "build.env.set.X: {glob:} has no pattern"),
    ('build.env.set.X="{glob:{sources.ap.path}/x}"', "build.env.set.X: unknown placeholder {sources.ap.path}"),
    ('build.env.from_file.X="{glob:VERSION*}"', "build.env.from_file.X: {glob:VERSION*} works only in env values"),
])
def test_a_glob_where_it_cannot_be_is_a_located_problem(override: str, message: str) -> None:
    with pytest.raises(RecipeError) as caught:
        parse_recipe(RECIPE, "t.yaml", [override])
    found = [f"{p.key}: {p.message}" for p in caught.value.problems]
    assert any(f.startswith(message) for f in found), found
