"""Values an artifact reads from a synced source's file: the ``{match}`` / ``{match.NAME}`` placeholders of its
url, path and digests, named by its ``matches`` rules.

A rule captures one value (its leading characters, a JSON value, a regular expression's first group); ``as: NAME``
names it ``{match.NAME}``, a regular expression's named groups add ``{match.GROUP}``, and ``{match}`` is the first
rule's. A rule that no placeholder uses only checks that its value appears in the URL, as before.

This module knows the names and rewrites the templates; reading the files is ``source_reads``'s (a checkout is
hostile). A value not read yet (the source is not checked out) stays written as ``{match.X}`` in the resolved
recipe (``unread`` finds it); setup opens the context again once the sources are synced.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .match_names import DIGEST_PLACEHOLDER, MATCH, NAME_PATTERN, name_of  # noqa: F401 (their users import them here)
from .schema import Context, Path_, suggest

if TYPE_CHECKING:
    from .pins import SourcePin

# recipe.inputs.Artifact: ``inputs`` calls ``check_reads``, so naming its class here would close an import circle
Artifact = Any



@dataclass(frozen=True)
class Capture:
    """Where one ``{match...}`` value comes from: rule ``rule``'s value, or one of its regex's named groups."""

    rule: int
    group: str | None = None


def rules_of(matches: SourcePin | tuple[SourcePin, ...] | None) -> tuple[SourcePin, ...]:
    """`matches` as a list, whether the recipe wrote one rule or several."""
    if matches is None:
        return ()
    return matches if isinstance(matches, tuple) else (matches,)


def captures(rules: tuple[SourcePin, ...]) -> tuple[dict[str, Capture], list[tuple[int, str]]]:
    """Every name a placeholder may use ("" is ``{match}``), and the names given twice (rule index, name)."""
    names: dict[str, Capture] = {"": Capture(0)} if rules else {}
    twice: list[tuple[int, str]] = []
    for i, rule in enumerate(rules):
        own = [(rule.as_name, None)] if rule.as_name else []
        groups = list(re.compile(rule.regex).groupindex) if rule.regex else []
        for name, group in own + [(g, g) for g in groups]:
            if name in names:
                twice.append((i, name))
            names.setdefault(name, Capture(i, group))
    return names, twice


def template_fields(artifact: Artifact | Any, path: Path_ = ()) -> Iterable[tuple[Path_, str]]:
    """The artifact's own strings a ``{match}`` may appear in: url, path, digest values (and its variants')."""
    for key in ("url", "path"):
        if isinstance(getattr(artifact, key, None), str):
            yield path + (key,), getattr(artifact, key)
    for algorithm, value in (getattr(artifact, "digest", None) or {}).items():
        yield path + ("digest", algorithm), value
    for i, variant in enumerate(getattr(artifact, "variants", ())):
        yield from template_fields(variant, path + ("variants", i))


def used_names(text: str) -> list[str]:
    """The ``{match...}`` names in one template ("" for ``{match}``)."""
    try:
        parts = list(string.Formatter().parse(text))
    except ValueError:  # check_placeholders reports it
        return []
    return [n for _l, field, _f, _c in parts if field is not None and (n := name_of(field)) is not None]


def check_reads(artifact: Artifact, ctx: Context, path: Path_) -> None:
    """Each ``{match...}`` names a value the artifact's rules capture; no name is given twice."""
    rules = rules_of(artifact.matches)
    names, twice = captures(rules)
    for i, name in twice:
        ctx.report(path + ("matches", i), f"{{match.{name}}} is captured twice in artifacts' matches",
                   "give each rule's `as:` and each named group its own name")
    known = [f"{{match.{n}}}" if n else "{match}" for n in names]
    for i, variant in enumerate(getattr(artifact, "variants", ())):
        for name in variant.when.match:
            if name not in names or not name:
                ctx.report(path + ("variants", i, "when", "match"), f"{name!r} is not a value the artifact's "
                           f"matches rules capture{suggest(name, [n for n in names if n])}",
                           "name a rule's value with `as: NAME` (or a regex group) and compare that")
    for where, text in template_fields(artifact, path):
        for name in used_names(text):
            shown = f"{{match.{name}}}" if name else "{match}"
            if not rules:
                ctx.report(where, f"{shown} reads a source's file, but the artifact has no `matches` rule",
                           "add `matches: {source: NAME, file: PATH}` (chars, regex or json_path say what to read)")
            elif name not in names:
                ctx.report(where, f"{shown} is not captured by any of the artifact's matches rules"
                           f"{suggest(name, [n for n in names if n])}",
                           f"use one of {', '.join(known)}, or name a rule's value with `as: {name}`")


