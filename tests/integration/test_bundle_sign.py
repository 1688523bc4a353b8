"""Issue 26, item 3: bundles are authenticated, not only checksummed.

The finding: a bundle whose LLVM member was swapped, with the member's sha256, the lock's digest and the
manifest's digest recomputed, passed `bundle verify` and `setup --bundle` published the planted tree. The
checksums prove a bundle was not damaged by accident; only a signature checked against keys the board trusts
(or a digest carried to it out of band) proves who made it.

The bundles are made once per module by the real `bundle create` on the loopback world (no Python
prerequisites, so no pip); the attack is made with tarfile, json, yaml and hashlib (``tests.support.signing``).
Each test's board is a fresh workspace in the test's fresh home.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import new_workspace
from tests.support.envelope import error_of, result_of
from tests.support.gitworld import GitWorld
from tests.support.signing import (
    COMMANDS,
    PLANTED,
    Board,
    Made,
    Parts,
    allowed_line,
    bundles_of_world,
    fingerprint,
    plant_llvm,
    published_clang,
    refused,
)
from tests.support.tarballs import llvm_tarball


@pytest.fixture(scope="module")
def made(git_world: GitWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Made]:
    with bundles_of_world(git_world, tmp_path_factory.mktemp("bundle-sign")) as made:
        yield made


@pytest.fixture
def board(made: Made, git_world: GitWorld, tmp_path: Path) -> Board:
    return Board(new_workspace(git_world, tmp_path / "board", always_set=made.sets))



def test_without_trusted_keys_a_forged_bundle_passes_but_is_reported_as_not_authenticated(
        made: Made, board: Board, tmp_path: Path) -> None:
    """The limit of checksums, stated where it applies: with no trusted keys (and no expected digest) anyone who
    can write the file can remake it, and every command says only integrity was checked."""
    forged = plant_llvm(made.unsigned, tmp_path / "forged.bundle", PLANTED.data, signature="strip")
    verified = board.run("--json", "bundle", "verify", str(forged))
    assert verified.exit_code == 0, verified.stderr
    result = result_of(verified.stdout)
    authenticity = result["authenticity"]
    assert authenticity["authenticated"] is False and authenticity["signature"] is None, authenticity
    assert authenticity["trusted_keys"] is None and authenticity["digest"] is None, authenticity
    assert "integrity only (checksums); not authenticated" in authenticity["summary"], authenticity
    assert result["integrity"]["ok"] is True
    text = board.run("bundle", "verify", str(forged))
    assert "integrity only (checksums); not authenticated" in text.stderr, text.stderr
    assert "--trusted-keys" in text.stderr, "the warning says how to require authenticity"
    setup = board.run("--json", *COMMANDS[2], str(forged))
    assert setup.exit_code == 0, setup.stderr
    assert "not authenticated" in setup.stderr
    assert result_of(setup.stdout)["bundle"]["authenticity"]["authenticated"] is False
    assert published_clang() == PLANTED.member("bin/clang"), "what checksums alone let through"


def test_an_unsigned_forgery_is_refused_where_trusted_keys_are_configured(made: Made, board: Board,
                                                                           tmp_path: Path) -> None:
    """The attack with the signature left out, on a board whose config names one trusted key."""
    forged = plant_llvm(made.unsigned, tmp_path / "forged.bundle", PLANTED.data, signature="strip")
    allowed = board.trust(allowed_line("maker@site", made.maker))
    for command in COMMANDS:
        error = refused(board.run("--json", *command, str(forged)), command)
        assert "not signed" in error["message"] and str(allowed) in error["message"], error
        assert any("maker@site" in d and fingerprint(made.maker) in d for d in error["details"]), error
        assert "--sign" in error["fix"], error
    assert board.written() == []


def test_a_signed_bundle_with_its_llvm_swapped_is_refused_naming_the_signer(made: Made, board: Board,
                                                                            tmp_path: Path) -> None:
    """The attack on a signed bundle, its signature kept: the manifest the attacker remade is not the one signed."""
    forged = plant_llvm(made.signed, tmp_path / "forged.bundle", PLANTED.data, signature="keep")
    assert Parts.of(forged).signature == Parts.of(made.signed).signature
    allowed = board.trust(allowed_line("maker@site", made.maker), where="option")
    for command in COMMANDS:
        error = refused(board.run("--json", *command, str(forged), "--trusted-keys", str(allowed)), command)
        assert "does not match its manifest" in error["message"], error
        assert "maker@site" in error["message"] and fingerprint(made.maker) in error["message"], error
    assert board.written() == []
    # not even without trusted keys: a signature that does not match is proof of a change
    error = refused(board.run("--json", "bundle", "verify", str(forged)), ("bundle", "verify"))
    assert fingerprint(made.maker) in error["message"] and "changed after it was signed" in error["message"], error


def test_a_forgery_signed_again_with_another_key_is_refused_naming_that_key(made: Made, board: Board,
                                                                           tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    forged = plant_llvm(made.signed, tmp_path / "forged.bundle", PLANTED.data, signature=made.attacker)
    allowed = board.trust(allowed_line("maker@site", made.maker), where="env")
    monkeypatch.setenv("FLAGTREE_CPU_TRUSTED_KEYS", str(allowed))
    for command in COMMANDS:
        error = refused(board.run("--json", *command, str(forged)), command)
        assert fingerprint(made.attacker) in error["message"] and "not a trusted key" in error["message"], error
        assert str(allowed) in error["message"] and "FLAGTREE_CPU_TRUSTED_KEYS" in error["message"], error
        assert any("maker@site" in d and fingerprint(made.maker) in d for d in error["details"]), error
    assert board.written() == []


def test_an_honest_signed_bundle_is_authenticated_and_setup_publishes_its_tree(made: Made, board: Board) -> None:
    assert made.created["signed_by"]["key"] == fingerprint(made.maker), made.created
    assert made.created["sha256"] == hashlib.sha256(made.signed.read_bytes()).hexdigest()
    board.trust(allowed_line("maker@site", made.maker))
    verified = board.run("--json", "bundle", "verify", str(made.signed))
    assert verified.exit_code == 0, verified.stderr
    result = result_of(verified.stdout)
    assert result["integrity"]["ok"] is True and result["integrity"]["manifest_digest"] == made.created[
        "manifest_digest"]
    authenticity = result["authenticity"]
    assert authenticity["authenticated"] is True, authenticity
    assert authenticity["signature"] == {"key": fingerprint(made.maker), "type": "ssh-ed25519",
                                         "principal": "maker@site", "verified": True, "checked": True,
                                         "namespace": "flagtree-cpu-bundle"}, authenticity
    assert authenticity["trusted_keys"]["from"] == "the user's config", authenticity
    setup = board.run("--json", *COMMANDS[2], str(made.signed))
    assert setup.exit_code == 0, setup.stderr
    assert "authenticated: signed by maker@site" in setup.stderr, setup.stderr
    imported = result_of(setup.stdout)["bundle"]
    assert imported["authenticity"]["authenticated"] is True and imported["imported"] > 0, imported
    saved = json.loads((board.ws.root / ".flagtree-cpu" / "last-setup.json").read_text())
    assert saved["bundle"] == imported  # the saved report says which bundle set this workspace up, and who signed it
    assert published_clang() == llvm_tarball().member("bin/clang")


def test_a_signed_bundle_without_trusted_keys_names_its_signer_unverified(made: Made, board: Board) -> None:
    verified = board.run("--json", "bundle", "verify", str(made.signed))
    assert verified.exit_code == 0, verified.stderr
    authenticity = result_of(verified.stdout)["authenticity"]
    assert authenticity["authenticated"] is False, authenticity
    assert authenticity["signature"]["key"] == fingerprint(made.maker), authenticity
    assert authenticity["signature"]["verified"] is False and authenticity["signature"]["principal"] is None
    assert "unverified" in authenticity["summary"] and fingerprint(made.maker) in authenticity["summary"]
    imported = board.run("bundle", "import", str(made.signed))
    assert imported.exit_code == 0, imported.stderr
    assert "not authenticated" in imported.stderr and fingerprint(made.maker) in imported.stderr


@pytest.mark.parametrize(("options", "said"), [('namespaces="git"', "namespace"),
                                               ('valid-before="20000101"', "expired")], ids=["git-only", "expired"])
def test_a_key_the_allowed_signers_do_not_allow_for_bundles_now_is_refused(made: Made, board: Board, options: str,
                                                                           said: str) -> None:
    """A principal whose line allows only git signatures, or whose validity ended, may not vouch for a bundle."""
    board.trust(allowed_line("maker@site", made.maker, options=options))
    for command in COMMANDS:
        error = refused(board.run("--json", *command, str(made.signed)), command)
        assert "maker@site" in error["message"] and "does not allow" in error["message"], error
        assert said in error["message"] and "namespaces=" in error["fix"], error
    assert board.written() == []


def test_the_option_wins_over_the_environment_which_wins_over_the_config(made: Made, board: Board,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    board.trust(allowed_line("attacker", made.attacker))  # the config trusts only the wrong key
    maker_only = board.trust(allowed_line("maker@site", made.maker), where="maker")
    attacker_only = board.trust(allowed_line("attacker", made.attacker), where="attacker")
    error = refused(board.run("--json", "bundle", "verify", str(made.signed)), ("config",))
    assert "the user's config" in error["message"], error
    monkeypatch.setenv("FLAGTREE_CPU_TRUSTED_KEYS", str(maker_only))
    assert board.run("bundle", "verify", str(made.signed)).exit_code == 0
    error = refused(board.run("--json", "bundle", "verify", str(made.signed), "--trusted-keys", str(attacker_only)),
                    ("option",))
    assert "--trusted-keys" in error["message"] and str(attacker_only) in error["message"], error


@pytest.mark.parametrize("content", ["missing", "empty", "not-a-key"])
def test_trusted_keys_that_cannot_be_read_are_a_usage_error_before_anything(made: Made, board: Board,
                                                                            tmp_path: Path, content: str) -> None:
    allowed = tmp_path / "allowed"
    if content != "missing":
        allowed.write_text({"empty": "# nobody yet\n", "not-a-key": "maker@site ssh-ed25519 not-base64!\n"}[content])
    for command in COMMANDS:
        result = board.run("--json", *command, str(made.signed), "--trusted-keys", str(allowed))
        assert result.exit_code == 2, (command, result.stderr)
        error = error_of(result.stdout)
        assert str(allowed) in error["message"] and "allowed-signers" in (error["fix"] or "") + error["message"]
    assert board.written() == []


def test_incremental_signed_bundles_are_authenticated_each_on_its_own(made: Made, board: Board, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    newer = tmp_path / "newer.bundle"
    with made.connected(monkeypatch) as ws:
        created = ws.run("bundle", "create", "--since", str(made.signed), "--sign", str(made.maker), "-o", str(newer))
    assert created.exit_code == 0, created.stderr
    assert Parts.of(newer).signature is not None
    assert any(m["carried_by_since"] for m in Parts.of(newer).manifest["members"])
    board.trust(allowed_line("maker@site", made.maker))
    for bundle in (made.signed, newer):
        imported = board.run("bundle", "import", str(bundle))
        assert imported.exit_code == 0, imported.stderr
        assert "authenticated: signed by maker@site" in imported.stderr
    stripped = Parts.of(newer)
    stripped.signature = None
    error = refused(board.run("--json", "bundle", "import", str(stripped.write(tmp_path / "stripped.bundle"))),
                    ("stripped",))
    assert "not signed" in error["message"], error
