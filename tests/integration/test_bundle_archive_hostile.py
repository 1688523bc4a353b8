"""Bundle files against the real machine: a full disk (a real tmpfs), a real Ctrl-C (SIGINT to a process
writing a bundle), and GNU tar reading what we write (a bundle is a standard tar any machine can list)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from flagtree_cpu_build.bundle import (
    MANIFEST_NAME,
    BundleDamaged,
    Manifest,
    Member,
    extract_members,
    member_name,
    verify_bundle,
    write_bundle,
)
from flagtree_cpu_build.digest import hash_file
from flagtree_cpu_build.diskspace import DiskFull
from tests.support.disks import tmpfs

WHEEL = member_name("wheel", "big-1.0-py3-none-any.whl")
ARTIFACT = member_name("artifact", "cd" * 32)


def _draft() -> Manifest:
    return Manifest.draft(recipe="r", stack=["r"], variant=None, target={"arch": "aarch64", "python": "3.12"},
                          members=[Member(WHEEL, "wheel"), Member(ARTIFACT, "artifact")])


def _files(folder: Path, size: int) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    files = {WHEEL: folder / "wheel", ARTIFACT: folder / "artifact"}
    for path in files.values():
        path.write_bytes(os.urandom(size))  # incompressible, like the real members
    return files


def test_a_full_disk_while_writing_names_the_bundle_and_leaves_the_old_one(tmp_path: Path) -> None:
    files = _files(tmp_path / "files", 1024 * 1024)
    with tmpfs(tmp_path / "tiny", "4m", "a real full disk needs root") as disk:
        small = _files(tmp_path / "small", 1000)
        dest = disk / "b.bundle"
        write_bundle(dest, _draft(), small)
        old = dest.read_bytes()
        (disk / "filler").write_bytes(b"\0" * (2 * 1024 * 1024 + 512 * 1024))  # 1.5 MiB left: not enough for 2 MiB
        with pytest.raises(DiskFull) as caught:
            write_bundle(dest, _draft(), files)
        error = caught.value
        assert error.exit_code == 4
        assert str(dest) in error.message and "not enough disk space for the bundle b.bundle" in error.message
        assert f"on {disk}" in (error.fix or "")
        assert dest.read_bytes() == old
        assert sorted(p.name for p in disk.iterdir()) == ["b.bundle", "filler"]  # no temporary


def test_a_full_disk_while_extracting_names_it_and_leaves_nothing(tmp_path: Path) -> None:
    files = _files(tmp_path / "files", 300 * 1024)
    bundle = tmp_path / "b.bundle"
    manifest = write_bundle(bundle, _draft(), files)
    with tmpfs(tmp_path / "tiny", "1m", "a real full disk needs root") as disk:
        (disk / "filler").write_bytes(b"\0" * (500 * 1024))  # room for the first member, not the second
        with pytest.raises(DiskFull) as caught:
            extract_members(bundle, verify_bundle(bundle), [WHEEL, ARTIFACT], disk / "out")
        assert caught.value.exit_code == 4 and "extracting b.bundle" in caught.value.message
        assert [p for p in (disk / "out").rglob("*") if p.is_file()] == []  # the first member is removed too
    assert verify_bundle(bundle) == manifest


WRITER = """
import sys, time
from pathlib import Path
from flagtree_cpu_build.bundle import Manifest, Member, write_bundle
folder, dest = Path(sys.argv[1]), Path(sys.argv[2])
names = [l for l in (folder / "names").read_text().splitlines()]
draft = Manifest.draft(recipe="r", stack=["r"], variant=None, target={}, members=[Member(n, n.split("/")[0].rstrip("s"))
                                                                                   for n in names])
def progress(done, total):
    if done > total / 2:  # the files are hashed (the first half), then written
        print("writing", flush=True)
        time.sleep(30)  # Ctrl-C arrives here, half-way through the bundle
write_bundle(dest, draft, {n: folder / n.split("/")[0] for n in names}, progress=progress)
"""


def test_ctrl_c_while_writing_leaves_no_bundle_and_no_temporary(tmp_path: Path) -> None:
    files = _files(tmp_path / "files", 256 * 1024)
    (tmp_path / "files" / "names").write_text(f"{WHEEL}\n{ARTIFACT}\n")
    os.rename(files[WHEEL], tmp_path / "files" / "wheels")
    os.rename(files[ARTIFACT], tmp_path / "files" / "artifacts")
    out = tmp_path / "out"
    out.mkdir()
    child = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / "files"), str(out / "b.bundle")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "writing\n"
        assert [p.name for p in out.iterdir()] == [f".b.bundle.tmp-{child.pid}"]  # half-written, under its temporary
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=20)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode != 0 and "KeyboardInterrupt" in err
    assert list(out.iterdir()) == []


def test_gnu_tar_lists_and_extracts_a_bundle(tmp_path: Path) -> None:
    files = _files(tmp_path / "files", 3000)
    bundle = tmp_path / "b.bundle"
    manifest = write_bundle(bundle, _draft(), files)
    listed = subprocess.run(["tar", "tf", str(bundle)], capture_output=True, text=True, check=True).stdout.split()
    assert listed == [MANIFEST_NAME, WHEEL, ARTIFACT]
    (tmp_path / "x").mkdir()
    subprocess.run(["tar", "xf", str(bundle), "-C", str(tmp_path / "x")], check=True)
    for m in manifest.members:
        assert hash_file(tmp_path / "x" / m.name) == m.sha256
    # and the other way: GNU tar's own format (owners, modes, its headers) packing the same files verifies
    again = tmp_path / "again.bundle"
    subprocess.run(["tar", "cf", str(again), "-C", str(tmp_path / "x"), *listed], check=True)
    assert verify_bundle(again) == manifest


def test_a_sparse_member_made_by_gnu_tar_is_refused(tmp_path: Path) -> None:
    tree = tmp_path / "x"
    (tree / "wheels").mkdir(parents=True)
    hole = tree / WHEEL
    with open(hole, "wb") as f:
        f.truncate(1024 * 1024)  # all hole: GNU tar --sparse stores it as a sparse member (type S)
    manifest = Manifest.draft(recipe="r", stack=["r"], variant=None, target={},
                              members=[Member(WHEEL, "wheel", 1024 * 1024, hash_file(hole))]).with_digest()
    (tree / MANIFEST_NAME).write_bytes(manifest.to_bytes())
    bundle = tmp_path / "sparse.bundle"
    subprocess.run(["tar", "--sparse", "--format=gnu", "-cf", str(bundle), "-C", str(tree), MANIFEST_NAME, WHEEL],
                   check=True)
    with pytest.raises(BundleDamaged, match=f"member '{WHEEL}' as a sparse or special file"):
        verify_bundle(bundle)
