"""The JSON output reference (docs/reference/json-output.md) names the keys the tool really prints.

Issue 28 found the `validate --list` keys documented wrong; this pins that row to the tool's own output, so the
next change to either side has to change both."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from flagtree_cpu_build.cli import app
from tests.conftest import REPO_ROOT

REFERENCE = REPO_ROOT / "docs" / "reference" / "json-output.md"


def _documented_validate_list() -> tuple[set[str], set[str], set[str]]:
    row = next(line for line in REFERENCE.read_text().splitlines() if line.startswith("| `validate` |"))
    listed = row.split("`validate --list`:", 1)[1]
    top = set(re.findall(r"`(\w+)`", re.sub(r"\([^)]*\)", "", listed)))
    checks = set(re.findall(r"`(\w+)`", listed.split("`checks` (", 1)[1].split(")", 1)[0]))
    presets = set(re.findall(r"`(\w+)`", listed.split("`presets` (", 1)[1].split(")", 1)[0]))
    return top, checks, presets


def test_the_validate_list_keys_are_the_ones_the_reference_names(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["-w", str(tmp_path / "ws"), "validate", "--list", "--json"])
    assert result.exit_code == 0, result.stderr
    listing = json.loads(result.stdout)["result"]
    top, checks, presets = _documented_validate_list()
    assert set(listing) == top
    assert {key for check in listing["checks"] for key in check} == checks
    assert {key for preset in listing["presets"] for key in preset} == presets
