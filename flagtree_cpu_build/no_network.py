"""One error for a run that found no network: every host name that got no DNS answer, and the ways forward.

On a machine without network setup's first run fails twice at once: the clones (git: "Could not resolve host")
and the download running beside them. Two error blocks, each with its own advice, hide the one cause; this makes
one error naming every host and the fixes that fit a machine without network (a mirror, a bundle, `--offline`).
Neither failure is retried (``gitcmd.git_result``, ``download``): asking DNS again changes nothing.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

from .errors import FlagtreeCpuError

NO_NETWORK_FIX = (
    "on a machine without network, make a bundle where there is network (flagtree-cpu bundle create there) and "
    "bring it here: flagtree-cpu setup --bundle FILE (flagtree-cpu bundle import FILE, then flagtree-cpu setup "
    "--offline once everything is here); behind a mirror: flagtree-cpu setup --mirror PREFIX=REPLACEMENT (or "
    "FLAGTREE_CPU_MIRRORS) for the downloads, git config --global url.<mirror-url>.insteadOf <url-prefix> for the "
    "git sources; otherwise check the network and the URLs (flagtree-cpu recipe show)")


def one_error(failed: Sequence[tuple[str, FlagtreeCpuError]]) -> FlagtreeCpuError | None:
    """``failed``: (stage, error) in setup's order. One error naming every unresolved host when each stage failed
    for want of a DNS answer; None otherwise (different causes stay different errors).

    It is the first stage's error class, so its exit code: the code setup gives when that stage fails, as it
    would running alone (sources before artifacts), whichever of the two threads failed first."""
    if len(failed) < 2 or not all(error.unresolved_hosts for _, error in failed):
        return None
    hosts = list(dict.fromkeys(host for _, error in failed for host in error.unresolved_hosts))
    named = ", ".join(f"{host} ({', '.join(s for s, e in failed if host in e.unresolved_hosts)})" for host in hosts)
    merged = copy.copy(failed[0][1])  # the same class: its exit code and kind
    merged.message = (f"no DNS answer for {named}: this machine has no network, or the names are wrong; "
                      "nothing was retried")
    merged.args = (merged.message,)
    merged.details = tuple(line for stage, error in failed for line in (f"{stage}: {error.message}", *error.details))
    merged.fix = NO_NETWORK_FIX
    merged.unresolved_hosts = tuple(hosts)
    return merged
