"""The kinds of artifact a recipe can name, as one table (as ``digest.HEX_LENGTHS`` is for digests).

For each kind: whether it unpacks into folders (``root`` and ``after_unpack`` apply), and the functions
that refuse what this Python cannot read before it is downloaded, unpack the downloaded file, unpack it
while it downloads (None: it is downloaded first), compare a tree someone else unpacked with the archive
by listing it (None: by unpacking it beside), and read it through without unpacking it (a bundle checks
bytes no digest vouches for). The recipe's ``kind`` values, its cross-field check, ``fetch``, ``stream``
and ``bundle`` all read this table: a new kind is one entry here and its unpack function.

The recipe's model reads this module, so it imports nothing heavy at its top: each function finds its
implementation (``extract``, ``archive``, ``artifact_tree``) when first called.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from .archive import UnpackLimits
    from .artifact_tree import Artifact  # the shape unpacking reads (recipe.Artifact has it)
    from .ui import UI


class Unpack(Protocol):
    def __call__(self, artifact: Artifact, source: Any, tree: Path, *, ui: UI, label: str, limits: UnpackLimits,
                 stop: threading.Event | None = None) -> None:
        """Unpack ``source`` (a file; for ``unpack_stream``, the growing download) into the new folder ``tree``.
        Raises archive.TarballProblem (damaged or hostile: the bytes must not be kept), LimitExceeded, DiskFull."""


class Differences(Protocol):
    def __call__(self, artifact: Artifact, source: Path, tree: Path, *, label: str,
                 limits: UnpackLimits) -> list[str]:
        """How ``tree`` differs from what ``source`` would unpack into."""


class ReadThrough(Protocol):
    def __call__(self, artifact: Artifact, source: Path, *, label: str,
                 progress: Callable[[int, int | None], None]) -> None:
        """Read every member of ``source`` without writing anything; a damaged archive raises TarballProblem."""


@dataclass(frozen=True)
class Kind:
    summary: str  # how `recipe schema` describes it
    folders: bool  # unpacks into folders: root (strip, find) and after_unpack apply
    unpack: Unpack
    unpack_stream: Unpack | None = None  # unpacked as it downloads; None: its table of contents is at its end, or
    # there is nothing to unpack, so it is downloaded first
    differences: Differences | None = None  # a hand-unpacked tree checked by listing; None: by unpacking it beside
    read_through: ReadThrough | None = None  # None: nothing to read beyond the bytes the digest covers
    refuse_unreadable: Callable[[str, str], None] | None = None  # (label, url): before any download


# --- tarball ------------------------------------------------------------------------------------------------


def _unpack_tarball(artifact: Artifact, source: Any, tree: Path, *, ui: UI, label: str, limits: UnpackLimits,
                    stop: threading.Event | None = None) -> None:
    from .extract import unpack

    unpack(source, tree, strip=artifact.root.strip, ui=ui, label=label, limits=limits, stop=stop)


def _unpack_tarball_stream(artifact: Artifact, source: Any, tree: Path, *, ui: UI, label: str,
                           limits: UnpackLimits, stop: threading.Event | None = None) -> None:
    from .extract import unpack

    unpack(None, tree, strip=artifact.root.strip, ui=ui, label=label, reader=source, stop=stop, limits=limits)


def _tarball_differences(artifact: Artifact, source: Path, tree: Path, *, label: str,
                         limits: UnpackLimits) -> list[str]:
    from .extract import differences_from

    return differences_from(source, tree, strip=artifact.root.strip, limits=limits, label=label)


def _read_tarball(artifact: Artifact, source: Path, *, label: str,
                  progress: Callable[[int, int | None], None]) -> None:
    from .archive import TarStream, limits_for, members

    size = source.stat().st_size
    limits = limits_for(label, artifact.unpacked_size, artifact.unpacked_entries)
    with open(source, "rb") as raw:
        for _tar, _member in members(TarStream(raw, label, limits, lambda: size, progress)):
            pass


def _refuse_unreadable_tarball(label: str, url: str) -> None:
    """A zstd tarball this Python cannot read is refused before it is downloaded (its URL says so)."""
    from .archive import ZSTD_SUFFIXES, zstd_decompressor, zstd_unsupported

    if url.split("?", 1)[0].lower().endswith(ZSTD_SUFFIXES) and zstd_decompressor() is None:
        raise zstd_unsupported(label, url)


# --- zip and plain file ----------------------------------------------------------------------------------------


def _unpack_zip(artifact: Artifact, source: Any, tree: Path, *, ui: UI, label: str, limits: UnpackLimits,
                stop: threading.Event | None = None) -> None:
    from .artifact_tree import unpack_zip

    unpack_zip(source, tree, strip=artifact.root.strip, ui=ui, label=label, limits=limits, stop=stop)


def _test_zip(artifact: Artifact, source: Path, *, label: str, progress: Callable[[int, int | None], None]) -> None:
    import zipfile

    from .archive import TarballProblem

    with zipfile.ZipFile(source) as archive:
        bad = archive.testzip()  # every member's CRC
    if bad is not None:
        raise TarballProblem(f"{label} is not a readable zip: {bad} is damaged")


def _place_file(artifact: Artifact, source: Any, tree: Path, *, ui: UI, label: str, limits: UnpackLimits,
                stop: threading.Event | None = None) -> None:
    from .artifact_tree import file_name, place_file

    place_file(source, tree, file_name(artifact.url), label=label)


KINDS: dict[str, Kind] = {
    "tarball": Kind("tarball (gz, xz, bz2 or plain tar)", folders=True, unpack=_unpack_tarball,
                    unpack_stream=_unpack_tarball_stream, differences=_tarball_differences,
                    read_through=_read_tarball, refuse_unreadable=_refuse_unreadable_tarball),
    "zip": Kind("zip", folders=True, unpack=_unpack_zip, read_through=_test_zip),
    "file": Kind("a plain file", folders=False, unpack=_place_file),
}
DEFAULT_KIND = "tarball"  # what a recipe (and a stamp written before kinds were recorded) means by none
# the recipe's type for `kind`: its values are the table's keys (the loader, did-you-mean and JSON Schema read it)
ArtifactKind = Literal[tuple(KINDS)]  # type: ignore[valid-type]
FOLDER_KINDS = tuple(name for name, kind in KINDS.items() if kind.folders)


def _in_words(words: list[str]) -> str:
    return ", ".join(words[:-1]) + ", or " + words[-1] if len(words) > 1 else words[0]


KINDS_SUMMARY = _in_words([kind.summary for kind in KINDS.values()])  # "tarball (...), zip, or a plain file"


def kind_of(artifact: Artifact) -> Kind:
    return KINDS[artifact.kind]
