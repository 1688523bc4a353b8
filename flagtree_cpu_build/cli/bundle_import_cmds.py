"""`bundle import` and `bundle verify`: using a bundle on the machine without network.

Registered on ``bundle_app`` (``bundle_cmds``), which imports this module once the group exists.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..table_layout import LABEL, PATH, Column
from .app import CacheDirOption, FlagtreeCommand, PythonOption, examples, options
from .bundle_cmds import bundle_app
from .bundle_trust import ExpectDigestOption, TrustedKeysOption, render_authenticity, trust_of

if TYPE_CHECKING:
    from ..bundle import Manifest
    from ..bundle.trust import Authenticity
    from ..stagekit.stage import StageResult
    from ..ui import UI

BundleArgument = Annotated[Path, typer.Argument(metavar="FILE", help="The bundle `bundle create -o FILE` wrote.")]
UpdateLockOption = Annotated[bool, typer.Option("--update-lock", help="Replace a lock in the workspace that "
                                                "disagrees with the bundle's (the checkouts move at the next "
                                                "sync).")]


@bundle_app.command("import", cls=FlagtreeCommand, epilog=examples(
    "flagtree-cpu bundle import /media/usb/board.bundle && flagtree-cpu setup --offline",
    "flagtree-cpu --recipe flaggems-arm bundle import gems.bundle   # the whole stack",
    "flagtree-cpu bundle import board.bundle --cache-dir /data/flagtree-cache",
    "flagtree-cpu bundle import board.bundle --trusted-keys /etc/flagtree-cpu/allowed_signers",
))
def bundle_import(
    ctx: typer.Context,
    bundle: BundleArgument,
    python: PythonOption = None,
    cache_dir: CacheDirOption = None,
    update_lock: UpdateLockOption = False,
    trusted_keys: TrustedKeysOption = None,
    expect_digest: ExpectDigestOption = None,
) -> None:
    """Verify a bundle, then seed this workspace and machine with it, so every stage works with --offline.

    Nothing is imported unless the whole file verifies, its origin is what the trust policy requires (a signature
    by a trusted key, the expected sha256; see --trusted-keys), and it was made for this workspace's recipe,
    variant, architecture and Python. Then the git sources become bare mirrors in
    <workdir>/.flagtree-cpu/bundle/git (sync's git cache from then on, without --git-cache), the artifacts go into
    the download cache, the wheels into <workdir>/.flagtree-cpu/wheelhouse (pip's only source with --offline), and
    the lock where the recipe keeps it. A `bundle create --for-wheelhouse` bundle carries published builds instead:
    they are laid out as a wheelhouse in <workdir>/.flagtree-cpu/fleet-wheelhouse, which the workspace then asks
    (after --wheelhouse and $FLAGTREE_CPU_WHEELHOUSE, before the recipe's build.wheelhouse), so `setup --offline`
    installs the build without syncing, fetching or building.
    Importing the same bundle again changes nothing.
    """
    from ..bundle.importer import ImportOptions, import_bundle, verified
    from ..bundle.recipes import with_carried_recipe
    from ..context import chosen_python, open_context
    from .opening import absolute, exclusive

    trust = trust_of(trusted_keys, expect_digest)
    opts, path = options(ctx), absolute(bundle) or bundle
    # a workspace that records no recipe takes the bundle's: a recipe file the board lacks comes out of the bundle
    carried = with_carried_recipe(opts.request(python=python), path, opts.ui, trust, verified)
    with carried.undone_on_failure():  # a refused import leaves no recipe file (nor a workspace made for it)
        stage_ctx = open_context(carried.request, opts.ui)
        import_options = ImportOptions(python=chosen_python(carried.request, stage_ctx.workspace),
                                       cache_dir=cache_dir.expanduser() if cache_dir else None,
                                       update_lock=update_lock, trust=trust)
        with exclusive(opts, stage_ctx, "bundle import"):
            result = import_bundle(stage_ctx, path, import_options, carried.checked)
    render_import(opts.ui, result)


def render_import(ui: UI, result: StageResult) -> None:
    if ui.json_mode:
        ui.emit_json(result.to_json())
        return
    summary, *items = result.actions
    ui.table([Column("member", PATH), Column("status", LABEL), "detail"],
             [[a.subject, ui.styled(a.status), a.detail] for a in items],
             title=f"bundle import: {summary.detail}")
    for warning in result.warnings:
        ui.warn(warning)
    render_authenticity(ui, summary.data["authenticity"])
    for what, key in (("git mirrors", "git_cache"), ("download cache", "download_cache"),
                      ("wheelhouse", "wheelhouse"), ("published builds (install-only)", "fleet_wheelhouse")):
        if key in summary.data:
            ui.info(f"{what}: {summary.data[key]}")
    if all(a.status == "ok" for a in items):
        ui.success(f"nothing to import: everything in {Path(summary.data['bundle']).name} is here already")
    else:
        changed = sum(a.status != "ok" for a in items)
        ui.success(f"imported {changed} of {len(items)} members in {result.seconds:.1f}s")
    if "fleet_wheelhouse" in summary.data:  # a for-wheelhouse bundle: no sources or artifacts to set up from
        ui.info("next: flagtree-cpu setup --offline   (installs the published build: no sync, no fetch, no build)")
    else:
        ui.info("next: flagtree-cpu setup --offline   (sync, fetch, python and build --offline work too)")


@bundle_app.command("verify", cls=FlagtreeCommand, epilog=examples(
    "flagtree-cpu bundle verify /media/usb/board.bundle",
    "flagtree-cpu bundle verify board.bundle --json   # the manifest, integrity and authenticity",
    "flagtree-cpu bundle verify board.bundle --trusted-keys allowed_signers",
    "flagtree-cpu bundle verify board.bundle --expect-digest SHA256   # the sha256 bundle create printed",
))
def bundle_verify(ctx: typer.Context, bundle: BundleArgument, trusted_keys: TrustedKeysOption = None,
                  expect_digest: ExpectDigestOption = None) -> None:
    """Check every member of a bundle against its manifest (integrity), and its origin against the trust policy
    (authenticity).

    Reads the whole file once (and its locks again) and writes nothing. A bundle whose git members do not carry
    every commit its locks pin is refused (exit 4) naming the pin. A changed byte, a cut-short copy, a member
    missing, extra or twice, or a name that would leave its folder is refused (exit 4) naming the member. With
    trusted keys (--trusted-keys, $FLAGTREE_CPU_TRUSTED_KEYS, ~/.config/flagtree-cpu/allowed_signers) a bundle not
    signed by one of them is refused (exit 4) naming the key that signed it; with --expect-digest, any other file.
    Without either, only integrity is proven, and the output says so.
    """
    from ..bundle.importer import verified
    from ..bundle.pins import verify_pins
    from .opening import absolute

    trust = trust_of(trusted_keys, expect_digest)
    opts = options(ctx)
    path = absolute(bundle) or bundle
    manifest, authenticity = verified(path, opts.ui, trust)
    verify_pins(path, manifest)  # a board could sync from it: its git members carry every commit its locks pin
    render_verified(opts.ui, path, manifest, authenticity)


def render_verified(ui: UI, path: Path, manifest: Manifest, authenticity: Authenticity) -> None:
    from ..progress import human_bytes

    if ui.json_mode:
        ui.emit_json({"bundle": str(path), "size": path.stat().st_size, "manifest": manifest.to_json(),
                      "integrity": {"ok": True, "manifest_digest": manifest.digest,
                                    "checked": "every member's size and sha256 against the manifest, and the "
                                    "manifest against its digest"},
                      "authenticity": authenticity.to_json()})
        return
    kinds: dict[str, list[int]] = {}
    for m in manifest.members:
        count_size = kinds.setdefault(m.kind, [0, 0, 0])
        count_size[0 if not m.carried_by_since else 2] += 1
        count_size[1] += 0 if m.carried_by_since else m.size
    ui.table([Column("part", LABEL), Column("members", LABEL), Column("size", LABEL), "left out (--since)"],
             [[kind, str(c), human_bytes(s), str(o) if o else ""] for kind, (c, s, o) in kinds.items()],
             title=f"{path.name}: {manifest.made_for()}")
    ui.info(f"made on {manifest.host.get('hostname', '?')} ({manifest.host.get('arch', '?')}) at {manifest.created} "
            f"by flagtree-cpu {manifest.tool_version}")
    if manifest.since:
        ui.info(f"incremental: made --since the bundle whose manifest is {manifest.since[:12]} (import that first)")
    ui.success(f"integrity: every member of {path.name} matches the manifest {manifest.digest[:12]}")
    render_authenticity(ui, authenticity.to_json())
