"""`flagtree-cpu clean`: frees what the tool made and no longer needs — half-made folders of dead runs, the
download cache, trees of an older pin — and never a tree it did not publish, the recipe's own tree, or
anything another run is using."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.locking import exclusive
from tests.support.envelope import result_of
from tests.support.fetching import PATH_SET, URL_PATH, cache_root, fetch, fetch_process, triton_llvm, wait_for
from tests.support.httpserver import Faults, LoopbackHTTPServer
from tests.support.leftovers import killed_partial, old_partial
from tests.support.tarballs import TOP, llvm_tarball

OLD = "llvm-0ld0ld00-ubuntu-arm64"


def clean(tmp_path: Path, url: str, *args: str) -> Result:
    return CliRunner().invoke(app, ["-w", str(tmp_path / "ws"), "--set", f"artifacts.llvm.url={url}", "--set", PATH_SET,
                                    "clean", *args])


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def machine(tmp_path: Path, http_server: LoopbackHTTPServer) -> dict[str, object]:
    """A machine that has been used for a while: the current LLVM published, an older pin's LLVM
    published, a tree unpacked by hand, setup.py's link, a half-made folder of a SIGKILLed run, an
    unfinished download."""
    current, old = llvm_tarball(seed=1), llvm_tarball(seed=2)
    url = http_server.serve(URL_PATH, current.data)
    old_url = http_server.serve(f"/old/{OLD}.tar.gz", old.data)
    assert fetch(tmp_path, url).exit_code == 0
    published_old = fetch(tmp_path, old_url, sets=(f"artifacts.llvm.path={{triton_home}}/.triton/llvm/{OLD}",))
    assert published_old.exit_code == 0, published_old.stderr
    by_hand = triton_llvm() / "llvm-handmade"
    (by_hand / "bin").mkdir(parents=True)
    (by_hand / "bin" / "clang").write_text("mine\n")
    (triton_llvm() / "llvm-ubuntu-arm64").symlink_to(TOP)  # as FlagTree's setup.py leaves it
    # an unfinished download of a third file
    slow = http_server.serve("/slow/llvm-slow.tar.gz", llvm_tarball(seed=3).data, Faults(hold_after=100_000))
    # in another workspace, into a folder of its own: the published tree at TOP is workspace ws's to replace
    process = fetch_process(tmp_path, slow, workspace="other-ws",
                            sets=("artifacts.llvm.path={triton_home}/.triton/llvm/llvm-slow",))
    wait_for(lambda: [p for p in cache_root().glob("partial/*.part") if p.stat().st_size > 50_000], 20, "a part")
    process.send_signal(signal.SIGINT)
    # generous: only a hang hits it (one CI run on 2 busy cores saw this stop take more than 30 s)
    _out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    # last, as every fetch sweeps them: a run killed while unpacking left its half-made folder, with the
    # owner record of a process now gone
    killed = subprocess.Popen([sys.executable, "-c", "import sys, time; from pathlib import Path; "
                               "from flagtree_cpu_build.partials import PartialFolder; "
                               "f = PartialFolder.create(Path(sys.argv[1])); f.tree.mkdir(); "
                               "(f.tree / 'x').write_bytes(b'0' * 100000); print('made', flush=True); time.sleep(60)",
                               str(triton_llvm() / TOP)], stdout=subprocess.PIPE, text=True)
    assert killed.stdout is not None and killed.stdout.readline().strip() == "made"
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    return {"url": url, "by_hand": snapshot(by_hand)}


def test_dry_run_lists_everything_with_sizes_and_removes_nothing(tmp_path: Path, machine: dict) -> None:
    before = sorted(str(p) for p in Path(os.environ["HOME"]).rglob("*"))
    result = clean(tmp_path, machine["url"], "--all", "--dry-run", "--json")
    assert result.exit_code == 0, result.stderr
    report = result_of(result.stdout)
    assert report["schema"] == "flagtree-cpu/clean/v1" and report["dry_run"] is True
    plan = {(i["kind"], Path(i["path"]).name): i for i in report["items"]}
    assert plan[("tree", OLD)]["removed"] is True and plan[("tree", OLD)]["bytes"] > 0
    assert plan[("tree", TOP)]["removed"] is False and "used by recipe" in plan[("tree", TOP)]["reason"]
    assert plan[("tree", "llvm-handmade")]["removed"] is False
    assert "not published by flagtree-cpu" in plan[("tree", "llvm-handmade")]["reason"]
    assert not any(name == "llvm-ubuntu-arm64" for _kind, name in plan)  # a link is not a tree
    assert sum(kind == "download" for kind, _ in plan) == 2 and sum(kind == "partial download" for kind, _ in plan) == 1
    assert [kind for kind, _ in plan].count("half-made folder") == 1
    assert report["freed_bytes"] == sum(i["bytes"] for i in report["items"] if i["removed"]) > 0
    assert sorted(str(p) for p in Path(os.environ["HOME"]).rglob("*")) == before


def test_plain_clean_removes_only_what_dead_runs_left(tmp_path: Path, machine: dict) -> None:
    result = clean(tmp_path, machine["url"])
    assert result.exit_code == 0, result.stderr
    assert not list(triton_llvm().glob(f".{TOP}.flagtree-cpu-partial-*"))
    assert (triton_llvm() / OLD).is_dir()
    assert list(cache_root().glob("blobs/*")) and list(cache_root().glob("partial/*.part"))
    assert "removed 1 item" in result.stderr


def test_clean_all_frees_the_cache_and_old_trees_and_keeps_everything_else(tmp_path: Path, machine: dict,
                                                                           http_server: LoopbackHTTPServer) -> None:
    current = snapshot(triton_llvm() / TOP)
    result = clean(tmp_path, machine["url"], "--all")
    assert result.exit_code == 0, result.stderr
    assert not (triton_llvm() / OLD).exists()
    assert not [p for p in cache_root().glob("blobs/*")] and not list(cache_root().glob("partial/*.part*"))
    assert not [p for p in cache_root().glob("urls/*")]  # no note points at a removed tarball
    assert (cache_root() / "CACHEDIR.TAG").is_file()
    assert snapshot(triton_llvm() / TOP) == current
    assert snapshot(triton_llvm() / "llvm-handmade") == machine["by_hand"]
    assert os.readlink(triton_llvm() / "llvm-ubuntu-arm64") == TOP
    requests = len(http_server.requests)
    again = fetch(tmp_path, machine["url"])  # the recipe's tree is still current: no download
    assert again.exit_code == 0 and len(http_server.requests) == requests
    assert "nothing to clean" in clean(tmp_path, machine["url"], "--all").stderr


def test_what_another_run_is_using_is_left_alone(tmp_path: Path, machine: dict) -> None:
    from flagtree_cpu_build.artifact_cache import url_key

    lock = cache_root() / "locks" / f"publish-{url_key(str(triton_llvm() / OLD))}.lock"
    with exclusive(lock):  # another run is publishing into that tree right now
        result = clean(tmp_path, machine["url"], "--trees", "--json")
    assert result.exit_code == 0, result.stderr
    item = next(i for i in result_of(result.stdout)["items"] if Path(i["path"]).name == OLD)
    assert item["removed"] is False and "in use by flagtree-cpu pid" in item["reason"]
    assert (triton_llvm() / OLD).is_dir()


# --- half-made clones and git-cache mirrors: this version's and the previous release's -------------------------

NOWHERE = "http://127.0.0.1:9/llvm.tar.gz"  # clean reads the recipe, never the network


def test_clean_removes_half_made_clones_and_mirrors_of_killed_runs_old_names_too(tmp_path: Path) -> None:
    ws, state = tmp_path / "ws", tmp_path / "ws" / ".flagtree-cpu"
    left = [
        old_partial(ws / ".FlagTree.flagtree-cpu-partial"),  # a clone the previous release left
        killed_partial(ws / "FlagTree" / "third_party" / "triton-cpu"),  # a clone this version's killed run left
        old_partial(state / "bundle" / "git" / "FlagTree-0123456789ab.git.partial"),  # a mirror bundle import left
        killed_partial(state / "bundle-create" / "git" / "sleef-0123456789ab.git"),  # and bundle create
    ]
    kept = [old_partial(ws / ".notes.flagtree-cpu-partial"),  # no source of the recipe is called notes
            old_partial(ws / "FlagTree.partial")]  # not a name flagtree-cpu ever gave a clone
    planned = clean(tmp_path, NOWHERE, "--dry-run", "--json")
    assert planned.exit_code == 0, planned.stderr
    items = [i for i in result_of(planned.stdout)["items"] if i["kind"] == "half-made folder"]
    assert sorted(Path(i["path"]) for i in items) == sorted(left) and all(i["removed"] for i in items)
    assert all(p.exists() for p in left)

    result = clean(tmp_path, NOWHERE)
    assert result.exit_code == 0, result.stderr
    assert not [p for p in left if os.path.lexists(p)] and all(p.is_dir() for p in kept)
    assert not list(ws.rglob("*flagtree-cpu-removing*"))


def test_clean_leaves_a_half_made_clone_that_another_run_or_a_git_still_uses(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    old = old_partial(ws / ".FlagTree.flagtree-cpu-partial")
    killed = killed_partial(ws / "FlagTree" / "third_party" / "triton-cpu")
    writer = subprocess.Popen(["sleep", "120"], cwd=killed)  # as a git a killed run left behind
    try:
        with exclusive(ws / ".flagtree-cpu" / "workspace.lock"):  # a sync holds the workspace
            result = clean(tmp_path, NOWHERE, "--json")
        assert result.exit_code == 0, result.stderr
        reasons = {Path(i["path"]): i["reason"] for i in result_of(result.stdout)["items"] if not i["removed"]}
        assert "in use by flagtree-cpu pid" in reasons[old]
        assert f"still being written by pid {writer.pid}" in reasons[killed] and f"kill {writer.pid}" in reasons[killed]
        assert old.is_dir() and killed.is_dir()
    finally:
        writer.kill()
        writer.wait()
    assert clean(tmp_path, NOWHERE).exit_code == 0
    assert not old.exists() and not killed.exists()
