"""The git members of a bundle in their pins-only form: each repository's pinned commits, nothing of their history.

A board sets up at its pins; the history only makes the bundle bigger (FlagTree's is most of its git part), and
`git bundle` cannot be made at all from a mirror of a shallow upstream ("Failed to traverse parents"). So a git
member is one git pack (``git/<mirror>.pack``, ``meta.form = "pins"``) holding exactly the pinned commits with
their whole trees: made by a depth-1 fetch of the commits from the mirror (``gitops.pinned_pack``), seeded on the
board into a shallow bare mirror (those commits its shallow roots) where `sync --offline` clones from; a later
online `sync --update` fetches the rest of the history there as from any shallow repository.

Members of older bundles (``git/<mirror>.bundle``: a `git bundle` of the whole mirror) are still read; the form
is the member's ``meta.form`` ("bundle" when absent).

What the board trusts is checked, not assumed: every commit the bundle's locks pin (sources and submodules) must
be listed by the git member of its URL (``check_pins_carried``), and each pack must hold each commit it lists with
its whole tree (``seed_pins``); a pack's objects are named by their content, so a pack cannot carry another commit
under a pinned commit's name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..atomic import write_atomic
from ..gitcmd import has_commit, parents_missing, whole_trees
from ..gitops import index_pack, init_mirror, set_ref
from ..invocation import elsewhere
from ..lockfile import Lock
from .errors import BundleDamaged
from .manifest import Manifest, Member

PINS_FORM = "pins"  # meta.form of a pins-only git member
BUNDLE_FORM = "bundle"  # a whole-history `git bundle` (bundles before the pins-only form)
# the imported mirror names each pinned commit with a branch: a clone (a submodule's too) takes branches, and so
# gets the commit with its shallow root recorded; a commit fetched by id from a shallow repository would not be
PIN_BRANCH = "refs/heads/flagtree-cpu/pin-"


def form_of(member: Member) -> str:
    form = member.meta.get("form", BUNDLE_FORM)
    if form not in (PINS_FORM, BUNDLE_FORM):
        raise BundleDamaged(f"the bundle's manifest lists {member.name} in the git form {str(form)[:40]!r}; this "
                            f"flagtree-cpu reads {PINS_FORM!r} and {BUNDLE_FORM!r}",
                            fix="import it with the flagtree-cpu version that made it, or make the bundle again")
    return str(form)


def pins_meta(url: str, mirror: str, commits: tuple[str, ...]) -> dict[str, Any]:
    return {"url": url, "mirror": mirror, "commits": list(commits), "form": PINS_FORM}


def seed_pins(pack: Path, repo: Path, url: str, commits: list[str], member: str, *, new: bool) -> None:
    """The pack file ``pack`` into the bare mirror ``repo`` of ``url`` (made here when ``new``; ``repo`` is then a
    half-made folder of ours), each of ``commits`` checked whole, a shallow root where its parents are absent, and
    named by a branch (``PIN_BRANCH``). BundleDamaged when the pack does not hold them."""
    if new:
        init_mirror(repo, url)
    index_pack(repo, pack)
    missing = [c for c in commits if not has_commit(repo, c)]
    if missing:
        raise BundleDamaged(f"{member} does not hold commit {missing[0]} of {url} that the bundle's manifest lists",
                            details=tuple(missing), fix=f"make the bundle again ({elsewhere('bundle', 'create')})")
    roots = [c for c in commits if parents_missing(repo, c)]
    if roots:
        _add_shallow_roots(repo, roots)
    if not whole_trees(repo, commits):
        raise BundleDamaged(f"{member} holds the commits of {url} that the bundle's manifest lists, but not all of "
                            "their files", details=tuple(commits),
                            fix=f"make the bundle again ({elsewhere('bundle', 'create')})")
    for commit in commits:
        set_ref(repo, PIN_BRANCH + commit, commit)


def _add_shallow_roots(repo: Path, roots: list[str]) -> None:
    """git's list of commits whose parents a repository does not have (``shallow``), with ``roots`` added."""
    path = repo / "shallow"
    have = path.read_text().split() if path.is_file() else []
    write_atomic(path, "".join(f"{c}\n" for c in sorted({*have, *roots})))


def carried_pins(manifest: Manifest) -> dict[str, set[str]]:
    """URL -> the commits the bundle's git members list (those left to a --since bundle too)."""
    carried: dict[str, set[str]] = {}
    for member in manifest.of_kind("git"):
        url, commits = member.meta.get("url"), member.meta.get("commits")
        if isinstance(url, str) and isinstance(commits, list):
            carried.setdefault(url, set()).update(c for c in commits if isinstance(c, str))
    return carried


def check_pins_carried(manifest: Manifest, locks: dict[str, Lock], origin: Path) -> None:
    """BundleDamaged unless every commit the bundle's ``locks`` (member name -> lock) pin is listed by the git
    member of its URL: a board that imported it could not sync to its own lock."""
    carried = carried_pins(manifest)
    absent = []
    for name, lock in sorted(locks.items()):
        for source, entry in sorted(lock.sources.items()):
            pins = [(f"source {source}", entry.url, entry.commit)]
            pins += [(f"submodule {source}/{s.path}", s.url, s.commit) for s in entry.submodules]
            absent += [f"{name}: {what} pins {commit[:12]} of {url}, which no git member carries"
                       for what, url, commit in pins if commit not in carried.get(url, set())]
    if absent:
        raise BundleDamaged(f"{origin} does not carry every commit its locks pin; a board could not sync from it, "
                            "so nothing was imported", details=tuple(absent),
                            fix=f"make the bundle again ({elsewhere('bundle', 'create')})")


def verify_pins(path: Path, manifest: Manifest) -> None:
    """`bundle verify`'s check that the verified bundle ``path`` carries every commit its locks pin (a
    for-wheelhouse bundle: that its builds were made from its lock, ``published``): the locks (small) read into a
    temporary folder, removed whatever happens."""
    import tempfile

    from ..errors import FlagtreeCpuError
    from ..lockfile import read_lock
    from .reading import extract_members

    names = [m.name for m in manifest.of_kind("lock")]
    with tempfile.TemporaryDirectory(prefix="flagtree-cpu-verify-") as scratch:
        files = extract_members(path, manifest, names, Path(scratch))
        locks = {}
        for name, file in files.items():
            try:
                lock = read_lock(file)
            except FlagtreeCpuError as exc:
                raise BundleDamaged(f"{name} in {path} is not a lock flagtree-cpu can read: {exc.message}") from None
            if lock is not None:
                locks[name] = lock
    from .published import check_published, is_for_wheelhouse

    if is_for_wheelhouse(manifest):  # no git: its builds must be the ones its lock pins
        check_published(manifest, locks, path)
    else:
        check_pins_carried(manifest, locks, path)
