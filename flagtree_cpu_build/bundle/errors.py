"""What can be wrong with a bundle, each with its exit code (the table is ``errors.ExitCode``).

The ``kind`` (the --json error code) is the parent's: "artifact" or "usage", codes the envelope
schema already lists.

A damaged bundle (bytes changed, truncated, hostile) is an artifact failure (4): nothing is imported
from it. A sound bundle made for another recipe, variant, machine or Python is a usage error (2): the
user picked the wrong file or the wrong options. An incremental bundle whose left-out members this
machine does not have is incomplete (4): the bundle it was made ``--since`` must be imported first.
"""

from __future__ import annotations

from ..errors import ArtifactError, UsageError

# the advice for every damaged bundle: its bytes are not what its maker wrote
REMAKE_FIX = "make the bundle again, or copy it again (the copy may have been cut short or changed on the way)"


class BundleDamaged(ArtifactError):
    """The bundle's bytes are not what its manifest says (or not a bundle at all); nothing of it is used."""

    def __init__(self, message: str, *, fix: str | None = REMAKE_FIX, details: tuple[str, ...] = ()):
        super().__init__(message, fix=fix, details=details)


class BundleMismatch(UsageError):
    """A sound bundle made for another recipe, variant, architecture or Python than this workspace's."""


class BundleIncomplete(ArtifactError):
    """An incremental bundle whose left-out members are not in this machine's caches."""


class BundleUntrusted(ArtifactError):
    """A sound bundle whose origin is not what this machine requires: unsigned or signed by a key it does not
    trust while trusted keys are configured, a signature that does not match the manifest, or a file whose sha256
    is not the one expected (``--expect-digest``). Nothing of it is used."""
