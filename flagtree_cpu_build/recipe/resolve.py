"""A validated recipe made concrete for one host and workspace.

``select_variants`` picks, per artifact, the variant for this host; ``resolve`` fills in
every ``{placeholder}`` of the fields marked ``interpolate``.
"""

from __future__ import annotations

import glob
import string
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from .inputs import Artifact, ArtifactVariant, Source
from .interpolated import map_interpolated
from .link_filled import check_filled_links
from .model import Recipe
from .placeholder_checks import PLACEHOLDERS
from .reads import captures, marker, rules_of, with_markers, written
from .selector import SelectorFacts

TOOLCHAIN_ENV = "FLAGTREE_CPU_TOOLCHAIN_"  # FLAGTREE_CPU_TOOLCHAIN_CUDA=/opt/cuda-12.4: this host's own path


def toolchain_override_var(name: str) -> str:
    return TOOLCHAIN_ENV + name.upper().replace("-", "_")


def select_variants(recipe: Recipe, os_id: str, arch: str, glibc: str | None = None, os_version: str = "",
                    reads: Mapping[str, str] | None = None) -> Recipe:
    """Apply, per artifact, the first variant whose `when` matches this host (and the recipe's variant), and whose
    `when.match` ranges hold for the values the artifact read (``reads``, by marker). A variant whose values are not
    read yet stops the choice: the artifact keeps its default fields, and ``choosing`` names what it waits for."""
    facts = recipe.selector_facts(arch, os_id, glibc, os_version)
    artifacts = {}
    for name, artifact in recipe.artifacts.items():
        for i, variant in enumerate(artifact.variants):
            if not variant.when.matches(facts):
                continue
            missing = tuple(n for n in variant.when.match if marker(name, n) not in (reads or {}))
            if missing:
                artifact = replace(artifact, choosing=missing)
                break
            if not all(_holds(name, artifact, i, n, wanted, (reads or {})[marker(name, n)])
                       for n, wanted in variant.when.match.items()):
                continue
            artifact = _with_variant(artifact, variant)
            break
        artifacts[name] = artifact
    return replace(recipe, artifacts=artifacts, sources=_patches_for(recipe, facts))


def _with_variant(artifact: Artifact, variant: ArtifactVariant) -> Artifact:
    new_file = bool(variant.url or variant.sha256 or variant.digest)
    return replace(
        artifact,
        url=variant.url or artifact.url,
        # another URL is another file: the default's digests cannot apply to it
        sha256=variant.sha256 if new_file else artifact.sha256,
        digest=dict(variant.digest) if new_file else artifact.digest,
        path=variant.path or artifact.path,
        root=variant.root or artifact.root,
        size=variant.size if variant.size is not None else artifact.size,
        # another URL is another tarball: the default's expectations cannot apply to it
        unpacked_size=variant.unpacked_size if variant.url or variant.unpacked_size
        else artifact.unpacked_size,
        unpacked_entries=variant.unpacked_entries if variant.url or variant.unpacked_entries
        else artifact.unpacked_entries,
    )


