"""partials.owner_gone: a half-made folder's owner counts as gone only on proof — the same machine, and a
later boot, or its pid not running, or running another process since (pid reuse). Anything uncertain
(another machine, another container, a record that is not ours) keeps the folder."""

from __future__ import annotations

import os

import pytest

from flagtree_cpu_build.partials import identity, owner_gone


def me(**changes: object) -> dict[str, object]:
    return {**identity(), **changes}


def unused_pid() -> int:
    pid = 4_000_000  # above the default pid_max: never a running process
    while os.path.exists(f"/proc/{pid}"):
        pid += 1
    return pid


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs /proc (Linux)")
@pytest.mark.parametrize("record, gone", [
    (me(), False),  # this very process: running
    (me(start=1), True),  # our pid with another start time: the pid was reused, its owner is gone
    (me(pid=unused_pid()), True),  # no such process
    (me(boot_id="00000000-0000-0000-0000-000000000000", start=None), True),  # written before a reboot
    (me(host="another-machine", pid=unused_pid()), False),  # a shared home folder: not ours to judge
    (me(pid_ns="pid:[1]", pid=unused_pid()), False),  # another container's pids
    (me(tool="something-else", pid=unused_pid()), False),  # not our record
    ({"pid": 123}, False),
    ("not a record", False),
])
def test_an_owner_counts_as_gone_only_on_proof(record: object, gone: bool) -> None:
    assert owner_gone(record) is gone
