"""The README's walk-through, run as written: its shell blocks marked `<!-- walkthrough: NAME -->`, in order, in one
bash, from `git clone` to a set-up workspace (`setup --skip-build`) and its `status`.

What is real: the clone (`git clone "$REPO_URL"`, of a snapshot of this working tree: its tracked and untracked,
not ignored, files committed to a local repository), `python3 -m venv`, `pip install .` building and installing
the project into that venv, the installed console script on PATH, and every flagtree-cpu command of the blocks.

What is substituted, because this machine has no network beyond 127.0.0.1:
- pip has no index (`PIP_NO_INDEX=1`, `PIP_CONFIG_FILE=/dev/null`): the isolated build finds setuptools and wheel
  in the suite's own wheel folder (`PIP_FIND_LINKS`), and the run-time dependencies (typer, rich, pyyaml,
  requests, packaging) are the test venv's own, added to the new venv by a `.pth` file that the `python3` on
  the blocks' PATH writes right after `python3 -m venv` (a shim around the suite's interpreter);
- GitHub is the test harness's git world (git's own `url.<world>.insteadOf=https://github.com/` rule, through
  `GIT_CONFIG_GLOBAL`), and the LLVM prebuilt is a stand-in tarball on the loopback HTTP server;
- `setup` and `status` run with the `--set` overrides the world needs (FlagTree's pin is the fixture's commit,
  the LLVM URL the loopback one), added by a shell function named `flagtree-cpu` in front of the real one;
  every other command of the blocks runs unchanged.
Only the default recipe's setup is walked; the other recipes' `setup --skip-build` need their own worlds
(tests/support/worlds/) and are covered by their own test files.
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
from tests.support.tarballs import TOP, llvm_tarball
from tests.support.venvs import TEST_WHEELS, provision_dependencies

pytestmark = pytest.mark.slow

MARK = re.compile(r"<!-- walkthrough: ([\w-]+) -->\n```sh\n(.*?)```", re.S)


def walkthrough_blocks(readme: str) -> list[tuple[str, str]]:
    return MARK.findall(readme)


def test_the_readme_marks_its_walkthrough() -> None:
    names = [name for name, _ in walkthrough_blocks((REPO_ROOT / "README.md").read_text())]
    assert names == ["install", "path", "tour", "workspace"]


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


def test_the_readme_walkthrough_from_clone_to_a_set_up_workspace(
        github_redirect: GitWorld, tmp_path: Path, http_server: LoopbackHTTPServer) -> None:
    assert TEST_WHEELS.is_dir(), f"the suite's wheel folder {TEST_WHEELS} is missing: `make test-env` makes it"
    world = github_redirect
    repo = snapshot_repository(tmp_path / "repo")
    python3_shim(tmp_path / "bin", provision_dependencies("flagtree-cpu", tmp_path / "deps"))
    llvm_url = http_server.serve(f"/public/llvm-builds/{TOP}.tar.gz", llvm_tarball().data)
    sets = " ".join(f"--set {shlex.quote(s)}" for s in (
        f"sources.flagtree.commit={world['flagtree'].commits['cpu-backend']}", f"artifacts.llvm.url={llvm_url}"))
    blocks = walkthrough_blocks((repo / "README.md").read_text())
    script = "\n".join([
        "set -euo pipefail",
        "flagtree-cpu() { case \"$1\" in setup|status) command flagtree-cpu \"$@\" " + sets + ";; "
        "*) command flagtree-cpu \"$@\";; esac; }",
        *(f"echo '### {name}' >&2\n{body}" for name, body in blocks),
        "flagtree-cpu status --json > status.json",
    ])
    (tmp_path / "home").mkdir()
    env = {**os.environ, "REPO_URL": str(repo), "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
           "PIP_NO_INDEX": "1", "PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": str(TEST_WHEELS),
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("VIRTUAL_ENV", None)
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    clone = tmp_path / "flagtree-cpu"
    assert (clone / ".venv" / "bin" / "flagtree-cpu").is_file()
    said = done.stdout + done.stderr
    assert "triton-cpu" in said and "flagtree-cpu-arm64" in said  # recipe list (its table: stderr today, stdout soon)
    workspace = clone / "flagtree-workspace"
    assert (workspace / "FlagTree" / "third_party" / "triton-cpu").is_dir()
    status = result_of((clone / "status.json").read_text())
    states = {i["area"]: i["state"] for i in status["items"]}
    # what --skip-build prepares is current; the venv, the build and the validation are what it leaves for later
    assert {area: states[area] for area in ("sources", "artifacts", "links")} == dict.fromkeys(
        ("sources", "artifacts", "links"), "ok"), status["items"]
    assert "### workspace" in done.stderr and "next:" in done.stderr  # setup's own summary ran to its end
