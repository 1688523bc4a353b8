"""The bundle format: real bundle files written, verified and extracted, and real damaged or hostile ones.

Damage is done to the file's bytes as a copy would do it (a flipped byte, a cut), and hostile archives are
made with ``tarfile`` as an attacker would (links, devices, ``..``, a giant header). Every refusal is checked
for its exit code, the member it names and its fix, and that nothing was written anywhere.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from flagtree_cpu_build.bundle import (
    BUNDLE_SCHEMA,
    MANIFEST_NAME,
    BundleDamaged,
    BundleIncomplete,
    BundleMismatch,
    Manifest,
    Member,
    extract_members,
    member_name,
    seal,
    verify_bundle,
    write_bundle,
)
from flagtree_cpu_build.bundle.archive import MAX_MANIFEST_BYTES
from flagtree_cpu_build.bundle.manifest import canonical_json
from flagtree_cpu_build.digest import hash_bytes
from flagtree_cpu_build.errors import ArtifactError, ExitCode, UsageError

SHA = "ab" * 32
NAMES = {
    "git": member_name("git", "flagtree-0123456789ab.git.bundle"),
    "artifact": member_name("artifact", SHA),
    "wheel": member_name("wheel", "torch-2.3.0+cpu-cp312-cp312-manylinux_2_28_aarch64.whl"),
    "lock": member_name("lock", "flagtree-cpu.yaml"),
    "recipe": member_name("recipe", "flagtree-cpu.yaml"),
}


def _content(kind: str) -> bytes:
    # different sizes, none a multiple of 512: padding and block boundaries are exercised
    return (kind.encode() + bytes(range(256))) * {"git": 41, "artifact": 67, "wheel": 13, "lock": 1, "recipe": 2}[kind]


@pytest.fixture
def source(tmp_path: Path) -> tuple[Manifest, dict[str, Path]]:
    """A draft manifest of one member of each kind, and its files."""
    folder = tmp_path / "files"
    folder.mkdir()
    files = {}
    for kind, name in NAMES.items():
        files[name] = folder / kind
        files[name].write_bytes(_content(kind))
    members = [Member(NAMES["git"], "git", meta={"url": "https://example.invalid/f.git", "mirror": "f.git",
                                                 "commits": ["1" * 40]}),
               Member(NAMES["artifact"], "artifact", meta={"recipe": "flagtree-cpu", "name": "llvm",
                                                           "url": "https://example.invalid/llvm.tar.xz",
                                                           "digest": {"sha256": SHA}}),
               Member(NAMES["wheel"], "wheel", meta={"file": "torch.whl"}),
               Member(NAMES["lock"], "lock", meta={"recipe": "flagtree-cpu"}),
               Member(NAMES["recipe"], "recipe", meta={"recipe": "flagtree-cpu"})]
    draft = Manifest.draft(recipe="flagtree-cpu", stack=["flagtree-cpu"], variant="neon",
                           target={"arch": "aarch64", "platforms": ["manylinux_2_28_aarch64"], "python": "3.12",
                                   "os_id": "ubuntu", "glibc": "2.35"}, members=members)
    return draft, files


@pytest.fixture
def bundle(tmp_path: Path, source: tuple[Manifest, dict[str, Path]]) -> tuple[Path, Manifest]:
    draft, files = source
    path = tmp_path / "b.bundle"
    return path, write_bundle(path, draft, files)


def _offsets(path: Path) -> dict[str, tuple[int, int, int]]:
    """member -> (header offset, data offset, size), read with tarfile from the good file."""
    with tarfile.open(path, "r:") as tar:
        return {m.name: (m.offset, m.offset_data, m.size) for m in tar.getmembers()}


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def _damaged(path: Path, *fragments: str, fix: str = "make the bundle again, or copy it again") -> BundleDamaged:
    """verify_bundle refuses ``path`` with exit 4, a message holding every fragment and ``fix``; nothing written."""
    before = sorted(p.name for p in path.parent.iterdir())
    with pytest.raises(BundleDamaged) as caught:
        verify_bundle(path)
    error = caught.value
    assert error.exit_code == ExitCode.ARTIFACT == 4
    assert error.fix and fix in error.fix
    text = " ".join((error.message, *error.details))
    for fragment in fragments:
        assert fragment in text, text
    assert sorted(p.name for p in path.parent.iterdir()) == before  # verify writes nothing
    return error


def _hand_made(path: Path, entries: list[tuple[tarfile.TarInfo, bytes | None]]) -> None:
    """A tar of exactly these headers and bytes, in this order (an attacker's archive)."""
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in entries:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)


