"""Issue 26, item 3: what a signed bundle's inputs may be — a signature member that is huge, garbage or out of
place; the digest a site carries to the board (``--expect-digest``); and every way a signing key cannot sign
(missing, not a file, not a private key, readable by others, locked by a passphrase with nobody to type it).

The bundles are made once per module by the real `bundle create` (``tests.support.signing``); a key that
cannot sign is refused before any work, so those runs use a workspace that must not even come into being.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import new_workspace
from tests.support.envelope import error_of, result_of
from tests.support.gitworld import GitWorld
from tests.support.signing import (
    COMMANDS,
    NAMESPACE,
    SIGNATURE,
    Board,
    Made,
    Parts,
    allowed_line,
    bundles_of_world,
    fingerprint,
    make_key,
    refused,
)

HANG = 120  # seconds: only a hang reaches it


@pytest.fixture(scope="module")
def made(git_world: GitWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Made]:
    with bundles_of_world(git_world, tmp_path_factory.mktemp("bundle-sign-inputs")) as made:
        yield made


@pytest.fixture
def board(made: Made, git_world: GitWorld, tmp_path: Path) -> Board:
    return Board(new_workspace(git_world, tmp_path / "board", always_set=made.sets))


def with_signature(made: Made, dest: Path, signature: bytes, *, at_end: bool = False) -> Path:
    """The signed bundle with ``signature`` in place of its own (or, ``at_end``, after the last member)."""
    parts = Parts.of(made.signed)
    parts.signature = None if at_end else signature
    if at_end:
        parts.members.append((SIGNATURE, signature))
    return parts.write(dest)


def other_namespace(made: Made, namespace: str) -> bytes:
    """A real signature of the signed bundle's manifest by its own key, made for another namespace."""
    return subprocess.run(["ssh-keygen", "-Y", "sign", "-f", str(made.maker), "-n", namespace],
                          input=Parts.of(made.signed).manifest_bytes, check=True, capture_output=True).stdout


@pytest.mark.parametrize("case", ["huge", "garbage", "garbage-armour", "git-namespace", "out-of-place"])
def test_a_signature_member_that_is_not_a_bundle_signature_is_refused_before_use(made: Made, board: Board,
                                                                                  tmp_path: Path, case: str) -> None:
    armour = b"-----BEGIN SSH SIGNATURE-----\n%s\n-----END SSH SIGNATURE-----\n"
    signature = {"huge": b"A" * (32 * 1024 * 1024),
                 "garbage": os.urandom(300),
                 "garbage-armour": armour % b"U1NISUcAAAAB" + b"QUFBQQ==",
                 "git-namespace": other_namespace(made, "git") if case == "git-namespace" else b"",
                 "out-of-place": Parts.of(made.signed).signature or b""}[case]
    bad = with_signature(made, tmp_path / "bad.bundle", signature, at_end=case == "out-of-place")
    expected = {"huge": "more than a signature can be", "garbage": "not one armoured SSH signature",
                "garbage-armour": "not an SSH signature", "git-namespace": "namespace 'git'",
                "out-of-place": "where none belongs"}[case]
    board.trust(allowed_line("maker@site", made.maker))
    for command in COMMANDS:
        error = refused(board.run("--json", *command, str(bad)), command)
        # out of place, it is no signature: the bundle is unsigned, which the trust policy refuses first
        said = "is not signed" if case == "out-of-place" else expected
        assert said in error["message"] and str(bad) in error["message"], (command, error)
    assert board.written() == []
    os.remove(Path(os.environ["XDG_CONFIG_HOME"]) / "flagtree-cpu" / "allowed_signers")
    error = refused(board.run("--json", "bundle", "verify", str(bad)), ("without trusted keys",))
    assert expected in error["message"], error


