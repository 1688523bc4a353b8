"""Checksums and streaming digests: one module, so a new algorithm is one table entry."""

from __future__ import annotations

from pathlib import Path

import pytest

from flagtree_cpu_build.digest import (
    Checksum,
    Hasher,
    Hashers,
    hash_bytes,
    hash_file,
    hash_file_all,
    hash_text,
    mismatches,
)

EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
ABC_SHA1 = "a9993e364706816aba3e25717850c26c9cd0d89d"


def test_a_bare_64_digit_digest_is_a_sha256_and_prints_with_its_algorithm() -> None:
    checksum = Checksum.parse(EMPTY_SHA256.upper())
    assert checksum == Checksum("sha256", EMPTY_SHA256)
    assert str(checksum) == f"sha256:{EMPTY_SHA256}"
    assert Checksum.parse(str(checksum)) == checksum


def test_an_algorithm_prefix_names_the_algorithm() -> None:
    assert Checksum.parse(f"sha1:{ABC_SHA1}") == Checksum("sha1", ABC_SHA1)
    assert Checksum.parse(f" SHA256:{EMPTY_SHA256}\n").algorithm == "sha256"


@pytest.mark.parametrize(("text", "problem"), [
    (EMPTY_SHA256[:-1], "64 lower-case hex digits"),
    (f"sha1:{EMPTY_SHA256}", "a sha1 digest is 40"),
    ("g" * 64, "64 lower-case hex digits"),
    (f"md4:{ABC_SHA1}", "unknown digest algorithm 'md4'"),
    ("", "64 lower-case hex digits"),
])
def test_a_malformed_checksum_is_refused_naming_the_rule(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        Checksum.parse(text)


def test_matches_ignores_the_case_of_the_other_digest() -> None:
    assert Checksum("sha256", EMPTY_SHA256).matches(EMPTY_SHA256.upper())
    assert not Checksum("sha256", EMPTY_SHA256).matches("0" * 64)


def test_a_hasher_fed_in_pieces_equals_hashing_at_once() -> None:
    hasher = Hasher("sha1")
    for piece in (b"a", b"", b"bc"):
        hasher.update(piece)
    assert hasher.hexdigest() == ABC_SHA1 == hash_bytes(b"abc", "sha1")
    assert hasher.checksum() == Checksum("sha1", ABC_SHA1)
    assert hash_text("") == EMPTY_SHA256


def test_hash_file_streams_in_chunks(tmp_path: Path) -> None:
    data = bytes(range(256)) * 1000
    path = tmp_path / "blob"
    path.write_bytes(data)
    assert hash_file(path) == hash_file(path, chunk=7) == hash_bytes(data)
    assert hash_file(path, "sha512") == hash_bytes(data, "sha512")


def test_an_unknown_algorithm_is_refused_before_hashing() -> None:
    with pytest.raises(ValueError, match="known: md5, sha1, sha256, sha512"):
        Hasher("crc32")


def test_hashers_compute_sha256_and_the_stated_algorithms_in_one_pass(tmp_path: Path) -> None:
    hashers = Hashers(["MD5", "sha512", "sha256"])
    assert hashers.algorithms == ("sha256", "md5", "sha512")
    for piece in (b"a", b"bc"):
        hashers.update(piece)
    got = hashers.hexdigests()
    assert got == {"sha256": hash_bytes(b"abc"), "md5": "900150983cd24fb0d6963f7d28e17f72",
                   "sha512": hash_bytes(b"abc", "sha512")}
    assert hashers.fresh().hexdigests()["sha256"] == EMPTY_SHA256
    (tmp_path / "f").write_bytes(b"abc")
    assert hash_file_all(tmp_path / "f", ["md5"]) == {"sha256": got["sha256"], "md5": got["md5"]}


def test_mismatches_name_each_algorithm_that_disagrees_sha256_first() -> None:
    got = {"sha256": "a" * 64, "md5": "b" * 32}
    assert mismatches({"md5": "B" * 32}, got) == []
    assert mismatches({"md5": "c" * 32, "sha256": "d" * 64}, got) == [("sha256", "d" * 64, "a" * 64),
                                                                       ("md5", "c" * 32, "b" * 32)]
    assert mismatches({"sha512": "e" * 128}, got) == [("sha512", "e" * 128, "not computed")]