def _file(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), data


def _sealed(members: list[Member], **changes: object) -> Manifest:
    draft = Manifest.draft(recipe="r", stack=["r"], variant=None, target={"arch": "aarch64", "python": "3.12"},
                           members=members)
    return replace(draft, **changes).with_digest()  # type: ignore[arg-type]


def _member(name: str, data: bytes, kind: str = "wheel", **extra: object) -> Member:
    return Member(name, kind, len(data), hash_bytes(data), **extra)  # type: ignore[arg-type]


# --- the good path ----------------------------------------------------------------------------------------


def test_a_bundle_is_a_plain_tar_with_the_manifest_first_and_verifies_to_the_manifest_written(
        bundle: tuple[Path, Manifest], source: tuple[Manifest, dict[str, Path]]) -> None:
    path, written = bundle
    with tarfile.open(path, "r:") as tar:  # uncompressed: "r:" reads no compression
        names = tar.getnames()
        manifest_bytes = tar.extractfile(MANIFEST_NAME).read()  # type: ignore[union-attr]
        modes = {m.mode for m in tar.getmembers()}
        owners = {(m.uid, m.gid, m.uname, m.gname) for m in tar.getmembers()}
    assert names == [MANIFEST_NAME, *NAMES.values()]
    assert modes == {0o644} and owners == {(0, 0, "", "")}  # nothing of the maker's machine but the manifest
    assert json.loads(manifest_bytes) == written.to_json()
    assert verify_bundle(path) == written
    assert written.digest == hash_bytes(canonical_json(written.body()).encode())
    for m in written.members:
        assert (m.size, m.sha256) == (len(_content(m.kind)), hash_bytes(_content(m.kind)))
    assert sorted(p.name for p in path.parent.iterdir()) == ["b.bundle", "files"]  # no temporaries


def test_extract_members_writes_each_named_member_under_its_archive_name(bundle: tuple[Path, Manifest],
                                                                          tmp_path: Path) -> None:
    path, manifest = bundle
    wanted = [NAMES["lock"], NAMES["recipe"], NAMES["artifact"]]  # a lock and a recipe share a file name
    got = extract_members(path, verify_bundle(path), wanted, tmp_path / "out")
    assert got == {name: tmp_path / "out" / name for name in wanted}
    for name, file in got.items():
        assert file.read_bytes() == _content(manifest.member(name).kind)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["artifacts", "locks", "recipes"]
    assert extract_members(path, manifest, [], tmp_path / "none") == {}


