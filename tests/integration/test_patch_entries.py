"""Patch entries as mappings: a source's own patch applied inside its submodule (what spine-triton does with
patch/triton.patch in its triton submodule), with real git — once, recorded, taken back before anything moves,
and refused cleanly when it does not apply.

The world (built once for the module): ``lib`` (the submodule: L1, then L2 with a changed README) and ``app``
whose commits carry ``lib`` as a submodule and ``patch/lib.patch``:

  A1  lib at L1, the patch makes answer() return 42
  A2  the patch edited: 43
  A3  a patch that does not apply (made for another lib)
  A4  lib's gitlink moved to L2, the patch as in A1

Both are served from disk behind ``https://github.com/example/...`` through git's own insteadOf rule, so the
recipe and .gitmodules hold real-looking URLs, as spine-triton's do.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.errors import RecipeError
from flagtree_cpu_build.recipe.files import load_recipe_file, parse_recipe
from flagtree_cpu_build.stages.sources.source_patches import changes_besides_patches
from tests.support.gitworld import git, git_env

CORE = "src/core.c"
ORIGINAL = "int answer(void) {\n    return 41;\n}\n"
ENTRY = "{file: patch/lib.patch, from: app, into: lib}"
LABEL = "app:patch/lib.patch into lib"


@dataclass
class PatchWorld:
    root: Path
    gitconfig: Path
    env: dict[str, str]
    lib: dict[str, str]  # label -> commit
    app: dict[str, str]
    patches: dict[str, str]  # app commit label -> its patch/lib.patch text


def _commit(work: Path, env: dict[str, str], message: str) -> str:
    git("add", "-A", cwd=work, env=env)
    git("commit", "--quiet", "-m", message, cwd=work, env=env)
    return git("rev-parse", "HEAD", cwd=work, env=env)


def _diff_of(work: Path, env: dict[str, str], new_text: str) -> str:
    """A git diff of lib's CORE changed to ``new_text`` (then put back)."""
    (work / CORE).write_text(new_text)
    diff = git("diff", cwd=work, env=env) + "\n"
    git("checkout", "--quiet", "--", CORE, cwd=work, env=env)
    return diff


def build_patch_world(root: Path) -> PatchWorld:
    bare = root / "bare" / "example"
    bare.mkdir(parents=True)
    gitconfig = root / "world.gitconfig"
    gitconfig.write_text('[protocol "file"]\n\tallow = always\n[init]\n\tdefaultBranch = main\n'
                         f'[url "{(root / "bare").as_uri()}/"]\n\tinsteadOf = https://github.com/\n')
    (root / "home").mkdir()
    env = git_env(root / "home", gitconfig)

    lib_work = root / "work" / "lib"
    (lib_work / "src").mkdir(parents=True)
    git("init", "--quiet", cwd=lib_work, env=env)
    (lib_work / CORE).write_text(ORIGINAL)
    (lib_work / "README").write_text("lib\n")
    lib = {"L1": _commit(lib_work, env, "lib: first")}
    patches = {"A1": _diff_of(lib_work, env, ORIGINAL.replace("41", "42")),
               "A2": _diff_of(lib_work, env, ORIGINAL.replace("41", "43"))}
    # made for a lib whose answer() returned 7: the line it removes is not there
    patches["A3"] = patches["A1"].replace("-    return 41;", "-    return 7;")
    (lib_work / "README").write_text("lib, a later commit\n")
    lib["L2"] = _commit(lib_work, env, "lib: second")
    git("clone", "--quiet", "--bare", lib_work, bare / "lib.git", env=env)

    app_work = root / "work" / "app"
    app_work.mkdir(parents=True)
    git("init", "--quiet", cwd=app_work, env=env)
    git("submodule", "add", "--quiet", "https://github.com/example/lib", "lib", cwd=app_work, env=env)
    git("checkout", "--quiet", lib["L1"], cwd=app_work / "lib", env=env)
    (app_work / "patch").mkdir()
    (app_work / "VERSION_NUMBER").write_text("spacemit.a5\n")
    commits = {}
    for label in ("A1", "A2", "A3"):
        (app_work / "patch" / "lib.patch").write_text(patches[label])
        commits[label] = _commit(app_work, env, f"app: {label}")
    (app_work / "patch" / "lib.patch").write_text(patches["A1"])
    git("checkout", "--quiet", lib["L2"], cwd=app_work / "lib", env=env)
    commits["A4"] = _commit(app_work, env, "app: lib moved to L2")
    patches["A4"] = patches["A1"]
    git("clone", "--quiet", "--bare", app_work, bare / "app.git", env=env)
    shutil.rmtree(root / "work")
    return PatchWorld(root, gitconfig, env, lib, commits, patches)


