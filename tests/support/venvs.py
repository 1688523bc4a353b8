"""Fresh virtual environments for install tests, without the network.

A test that installs our wheel into a new venv must not download its dependencies
(tests stay on loopback). ``provision_dependencies`` links the already-installed
distributions the project needs (and theirs, recursively) from the running venv into
a folder, which a ``.pth`` file then adds to the fresh venv — so ``pip install
--no-index our.whl`` finds every dependency satisfied, and only our wheel is new.
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import importlib.metadata as md
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path

from packaging.requirements import Requirement

from tests.support.httpserver import LoopbackHTTPServer


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _distribution(name: str, where: Path | None) -> md.Distribution:
    """An installed distribution: of the running venv, or of the site folder ``where``."""
    if where is None:
        return md.distribution(name)
    for dist in md.distributions(path=[str(where)]):
        if _canonical(dist.metadata["Name"]) == _canonical(name):
            return dist
    raise md.PackageNotFoundError(f"{name} (in {where})")


def _closure(names: list[str], where: Path | None = None) -> set[str]:
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = _canonical(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        for spec in _distribution(name, where).requires or []:
            requirement = Requirement(spec)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return seen


def provision_dependencies(project: str, dest: Path) -> Path:
    """Link the installed dependencies of ``project`` (not the project itself) into ``dest``."""
    requires = [Requirement(s) for s in md.distribution(project).requires or []]
    return provision_distributions([r.name for r in requires if r.marker is None or r.marker.evaluate({"extra": ""})],
                                   dest)


def provision_distributions(names: list[str], dest: Path, where: Path | None = None) -> Path:
    """Link the installed distributions ``names`` (and what they need) into ``dest``: from the running venv, or
    from the site folder ``where``."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in _closure(names, where):
        dist = _distribution(name, where)
        tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in tops:
            source = Path(str(dist.locate_file(top)))
            target = dest / top
            if source.exists() and not target.exists() and not top.endswith(".pth"):
                os.symlink(source, target)
    return dest


def make_venv(path: Path, *, with_pip: bool = True) -> Path:
    argv = [sys.executable, "-m", "venv", str(path)] + ([] if with_pip else ["--without-pip"])
    subprocess.run(argv, check=True, capture_output=True)
    return path / "bin" / "python"


def build_venv(path: Path, distributions: list[str]) -> Path:
    """A target venv for the fixture build, made in milliseconds and without the network: no pip of its
    own; the build tools among ``distributions`` (pip, setuptools, wheel, pybind11, ninja) linked in from the
    test suite's own pinned set (``build_tools_site``), the others (torch, numpy) from the test venv; and the
    executables they would have installed (ninja) linked into its bin, as `pip install` would have put them."""
    python = make_venv(path, with_pip=False)
    tools = [name for name in distributions if name in TOOLS]
    others = [name for name in distributions if name not in TOOLS]
    links = []
    if tools:
        site = build_tools_site()
        links.append(provision_distributions(tools, path.parent / f"{path.name}-tools", where=site))
        for name in tools:
            if name not in ("pip", "setuptools", "wheel") and (site / "bin" / name).exists():
                (path / "bin" / name).symlink_to(site / "bin" / name)
    if others:
        links.append(provision_distributions(others, path.parent / f"{path.name}-deps"))
        for name in others:
            executable = Path(sys.executable).parent / name
            if executable.exists():
                (path / "bin" / name).symlink_to(executable)
    (site_packages(python) / "provisioned.pth").write_text("".join(f"{folder}\n" for folder in links))
    return python


# The build tools of every fixture build's target venv are one set, pinned by constraints.txt and installed
# from the suite's own wheel folder, never the test venv's own pip and setuptools: those are whatever made
# that venv (a plain `python -m venv` has pip 23.2 and setuptools 65, whose pip runs the legacy `setup.py
# develop`, which then wants a newer setuptools from an index) and whatever pip configuration the machine
# has. `make test` downloads the folder next to the venv it makes ($VENV/test-wheels).
TEST_WHEELS = Path(os.environ.get("FLAGTREE_CPU_TEST_WHEELS") or Path(sys.prefix) / "test-wheels")
_TOOLS_SITE: list[Path] = []  # installed once per test process


