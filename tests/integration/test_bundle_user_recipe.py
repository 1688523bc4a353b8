"""A bundle made from a user's recipe FILE tells the board how to use it (issue 28, section 1).

The board has no file of that recipe (`--recipe sleefdemo` there said "no recipe named"), but the bundle carries it:
`bundle import` on a workspace that records no recipe extracts it into `<ws>/.flagtree-cpu/recipes/` and records
it, and the line `bundle create` prints works when copied on the board — another HOME, another folder, the original
recipe file gone, every route closed. The carried recipe is hostile input like every member (size, names, no write
outside the workspace), and a refused import leaves no recipe file behind.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner, Result

from flagtree_cpu_build.bundle import Member, write_bundle
from flagtree_cpu_build.cli import app
from tests.conftest import REPO_ROOT
from tests.integration.test_bundle_offline import LLVM_PATH, PREREQUISITE, close_every_route
from tests.support.envelope import error_of
from tests.support.gitworld import GitWorld
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import llvm_tarball
from tests.support.venvs import simple_index, tiny_wheel

RECIPE = "sleefdemo"


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def user_recipe(dest: Path, world: GitWorld, llvm: str, torch_index: str) -> Path:
    """The bundled recipe as a user's file of another name, pointing at the loopback world (what `--set` does in
    the other tests: a bundle carries the file, not the command line)."""
    data = yaml.safe_load((REPO_ROOT / "recipes" / "flagtree-cpu-arm64.yaml").read_text())
    data["name"] = RECIPE
    data["sources"]["flagtree"]["commit"] = world["flagtree"].commits["cpu-backend"]
    data["artifacts"]["llvm"]["url"] = llvm
    data["python"]["build"] = [PREREQUISITE[0]]
    data["python"]["runtime"] = [{"requirement": "fixture-torch==2.0", "index_url": torch_index}]
    data["checks"] = []
    dest.parent.mkdir(parents=True)
    dest.write_text(yaml.safe_dump(data, sort_keys=False))
    return dest


def made_bundle(world: GitWorld, tmp_path: Path, http_server: LoopbackHTTPServer,
                monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """The connected side: a user recipe file set up and bundled; the bundle and the line printed for the board."""
    llvm = http_server.serve(LLVM_PATH, llvm_tarball().data)
    monkeypatch.setenv("PIP_INDEX_URL", simple_index(http_server, "/pypi", tiny_wheel(tmp_path / "wheel",
                                                                                       *PREREQUISITE)))
    torch_index = simple_index(http_server, "/whl/cpu", tiny_wheel(tmp_path / "torch", "fixture-torch", "2.0"))
    recipe = user_recipe(tmp_path / "mine" / f"{RECIPE}.yaml", world, llvm, torch_index)
    online = tmp_path / "online"
    done = cli("-w", str(online), "--recipe", str(recipe), "setup", "--skip-build", "--ignore-host")
    assert done.exit_code == 0, done.stderr
    bundle = tmp_path / "usb" / "demo.bundle"
    bundle.parent.mkdir()
    made = cli("-w", str(online), "bundle", "create", "-o", str(bundle))  # the workspace's recorded recipe
    assert made.exit_code == 0, made.stderr
    said = re.search(r"on the machine without network: (.+)", made.stderr)
    assert said, made.stderr
    recipe.unlink()
    return bundle, said.group(1).strip()


def test_the_line_bundle_create_prints_for_a_recipe_file_works_on_the_board(
        world: GitWorld, tmp_path: Path, http_server: LoopbackHTTPServer, monkeypatch: pytest.MonkeyPatch) -> None:
    bundle, line = made_bundle(world, tmp_path, http_server, monkeypatch)
    assert "--recipe" not in line and str(tmp_path) not in line, line  # nothing the board lacks
    close_every_route(monkeypatch, world, tmp_path / "board-home")
    site = tmp_path / "board-site"
    site.mkdir()
    shutil.copy(bundle, site / bundle.name)
    monkeypatch.chdir(site)
    commands = [shlex.split(part) for part in line.split(" && ")]
    assert [argv[0] for argv in commands] == ["flagtree-cpu", "flagtree-cpu"], line
    imported = cli(*commands[0][1:])
    assert imported.exit_code == 0, imported.stderr
    ws = site / f"{RECIPE}-workspace"
    record = json.loads((ws / ".flagtree-cpu" / "workspace.json").read_text())
    carried = ws / ".flagtree-cpu" / "recipes" / f"{RECIPE}.yaml"
    assert record["recipe"] == {**record["recipe"], "name": RECIPE, "origin": "file", "path": str(carried)}
    # the board is x86 here and the fixture build needs its own tools: the printed setup, without the build
    setup = cli(*commands[1][1:], "--skip-build", "--ignore-host")
    assert setup.exit_code == 0, setup.stderr
    assert (ws / "FlagTree" / "python" / "setup.py").is_file()
    again = cli(*commands[0][1:])  # the workspace records the recipe now: the same import changes nothing
    assert again.exit_code == 0, again.stderr
    assert "nothing to import" in again.stderr


def recrafted(bundle: Path, dest: Path, *, recipe_size: int | None = None, **target: object) -> Path:
    """``bundle`` written again, sound (every digest matches), for another ``target`` or with its recipe file
    grown to ``recipe_size`` bytes."""
    from flagtree_cpu_build.bundle.archive import extract_members, read_bundle

    manifest = read_bundle(bundle).head.manifest
    files = extract_members(bundle, manifest, [m.name for m in manifest.present()], dest / "parts")
    [recipe] = manifest.of_kind("recipe")
    if recipe_size is not None:
        with files[recipe.name].open("ab") as out:
            out.write(b"#" * (recipe_size - recipe.size))
    members = tuple(Member(m.name, m.kind, meta=m.meta) for m in manifest.members)
    draft = replace(manifest, members=members, target={**manifest.target, **target}, digest="")
    write_bundle(dest / "crafted.bundle", draft, files)
    return dest / "crafted.bundle"


def test_a_refused_import_leaves_no_recipe_and_no_workspace(
        world: GitWorld, tmp_path: Path, http_server: LoopbackHTTPServer, monkeypatch: pytest.MonkeyPatch) -> None:
    bundle, _line = made_bundle(world, tmp_path, http_server, monkeypatch)
    board = tmp_path / "board"
    # made for another architecture: refused (exit 2) once the recipe came out of it
    other = recrafted(bundle, tmp_path / "other", arch="riscv64")
    refused = cli("-w", str(board), "--json", "bundle", "import", str(other))
    assert refused.exit_code == 2, refused.stderr
    assert "riscv64" in error_of(refused.stdout)["message"]
    assert not board.exists(), sorted(str(p) for p in board.rglob("*"))
    # a recipe member larger than any recipe: refused before it is extracted
    huge = recrafted(bundle, tmp_path / "huge", recipe_size=(1 << 20) + 1)
    refused = cli("-w", str(board), "--json", "bundle", "import", str(huge))
    assert refused.exit_code == 4, refused.stderr
    assert "more than any recipe" in error_of(refused.stdout)["message"]
    assert not board.exists()


def test_setup_bundle_takes_the_recipe_the_bundle_carries_in_one_command(
        world: GitWorld, tmp_path: Path, http_server: LoopbackHTTPServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """`setup --bundle FILE` on a board that has no workspace yet: the same as the printed import && setup, in one."""
    bundle, _line = made_bundle(world, tmp_path, http_server, monkeypatch)
    close_every_route(monkeypatch, world, tmp_path / "board-home")
    site = tmp_path / "board-site"
    site.mkdir()
    shutil.copy(bundle, site / bundle.name)
    monkeypatch.chdir(site)
    # the board is x86 here and the fixture build needs its own tools: without the build
    done = cli("setup", "--bundle", bundle.name, "--skip-build", "--ignore-host")
    assert done.exit_code == 0, done.stderr
    ws = site / f"{RECIPE}-workspace"
    record = json.loads((ws / ".flagtree-cpu" / "workspace.json").read_text())
    assert record["recipe"]["name"] == RECIPE and record["recipe"]["origin"] == "file"
    assert (ws / "FlagTree" / "python" / "setup.py").is_file()
