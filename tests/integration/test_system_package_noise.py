"""setup's system-package warning names only what the stages about to run need (issue 28 §5): a
`--skip-build` run does not ask for the build's compilers and libraries; a full run still does."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import new_workspace
from tests.support.gitworld import GitWorld
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import TOP, llvm_tarball

BUILD_ONLY = "flagtree-cpu-test-build-only-lib"  # no dpkg has it: always missing
APT = f"system_packages.apt=[git, {BUILD_ONLY}]"


@pytest.fixture
def ws(world: GitWorld, tmp_path: Path, http_server: LoopbackHTTPServer):
    if not Path("/var/lib/dpkg/status").is_file():
        pytest.skip("system packages are read from dpkg's status file; this machine has none")
    url = http_server.serve(f"/public/llvm-builds/{TOP}.tar.gz", llvm_tarball().data)
    return new_workspace(world, tmp_path / "ws", always_set=(f"artifacts.llvm.url={url}", APT))


def test_a_skip_build_setup_names_no_package_only_the_build_needs(ws) -> None:
    result = ws.run("setup", "--skip-build", "--ignore-host")
    assert result.exit_code == 0, result.stderr
    assert BUILD_ONLY not in result.stderr
    assert "system packages" not in " ".join(result.stderr.split()), result.stderr


def test_a_full_setup_still_names_the_builds_missing_package(ws) -> None:
    result = ws.run("setup", "--ignore-host", "--skip-validate")
    text = " ".join(result.stderr.split())
    assert f"of the recipe's system packages are missing: {BUILD_ONLY}" in text, result.stderr
    assert "--install-system-packages" in text