@pytest.fixture(scope="module")
def patch_world(tmp_path_factory: pytest.TempPathFactory) -> PatchWorld:
    return build_patch_world(tmp_path_factory.mktemp("patch-world"))


RECIPE = """\
schema_version: 2
name: patch-entries
platform:
  host: {{arch: [x86_64, aarch64, riscv64]}}
sources:
  app:
    url: https://github.com/example/app.git
    commit: {commit}
    submodules: {submodules}
    patches:
      - {entry}
"""


@dataclass
class PatchWorkspace:
    world: PatchWorld
    root: Path
    recipe: Path

    def write_recipe(self, commit: str, entry: str = ENTRY, submodules: str = "recursive") -> None:
        self.recipe.write_text(RECIPE.format(commit=self.world.app[commit], entry=entry, submodules=submodules))

    def sync(self, commit: str, entry: str = ENTRY, submodules: str = "recursive", *args: str) -> Result:
        self.write_recipe(commit, entry, submodules)
        return CliRunner().invoke(app, ["-r", str(self.recipe), "-w", str(self.root), "sync", *args])

    @property
    def app(self) -> Path:
        return self.root / "app"

    @property
    def lib(self) -> Path:
        return self.root / "app" / "lib"

    def lock(self) -> dict:
        return yaml.safe_load((self.root / ".flagtree-cpu" / "lock.yaml").read_text())

    def status(self, repo: Path) -> str:
        return git("status", "--porcelain", "--untracked-files=no", cwd=repo, env=self.world.env)

    def head(self, repo: Path) -> str:
        return git("rev-parse", "HEAD", cwd=repo, env=self.world.env)


@pytest.fixture
def pws(patch_world: PatchWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[PatchWorkspace]:
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(patch_world.gitconfig))
    (tmp_path / "recipes").mkdir()
    yield PatchWorkspace(patch_world, tmp_path / "ws", tmp_path / "recipes" / "patch-entries.yaml")


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def answer(pws: PatchWorkspace) -> str:
    return (pws.lib / CORE).read_text()


# --- applied once, recorded ----------------------------------------------------------------------------


def test_a_sources_own_patch_goes_into_its_submodule_once_and_is_recorded(pws: PatchWorkspace) -> None:
    first = pws.sync("A1")
    assert first.exit_code == 0, first.stderr
    assert answer(pws) == ORIGINAL.replace("41", "42")
    assert pws.head(pws.lib) == pws.world.lib["L1"]  # applied in the submodule's own checkout
    assert pws.status(pws.lib) == f"M {CORE}"
    [record] = pws.lock()["sources"]["app"]["patches"]
    assert record == {"file": LABEL, "sha256": sha256(pws.world.patches["A1"])}
    assert "1 patch" in first.stderr
    # our patch in the submodule is not reported as the user's change
    assert "warning" not in first.stderr
    before = (pws.lib / CORE).stat().st_mtime_ns
    second = pws.sync("A1")
    assert second.exit_code == 0, second.stderr
    assert "updated" not in second.stderr and "warning" not in second.stderr
    assert answer(pws) == ORIGINAL.replace("41", "42")  # not applied a second time
    assert (pws.lib / CORE).stat().st_mtime_ns == before  # not even rewritten
    assert pws.lock()["sources"]["app"]["patches"] == [record]


def test_a_bare_string_entry_keeps_its_old_lock_record_and_state_folder(pws: PatchWorkspace) -> None:
    (pws.recipe.parent / "patches").mkdir()
    (pws.recipe.parent / "patches" / "top.patch").write_text(
        "--- a/VERSION_NUMBER\n+++ b/VERSION_NUMBER\n@@ -1 +1 @@\n-spacemit.a5\n+spacemit.a5-local\n")
    result = pws.sync("A1", "top.patch")
    assert result.exit_code == 0, result.stderr
    assert (pws.app / "VERSION_NUMBER").read_text() == "spacemit.a5-local\n"
    [record] = pws.lock()["sources"]["app"]["patches"]
    assert record["file"] == "top.patch"
    assert (pws.root / ".flagtree-cpu/patches/app/top.patch").is_file()


