"""doctor checks of the target Python: its version, the recipe's prerequisites in it, the vendor's packages it
must already have, and an installed copy of what the build installs that is not this workspace's."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlparse

from .facts import final_build_spec, python_facts
from .kit import RUN, DoctorContext, Outcome, check, fail, ok, skip, warn


@check("python.version", "python", "Target Python interpreter", live_only=True, blocks=("python", *RUN))
def python_version(c: DoctorContext) -> Outcome:
    from packaging.specifiers import SpecifierSet

    requires = c.recipe.python.requires
    facts = python_facts(c)
    if facts is None:
        import sys

        version = ".".join(map(str, sys.version_info[:3]))
        where = (f"{c.options.python} does not exist yet; `flagtree-cpu build` creates it with {sys.executable} "
                 f"(Python {version})")
    else:
        version, where = facts["python"], f"{c.options.python}: Python {facts['python']}"
    if requires and not SpecifierSet(requires).contains(version, prereleases=True):
        return fail(f"{where}; the recipe needs Python {requires}",
                    "install a suitable Python and pass --python /path/to/python3.12 (or activate its venv)")
    return ok(where)


def _requirements_outcome(c: DoctorContext, requirements: Iterable, when: str) -> Outcome:
    from ..pythonenv import check as check_prerequisites
    from ..pythonenv import install_commands

    facts = python_facts(c)
    if facts is None:
        return skip(f"{c.options.python} does not exist yet; {when} installs them")
    report = check_prerequisites(c.options.python, list(requirements), os.pathsep.join(
        [str(c.options.python.parent), c.environ.get("PATH", "")]), recipe=c.recipe)
    if not report.missing:
        return ok(", ".join(p.describe() for p in report.prerequisites) or "none needed")
    import shlex

    from ..pip_constraints import constraints_path, pip_limits

    limits = constraints_path(c.workspace) if pip_limits(c.recipe) else None  # its path: doctor writes nothing
    commands = " && ".join(shlex.join(argv) for argv in install_commands(c.options.python, report.missing, limits))
    absent = [p.requirement.requirement if p.finding() == "missing" else p.describe()
              for p in report.missing if not p.wrong_version]
    wrong = [f"{p.requirement.requirement}: {p.finding()}" for p in report.missing if p.wrong_version]
    found = [f"missing: {', '.join(absent)}"] * bool(absent) + [f"wrong version: {', '.join(wrong)}"] * bool(wrong)
    return warn(f"{'; '.join(found)}; {when} installs them", commands)


@check("python.build-prerequisites", "python", "Build prerequisites in the target Python", live_only=True)
def python_build_prerequisites(c: DoctorContext) -> Outcome:
    return _requirements_outcome(c, c.recipe.python.build, "`flagtree-cpu build`")


@check("python.runtime-prerequisites", "python", "Run-time prerequisites (python.runtime)", live_only=True)
def python_runtime_prerequisites(c: DoctorContext) -> Outcome:
    return _requirements_outcome(c, c.recipe.python.runtime, "`flagtree-cpu setup` (or validate --install-prereqs)")


@check("python.installed-elsewhere", "python", "An installed copy of what the build installs", live_only=True)
def python_installed_elsewhere(c: DoctorContext) -> Outcome:
    build = final_build_spec(c)
    if build is None or not build.distribution:
        return skip("the recipe's build names no distribution it installs")
    if build.mode == "wheel-only":
        return skip(f"the build makes a wheel of {build.distribution}; it installs nothing")
    facts = python_facts(c)
    if facts is None:
        return skip(f"{c.options.python} does not exist yet")
    name = build.distribution
    version = facts["found"].get(name)
    if version is None:
        return ok(f"no {name} installed yet")
    direct = json.loads(facts.get("direct_urls", {}).get(name) or "{}")
    installed_from = Path(urlparse(direct.get("url", "")).path or "/nonexistent")
    if direct.get("dir_info", {}).get("editable") and installed_from.is_relative_to(c.workspace.root):
        return ok(f"{name} {version} is this workspace's editable build ({installed_from})")
    return warn(f"{name} {version} from elsewhere is installed in {c.options.python}: the build replaces it (pip "
                "uninstalls it first)", f"{c.options.python} -m pip uninstall -y {name}   # or build into another venv "
                "(--python)")



@check("python.preinstalled", "python", "Packages a vendor's installer provides (python.preinstalled)", live_only=True,
       blocks=RUN)
def python_preinstalled(c: DoctorContext) -> Outcome:
    from ..pythonenv import check as check_prerequisites

    wanted = c.recipe.python.preinstalled
    if not wanted:
        return skip("the recipe lists none")
    if python_facts(c) is None:
        return fail(f"{c.options.python} does not exist; {', '.join(r.requirement for r in wanted)} must be "
                    "installed in it by the vendor's installer", "pass --python with the interpreter the vendor's "
                    "installer set up (a new venv cannot have them)")
    report = check_prerequisites(c.options.python, [], c.environ.get("PATH", ""), recipe=c.recipe)
    if not report.unprovided:
        return ok(", ".join(p.describe() for p in report.preinstalled))
    return fail(f"{', '.join(p.describe() for p in report.unprovided)} in {c.options.python}",
                "install it with the vendor's installer (never pip: the vendor's build is the one that works with "
                "the driver), or pass --python with the interpreter that has it")


@check("python.conflicts", "python", "Distributions that must not be installed (python.conflicts)", live_only=True,
       blocks=RUN)
def python_conflicts(c: DoctorContext) -> Outcome:
    import shlex

    names = c.recipe.python.conflicts
    if not names:
        return skip("the recipe lists none")
    facts = python_facts(c)
    if facts is None:
        return ok(f"{c.options.python} does not exist yet (a new venv has none of {', '.join(names)})")
    found = [(name, facts["found"].get(name)) for name in names]
    present = [(name, version) for name, version in found if version is not None]
    if not present:
        return ok(f"none of {', '.join(names)} installed in {c.options.python}")
    listed = ", ".join(f"{name} {version}" for name, version in present)
    return fail(f"{listed} must not be installed in {c.options.python} (the recipe's python.conflicts: it breaks "
                "what this recipe builds)",
                shlex.join([str(c.options.python), "-m", "pip", "uninstall", *(n for n, _ in present)]))


@check("python.installer", "python", "What installs into the target Python (uv or pip)", live_only=True)
def python_installer(c: DoctorContext) -> Outcome:
    from ..errors import UsageError
    from ..installer import choose

    try:
        chosen = choose(c.options.installer, c.recipe.python.installer, c.environ, c.options.python,
                        c.recipe.file or c.recipe.name)
    except UsageError as error:  # an explicit uv that cannot be used: the python stage and build stop the same way
        return fail(error.message, error.fix or "--installer pip")
    passed = f"; passed over: {'; '.join(chosen.passed_over)}" if chosen.passed_over else ""
    return ok(f"{chosen.why}{passed}")
