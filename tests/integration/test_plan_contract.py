"""One truth about the workspace: what `setup --dry-run` plans is what `setup` then does, and
`status`, `doctor` and build's preflight say the same about each item.

For each workspace state below, the test makes the state with the real tools (a full setup against
the git world and the loopback HTTP server, then one change; the setup is made once per module and
restored for each state, at the same paths), then asks every reader:

- the dry run: per stage, what it would report (``will``: ok, created, updated, skipped) or where it
  would stop and with which exit code;
- `setup` itself: what each stage reported (its summary), or where it stopped;
- `status`: which items are not current;
- `doctor`: its workspace checks (sources, links, LLVM tree, last build);
- build's preflight: which inputs it would refuse to build without.

Two of these states were disagreements before the plans were one: a changed artifact URL with the
same sha256 (fetch and status said ok, doctor failed, build refused — telling the user to run the
fetch that did nothing), and a changed ref (status and doctor said current; sync moved the checkout).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from typer.testing import Result

from flagtree_cpu_build.context import ContextRequest, open_context
from flagtree_cpu_build.extract import STAMP_NAME
from flagtree_cpu_build.stages.build.plan import missing_inputs
from flagtree_cpu_build.ui import UI
from tests.support.cli import ONE_KERNEL, Workspace, new_workspace
from tests.support.envelope import result_of
from tests.support.gitworld import GitWorld, git, private_copy
from tests.support.hermetic import make_hermetic
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import TOP, Tarball, llvm_tarball
from tests.support.venvs import PREREQUISITES, TOOLS, build_venv

# one worker runs every state (under --dist loadgroup), so the one setup they start from is made once; marked by
# hand because the states ask for set_up_once through request.getfixturevalue, which tests/support/xdistgroups.py
# cannot see (without the mark each worker made the setup again)
pytestmark = pytest.mark.xdist_group("tests/integration/test_plan_contract.py")

RUNTIME = "python.runtime=[torch>=2.0, numpy]"
LLVM_PATH = f"/public/llvm-builds/{TOP}.tar.gz"
MIRROR_PATH = f"/mirror/llvm-builds/{TOP}.tar.gz"
STAGE_OF_AREA = {"sources": "sources", "artifacts": "artifacts", "links": "links", "python": "python",
                 "build": "build", "validation": "validate"}
DOCTOR_CHECK_OF_AREA = {"sources": "workspace.sources", "artifacts": "workspace.artifacts", "links": "workspace.links",
                        "build": "workspace.build"}
ORDER = ["preflight", "sources", "artifacts", "links", "python", "build", "validate"]
RANK = {"ok": 0, "skipped": 0, "updated": 1, "created": 2, "stop": 3}


@dataclass
class ContractWorld:
    ws: Workspace
    python: Path
    server: LoopbackHTTPServer
    world: GitWorld
    tarball: Tarball
    sets: list[str] = field(default_factory=list)  # the recipe change this state makes

    def run(self, *args: str) -> Result:
        return self.ws.run(*args, sets=tuple(self.sets))

    def setup(self, *args: str) -> Result:
        return self.run("setup", "--ignore-host", "--python", str(self.python), *args)

    @property
    def llvm(self) -> Path:
        return Path.home() / ".triton" / "llvm" / TOP

    def preflight_of_build(self) -> list[str]:
        argv = self.ws.argv(sets=tuple(self.sets))
        overrides = [argv[i + 1] for i, a in enumerate(argv) if a == "--set"]
        ctx = open_context(ContextRequest(recipe="flagtree-cpu-arm64", overrides=tuple(overrides),
                                          workdir=str(self.ws.root), python=self.python), UI())
        return missing_inputs(ctx)


# --- the states -------------------------------------------------------------------------------------------------


def fresh(cw: ContractWorld) -> None:
    """Nothing there yet."""


def all_current(cw: ContractWorld) -> None:
    """Set up (every state below starts from one setup: ``set_up_once``)."""


def pin_moved(cw: ContractWorld) -> None:
    cw.sets.append(f"sources.flagtree.commit={cw.world['flagtree'].commits['tip']}")


def ref_changed(cw: ContractWorld) -> None:
    """flagtree-cpu follows a ref (no commit pin); the recipe now names another branch, one commit ahead."""
    repo = cw.world["flagtree-cpu"]
    work = cw.world.root / "release-branch"
    git("clone", "--quiet", repo.url, work, env=cw.world.env)
    git("push", "--quiet", "origin", "HEAD:refs/heads/release", cwd=work, env=cw.world.env)
    cw.world.advance("flagtree-cpu", "release", "RELEASE.md", "release branch\n")
    cw.sets.append("sources.flagtree-cpu.ref=release")


def url_changed_same_sha(cw: ContractWorld) -> None:
    """The recipe moves to another URL (a mirror, an edited canonical URL) for the very same file."""
    url = cw.server.serve(MIRROR_PATH, cw.tarball.data)
    cw.sets += [f"artifacts.llvm.url={url}"]


def artifact_missing(cw: ContractWorld) -> None:
    """The published LLVM tree was deleted; the download cache still has the tarball."""
    shutil.rmtree(cw.llvm)


def tree_foreign(cw: ContractWorld) -> None:
    """A tree flagtree-cpu did not publish stands where the LLVM goes, and no tarball is at hand to check it."""
    (cw.llvm / STAMP_NAME).unlink()
    shutil.rmtree(Path.home() / ".cache" / "flagtree-cpu" / "downloads")


def build_stale(cw: ContractWorld) -> None:
    cw.sets.append("build.env.set.FLAGTREE_CONTRACT_TEST=1")


def validation_stale(cw: ContractWorld) -> None:
    last = cw.ws.root / ".flagtree-cpu" / "last-validation.json"
    report = json.loads(last.read_text())
    last.write_text(json.dumps({**report, "key": "0" * 64}))  # what it validated is not this build any more


def _set_up(cw: ContractWorld) -> None:
    result = cw.setup()
    assert result.exit_code == 0, result.stderr


STATES: dict[str, Callable[[ContractWorld], None]] = {
    f.__name__: f for f in (fresh, all_current, pin_moved, ref_changed, url_changed_same_sha, artifact_missing,
                            tree_foreign, build_stale, validation_stale)}

# What each state must plan (so the readers cannot agree on a wrong answer): per stage, or "stop" and the
# exit code. Stages not named must plan "ok".
EXPECTED: dict[str, dict[str, str | int]] = {
    "fresh": {"sources": "created", "artifacts": "created", "links": "created", "build": "created",
              "validate": "created"},
    "all_current": {},
    "pin_moved": {"sources": "updated", "build": "updated", "validate": "created"},
    "ref_changed": {"sources": "updated", "build": "updated", "validate": "created"},
    "url_changed_same_sha": {},  # the same bytes: nothing to download, nothing to rebuild
    "artifact_missing": {"artifacts": "created"},  # unpacked again from the cache; the build stays current
    "tree_foreign": {"stop": "artifacts", "exit_code": 4},
    "build_stale": {"build": "updated", "validate": "created"},
    "validation_stale": {"validate": "created"},
}


def _contract_world(world: GitWorld, root: Path, server: LoopbackHTTPServer) -> ContractWorld:
    tarball = llvm_tarball()
    url = server.serve(LLVM_PATH, tarball.data)
    ws = new_workspace(world, root / "ws", always_set=(f"artifacts.llvm.url={url}",
                                                       f"artifacts.llvm.sha256={tarball.sha256}",
                                                       PREREQUISITES, RUNTIME, ONE_KERNEL))
    venv = root / "venv"
    python = venv / "bin" / "python" if venv.exists() else build_venv(venv, [*TOOLS, "torch", "numpy"])
    return ContractWorld(ws, python, server, world, tarball)


@dataclass
class SetUp:
    """One full setup, made once per module (per worker) at ``live`` and kept as a copy; each state starts from
    that copy put back at the same place, so every absolute path the setup recorded (workspace, venv, HOME, the
    world's bare repositories) holds."""

    live: Path
    copy: Path
    server: LoopbackHTTPServer
    world: GitWorld

    def restore(self, monkeypatch: pytest.MonkeyPatch) -> ContractWorld:
        shutil.rmtree(self.live)
        # cp -a: hard links (the LLVM tree has one), symlinks (the venv's), modes and times as setup left them
        subprocess.run(["cp", "-a", str(self.copy), str(self.live)], check=True)
        make_hermetic(monkeypatch, self.live / "home")
        monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(self.world.gitconfig))
        world = GitWorld(self.world.root, {name: replace(repo, commits=dict(repo.commits))
                                           for name, repo in self.world.repos.items()},
                         self.world.gitconfig, dict(self.world.env))
        return _contract_world(world, self.live, self.server)


