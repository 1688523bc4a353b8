"""Real distccd helpers on 127.0.0.1 for the compile farm's tests and bench.

Each daemon runs ``--daemon --no-detach`` in a session of its own (so a test can SIGKILL it with every child it
forked: a helper that dies mid-build), allows only 127.0.0.1, and logs at level info to its output, which a thread
reads whole: ``compiled()`` counts the units it was sent (``compile from unitN.cpp``). The port comes from
``start_on_free_port`` (distccd cannot be handed a bound socket), trusted once distccd says it listens.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

from tests.support.ports import start_on_free_port


def missing_parts() -> str | None:
    for program in ("distccd", "distcc", "ccache", "g++"):
        if shutil.which(program) is None:
            return f"{program} is not installed (apt-get install distcc ccache g++)"
    return None


class Distccd:
    def __init__(self, jobs: int = 2) -> None:
        def start(port: int) -> subprocess.Popen[bytes]:
            argv = ["distccd", "--daemon", "--no-detach", "--allow", "127.0.0.1", "--listen", "127.0.0.1",
                    "--port", str(port), "--jobs", str(jobs), "--log-stderr", "--log-level", "info"]
            if os.geteuid() == 0:  # distccd will not compile as root; it would pick a user itself otherwise
                argv += ["--user", "nobody"]
            return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)

        self.process, self.port, self.output = start_on_free_port(start, b"listening on", what="distccd", keep=None)
        self.jobs = jobs

    @property
    def spec(self) -> str:
        return f"127.0.0.1:{self.port}/{self.jobs}"

    def compiled(self) -> list[str]:
        """The files a build sent it to compile, in order (not the tool's probe units)."""
        return [f for f in self.sent() if not f.startswith("flagtree_cpu_farm_probe")]

    def sent(self) -> list[str]:
        """Every file it was sent to compile, the probes' too."""
        return re.findall(r"compile from (\S+) to ", self.output.text())

    def kill(self) -> None:
        """SIGKILL the daemon and every child it forked (a compile in flight dies with it)."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait(timeout=30)

    def stop(self) -> None:
        self.kill()


def alive_in_group(pgid: int) -> list[int]:
    """The processes still in ``pgid`` (a killed daemon must leave none)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.append(int(entry.name))
    return found