def test_a_patch_from_a_source_listed_later_is_read_once_that_source_is_checked_out(pws: PatchWorkspace) -> None:
    # `fixes` (app at A2, whose patch says 43) comes after `app` in the recipe: sync checks out every
    # source before it applies any patch
    text = RECIPE.format(commit=pws.world.app["A1"], submodules="recursive",
                         entry="{file: patch/lib.patch, from: fixes, into: lib}")
    pws.recipe.write_text(text + f"  fixes:\n    url: https://github.com/example/app.git\n"
                                 f"    commit: {pws.world.app['A2']}\n")
    result = CliRunner().invoke(app, ["-r", str(pws.recipe), "-w", str(pws.root), "sync"])
    assert result.exit_code == 0, result.stderr
    assert answer(pws) == ORIGINAL.replace("41", "43")
    assert pws.status(pws.root / "fixes") == ""  # `fixes` itself is not patched
    [record] = pws.lock()["sources"]["app"]["patches"]
    assert record == {"file": "fixes:patch/lib.patch into lib", "sha256": sha256(pws.world.patches["A2"])}


# --- taken back before anything moves --------------------------------------------------------------------


def test_an_edited_patch_replaces_the_old_one_when_the_source_moves(pws: PatchWorkspace) -> None:
    assert pws.sync("A1").exit_code == 0
    moved = pws.sync("A2")
    assert moved.exit_code == 0, moved.stderr  # the old patch was taken back: not refused as "dirty"
    assert pws.head(pws.app) == pws.world.app["A2"]
    assert answer(pws) == ORIGINAL.replace("41", "43")
    [record] = pws.lock()["sources"]["app"]["patches"]
    assert record["sha256"] == sha256(pws.world.patches["A2"])


def test_an_edited_recipe_patch_into_a_submodule_is_reapplied(pws: PatchWorkspace) -> None:
    patches = pws.recipe.parent / "patches"
    patches.mkdir()
    (patches / "lib.patch").write_text(pws.world.patches["A1"])
    entry = "{file: lib.patch, into: lib}"
    assert pws.sync("A1", entry).exit_code == 0
    assert answer(pws) == ORIGINAL.replace("41", "42")
    (patches / "lib.patch").write_text(pws.world.patches["A2"])  # the checkout stays; the patch changed
    result = pws.sync("A1", entry)
    assert result.exit_code == 0, result.stderr
    assert answer(pws) == ORIGINAL.replace("41", "43")
    assert pws.lock()["sources"]["app"]["patches"] == [{"file": "lib.patch into lib",
                                                        "sha256": sha256(pws.world.patches["A2"])}]


def test_a_submodule_moving_to_a_new_gitlink_is_not_refused_for_our_patch(pws: PatchWorkspace) -> None:
    assert pws.sync("A1").exit_code == 0
    result = pws.sync("A4")
    assert result.exit_code == 0, result.stderr
    assert pws.head(pws.lib) == pws.world.lib["L2"]
    assert (pws.lib / "README").read_text() == "lib, a later commit\n"
    assert answer(pws) == ORIGINAL.replace("41", "42")  # taken back, moved, applied again


def test_a_submodule_moved_by_hand_is_brought_back_without_its_patch_counting_as_dirty(pws: PatchWorkspace) -> None:
    assert pws.sync("A1").exit_code == 0
    # the user checks out another lib commit; git carries our patched file along
    git("checkout", "--quiet", pws.world.lib["L2"], cwd=pws.lib, env=pws.world.env)
    result = pws.sync("A1")
    assert result.exit_code == 0, result.stderr
    assert pws.head(pws.lib) == pws.world.lib["L1"]
    assert answer(pws) == ORIGINAL.replace("41", "42")
    assert pws.status(pws.lib) == f"M {CORE}"


