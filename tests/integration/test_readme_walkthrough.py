"""The README's walk-through, run as written: its shell blocks marked `<!-- walkthrough: NAME -->`, in order, in one
bash, from `git clone` to a set-up workspace (`setup --skip-build`) of EACH bundled recipe, and after each recipe's
block the `status` command that setup printed under `next:`, copied from its output and run as printed.

What is real: the clone (`git clone "$REPO_URL"`, of a snapshot of this working tree: its tracked and untracked,
not ignored, files committed to a local repository), `python3 -m venv`, `pip install .` building and installing
the project into that venv, the installed console script on PATH, every flagtree-cpu command of the blocks, and
the `status` lines the tool printed (the test only finds the line; it adds `--json` to a second run of it, to
read the result).

What is substituted, because this machine has no network beyond 127.0.0.1 (tests/support/worlds/walkthrough.py):
- pip has no index (`PIP_NO_INDEX=1`, `PIP_CONFIG_FILE=/dev/null`): the isolated build finds setuptools and wheel
  in the suite's own wheel folder (`PIP_FIND_LINKS`), and the run-time dependencies (typer, rich, pyyaml,
  requests, packaging) are the test venv's own, added to the new venv by a `.pth` file that the `python3` on
  the blocks' PATH writes right after `python3 -m venv` (a shim around the suite's interpreter);
- GitHub is each recipe's git world (the worlds of the recipes' own tests), through git's own
  `url.<world>.insteadOf=https://github.com/` rule in `GIT_CONFIG_GLOBAL`, which the test exports before each
  recipe's block (one config cannot hold every world: two of them have a `shibatch/sleef` of their own);
- the downloads (LLVM prebuilts, nlohmann json, SpacemiT's toolchain, spine-mlir, LLVM and zlib, flagtree's
  NVIDIA tools) are stand-in tarballs on the loopback HTTP server at their real paths, reached through
  `FLAGTREE_CPU_MIRRORS` rules, exported with each recipe's block (the flagtree world serves under `/<host>/`);
- the recipes are copies of the bundled files in a `FLAGTREE_CPU_RECIPES` folder (a user recipe hides the
  bundled one of its name), changed only in what a fixture cannot have: the source commits and the stand-ins'
  digests. So `recipe list` shows them as user recipes, and the lines the tool prints carry `--recipe <the
  copy's path>` where, for the bundled file, they carry `--recipe NAME` (the default recipe: none).
Nothing is built (`--skip-build`); the venv, the build and the validation are what the status shows as left.
torch-fl's device and SDKs are absent: its block is the `--skip-build` one the README gives for that case.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.support.envelope import result_of
from tests.support.gitworld import GitWorld
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.venvs import TEST_WHEELS, provision_dependencies
from tests.support.worlds.walkthrough import RECIPES, build_worlds

pytestmark = pytest.mark.slow

MARK = re.compile(r"<!-- walkthrough: ([\w-]+) -->\n```sh\n(.*?)```", re.S)


def walkthrough_blocks(readme: str) -> list[tuple[str, str]]:
    return MARK.findall(readme)


def test_the_readme_marks_its_walkthrough() -> None:
    names = [name for name, _ in walkthrough_blocks((REPO_ROOT / "README.md").read_text())]
    assert names == ["install", "path", "tour", "workspace", *(f"recipe-{r}" for r in RECIPES)]


def snapshot_repository(dest: Path) -> Path:
    """This working tree as a git repository of one commit: what a clone of it would hold after a push."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO_ROOT, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO_ROOT / name
        if source.is_file() or source.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name, follow_symlinks=False)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    for argv in (["init", "--quiet"], ["add", "-A"], ["commit", "--quiet", "-m", "snapshot"]):
        subprocess.run(["git", *argv], cwd=dest, check=True, env=env, capture_output=True)
    return dest


