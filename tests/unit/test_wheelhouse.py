"""The wheelhouse's format and rules (wheelhouse.py) and how a build picks a published wheel (prebuilt.choose):
locations, the portable build key, target classes, file names, the manifest, publishing under a lock."""

from __future__ import annotations

import json
import threading
import zipfile
from pathlib import Path

import pytest

from flagtree_cpu_build import wheelhouse as wh
from flagtree_cpu_build.errors import ArtifactError, UsageError
from flagtree_cpu_build.stages.build.prebuilt import Identity, choose

CLASS = wh.target_class("aarch64", ("sve2", "i8mm", "bf16"), 128, "2.36", "3.11.7")


# --- locations -------------------------------------------------------------------------------------------


def test_a_folder_is_made_absolute_and_becomes_a_file_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    location = wh.parse_location("fleet/wheels")
    assert location.folder == tmp_path / "fleet" / "wheels"
    assert location.base_url == (tmp_path / "fleet" / "wheels").as_uri() + "/"
    assert wh.parse_location(location.base_url).folder == location.folder  # file:// names the same folder


def test_an_http_wheelhouse_has_no_folder_and_one_trailing_slash() -> None:
    location = wh.parse_location("http://wheels.lan:8080/flagtree")
    assert location.folder is None and location.manifest_url == f"http://wheels.lan:8080/flagtree/{wh.MANIFEST}"


@pytest.mark.parametrize("text, said", [("", "is empty"), ("s3://bucket/wheels", "not s3://"),
                                        ("http:///nohost", "has no host"),
                                        ("https://bucket.s3.lan/wheels/?X-Amz-Signature=ab", "has a query"),
                                        ("http://wheels.lan/flagtree#latest", "has a query or fragment")])
def test_what_is_not_a_wheelhouse_is_a_usage_error(text: str, said: str) -> None:
    with pytest.raises(UsageError, match=said):
        wh.parse_location(text)


def test_the_option_wins_over_the_environment_over_the_recipe() -> None:
    env = {wh.ENV_VAR: "/srv/env"}
    assert wh.configured("/srv/opt", env, "/srv/recipe") == ("/srv/opt", "--wheelhouse")
    assert wh.configured(None, env, "/srv/recipe") == ("/srv/env", wh.ENV_VAR)
    assert wh.configured(None, {wh.ENV_VAR: "  "}, "/srv/recipe") == ("/srv/recipe", "the recipe's build.wheelhouse")
    assert wh.configured(None, {}, None) is None


# --- the key and the class -------------------------------------------------------------------------------


def test_the_key_writes_machine_paths_as_tokens_and_only_whole_paths() -> None:
    components = {"mode": "wheel", "compilers": {"CC": "gcc 12"}, "python": {"path": "/w/a/.venv/bin/python"},
                  "command": {"cwd": "/w/a/FlagTree", "argv": ["/w/a/.venv/bin/python", "-w", "/w/a/dist"]},
                  "env": {"LLVM_SYSPATH": "/home/u/.triton/llvm/x", "OTHER": "/w/ab/not-mine",
                          "ARGS": "-DPREFIX=/home/u/.install"}}
    key = wh.build_key(components, {"/w/a": "{workdir}", "/w/a/.venv/bin/python": "{python}",
                                    "/w/a/dist": "{wheel_dir}", "/home/u": "{home}"})
    assert key == {"command": {"cwd": "{workdir}/FlagTree", "argv": ["{python}", "-w", "{wheel_dir}"]},
                   "env": {"LLVM_SYSPATH": "{home}/.triton/llvm/x", "OTHER": "/w/ab/not-mine",
                           "ARGS": "-DPREFIX={home}/.install"}}


def test_two_workspaces_in_different_folders_have_one_key() -> None:
    def components(root: str) -> dict:
        return {"mode": "wheel", "command": {"cwd": f"{root}/FlagTree", "argv": [f"{root}/.venv/bin/python"]},
                "python": {"path": f"{root}/.venv/bin/python", "version": "3.11.7"}}

    keys = [wh.build_key(components(root), {root: "{workdir}", f"{root}/.venv/bin/python": "{python}"})
            for root in ("/srv/a", "/home/ci/work")]
    assert keys[0] == keys[1] and wh.digest_of(keys[0]) == wh.digest_of(keys[1])


