"""The typed git queries (gitcmd.head, modified_files, submodule_status ...): what status, doctor, build
and sync ask a checkout, answered by real git on real clones of the git world."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flagtree_cpu_build.errors import SourceError
from flagtree_cpu_build.gitcmd import (
    SubmoduleState,
    effective_url,
    git_result,
    gitlink,
    head,
    local_diff,
    modified_files,
    object_format,
    remote_url,
    run_git,
    submodule_status,
    submodules_off,
)
from tests.support.gitworld import GITHUB_URLS, GitWorld, git


@pytest.fixture
def checkout(github_redirect: GitWorld, tmp_path: Path) -> Path:
    """flagtree-cpu at v33 with its sleef submodule, cloned from the git world."""
    return github_redirect.clone("flagtree-cpu", tmp_path / "flagtree-cpu", commit=github_redirect["flagtree-cpu"]
                                 .commits["v33"], recursive=True)


def test_head_is_the_commit_and_none_where_there_is_no_checkout(checkout: Path, git_world: GitWorld,
                                                                tmp_path: Path) -> None:
    assert head(checkout) == git_world["flagtree-cpu"].commits["v33"]
    assert head(tmp_path / "missing") is None
    (tmp_path / "plain").mkdir()
    assert head(tmp_path / "plain") is None
    assert head(checkout / "include") is None  # inside a checkout is not a checkout
    empty = tmp_path / "empty"
    git("init", "--quiet", empty)
    assert head(empty) is None  # no commit yet


def test_modified_files_lists_tracked_changes_only(checkout: Path) -> None:
    assert modified_files(checkout) == [] and local_diff(checkout) == ""
    (checkout / "README.md").write_text("changed\n")
    (checkout / "untracked.txt").write_text("not git's business\n")
    assert modified_files(checkout) == ["README.md"]
    assert "+changed" in local_diff(checkout)


def test_queries_never_write_the_index(checkout: Path) -> None:
    index = checkout / ".git" / "index"
    before = index.stat().st_mtime_ns
    readme = checkout / "README.md"
    readme.write_bytes(readme.read_bytes())  # same content, new stat data: git would refresh the index
    os.utime(readme, ns=(before + 5_000_000_000, before + 5_000_000_000))
    assert modified_files(checkout) == []
    assert index.stat().st_mtime_ns == before


def test_submodule_status_and_the_submodules_off_their_gitlinks(checkout: Path, git_world: GitWorld,
                                                                tmp_path: Path) -> None:
    sleef = git_world["sleef"].commits
    assert submodule_status(checkout) == [SubmoduleState(" ", sleef["first"], "third_party/sleef")]
    assert gitlink(checkout, "third_party/sleef") == sleef["first"]
    assert submodules_off(checkout) == []
    git("checkout", "--quiet", sleef["second"], cwd=checkout / "third_party/sleef")
    assert submodule_status(checkout)[0].flag == "+"
    assert submodules_off(checkout) == ["third_party/sleef"]
    (tmp_path / "plain").mkdir()
    assert submodules_off(tmp_path / "plain") == []  # no .gitmodules: nothing to be off


def test_object_format_and_remote_urls(checkout: Path, git_world: GitWorld, tmp_path: Path) -> None:
    assert object_format(checkout) == "sha1"
    assert remote_url(checkout) == git_world["flagtree-cpu"].url
    assert remote_url(checkout, "upstream") is None
    # the user's insteadOf rule (the git world's gitconfig) decides where a GitHub URL really goes
    assert effective_url(GITHUB_URLS["sleef"]) == f"{git_world.root.joinpath('bare').as_uri()}/shibatch/sleef"


def test_git_in_a_missing_folder_is_not_mistaken_for_git_missing(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="cannot run git in .*missing: the folder does not exist"):
        run_git(["status"], cwd=tmp_path / "missing")


def test_git_missing_from_path_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SourceError, match="git is not installed or not on PATH") as caught:
        run_git(["--version"])
    assert "apt-get install -y git" in (caught.value.fix or "")


def test_git_messages_are_english_whatever_the_locale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LC_ALL", "de_DE.UTF-8")
    monkeypatch.setenv("LANGUAGE", "de")
    status, _out, err = git_result(["rev-parse", "HEAD"], cwd=tmp_path)
    assert status != 0 and "not a git repository" in err
