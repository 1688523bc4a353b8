"""No two artifacts of one recipe publish into the same folder, or one inside the other, on any host it builds on.

Two artifacts at one path republish each other on every `fetch` and never show as current; one inside the other
is removed whenever the outer one is replaced. The recipe being checked is already one variant's (the loader
merges the overlay first), so what varies here is the host: each artifact's `variants` pick a path per host.
The hosts are enumerated from what the recipe's selectors can tell apart (architectures, os ids, glibc bounds);
a path that holds a host placeholder (`{arch}`) is compared as it reads on each of them.
"""

from __future__ import annotations

import itertools
import posixpath
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from .inputs import Artifact, Selector, SelectorFacts
from .schema import Context, Path_

if TYPE_CHECKING:
    from .platform import Platform


class Recipe(Protocol):
    """What this rule reads of a recipe (``model.Recipe`` is one; importing it here would be a circle: the model
    calls ``check_artifact_paths``)."""

    @property
    def artifacts(self) -> Mapping[str, Artifact]: ...
    @property
    def platform(self) -> Platform: ...
    def selector_facts(self, host_arch: str, os_id: str = "", glibc: str | None = None,
                       os_version: str = "") -> SelectorFacts: ...

# a path's prefix that is another placeholder's: {state_dir}/x and {workdir}/.flagtree-cpu/x are one folder
_SAME_FOLDER = {"{state_dir}": "{workdir}/.flagtree-cpu", "{logs_dir}": "{workdir}/logs"}
_VERSION = re.compile(r"\d+(\.\d+)*")


@dataclass(frozen=True)
class _Publish:
    artifact: str
    key: Path_  # where the path is written: artifacts.NAME.path, or one of its variants' path
    folder: str  # normalized, placeholders of the workspace kept as written


def check_artifact_paths(recipe: Recipe, ctx: Context, path: Path_) -> None:
    """Report each pair of artifacts whose folders are the same or nested on some host, once per pair."""
    reported: set[tuple[str, str]] = set()
    for facts in _hosts(recipe):
        chosen = [_chosen(name, recipe, facts) for name in recipe.artifacts]
        for first, second in itertools.combinations(chosen, 2):
            pair = (first.artifact, second.artifact)
            if pair in reported:
                continue
            relation = _relation(first.folder, second.folder)
            if relation is None:
                continue
            reported.add(pair)
            on = f" on {_host_words(facts)}" if _varies(recipe, pair) else ""
            ctx.report(path + second.key, _message(first, second, relation) + on,
                       f"give artifacts.{second.artifact} its own folder (a sibling of {first.folder}, not inside "
                       "it), e.g. a versioned subfolder of the same parent")


def _message(first: _Publish, second: _Publish, relation: str) -> str:
    if relation == "same":
        return (f"artifacts {first.artifact!r} and {second.artifact!r} are both published at {first.folder}: "
                "each would replace the other on every fetch")
    inner, outer = (first, second) if relation == "inside-second" else (second, first)
    return (f"artifact {inner.artifact!r} ({inner.folder}) would be published inside artifact {outer.artifact!r} "
            f"({outer.folder}): replacing {outer.artifact!r} would remove it")


def _relation(a: str, b: str) -> str | None:
    if a == b:
        return "same"
    if b.startswith(a.rstrip("/") + "/"):
        return "inside-first"
    if a.startswith(b.rstrip("/") + "/"):
        return "inside-second"
    return None


def _chosen(name: str, recipe: Recipe, facts: SelectorFacts) -> _Publish:
    """The folder artifact ``name`` publishes into on ``facts``' host (its first matching variant, as
    ``resolve.select_variants`` picks)."""
    artifact = recipe.artifacts[name]
    for i, variant in enumerate(artifact.variants):
        if variant.when.matches(facts):
            if variant.path:
                return _Publish(name, ("artifacts", name, "variants", i, "path"), _normalized(variant.path, facts))
            break
    return _Publish(name, ("artifacts", name, "path"), _normalized(artifact.path, facts))


def _normalized(text: str, facts: SelectorFacts) -> str:
    for placeholder, value in (("{arch}", facts.arch), ("{host.arch}", facts.arch),
                               ("{target.arch}", facts.target_arch), ("{variant}", facts.variant or "")):
        text = text.replace(placeholder, value)
    if not text.startswith(("/", "{", "~")):
        text = "{workdir}/" + text  # relative: inside the workdir, as resolve makes it
    for short, long in _SAME_FOLDER.items():
        if text == short or text.startswith(short + "/"):
            text = long + text[len(short):]
    return posixpath.normpath(text)


def _hosts(recipe: Recipe) -> Iterator[SelectorFacts]:
    """One host for each combination the recipe's artifact selectors can tell apart."""
    whens = [v.when for a in recipe.artifacts.values() for v in a.variants]
    arches = list(recipe.platform.host.arch) or sorted({a for w in whens for a in w.arch}) or ["aarch64"]
    os_ids = sorted({o for w in whens for o in w.os_id}) + [""]  # "": an os no selector names
    glibcs: list[str | None] = [*sorted({v for w in whens for v in _bounds(w)}), None]
    for arch, os_id, glibc in itertools.product(arches, os_ids, glibcs):
        yield recipe.selector_facts(arch, os_id, glibc)


def _bounds(when: Selector) -> Iterator[str]:
    """Versions on either side of each bound of a glibc range, so every side of it is tried."""
    for match in _VERSION.finditer(when.glibc or ""):
        parts = [int(p) for p in match.group().split(".")]
        yield ".".join(map(str, parts))
        yield ".".join(map(str, [*parts[:-1], parts[-1] + 1]))
        if parts[-1] > 0:
            yield ".".join(map(str, [*parts[:-1], parts[-1] - 1]))


def _varies(recipe: Recipe, pair: tuple[str, str]) -> bool:
    return any(recipe.artifacts[name].variants for name in pair)


def _host_words(facts: SelectorFacts) -> str:
    words = [f"an {facts.arch} host"]
    if facts.os_id:
        words.append(f"os {facts.os_id}")
    if facts.glibc:
        words.append(f"glibc {facts.glibc}")
    return ", ".join(words)

