"""A fleet's wheelhouse: finished builds, published once and installed on every machine that fits.

(Not the bundle's wheelhouse, ``bundle/wheelhouse.py``, which holds a recipe's Python prerequisites.)

A wheelhouse is a folder — or any static HTTP server or object store serving that folder — laid out as::

    flagtree-cpu-wheelhouse.json   the manifest: per wheel, the build key, target class, sha256, who built it
    wheels/<name>-<version>-<number>.<stamp>.<class>-<tags>.whl
    simple/index.html, simple/<project>/index.html   a PEP 503 index of the same wheels (for pip)

A wheel is found by two things:

- the **build key**: the build stamp's components (sources, artifacts, the wheel command, the environment,
  prerequisites, steps, variant) with this machine's paths written as ``{workdir}``, ``{python}``,
  ``{wheel_dir}``, ``{home}``, and without what is the builder's own business (the compiler's banner, the
  interpreter's path and patch release: the target class says what the binary needs of the machine);
- the **target class**: the arch the wheel runs on, the CPU features and SVE length the recipe's target
  needs, the builder's glibc (a machine with an older one cannot load the library) and the Python tag.

Both are in the file name (the wheel's build tag: ``<number>.<12 of the stamp>.<8 of the class>``; the number
is the publish sequence, so pip takes the newest build of a version; wheelhouses published before it have
``0``) and in full in the manifest. The manifest is the authority (``wheelhouse_manifest.py`` reads it as
hostile); the index is for people and pip. Publishing holds a lock in the folder and writes every
file to a temporary name first, so a reader sees the old wheelhouse or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import platform
import re
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from packaging.utils import canonicalize_name, parse_wheel_filename

from .atomic import open_atomic, write_atomic
from .digest import Hasher, hash_text
from .errors import ArtifactError, UsageError
from .wheelhouse_manifest import (  # noqa: F401  (the manifest's names, for the wheelhouse's users)
    MANIFEST,
    MAX_MANIFEST_BYTES,
    SCHEMA,
    DamagedManifest,
    bare_wheel_name_problem,
    build_number,
    parse_manifest,
    read_local_manifest,
    shown,
)

ENV_VAR = "FLAGTREE_CPU_WHEELHOUSE"
LOCK = ".flagtree-cpu-wheelhouse.lock"
# what the key leaves out: the builder's own business (the target class says what the binary needs)
_NOT_IN_KEY = ("mode", "compilers", "python")


@dataclass(frozen=True)
class Location:
    given: str  # as the user wrote it
    base_url: str  # ends with "/": file:///abs/folder/ or http(s)://host/path/
    folder: Path | None  # a local folder (given as a path or file://)

    def url_of(self, relative: str) -> str:
        return self.base_url + relative

    @property
    def manifest_url(self) -> str:
        return self.url_of(MANIFEST)


def parse_location(text: str, origin: str = "--wheelhouse") -> Location:
    """A folder (absolute, or relative to the current one), ``file://`` or ``http(s)://``."""
    value = text.strip()
    if not value:
        raise UsageError(f"{origin} is empty", fix="give a folder, file:///path or http(s)://host/path")
    scheme, sep, _ = value.partition("://")
    if sep and scheme in ("http", "https"):
        parts = urlsplit(value)
        if not parts.hostname:
            raise UsageError(f"{origin} {value!r} has no host", fix="e.g. http://wheels.lan/flagtree/")
        if parts.query or parts.fragment or value.endswith(("?", "#")):
            # the manifest and each wheel are found by appending their names to the folder's URL: a query (a
            # pre-signed URL's signature, say) belongs to one object and cannot be carried to the others
            raise UsageError(f"{origin} {value!r} has a query or fragment; a wheelhouse URL names a folder, and the "
                             "manifest and wheels are found below it",
                             fix=f"give the folder's URL alone: {parts.scheme}://{parts.netloc}{parts.path or '/'} "
                             "(a store that needs signed URLs: serve or sync it as a folder)")
        return Location(value, value.rstrip("/") + "/", None)
    if sep and scheme == "file":
        folder = Path(unquote(urlsplit(value).path))
    elif sep:
        raise UsageError(f"{origin} {value!r}: a wheelhouse is a folder, file:// or http(s):// (not {scheme}://)",
                         fix="mount or sync the store as a folder, or serve it over HTTP")
    else:
        folder = Path(os.path.abspath(Path(value).expanduser()))
    return Location(value, folder.as_uri().rstrip("/") + "/", folder)


