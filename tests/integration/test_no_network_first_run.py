"""The first run on a machine without network: a host name without a DNS answer is not retried like a dropped
connection, and the error names the host and the ways forward (issue 28, section 3). An unresolvable `.invalid`
name stands for the missing network: nothing here leaves the machine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.fetching import URL_PATH, fetch_process
from tests.support.interrupt import marked_processes, wait_until

MARK = "FLAGTREE_CPU_TEST_NO_NETWORK_RUN"
NO_PROXY = {"no_proxy": "*", "NO_PROXY": "*"}  # the suite points child processes at a dead proxy: ask DNS instead


@pytest.mark.timeout(300)
def test_a_download_from_a_host_without_dns_answer_fails_at_once_naming_it(tmp_path: Path) -> None:
    url = f"http://llvm-mirror.invalid{URL_PATH}"
    process = fetch_process(tmp_path, url, env=NO_PROXY)
    _, stderr = process.communicate(timeout=240)
    said = " ".join(stderr.split())
    assert process.returncode == 4, stderr
    assert "trying again" not in said  # no retries with backoff for an answer that will not change
    assert "llvm-mirror.invalid cannot be resolved" in said and "not retried" in said
    assert "--mirror" in said and "fetch --from" in said  # the ways forward


# --- setup's first run: sources and the download side by side, one error naming every host -------------------

GIT_URLS = ("sources.flagtree.url=https://github.invalid/flagos-ai/FlagTree.git",
            "sources.flagtree-cpu.url=https://github.invalid/flagos-ai/flagtree-cpu.git")


def _setup_process(tmp_path: Path, sets: tuple[str, ...], wrap: tuple[str, ...] = ()) -> subprocess.Popen:
    argv = [*wrap, sys.executable, "-m", "flagtree_cpu_build", "-w", str(tmp_path / "ws")]
    for assignment in sets:
        argv += ["--set", assignment]
    return subprocess.Popen([*argv, "setup", "--skip-build"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, **NO_PROXY, MARK: str(tmp_path)})


def _error_blocks(stderr: str) -> list[str]:
    """Each `error:` line with the indented lines and the `fix:` line after it, joined on whitespace."""
    blocks: list[list[str]] = []
    for line in stderr.splitlines():
        if line.startswith("error:"):
            blocks.append([line])
        elif blocks and (line.startswith((" ", "fix:"))) and not blocks[-1][-1].startswith("fix:"):
            blocks[-1].append(line)
    return [" ".join(" ".join(block).split()) for block in blocks]


def _judge_one_error(process: subprocess.Popen, tmp_path: Path, hosts: tuple[str, ...]) -> None:
    _, stderr = process.communicate(timeout=240)  # only a hang reaches this
    # the sources stage is first in setup's order, and its code (3) is what setup gives when it fails first
    assert process.returncode == 3, stderr
    blocks = _error_blocks(stderr)
    assert len(blocks) == 1, stderr  # one error, not git's and the download's
    for host in hosts:
        assert host in blocks[0], blocks[0]
    assert "trying again" not in stderr
    fix = blocks[0].partition(" fix: ")[2]
    assert "--mirror" in fix and "FLAGTREE_CPU_MIRRORS" in fix and "bundle import" in fix and "--offline" in fix
    assert f"-w {tmp_path / 'ws'}" in fix  # the commands carry the run's context
    # nothing it started outlives it (its watcher, reaper.py, leaves once it has seen the tool end)
    wait_until(lambda: not marked_processes(MARK, str(tmp_path)), 60, "every process the run started to end")


@pytest.mark.timeout(300)
def test_first_setup_without_dns_answers_is_one_error_naming_every_host(tmp_path: Path) -> None:
    sets = (*GIT_URLS, f"artifacts.llvm.url=http://llvm-mirror.invalid{URL_PATH}")
    _judge_one_error(_setup_process(tmp_path, sets), tmp_path, ("github.invalid", "llvm-mirror.invalid"))


def _unshare_works() -> str | None:
    try:
        done = subprocess.run(["unshare", "-n", "true"], capture_output=True, text=True, check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare -n cannot run here ({exc})"
    return None if done.returncode == 0 else f"unshare -n is refused here: {done.stderr.strip()}"


@pytest.mark.timeout(300)
def test_first_setup_in_a_network_namespace_without_network_is_one_error(tmp_path: Path) -> None:
    reason = _unshare_works()
    if reason:
        pytest.skip(f"{reason} (needs root or user namespaces)")
    # the bundled recipe's own URLs, on a machine with no network at all (not even loopback)
    process = _setup_process(tmp_path, (), wrap=("unshare", "-n"))
    _judge_one_error(process, tmp_path, ("github.com", "oaitriton.blob.core.windows.net"))