def marker(artifact: str, name: str) -> str:
    """The placeholder name a read value has while the recipe is resolved: ``artifacts.llvm.match.hash``."""
    return f"artifacts.{artifact}.{MATCH}" + (f".{name}" if name else "")


def written(name: str) -> str:
    """The placeholder as the recipe writes it, ``{match.hash}``: what a value not read yet shows as."""
    return "{" + MATCH + (f".{name}" if name else "") + "}"


def names_used(artifact: Artifact) -> tuple[str, ...]:
    """The names the artifact's own url, path and digests use (its chosen variant's already merged in)."""
    found: list[str] = []
    for _where, text in template_fields(replace(artifact, variants=())):
        found += [n for n in used_names(text) if n not in found]
    # and those a variant's `when.match` compares: read even when no field carries them
    found += [n for v in artifact.variants for n in v.when.match if n not in found]
    return tuple(found)


def with_markers(name: str, artifact: Artifact, values: Mapping[str, str]) -> Artifact:
    """``artifact`` (its variant chosen) ready for ``resolve``: ``{match.X}`` in a url or path becomes the
    placeholder ``{artifacts.NAME.match.X}`` (``resolve`` gives it the value read, or ``written``), a digest's
    placeholder its value from ``values`` (keyed by marker) or, not read yet, stays as written; ``read_names``
    records the names the artifact's own fields use."""
    if not artifact.matches:
        return artifact

    def to_marker(text: str | None) -> str | None:
        return None if text is None else _rewrite(text, lambda n: "{" + marker(name, n) + "}")

    def digests(given: Mapping[str, str]) -> dict[str, str]:
        out = {}
        for algorithm, value in given.items():
            read = used_names(value)
            out[algorithm] = values.get(marker(name, read[0]), written(read[0])) if read else value
        return out

    variants = tuple(replace(v, url=to_marker(v.url), path=to_marker(v.path), digest=digests(v.digest))
                     for v in artifact.variants)
    read_in = {"url": used_names(artifact.url), "path": used_names(artifact.path),
               "digest": [n for v in artifact.digest.values() for n in used_names(v)],
               "variants": [n for _w, text in template_fields(replace(artifact, url=None, path=None, digest={}))
                            for n in used_names(text)]}
    return replace(artifact, url=to_marker(artifact.url), path=to_marker(artifact.path),
                   digest=digests(artifact.digest), variants=variants, read_names=names_used(artifact),
                   read_in={k: tuple(v) for k, v in read_in.items()})


def checking_rules(artifact: Artifact) -> list[int]:
    """The rules (indexes) that check the resolved artifact's URL: every rule of an artifact that reads nothing (as
    before v3), and, when the URL is written out (a pinned or --set URL) but the path still reads, the rules the path
    reads (else the path would name another build than the URL downloads). A rule only another host's variant uses
    checks nothing here."""
    rules = rules_of(artifact.matches)
    named, _twice = captures(rules)
    uses = artifact.read_in
    if not any(uses.values()):
        return list(range(len(rules)))
    if uses.get("url"):
        return []
    in_digest = {named[n].rule for n in uses.get("digest", ()) if n in named}
    return sorted({named[n].rule for n in uses.get("path", ()) if n in named} - in_digest)


def unread(artifact: Artifact) -> list[str]:
    """The read names whose value the resolved ``artifact`` does not have yet (still written as a placeholder)."""
    texts = [artifact.url, artifact.path, *artifact.digest.values()]
    found = [n for n in artifact.read_names if any(written(n) in t for t in texts)]
    return found + [n for n in artifact.choosing if n not in found]


def _rewrite(template: str, replacement: Callable[[str], str]) -> str:
    """``template`` with each ``{match...}`` replaced by ``replacement(name)`` (itself template text); the rest
    written back as it was parsed (literal braces doubled again)."""
    out = []
    for literal, field, _fmt, _conv in string.Formatter().parse(template):
        out.append(literal.replace("{", "{{").replace("}", "}}"))
        if field is not None:
            name = name_of(field)
            out.append("{" + field + "}" if name is None else replacement(name))
    return "".join(out)