def test_the_users_own_change_in_the_submodule_is_still_reported(pws: PatchWorkspace) -> None:
    assert pws.sync("A1").exit_code == 0
    recipe = load_recipe_file(pws.recipe)
    state = pws.root / ".flagtree-cpu" / "patches"
    assert changes_besides_patches(recipe, "app", pws.root, state) == []  # what plans and doctor can ask
    (pws.lib / "README").write_text("my note\n")
    result = pws.sync("A1")
    assert result.exit_code == 0, result.stderr
    assert "warning: app has changes to 1 tracked file(s)" in result.stderr
    assert "(lib/README)" in result.stderr and CORE not in result.stderr
    assert (pws.lib / "README").read_text() == "my note\n"
    assert changes_besides_patches(recipe, "app", pws.root, state) == ["lib/README"]


# --- refused cleanly --------------------------------------------------------------------------------------


def test_a_patch_that_does_not_apply_is_named_and_changes_nothing(pws: PatchWorkspace) -> None:
    assert pws.sync("A1").exit_code == 0
    (pws.lib / "notes.txt").write_text("mine\n")  # the user's untracked file
    result = pws.sync("A3")
    assert result.exit_code == 3, result.stderr
    assert f"patch {LABEL} does not apply to source app ({pws.lib}); nothing was changed" in result.stderr
    assert f"error: patch failed: {CORE}:1" in result.stderr
    assert "the patch comes from source app and was made for another commit of lib" in result.stderr
    assert pws.head(pws.app) == pws.world.app["A3"]
    assert pws.status(pws.lib) == ""  # A1's patch taken back, A3's not half applied
    assert (pws.lib / "notes.txt").read_text() == "mine\n"
    # the lock still says what the tree held when it was last written
    [record] = pws.lock()["sources"]["app"]["patches"]
    assert record["sha256"] == sha256(pws.world.patches["A1"])


def test_a_file_the_source_does_not_have_is_named(pws: PatchWorkspace) -> None:
    result = pws.sync("A1", "{file: patch/missing.patch, from: app, into: lib}")
    assert result.exit_code == 3, result.stderr
    assert "sources.app.patches[0]: source app has no patch/missing.patch at its pinned commit" in result.stderr
    assert pws.status(pws.lib) == ""


def test_a_patch_into_a_submodule_that_is_not_checked_out_says_how(pws: PatchWorkspace) -> None:
    result = pws.sync("A1", ENTRY, "none")
    assert result.exit_code == 3, result.stderr
    assert f"patch {LABEL} of source app cannot be applied: lib is a submodule that is not checked out" in \
        result.stderr
    assert "set sources.app.submodules: recursive" in result.stderr
    assert not os.listdir(pws.lib)


# --- the recipe's rules (at load: the file of a `from` entry is only looked for after sync) -------------------

MODEL = """\
schema_version: 2
name: rules
platform: {{host: {{arch: [x86_64]}}}}
sources:
  app:
    url: https://github.com/example/app.git
    ref: main
    patches: {patches}
"""


def problems(patches: str) -> list[tuple[str, str]]:
    with pytest.raises(RecipeError) as caught:
        parse_recipe(MODEL.format(patches=patches), "r.yaml")
    return [(p.key, p.message) for p in caught.value.problems]


def test_a_from_entry_is_not_looked_for_at_load_and_a_bare_one_still_is() -> None:
    recipe = parse_recipe(MODEL.format(patches=f"[{ENTRY}]"), "r.yaml")
    [patch] = recipe.sources["app"].patches
    assert (patch.file, patch.from_source, patch.into, patch.label) == ("patch/lib.patch", "app", "lib", LABEL)
    assert problems("[gone.patch]") == [("sources.app.patches[0]", "patch file 'gone.patch' not found in ")]


@pytest.mark.parametrize(("patches", "key", "message"), [
    ("[{file: p.patch, from: lib}]", "sources.app.patches[0].from", "there is no source named 'lib'"),
    ("[{file: /abs/p.patch, from: app}]", "sources.app.patches[0].file", "must be a relative path"),
    ("[{file: ../p.patch, from: app}]", "sources.app.patches[0].file", "escapes the source's folder"),
    ("[{file: p.patch, from: app, into: ../up}]", "sources.app.patches[0].into", "escapes the source's folder"),
    (f"[{ENTRY}, {ENTRY}]", "sources.app.patches[1]", f"patch '{LABEL}' is listed twice (also entry 0)"),
], ids=["unknown-source", "absolute", "escapes", "into-escapes", "twice"])
def test_a_wrong_entry_is_named_at_its_key(patches: str, key: str, message: str) -> None:
    [(found_key, found)] = problems(patches)
    assert found_key == key and message in found
