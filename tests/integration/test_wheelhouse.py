"""A fleet's wheelhouse: workspace A builds and publishes, workspace B installs that build without compiling.

Both workspaces are set up from the same git repositories and recipe, in different folders with their own
target venvs and HOMEs, so every path in their stamps differs; the fixture FlagTree's setup.py records each
build it runs (B's record must stay empty when it takes A's wheel). Most tests install from one wheelhouse A
published once for the module (each gets a copy); the timing test publishes its own. The wheelhouse is a
folder, or that folder served by the loopback HTTP server.
"""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import Result

from flagtree_cpu_build import wheelhouse as wh
from flagtree_cpu_build.wheelhouse import MANIFEST
from tests.support.cli import Workspace, new_workspace, ready_to_build
from tests.support.envelope import result_of
from tests.support.fetching import wait_for
from tests.support.gitworld import GitWorld
from tests.support.httpserver import Faults, LoopbackHTTPServer
from tests.support.tarballs import TOP, llvm_tarball
from tests.support.venvs import PREREQUISITES, TOOLS, build_venv

Published = tuple[Path, dict]  # a wheelhouse folder, and the build action of the workspace that published into it
BUILD_COMMANDS = {"editable_wheel", "bdist_wheel", "develop", "build_ext", "build"}


@dataclass
class Machine:
    ws: Workspace
    python: Path
    record: Path

    def build(self, monkeypatch: pytest.MonkeyPatch, *args: str, sets: tuple[str, ...] = ()) -> Result:
        monkeypatch.setenv("FIXTURE_BUILD_RECORD", str(self.record))
        return self.ws.run("--json", "build", "--ignore-host", "--python", str(self.python), *args, sets=sets)

    def builds_run(self) -> list[list[str]]:
        if not self.record.exists():
            return []
        runs = [json.loads(line)["argv"] for line in self.record.read_text().splitlines()]
        return [argv for argv in runs if BUILD_COMMANDS & set(argv[1:])]

    def installed_triton(self) -> str | None:
        """Where the target interpreter imports triton from (None: it cannot)."""
        out = subprocess.run([str(self.python), "-c", "import triton, os; print(os.path.dirname(triton.__file__))"],
                             capture_output=True, text=True, cwd=self.record.parent)
        return out.stdout.strip() if out.returncode == 0 else None


@pytest.fixture
def machines(world: GitWorld, tmp_path: Path, http_server: LoopbackHTTPServer,
             monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Machine]:
    url = http_server.serve(f"/public/llvm-builds/{TOP}.tar.gz", llvm_tarball().data)

    def make(name: str) -> Machine:
        return Machine(ready_to_build(world, tmp_path / name, url), build_venv(tmp_path / f"{name}-venv", TOOLS),
                       tmp_path / f"{name}-record.jsonl")

    return make


def action(result: Result) -> dict:
    assert result.exit_code == 0, result.stdout + result.stderr
    [found] = result_of(result.stdout)["actions"]
    return found


def published(machines: Callable[[str], Machine], monkeypatch: pytest.MonkeyPatch,
              wheelhouse: Path) -> tuple[Machine, dict]:
    """Workspace A builds and publishes."""
    a = machines("a")
    built = action(a.build(monkeypatch, "--publish", str(wheelhouse)))
    assert len(a.builds_run()) == 1 and built["published"]["status"] == "published"
    return a, built


@pytest.fixture(scope="module")
def _published_once(git_world: GitWorld, tmp_path_factory: pytest.TempPathFactory) -> Published:
    """Workspace A's build, published once for the tests that only need a wheelhouse to install from (A's own
    machine, HOME and git world are not theirs: the build key must carry none of them)."""
    from tests.support.hermetic import make_hermetic

    root = tmp_path_factory.mktemp("published")
    (root / "home").mkdir()
    server = LoopbackHTTPServer()
    try:
        with pytest.MonkeyPatch.context() as mp:
            make_hermetic(mp, root / "home")
            mp.setenv("GIT_CONFIG_GLOBAL", str(git_world.gitconfig))
            mp.setenv("FIXTURE_BUILD_RECORD", str(root / "record.jsonl"))
            url = server.serve(f"/public/llvm-builds/{TOP}.tar.gz", llvm_tarball().data)
            ws = ready_to_build(git_world, root / "a", url)
            python = build_venv(root / "a-venv", TOOLS)
            built = action(ws.run("--json", "build", "--ignore-host", "--python", str(python), "--publish",
                                  str(root / "wheelhouse")))
        assert built["published"]["status"] == "published"
        return root / "wheelhouse", built
    finally:
        server.close()


