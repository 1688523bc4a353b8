"""The one way this tool asks git: the runner every git module uses, and typed queries of what a checkout holds.

The git modules are this one (queries: ``head``, ``modified_files``, ``submodule_status``, ``tree_entries`` ...)
and ``gitops`` (changes: clone, fetch, checkout, apply, refs, mirrors, bundles); ``gitrun`` runs one git for
them. Nothing else writes git argv (``tests/unit/test_layering.py`` holds that): the rest of the tool asks
these functions, so a new caller cannot forget the rules below, and every ``rev-parse`` lives in one place.

Every git respects the user's git configuration (``url.insteadOf``, proxies, credential helpers — we add,
never replace, configuration), never prompts for a password (``GIT_TERMINAL_PROMPT=0``, so CI never hangs),
feeds ``--progress`` output to a progress bar, is stopped with the tool, is watched for a stalled server
(``gitrun``), and turns a failure into a ``SourceError`` that names the URL and the likely fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from .gitrun import classify_failure, execute, start_streaming, stop, unresolved_host
from .progress import ProgressTask


def run_git(
    args: Sequence[str],
    *,
    cwd: Path | None = None,
    config: Sequence[tuple[str, str]] = (),
    progress: ProgressTask | None = None,
    url: str | None = None,
    source: str | None = None,
    check: bool = True,
) -> str:
    """Run ``git <config> <args>`` in ``cwd``; return stdout (stripped of trailing whitespace).

    ``config`` pairs become ``-c key=value`` for this command only (and, through
    GIT_CONFIG_PARAMETERS, for the git processes it starts, such as submodule clones).
    ``url`` (and the recipe's ``source`` name) are named in the error when the command fails.
    """
    status, out, err = execute(args, cwd, config, progress, url)
    if status != 0 and check:
        raise classify_failure(args, err, url, cwd, source)
    return out.rstrip()


def git_result(args: Sequence[str], *, cwd: Path | None = None, config: Sequence[tuple[str, str]] = (),
               url: str | None = None, progress: ProgressTask | None = None) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of a git command that may fail as an answer. A stalled
    server is not an answer, nor a host name without DNS answer (a caller trying another way, a fetch by
    commit id then a plain fetch, would only ask again): both raise like ``run_git``."""
    status, out, err = execute(args, cwd, config, progress, url)
    if status != 0 and unresolved_host(err, url) is not None:
        raise classify_failure(args, err, url, cwd)
    return status, out.removesuffix("\n"), err


def git_succeeds(args: Sequence[str], *, cwd: Path | None = None,
                 config: Sequence[tuple[str, str]] = ()) -> bool:
    """Whether a git query exits 0 (for checks such as "is this commit here?")."""
    return git_result(args, cwd=cwd, config=config)[0] == 0


def has_commit(repo: Path, commit: str) -> bool:
    return git_succeeds(["cat-file", "-e", f"{commit}^{{commit}}"], cwd=repo)


# --- typed queries: what a checkout holds ----------------------------------------------------------
# Read-only (GIT_OPTIONAL_LOCKS=0, see gitrun), so doctor and status may ask them of a checkout in use.


class SubmoduleState(NamedTuple):
    flag: str  # " " at its recorded commit, "+" at another one, "-" not initialized, "U" conflicted
    commit: str
    path: str  # inside the checkout, nested ones joined with "/"


def head(repo: Path) -> str | None:
    """The commit checked out at ``repo``; None when ``repo`` is not the top of a checkout (no ``.git``
    there — a folder inside some other repository does not count) or has no commit yet."""
    if not (repo / ".git").exists():
        return None
    status, out, _ = git_result(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], cwd=repo)
    return out.strip() if status == 0 else None


def modified_files(repo: Path, *, submodules: bool = True) -> list[str]:
    """Tracked files with changes (staged or not), submodules too unless ``submodules=False``.
    Untracked files do not count: the nested flagtree-cpu checkout and the links live untracked
    inside FlagTree. Raises SourceError when git cannot read the checkout."""
    out = run_git(["status", "--porcelain=v1", "-z", "--untracked-files=no", "--no-renames",
                   *([] if submodules else ["--ignore-submodules=all"])], cwd=repo)
    return [entry[3:] for entry in out.split("\0") if len(entry) > 3]