def configured(option: str | None, environ: Mapping[str, str], recipe_value: str | None,
               imported: str | None = None) -> tuple[str, str] | None:
    """(location, where it came from): the command line, else the environment, else the wheelhouse a
    `bundle create --for-wheelhouse` bundle laid out in this workspace (``imported``, see ``imported_wheelhouse``),
    else the recipe. What this run is told beats what the workspace holds; the workspace's own import beats the
    recipe's, which every board of the fleet shares (often a server an air-gapped board cannot reach)."""
    for value, origin in ((option, "--wheelhouse"), (environ.get(ENV_VAR), ENV_VAR),
                          (imported, IMPORTED_ORIGIN), (recipe_value, "the recipe's build.wheelhouse")):
        if value and value.strip():
            return value.strip(), origin
    return None


IMPORTED_ORIGIN = "the wheelhouse `bundle import` laid out in this workspace"
IMPORTED_DIRNAME = "fleet-wheelhouse"  # in the recipe's state folder: a wheelhouse a bundle carried
IMPORTED_RECORD = "fleet-wheelhouse.json"  # which bundle it came from (status, doctor; its presence turns it on)


def imported_folder(recipe_state: Path) -> Path:
    """Where `bundle import` lays out the wheelhouse a for-wheelhouse bundle carries (``publish``'s layout)."""
    return recipe_state / IMPORTED_DIRNAME


def imported_wheelhouse(recipe_state: Path) -> str | None:
    """The workspace's imported wheelhouse folder, when an import recorded it and its manifest is there. The
    location is always this fixed folder, never a path read from the record (a state file is not trusted with
    where to read wheels from)."""
    folder = imported_folder(recipe_state)
    if (recipe_state / IMPORTED_RECORD).is_file() and (folder / MANIFEST).is_file():
        return str(folder)
    return None


# --- what identifies a build ----------------------------------------------------------------------------


def build_key(components: Mapping[str, Any], paths: Mapping[str, str]) -> dict[str, Any]:
    """The stamp's components as any machine would compute them: ``paths`` (this machine's path -> token)
    are written as their tokens, longest first, and the builder's own business is left out."""
    ordered = sorted(((p, t) for p, t in paths.items() if p and p != "/"), key=lambda pt: -len(pt[0]))
    patterns = [(re.compile(re.escape(p.rstrip("/")) + r"(?=$|[/:;,=\s\"'])"), t) for p, t in ordered]

    def portable(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: portable(v) for k, v in value.items()}
        if isinstance(value, list):
            return [portable(v) for v in value]
        if isinstance(value, str):
            for pattern, token in patterns:
                value = pattern.sub(token, value)
        return value

    return {k: portable(v) for k, v in components.items() if k not in _NOT_IN_KEY}


def digest_of(document: Any) -> str:
    return hash_text(json.dumps(document, sort_keys=True))


def target_class(target_arch: str, cpu_features: tuple[str, ...], sve_vector_bits: int | None,
                 glibc: str | None, python_version: str | None) -> dict[str, Any]:
    major_minor = (python_version or "").split(".")[:2]
    return {"arch": target_arch, "cpu_features": sorted(cpu_features), "sve_vector_bits": sve_vector_bits,
            "glibc": glibc, "python": "cp" + "".join(major_minor) if len(major_minor) == 2 else None}


