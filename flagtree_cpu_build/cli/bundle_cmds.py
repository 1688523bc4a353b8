"""`bundle create`: one verified file holding everything a machine without network needs for a recipe (its
sources as git bundles, its artifacts, a wheelhouse for the target, the lock and the recipe files).

The group ``bundle_app`` is added to the top-level app here; `bundle import` and `bundle verify` add themselves
to it from ``bundle_import_cmds``. Both modules are imported (registered) by the package's ``__init__``: an
import from ``app`` or between the two would be a cycle.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..table_layout import LABEL, Column
from .app import BundleWheelhouseOption, CacheDirOption, FlagtreeCommand, MirrorsOption, app, examples, options
from .bundle_trust import SignOption

if TYPE_CHECKING:
    from ..bundle.create import BundleCreated
    from ..ui import UI

bundle_app = typer.Typer(
    help="Air-gapped machines: put a recipe's sources, artifacts and wheels into one verified file, and use it "
    "there.",
    no_args_is_help=True,
    rich_markup_mode="rich",
)
app.add_typer(bundle_app, name="bundle")


@bundle_app.command("create", cls=FlagtreeCommand, epilog=examples(
    "flagtree-cpu bundle create -o flagtree.bundle",
    "flagtree-cpu bundle create --platform manylinux_2_28_aarch64 --target-python 3.12 -o board.bundle",
    "flagtree-cpu bundle create --sysroot board.tar.gz --target-python 3.11 -o board.bundle",
    "flagtree-cpu --recipe flaggems-arm bundle create -o gems.bundle     # the whole stack",
    "flagtree-cpu bundle create --since board.bundle -o board-2.bundle   # only what changed",
    "flagtree-cpu bundle create --sign ~/.ssh/flagtree_bundles -o board.bundle   # boards check who made it",
    "flagtree-cpu bundle create --for-wheelhouse --wheelhouse /srv/wheels --sysroot board.tar.gz --target-python "
    "3.11 -o board.bundle   # a published build, for boards that only install",
))
def bundle_create(
    ctx: typer.Context,
    output: Annotated[Path, typer.Option("--output", "-o", metavar="FILE", help="Where to write the bundle "
                                         "(written to a temporary name, then renamed).")],
    target_python: Annotated[Optional[str], typer.Option("--target-python", metavar="3.X", help="The Python "
                                                         "version of the machine the bundle is for. \\[default: "
                                                         "the workspace interpreter's, for this machine]")] = None,
    platforms: Annotated[Optional[list[str]], typer.Option("--platform", metavar="TAG", help="A wheel platform "
                                                           "tag of the target, e.g. manylinux_2_28_aarch64 (its "
                                                           "arch and glibc pick the recipe's variants; older "
                                                           "manylinux tags are added). Repeatable.")] = None,
    sysroot: Annotated[Optional[Path], typer.Option("--sysroot", metavar="FILE.tar.gz|DIR", help="The target's "
                                                    "`doctor --snapshot`: its arch, OS and glibc pick the "
                                                    "recipe's variants and wheel platforms.")] = None,
    since: Annotated[Optional[Path], typer.Option("--since", metavar="OLD", help="Leave out what the bundle "
                                                  "OLD holds already (it is verified first).")] = None,
    cache_dir: CacheDirOption = None,
    mirrors: MirrorsOption = None,
    sign: SignOption = None,
    for_wheelhouse: Annotated[bool, typer.Option("--for-wheelhouse", help="Carry the published build of the "
                                                 "lock's pins that fits the target (from the wheelhouse), the lock, "
                                                 "the recipe and the run-time wheels, instead of the sources and "
                                                 "artifacts: the board installs it without building.")] = False,
    wheelhouse: BundleWheelhouseOption = None,
) -> None:
    """Write one file with everything `setup --offline` needs on a machine without network.

    The lock is resolved first (pins as `sync` would: the workspace's sources are synced, and every source and
    submodule mirrored into .flagtree-cpu/bundle-create/git); then each mirror becomes a git bundle, each
    artifact is taken from the download cache (downloaded into it when missing) by its digest, and `pip
    download` fills a wheelhouse for the target's platform and Python (a source distribution only where no wheel
    exists). The lock and the recipe files go in too, and the manifest lists every member with its size and
    sha256. A stacked recipe bundles its whole stack. With --sign the manifest is signed (an SSH signature, inside
    the bundle): boards that trust the key refuse every other bundle. The bundle's sha256 is printed at the end:
    a site that carries it to the board can pass it to --expect-digest there.

    With --for-wheelhouse nothing is synced or downloaded but the build: the wheelhouse's build of this workspace's
    lock pins whose target class fits the target (refused, naming the closest entry's differing pin, when there is
    none), verified against its sha256; the board's `bundle import` lays it out as a wheelhouse inside the
    workspace, and `setup --offline` there installs it (install-only).
    """
    from ..bundle.create import CreateOptions, create_bundle
    from ..mirrors import parse_mirrors
    from ..workspace import exclusive_use

    opts = options(ctx)
    if wheelhouse is not None and not for_wheelhouse:
        from ..errors import UsageError

        raise UsageError("bundle create --wheelhouse names where --for-wheelhouse takes the published build from; "
                         "without --for-wheelhouse the bundle carries the sources and artifacts, and no wheelhouse",
                         fix="add --for-wheelhouse, or leave --wheelhouse out")
    create_options = CreateOptions(
        output=_absolute(output), target_python=target_python, platforms=tuple(platforms or ()),
        sysroot=sysroot.expanduser() if sysroot else None, since=_absolute(since) if since else None,
        cache_dir=cache_dir.expanduser() if cache_dir else None, mirrors=tuple(parse_mirrors(mirrors or [])),
        sign=_absolute(sign) if sign else None, for_wheelhouse=for_wheelhouse, wheelhouse=wheelhouse)
    # the workspace is held as every command that changes it holds it (exit 8 when another run has it)
    created = create_bundle(opts.request(), opts.ui, create_options, hold=lambda stage_ctx: exclusive_use(
        stage_ctx.workspace, "bundle create", wait=opts.wait, on_wait=opts.ui.info))
    _render_created(opts.ui, created)


def _absolute(path: Path) -> Path:
    return Path(os.path.abspath(path.expanduser()))


def _render_created(ui: UI, created: BundleCreated) -> None:
    """The size of each part, what --since left out, the file, and what to run with it."""
    import shlex

    from ..bundle.recipes import board_commands
    from ..progress import human_bytes
    from .render import count

    if ui.json_mode:
        ui.emit_json(created.to_json())
        return
    manifest, parts = created.manifest, created.parts()
    incremental = manifest.since is not None
    rows = [[p.kind, str(p.count), human_bytes(p.size)] + ([f"{p.omitted} ({human_bytes(p.omitted_size)})"
                                                             if p.omitted else ""] if incremental else [])
            for p in parts]
    rows.append(["total", str(sum(p.count for p in parts)), human_bytes(created.content_size)]
                + ([f"{created.omitted} ({human_bytes(created.omitted_size)})"] if incremental else []))
    target = manifest.target
    # a line, not the table's title: a title wraps at the width of this narrow table
    ui.info(f"bundle of {' + '.join(manifest.stack)} for {target['arch']}, Python {target['python']}:")
    ui.table([Column("part", LABEL), Column("members", LABEL), Column("size", LABEL)]
             + (["left out (--since)"] if incremental else []), rows)
    for warning in created.warnings:
        ui.warn(warning)
    ui.success(f"bundle: {created.path} ({human_bytes(created.size)}, {count(len(manifest.present()), 'member')} "
               f"in the file; manifest {manifest.digest[:12]}) in {created.seconds:.1f}s")
    ui.info(f"sha256: {created.sha256}  (on the board: --expect-digest {created.sha256})")
    if created.signature is not None:
        ui.info(f"signed by {created.signature.key.describe()}: boards whose trusted keys hold it accept the "
                "bundle (--trusted-keys FILE; see the README: Who made a bundle)")
    else:
        ui.info("not signed: boards that require trusted keys refuse it (bundle create --sign KEY signs it)")
    first = f" (after importing {shlex.quote(created.since.name)} there)" if created.since else ""
    ui.info(f"on the machine without network{first}: {board_commands(manifest, created.path.name)}")