def local_diff(repo: Path) -> str:
    """The working tree's changes to tracked files against HEAD, binary-safe ("" when clean)."""
    # --submodule=diff: a change inside a submodule (a patch applied into it) shows as its hunks, not as "-dirty"
    return git_result(["diff", "HEAD", "--binary", "--no-ext-diff", "--submodule=diff"], cwd=repo)[1]


def submodule_status(repo: Path) -> list[SubmoduleState]:
    """Every submodule of the checkout, recursively, and whether it is at its recorded commit.
    Raises SourceError when git cannot tell."""
    entries = []
    for line in run_git(["submodule", "status", "--recursive"], cwd=repo).splitlines():
        if line.strip():
            commit, path = line[1:].split()[:2]
            entries.append(SubmoduleState(line[0], commit, path))
    return entries


def submodules_off(repo: Path) -> list[str]:
    """Paths of the submodules (recursively) not at the commits the checkout records; [] without
    ``.gitmodules``. When git cannot tell, that is the one entry, so the answer is never "all fine"."""
    if not (repo / ".gitmodules").is_file():
        return []
    status, out, _ = git_result(["submodule", "status", "--recursive"], cwd=repo)
    if status != 0:
        return ["(git submodule status failed)"]
    return [line[1:].split()[1] for line in out.splitlines() if line.strip() and line[0] != " "]


def gitlink(repo: Path, path: str) -> str:
    """The commit ``repo``'s HEAD records for the submodule at ``path``."""
    return run_git(["rev-parse", f"HEAD:{path}"], cwd=repo)


def object_format(repo: Path) -> str:
    """``sha1`` or ``sha256``: how the repository names its objects (git before 2.25 knows only sha1)."""
    out = run_git(["rev-parse", "--show-object-format"], cwd=repo)
    return out if out in ("sha1", "sha256") else "sha1"


def blob_starts_with(repo: Path, blob: str, file: Path) -> bool:
    """Whether the blob ``blob`` (git's stored bytes) begins with the whole content of ``file``; reads no more of
    the blob than the file holds."""
    with open(file, "rb") as mine:
        process = start_streaming(["cat-file", "blob", blob], cwd=repo)
        assert process.stdout is not None and process.stderr is not None
        try:
            while chunk := mine.read(1 << 20):
                if process.stdout.read(len(chunk)) != chunk:
                    return False
            return True
        finally:
            process.stdout.close()  # the rest of the blob is not wanted: git stops at its next write
            process.stderr.close()
            stop(process)


def remote_url(repo: Path, remote: str = "origin") -> str | None:
    """The URL of ``remote`` as configured in ``repo``; None when there is no such remote."""
    status, out, _ = git_result(["config", "--get", f"remote.{remote}.url"], cwd=repo)
    return out.strip() if status == 0 else None


def effective_url(url: str, *, cwd: Path | None = None) -> str | None:
    """Where git really goes for ``url`` after the user's ``url.<base>.insteadOf`` rules; None when git
    cannot say."""
    status, out, _ = git_result(["ls-remote", "--get-url", url], cwd=cwd)
    return out.strip() if status == 0 else None




def remote_refs(url: str, ref: str, *, source: str | None = None) -> dict[str, str]:
    """Ref name -> commit of the refs the server at ``url`` has that match ``ref`` (``git ls-remote``)."""
    refs = {}
    for line in run_git(["ls-remote", url, ref], url=url, source=source).splitlines():
        sha, _, refname = line.partition("\t")
        refs[refname] = sha
    return refs


def toplevel(folder: Path) -> Path | None:
    """The top folder of the checkout that holds ``folder``; None when no checkout does."""
    status, out, _ = git_result(["rev-parse", "--show-toplevel"], cwd=folder)
    return Path(out) if status == 0 else None