def test_a_newer_glibc_here_fits_an_older_or_unknown_one_does_not() -> None:
    newer = {**CLASS, "glibc": "2.39"}
    assert wh.class_differences(CLASS, newer) == []
    assert wh.class_differences(newer, CLASS) == ["glibc: built against 2.39, here 2.36"]
    assert wh.class_differences(CLASS, {**CLASS, "glibc": None}) == ["glibc: built against 2.36, here unknown"]


def test_every_other_class_field_must_be_equal() -> None:
    other = wh.target_class("x86_64", ("sve2",), None, "2.36", "3.12.1")
    said = wh.class_differences(CLASS, other)
    assert "arch: built for aarch64, here x86_64" in said and "python: built for cp311, here cp312" in said
    assert "cpu_features: built for bf16, i8mm, sve2, here sve2" in said
    assert "sve_vector_bits: built for 128, here none" in said


def test_the_published_name_carries_number_stamp_and_class_in_the_build_tag() -> None:
    stamp, klass = "ab" * 32, "cd" * 32
    assert wh.published_name("triton-3.3.0-cp311-cp311-linux_aarch64.whl", stamp, klass, 12) == \
        "triton-3.3.0-12.abababababab.cdcdcdcd-cp311-cp311-linux_aarch64.whl"
    # a wheel that already has a build tag gets ours in its place
    assert wh.published_name("triton-3.3.0-7-py3-none-any.whl", stamp, klass, 1) == \
        "triton-3.3.0-1.abababababab.cdcdcdcd-py3-none-any.whl"
    with pytest.raises(ArtifactError, match="is not a wheel file name"):
        wh.published_name("triton.whl", stamp, klass, 1)
    with pytest.raises(ArtifactError, match="is not a bare wheel file name"):  # one a reader would refuse
        wh.published_name("trïton-3.3.0-py3-none-any.whl", stamp, klass, 1)


# --- the manifest ----------------------------------------------------------------------------------------


def entry(file: str, **extra: object) -> dict:
    return {"file": file, "sha256": "0" * 64, "size": 1, "recipe": "r", "variant": None, "stamp": "5" * 64,
            "class": CLASS, "class_id": "c" * 64, "key": {}, **extra}


GOOD = "wheels/pkg-1.0-1.555555555555.cccccccc-py3-none-any.whl"


@pytest.mark.parametrize("text, said", [
    ("{", "is not JSON"),
    ('{"schema": "other", "wheels": []}', "is not a flagtree-cpu/wheelhouse/v1 document"),
    (json.dumps({"schema": wh.SCHEMA, "wheels": [entry("wheels/../../../etc/x.whl")]}),
     "wheels[0]: file 'wheels/../../../etc/x.whl' is not a bare wheel file name"),
    (json.dumps({"schema": wh.SCHEMA, "wheels": [{"file": GOOD}]}), f"wheels[0] ({GOOD}): sha256 None is not 64"),
    (json.dumps({"schema": wh.SCHEMA, "wheels": [entry(GOOD, **{"class": ["aarch64"]})]}),
     "class is a list, not an object"),
    (json.dumps({"schema": wh.SCHEMA, "wheels": [entry(GOOD, sha256="../../etc")]}), "sha256 '../../etc' is not 64"),
    ("[" * 100_000 + "]" * 100_000, "is not JSON"),  # nested deeper than the parser goes
])
def test_a_damaged_or_hostile_manifest_is_named_with_the_way_out(text: str, said: str) -> None:
    with pytest.raises(wh.DamagedManifest) as caught:
        wh.parse_manifest(text, "/srv/wh/flagtree-cpu-wheelhouse.json")
    assert said in caught.value.message
    assert "mv /srv/wh/flagtree-cpu-wheelhouse.json /srv/wh/flagtree-cpu-wheelhouse.json.damaged" in caught.value.fix