def _holds(name: str, artifact: Artifact, i: int, read: str, wanted: str, value: str) -> bool:
    """Whether the value read satisfies the variant's range, compared as versions; one that is no version stops."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    from ..errors import ArtifactError

    try:
        return SpecifierSet(wanted).contains(Version(value), prereleases=True)
    except InvalidVersion:
        rules = rules_of(artifact.matches)
        rule = rules[captures(rules)[0][read].rule]
        key = f"artifacts.{name}.variants[{i}].when.match.{read}"
        raise ArtifactError(f"{key}: {rule.source}'s {rule.what} gives {value[:80]!r} for {{match.{read}}}, which is "
                            f"not a version to compare with {wanted!r}",
                            fix=f"correct the artifacts.{name}.matches rule that reads {read} so it reads a version "
                            f"(e.g. a regex group of the digits), or pin {rule.source} to a commit whose "
                            f"{rule.what} has one") from None


def _patches_for(recipe: Recipe, facts: SelectorFacts) -> dict[str, Source]:
    """Each source with only the patches whose `when` holds on this host; the others are named in
    ``skipped_patches`` (sync takes back one it applied before, as for a patch the recipe dropped)."""
    sources = {}
    for name, source in recipe.sources.items():
        kept = tuple(p for p in source.patches if p.when is None or p.when.matches(facts))
        skipped = tuple(p.label for p in source.patches if p not in kept)
        sources[name] = replace(source, patches=kept, skipped_patches=skipped) if skipped else source
    return sources


def expand(text: str, values: Mapping[str, str], environ: Mapping[str, str] | None = None) -> str:
    """Replace {name} placeholders; the recipe was validated, so every name is known.
    {env.NAME} is the inherited value of NAME ("" when unset). A {glob:PATTERN} stays for the moment the value
    is used (envreads.expand_globs), with the placeholders in PATTERN filled in as literal text: their glob
    characters and braces escaped, so a workdir named `a[1]` matches itself and ends no pattern."""
    out = []
    for literal, name, fmt, _conv in string.Formatter().parse(text):
        out.append(literal)
        if name is not None:
            if name == "glob" and fmt is not None:
                out.append("{glob:" + _pattern(fmt, values, environ) + "}")
            elif name.startswith("env.") and name not in values:
                out.append((environ or {}).get(name[4:], ""))
            else:
                out.append(values[name])
    return "".join(out)


def _pattern(text: str, values: Mapping[str, str], environ: Mapping[str, str] | None) -> str:
    out = []
    for literal, name, _fmt, _conv in string.Formatter().parse(text):
        out.append(literal)
        if name is not None:
            value = expand("{" + name + "}", values, environ)
            out.append(glob.escape(value).replace("{", "[{]").replace("}", "[}]"))
    return "".join(out)


def resolve(recipe: Recipe, workdir: Path, base: Mapping[str, str], environ: Mapping[str, str] | None = None,
            reads: Mapping[str, str] | None = None, *, located: Mapping[str, str] | None = None) -> Recipe:
    """The recipe with every placeholder filled in, for this workspace and host.

    ``base`` holds the values of PLACEHOLDERS (see placeholders.placeholder_values); the
    per-source, per-artifact and per-toolchain values are derived here. ``environ`` gives {env.NAME}
    and the per-host toolchain paths (FLAGTREE_CPU_TOOLCHAIN_<NAME>); ``located`` the folders
    ``toolchain_search`` found (over both; without one, a toolchain's first fixed folder). ``reads``: the values
    read from sources' files (``source_reads``), by marker (``reads.marker``); one not read yet stays a marker.
    """
    import os

    environ = os.environ if environ is None else environ
    missing = set(PLACEHOLDERS) - set(base)
    if missing:  # a programming error, not a user one
        raise KeyError(f"placeholder values missing: {sorted(missing)}")
    values = dict(base)
    reads = reads or {}
    recipe = replace(recipe, artifacts={name: with_markers(name, a, reads) for name, a in recipe.artifacts.items()})
    for name, artifact in recipe.artifacts.items():
        for read in captures(rules_of(artifact.matches))[0]:  # its variants' too: they are resolved alike
            key = marker(name, read)
            values[key] = reads.get(key, written(read))
    for name in recipe.sources:
        values[f"sources.{name}.path"] = str(workdir / recipe.source_path(name))
    for name, toolchain in recipe.toolchains.items():
        values[f"toolchains.{name}.path"] = (located or {}).get(name) or environ.get(toolchain_override_var(name)) \
            or expand(next(iter(toolchain.places), ""), values, environ)
    for name, artifact in recipe.artifacts.items():
        values[f"artifacts.{name}.url"] = expand(artifact.url, values, environ)
        values[f"artifacts.{name}.path"] = str(workdir / expand(artifact.path, values, environ))
    resolved = map_interpolated(replace(recipe, build=None, builds={}), lambda text, _path: expand(text, values,
                                                                                                   environ))
    # each build's {jobs} and {link_jobs} are its own (its memory limits: placeholders.build_jobs)
    builds = {name: map_interpolated(build, _expander(_own_jobs(values, name), environ), ("builds", name))
              for name, build in recipe.builds.items()}
    build = None if recipe.build is None else map_interpolated(recipe.build, _expander(_own_jobs(values, "build"),
                                                                                       environ), ("build",))
    resolved = replace(resolved, build=build, builds=builds)
    if recipe.links is not None and resolved.links is not None:  # the link rules hold after filling in too
        check_filled_links(recipe.links, resolved.links, recipe.file)
    # a relative artifact path means "inside the workdir", in the field as in its placeholder
    artifacts = {name: replace(a, path=values[f"artifacts.{name}.path"]) for name, a in resolved.artifacts.items()}
    toolchains = {name: replace(t, path=values[f"toolchains.{name}.path"]) for name, t in resolved.toolchains.items()}
    return replace(resolved, artifacts=artifacts, toolchains=toolchains)


def _own_jobs(values: Mapping[str, str], name: str) -> dict[str, str]:
    """``values`` with {jobs} and {link_jobs} of the build ``name`` (when placeholder_values gave them)."""
    own = {key: values[f"builds.{name}.{key}"] for key in ("jobs", "link_jobs") if f"builds.{name}.{key}" in values}
    return {**values, **own}


def _expander(values: Mapping[str, str], environ: Mapping[str, str] | None):
    return lambda text, _path: expand(text, values, environ)
