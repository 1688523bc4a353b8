"""Cheap compatibility checks that fail in seconds, before a long download or build does.

Two kinds, both from recipe data: per-source probes ("this file exists / contains this
text") and artifact pins ("FlagTree's cmake/llvm-hash.txt names the LLVM the recipe
downloads"). A pin reads a piece of the file — its leading characters, a regular expression's
first group, or a value at a dotted JSON path — which must appear in the artifact's URL. All
failures are collected and reported together.
"""

from __future__ import annotations

from pathlib import Path

from .errors import SourceError
from .recipe import Recipe
from .recipe.pins import SourcePin
from .recipe.reads import checking_rules, rules_of
from .source_reads import capture, read_artifact, read_rule_text, read_text
from .workspace import Workspace


def probe_failures(recipe: Recipe, ws: Workspace) -> list[str]:
    failures = []
    for name, source in recipe.sources.items():
        checkout = ws.root / recipe.source_path(name)
        for probe in source.probes:
            path = checkout / probe.file
            if not path.is_file():
                failures.append(f"{name}: {probe.file} is missing — {probe.why}")
            elif probe.contains is not None:
                text, unreadable = read_text(path)
                if unreadable is not None:
                    failures.append(f"{name}: {probe.file} {unreadable} — {probe.why}")
                elif probe.contains not in text:
                    failures.append(f"{name}: {probe.file} does not contain {probe.contains!r} — {probe.why}")
    return failures


def artifact_pin_failures(recipe: Recipe, ws: Workspace, *, missing_ok: bool = False) -> list[str]:
    """Each artifact whose `matches` rules its source's file contradicts (a checking rule's value is not in the URL)
    or cannot give the values its placeholders read. ``missing_ok``: a file that is not there (the source is not
    checked out yet) is not a failure — fetch runs beside the clone that brings it."""
    failures = []
    for name, artifact in recipe.artifacts.items():
        rules = rules_of(artifact.matches)
        for i in checking_rules(artifact):
            key = f"artifacts.{name}.matches" + (f".{i}" if isinstance(artifact.matches, tuple) else "")
            failures += _checked(name, artifact.url, rules[i], key, ws.root / recipe.source_path(rules[i].source),
                                 missing_ok)
        if artifact.read_names:
            _values, waiting, problems = read_artifact(name, artifact, artifact.read_names, recipe, ws.root, None)
            failures += [f"artifacts.{name}: {problem}" for problem in problems]
            if not missing_ok:
                failures += [f"artifacts.{name}: {where} is not there to read its {{match}} values from — "
                             "check it out (flagtree-cpu sync)" for where in waiting]
    return failures


def _checked(name: str, url: str, pin: SourcePin, key: str, checkout: Path, missing_ok: bool) -> list[str]:
    """Why a checking rule fails: its file missing or unreadable, or its value not in ``url``."""
    text, missing, problem = read_rule_text(pin, checkout)
    if missing:
        if missing_ok:
            return []
        return [f"artifacts.{name}: {pin.source} has no {pin.what} to check the artifact against "
                f"— check out {pin.source} (flagtree-cpu sync), or fix {key}{'.file' if pin.file else '.sha256_of'}"]
    if problem is None:
        wanted, _groups, problem = capture(pin, text, key)
    if problem is not None:
        return [f"artifacts.{name}: {pin.source}'s {pin.what} {problem}"]
    if wanted in url:
        return []
    return [f"artifacts.{name}: {pin.source}'s {pin.what} asks for {wanted!r} ({_rule(pin)}), but the recipe "
            f"downloads {url} — update artifacts.{name}.url (and its digest) to the {wanted} build, write the URL "
            f"with {{match}} to read it from the file, or pin {pin.source} to a commit whose {pin.what} names the "
            "build in that URL"]


def _rule(pin: SourcePin) -> str:
    if pin.json_path is not None:
        return f"the first {pin.chars} characters at {pin.json_path}" if pin.chars else f"at {pin.json_path}"
    if pin.regex is not None:
        return f"matched by {pin.regex!r}"
    return f"its first {pin.leading_chars} characters"


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
        len(rules_of(a.matches)) for a in recipe.artifacts.values())