def test_the_expected_digest_authenticates_the_exact_file(made: Made, board: Board) -> None:
    digest = hashlib.sha256(made.unsigned.read_bytes()).hexdigest()
    verified = board.run("--json", "bundle", "verify", str(made.unsigned), "--expect-digest", digest)
    assert verified.exit_code == 0, verified.stderr
    authenticity = result_of(verified.stdout)["authenticity"]
    assert authenticity["authenticated"] is True, authenticity
    assert authenticity["digest"] == {"expected": digest, "sha256": digest, "matched": True}, authenticity
    assert authenticity["signature"] is None and f"its sha256 is the expected {digest}" in authenticity["summary"]
    # as sha256sum prints it, file name and all
    imported = board.run("bundle", "import", str(made.unsigned), "--expect-digest", f"{digest}  {made.unsigned.name}")
    assert imported.exit_code == 0, imported.stderr
    assert "authenticated" in imported.stderr and "not authenticated" not in imported.stderr


def test_another_digest_is_refused_and_nothing_is_imported(made: Made, board: Board, tmp_path: Path) -> None:
    """The signed bundle with one byte changed where no member lies (a header's padding): its members all verify,
    its sha256 does not."""
    with tarfile.open(made.signed) as tar:
        manifest = tar.getmember("flagtree-cpu-bundle.json")
    padding = manifest.offset_data + manifest.size
    assert padding % 512, "the manifest fills its last block: no padding to change"
    data = bytearray(made.signed.read_bytes())
    data[padding] ^= 0xFF
    changed = tmp_path / "changed.bundle"
    changed.write_bytes(bytes(data))
    assert board.run("bundle", "verify", str(changed)).exit_code == 0, "the change is outside every member"
    expected = made.created["sha256"]
    got = hashlib.sha256(bytes(data)).hexdigest()
    for command in COMMANDS:
        error = refused(board.run("--json", *command, str(changed), "--expect-digest", expected), command)
        assert "not the bundle expected" in error["message"], error
        assert any(expected in d for d in error["details"]) and any(got in d for d in error["details"]), error
        assert "sha256sum" in error["fix"], error
    assert board.written() == []
    wrong = board.run("bundle", "verify", str(made.signed), "--expect-digest", "not-a-digest")
    assert wrong.exit_code == 2 and "not a sha256" in wrong.stderr, wrong.stderr


# --- a key that cannot sign ------------------------------------------------------------------------------


def refused_key(made: Made, git_world: GitWorld, tmp_path: Path, key: Path) -> dict:
    """`bundle create --sign KEY` on a fresh workspace: exit 2 before any work (the workspace is never made), and
    no bundle or temporary left in the output folder."""
    fresh = new_workspace(git_world, tmp_path / "fresh", always_set=made.sets)
    out = tmp_path / "out"
    out.mkdir()
    result = fresh.run("--json", "bundle", "create", "--sign", str(key), "-o", str(out / "board.bundle"))
    assert result.exit_code == 2, result.stderr
    assert list(out.iterdir()) == [] and not fresh.root.exists()
    return error_of(result.stdout)


@pytest.mark.parametrize("case", ["missing", "folder", "fifo", "public", "not-a-key", "too-open"])
def test_a_key_that_cannot_sign_is_a_usage_error_with_its_fix(made: Made, git_world: GitWorld, tmp_path: Path,
                                                              case: str) -> None:
    key = tmp_path / "keys" / "signing"
    key.parent.mkdir()
    if case == "folder":
        key.mkdir()
    elif case == "fifo":
        os.mkfifo(key)  # opening it to read would wait for a writer forever
    elif case == "public":
        key.write_text(Path(f"{made.maker}.pub").read_text())
    elif case == "not-a-key":
        key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nbm90IGEga2V5\n-----END OPENSSH PRIVATE KEY-----\n")
        key.chmod(0o600)
    elif case == "too-open":
        make_key(key.parent, "signing")
        key.chmod(0o644)
    error = refused_key(made, git_world, tmp_path, key)
    expected = {"missing": "does not exist", "folder": "is a folder", "fifo": "not a regular file",
                "public": "it is a public key", "not-a-key": "cannot use", "too-open": "others can read it"}[case]
    assert str(key) in error["message"] and expected in error["message"], error
    fixes = {"too-open": f"chmod 600 {key}"}
    assert fixes.get(case, f"ssh-keygen -t ed25519 -f {key}") in error["fix"], error