def target_version(name: str) -> str:
    """The version of ``name`` a target venv from ``build_venv`` gets: the pinned build tools' for pip,
    setuptools, wheel, pybind11 and ninja; the test venv's for the rest."""
    if name in TOOLS:
        return _distribution(name, build_tools_site()).version
    return md.version(name)


def build_tools_site() -> Path:
    """A site folder holding the pinned build tools, installed from ``TEST_WHEELS`` once per process."""
    if _TOOLS_SITE:
        return _TOOLS_SITE[0]
    wheels = sorted(TEST_WHEELS.glob("*.whl")) if TEST_WHEELS.is_dir() else []
    have = {_canonical(w.name.split("-")[0]) for w in wheels}
    missing = [name for name in TOOLS if name not in have]
    if missing:
        raise RuntimeError(
            f"the test suite's wheel folder {TEST_WHEELS} lacks {', '.join(missing)}: `make test` fills it; by hand: "
            f"{sys.executable} -m pip download -c constraints.txt --only-binary :all: -d {TEST_WHEELS} "
            f"{' '.join(TOOLS)}")
    site = Path(tempfile.mkdtemp(prefix="flagtree-cpu-test-tools-"))
    atexit.register(shutil.rmtree, site, True)
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--find-links",
                    str(TEST_WHEELS), "--target", str(site), *TOOLS], check=True, capture_output=True, env=env)
    _TOOLS_SITE.append(site)
    return site


def site_packages(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def this_purelib() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


# The bundled recipe's build prerequisites without cmake: the fixture build does not run CMake, and a
# test machine may have no cmake (pip would then try to download one).
PREREQUISITES = ('python.build=[setuptools>=40.8.0, wheel, pybind11>=2.13.1, '
                 '{requirement: "ninja>=1.11.1", system_command: ninja}]')
# What a target venv for the fixture build needs (linked in by build_venv from the pinned set).
TOOLS = ["pip", "setuptools", "wheel", "pybind11", "ninja"]


def tiny_wheel(tmp_path: Path, name: str, version: str) -> Path:
    """Build the wheel of an empty distribution ``name`` (offline) and return its path."""
    project = tmp_path / f"{name}-src"
    module = name.replace("-", "_")
    (project / module).mkdir(parents=True)
    (project / module / "__init__.py").write_text("")
    (project / "setup.py").write_text(f"from setuptools import setup\nsetup(name={name!r}, version={version!r}, "
                                      f"packages=[{module!r}])\n")
    wheelhouse = tmp_path / "wheelhouse"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--no-index", "-w", str(wheelhouse), str(project)], check=True, capture_output=True)
    [wheel] = wheelhouse.glob(f"{module}-{version}-*.whl")
    return wheel


def packed_wheel(folder: Path, name: str, version: str, files: dict[str, str] | None = None,
                 requires: tuple[str, ...] = ()) -> Path:
    """A pure-Python wheel written directly (no build backend: milliseconds): ``files`` (path -> text; default
    an empty package of the distribution's name) plus METADATA (with ``requires``), WHEEL and a RECORD pip accepts."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    members = dict(files if files is not None else {f"{dist}/__init__.py": f"__version__ = {version!r}\n"})
    members[f"{info}/METADATA"] = (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                   + "".join(f"Requires-Dist: {r}\n" for r in requires))
    members[f"{info}/WHEEL"] = "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"

    def digest(text: str) -> str:
        return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()

    record = [f"{path},sha256={digest(text)},{len(text.encode())}" for path, text in members.items()]
    members[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in members.items():
            archive.writestr(member, text)
    return path


def simple_index(server: LoopbackHTTPServer, prefix: str, wheel: Path) -> str:
    """A PEP 503 index on the loopback server holding one wheel; its URL."""
    project = wheel.name.split("-")[0].replace("_", "-")
    server.serve(f"{prefix}/files/{wheel.name}", wheel.read_bytes())
    page = f'<html><body><a href="{prefix}/files/{wheel.name}">{wheel.name}</a></body></html>'
    server.serve(f"{prefix}/{project}/", page.encode(), **{"Content-Type": "text/html"})
    return server.url(f"{prefix}/")