@pytest.fixture
def published_wheelhouse(_published_once: Published, tmp_path: Path) -> Published:
    """A copy of the module's published wheelhouse this test may change, and A's build action."""
    import shutil

    folder, built = _published_once
    shutil.copytree(folder, tmp_path / "wheelhouse")
    return tmp_path / "wheelhouse", built


def test_b_installs_what_a_published_without_building(machines, monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    wheelhouse = tmp_path / "wheelhouse"
    a, built = published(machines, monkeypatch, wheelhouse)
    manifest = json.loads((wheelhouse / MANIFEST).read_text())
    [entry] = manifest["wheels"]
    wheel = wheelhouse / entry["file"]
    assert entry["sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest() == built["published"]["sha256"]
    assert entry["recipe"] == "flagtree-cpu-arm64" and entry["lock"]["sources"]["flagtree"]
    assert entry["class"]["python"].startswith("cp3") and entry["built_on"]["host"]
    assert wheel.name.startswith(f"triton-3.3.0-1.{entry['stamp'][:12]}.{entry['class_id'][:8]}-")  # build 1
    assert str(a.ws.root) not in json.dumps(entry["key"]), "the key carries A's own paths"
    index = (wheelhouse / "simple" / "triton" / "index.html").read_text()
    assert f'href="../../{entry["file"]}#sha256={entry["sha256"]}"' in index
    assert '<a href="triton/">' in (wheelhouse / "simple" / "index.html").read_text()

    b = machines("b")
    result = b.build(monkeypatch, "--wheelhouse", str(wheelhouse))
    taken = action(result)
    assert b.builds_run() == [], "B ran a build"
    assert "installed from the wheelhouse" in taken["detail"] and taken["wheelhouse"]["sha256"] == entry["sha256"]
    where = b.installed_triton()
    site = b.python.parents[1] / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    assert where == str(site / "triton")  # a wheel, not an editable install of a source tree
    # how much faster B is than A's build: bench/bench_wheelhouse.py measures it (a test asserts no speed)

    again = action(b.build(monkeypatch, "--wheelhouse", str(wheelhouse)))
    assert again["detail"] == "up to date" and again["wheelhouse"]["wheelhouse"] == str(wheelhouse)
    status = b.ws.run("--json", "status", "--python", str(b.python))
    [item] = [i for i in result_of(status.stdout)["items"] if i["area"] == "build"]
    assert item["state"] == "ok" and f"installed from the wheelhouse {wheelhouse}" in item["detail"]

    before = (wheelhouse / MANIFEST).read_bytes()
    republished = action(a.build(monkeypatch, "--publish", str(wheelhouse)))
    assert republished["detail"] == "up to date" and republished["published"]["status"] == "already published"
    assert (wheelhouse / MANIFEST).read_bytes() == before and len(a.builds_run()) == 1


def test_a_changed_stamp_input_builds_and_says_what_differs(
        machines, published_wheelhouse: Published, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    wheelhouse, built = published_wheelhouse
    b = machines("b")
    result = b.build(monkeypatch, "--wheelhouse", str(wheelhouse), sets=("build.env.set.TRITON_BUILD_PROTON=ON",))
    built = action(result)
    assert len(b.builds_run()) == 1 and built["status"] == "created"
    assert "no published build fits" in result.stderr and "env.TRITON_BUILD_PROTON OFF -> ON" in result.stderr


def test_a_tampered_wheel_is_refused_and_nothing_is_installed(
        machines, published_wheelhouse: Published, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    wheelhouse, built = published_wheelhouse
    [wheel] = (wheelhouse / "wheels").glob("*.whl")
    data = bytearray(wheel.read_bytes())
    data[len(data) // 2] ^= 0xFF
    wheel.write_bytes(bytes(data))
    b = machines("b")
    result = b.build(monkeypatch, "--wheelhouse", str(wheelhouse))
    assert result.exit_code == 4, result.stderr
    assert "is not the file its manifest lists" in result.stderr and "nothing was installed" in result.stderr
    assert b.installed_triton() is None and b.builds_run() == []
    assert not (b.ws.root / ".flagtree-cpu" / "build-editable.json").exists()
    assert not (b.ws.root / ".flagtree-cpu" / "wheelhouse-downloads").exists()  # no download left behind


def serve_folder(server: LoopbackHTTPServer, folder: Path, prefix: str, faults: Faults | None = None) -> str:
    for path in folder.rglob("*"):
        if path.is_file():
            server.serve(f"{prefix}/{path.relative_to(folder).as_posix()}", path.read_bytes(),
                         faults if path.suffix == ".whl" else None)
    return server.url(prefix + "/")


def test_the_same_wheelhouse_served_over_http(
        machines, published_wheelhouse: Published, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        http_server: LoopbackHTTPServer) -> None:
    wheelhouse, built = published_wheelhouse
    url = serve_folder(http_server, wheelhouse, "/fleet/wheels-house")
    b = machines("b")
    res = b.build(monkeypatch, "--wheelhouse", url)
    taken = action(res)
    assert b.builds_run() == [] and "installed from the wheelhouse" in taken["detail"], res.stderr
    assert b.installed_triton() is not None
    assert http_server.requests_for(f"/fleet/wheels-house/{MANIFEST}")


def test_a_wheelhouse_that_cannot_be_read_is_one_warning_and_a_build(machines, monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    (wheelhouse / MANIFEST).write_text('{"schema": "flagtree-cpu/wheelhouse/v1", "wheels": [')  # cut short
    b = machines("b")
    result = b.build(monkeypatch, "--wheelhouse", str(wheelhouse))
    action(result)
    assert len(b.builds_run()) == 1 and result.stderr.count("warning") == 1
    assert f"the wheelhouse manifest {wheelhouse / MANIFEST} is not JSON" in result.stderr

    damaged = (wheelhouse / MANIFEST).read_bytes()
    refused = b.build(monkeypatch, "--publish", str(wheelhouse))
    assert refused.exit_code == 4 and "mv " in refused.stderr
    assert (wheelhouse / MANIFEST).read_bytes() == damaged and not list((wheelhouse / "wheels").glob("*.whl"))


def test_publishing_to_a_server_url_is_a_usage_error(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flagtree_cpu_build.cli import app

    result = CliRunner().invoke(app, ["-w", str(tmp_path / "ws"), "build", "--publish", "http://wheels.lan/x/"])
    assert result.exit_code == 2 and "publishing needs a folder" in result.stderr
    bad = CliRunner().invoke(app, ["-w", str(tmp_path / "ws"), "setup", "--wheelhouse", "s3://bucket/wheels"])
    assert bad.exit_code == 2 and "a wheelhouse is a folder, file:// or http(s)://" in bad.stdout + bad.stderr
    assert not (tmp_path / "ws").exists()


def test_over_http_a_dropped_wheel_resumes_and_a_lying_server_is_refused(
        machines, published_wheelhouse: Published, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        http_server: LoopbackHTTPServer) -> None:
    wheelhouse, built = published_wheelhouse
    b = machines("b")
    # the connection drops after 1000 bytes, twice: the download resumes with Range and installs
    dropping = serve_folder(http_server, wheelhouse, "/dropping", Faults(drop_after=1000, drop_times=2))
    taken = action(b.build(monkeypatch, "--wheelhouse", dropping))
    assert "installed from the wheelhouse" in taken["detail"] and b.builds_run() == []
    wheel_requests = [r for r in http_server.requests_for("/dropping/" + taken["wheelhouse"]["file"])]
    assert any(r.range for r in wheel_requests)

    # other bytes with consistent headers: refused, exit 4, and B's installed build is left as it was
    c = machines("c")
    lying = serve_folder(http_server, wheelhouse, "/lying", Faults(replace_with=b"PK not the wheel" * 400))
    result = c.build(monkeypatch, "--wheelhouse", lying)
    assert result.exit_code == 4 and "refused, nothing was installed" in result.stderr
    assert c.installed_triton() is None and c.builds_run() == []

    # a server that is gone: one warning, and the build runs
    http_server.close()
    gone = c.build(monkeypatch, "--wheelhouse", lying)
    action(gone)
    assert gone.stderr.count("warning") == 1 and "cannot be read" in gone.stderr and len(c.builds_run()) == 1


def test_a_wheel_build_takes_the_published_wheel_into_its_folder(
        machines, published_wheelhouse: Published, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    wheelhouse, built = published_wheelhouse
    b = machines("b")
    dist = tmp_path / "b-dist"
    taken = action(b.build(monkeypatch, "--wheel", str(dist), "--wheelhouse", str(wheelhouse)))
    [wheel] = dist.glob("*.whl")
    assert wheel.name == Path(built["wheel"]["path"]).name and b.builds_run() == []
    assert taken["wheel"]["sha256"] == built["published"]["sha256"] == built["wheel"]["sha256"]
    again = action(b.build(monkeypatch, "--wheel", str(dist), "--wheelhouse", str(wheelhouse)))
    assert again["detail"] == "up to date" and again["wheel"]["path"] == str(wheel)


def test_setup_on_a_fresh_machine_installs_the_published_build_and_validates_it(
        machines, published_wheelhouse: Published, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, world: GitWorld,
        http_server: LoopbackHTTPServer) -> None:
    """What a fleet's board runs: `setup --wheelhouse` from nothing; the validation kernels run against the
    wheel A built, installed without a build."""
    wheelhouse, built = published_wheelhouse
    url = http_server.serve(f"/public/llvm-builds/{TOP}.tar.gz", llvm_tarball().data)
    ws = new_workspace(world, tmp_path / "board", always_set=(
        f"artifacts.llvm.url={url}", PREREQUISITES, "python.runtime=[torch>=2.0, numpy]"))
    board = Machine(ws, build_venv(tmp_path / "board-venv", [*TOOLS, "torch", "numpy"]), tmp_path / "board.jsonl")
    monkeypatch.setenv("FIXTURE_BUILD_RECORD", str(board.record))
    result = ws.run("--json", "setup", "--ignore-host", "--python", str(board.python),
                    "--wheelhouse", str(wheelhouse))
    assert result.exit_code == 0, result.stdout + result.stderr
    stages = {s["stage"]: s for s in result_of(result.stdout)["stages"]}
    [build] = stages["build"]["actions"]
    assert "installed from the wheelhouse" in build["detail"] and board.builds_run() == []
    [kernels] = stages["validate"]["actions"]  # the kernels ran against the installed wheel
    assert kernels["detail"].startswith("5 passed, 1 skipped (decode-e2e: no model given"), kernels["detail"]


def test_doctor_reads_the_configured_wheelhouse(
        machines, published_wheelhouse: Published, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        http_server: LoopbackHTTPServer) -> None:
    wheelhouse, built = published_wheelhouse

    b = machines("b")

    def check() -> dict:
        result = b.ws.run("--json", "doctor", "--check", "toolchain.wheelhouse")
        [found] = [c for c in result_of(result.stdout)["checks"] if c["id"] == "toolchain.wheelhouse"]
        return found

    assert check()["status"] == "skip"
    monkeypatch.setenv("FLAGTREE_CPU_WHEELHOUSE", serve_folder(http_server, wheelhouse, "/served"))
    served = check()
    assert served["status"] == "ok" and "1 published builds, 1 of flagtree-cpu-arm64" in served["detail"]
    monkeypatch.setenv("FLAGTREE_CPU_WHEELHOUSE", str(tmp_path / "not-there"))
    assert check()["status"] == "warn"

    # a server with nothing published yet: build says so (no warning) and builds
    empty = http_server.url("/empty/")
    result = b.build(monkeypatch, "--wheelhouse", empty)
    action(result)
    assert "nothing is published in the wheelhouse yet; building here" in result.stderr
    assert "warning" not in result.stderr and len(b.builds_run()) == 1


def test_a_full_disk_while_publishing_leaves_the_wheelhouse_as_it_was(tmp_path: Path) -> None:
    from flagtree_cpu_build.diskspace import is_disk_full
    from tests.support.disks import tmpfs
    from tests.unit.test_wheelhouse import fake_wheel, publish_entry

    small = fake_wheel(tmp_path / "dist", "pkg-1.0-py3-none-any.whl", "one")
    big = tmp_path / "big" / "pkg-2.0-py3-none-any.whl"
    big.parent.mkdir()
    with zipfile.ZipFile(big, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("pkg/data.bin", bytes(range(256)) * 8192)  # 2 MiB that do not compress
    with tmpfs(tmp_path / "disk", "1m", "a real full disk needs root") as disk:
        wh.publish(disk / "wh", small, publish_entry("1" * 64), wait_note=print)
        before = {p.name: p.read_bytes() for p in (disk / "wh").rglob("*") if p.is_file()}
        with pytest.raises(OSError) as caught:
            wh.publish(disk / "wh", big, publish_entry("2" * 64), wait_note=print)
        assert is_disk_full(caught.value) and caught.value.filename  # the CLI names it (exit 4)
        after = {p.name: p.read_bytes() for p in (disk / "wh").rglob("*") if p.is_file()}
        assert after == before  # no half wheel, the manifest and the index untouched


def test_the_dry_run_says_the_wheelhouse_is_asked_before_the_build(machines, tmp_path: Path) -> None:
    b = machines("b")
    result = b.ws.run("--json", "setup", "--dry-run", "--ignore-host", "--python", str(b.python),
                      "--wheelhouse", str(tmp_path / "wheelhouse"))
    [item] = [i for i in result_of(result.stdout)["items"] if i["area"] == "build"]
    assert item["reason"] == f"no previous build (the wheelhouse {tmp_path / 'wheelhouse'} is asked first)"


def test_a_wheel_taken_from_one_wheelhouse_is_published_into_another(
        machines, published_wheelhouse: Published, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (wheelhouse, built), mirror = published_wheelhouse, tmp_path / "lab-mirror"
    b = machines("b")
    taken = action(b.build(monkeypatch, "--wheelhouse", str(wheelhouse), "--publish", str(mirror)))
    assert b.builds_run() == [] and taken["published"]["status"] == "published"
    assert [w["sha256"] for w in wh.read_local_manifest(mirror)] == [built["published"]["sha256"]]


def test_sigterm_during_the_wheel_download_installs_nothing_and_the_next_run_resumes(
        machines, published_wheelhouse: Published, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        http_server: LoopbackHTTPServer) -> None:
    wheelhouse, built = published_wheelhouse
    faults = Faults(hold_after=4000)  # the rest of the ~8 KB fixture wheel waits: SIGTERM lands mid-download
    url = serve_folder(http_server, wheelhouse, "/slow", faults)
    b = machines("b")
    monkeypatch.setenv("FIXTURE_BUILD_RECORD", str(b.record))
    process = b.ws.process("build", "--ignore-host", "--python", str(b.python), "--wheelhouse", url)
    downloads = b.ws.root / ".flagtree-cpu" / "wheelhouse-downloads"
    try:  # the server holds the wheel half-sent (what the tool received may still sit in its write buffer)
        parts = wait_for(lambda: faults.holding.is_set() and list(downloads.glob("*.whl.part")), 60,
                         "the wheel's download to start")
    except AssertionError:
        process.kill()
        raise
    process.send_signal(signal.SIGTERM)
    _out, err = process.communicate(timeout=30)
    assert process.returncode == 143, err
    assert "Traceback" not in err and b.installed_triton() is None and b.builds_run() == []
    assert not (b.ws.root / ".flagtree-cpu" / "build-editable.json").exists()
    kept = parts[0].stat().st_size
    assert kept > 2000
    listed = result_of(b.ws.run("--json", "clean", "--dry-run", "--downloads").stdout)["items"]
    assert [i["kind"] for i in listed if i["path"] == str(parts[0])] == ["partial download"]  # and kept

    taken = action(b.build(monkeypatch, "--wheelhouse", url))  # held once: the next run gets the rest
    assert "installed from the wheelhouse" in taken["detail"] and b.builds_run() == []
    resumed = [r for r in http_server.requests_for("/slow/" + taken["wheelhouse"]["file"]) if r.method == "GET"][-1]
    assert resumed.range == f"bytes={kept}-" and resumed.status == 206
    assert not downloads.exists()  # nothing left behind once installed
