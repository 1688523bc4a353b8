"""Half-made folders as killed runs leave them: this version's (``partials.PartialFolder``, with the owner
record of a process that was SIGKILLed) and the names older versions used for a clone or a git-cache mirror."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

_MAKER = ("import sys, time; from pathlib import Path; from flagtree_cpu_build.partials import PartialFolder; "
          "f = PartialFolder.create(Path(sys.argv[1])); f.tree.mkdir(); "
          "(f.tree / 'half-written').write_bytes(b'0' * 100000); print(f.path, flush=True); time.sleep(60)")


def killed_partial(beside: Path) -> Path:
    """The half-made folder a run making ``beside`` left when it was SIGKILLed (its owner record names a process
    that is gone)."""
    maker = subprocess.Popen([sys.executable, "-c", _MAKER, str(beside)], stdout=subprocess.PIPE, text=True)
    assert maker.stdout is not None
    folder = Path(maker.stdout.readline().strip())
    maker.send_signal(signal.SIGKILL)
    maker.wait()
    maker.stdout.close()
    assert (folder / "owner.json").is_file(), folder
    return folder


def old_partial(path: Path) -> Path:
    """A half-made folder under a name an older version gave it (``.X.flagtree-cpu-partial``, ``X.git.partial``):
    no owner record."""
    (path / "objects").mkdir(parents=True)
    (path / "objects" / "half-written").write_bytes(b"0" * 100000)
    return path
