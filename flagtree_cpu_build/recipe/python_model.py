"""The recipe's ``python:`` section: the target interpreter, the packages installed into it, the limits every pip
run of the recipe obeys, the vendor's packages it only checks, and the distributions it removes.

An entry of ``build``/``runtime`` is one requirement, or a project's own requirements file
(``{requirements_file: {source, file}}``) read from a synced source when the python stage runs
(``requirements_files``): the recipe does not copy what the project keeps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .checks import (
    check_distribution_names,
    check_download_url,
    check_file_in_source,
    check_requirement,
    check_source_ref,
    check_specifier,
)
from .schema import Context, Path_, spec


@dataclass(frozen=True, kw_only=True)
class RequirementsFile:
    """A requirements file in a source (FlagTree's python/requirements.txt): only requirement lines, and `-r` of
    another file of the same source; read after sync, recorded in the lock."""

    source: str = spec("the source that holds it", checks=check_source_ref)
    file: str = spec("its path inside the source", checks=check_file_in_source)


@dataclass(frozen=True, kw_only=True)
class Requirement:
    """A Python package requirement, as pip takes it; or a requirements file of a source."""

    SHORTHAND = "requirement"  # a bare string means {requirement: <string>}

    requirement: str = spec("PEP 508 requirement, e.g. ninja>=1.11.1", default="", checks=check_requirement)
    requirements_file: RequirementsFile | None = spec(
        "instead of `requirement`: every requirement a source's file lists (read after sync; -e, URLs and pip "
        "options are refused)", default=None)
    source: str | None = spec(
        "instead of `requirement`: pip installs this recipe source's checkout (a test dependency pinned by a git "
        "tag), at the source's commit, once per commit; built with the target Python's own build tools (list "
        "setuptools before it), so --offline works", default=None, checks=check_source_ref)
    subdir: str | None = spec("with `source`: the folder of the checkout holding its setup.py or pyproject.toml",
                              default=None, checks=check_file_in_source)
    index_url: str | None = spec("package index to install from", default=None,
                                 checks=check_download_url)
    system_command: str | None = spec(
        "skip the pip install when this command is on PATH and its version satisfies the "
        "requirement", default=None)

    def check(self, ctx: Context, path: Path_) -> None:
        given = sum((bool(self.requirement), self.requirements_file is not None, self.source is not None))
        if given != 1:
            ctx.report(path, "an entry is either a `requirement`, a `requirements_file` or a `source`, and this one "
                       "has " + ("several" if given else "none"),
                       "e.g. `- ninja>=1.11.1`, `- {requirements_file: {source: NAME, file: "
                       "python/requirements.txt}}` or `- {source: NAME, subdir: python}`")
        if self.subdir is not None and self.source is None:
            ctx.report(path + ("subdir",), "subdir goes with source: it names a folder of that source's checkout",
                       "add `source: NAME`, or remove subdir")
        if self.source is not None and (self.system_command or self.index_url):
            ctx.report(path + ("system_command" if self.system_command else "index_url",), "a source entry is "
                       "installed from its checkout: it has no command to look for nor an index",
                       "remove the key from this entry")
        elif self.requirements_file is not None and self.system_command:
            ctx.report(path + ("system_command",), "system_command names one requirement's command, and a "
                       "requirements_file has many", "give that requirement its own entry")


@dataclass(frozen=True, kw_only=True)
class Constraint:
    """A version limit pip must respect whatever asks for the package (pip's `-c`); it installs nothing."""

    SHORTHAND = "requirement"  # a bare string means {requirement: <string>}

    requirement: str = spec("PEP 508 requirement, e.g. numpy==1.26.4", checks=check_requirement)
    why: str = spec("who needs the limit (named when a requirement conflicts with it)", default="")


@dataclass(frozen=True, kw_only=True)
class PythonSpec:
    """The target Python interpreter and packages."""

    requires: str | None = spec("interpreter version range", default=None, checks=check_specifier)
    build: tuple[Requirement, ...] = spec("needed by the build (installed before it)", default=())
    runtime: tuple[Requirement, ...] = spec("needed to run and validate the result", default=())
    constraints: tuple[Constraint, ...] = spec(
        "version limits for every pip run of this recipe (prerequisites and the build); in a stack they also "
        "bind the base", default=())
    preinstalled: tuple[Requirement, ...] = spec(
        "packages provided by other means (a vendor torch): checked before the build, never installed with pip",
        default=())
    uninstall: tuple[str, ...] = spec(
        "distributions removed from the target Python after the prerequisites are installed (a vendor torch pulls "
        "in a triton that would shadow the one this recipe builds): `pip uninstall -y` of those installed, none "
        "installed from this workspace (the build's own); no network, so --offline too", default=(),
        checks=check_distribution_names)
    installer: Literal["auto", "uv", "pip"] | None = spec(
        "what installs into the target Python: `uv` (`uv pip install --python`; stops when no usable uv is found), "
        "`pip`, or `auto` (uv when a `uv` of 0.5.0 or newer is on PATH or in flagtree-cpu's own venv and no pip "
        "setting uv ignores is in force, else pip); `--installer` and $FLAGTREE_CPU_INSTALLER win over it; "
        "unset: auto", default=None)
    conflicts: tuple[str, ...] = spec(
        "distributions that must NOT be installed in the target Python (intel_extension_for_pytorch beside an XPU "
        "triton): doctor fails and build stops before it runs, naming the `pip uninstall` that removes them; the "
        "tool never removes them itself (python.uninstall does that)", default=(), checks=check_distribution_names)
    # filled in for a workspace (requirements_files.with_requirements_files): every requirements_file entry with
    # its key (python.build[2]), and the keys of those whose source is not checked out yet
    files: tuple[tuple[str, Requirement], ...] = spec("requirements_file entries", default=(), internal=True)
    unread: tuple[str, ...] = spec("requirements_file entries read after sync", default=(), internal=True)
    # filled in for a workspace (python_sources.with_source_entries): the `source` entries, by key, taken out of
    # build/runtime (what reads those lists names distributions; these install a folder)
    from_sources: tuple[tuple[str, Requirement], ...] = spec("source entries", default=(), internal=True)

    def check(self, ctx: Context, path: Path_) -> None:
        from packaging.utils import canonicalize_name

        for i, entry in enumerate(self.preinstalled):
            if entry.requirements_file is not None or entry.source is not None:
                ctx.report(path + ("preinstalled", i), "a preinstalled package is one requirement, not a file",
                           "write the vendor's package as `requirement: NAME==VERSION`")
        kept = {canonicalize_name(_name_of(r.requirement)): f"python.{key}[{i}]"
                for key in ("build", "runtime", "preinstalled") for i, r in enumerate(getattr(self, key))
                if _name_of(r.requirement)}
        for i, name in enumerate(self.uninstall):
            where = kept.get(canonicalize_name(name))
            if where is not None:
                ctx.report(path + ("uninstall", i), f"{name} is also a prerequisite ({where}): it would be "
                           "installed and then removed on every run", f"remove {name} from python.uninstall or "
                           f"from {where}")
        removed = {canonicalize_name(n) for n in self.uninstall}
        for i, name in enumerate(self.conflicts):
            where = kept.get(canonicalize_name(name))
            if where is not None:
                ctx.report(path + ("conflicts", i), f"{name} is also a prerequisite ({where}): it would be "
                           "installed and then refused on every run", f"remove {name} from python.conflicts or "
                           f"from {where}")
            elif canonicalize_name(name) in removed:
                ctx.report(path + ("conflicts", i), f"{name} is also in python.uninstall, which removes it: a "
                           "conflict is refused, never removed", f"keep {name} in only one of the two lists")


def _name_of(requirement: str) -> str:
    """A requirement's distribution name ("" when there is none or it does not parse: its own check says so)."""
    from packaging.requirements import InvalidRequirement
    from packaging.requirements import Requirement as PipRequirement

    try:
        return PipRequirement(requirement).name if requirement else ""
    except InvalidRequirement:
        return ""
