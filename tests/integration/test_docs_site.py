"""The documentation site builds in strict mode: a broken link or anchor, a page missing from the nav, or a
warning of any kind fails the build (mkdocs.yml: strict, validation). CI builds it too (`make docs`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="the [docs] extra (part of [dev]) is not installed")
    pytest.importorskip("pymdownx", reason="the [docs] extra (part of [dev]) is not installed")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    index = (tmp_path / "site" / "index.html").read_text()
    assert 'class="mermaid"' in index  # the diagrams are drawn, not shown as code
    assert (tmp_path / "site" / "reference" / "commands" / "index.html").is_file()


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="the [docs] extra (part of [dev]) is not installed")
    pytest.importorskip("pymdownx", reason="the [docs] extra (part of [dev]) is not installed")
    copy = tmp_path / "repo"
    copy.mkdir()
    (copy / "mkdocs.yml").write_text((REPO_ROOT / "mkdocs.yml").read_text())
    subprocess.run(["cp", "-a", str(REPO_ROOT / "docs"), str(copy / "docs")], check=True)
    page = copy / "docs" / "guides" / "troubleshooting.md"
    page.write_text(page.read_text() + "\nSee [nowhere](setup.md#no-such-section).\n")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--site-dir", str(tmp_path / "site")],
                          cwd=copy, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "no-such-section" in done.stderr