def python3_shim(bin_dir: Path, deps: Path) -> None:
    """`python3` for the blocks: the suite's interpreter; after `python3 -m venv DIR` it adds the dependencies."""
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(f"""#!/bin/sh
{shlex.quote(sys.executable)} "$@" || exit $?
if [ "$1" = -m ] && [ "$2" = venv ]; then
    for site in "$3"/lib/python3*/site-packages; do echo {shlex.quote(str(deps))} > "$site/provisioned-deps.pth"; done
fi
""")
    (bin_dir / "python3").chmod(0o755)


# The `status` line a setup printed under `next:`, found in its stderr ($1) and run as printed; then once more with
# --json into $2, for the test to read.
NEXT_STATUS = r"""
next_status() {
    line=$(sed -n 's/^ *\(flagtree-cpu .* status\)$/\1/p' "$1" | tail -1)
    [ -n "$line" ] || { echo "no status line under next: in $1" >&2; return 1; }
    echo "### copied from next: $line" >&2
    eval "$line"
    eval "$line --json" > "$2"
}
"""


def recipe_step(name: str, body: str, gitconfig: Path, mirrors: str) -> str:
    """One recipe's block, its stderr kept to find the `next:` line, then that line run."""
    recipe = name.removeprefix("recipe-")
    return f"""echo '### {name}' >&2
export GIT_CONFIG_GLOBAL={shlex.quote(str(gitconfig))} FLAGTREE_CPU_MIRRORS={shlex.quote(mirrors)}
set +e; ( set -e
{body}) 2> {name}.err; rc=$?; set -e
cat {name}.err >&2; [ $rc = 0 ] || exit $rc
next_status {name}.err {recipe}.status.json"""


def test_the_readme_walkthrough_from_clone_to_a_set_up_workspace_of_each_recipe(
        git_world: GitWorld, tmp_path: Path, http_server: LoopbackHTTPServer) -> None:
    assert TEST_WHEELS.is_dir(), f"the suite's wheel folder {TEST_WHEELS} is missing: `make test-env` makes it"
    worlds = build_worlds(tmp_path / "worlds", http_server, git_world)
    repo = snapshot_repository(tmp_path / "repo")
    python3_shim(tmp_path / "bin", provision_dependencies("flagtree-cpu", tmp_path / "deps"))
    blocks = walkthrough_blocks((repo / "README.md").read_text())
    script = "\n".join([
        "set -euo pipefail", NEXT_STATUS,
        *(recipe_step(name, body, worlds.gitconfig[name.removeprefix("recipe-")],
                      worlds.mirrors[name.removeprefix("recipe-")]) if name.startswith("recipe-")
          else f"echo '### {name}' >&2\n{body}" for name, body in blocks),
    ])
    (tmp_path / "home").mkdir()
    env = {**os.environ, "REPO_URL": str(repo), "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
           "PIP_NO_INDEX": "1", "PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": str(TEST_WHEELS),
           "PIP_DISABLE_PIP_VERSION_CHECK": "1", "GIT_CONFIG_GLOBAL": str(worlds.gitconfig["flagtree-cpu-arm64"]),
           "FLAGTREE_CPU_RECIPES": str(worlds.recipes), "FLAGTREE_CPU_MIRRORS": worlds.mirrors["flagtree-cpu-arm64"]}
    env.pop("VIRTUAL_ENV", None)
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-8000:]
    clone = tmp_path / "flagtree-cpu"
    assert (clone / ".venv" / "bin" / "flagtree-cpu").is_file()
    assert all(recipe in done.stdout for recipe in RECIPES)  # recipe list: its table on stdout
    assert (clone / "flagtree-workspace" / "FlagTree" / "third_party" / "triton-cpu").is_dir()
    for recipe in RECIPES:
        assert f"### copied from next: flagtree-cpu -w {clone}/" in done.stderr
        status = result_of((clone / f"{recipe}.status.json").read_text())
        assert status["recipe"] == recipe, status
        items = [(i["area"], i["subject"], i["state"]) for i in status["items"]]
        # what --skip-build prepares is current; the venv, the build and the validation are left for later
        prepared = [i for i in items if i[0] in ("sources", "artifacts", "links")]
        assert prepared and all(state == "ok" for *_, state in prepared), (recipe, items)
