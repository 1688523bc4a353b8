"""A tree at an artifact's destination that flagtree-cpu did not publish (the install guide's `wget` + `tar xzf`,
or a stamp someone damaged): checked against the verified tarball — by listing when the kind can list, else by
unpacking beside it and comparing — and adopted (stamped as ours) when it matches; left alone, with what differs
and how to move it away, when it does not. Never clobbered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...archive import limits_for
from ...artifact_kinds import kind_of
from ...artifact_tree import finish, tree_differences
from ...errors import ArtifactError
from ...extract import STAMP_NAME, read_stamp, stamp_problem, write_markers
from ...partials import PartialFolder
from ...recipe import Artifact
from ...stagekit.stage import StageContext
from .plan import other_digests, stamp_layout
from .stream import Tarball


def is_foreign(dest: Path) -> bool:
    return (dest.exists() or dest.is_symlink()) and read_stamp(dest) is None


def foreign_tree_error(name: str, dest: Path, artifact: Artifact) -> ArtifactError:
    damaged = stamp_problem(dest)
    return ArtifactError(
        f"{dest} already exists and " + (f"its flagtree-cpu stamp cannot be read ({damaged})" if damaged else
                                         "was not published by flagtree-cpu")
        + "; without the tarball it cannot be verified, so it is left alone",
        fix=f"verify it against the tarball by listing (no re-extraction): flagtree-cpu fetch --from {name}=FILE; "
        f"or move it away (mv {dest} {dest}.manual) to let flagtree-cpu download {artifact.url} and publish it")


def adopt(name: str, dest: Path, got: Tarball, artifact: Artifact, ctx: StageContext, owner: dict[str, Any]) -> None:
    """A tree someone else unpacked (or whose stamp was damaged): keep it if it matches the tarball, else
    leave it alone and say so."""
    limits = limits_for(name, artifact.unpacked_size, artifact.unpacked_entries)
    listing = kind_of(artifact).differences
    if listing is not None and not artifact.root.find and not artifact.after_unpack:
        differences = listing(artifact, got.path, dest, label=name, limits=limits)
    else:  # no listing maps onto the published tree: unpack it beside, then compare the two trees
        differences = _differences_by_unpacking(name, dest, got, artifact, ctx, limits)
    version = dest / artifact.version_file if artifact.version_file else None
    if version is not None and version.is_file() and version.read_text() != artifact.url:
        differences.append(f"{artifact.version_file} names {version.read_text()!r}, not {artifact.url}")
    if differences:
        raise ArtifactError(
            f"{dest} was not published by flagtree-cpu and differs from the verified tarball; it is left alone",
            details=tuple(differences),
            fix=f"move it away (mv {dest} {dest}.manual) so flagtree-cpu can publish the verified tree there")
    write_markers(dest, url=artifact.url, sha256=got.sha, size=got.path.stat().st_size,
                  version_file=artifact.version_file, digests=other_digests(artifact, got.digests),
                  layout={**stamp_layout(artifact), "owner": owner})


def _differences_by_unpacking(name: str, dest: Path, got: Tarball, artifact: Artifact, ctx: StageContext,
                              limits: Any) -> list[str]:
    folder = PartialFolder.create(dest)
    try:
        with folder.writing():
            kind_of(artifact).unpack(artifact, got.path, folder.tree, ui=ctx.ui, label=name, limits=limits,
                                     stop=folder.stop)
        finish(folder.tree, artifact, label=name, ui=ctx.ui)
        ours = (STAMP_NAME, artifact.version_file) if artifact.version_file else (STAMP_NAME,)
        return tree_differences(folder.tree, dest, ignore=ours)
    finally:
        folder.remove()
