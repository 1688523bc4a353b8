"""Fresh virtual environments for install tests, without the network.

A test that installs our wheel into a new venv must not download its dependencies
(tests stay on loopback). ``provision_dependencies`` links the already-installed
distributions the project needs (and theirs, recursively) from the running venv into
a folder, which a ``.pth`` file then adds to the fresh venv — so ``pip install
--no-index our.whl`` finds every dependency satisfied, and only our wheel is new.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata as md
import os
import re
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from packaging.requirements import Requirement

from tests.support.httpserver import LoopbackHTTPServer


def _closure(names: list[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name in seen:
            continue
        seen.add(name)
        for spec in md.distribution(name).requires or []:
            requirement = Requirement(spec)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return seen


def provision_dependencies(project: str, dest: Path) -> Path:
    """Link the installed dependencies of ``project`` (not the project itself) into ``dest``."""
    requires = [Requirement(s) for s in md.distribution(project).requires or []]
    return provision_distributions([r.name for r in requires if r.marker is None or r.marker.evaluate({"extra": ""})],
                                   dest)


def provision_distributions(names: list[str], dest: Path) -> Path:
    """Link the installed distributions ``names`` (and what they need) into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in _closure(names):
        dist = md.distribution(name)
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
    own, the given distributions (pip among them) linked in from the test venv, and the executables
    they would have installed (ninja) linked into its bin, as `pip install` would have put them."""
    python = make_venv(path, with_pip=False)
    deps = provision_distributions(distributions, path.parent / f"{path.name}-deps")
    (site_packages(python) / "provisioned.pth").write_text(str(deps) + "\n")
    for name in distributions:
        executable = Path(sys.executable).parent / name
        if name not in ("pip", "setuptools", "wheel") and executable.exists():
            (path / "bin" / name).symlink_to(executable)
    return python


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
# What a target venv for the fixture build needs (linked in by build_venv).
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
