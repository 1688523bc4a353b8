"""The artifact kinds are one table (`artifact_kinds.KINDS`): the recipe's accepted values, its documentation and
its cross-field rule derive from it, and each entry's functions unpack and read their own kind of archive."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any, get_args, get_type_hints

import pytest

from flagtree_cpu_build import recipe as recipe_package
from flagtree_cpu_build.archive import TarballProblem, limits_for
from flagtree_cpu_build.artifact_kinds import KINDS, KINDS_SUMMARY
from flagtree_cpu_build.recipe import Artifact
from flagtree_cpu_build.recipe.inputs import ArtifactRoot
from flagtree_cpu_build.recipe.json_schema import recipe_json_schema
from flagtree_cpu_build.ui import UI
from tests.support.tarballs import tarball_with, zip_with

FILES = {"tool-1.0/bin/tool": b"#!/bin/sh\necho tool\n", "tool-1.0/share/doc.txt": b"docs\n"}


def _kind_schemas(node: Any) -> list[dict[str, Any]]:
    """Every `kind` property of the recipe's JSON Schema that lists values (an artifact's)."""
    found = []
    if isinstance(node, dict):
        kind = node.get("properties", {}).get("kind")
        if isinstance(kind, dict) and "enum" in kind:
            found.append(kind)
        for value in node.values():
            found += _kind_schemas(value)
    elif isinstance(node, list):
        for value in node:
            found += _kind_schemas(value)
    return found


def test_the_recipe_accepts_and_documents_exactly_the_kinds_of_the_table() -> None:
    hints = get_type_hints(Artifact, vars(recipe_package.inputs))
    assert get_args(hints["kind"]) == tuple(KINDS) == ("tarball", "zip", "file")
    [schema] = _kind_schemas(recipe_json_schema())
    assert schema["enum"] == list(KINDS)
    assert KINDS_SUMMARY == "tarball (gz, xz, bz2 or plain tar), zip, or a plain file"
    assert KINDS_SUMMARY in schema.get("description", "")


def _artifact(kind: str) -> Artifact:
    return Artifact(url=f"https://example.invalid/releases/tool-1.0.{kind}", path="/unused", kind=kind,
                    root=ArtifactRoot(strip=0 if kind == "file" else 1))


ARCHIVES = {"tarball": tarball_with(FILES).data, "zip": zip_with(FILES).data, "file": b"a single tool\n"}
UNPACKED = {"tarball": {"bin/tool": FILES["tool-1.0/bin/tool"], "share/doc.txt": b"docs\n"},
            "zip": {"bin/tool": FILES["tool-1.0/bin/tool"], "share/doc.txt": b"docs\n"},
            "file": {"tool-1.0.file": b"a single tool\n"}}


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_kind_unpacks_its_own_archive_through_the_table(kind: str, tmp_path: Path) -> None:
    source = tmp_path / "download"
    source.write_bytes(ARCHIVES[kind])
    tree = tmp_path / "tree"
    KINDS[kind].unpack(_artifact(kind), source, tree, ui=UI(stderr=io.StringIO()), label="tool",
                       limits=limits_for("tool", None, None))
    unpacked = {p.relative_to(tree).as_posix(): p.read_bytes() for p in tree.rglob("*") if p.is_file()}
    assert unpacked == UNPACKED[kind]


@pytest.mark.parametrize("kind", [k for k, entry in KINDS.items() if entry.read_through is not None])
def test_a_kind_read_through_passes_a_whole_archive_and_refuses_a_damaged_one(kind: str, tmp_path: Path) -> None:
    read_through = KINDS[kind].read_through
    assert read_through is not None
    whole = tmp_path / "whole"
    whole.write_bytes(ARCHIVES[kind])
    read_through(_artifact(kind), whole, label="tool", progress=lambda done, total: None)
    damaged = tmp_path / "damaged"
    if kind == "zip":  # a member's bytes flipped: the CRC check finds it
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
            archive.writestr("tool-1.0/share/doc.txt", b"docs docs docs\n")
        data = buffer.getvalue()
        damaged.write_bytes(data.replace(b"docs docs", b"DOCS docs", 1))
    else:
        damaged.write_bytes(ARCHIVES[kind][: len(ARCHIVES[kind]) // 2])  # cut short
    with pytest.raises(TarballProblem):
        read_through(_artifact(kind), damaged, label="tool", progress=lambda done, total: None)


def test_the_table_keeps_todays_rules_only_tarballs_stream_and_only_plain_files_lack_folders() -> None:
    assert [k for k, entry in KINDS.items() if not entry.folders] == ["file"]
    assert [k for k, entry in KINDS.items() if entry.unpack_stream is not None] == ["tarball"]