def identity(stamp: str = "5" * 64, target: dict | None = None, key: dict | None = None) -> Identity:
    return Identity(key or {}, stamp, target or CLASS, "c" * 64)


def test_who_built_it_is_shown_not_trusted() -> None:
    [wheel] = wh.parse_manifest(json.dumps({"schema": wh.SCHEMA, "wheels": [entry(GOOD, built_on="x")]}), "m.json")
    assert wheel["built_on"] == {}


def test_choose_takes_the_newest_fitting_build_of_the_recipe_and_variant() -> None:
    wheels = [entry("wheels/old.whl", built_on={"at": "2026-11-01T00:00:00Z"}),
              entry("wheels/new.whl", built_on={"at": "2026-11-20T00:00:00Z"}),
              entry("wheels/gpu.whl", variant="gpu", built_on={"at": "2026-11-22T00:00:00Z"}),
              entry("wheels/other.whl", recipe="other", built_on={"at": "2026-11-23T00:00:00Z"})]
    found, _ = choose(wheels, "r", None, identity())
    assert found is not None and found["file"] == "wheels/new.whl"
    found, _ = choose(wheels, "r", "gpu", identity())
    assert found is not None and found["file"] == "wheels/gpu.whl"


def test_choose_says_what_differs_from_the_closest_build() -> None:
    published = entry("wheels/a.whl", key={"sources": {"flagtree": {"commit": "a" * 40}}})
    mine = identity(stamp="t" * 64, key={"sources": {"flagtree": {"commit": "b" * 40}}})
    found, why = choose([published], "r", None, mine)
    assert found is None
    assert why == f"no published build fits; the closest (a.whl) differs: sources.flagtree.commit {'a' * 12} -> " \
                  f"{'b' * 12}"
    found, why = choose([entry("wheels/a.whl")], "r", None, identity(target={**CLASS, "glibc": "2.31"}))
    assert found is None and "glibc: built against 2.36, here 2.31" in why
    assert choose([], "r", None, mine) == (None, "no build of r is published there")


# --- publishing ------------------------------------------------------------------------------------------


