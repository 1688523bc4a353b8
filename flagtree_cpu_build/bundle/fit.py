"""Is a bundle made for this workspace? Its recipe, stack and variant, its architecture, its Python.

A bundle holds wheels for one platform and Python, and pins for one recipe (with its base recipes)
and variant: imported into another workspace it would seed caches nothing there uses, or wheels pip
would refuse only later, on a machine with no way to fetch the right ones. So the check comes first,
after the verification and before anything is written, and names both sides.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..invocation import elsewhere
from ..stagekit.stage import StageContext
from .errors import BundleMismatch
from .manifest import Manifest


def stack_of(ctx: StageContext) -> list[StageContext]:
    """The contexts of a stacked recipe, its bottom base first and ``ctx`` last (one for a plain recipe)."""
    chain = []
    current: StageContext | None = ctx
    while current is not None:
        chain.insert(0, current)
        current = current.base
    return chain


def python_version(python: Path) -> tuple[str, str]:
    """major.minor of the target interpreter, or of the one its venv would be made with (this Python); and
    which interpreter that is, for messages."""
    if python.exists():
        from ..pythonenv import query

        version = ".".join(query(python, [])[0].split(".")[:2])
        return version, f"the target interpreter {python} is Python {version}"
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    return version, f"the workspace venv would be made with Python {version} ({sys.executable})"


def differences(manifest: Manifest, ctx: StageContext, python: tuple[str, str]) -> list[str]:
    """What the bundle was made for that this workspace is not, one line each (empty: it fits); ``python``
    is ``python_version`` of the target interpreter."""
    recipe, host = ctx.recipe, ctx.host
    found = []
    stack = tuple(c.recipe.name for c in stack_of(ctx))
    if manifest.recipe != recipe.name or tuple(manifest.stack) != stack:
        found.append(f"recipe: the bundle's is {' on '.join(reversed(manifest.stack))}, this workspace's "
                     f"{' on '.join(reversed(stack))}")
    if manifest.variant != recipe.variant:
        found.append(f"variant: the bundle's is {manifest.variant or '(the default)'}, this workspace's "
                     f"{recipe.variant or '(the default)'}")
    arch = manifest.target.get("arch")
    # a cross recipe's bundle may name the target's architecture; the wheels are the build host's all the same
    if arch and arch not in (host.arch, recipe.target_arch(host.arch)):
        found.append(f"architecture: the bundle is for {arch}, this machine is {host.arch}")
    wanted = manifest.target.get("python")
    if wanted and ".".join(str(wanted).split(".")[:2]) != python[0]:
        found.append(f"Python: the bundle's wheels are for Python {wanted}; {python[1]}")
    glibc = manifest.target.get("glibc")
    if glibc and host.glibc and _older(host.glibc, str(glibc)):
        found.append(f"C library: the bundle's wheels need glibc {glibc}, this machine has {host.glibc}")
    return found


def check_made_for(manifest: Manifest, ctx: StageContext, python: Path, path: Path) -> None:
    """BundleMismatch (exit 2), naming what the bundle is for and what differs, unless it fits."""
    version = python_version(python)
    found = differences(manifest, ctx, version)
    if not found:
        return
    same = f"--recipe {manifest.recipe}" + (f" --variant {manifest.variant}" if manifest.variant else "")
    # the connected machine's command gets this workspace's recipe and variant, not its paths (invocation.py)
    make = elsewhere("bundle", "create", "--sysroot", "board.tar.gz", "--target-python", version[0], "-o", "FILE")
    raise BundleMismatch(
        f"{path} was made for {manifest.made_for()}; it does not fit this workspace, so nothing was imported",
        details=tuple(found),
        fix=f"import it where it fits ({same}, a Python {manifest.target.get('python') or ''} interpreter with "
        f"--python); or describe this machine (flagtree-cpu doctor --snapshot board.tar.gz), and on a connected "
        f"machine make a bundle for it: {make}")


def _older(have: str, need: str) -> bool:
    def parts(version: str) -> tuple[int, ...]:
        return tuple(int(p) for p in version.split(".") if p.isdigit())

    return parts(have) < parts(need)
