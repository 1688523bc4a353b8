"""Board snapshots: `doctor --snapshot` on this machine, read back with `doctor --sysroot FILE.tar.gz`,
the doctor guide's python3 fallback (docs/guides/doctor.md), the old tar recipe, and hostile tarballs from another
machine."""

from __future__ import annotations

import datetime
import gzip
import io
import json
import os
import platform
import re
import socket
import subprocess
import sys
import tarfile
import tempfile
import zlib
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.cpuinfo import read_cpu
from flagtree_cpu_build.doctor import all_checks
from flagtree_cpu_build.host import read_host
from flagtree_cpu_build.snapshot import MANIFEST_NAME, MAX_MEMBER_BYTES, open_sysroot
from tests.conftest import REPO_ROOT
from tests.support.envelope import result_of

HOSTS = REPO_ROOT / "tests" / "fixtures" / "hosts"
# the checks a snapshot answers: what the machine is, not what this one has installed
MACHINE_CHECKS = [c.id for c in all_checks() if not c.live_only]


def doctor(*args: str) -> Result:
    return CliRunner().invoke(app, ["doctor", *args])


def findings(result: Result) -> dict[str, dict]:
    return {f["id"]: f for f in result_of(result.stdout)["checks"]}


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary folder tempfile hands out, empty and watched: extraction goes there and must not stay."""
    folder = tmp_path / "scratch"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def snapshot_here(tmp_path: Path, name: str = "board.tar.gz") -> Path:
    result = doctor("--snapshot", str(tmp_path / name))
    assert result.exit_code == 0, result.stderr
    return tmp_path / name


def assert_same_machine(root: Path) -> None:
    """The facts doctor reads from a snapshot are those it reads live."""
    live, board = read_host(), read_host(root)
    assert (board.arch, board.os_id, board.os_version_id, board.os_pretty_name, board.mem_total) == (
        live.arch, live.os_id, live.os_version_id, live.os_pretty_name, live.mem_total)
    assert board.os_id, "this machine has an os-release"
    live_cpu, board_cpu = read_cpu(), read_cpu(root)
    assert board_cpu.model == live_cpu.model and board_cpu.features == live_cpu.features
    assert board_cpu.features, "the features come from /proc/cpuinfo's contents"
    assert board_cpu.sve_vector_bits == live_cpu.sve_vector_bits and board_cpu.hwcap == live_cpu.hwcap
    assert [(c.index, c.capacity, c.governor) for c in board_cpu.cores] == [
        (c.index, c.capacity, c.governor) for c in live_cpu.cores]


def machine_findings(*args: str) -> dict[str, dict]:
    checks = [a for i in MACHINE_CHECKS for a in ("--check", i)]
    return findings(doctor("--json", "--offline", *checks, *args))


def test_snapshot_of_this_machine_reads_back_as_the_same_host(tmp_path: Path, scratch: Path) -> None:
    tarball = snapshot_here(tmp_path)
    with open_sysroot(tarball) as board:
        assert_same_machine(board.root)
        assert board.manifest["hostname"] == socket.gethostname()
    result = doctor("--json", "--sysroot", str(tarball), "-w", str(tmp_path / "ws"))
    document = result_of(result.stdout)
    assert document["sysroot"] == str(tarball)
    assert result.exit_code == (7 if document["summary"]["fail"] else 0)
    from_snapshot = findings(result)
    live = machine_findings()
    assert {i: from_snapshot[i]["status"] for i in MACHINE_CHECKS} == {i: live[i]["status"] for i in MACHINE_CHECKS}
    # resources.memory also says how much memory is free now, which moves between two reads
    assert {i: from_snapshot[i]["detail"] for i in MACHINE_CHECKS if i != "resources.memory"} == {
        i: live[i]["detail"] for i in MACHINE_CHECKS if i != "resources.memory"}
    assert "no /proc/cpuinfo" not in from_snapshot["cpu.features"]["detail"]
    assert list(scratch.iterdir()) == []  # the extracted copy is gone


def test_snapshot_holds_file_contents_and_a_manifest(tmp_path: Path) -> None:
    tarball = snapshot_here(tmp_path)
    with tarfile.open(tarball) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert all(m.isreg() for m in members.values()), "contents, never links"
        data = {name: tar.extractfile(m).read() for name, m in members.items()}
    assert next(iter(members)) == MANIFEST_NAME
    # the kernel says these are 0 bytes long; the snapshot has what reading them gives
    assert data["proc/cpuinfo"].count(b"processor") == Path("/proc/cpuinfo").read_bytes().count(b"processor") > 0
    assert b"MemTotal:" in data["proc/meminfo"]
    auxv = data["proc/self/auxv"]
    assert len(auxv) > 0 and len(auxv) % 16 == 0
    assert data["etc/os-release"] == Path("/etc/os-release").read_bytes()  # through the link, when it is one
    assert data["var/lib/dpkg/status"] == Path("/var/lib/dpkg/status").read_bytes()
    capacities = sorted(Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpu_capacity"))
    for capacity in capacities:
        assert data[str(capacity)[1:]] == capacity.read_bytes()
    manifest = json.loads(data[MANIFEST_NAME])
    assert manifest["schema"] == "flagtree-cpu/snapshot/v1" and manifest["tool_version"]
    assert manifest["uname"]["machine"] == platform.machine() and manifest["hostname"] == socket.gethostname()
    assert manifest["euid"] == os.geteuid()
    assert manifest["glibc"] == os.confstr("CS_GNU_LIBC_VERSION").split()[1]  # read back by doctor --sysroot
    assert datetime.datetime.fromisoformat(manifest["created"]).tzinfo is not None
    assert sorted(manifest["files"]) == sorted(n for n in members if n != MANIFEST_NAME)
    if not Path("/proc/sys/abi/sve_default_vector_length").exists():
        assert "proc/sys/abi/sve_default_vector_length" in manifest["absent"]  # left out, not made empty


def readme_fallback_script() -> str:
    guide = (REPO_ROOT / "docs" / "guides" / "doctor.md").read_text()
    section = guide[guide.index("Diagnosing a board from elsewhere"):]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    return next(b for b in blocks if b.startswith("python3 - board.tar.gz <<'EOF'"))


def test_readme_fallback_script_makes_an_equivalent_snapshot(tmp_path: Path, scratch: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)  # a board's python3; only the standard library is used
    board = tmp_path / "board"
    board.mkdir()
    subprocess.run(["sh", "-c", readme_fallback_script()], cwd=board, check=True,
                   env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    tarball = snapshot_here(tmp_path, "from-the-tool.tar.gz")
    with tarfile.open(board / "board.tar.gz") as fallback, tarfile.open(tarball) as ours:
        assert sorted(fallback.getnames()) == sorted(n for n in ours.getnames() if n != MANIFEST_NAME)
    with open_sysroot(board / "board.tar.gz") as extracted:
        assert_same_machine(extracted.root)
        assert extracted.manifest is None
    by_fallback = findings(doctor("--json", "--sysroot", str(board / "board.tar.gz"), "-w", str(tmp_path / "ws")))
    by_tool = findings(doctor("--json", "--sysroot", str(tarball), "-w", str(tmp_path / "ws")))
    assert {i: by_fallback[i]["status"] for i in MACHINE_CHECKS} == {i: by_tool[i]["status"] for i in MACHINE_CHECKS}


def test_the_old_tar_recipe_is_refused_with_the_way_to_make_a_snapshot(tmp_path: Path, scratch: Path) -> None:
    # what the README once said, run for real: tar stores /proc files empty and os-release as a link
    subprocess.run("tar czf old.tgz /proc/cpuinfo /proc/meminfo /proc/sys/abi/sve_default_vector_length "
                   "/sys/devices/system/cpu/cpu*/cpu_capacity /etc/os-release /var/lib/dpkg/status 2>/dev/null",
                   shell=True, cwd=tmp_path)
    result = doctor("--sysroot", str(tmp_path / "old.tgz"))
    assert result.exit_code == 2, result.output
    assert "doctor --snapshot board.tar.gz" in result.stderr and "Traceback" not in result.output
    assert "etc/os-release" in result.stderr or "proc/cpuinfo" in result.stderr
    (tmp_path / "old").mkdir()
    subprocess.run(["tar", "xzf", "old.tgz", "-C", "old"], cwd=tmp_path, check=True)
    unpacked = doctor("--sysroot", str(tmp_path / "old"))
    assert unpacked.exit_code == 2 and "proc/cpuinfo" in unpacked.stderr and "0 bytes" in unpacked.stderr
    assert list(scratch.iterdir()) == []


def test_sysroot_takes_a_folder_and_refuses_a_missing_path(tmp_path: Path) -> None:
    result = doctor("--json", "--sysroot", str(HOSTS / "cix-p1-biglittle"), "--check", "cpu.topology")
    assert result.exit_code == 0, result.output
    assert findings(result)["cpu.topology"]["fix"] == "taskset -c 0-1,6-11 python your_program.py"
    assert result_of(result.stdout)["sysroot"] == str(HOSTS / "cix-p1-biglittle")
    # a typo used to read nothing and call the machine unknown
    missing = doctor("--sysroot", str(tmp_path / "nowhere.tar.gz"))
    assert missing.exit_code == 2 and "nowhere.tar.gz does not exist" in missing.stderr


def test_snapshot_replaces_its_own_file_but_never_another(tmp_path: Path) -> None:
    tarball = snapshot_here(tmp_path)
    snapshot_here(tmp_path)  # again: a re-run replaces its own earlier snapshot
    notes = tmp_path / "notes.tar.gz"
    notes.write_text("mine\n")
    result = doctor("--snapshot", str(notes))
    assert result.exit_code == 2 and "not a flagtree-cpu snapshot" in result.stderr
    assert notes.read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["board.tar.gz", "notes.tar.gz"]  # no .part left
    both = doctor("--snapshot", str(tmp_path / "x.tar.gz"), "--sysroot", str(tarball))
    assert both.exit_code == 2 and "pass one of them" in both.stderr
    nowhere = doctor("--snapshot", str(tmp_path / "missing" / "x.tar.gz"))
    assert nowhere.exit_code == 2 and "does not exist" in nowhere.stderr


# --- a snapshot from another machine is hostile input -----------------------------------------------------------


def tarball_with(path: Path, *members: tuple[str, bytes, bytes, str]) -> Path:
    """A .tar.gz of (name, data, type, linkname) members, written as given: no name cleaning."""
    with tarfile.open(path, "w:gz") as tar:
        tar.addfile(_info("proc/cpuinfo", b"processor\t: 0\nflags\t\t: fpu\n"), io.BytesIO(
            b"processor\t: 0\nflags\t\t: fpu\n"))
        for name, data, kind, linkname in members:
            info = _info(name, data)
            info.type, info.linkname = kind, linkname
            tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
    return path


def _info(name: str, data: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    return info


def _huge_declared_member(path: Path) -> Path:
    """A header claiming 10 GB, and none of the bytes: refused from the header alone."""
    info = tarfile.TarInfo("var/lib/dpkg/status")
    info.size = 10 * 1024**3
    path.write_bytes(gzip.compress(info.tobuf(format=tarfile.GNU_FORMAT)))
    return path


def _pax_header_bomb(path: Path) -> Path:
    """A pax header tarfile would read into memory whole: 100 MiB of zeros in a ~100 KiB gzip."""
    size = 100 * 1024**2
    header = tarfile.TarInfo("././@PaxHeader")
    header.type, header.size = tarfile.XHDTYPE, size
    gz = zlib.compressobj(wbits=31)
    chunks = [gz.compress(header.tobuf(format=tarfile.USTAR_FORMAT))]
    zeros = bytes(1 << 20)
    chunks += [gz.compress(zeros) for _ in range(size >> 20)]
    path.write_bytes(b"".join(chunks) + gz.flush())
    return path


HOSTILE = {
    "absolute": lambda p, out: tarball_with(p, (str(out / "pwned"), b"x", tarfile.REGTYPE, "")),
    "dotdot": lambda p, out: tarball_with(p, ("../outside/pwned", b"x", tarfile.REGTYPE, "")),
    "dotdot-inside": lambda p, out: tarball_with(p, ("proc/../../outside/pwned", b"x", tarfile.REGTYPE, "")),
    "symlink": lambda p, out: tarball_with(p, ("etc/os-release", b"", tarfile.SYMTYPE, str(out / "pwned"))),
    "symlink-then-file": lambda p, out: tarball_with(
        p, ("proc/sys", b"", tarfile.SYMTYPE, str(out)), ("proc/sys/abi/sve_default_vector_length", b"16\n",
                                                          tarfile.REGTYPE, "")),
    "hardlink": lambda p, out: tarball_with(p, ("proc/meminfo", b"", tarfile.LNKTYPE, "proc/cpuinfo")),
    "device": lambda p, out: tarball_with(p, ("proc/meminfo", b"", tarfile.CHRTYPE, "")),
    "unexpected-name": lambda p, out: tarball_with(p, ("home/user/.bashrc", b"x", tarfile.REGTYPE, "")),
    "twice": lambda p, out: tarball_with(p, ("proc/cpuinfo", b"again", tarfile.REGTYPE, "")),
    "huge-member": lambda p, out: _huge_declared_member(p),
    "pax-bomb": lambda p, out: _pax_header_bomb(p),
    "not-a-tarball": lambda p, out: (p.write_bytes(b"\x1f\x8bnot really gzip"), p)[1],
}
NAMED = {  # what the refusal says: the member, and why
    "absolute": "/outside/pwned' is an absolute path",
    "dotdot": "'../outside/pwned' is a path that climbs out with '..'",
    "dotdot-inside": "'proc/../../outside/pwned' is a path that climbs out with '..'",
    "symlink": "'etc/os-release' is a symbolic link",
    "symlink-then-file": "'proc/sys' is a symbolic link",
    "hardlink": "'proc/meminfo' is a hard link",
    "device": "'proc/meminfo' is not a regular file",
    "unexpected-name": "'home/user/.bashrc' is not a file doctor reads",
    "twice": "'proc/cpuinfo' is in the archive twice",
    "huge-member": f"more than the {MAX_MEMBER_BYTES}",
    "pax-bomb": "unpacks to more than",
    "not-a-tarball": "is not a readable snapshot tarball",
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_snapshot_is_refused_and_writes_nothing_outside(case: str, tmp_path: Path, scratch: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    tarball = HOSTILE[case](tmp_path / "board.tar.gz", outside)
    result = doctor("--sysroot", str(tarball))
    assert result.exit_code == 2, result.output
    assert NAMED[case] in result.stderr and "fix: make the snapshot on the board" in result.stderr
    assert "Traceback" not in result.output
    assert list(outside.iterdir()) == []
    assert list(scratch.iterdir()) == []  # the half-extracted copy is removed too
    assert not (tmp_path / "pwned").exists()


def test_a_snapshot_repacked_from_its_folder_is_accepted(tmp_path: Path, scratch: Path) -> None:
    # `tar -C folder -czf x .` writes ./-prefixed names and folder entries: harmless, and accepted
    tarball = snapshot_here(tmp_path)
    (tmp_path / "unpacked").mkdir()
    subprocess.run(["tar", "xzf", str(tarball), "-C", "unpacked"], cwd=tmp_path, check=True)
    subprocess.run(["tar", "czf", "repacked.tgz", "-C", "unpacked", "."], cwd=tmp_path, check=True)
    result = doctor("--json", "--sysroot", str(tmp_path / "repacked.tgz"), "--check", "host.os")
    assert result.exit_code == 0, result.output
    assert findings(result)["host.os"]["status"] == "ok"
    assert list(scratch.iterdir()) == []


def board_tarball(path: Path, manifest: dict | None) -> Path:
    """A board doctor cannot tell from /proc/cpuinfo alone (riscv64 lists no vendor or implementer), with no
    system package installed."""
    members = [("etc/os-release", b"ID=debian\nVERSION_ID=12\n", tarfile.REGTYPE, ""),
               ("var/lib/dpkg/status", b"", tarfile.REGTYPE, "")]
    if manifest is not None:
        members.insert(0, (MANIFEST_NAME, json.dumps(manifest).encode(), tarfile.REGTYPE, ""))
    return tarball_with(path, *members)


@pytest.mark.parametrize("manifest, sudo", [({"euid": 0}, ""), ({"euid": 1000}, "sudo "), (None, "sudo ")])
def test_board_fixes_follow_who_made_the_snapshot(tmp_path: Path, manifest: dict | None, sudo: str) -> None:
    tarball = board_tarball(tmp_path / "board.tar.gz", manifest)
    finding = findings(doctor("--json", "--sysroot", str(tarball), "--check", "system.packages"))["system.packages"]
    assert finding["status"] == "warn" and finding["fix"].startswith(f"{sudo}apt-get install -y ")


def test_the_manifest_names_an_architecture_cpuinfo_does_not(tmp_path: Path) -> None:
    riscv = board_tarball(tmp_path / "riscv.tar.gz", {"uname": {"machine": "riscv64"}})
    arch = findings(doctor("--json", "--sysroot", str(riscv), "--check", "host.arch"))["host.arch"]
    assert arch["status"] == "fail" and arch["detail"].startswith("this machine is riscv64;")


def test_a_snapshot_keeps_every_cores_capacity_and_governor(tmp_path: Path, scratch: Path) -> None:
    # this machine may have no cpufreq; a big.LITTLE board's copied tree has both files for all 12 cores
    from flagtree_cpu_build.snapshot import write_snapshot

    board = HOSTS / "cix-p1-biglittle"
    written = write_snapshot(tmp_path / "cix.tar.gz", root=board)
    assert written.manifest["hostname"] is None  # a copy of another machine: this one's name would be wrong
    with open_sysroot(written.path) as extracted:
        copied, original = read_cpu(extracted.root), read_cpu(board)
        assert copied == original and copied.big_cores() == [0, 1, *range(6, 12)]
        assert read_host(extracted.root) == read_host(board)
    assert len([f for f in written.files if f.endswith("/scaling_governor")]) == 12
    assert list(scratch.iterdir()) == []
