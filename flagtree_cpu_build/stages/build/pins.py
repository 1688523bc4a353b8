"""The pins key: what a published build is found by before anything is downloaded.

The build key (``prebuilt.identity``) is read from the checkout and the unpacked artifacts, so a board must sync
and fetch before it can ask a wheelhouse. The pins key is computed from the lock alone: for each source the final
build uses, its commit, its submodules' commits and the sha256 of each patch applied; for each artifact it uses,
the download's sha256; the lock's ``reads`` and ``requirements_files`` values; the digest of what in the recipe
the build is made from (``Recipe.inputs_digest``, ``recipe/input_digest.py``: taken after the variant and ``--set``
are applied, before any placeholder is filled in with this machine's paths; without the settings that are not build
inputs, such as the compile farm or the installer), the variant and the build's name. Two machines with the same
lock and recipe compute the same key; the target class is
matched beside it, as for the build key.

A lock that does not give every pin (no lock yet, a source or artifact it does not list, an artifact it lists for
another URL) gives no key: the board takes the usual path (sync, fetch, build), and the reason is said.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ... import wheelhouse as wh
from ...build_stamp import build_view
from ...recipe.builds import final_build, named_builds

if TYPE_CHECKING:
    from ...lockfile import Lock
    from ...recipe import Recipe

PINS_SCHEMA = "flagtree-cpu/pins/v2"  # v2: the recipe's inputs_digest, not its whole digest
GET_THE_LOCK = ("get the lock: run `flagtree-cpu sync` on a machine with network (it records every commit, "
                "submodule and patch) and copy its .flagtree-cpu/lock.yaml here, or copy the publishing board's "
                ".flagtree-cpu/lock.yaml")


@dataclass(frozen=True)
class PinsKey:
    document: dict[str, Any]  # every pin, as the manifest records it beside the key
    key: str  # digest of the document


def build_recipe(recipe: Recipe) -> tuple[str, Recipe]:
    """The final build's name and the recipe as that build sees it (its own ``inputs``)."""
    name = final_build(recipe) or "build"
    return name, build_view(recipe, name) if recipe.builds else recipe


def pins_key(recipe: Recipe, lock: Lock | None) -> tuple[PinsKey | None, str]:
    """The pins key of the recipe's final build under ``lock``; None and why when the lock does not pin it all."""
    if lock is None:
        return None, f"there is no lock file yet; {GET_THE_LOCK}"
    if lock.recipe != recipe.name:
        return None, f"the lock is recipe {lock.recipe}'s, not {recipe.name}'s"
    builds = named_builds(recipe)
    if len(builds) > 1:  # one published wheel is the final build's alone: what the others make is not in it
        return None, (f"the recipe has {len(builds)} builds ({', '.join(builds)}); an install-only "
                      "board installs one published build, so the others must be built here")
    name, view = build_recipe(recipe)
    assert view.build is not None
    chosen = view.build.inputs  # None: every source and artifact
    sources: dict[str, Any] = {}
    for source in recipe.sources_in_order():
        if chosen is not None and source not in chosen.sources:
            continue
        pinned = lock.sources.get(source)
        if pinned is None or not pinned.commit:
            return None, f"the lock pins no commit for source {source}"
        if pinned.url != recipe.sources[source].url:
            return None, f"the lock's source {source} is {pinned.url}, the recipe's {recipe.sources[source].url}"
        sources[source] = {"commit": pinned.commit,
                           "submodules": {s.path: s.commit for s in pinned.submodules},
                           "patches": {p.file: p.sha256 for p in pinned.patches}}
    artifacts: dict[str, str] = {}
    for artifact, spec in recipe.artifacts.items():
        if chosen is not None and artifact not in chosen.artifacts:
            continue
        entry = lock.artifacts.get(artifact)
        if entry is None or not entry.sha256:
            return None, f"the lock pins no sha256 for artifact {artifact}"
        if spec.url and "{" not in spec.url and entry.url != spec.url:  # "{": a url read after sync
            return None, f"the lock's artifact {artifact} is {entry.url}, the recipe's {spec.url}"
        artifacts[artifact] = entry.sha256.lower()
    document = {"schema": PINS_SCHEMA, "recipe": recipe.name, "recipe_digest": recipe.inputs_digest,
                "variant": recipe.variant, "build": name, "sources": sources, "artifacts": artifacts,
                "reads": {k: r.value for k, r in sorted(lock.reads.items())},
                "requirements_files": {k: {"files": dict(sorted(r.files.items())), "requirements": list(r.requirements)}
                                       for k, r in sorted(lock.requirements_files.items())}}
    return PinsKey(document, wh.digest_of(document)), ""


def checkout_differs(lock: Lock | None, components: dict[str, Any]) -> str | None:
    """Why the build's stamp components are not exactly what ``lock`` pins (None: they are): a source at another
    commit or with local changes, an artifact of another sha256. Only such a build is published under a pins key."""
    if lock is None:
        return "there is no lock file"
    for name, source in components.get("sources", {}).items():
        pinned = lock.sources.get(name)
        if pinned is None or pinned.commit != source.get("commit"):
            return f"source {name} is not at the lock's commit"
        if source.get("local_changes"):
            return f"source {name} has local changes"
    for name, sha256 in components.get("artifacts", {}).items():
        entry = lock.artifacts.get(name)
        if entry is None or not sha256 or entry.sha256.lower() != str(sha256).lower():
            return f"artifact {name} is not the lock's download"
    return None


def pins_differences(published: dict[str, Any], mine: dict[str, Any]) -> list[str]:
    """Each pin that differs between a published pins document and this board's, as 'path old -> new'."""
    found: list[str] = []

    def walk(path: str, old: Any, new: Any) -> None:
        if isinstance(old, dict) and isinstance(new, dict):
            for key in sorted(set(old) | set(new), key=str):
                walk(f"{path}.{key}" if path else str(key), old.get(key), new.get(key))
        elif old != new:
            found.append(f"{wh.shown(path)} {wh.shown(_short(old))} -> {wh.shown(_short(new))}")

    walk("", published, mine)
    return found


def _short(value: Any) -> Any:
    if isinstance(value, str) and len(value) == 40 or isinstance(value, str) and len(value) == 64:
        return value[:12]
    return value
