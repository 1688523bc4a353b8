"""Who published a tree, and whether this run may replace it.

A published tree's stamp records its owner: the recipe (name, digest, variant) and the workspace whose `fetch`
put it there, and how it is published (``own`` or ``shared``). Two workspaces of one machine share
``~/.triton``; without this record a `fetch` in one silently replaced the LLVM another recipe, or the same recipe
in another workspace, had published there, and `clean --trees` in one removed what the other still used.

The rules (``refusal``): a tree another recipe or workspace published (``own``) is replaced only when the user
names it (``fetch --replace NAME``); a ``shared`` tree (a versioned folder of a cache many recipes use) is never
replaced: another content at its path means a recipe names the wrong folder. A tree inside the destination, or
around it, that is published itself is never replaced nor written into. A stamp written before owners were
recorded names none: such a tree is replaced as before (it cannot be told whose it is), and `clean` leaves it.

A workspace that reuses a tree someone else published (the digests fit) is recorded in the stamp's ``users``, so
its owner's `clean --trees` leaves it alone.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...atomic import write_atomic
from ...errors import ArtifactError
from ...extract import STAMP_NAME, read_stamp

if TYPE_CHECKING:
    from ...recipe import Artifact, Recipe

_NESTED_DEPTH = 4  # how deep a tree is searched for published trees inside it (~/.triton/nvidia/<tool>/<version>)
_MAX_USERS = 64  # a stamp lists at most this many other workspaces (a hostile stamp is not read beyond it)
_FIELDS = ("recipe", "recipe_digest", "variant", "workspace")


@dataclass(frozen=True)
class Owner:
    """A recipe in a workspace: what a stamp records as the publisher, or as a user, of a tree."""

    recipe: str
    recipe_digest: str
    variant: str | None
    workspace: str

    @classmethod
    def of(cls, recipe: Recipe, workspace: Path) -> Owner:
        return cls(recipe.name, recipe.digest, recipe.variant, str(workspace))

    @classmethod
    def read(cls, value: Any) -> Owner | None:
        """An owner record from a stamp (hostile: any other shape is no owner)."""
        if not isinstance(value, Mapping) or not all(isinstance(value.get(k), str) for k in _FIELDS if k != "variant"):
            return None
        variant = value.get("variant")
        return cls(value["recipe"], value["recipe_digest"], variant if isinstance(variant, str) else None,
                   value["workspace"])

    def to_stamp(self, publish: str = "own") -> dict[str, Any]:
        return {"recipe": self.recipe, "recipe_digest": self.recipe_digest, "variant": self.variant,
                "workspace": self.workspace, "publish": publish}

    def same_place(self, other: Owner) -> bool:
        """The same recipe in the same workspace (its digest may have moved: a new pin of the same recipe)."""
        return (self.recipe, self.workspace) == (other.recipe, other.workspace)

    def words(self) -> str:
        variant = f" (variant {self.variant})" if self.variant else ""
        return f"recipe {self.recipe}{variant} of workspace {self.workspace}"


def owner_of(stamp: Mapping[str, Any] | None) -> Owner | None:
    return Owner.read(stamp.get("owner")) if stamp else None


def is_shared(stamp: Mapping[str, Any] | None) -> bool:
    owner = stamp.get("owner") if stamp else None
    return isinstance(owner, Mapping) and owner.get("publish") == "shared"


def users_of(stamp: Mapping[str, Any] | None) -> list[Owner]:
    """The other workspaces the stamp records as using the tree."""
    found = stamp.get("users") if stamp else None
    if not isinstance(found, list):
        return []
    return [o for o in (Owner.read(v) for v in found[:_MAX_USERS]) if o is not None]


def refusal(name: str, artifact: Artifact, dest: Path, stamp: Mapping[str, Any] | None, us: Owner,
            replace: Collection[str]) -> ArtifactError | None:
    """Why publishing artifact ``name`` at ``dest`` (whose current stamp is ``stamp``) must not happen, if it must
    not: it would replace, remove or write into a tree another recipe or workspace published."""
    around = _published_around(dest)
    if around is not None:
        return ArtifactError(
            f"artifact {name} would be published at {dest}, inside the tree {around} that {_whose(around)} "
            "published: replacing that tree would remove it", fix=f"give artifacts.{name}.path a folder outside "
            f"{around} (e.g. beside it: {around.parent / dest.name})")
    inside = published_inside(dest)
    if inside:
        return ArtifactError(
            f"publishing artifact {name} at {dest} would remove the published tree {inside[0]} inside it "
            f"({_whose(inside[0])} published it); nothing was changed", details=tuple(str(p) for p in inside[1:]),
            fix=f"give artifacts.{name}.path a folder of its own (not one that holds other published trees)")
    owner = owner_of(stamp)
    if owner is None or (owner.same_place(us) and not (is_shared(stamp) or artifact.publish == "shared")):
        return None
    if is_shared(stamp) or artifact.publish == "shared":
        return ArtifactError(
            f"{dest} is a shared tree that {owner.words()} published with other content than artifact {name} of "
            f"{us.words()} expects ({(stamp or {}).get('sha256', '?')[:12]}, not this recipe's); a shared tree is "
            "never replaced", fix=f"give artifacts.{name}.path a folder named after this version (shared trees "
            "are versioned subfolders, e.g. .../ptxas/<version>), or correct its digest")
    if name in replace:
        return None
    return ArtifactError(
        f"{dest} was published by {owner.words()} with other content than artifact {name} of {us.words()} "
        "expects; it is left alone", fix=f"if that workspace no longer needs it: flagtree-cpu fetch --replace {name} "
        f"(or give artifacts.{name}.path a folder of its own)")


def published_inside(dest: Path) -> list[Path]:
    """Published trees (a stamp of ours) below ``dest``, not ``dest`` itself; links are not followed."""
    found: list[Path] = []
    level = [dest]
    for _depth in range(_NESTED_DEPTH):
        below = []
        for folder in level:
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    path = Path(entry.path)
                    (found if os.path.lexists(path / STAMP_NAME) else below).append(path)
        level = below
    return sorted(found)


def _published_around(dest: Path) -> Path | None:
    for parent in dest.parents:
        if parent.is_dir() and os.path.lexists(parent / STAMP_NAME):
            return parent
    return None


def _whose(tree: Path) -> str:
    owner = owner_of(read_stamp(tree))
    return owner.words() if owner is not None else "flagtree-cpu"


def record_user(dest: Path, us: Owner) -> None:
    """Record ``us`` in the stamp of a tree someone else published, when it is not there yet (the caller holds the
    publish lock): that publisher's `clean --trees` then leaves the tree alone."""
    stamp = read_stamp(dest)
    owner = owner_of(stamp)
    if stamp is None or owner is None or owner.same_place(us):
        return
    users = users_of(stamp)
    if any(u.same_place(us) for u in users) or len(users) >= _MAX_USERS:
        return
    stamp["users"] = [u.to_stamp() for u in users] + [us.to_stamp()]
    write_atomic(dest / STAMP_NAME, json.dumps(stamp, indent=2) + "\n")
