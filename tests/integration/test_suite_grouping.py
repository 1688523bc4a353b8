"""`make test` runs the suite on four pytest-xdist workers under ``--dist loadgroup`` and relies on one thing
from it: the tests of a module that shares a module-scoped world (a published wheelhouse, bundles, one whole
setup) run on one worker, so that world is built once, not once per worker.

pytest-xdist 3.8 writes its group suffix where pytest 9.2 no longer reads it, and the grouping silently did
nothing; our hook (``tests/support/xdistgroups.py``) writes it itself. This test runs a real two-worker session
of a small throwaway suite with that hook alone and counts how often each world was built.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

SUITE = '''
import json, os
import pytest

LOG = os.environ["GROUPING_LOG"]


def record(**fields):
    with open(LOG, "a") as log:
        log.write(json.dumps({"worker": os.environ.get("PYTEST_XDIST_WORKER", "main"), **fields}) + "\\n")


@pytest.fixture(scope="module")
def world():
    record(event="built", module=__name__)
    return __name__


@pytest.mark.parametrize("n", range(8))
def test_uses_the_world(world, n):
    record(event="test", module=world)
'''

MARKED = '''
import json, os
import pytest

pytestmark = pytest.mark.xdist_group("marked")


@pytest.mark.parametrize("n", range(8))
def test_marked(n):
    with open(os.environ["GROUPING_LOG"], "a") as log:
        log.write(json.dumps({"worker": os.environ["PYTEST_XDIST_WORKER"], "event": "test", "module": "marked"})
                  + "\\n")
'''


@pytest.mark.timeout(180)
def test_each_shared_world_is_built_once_and_its_tests_share_one_worker(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    for name in ("test_first_world", "test_second_world"):
        (suite / f"{name}.py").write_text(SUITE)
    (suite / "test_marked.py").write_text(MARKED)
    (suite / "pytest.ini").write_text("[pytest]\n")  # its own rootdir: not our pyproject, not our conftest
    log = tmp_path / "log.jsonl"
    env = {**os.environ, "GROUPING_LOG": str(log), "PYTHONPATH": str(REPO_ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    # its own --basetemp: a session under the default one would prune the older numbered folders there,
    # this suite's own among them
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--basetemp", str(tmp_path / "basetemp"),
                           "-p", "tests.support.xdistgroups", "-n", "2", "--dist", "loadgroup", str(suite)],
                          cwd=suite, env=env, capture_output=True, text=True, timeout=170, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "24 passed" in done.stdout, done.stdout
    records = [json.loads(line) for line in log.read_text().splitlines()]
    builds = [r["module"] for r in records if r["event"] == "built"]
    assert sorted(builds) == ["test_first_world", "test_second_world"], records
    for module in ("test_first_world", "test_second_world", "marked"):
        workers = {r["worker"] for r in records if r["event"] == "test" and r["module"] == module}
        assert len(workers) == 1 and workers != {"main"}, (module, records)
