"""A wheelhouse written by an attacker, or served by one: hostile names, wrong types, special files, bodies larger than
announced, a stalled wheel. Each is one warning and a build here (or a refusal, exit 4, when the bytes are not the
wheel the manifest lists); nothing is written outside the workspace's folders and nothing is left behind. And the
index pip reads takes the newest of two builds of one version, as the tool does."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flagtree_cpu_build import wheelhouse as wh
from flagtree_cpu_build.locking import exclusive
from flagtree_cpu_build.wheelhouse import MANIFEST
from tests.integration import test_wheelhouse as fleet
from tests.integration.test_wheelhouse import Machine, Published, action, serve_folder
from tests.support.envelope import result_of
from tests.support.httpserver import Faults, LoopbackHTTPServer
from tests.support.venvs import build_venv, packed_wheel

# test_wheelhouse's fixtures: machines with their own workspace and venv, and a copy of one build published once
# for this module
machines, published_wheelhouse, _published_once = fleet.machines, fleet.published_wheelhouse, fleet._published_once
MiB = 1 << 20
# runs a command as its grandchild, under an address-space limit (a reader of /dev/zero then fails in seconds instead
# of taking the machine's memory), and writes the peak RSS of everything it ran (KiB) to a file
TRAMPOLINE = """
import resource, subprocess, sys
limit, report, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
code = subprocess.call(argv)
with open(report, "w") as out:
    out.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(code)
"""


def rewrite(wheelhouse: Path, change: Callable[[dict[str, Any], Path], None]) -> dict[str, Any]:
    """Change the manifest's one entry as an attacker would; the changed entry."""
    document = json.loads((wheelhouse / MANIFEST).read_text())
    change(document["wheels"][0], wheelhouse.parent)
    (wheelhouse / MANIFEST).write_text(json.dumps(document))
    return document["wheels"][0]


def child(machine: Machine, tmp_path: Path, *args: str, memory: int = 3 << 30,
          timeout: float = 180) -> tuple[int, str, str, int]:
    """The CLI as a real process in a session of its own (a hang is killed whole); exit code, stdout, stderr and
    the peak RSS in bytes of it and its children."""
    report = tmp_path / f"rusage-{len(list(tmp_path.glob('rusage-*')))}"
    argv = [sys.executable, "-c", TRAMPOLINE, str(memory), str(report), sys.executable, "-m", "flagtree_cpu_build",
            *machine.ws.argv(*args)]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True, env={**os.environ, "FIXTURE_BUILD_RECORD": str(machine.record)})
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        pytest.fail(f"flagtree-cpu {' '.join(args)} hung ({timeout} s): {err[-2000:]}")
    return process.returncode, out, err, int(report.read_text()) * 1024 if report.exists() else 0


def outside_files(tmp_path: Path, before: set[Path]) -> set[Path]:
    return {p for p in tmp_path.rglob("*") if p.is_file()} - before


# --- names and types ----------------------------------------------------------------------------------------


def _original_absolute(entry: dict[str, Any], tmp: Path) -> None:
    entry["original"] = str(tmp / "escaped.sh")


def _original_up(entry: dict[str, Any], tmp: Path) -> None:
    entry["original"] = "../../escaped.sh"  # from <tmp>/b/x/dist: <tmp>/b/escaped.sh


def _arch_list(entry: dict[str, Any], tmp: Path) -> None:
    entry["class"]["arch"] = [entry["class"]["arch"], 1]


def _features_ints(entry: dict[str, Any], tmp: Path) -> None:
    entry["class"]["cpu_features"] = [1, 2]


@pytest.mark.parametrize("change", [_original_absolute, _original_up, _arch_list, _features_ints],
                         ids=["original-absolute", "original-up", "arch-list", "features-ints"])
def test_a_hostile_entry_is_one_warning_naming_it_and_a_build_that_writes_nothing_outside(
        machines: Callable[[str], Machine], published_wheelhouse: Published, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path, change: Callable[[dict[str, Any], Path], None]) -> None:
    wheelhouse, built = published_wheelhouse
    entry = rewrite(wheelhouse, change)
    b = machines("b")
    dist = tmp_path / "b" / "x" / "dist"
    result = b.build(monkeypatch, "--wheel", str(dist), "--wheelhouse", str(wheelhouse))
    assert not (tmp_path / "escaped.sh").exists() and not (tmp_path / "b" / "escaped.sh").exists()
    done = action(result)
    assert result.stderr.count("warning") == 1, result.stderr
    assert f"wheels[0] ({entry['file']})" in result.stderr and "building here" in result.stderr
    assert len(b.builds_run()) == 1 and "wheelhouse" not in done
    [wheel] = dist.glob("*.whl")
    assert wheel.name == Path(built["wheel"]["path"]).name