def fake_wheel(folder: Path, name: str, payload: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("pkg/__init__.py", payload)
    return path


def publish_entry(stamp: str, class_id: str = "c" * 64) -> dict:
    return {"recipe": "r", "variant": None, "stamp": stamp, "key": {"n": stamp}, "class": CLASS,
            "class_id": class_id, "built_on": {"host": "a", "at": "2026-11-23T00:00:00Z"}}


def test_publishing_writes_the_wheel_manifest_and_pep503_index(tmp_path: Path) -> None:
    wheel = fake_wheel(tmp_path / "dist", "pkg-1.0-py3-none-any.whl", "one")
    done = wh.publish(tmp_path / "wh", wheel, publish_entry("1" * 64), wait_note=print)
    assert done.status == "published" and done.file.read_bytes() == wheel.read_bytes()
    [listed] = wh.read_local_manifest(tmp_path / "wh")
    assert listed["file"] == f"wheels/{done.file.name}" and listed["original"] == wheel.name
    page = (tmp_path / "wh" / "simple" / "pkg" / "index.html").read_text()
    assert f'<a href="../../wheels/{done.file.name}#sha256={listed["sha256"]}">' in page
    again = wh.publish(tmp_path / "wh", wheel, publish_entry("1" * 64), wait_note=print)
    assert again.status == "already published"


def test_a_published_file_that_went_bad_is_replaced(tmp_path: Path) -> None:
    wheel = fake_wheel(tmp_path / "dist", "pkg-1.0-py3-none-any.whl", "one")
    done = wh.publish(tmp_path / "wh", wheel, publish_entry("1" * 64), wait_note=print)
    done.file.write_bytes(b"damaged")
    assert wh.publish(tmp_path / "wh", wheel, publish_entry("1" * 64), wait_note=print).status == "replaced"
    assert done.file.read_bytes() == wheel.read_bytes()


def test_a_wheel_that_changed_since_its_build_is_not_published(tmp_path: Path) -> None:
    wheel = fake_wheel(tmp_path / "dist", "pkg-1.0-py3-none-any.whl", "one")
    with pytest.raises(ArtifactError, match="changed since the build made it"):
        wh.publish(tmp_path / "wh", wheel, {**publish_entry("1" * 64), "wheel_sha256": "f" * 64}, wait_note=print)
    assert not list((tmp_path / "wh" / "wheels").iterdir()) and not (tmp_path / "wh" / wh.MANIFEST).exists()


def test_concurrent_publishers_both_land_and_debris_of_a_killed_one_goes(tmp_path: Path) -> None:
    debris = tmp_path / "wh" / "wheels" / ".pkg-1.0-0.dead-py3-none-any.whl.tmp-99999"
    debris.parent.mkdir(parents=True)
    debris.write_bytes(b"half a wheel")
    errors: list[BaseException] = []

    def publisher(i: int) -> None:
        try:
            for round_ in range(5):
                wheel = fake_wheel(tmp_path / f"dist-{i}-{round_}", "pkg-1.0-py3-none-any.whl", f"{i}-{round_}")
                wh.publish(tmp_path / "wh", wheel, publish_entry(f"{i}{round_}" * 32), wait_note=lambda _: None)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=publisher, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    listed = wh.read_local_manifest(tmp_path / "wh")
    assert len(listed) == 10 and all((tmp_path / "wh" / w["file"]).is_file() for w in listed)
    assert not debris.exists() and not list((tmp_path / "wh" / "wheels").glob(".*"))


def test_a_damaged_manifest_is_never_overwritten_by_publishing(tmp_path: Path) -> None:
    (tmp_path / "wh").mkdir()
    (tmp_path / "wh" / wh.MANIFEST).write_text("not json")
    wheel = fake_wheel(tmp_path / "dist", "pkg-1.0-py3-none-any.whl", "one")
    with pytest.raises(wh.DamagedManifest):
        wh.publish(tmp_path / "wh", wheel, publish_entry("1" * 64), wait_note=print)
    assert (tmp_path / "wh" / wh.MANIFEST).read_text() == "not json"



def test_each_publish_numbers_its_build_after_every_build_before_it(tmp_path: Path) -> None:
    folder = tmp_path / "wh"
    first = wh.publish(folder, fake_wheel(tmp_path / "d1", "pkg-1.0-py3-none-any.whl", "1"), publish_entry("1" * 64),
                       wait_note=print)
    # as a wheelhouse published before build numbers has it: 0.<stamp>.<class>
    old = first.file.with_name(first.file.name.replace("-1.111111111111.", "-0.111111111111."))
    first.file.rename(old)
    document = json.loads((folder / wh.MANIFEST).read_text())
    document["wheels"][0]["file"] = f"wheels/{old.name}"
    (folder / wh.MANIFEST).write_text(json.dumps(document))

    second = wh.publish(folder, fake_wheel(tmp_path / "d2", "pkg-1.0-py3-none-any.whl", "2"),
                        publish_entry("2" * 64), wait_note=print)
    third = wh.publish(folder, fake_wheel(tmp_path / "d3", "pkg-1.0-py3-none-any.whl", "3"), publish_entry("3" * 64),
                       wait_note=print)
    assert [second.file.name, third.file.name] == ["pkg-1.0-1.222222222222.cccccccc-py3-none-any.whl",
                                                   "pkg-1.0-2.333333333333.cccccccc-py3-none-any.whl"]
    again = wh.publish(folder, fake_wheel(tmp_path / "d2", "pkg-1.0-py3-none-any.whl", "2"), publish_entry("2" * 64),
                       wait_note=print)
    assert again.status == "already published" and again.file == second.file
    assert sorted(wh.build_number(w["file"]) for w in wh.read_local_manifest(folder)) == [0, 1, 2]

    (folder / wh.MANIFEST).rename(folder / "moved-aside.json")  # the fix for a damaged manifest: numbers go on
    fourth = wh.publish(folder, fake_wheel(tmp_path / "d4", "pkg-1.0-py3-none-any.whl", "4"), publish_entry("4" * 64),
                        wait_note=print)
    assert fourth.file.name.startswith("pkg-1.0-3.444444444444.")
