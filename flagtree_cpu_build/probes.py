"""Cheap compatibility checks that fail in seconds, before a long download or build does.

Two kinds, both from recipe data: per-source probes ("this file exists / contains this
text") and artifact pins ("FlagTree's cmake/llvm-hash.txt names the LLVM the recipe
downloads"). All failures are collected and reported together.
"""

from __future__ import annotations

from pathlib import Path

from .errors import SourceError
from .recipe import Recipe
from .workspace import Workspace


def probe_failures(recipe: Recipe, ws: Workspace) -> list[str]:
    failures = []
    for name, source in recipe.sources.items():
        checkout = ws.root / recipe.source_path(name)
        for probe in source.probes:
            path = checkout / probe.file
            if not path.is_file():
                failures.append(f"{name}: {probe.file} is missing — {probe.why}")
            elif probe.contains is not None and probe.contains not in _read(path):
                failures.append(f"{name}: {probe.file} does not contain {probe.contains!r} — {probe.why}")
    return failures


def artifact_pin_failures(recipe: Recipe, ws: Workspace) -> list[str]:
    failures = []
    for name, artifact in recipe.artifacts.items():
        pin = artifact.matches
        if pin is None:
            continue
        path = ws.root / recipe.source_path(pin.source) / pin.file
        if not path.is_file():
            failures.append(f"artifacts.{name}: {pin.source} has no {pin.file} to check the artifact against")
            continue
        wanted = _read(path)[:pin.chars]  # FlagTree's setup.py reads exactly the first 8 characters
        if wanted not in artifact.url:
            failures.append(
                f"artifacts.{name}: {pin.source}'s {pin.file} asks for {wanted!r}, but the recipe downloads "
                f"{artifact.url} — update artifacts.{name}.url (and sha256) to the {wanted} build, or pin "
                f"{pin.source} to a commit whose {pin.file} starts with the hash in that URL"
            )
    return failures


def check_sources(recipe: Recipe, ws: Workspace) -> int:
    """Run every probe and artifact pin check; raise one error listing all failures."""
    failures = probe_failures(recipe, ws) + artifact_pin_failures(recipe, ws)
    if failures:
        raise SourceError(
            f"{len(failures)} compatibility check{'s' if len(failures) > 1 else ''} failed; stopping before "
            "any download or build",
            details=tuple(failures),
            fix="pin compatible versions (--set sources.NAME.commit=<sha>) or update the recipe",
        )
    return sum(len(s.probes) for s in recipe.sources.values()) + sum(
        1 for a in recipe.artifacts.values() if a.matches)


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")
