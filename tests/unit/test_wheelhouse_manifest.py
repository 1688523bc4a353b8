"""A wheelhouse manifest read as an attacker would write it: every name, type, number and nesting level is checked
before anything uses it, and a manifest that fails is one error naming the entry (readers warn and build here).
Special files are refused before they are opened; a manifest is read only up to its cap."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flagtree_cpu_build import wheelhouse as wh
from flagtree_cpu_build.stages.build.prebuilt import Identity, choose

CLASS = wh.target_class("aarch64", ("sve2", "i8mm", "bf16"), 128, "2.36", "3.11.7")
STAMP, CLASS_ID = "5" * 64, "c" * 64
WHERE = "/srv/wh/flagtree-cpu-wheelhouse.json"


def entry(build: int = 1, stamp: str = STAMP, class_id: str = CLASS_ID, **extra: Any) -> dict[str, Any]:
    """A well-formed entry of the wheel pkg 1.0, published as build ``build``."""
    return {"file": f"wheels/pkg-1.0-{build}.{stamp[:12]}.{class_id[:8]}-py3-none-any.whl", "sha256": "0" * 64,
            "size": 1234, "recipe": "r", "variant": None, "stamp": stamp, "class": dict(CLASS), "class_id": class_id,
            "key": {"sources": {"a": {"commit": "f" * 40}}}, "original": "pkg-1.0-py3-none-any.whl", **extra}


def manifest(*entries: dict[str, Any]) -> str:
    return json.dumps({"schema": wh.SCHEMA, "wheels": list(entries)})


def refused(text: str | bytes) -> str:
    with pytest.raises(wh.DamagedManifest) as caught:
        wh.parse_manifest(text, WHERE)
    assert f"mv {WHERE} {WHERE}.damaged" in (caught.value.fix or "")
    return caught.value.message + "\n" + "\n".join(caught.value.details)


def test_a_well_formed_manifest_of_old_and_new_build_tags_is_read() -> None:
    old = entry(0, stamp="6" * 64)  # published before build numbers: 0.<stamp>.<class>
    wheels = wh.parse_manifest(manifest(old, entry(7)), WHERE)
    assert [w["file"] for w in wheels] == [old["file"], entry(7)["file"]]
    assert [wh.build_number(w["file"]) for w in wheels] == [0, 7]


@pytest.mark.parametrize("field, value", [
    ("original", "/tmp/x.sh"),
    ("original", "../../x.sh"),
    ("original", "dist/pkg-1.0-py3-none-any.whl"),
    ("original", "..\\pkg-1.0-py3-none-any.whl"),
    ("original", ".pkg-1.0-py3-none-any.whl"),
    ("original", "x.sh"),
    ("original", ""),
    ("original", "other-1.0-py3-none-any.whl"),  # not the wheel the entry's file is
    ("original", "pkg-2.0-py3-none-any.whl"),
    ("original", "pkg-1.0-cp311-cp311-linux_x86_64.whl"),
    ("original", "pkg-1.0-py3-none-any.whl\n::error::forged"),
    ("original", 7),
    ("file", "wheels/../../../etc/x.whl"),
    ("file", "wheels/%2e%2e/pkg-1.0-py3-none-any.whl"),
    ("file", "wheels/%2e%2e%2fpkg-1.0-1.555555555555.cccccccc-py3-none-any.whl"),
    ("file", "http://evil.example/pkg-1.0-1.555555555555.cccccccc-py3-none-any.whl"),
    ("file", "/etc/pkg-1.0-1.555555555555.cccccccc-py3-none-any.whl"),
    ("file", "wheels/pkg-1.0-1.555555555555.cccccccc-py3-none-any.whl?x=1"),
    ("file", "wheels/pkg-1.0-1.555555555555.cccccccc-py3-none-any.whl#sha256=0"),
    ("file", "wheels/.pkg-1.0-1.555555555555.cccccccc-py3-none-any.whl"),
    ("file", "wheels/pkg-1.0-py3-none-any.whl"),  # no build tag naming the entry's stamp and class
    ("file", "wheels/pkg-1.0-1.ffffffffffff.cccccccc-py3-none-any.whl"),  # another build's tag
    ("file", "wheels/not-a-wheel.whl"),
])
def test_a_name_in_the_manifest_that_is_not_the_entrys_bare_wheel_name_is_refused_naming_it(
        field: str, value: object) -> None:
    said = refused(manifest(entry(), entry(2, **{field: value})))
    assert "wheels[1]" in said and field in said


def nested(depth: int) -> object:
    value: object = "leaf"
    for _ in range(depth):
        value = {"k": value}
    return value


def _set(path: tuple[str, ...], value: object) -> Callable[[dict[str, Any]], None]:
    def change(target: dict[str, Any]) -> None:
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return change


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda target: target.pop(key)


@pytest.mark.parametrize("change, field", [
    (_set(("class", "arch"), ["x86_64", 1]), "class.arch"),
    (_set(("class", "arch"), ""), "class.arch"),
    (_set(("class", "cpu_features"), [1, 2]), "class.cpu_features"),
    (_set(("class", "cpu_features"), "sve2"), "class.cpu_features"),
    (_set(("class", "cpu_features"), [["sve2"]]), "class.cpu_features"),
    (_set(("class", "sve_vector_bits"), True), "class.sve_vector_bits"),
    (_set(("class", "sve_vector_bits"), "128"), "class.sve_vector_bits"),
    (_set(("class", "sve_vector_bits"), -128), "class.sve_vector_bits"),
    (_set(("class", "sve_vector_bits"), 10 ** 30), "class.sve_vector_bits"),
    (_set(("class", "glibc"), 2.36), "class.glibc"),
    (_set(("class", "python"), ["cp311"]), "class.python"),
    (_set(("class",), ["aarch64"]), "class"),
    (_drop("class"), "class"),
    (_set(("size",), True), "size"),
    (_set(("size",), -1), "size"),
    (_set(("size",), 0), "size"),
    (_set(("size",), 2 ** 80), "size"),
    (_set(("size",), 1234.0), "size"),
    (_set(("sha256",), "A" * 64), "sha256"),
    (_set(("sha256",), "0" * 63), "sha256"),
    (_set(("sha256",), "../../etc"), "sha256"),
    (_set(("stamp",), "s" * 64), "stamp"),
    (_set(("class_id",), 1), "class_id"),
    (_set(("recipe",), ""), "recipe"),
    (_set(("recipe",), "r\x1b]0;owned\x07"), "recipe"),
    (_set(("variant",), 3), "variant"),
    (_set(("variant",), ["gpu"]), "variant"),
    (_set(("key",), ["not", "a", "dict"]), "key"),
    (_set(("key",), nested(200)), "key"),  # deeper than any build key; deep enough to break a recursive reader
    (_set(("key", "x"), "\ud800"), "key"),  # a lone surrogate: text with no UTF-8 form
    (_set(("lock",), nested(200)), "lock"),
])
def test_a_wrong_type_anywhere_in_an_entry_is_a_damaged_manifest_naming_the_field(
        change: Callable[[dict[str, Any]], None], field: str) -> None:
    bad = entry(2)
    change(bad)
    said = refused(manifest(entry(), bad))
    assert "wheels[1]" in said and field in said


@pytest.mark.parametrize("text, said", [
    (manifest(entry()).replace('"sha256": ', f'"sha256": "{"f" * 64}", "sha256": ', 1), "duplicate key 'sha256'"),
    (manifest(entry()).replace('"wheels": ', '"wheels": [], "wheels": ', 1), "duplicate key 'wheels'"),
    (manifest(entry()).replace('"size": 1234', '"size": NaN'), "NaN"),
    (manifest(entry()).replace('"size": 1234', '"size": Infinity'), "Infinity"),
    (manifest(entry()).replace('"size": 1234', '"size": 1e999'), "1e999"),
    (manifest(entry()).replace('"size": 1234', '"size": ' + "9" * 5000), "not JSON"),
    (manifest(entry()).encode("utf-8").replace(b'"r"', b'"\xff"'), "not UTF-8"),
    ("[" * 100_000 + "]" * 100_000, "not JSON"),
])
def test_json_two_readers_could_read_differently_is_refused(text: str | bytes, said: str) -> None:
    assert said in refused(text)


def test_who_built_it_is_shown_only_as_printable_text() -> None:
    hostile = {"host": "a\n::error title=x::forged", "at": "2026-11-23T00:00:00Z", "glibc": ["2.36"],
               "compilers": {"cc": "gcc\x1b[2J"}, "python": "3.11.7"}
    [wheel] = wh.parse_manifest(manifest(entry(built_on=hostile)), WHERE)
    assert wheel["built_on"] == {"at": "2026-11-23T00:00:00Z", "python": "3.11.7"}
    [wheel] = wh.parse_manifest(manifest(entry(built_on="x")), WHERE)
    assert wheel["built_on"] == {}


def test_a_key_that_differs_in_unprintable_text_is_shown_escaped() -> None:
    published = entry(key={"env": {"CC": "gcc\n::error::forged\x1b[2J"}})
    found, why = choose([published], "r", None, Identity({"env": {"CC": "gcc"}}, "7" * 64, CLASS, CLASS_ID))
    assert found is None and "\n" not in why and "\x1b" not in why
    assert "env.CC 'gcc\\n::error::forged\\x1b[2J' -> gcc" in why


def test_choose_takes_the_highest_build_number_then_the_newest_as_pip_does() -> None:
    wheels = [entry(3, built_on={"at": "2026-11-01T00:00:00Z"}), entry(2, built_on={"at": "2026-11-30T00:00:00Z"}),
              entry(0, built_on={"at": "2026-12-30T00:00:00Z"})]
    found, _ = choose(wheels, "r", None, Identity({}, STAMP, CLASS, CLASS_ID))
    assert found is not None and wh.build_number(found["file"]) == 3
    old = [entry(0, built_on={"at": "2026-11-01T00:00:00Z"}), entry(0, built_on={"at": "2026-11-20T00:00:00Z"})]
    found, _ = choose(old, "r", None, Identity({}, STAMP, CLASS, CLASS_ID))
    assert found is old[1]


# --- special files and sizes ------------------------------------------------------------------------------


def _unblock_after(fifo: Path, seconds: float) -> threading.Timer:
    """Old readers block in open() on a FIFO: a writer that comes and goes after ``seconds`` lets them go (with
    nothing read), so this test fails instead of hanging when the FIFO is opened."""
    def open_and_close() -> None:
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass  # nobody is reading it: nothing to release

    timer = threading.Timer(seconds, open_and_close)
    timer.start()
    return timer


@pytest.mark.parametrize("link", [False, True])
def test_a_manifest_that_is_a_fifo_is_refused_without_opening_it(tmp_path: Path, link: bool) -> None:
    folder = tmp_path / "wh"
    folder.mkdir()
    fifo = tmp_path / "pipe" if link else folder / wh.MANIFEST
    os.mkfifo(fifo)
    if link:
        (folder / wh.MANIFEST).symlink_to(fifo)
    timer = _unblock_after(fifo, 5)
    try:
        fifo_said = "is not a regular file .(a symlink to .*, which is )?a FIFO"
        with pytest.raises(wh.DamagedManifest, match=fifo_said) as caught:
            wh.read_local_manifest(folder)
    finally:
        timer.cancel()
    assert str(folder / wh.MANIFEST) in caught.value.message


def test_publishing_into_a_wheelhouse_whose_manifest_is_a_fifo_refuses_at_once(tmp_path: Path) -> None:
    from tests.unit.test_wheelhouse import fake_wheel, publish_entry

    folder = tmp_path / "wh"
    folder.mkdir()
    os.mkfifo(folder / wh.MANIFEST)
    timer = _unblock_after(folder / wh.MANIFEST, 5)
    try:
        with pytest.raises(wh.DamagedManifest, match="is not a regular file"):
            wh.publish(folder, fake_wheel(tmp_path / "dist", "pkg-1.0-py3-none-any.whl", "one"),
                       publish_entry("1" * 64), wait_note=print)
    finally:
        timer.cancel()
    assert not list((folder / "wheels").iterdir())


def test_a_manifest_over_the_cap_is_refused_having_read_only_the_cap(tmp_path: Path) -> None:
    folder = tmp_path / "wh"
    folder.mkdir()
    with open(folder / wh.MANIFEST, "wb") as sparse:  # a hole: no disk, and reads cost only what is read
        sparse.truncate(wh.MAX_MANIFEST_BYTES + 1)
    with pytest.raises(wh.DamagedManifest, match=f"more than {wh.MAX_MANIFEST_BYTES} bytes"):
        wh.read_local_manifest(folder)