class TreeEntry(NamedTuple):
    mode: str  # 100644, 100755, 120000 (a link), 040000 (a folder), 160000 (a submodule)
    kind: str  # blob, tree, commit
    sha: str


def tree_entries(repo: Path, commit: str) -> dict[str, TreeEntry]:
    """Path -> entry of every file (and submodule) of ``commit``; empty when the commit is not here."""
    status, out, _ = git_result(["ls-tree", "-r", "-z", "--full-tree", commit], cwd=repo)
    return _tree_lines(out) if status == 0 else {}


def tree_entry(repo: Path, commit: str, path: str) -> TreeEntry | None:
    """The entry of ``path`` (from the top of ``repo``) in ``commit``, not looked into; None when it has none."""
    status, out, _ = git_result(["ls-tree", "-z", "--full-tree", commit, "--", path], cwd=repo)
    return _tree_lines(out).get(path) if status == 0 else None


def _tree_lines(out: str) -> dict[str, TreeEntry]:
    entries = {}
    for entry in out.split("\0"):
        meta, _, path = entry.partition("\t")
        if path:
            mode, kind, sha = meta.split()
            entries[path] = TreeEntry(mode, kind, sha)
    return entries


def index_entries(repo: Path) -> dict[str, str]:
    """Path -> staged blob id (empty when git has not written an index yet)."""
    entries = {}
    for entry in run_git(["ls-files", "--stage", "-z"], cwd=repo).split("\0"):
        meta, _, path = entry.partition("\t")
        if path:
            entries[path] = meta.split()[1]
    return entries


def content_ids(repo: Path, files: Sequence[str]) -> dict[str, str]:
    """The blob id each working-tree file (relative to ``repo``) would have if it were added now."""
    ids: dict[str, str] = {}
    for start in range(0, len(files), 500):  # stay far below the argument-length limit
        batch = files[start:start + 500]
        # with the path, git applies the same filters (eol, clean) it applied when committing
        out = run_git(["hash-object", "--", *batch], cwd=repo)
        ids.update(zip(batch, out.split(), strict=True))
    return ids


def unkept_commits(repo: Path, *, kept_by: str = "refs/flagtree-cpu/*") -> list[str]:
    """Commits reachable from HEAD but from no branch, tag, remote branch or ref under ``kept_by``, as
    "<short id> <subject>" (at most 20); [] when git cannot tell."""
    status, out, _ = git_result(["log", "--format=%h %s", "--max-count=20", "HEAD", "--not", "--branches",
                                 "--tags", "--remotes", f"--glob={kept_by}"], cwd=repo)
    return out.strip().splitlines() if status == 0 and out.strip() else []


def gitmodules(repo: Path) -> list[tuple[str, str]]:
    """(path, url) of each submodule ``repo``'s ``.gitmodules`` declares, as written there."""
    out = run_git(["config", "--file", ".gitmodules", "--get-regexp", r"^submodule\..*\.(path|url)$"], cwd=repo)
    paths, urls = {}, {}
    for line in out.splitlines():
        key, _, value = line.partition(" ")
        name, kind = key[len("submodule."):].rsplit(".", 1)
        (paths if kind == "path" else urls)[name] = value
    return [(paths[n], urls[n]) for n in paths if n in urls]


def parents_missing(repo: Path, commit: str) -> bool:
    """Whether a parent of ``commit`` (which ``repo`` holds) is not in ``repo``: its history stops there."""
    parents = git_result(["rev-parse", f"{commit}^@"], cwd=repo)[1].split()
    return any(not git_succeeds(["cat-file", "-e", p], cwd=repo) for p in parents)


def whole_trees(repo: Path, commits: Sequence[str]) -> bool:
    """Whether ``repo`` holds every tree and file of ``commits`` (their history may stop at shallow roots)."""
    return git_succeeds(["rev-list", "--objects", "--quiet", "--no-walk", *commits], cwd=repo) if commits else True
