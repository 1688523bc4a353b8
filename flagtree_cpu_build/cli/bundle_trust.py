"""The options that say who a bundle must come from (`bundle verify`, `bundle import`, `setup --bundle`) and
who signs one (`bundle create --sign`), the line that tells the user what was proven, and setup's import of
its --bundle (here, not with `bundle import`, which uses setup's module: no cycle).

Which trusted keys win: ``--trusted-keys FILE``, else ``$FLAGTREE_CPU_TRUSTED_KEYS``, else
``$XDG_CONFIG_HOME/flagtree-cpu/allowed_signers`` when it exists (``bundle.trust``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

if TYPE_CHECKING:
    from ..bundle.trust import Trust
    from ..stagekit.stage import RunOptions, StageContext
    from ..ui import UI


def _sha256(value: Optional[str]) -> Optional[str]:
    """--expect-digest: a sha256 as sha256sum prints it (the file name after it may be pasted too), or
    sha256:HEX; anything else is a usage error before anything runs."""
    import re

    if value is None:
        return None
    words = value.split()
    digest = words[0].lower().removeprefix("sha256:") if words else ""
    if not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise typer.BadParameter(f"{value[:80]!r} is not a sha256 (64 hex digits, as `sha256sum FILE` prints it)")
    return digest


TrustedKeysOption = Annotated[Optional[Path], typer.Option(
    "--trusted-keys", metavar="FILE", help="An OpenSSH allowed-signers file: the bundle must be signed by one of "
    "its keys (an unsigned bundle, or one signed by any other key, is refused with exit 4). Wins over "
    "$FLAGTREE_CPU_TRUSTED_KEYS, which wins over ~/.config/flagtree-cpu/allowed_signers "
    "($XDG_CONFIG_HOME/flagtree-cpu/allowed_signers). None of them: the bundle's checksums are verified, its "
    "origin is not.")]
ExpectDigestOption = Annotated[Optional[str], typer.Option(
    "--expect-digest", metavar="SHA256", callback=_sha256, help="The sha256 of the bundle file (what `sha256sum "
    "FILE` prints where it was made; bundle create prints it too), carried here out of band: any other file is "
    "refused with exit 4.")]
SignOption = Annotated[Optional[Path], typer.Option(
    "--sign", metavar="KEY", help="Sign the bundle with this SSH private key (ssh-keygen -Y sign, namespace "
    "flagtree-cpu-bundle): boards that trust its public key accept it, and refuse any changed copy. Make one with "
    "ssh-keygen -t ed25519 -f KEY.")]


def trust_of(trusted_keys: Optional[Path], expect_digest: Optional[str]) -> Trust:
    """This run's trust policy from the options, the environment and the user's config (UsageError, exit 2, for a
    named file that is missing or not an allowed-signers file)."""
    from ..bundle.trust import Trust
    from ..bundle.trust import trusted_keys as configured

    return Trust(keys=configured(trusted_keys, os.environ), expect_sha256=expect_digest)


def render_authenticity(ui: UI, verdict: dict[str, Any]) -> None:
    """What the bundle's origin was proven to be (``Authenticity.to_json()``); a warning when it was not proven,
    with how to require it."""
    from ..bundle.trust import HOW_TO_TRUST

    if verdict["authenticated"]:
        ui.success(verdict["summary"])
    else:
        ui.warn(f"{verdict['summary']}. To require authenticity, {HOW_TO_TRUST}")


def import_for_setup(ui: UI, stage_ctx: StageContext, bundle: Path, setup_options: RunOptions,
                     trust: Trust, checked: Any = None) -> dict[str, Any]:
    """setup --bundle: the bundle imported (verified, its origin judged, made for this workspace) before the
    first stage; what setup's report says of it."""
    from ..bundle.importer import ImportOptions, import_bundle

    result = import_bundle(stage_ctx, bundle, ImportOptions(python=setup_options.python,
                                                            cache_dir=setup_options.cache_dir, trust=trust),
                           checked)  # verified already when the recipe came out of it (bundle.recipes)
    summary, *members = result.actions
    changed = sum(a.status != "ok" for a in members)
    render_authenticity(ui, summary.data["authenticity"])
    ui.info(f"bundle import: {summary.detail}: " + (f"{changed} of {len(members)} members imported"
                                                    if changed else "everything in it was here already"))
    return {"bundle": summary.data["bundle"], "manifest_digest": summary.data["manifest_digest"],
            "made_for": summary.data["made_for"], "imported": changed, "members": len(members),
            "authenticity": summary.data["authenticity"]}