@pytest.fixture(scope="module")
def set_up_once(git_world: GitWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SetUp]:
    live = tmp_path_factory.mktemp("contract")
    server = LoopbackHTTPServer()
    try:
        with pytest.MonkeyPatch.context() as monkeypatch:
            (live / "home").mkdir()
            make_hermetic(monkeypatch, live / "home")
            world = private_copy(git_world, live / "world")
            monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(world.gitconfig))
            _set_up(_contract_world(world, live, server))
        copy = live.with_name(f"{live.name}-as-set-up")
        subprocess.run(["cp", "-a", str(live), str(copy)], check=True)
        yield SetUp(live, copy, server, world)
    finally:
        server.close()


@pytest.fixture
def cw(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ContractWorld:
    """The state's starting point: nothing (``fresh``), or the module's one setup, restored for this test."""
    if request.node.callspec.params["state"] == "fresh":
        world = request.getfixturevalue("world")
        return _contract_world(world, tmp_path, request.getfixturevalue("http_server"))
    return request.getfixturevalue("set_up_once").restore(monkeypatch)


# --- the contract -----------------------------------------------------------------------------------------------


def planned_stages(plan: dict) -> tuple[dict[str, str], dict | None]:
    """Per stage, what the dry run says it would report; and where it says setup would stop."""
    wills: dict[str, str] = {}
    for item in plan["items"]:
        stage = STAGE_OF_AREA[item["area"]]
        if RANK[item["will"]] >= RANK.get(wills.get(stage, "ok"), 0):
            wills[stage] = item["will"]
    return wills, plan["would_stop"]


@pytest.mark.parametrize("state", list(STATES))
def test_the_dry_run_status_doctor_and_build_agree_with_what_setup_does(cw: ContractWorld, state: str) -> None:
    STATES[state](cw)

    dry = cw.setup("--dry-run", "--json")
    plan = result_of(dry.stdout)
    wills, stop = planned_stages(plan)
    expected = EXPECTED[state]
    if "stop" in expected:
        assert stop is not None and (stop["stage"], stop["exit_code"]) == (expected["stop"], expected["exit_code"])
    else:
        assert stop is None, (state, stop)
        assert {s: w for s, w in wills.items() if w != "ok"} == expected, (state, wills)
    not_current = {(i["area"], i["subject"]) for i in plan["items"] if i["will"] not in ("ok", "skipped")}

    # status: the same items are not current (it reads the same plans, without the network)
    status = result_of(cw.run("status", "--python", str(cw.python), "--json").stdout)
    assert {(i["area"], i["subject"]) for i in status["items"] if i["state"] not in ("ok", "skipped")} \
        == not_current, state

    # doctor's workspace checks fail or warn exactly where an item is not current
    only = [arg for check in DOCTOR_CHECK_OF_AREA.values() for arg in ("--check", check)]
    checks = {c["id"]: c for c in result_of(cw.run("doctor", "--offline", "--python", str(cw.python), *only,
                                                         "--json").stdout)["checks"]}
    for area, check in DOCTOR_CHECK_OF_AREA.items():
        behind = any(a == area for a, _ in not_current)
        status_of_check = checks[check]["status"]
        if state == "fresh":
            assert status_of_check == "skip", (state, check, checks[check])
        elif area == "build" and any(a in ("sources", "artifacts") for a, _ in not_current):
            assert status_of_check in ("warn", "fail", "ok"), (state, check)  # judged against the tree as it is
        else:
            assert (status_of_check in ("fail", "warn")) == behind, (state, check, checks[check], not_current)

    # build's preflight refuses exactly when a source or an artifact is not current
    refused = cw.preflight_of_build()
    assert bool(refused) == any(a in ("sources", "artifacts") for a, _ in not_current), (state, refused)

    # setup does what the dry run said, stage by stage, and stops where it said
    result = cw.setup("--json")
    report = result_of(result.stdout)
    done = {s["stage"]: s["status"] for s in report["stages"]}
    if stop is not None:
        assert result.exit_code == stop["exit_code"], (state, result.stderr)
        assert done[stop["stage"] if stop["stage"] != "validation" else "validate"] == "failed", (state, done)
        checked = ORDER[1:ORDER.index(STAGE_OF_AREA.get(stop["stage"], stop["stage"]))]
    else:
        assert result.exit_code == 0, (state, result.stderr)
        checked = ORDER[1:]
    for stage in checked:
        assert done[stage] == wills.get(stage, "skipped"), (state, stage, done, wills)
    # item by item where the plan's subjects are the stage's own (each source, each artifact)
    actions = {(s["stage"], a["subject"]): a["status"] for s in report["stages"] for a in s["actions"]}
    for item in plan["items"]:
        stage = STAGE_OF_AREA[item["area"]]
        if item["area"] in ("sources", "artifacts") and stage in checked:
            assert actions[(stage, item["subject"])] == item["will"], (state, item, actions)
    if stop is None:
        again = result_of(cw.setup("--dry-run", "--json").stdout)
        assert all(i["will"] in ("ok", "skipped") for i in again["items"]), (state, again["items"])