def class_differences(published: Mapping[str, Any], here: Mapping[str, Any]) -> list[str]:
    """Why a wheel built for ``published`` cannot run here; empty when it can. A newer glibc here is fine."""
    found = []
    for key in ("arch", "python", "cpu_features", "sve_vector_bits"):
        if published.get(key) != here.get(key):
            found.append(f"{key}: built for {_shown(published.get(key))}, here {_shown(here.get(key))}")
    built, local = _version(published.get("glibc")), _version(here.get("glibc"))
    if built is None or local is None or built > local:
        found.append(f"glibc: built against {published.get('glibc') or 'an unknown one'}, here "
                     f"{here.get('glibc') or 'unknown'}")
    return found


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(value) or "none"
    return "none" if value is None else str(value)


def _version(text: Any) -> tuple[int, ...] | None:
    try:
        return tuple(int(p) for p in str(text).split("."))
    except ValueError:
        return None


def newest(fits: list[dict[str, Any]]) -> dict[str, Any]:
    """Of the published builds that fit, the one pip would take: the highest build-tag number, then (for builds
    published before numbers) the newest ``built_on.at``."""
    return max(fits, key=lambda w: (build_number(w["file"]), str(w.get("built_on", {}).get("at", ""))))


def published_name(original: str, stamp: str, class_id: str, number: int) -> str:
    """The wheel's file name with the build tag ``<number>.<stamp>.<class>``. pip (and uv) order the builds of
    one version by the build tag, as (leading number, rest): the number is the wheelhouse's publish sequence, so
    a plain ``pip install`` takes the newest build, and stamp and class keep two builds apart. The dist-info
    inside is unchanged, so the installed distribution is the same."""
    wrong = bare_wheel_name_problem(original)
    if wrong:
        raise ArtifactError(f"the build's wheel {original!r} {wrong}",
                            fix="check the recipe's build.wheel_argv makes a wheel pip could install") from None
    parts = original[:-len(".whl")].split("-")
    name, version, tags = parts[0], parts[1], parts[-3:]
    return "-".join([name, version, f"{number}.{stamp[:12]}.{class_id[:8]}", *tags]) + ".whl"


def _same_wheel(a: str, b: str) -> bool:
    """Two published names of one build: all but the build tag's number are equal."""
    (name_a, version_a, build_a, tags_a), (name_b, version_b, build_b, tags_b) = (
        parse_wheel_filename(n.rsplit("/", 1)[-1]) for n in (a, b))
    return (name_a, version_a, build_a[1:], tags_a) == (name_b, version_b, build_b[1:], tags_b)


def _next_number(folder: Path, wheels: list[dict[str, Any]]) -> int:
    """One more than any build published here, listed or left in wheels/ (a manifest moved aside)."""
    names = [w["file"] for w in wheels] + [p.name for p in (folder / "wheels").glob("*.whl")]
    return max((build_number(n) for n in names), default=0) + 1


# --- publishing -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Published:
    status: str  # "published", "already published", "replaced" (the old file was missing or damaged)
    file: Path
    entry: dict[str, Any]