def test_a_passphrase_nobody_can_type_is_refused_before_any_work(made: Made, git_world: GitWorld,
                                                                 tmp_path: Path) -> None:
    locked = make_key(tmp_path / "keys", "locked", passphrase="correct horse")
    out = tmp_path / "out"
    out.mkdir()
    process = made.create_process("--json", "--sign", str(locked), "-o", str(out / "board.bundle"))
    stdout, stderr = process.communicate(timeout=HANG)
    assert process.returncode == 2, stderr
    error = error_of(stdout)
    assert "passphrase" in error["message"] and "no terminal" in error["message"], error
    assert f"ssh-add {locked}" in error["fix"], error
    assert list(out.iterdir()) == []


def test_a_passphrase_is_asked_on_the_terminal_and_the_bundle_is_signed(made: Made, tmp_path: Path) -> None:
    """A person at a terminal types the key's passphrase when ssh-keygen asks (a real pseudo-terminal)."""
    locked = make_key(tmp_path / "keys", "locked", passphrase="correct horse")
    bundle = tmp_path / "board.bundle"
    argv = [sys.executable, "-m", "flagtree_cpu_build",
            *made.ws.argv("bundle", "create", "--sign", str(locked), "-o", str(bundle))]
    pid, terminal = pty.fork()
    if pid == 0:  # the child: a session whose controlling terminal is the pty
        os.execve(argv[0], argv, {k: v for k, v in made.env.items() if k != "SSH_AUTH_SOCK"})
    seen, answered, deadline = b"", False, time.monotonic() + HANG
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([terminal], [], [], 1)
            if not ready:
                continue
            try:
                chunk = os.read(terminal, 4096)
            except OSError:  # the child closed the terminal: it ended
                break
            if not chunk:
                break
            seen += chunk
            if not answered and b"passphrase" in seen.lower():
                os.write(terminal, b"correct horse\n")
                answered = True
        _, status = os.waitpid(pid, 0)
    finally:
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(terminal)
    assert answered, seen.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, seen.decode(errors="replace")
    parts = Parts.of(bundle)
    assert parts.signature is not None
    signature = tmp_path / "board.sig"
    signature.write_bytes(parts.signature)
    check = subprocess.run(["ssh-keygen", "-Y", "check-novalidate", "-n", NAMESPACE, "-s", str(signature)],
                           input=parts.manifest_bytes, capture_output=True, check=False)
    assert check.returncode == 0 and fingerprint(locked) in check.stdout.decode(), check.stderr


def test_a_key_held_by_ssh_agent_signs_without_a_terminal(made: Made, tmp_path: Path) -> None:
    locked = make_key(tmp_path / "keys", "locked", passphrase="correct horse")
    # a socket's path must fit in 108 bytes: tmp_path does not always (a longer TMPDIR or user name)
    socket = Path(tempfile.mkdtemp(prefix="agent-", dir="/tmp")) / "sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(socket)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + HANG
        while not socket.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        askpass = tmp_path / "askpass"
        askpass.write_text("#!/bin/sh\necho 'correct horse'\n")
        askpass.chmod(0o700)
        added = subprocess.run(["ssh-add", str(locked)], env={**os.environ, "SSH_AUTH_SOCK": str(socket),
                                                              "SSH_ASKPASS": str(askpass),
                                                              "SSH_ASKPASS_REQUIRE": "force"},
                               stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
        assert added.returncode == 0, added.stderr
        bundle = tmp_path / "board.bundle"
        process = made.create_process("--json", "--sign", str(locked), "-o", str(bundle),
                                      env={"SSH_AUTH_SOCK": str(socket)})
        stdout, stderr = process.communicate(timeout=HANG)
    finally:
        agent.terminate()
        agent.wait(timeout=HANG)
        shutil.rmtree(socket.parent, ignore_errors=True)
    assert process.returncode == 0, stderr
    assert result_of(stdout)["signed_by"]["key"] == fingerprint(locked)
