"""A damaged lock file is a usage error (exit 2) naming the file and the repair — whatever the damage.

The lock sits in the workspace for months; a full disk cuts it short, a careless `cp -r`
replaces it with a folder, an editor saves it as Latin-1, someone pastes YAML tricks into
it. Every command that reads it must then say which file and how to get a new one, never
"unexpected error". (A damaged lock through the CLI, in a real process, is in
integration/test_hostile_yaml_process.py: the commands that read the lock import git.)
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from flagtree_cpu_build.errors import ExitCode, UsageError
from flagtree_cpu_build.lockfile import ArtifactLock, Lock, SourceLock, SubmoduleLock, empty_lock, read_lock, write_lock

COMMIT = "3911e5bf145c039104aa31ef2fef0e55f569c9e5"


@pytest.fixture
def lock_path(tmp_path: Path) -> Path:
    """A real lock, as `flagtree-cpu lock` and `fetch` write it."""
    lock = empty_lock("flagtree-cpu-arm64", "d" * 64)
    lock = Lock(**{**lock.__dict__,
                   "sources": {"flagtree-cpu": SourceLock(
                       url="https://github.com/flagos-ai/flagtree-cpu.git", ref="main", commit=COMMIT,
                       resolved_from="ref",
                       submodules=(SubmoduleLock(path="third_party/sleef", url="https://github.com/shibatch/sleef",
                                                 commit="a" * 40),))},
                   "artifacts": {"llvm": ArtifactLock(url="https://example.invalid/llvm.tar.gz", sha256="b" * 64,
                                                      size=123)}})
    path = tmp_path / "ws" / ".flagtree-cpu" / "lock.yaml"
    write_lock(path, lock)
    return path


def damage_of(path: Path) -> UsageError:
    with pytest.raises(UsageError) as info:
        read_lock(path)
    error = info.value
    assert error.exit_code == ExitCode.USAGE
    assert str(path) in error.message
    assert f"mv {path} {path}.damaged" in error.fix and "flagtree-cpu lock" in error.fix
    return error


def test_lock_that_is_not_yaml_names_the_line_and_the_repair(lock_path: Path) -> None:
    lock_path.write_text("lock_version: 1\nsources: {flagtree-cpu: [\n")
    assert "is damaged: not valid YAML" in damage_of(lock_path).message


@pytest.mark.parametrize("text, fragment", [
    ("lock_version: 1\n" + "\n".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10 if i else ['x'] * 10)}]"
                                     for i in range(10)), "alias bomb"),
    ("lock_version: 1\nsources: &s {flagtree-cpu: *s}\n", "alias *s is inside the value it names"),
    ("lock_version: 1\nsources: " + "[" * 200_000 + "]" * 200_000 + "\n", "nested more than 64 levels"),
    ("lock_version: 1\nsources: !!python/object/apply:os.system [id]\n", "tag !!python/object/apply:os.system"),
    ("lock_version: 1\n? [sources]\n: {}\n", "keys must be plain text"),
    ("lock_version: 1\ntool_version: 2024-02-30\n", "is not a valid timestamp"),
], ids=["alias-bomb", "recursive-alias", "deep-nesting", "python-tag", "complex-key", "impossible-date"])
def test_hostile_lock_is_a_usage_error_in_milliseconds(lock_path: Path, text: str, fragment: str) -> None:
    lock_path.write_text(text)
    start = time.process_time()  # CPU seconds, not wall: a loaded machine (parallel workers) stretches the clock
    error = damage_of(lock_path)
    assert time.process_time() - start < 1.0  # an expanded alias bomb or unbounded nesting takes minutes
    assert fragment in error.message
    assert f"{lock_path}:" in error.message  # file:line


def test_lock_replaced_by_a_folder(lock_path: Path) -> None:
    lock_path.unlink()
    lock_path.mkdir()
    assert "is a folder, not a file" in damage_of(lock_path).message


def test_lock_whose_folder_is_a_file(tmp_path: Path) -> None:
    state = tmp_path / ".flagtree-cpu"
    state.write_text("not a folder")
    error = damage_of(state / "lock.yaml")
    assert "cannot read lock file" in error.message


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_lock_says_how_to_make_it_readable(lock_path: Path) -> None:
    lock_path.chmod(0)
    error = damage_of(lock_path)
    assert "permission denied" in error.message and f"chmod u+rw {lock_path}" in error.fix


def test_lock_that_is_not_utf8_names_the_line(lock_path: Path) -> None:
    lines = lock_path.read_bytes().splitlines(keepends=True)
    at = lines.index(b"    ref: main\n")
    lines[at] = b"    ref: m\xe4in\n"  # an editor saved it as Latin-1
    lock_path.write_bytes(b"".join(lines))
    assert f"{lock_path}:{at + 1} is damaged: not UTF-8 text" in damage_of(lock_path).message


def test_lock_cut_short_anywhere_reads_or_is_a_usage_error(lock_path: Path) -> None:
    """A full disk or a killed copy leaves any prefix of the file; every one reads (a prefix that ends
    between entries is a smaller lock: the missing entries are resolved again) or is a usage error."""
    whole = lock_path.read_bytes()
    intact = read_lock(lock_path)
    outcomes = set()
    for size in range(len(whole)):
        lock_path.write_bytes(whole[:size])
        try:
            outcomes.add("read" if read_lock(lock_path) == intact else "partial")
        except UsageError as exc:
            assert str(lock_path) in exc.message and f"mv {lock_path} {lock_path}.damaged" in exc.fix
            outcomes.add("damaged")
    assert "damaged" in outcomes


def test_lock_with_wrong_types_names_the_key_and_its_line(lock_path: Path) -> None:
    text = lock_path.read_text().replace(f"commit: {COMMIT}", "commit: [not, a, commit]")
    lock_path.write_text(text)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "commit: [not" in t)
    error = damage_of(lock_path)
    assert f"{lock_path}:{line} is damaged at sources.flagtree-cpu.commit" in error.message


@pytest.mark.parametrize("text, what", [("", "is empty"), ("# only a comment\n", "is empty"),
                                        ("- a\n- b\n", "is not a flagtree-cpu lock")])
def test_empty_or_foreign_lock(lock_path: Path, text: str, what: str) -> None:
    lock_path.write_text(text)
    assert what in damage_of(lock_path).message