# --- special files and sizes ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_manifest_that_is_a_fifo_or_a_link_to_dev_zero_is_refused_at_once(
        machines: Callable[[str], Machine], tmp_path: Path, kind: str) -> None:
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    if kind == "fifo":
        os.mkfifo(wheelhouse / MANIFEST)
    else:
        (wheelhouse / MANIFEST).symlink_to("/dev/zero")
    b = machines("b")
    code, out, err, _ = child(b, tmp_path, "--json", "build", "--ignore-host", "--python", str(b.python),
                              "--wheelhouse", str(wheelhouse), memory=2 << 30, timeout=120)
    assert code == 0, err
    assert f"the wheelhouse manifest {wheelhouse / MANIFEST} is not a regular file" in err
    assert err.count("warning") == 1 and len(b.builds_run()) == 1

    code, out, err, _ = child(b, tmp_path, "--json", "build", "--ignore-host", "--python", str(b.python),
                              "--publish", str(wheelhouse), memory=2 << 30, timeout=120)
    assert code == 4 and "is not a regular file" in err and f"mv {wheelhouse / MANIFEST}" in err, err
    assert not list((wheelhouse / "wheels").glob("*.whl")) and not (wheelhouse / MANIFEST).is_file()


def test_a_folder_manifest_over_the_cap_is_read_only_up_to_the_cap(
        machines: Callable[[str], Machine], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    with open(wheelhouse / MANIFEST, "wb") as sparse:  # 1 GiB of holes: costs no disk, only what a reader reads
        sparse.truncate(1 << 30)
    b = machines("b")
    monkeypatch.setenv("FLAGTREE_CPU_WHEELHOUSE", str(wheelhouse))
    code, out, err, peak = child(b, tmp_path, "--json", "doctor", "--check", "toolchain.wheelhouse")
    print(f"peak RSS reading a 1 GiB manifest: {peak / MiB:.0f} MiB")
    assert peak < 256 * MiB  # the cap (32 MiB) and an interpreter, not the file
    [check] = [c for c in result_of(out)["checks"] if c["id"] == "toolchain.wheelhouse"]
    assert check["status"] == "warn" and f"more than {wh.MAX_MANIFEST_BYTES} bytes" in check["detail"], check


def test_an_http_manifest_without_a_length_is_read_only_up_to_the_cap(
        machines: Callable[[str], Machine], monkeypatch: pytest.MonkeyPatch,
        http_server: LoopbackHTTPServer) -> None:
    path = f"/endless/{MANIFEST}"
    http_server.serve(path, b" " * (128 * MiB), Faults(no_length=True))  # JSON whitespace, never a document
    b = machines("b")
    result = b.build(monkeypatch, "--wheelhouse", http_server.url("/endless/"))
    sent = http_server.sent[path]
    print(f"the server sent {sent / MiB:.0f} MiB of the 128 MiB body before the client hung up")
    # what the client read (the cap) plus what the kernel buffers on both sides of a loopback connection
    assert sent < 100 * MiB
    action(result)
    assert result.stderr.count("warning") == 1 and f"more than {wh.MAX_MANIFEST_BYTES} bytes" in result.stderr
    assert len(b.builds_run()) == 1


def test_a_wheel_longer_than_its_listed_size_is_cut_at_the_size_and_refused(
        machines: Callable[[str], Machine], published_wheelhouse: Published, monkeypatch: pytest.MonkeyPatch,
        http_server: LoopbackHTTPServer) -> None:
    wheelhouse, built = published_wheelhouse
    [entry] = wh.read_local_manifest(wheelhouse)
    real = (wheelhouse / entry["file"]).read_bytes()
    endless = Faults(no_length=True, replace_with=real + b"\0" * (128 * MiB))  # the wheel, and on, and on
    url = serve_folder(http_server, wheelhouse, "/long", endless)
    b = machines("b")
    result = b.build(monkeypatch, "--wheelhouse", url)
    sent = http_server.sent.get(f"/long/{entry['file']}", 0)
    assert sent < 100 * MiB, result.stderr  # stopped at the size, not at the end
    assert result.exit_code == 4 and "is not the file its manifest lists" in result.stderr, result.stderr
    assert f"more than the {entry['size']} bytes" in result.stderr
    assert b.installed_triton() is None and b.builds_run() == []
    assert not list(b.ws.root.rglob("*.part"))


@pytest.mark.parametrize("location", ["file:///etc/passwd", "ftp://127.0.0.1:9/x", "/loop/", "http://[::1"])
def test_a_manifest_redirected_where_no_download_goes_is_one_warning_and_a_build(
        machines: Callable[[str], Machine], monkeypatch: pytest.MonkeyPatch, http_server: LoopbackHTTPServer,
        location: str) -> None:
    target = http_server.url(f"/loop/{MANIFEST}") if location == "/loop/" else location  # redirects to itself
    http_server.serve(f"/loop/{MANIFEST}", b"", Faults(status=302), Location=target)
    b = machines("b")
    result = b.build(monkeypatch, "--wheelhouse", http_server.url("/loop/"))
    action(result)
    assert result.stderr.count("warning") == 1 and "its answer cannot be followed" in result.stderr, result.stderr
    assert len(b.builds_run()) == 1


# --- a stalled wheel ----------------------------------------------------------------------------------------


def test_a_stalled_wheel_download_is_swept_once_built_here_and_clean_knows_it(
        machines: Callable[[str], Machine], published_wheelhouse: Published, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path, http_server: LoopbackHTTPServer) -> None:
    wheelhouse, built = published_wheelhouse
    [entry] = wh.read_local_manifest(wheelhouse)
    stalling = Faults(stall_after=1000)  # every answer: 1000 bytes, then silence
    url = serve_folder(http_server, wheelhouse, "/stalling", stalling)
    monkeypatch.setenv("FLAGTREE_CPU_STALL_TIMEOUT", "0.5")
    b = machines("b")
    failing = tmp_path / "failing.log"
    failing.write_text("error: the build broke\n")
    monkeypatch.setenv("FIXTURE_BUILD_FAIL_LOG", str(failing))
    broken = b.build(monkeypatch, "--wheelhouse", url)
    assert broken.exit_code == 5 and "could not download" in broken.stderr, broken.stderr
    [part] = list(b.ws.root.rglob("*.whl.part"))  # kept: the next run that asks the wheelhouse resumes it
    assert part.stat().st_size >= 1000

    def clean(*args: str) -> dict[str, Any]:
        return result_of(b.ws.run("--json", "clean", *args).stdout)

    listed = [i for i in clean("--dry-run", "--all")["items"] if i["path"] == str(part)]
    assert listed and listed[0]["kind"] == "partial download" and listed[0]["removed"] and part.exists()
    with exclusive(b.ws.root / ".flagtree-cpu" / "workspace.lock", note="build"):  # a build holding the workspace
        held = [i for i in clean("--all")["items"] if i["path"] == str(part)]
    assert held and not held[0]["removed"] and "left alone" in held[0]["reason"] and part.exists()
    removed = [i for i in clean("--all")["items"] if i["path"] == str(part)]
    assert removed and removed[0]["removed"] and not part.exists()
    assert not list(b.ws.root.rglob("*.part*"))

    monkeypatch.delenv("FIXTURE_BUILD_FAIL_LOG")
    built_here = b.build(monkeypatch, "--wheelhouse", url)
    assert action(built_here)["status"] == "created" and len(b.builds_run()) == 2
    assert not list(b.ws.root.rglob("*.part*")), "the build made the stalled download useless, and it stayed"
    again = action(b.build(monkeypatch, "--wheelhouse", url))
    assert again["detail"] == "up to date"
    assert not [i for i in clean("--dry-run", "--all")["items"] if entry["file"].split("/")[-1] in i["path"]]


# --- what pip takes -----------------------------------------------------------------------------------------


def _pip_wheelhouse(tmp_path: Path) -> Path:
    """Two builds of pkg 1.0 published one after the other; the older one's build hash sorts higher."""
    from tests.unit.test_wheelhouse import publish_entry

    folder = tmp_path / "wh"
    for payload, stamp in (("older", "f" * 64), ("newer", "1" * 64)):
        wheel = packed_wheel(tmp_path / f"dist-{payload}", "pkg", "1.0", {"pkg/__init__.py": f"BUILD = {payload!r}\n"})
        wh.publish(folder, wheel, publish_entry(stamp), wait_note=print)
    return folder


@pytest.mark.parametrize("source", ["index-url", "find-links", "index-url-http"])
def test_pip_installs_the_newest_of_two_builds_of_one_version(tmp_path: Path, source: str,
                                                              http_server: LoopbackHTTPServer) -> None:
    folder = _pip_wheelhouse(tmp_path)
    python = build_venv(tmp_path / "venv", ["pip"])
    if source == "index-url-http":  # the folder on a static server, which answers a folder with its index.html
        serve_folder(http_server, folder, "/fleet")
        for page in folder.glob("simple/**/index.html"):
            http_server.serve(f"/fleet/{page.parent.relative_to(folder).as_posix()}/", page.read_bytes(),
                              **{"Content-Type": "text/html"})
    where = {"index-url": ["--index-url", (folder / "simple").as_uri()],
             "find-links": ["--no-index", "--find-links", str(folder / "wheels")],
             "index-url-http": ["--index-url", http_server.url("/fleet/simple/")]}[source]
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_CACHE_DIR": "1",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps", *where, "pkg"], check=True,
                   capture_output=True, env=env)
    installed = subprocess.run([str(python), "-c", "import pkg; print(pkg.BUILD)"], capture_output=True, text=True,
                               cwd=tmp_path, check=True)
    assert installed.stdout.strip() == "newer"