def publish(folder: Path, wheel: Path, entry: dict[str, Any], *, wait_note: Callable[[str], None]) -> Published:
    """Copy ``wheel`` into the wheelhouse at ``folder`` under its published name and list ``entry`` (which
    has everything but ``file``, ``sha256`` and ``size``) in the manifest and the index. The same build key
    and class published before, intact, is left as it is (publishing again changes nothing)."""
    from .digest import hash_file
    from .locking import exclusive

    published_name(wheel.name, entry["stamp"], entry["class_id"], 0)  # a name readers would refuse: stop first
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "wheels").mkdir(exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise UsageError(f"cannot publish into {folder}: it (or wheels/ in it) is a file, not a folder",
                         fix="give a folder (or file://) for --publish") from None
    with exclusive(folder / LOCK, on_wait=wait_note, note="publishing"):
        _remove_debris(folder / "wheels")  # temporaries of a publisher that was killed (we hold the lock)
        wheels = read_local_manifest(folder)
        name = published_name(wheel.name, entry["stamp"], entry["class_id"], _next_number(folder, wheels))
        same = [w for w in wheels if _same_wheel(w["file"], name)]
        for listed in same:
            target = folder / listed["file"]
            if target.is_file() and target.stat().st_size == listed["size"] and hash_file(target) == listed["sha256"]:
                return Published("already published", target, listed)
        name = same[0]["file"].split("/")[-1] if same else name  # a damaged file is replaced under its own name
        target = folder / "wheels" / name
        sha256, size = _copy_verified(wheel, target, entry.get("wheel_sha256"))
        record = {**{k: v for k, v in entry.items() if k != "wheel_sha256"}, "file": f"wheels/{name}",
                  "sha256": sha256, "size": size, "original": wheel.name}
        wheels = [w for w in wheels if w["file"] != record["file"]] + [record]
        write_atomic(folder / MANIFEST, json.dumps({"schema": SCHEMA, "wheels": wheels}, indent=1, sort_keys=True)
                     + "\n")
        _write_index(folder, wheels)
    return Published("replaced" if same else "published", target, record)


def _copy_verified(source: Path, target: Path, expected: str | None) -> tuple[str, int]:
    """Copy through a temporary name, hashing on the way; the build's own sha256 must be what arrived."""
    hasher, size = Hasher(), 0
    with open(source, "rb") as src, open_atomic(target) as out:
        for chunk in iter(lambda: src.read(1 << 20), b""):
            hasher.update(chunk)
            out.write(chunk)
            size += len(chunk)
        digest = hasher.hexdigest()
        if expected and digest != expected:
            raise ArtifactError(f"the wheel {source} changed since the build made it (sha256 {digest[:12]}, the "
                                f"build recorded {expected[:12]}); nothing was published",
                                fix="build it again (flagtree-cpu build --force --publish ...)")
    return digest, size


def _remove_debris(wheels_dir: Path) -> None:
    for tmp in wheels_dir.glob(".*.tmp-*"):
        with contextlib.suppress(OSError):
            tmp.unlink()


def _write_index(folder: Path, wheels: list[dict[str, Any]]) -> None:
    """PEP 503: simple/ lists the projects, simple/<project>/ the files with their sha256."""
    projects: dict[str, list[dict[str, Any]]] = {}
    for wheel in wheels:
        projects.setdefault(canonicalize_name(wheel["file"].split("/")[-1].split("-")[0]), []).append(wheel)
    simple = folder / "simple"
    for project, files in projects.items():
        (simple / project).mkdir(parents=True, exist_ok=True)
        links = "".join(f'<a href="../../{html.escape(w["file"])}#sha256={w["sha256"]}">'
                        f'{html.escape(w["file"].split("/")[-1])}</a><br>\n' for w in sorted(files, key=_file))
        write_atomic(simple / project / "index.html", _page(f"Links for {project}", links))
    links = "".join(f'<a href="{p}/">{p}</a><br>\n' for p in sorted(projects))
    write_atomic(simple / "index.html", _page("Simple index", links))
    for stale in simple.iterdir() if simple.is_dir() else ():
        if stale.is_dir() and stale.name not in projects and (stale / "index.html").is_file():
            shutil.rmtree(stale, ignore_errors=True)  # a project no wheel names any more (only ours live here)


def _file(wheel: Mapping[str, Any]) -> str:
    return str(wheel["file"])


def _page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" content=\"1.0\">"
            f"<title>{title}</title></head>\n<body>\n{body}</body></html>\n")


def built_on(compilers: Mapping[str, Any], python_version: str | None, glibc: str | None) -> dict[str, Any]:
    """Who built it, for people reading the manifest (never compared)."""
    return {"host": platform.node(), "arch": platform.machine(), "glibc": glibc, "python": python_version,
            "compilers": dict(compilers), "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
