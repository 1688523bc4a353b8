"""The first run on a machine without network: a host name without a DNS answer is not retried like a dropped
connection, and the error names the host and the ways forward (issue 28, section 3). An unresolvable `.invalid`
name stands for the missing network: nothing here leaves the machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.fetching import URL_PATH, fetch_process

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