def test_progress_reports_bytes_up_to_the_whole(bundle: tuple[Path, Manifest], tmp_path: Path,
                                                source: tuple[Manifest, dict[str, Path]]) -> None:
    path, _ = bundle
    seen: list[tuple[int, int | None]] = []
    verify_bundle(path, progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (path.stat().st_size, path.stat().st_size)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    wrote: list[tuple[int, int | None]] = []
    draft, files = source
    write_bundle(tmp_path / "c.bundle", draft, files, progress=lambda done, total: wrote.append((done, total)))
    total = sum(len(_content(k)) for k in NAMES)
    assert wrote[-1] == (2 * total, 2 * total)  # a draft is hashed, then written: two readings
    assert [d for d, _ in wrote] == sorted(d for d, _ in wrote) and wrote[len(NAMES) - 1] == (total, 2 * total)
    wrote.clear()
    write_bundle(tmp_path / "d.bundle", seal(draft, files), files, progress=lambda d, t: wrote.append((d, t)))
    assert wrote[-1] == (total, total)


def test_the_manifest_round_trips_and_its_digest_covers_every_field(bundle: tuple[Path, Manifest]) -> None:
    _, manifest = bundle
    assert Manifest.from_json(json.loads(manifest.to_bytes()), "x") == manifest
    assert manifest.host.keys() == {"hostname", "arch", "os"} and manifest.tool_version and manifest.created
    assert manifest.made_for() == "recipe flagtree-cpu variant neon, aarch64, Python 3.12"
    assert manifest.member(NAMES["wheel"]).kind == "wheel"
    assert [m.kind for m in manifest.of_kind("git")] == ["git"]
    with pytest.raises(KeyError, match="wheels/nope.whl"):
        manifest.member("wheels/nope.whl")
    changed = [replace(manifest, variant=None), replace(manifest, since="c" * 64), replace(manifest, stack=("a", "b")),
               replace(manifest, members=manifest.members[1:]),
               replace(manifest, members=(replace(manifest.members[0], meta={"url": "other"}),
                                          *manifest.members[1:])),
               replace(manifest, target={**manifest.target, "python": "3.11"})]
    assert len({c.compute_digest() for c in changed} | {manifest.digest}) == len(changed) + 1


def test_member_names_are_one_kind_folder_and_one_plain_file_name() -> None:
    assert member_name("artifact", SHA) == f"artifacts/{SHA}"
    for bad in ("../x", "a/b", ".hidden", "", "x" * 201, "a\\b", "a b", "é"):
        with pytest.raises(ValueError):
            member_name("wheel", bad)
    with pytest.raises(ValueError, match="unknown member kind"):
        member_name("tarball", "x")  # type: ignore[arg-type]


def test_seal_fills_sizes_and_digests_and_keeps_what_an_incremental_bundle_carries(
        tmp_path: Path, source: tuple[Manifest, dict[str, Path]]) -> None:
    draft, files = source
    old = seal(draft, files)
    carried = replace(old.member(NAMES["artifact"]), carried_by_since=True)
    draft2 = replace(draft, since=old.digest,
                     members=tuple(carried if m.name == carried.name else m for m in draft.members))
    rest = {n: p for n, p in files.items() if n != carried.name}
    with pytest.raises(ValueError, match="artifacts/"):
        seal(draft2, files)  # a carried member has no file in the bundle
    with pytest.raises(ValueError, match="no file for"):
        seal(draft, rest)
    path = tmp_path / "inc.bundle"
    new = write_bundle(path, draft2, rest)
    assert new.member(carried.name) == carried and new.since == old.digest
    assert [m.name for m in new.present()] == [n for n in NAMES.values() if n != carried.name]
    assert verify_bundle(path) == new
    with tarfile.open(path) as tar:
        assert carried.name not in tar.getnames()
    with pytest.raises(BundleIncomplete) as caught:
        extract_members(path, new, [carried.name], tmp_path / "out")
    assert caught.value.exit_code == 4 and "--since" in caught.value.message
    assert not (tmp_path / "out").exists()


def test_the_error_classes_have_their_exit_codes() -> None:
    assert issubclass(BundleDamaged, ArtifactError) and BundleDamaged("x").exit_code == 4
    assert issubclass(BundleMismatch, UsageError) and BundleMismatch("x").exit_code == 2
    assert issubclass(BundleIncomplete, ArtifactError) and BundleIncomplete("x").exit_code == 4
    assert BundleDamaged("x").to_json()["code"] == "artifact"


# --- damage as a copy does it -----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(NAMES))
@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_one_byte_changed_in_any_member_is_refused_naming_it(bundle: tuple[Path, Manifest], kind: str,
                                                             where: str) -> None:
    path, _ = bundle
    _, data, size = _offsets(path)[NAMES[kind]]
    _flip(path, data + {"first": 0, "middle": size // 2, "last": size - 1}[where])
    error = _damaged(path, NAMES[kind], "expected sha256", "got sha256")
    assert f"member {NAMES[kind]!r} is damaged" in error.message


def test_a_changed_manifest_is_refused_by_its_own_digest(bundle: tuple[Path, Manifest]) -> None:
    path, manifest = bundle
    _, data, size = _offsets(path)[MANIFEST_NAME]
    text = path.read_bytes()
    at = text.index(b'"variant": "neon"', data)  # same length, still valid JSON: only the digest can tell
    path.write_bytes(text[:at] + b'"variant": "sve2"' + text[at + 17:])
    _damaged(path, MANIFEST_NAME, "changed after the bundle was made", manifest.digest)


def test_a_manifest_byte_that_breaks_the_json_is_refused(bundle: tuple[Path, Manifest]) -> None:
    path, _ = bundle
    _, data, _ = _offsets(path)[MANIFEST_NAME]
    _flip(path, data)  # "{" -> "z"
    _damaged(path, MANIFEST_NAME, "is not valid JSON")


def test_a_damaged_tar_header_is_refused(bundle: tuple[Path, Manifest]) -> None:
    path, _ = bundle
    header, _, _ = _offsets(path)[NAMES["wheel"]]
    _flip(path, header + 124)  # the size field: the header's checksum no longer matches
    _damaged(path, "lacks member", NAMES["wheel"], "cannot be read")
    _flip(path, header + 124)
    verify_bundle(path)
    _flip(path, 0)  # the first header: not even a tar any more
    _damaged(path, "cannot be read as a tar archive")


def _cut_points(path: Path) -> dict[str, int]:
    offsets = _offsets(path)
    _, m_data, m_size = offsets[MANIFEST_NAME]
    w_header, w_data, w_size = offsets[NAMES["wheel"]]
    r_header, r_data, r_size = offsets[NAMES["recipe"]]
    return {"empty": 0, "in the first header": 100, "in the manifest": m_data + m_size // 2,
            "at a member's header": w_header, "in a member's header": w_header + 300,
            "in a member's data": w_data + w_size // 2, "before the last byte": r_data + r_size - 1}


@pytest.mark.parametrize("cut", ["empty", "in the first header", "in the manifest", "at a member's header",
                                 "in a member's header", "in a member's data", "before the last byte"])
def test_a_truncated_bundle_is_refused(bundle: tuple[Path, Manifest], cut: str) -> None:
    path, _ = bundle
    at = _cut_points(path)[cut]
    with open(path, "r+b") as f:
        f.truncate(at)
    expected = {"in a member's data": NAMES["wheel"], "before the last byte": NAMES["recipe"],
                "in the manifest": MANIFEST_NAME, "at a member's header": NAMES["wheel"],
                "in a member's header": NAMES["wheel"]}.get(cut, "")
    _damaged(path, expected)


def test_a_bundle_cut_only_in_its_end_marker_still_has_every_byte_and_verifies(bundle: tuple[Path, Manifest]) -> None:
    path, manifest = bundle
    _, data, size = _offsets(path)[NAMES["recipe"]]
    with open(path, "r+b") as f:
        f.truncate(data + -(-size // 512) * 512)  # the zero blocks after the last member: no member's byte is lost
    assert verify_bundle(path) == manifest


def test_not_a_bundle_at_all(tmp_path: Path, bundle: tuple[Path, Manifest]) -> None:
    path, _ = bundle
    zipped = tmp_path / "b.bundle.gz"
    zipped.write_bytes(gzip.compress(path.read_bytes()))
    _damaged(zipped, "decompressed first")
    text = tmp_path / "notes.txt"
    text.write_text("hello\n" * 200)
    _damaged(text, "cannot be read as a tar archive")
    with pytest.raises(UsageError, match="there is no bundle at") as caught:
        verify_bundle(tmp_path / "nowhere.bundle")
    assert caught.value.exit_code == 2
    with pytest.raises(UsageError, match="is a folder"):
        verify_bundle(tmp_path)


# --- hostile archives --------------------------------------------------------------------------------------


@pytest.fixture
def good() -> tuple[Manifest, bytes]:
    data = b"wheel bytes\n" * 100
    return _sealed([_member("wheels/a-1.0-py3-none-any.whl", data)]), data


def test_a_missing_member_is_named(tmp_path: Path, good: tuple[Manifest, bytes]) -> None:
    manifest, data = good
    other = b"other"
    manifest = _sealed([*manifest.members, _member("wheels/b-1.0-py3-none-any.whl", other)])
    path = tmp_path / "x.bundle"
    _hand_made(path, [_file(MANIFEST_NAME, manifest.to_bytes()), _file(manifest.members[0].name, data)])
    _damaged(path, "lacks member 'wheels/b-1.0-py3-none-any.whl'", "after 'wheels/a-1.0-py3-none-any.whl'")


@pytest.mark.parametrize("extra", ["wheels/extra-1.0-py3-none-any.whl", "artifacts/" + "c" * 64])
def test_an_extra_member_is_named(tmp_path: Path, good: tuple[Manifest, bytes], extra: str) -> None:
    manifest, data = good
    path = tmp_path / "x.bundle"
    _hand_made(path, [_file(MANIFEST_NAME, manifest.to_bytes()), _file(extra, b"more"),
                      _file(manifest.members[0].name, data)])
    _damaged(path, f"member {extra!r}", "does not list")


def test_a_member_left_to_the_since_bundle_must_not_be_in_the_archive(tmp_path: Path,
                                                                      good: tuple[Manifest, bytes]) -> None:
    _, data = good
    manifest = _sealed([_member("wheels/a-1.0-py3-none-any.whl", data, carried_by_since=True)], since="d" * 64)
    path = tmp_path / "x.bundle"
    _hand_made(path, [_file(MANIFEST_NAME, manifest.to_bytes()), _file(manifest.members[0].name, data)])
    _damaged(path, "left to the bundle it was made --since")


def test_a_member_of_another_size_than_listed_is_refused(tmp_path: Path, good: tuple[Manifest, bytes]) -> None:
    manifest, data = good
    path = tmp_path / "x.bundle"
    _hand_made(path, [_file(MANIFEST_NAME, manifest.to_bytes()), _file(manifest.members[0].name, data + b"!")])
    _damaged(path, f"member {manifest.members[0].name!r} is {len(data) + 1} bytes, its manifest says {len(data)}")


def test_a_duplicate_member_is_refused(tmp_path: Path, good: tuple[Manifest, bytes]) -> None:
    manifest, data = good
    path = tmp_path / "x.bundle"
    name = manifest.members[0].name
    _hand_made(path, [_file(MANIFEST_NAME, manifest.to_bytes()), _file(name, data), _file(name, data)])
    _damaged(path, f"member {name!r} twice")
    _hand_made(path, [_file(MANIFEST_NAME, manifest.to_bytes()), _file(MANIFEST_NAME, manifest.to_bytes()),
                      _file(name, data)])
    _damaged(path, f"hostile member {MANIFEST_NAME!r}")


@pytest.mark.parametrize("name", ["../evil", "/etc/passwd", "wheels/../../evil", "wheels/sub/x.whl", "C:/x",
                                  "wheels/.hidden", "evil", "wheels\\..\\x"])
def test_a_member_path_that_escapes_is_refused_and_nothing_is_extracted(tmp_path: Path, name: str,
                                                                        good: tuple[Manifest, bytes]) -> None:
    manifest, data = good
    path = tmp_path / "x.bundle"
    _hand_made(path, [_file(MANIFEST_NAME, manifest.to_bytes()), _file(name, b"pwned"),
                      _file(manifest.members[0].name, data)])
    _damaged(path, "hostile member", repr(name))
    assert not (tmp_path / "evil").exists() and not (tmp_path.parent / "evil").exists()


def _special(name: str, kind: bytes, linkname: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    return info, None


@pytest.mark.parametrize(("kind", "linkname", "what"), [
    (tarfile.SYMTYPE, "/etc/passwd", "a symlink"), (tarfile.LNKTYPE, MANIFEST_NAME, "a hard link"),
    (tarfile.CHRTYPE, "", "a device file or FIFO"), (tarfile.BLKTYPE, "", "a device file or FIFO"),
    (tarfile.FIFOTYPE, "", "a device file or FIFO"), (tarfile.DIRTYPE, "", "a folder")])
def test_links_devices_fifos_and_folders_are_refused(tmp_path: Path, good: tuple[Manifest, bytes], kind: bytes,
                                                     linkname: str, what: str) -> None:
    manifest, data = good
    path = tmp_path / "x.bundle"
    name = manifest.members[0].name  # even under a listed name: a hard link would read the manifest's bytes
    _hand_made(path, [_file(MANIFEST_NAME, manifest.to_bytes()), _special(name, kind, linkname), _file(name, data)])
    _damaged(path, f"member {name!r} as {what}", "plain files only")


def test_the_manifest_must_be_the_first_member(tmp_path: Path, good: tuple[Manifest, bytes]) -> None:
    manifest, data = good
    path = tmp_path / "x.bundle"
    _hand_made(path, [_file(manifest.members[0].name, data), _file(MANIFEST_NAME, manifest.to_bytes())])
    _damaged(path, f"its first member is {manifest.members[0].name!r}, not the manifest {MANIFEST_NAME}")
    _hand_made(path, [_special(MANIFEST_NAME, tarfile.SYMTYPE, "elsewhere.json")])
    _damaged(path, "not the manifest")


def test_a_huge_manifest_is_refused_before_it_is_read(tmp_path: Path) -> None:
    info = tarfile.TarInfo(MANIFEST_NAME)
    info.size = MAX_MANIFEST_BYTES + 1
    path = tmp_path / "x.bundle"
    path.write_bytes(info.tobuf(tarfile.USTAR_FORMAT) + b"{" * 4096)  # the header claims 64 MiB; 4 KiB follow
    _damaged(path, f"{MANIFEST_NAME} is {MAX_MANIFEST_BYTES + 1} bytes", "more than a manifest can be")


def test_a_giant_tar_header_is_refused_before_it_is_read_into_memory(tmp_path: Path) -> None:
    info = tarfile.TarInfo("././@PaxHeader")
    info.type, info.size = tarfile.XHDTYPE, 7 * 1024 ** 3  # tarfile would read 7 GiB of pax records at once
    path = tmp_path / "x.bundle"
    path.write_bytes(info.tobuf(tarfile.USTAR_FORMAT) + b"0" * 4096)
    _damaged(path, "a tar header at byte", "7516192768 bytes long")


def _manifest_doc(good: tuple[Manifest, bytes]) -> dict:
    return json.loads(good[0].to_bytes())


def _redigest(doc: dict) -> dict:
    body = {k: v for k, v in doc.items() if k != "digest"}
    return {**body, "digest": hash_bytes(canonical_json(body).encode())}


def _set(path: tuple, value: object):  # type: ignore[no-untyped-def]
    def change(doc: dict) -> None:
        target = doc
        for key in path[:-1]:
            target = target[key]
        if value is KeyError:
            del target[path[-1]]
        else:
            target[path[-1]] = value
    return change


@pytest.mark.parametrize(("change", "fragment"), [
    (_set(("schema",), "something/else"), "schema is 'something/else'"),
    (_set(("schema",), "flagtree-cpu/bundle/v9"), "this flagtree-cpu reads flagtree-cpu/bundle/v1|import it with"),
    (_set(("recipe",), KeyError), "missing recipe"),
    (_set(("surprise",), 1), "unknown surprise"),
    (_set(("stack",), []), "stack must be a non-empty list"),
    (_set(("stack",), "r"), "stack must be list"),
    (_set(("variant",), 3), "variant must be str or null"),
    (_set(("host",), {"arch": 1}), "host values must be strings"),
    (_set(("since",), "not-a-digest"), "since must be a sha256"),
    (_set(("members",), {}), "members must be list"),
    (_set(("members", 0), "x"), "members[0] must be an object"),
    (_set(("members", 0, "size"), "12"), "members[0].size must be int"),
    (_set(("members", 0, "size"), True), "members[0].size must be int"),
    (_set(("members", 0, "size"), -1), "members[0].size must not be negative"),
    (_set(("members", 0, "sha256"), "AB" * 32), "members[0].sha256 must be a sha256"),
    (_set(("members", 0, "kind"), "tarball"), "'tarball' is not one of git, artifact, wheel, lock, recipe"),
    (_set(("members", 0, "kind"), "artifact"), "its kind is 'artifact'"),
    (_set(("members", 0, "name"), "../../x"), "climbs out"),
    (_set(("members", 0, "name"), "/etc/passwd"), "absolute path"),
    (_set(("members", 0, "meta"), []), "members[0].meta must be dict"),
    (_set(("members", 0, "carried_by_since"), "no"), "carried_by_since must be bool"),
    (_set(("members", 0, "extra"), 1), "unknown extra"),
    (lambda doc: doc["members"].append(doc["members"][0]), "name 'wheels/a-1.0-py3-none-any.whl' twice"),
])
def test_a_manifest_of_the_wrong_shape_is_refused_naming_the_key(tmp_path: Path, good: tuple[Manifest, bytes],
                                                                  change, fragment: str) -> None:  # type: ignore[no-untyped-def]
    doc = _manifest_doc(good)
    change(doc)
    path = tmp_path / "x.bundle"
    _hand_made(path, [_file(MANIFEST_NAME, json.dumps(_redigest(doc)).encode()),
                      _file(good[0].members[0].name, good[1])])
    fragment, _, fix = fragment.partition("|")
    _damaged(path, MANIFEST_NAME, fragment, **({"fix": fix} if fix else {}))


@pytest.mark.parametrize(("text", "fragment"), [
    (b'{"a": 1, "a": 2}', "duplicate key 'a'"), (b'{"size": NaN}', "NaN is not a number JSON allows"),
    (b"[1, 2]", "must be an object, not list"), (b"\xff\xfe", "not valid JSON"), (b"", "not valid JSON"),
    (b"[" * 200_000, "not valid JSON")])
def test_a_manifest_that_is_not_strict_json_is_refused(tmp_path: Path, text: bytes, fragment: str) -> None:
    path = tmp_path / "x.bundle"
    _hand_made(path, [_file(MANIFEST_NAME, text)])
    _damaged(path, fragment)


# --- writing ----------------------------------------------------------------------------------------------


def test_an_interrupted_write_leaves_the_old_bundle_and_no_temporary(bundle: tuple[Path, Manifest],
                                                                     source: tuple[Manifest, dict[str, Path]]) -> None:
    path, _ = bundle
    old = path.read_bytes()
    draft, files = source

    def ctrl_c(done: int, total: int | None) -> None:
        if done > 0:
            raise KeyboardInterrupt  # as ProgressTask.update does when the run is cancelled

    sealed = seal(replace(draft, variant="other"), files)
    with pytest.raises(KeyboardInterrupt):
        write_bundle(path, sealed, files, progress=ctrl_c)
    assert path.read_bytes() == old
    assert sorted(p.name for p in path.parent.iterdir()) == ["b.bundle", "files"]


@pytest.mark.parametrize("change", ["same size", "shorter", "longer"])
def test_a_file_changed_after_sealing_is_not_written(bundle: tuple[Path, Manifest], change: str,
                                                     source: tuple[Manifest, dict[str, Path]]) -> None:
    path, _ = bundle
    old = path.read_bytes()
    draft, files = source
    sealed = seal(replace(draft, variant="other"), files)
    victim = files[NAMES["wheel"]]
    data = victim.read_bytes()
    victim.write_bytes({"same size": data[:-1] + b"!", "shorter": data[:-1], "longer": data + b"!"}[change])
    with pytest.raises(ArtifactError) as caught:
        write_bundle(path, sealed, files)
    assert str(victim) in caught.value.message and NAMES["wheel"] in caught.value.message
    assert "changed while the bundle was written" in caught.value.message
    assert path.read_bytes() == old
    assert sorted(p.name for p in path.parent.iterdir()) == ["b.bundle", "files"]


def test_write_refuses_a_folder_a_missing_folder_and_a_manifest_changed_after_sealing(
        tmp_path: Path, source: tuple[Manifest, dict[str, Path]]) -> None:
    draft, files = source
    with pytest.raises(UsageError, match="is a folder"):
        write_bundle(tmp_path, draft, files)
    with pytest.raises(UsageError, match="does not exist"):
        write_bundle(tmp_path / "no" / "b.bundle", draft, files)
    sealed = seal(draft, files)
    with pytest.raises(ValueError, match="changed after it was sealed"):
        write_bundle(tmp_path / "b.bundle", replace(sealed, recipe="other"), files)
    assert not (tmp_path / "b.bundle").exists()


# --- extracting -------------------------------------------------------------------------------------------


def test_a_member_changed_after_verify_is_refused_on_extraction_and_nothing_is_left(
        bundle: tuple[Path, Manifest], tmp_path: Path) -> None:
    path, _ = bundle
    manifest = verify_bundle(path)
    _, data, size = _offsets(path)[NAMES["wheel"]]
    _flip(path, data + size // 2)  # after verify: the file on a USB stick changed, or another process wrote it
    out = tmp_path / "out"
    with pytest.raises(BundleDamaged) as caught:
        extract_members(path, manifest, [NAMES["git"], NAMES["wheel"]], out)  # git comes first and is fine
    assert NAMES["wheel"] in caught.value.message and "changed after the bundle was verified" in caught.value.message
    assert [p for p in out.rglob("*") if p.is_file()] == []  # the good git member written first is removed too


def test_an_interrupted_extraction_leaves_nothing(bundle: tuple[Path, Manifest], tmp_path: Path) -> None:
    path, manifest = bundle
    calls: list[int] = []

    def ctrl_c(done: int, total: int | None) -> None:
        calls.append(done)
        if len(calls) > 2:  # the git member is written by now
            raise KeyboardInterrupt

    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        extract_members(path, manifest, list(NAMES.values()), out, progress=ctrl_c)
    assert (out / NAMES["git"]).parent.is_dir() and [p for p in out.rglob("*") if p.is_file()] == []


def test_another_bundle_at_the_verified_path_is_refused_on_extraction(bundle: tuple[Path, Manifest], tmp_path: Path,
                                                                     source: tuple[Manifest, dict[str, Path]]) -> None:
    path, manifest = bundle
    draft, files = source
    write_bundle(path, replace(draft, variant="other"), files)
    with pytest.raises(BundleDamaged, match="its manifest is another one"):
        extract_members(path, manifest, [NAMES["wheel"]], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_extract_refuses_names_the_manifest_does_not_have(bundle: tuple[Path, Manifest], tmp_path: Path) -> None:
    path, manifest = bundle
    with pytest.raises(KeyError):
        extract_members(path, manifest, ["wheels/nope.whl"], tmp_path / "out")
    with pytest.raises(ValueError, match="climbs out"):
        extract_members(path, replace(manifest, members=(Member("../x", "wheel", 1, SHA),)), ["../x"], tmp_path)
    assert not (tmp_path / "out").exists()


def test_extract_replaces_a_symlink_at_a_member_path_instead_of_writing_through_it(
        bundle: tuple[Path, Manifest], tmp_path: Path) -> None:
    path, manifest = bundle
    out = tmp_path / "out"
    (out / "wheels").mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_text("mine")
    os.symlink(victim, out / NAMES["wheel"])
    extract_members(path, manifest, [NAMES["wheel"]], out)
    assert victim.read_text() == "mine"
    assert not (out / NAMES["wheel"]).is_symlink() and (out / NAMES["wheel"]).read_bytes() == _content("wheel")


def test_schema_constant() -> None:
    assert BUNDLE_SCHEMA == "flagtree-cpu/bundle/v1" and MANIFEST_NAME == "flagtree-cpu-bundle.json"
