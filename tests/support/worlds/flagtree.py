"""The loopback world for the bundled `flagtree` recipe: FlagTree's six protected branches and every download
their setup.py makes for the NVIDIA and AMD backends.

- ``bare/flagos-ai/FlagTree.git``: one branch per protected branch (``main``, ``triton_v3.2.x`` ...
  ``triton_v3.6.x``), each holding only what the recipe reads and what the layout says of the branch:
  ``cmake/llvm-hash.txt`` (the real hash), the NVIDIA tool versions (``nvidia-toolchain-version.txt`` on main,
  ``.json`` on 3.2+, the real contents), ``cmake/json-version.txt`` (3.2+), ``cmake/pybind11-version.txt``
  (main), ``python/requirements.txt``, ``setup.py`` where the branch keeps it (``python/`` up to 3.3, the root
  from 3.4), ``third_party/{nvidia,amd}/backend`` and the tutorial the GPU checks run. The setup.py stand-in
  only says it must never run here (no test builds). ``bare/flagos-ai/flir.git`` is the aipu backend's flir.
- A loopback HTTP server with a stand-in for every download, under the URL setup.py would compute, written out
  here from the branch's own version files (not read from the recipe): the LLVM tarball
  ``llvm-<first 8>-ubuntu-x64``, nlohmann json's include.zip, pybind11's tag archive (main), the NVIDIA tools
  (anaconda.org conda packages for main and 3.2, developer.download.nvidia.com redist archives from 3.3), and
  aipu's vendor LLVM. ``mirrors`` sends each real host to ``/<host>/`` on the server.
- ``expected_tools(branch, triton_home, home)``: where setup.py's download_and_copy() looks for each tool
  before it downloads (``<cache>/nvidia/<name>/<src>``), so a test can show the build would download nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.gitworld import commit_all, git, git_env, publish_bare
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import Tarball, tarball_with
from tests.support.worlds.triton_cpu import json_zip

HOSTS = ("oaitriton.blob.core.windows.net", "github.com", "anaconda.org", "developer.download.nvidia.com",
         "baai-cp-web.ks3-cn-beijing.ksyuncs.com")
LLVM_BUILDS = "https://oaitriton.blob.core.windows.net/public/llvm-builds/"
JSON_URL = "https://github.com/nlohmann/json/releases/download/v3.11.3/include.zip"
AIPU_LLVM = ("https://baai-cp-web.ks3-cn-beijing.ksyuncs.com/trans/"
             "llvm-a66376b0-ubuntu-x64-clang16-lld16_v0.4.0.tar.gz")
SETUP_PY = ('"""FlagTree setup.py stand-in: the flagtree recipe tests plan, sync, fetch, lock and bundle; '
            'they never build."""\nraise SystemExit("fixture: this test was not meant to run the build")\n')


@dataclass(frozen=True)
class Branch:
    name: str
    triton: str  # 3.1 ... 3.6
    llvm_hash: str
    nvidia: str | dict[str, str]  # nvidia-toolchain-version.txt (main) or .json
    requirements: tuple[str, ...]
    setup_in_python: bool  # python/setup.py (3.1-3.3) or setup.py at the root (3.4+)
    extra_backends: tuple[str, ...] = ()  # third_party/ folders beside nvidia and amd


_REQ_34 = ("setuptools>=40.8.0", "wheel", "cmake>=3.20,<4.0", "ninja>=1.11.1", "pybind11>=2.13.1", "lit")
_NV_34 = {"ptxas": "12.8.93", "cuobjdump": "12.8.55", "nvdisasm": "12.8.55", "cudacrt": "12.8.61",
          "cudart": "12.8.57", "cupti": "12.8.90"}
# Read from each branch's tip in the FlagTree mirror (2026): the values the recipe must agree with.
BRANCHES = {
    "3_1": Branch("main", "3.1", "10dc3a8e916d73291269e5e2b82dd22681489aa1", "12.4.99",
                  ("ninja", "cmake", "wheel", "GitPython", "pytest", "scipy", "filelock", "nanobind"), True,
                  ("iluvatar", "xpu")),
    "3_2": Branch("triton_v3.2.x", "3.2", "86b69c31642e98f8357df62c09d118ad1da4e16a",
                  dict.fromkeys(("ptxas", "cuobjdump", "nvdisasm", "cudacrt", "cudart", "cupti"), "12.4.99"),
                  ("ninja", "cmake", "wheel", "GitPython", "pytest", "scipy", "pybind11", "nanobind", "pandas",
                   "einops"), True, ("ascend",)),
    "3_3": Branch("triton_v3.3.x", "3.3", "a66376b0dc3b2ea8a84fda26faca287980986f78",
                  {"ptxas-blackwell": "12.8.61", "ptxas": "12.4.99", "cuobjdump": "12.8.55", "nvdisasm": "12.8.55",
                   "cudacrt": "12.8.61", "cudart": "12.8.57", "cupti": "12.8.57"},
                  ("setuptools>=40.8.0", "wheel", "cmake>=3.18", "ninja>=1.11.1", "pybind11>=2.13.1", "lit",
                   "GitPython", "pytest", "scipy", "nanobind==2.6.1"), True, ("aipu", "cpu")),
    "3_4": Branch("triton_v3.4.x", "3.4", "8957e64a20fc7f4277565c6cfe3e555c119783ce", _NV_34, _REQ_34, False,
                  ("sunrise",)),
    "3_5": Branch("triton_v3.5.x", "3.5", "7d5de3033187c8a3bb4d2e322f5462cdaf49808f", _NV_34, _REQ_34, False,
                  ("ascend",)),
    "3_6": Branch("triton_v3.6.x", "3.6", "f6ded0be897e2878612dd903f7e8bb85448269e5",
                  {"ptxas-blackwell": "12.9.86", **_NV_34}, _REQ_34, False, ("mthreads", "hcu")),
}


# main and 3.2 (versions before 12.5): download_and_copy name -> the anaconda.org package it downloads
CONDA_TOOLS = {"ptxas": "cuda-nvcc", "cudacrt": "cuda-nvcc", "cuobjdump": "cuda-cuobjdump",
               "nvdisasm": "cuda-nvdisasm", "cudart": "cuda-cudart-dev", "cupti": "cuda-cupti"}


def conda_url(package: str, version: str) -> str:
    return f"https://anaconda.org/nvidia/{package}/{version}/download/linux-64/{package}-{version}-0.tar.bz2"


# 3.3+: download_and_copy name -> (redist component, key of the version json, what it copies out of the archive)
REDIST = {"ptxas": ("nvcc", "ptxas", "bin/ptxas"), "ptxas-blackwell": ("nvcc", "ptxas-blackwell", "bin/ptxas"),
          "cudacrt": ("nvcc", "cudacrt", "include"), "cuobjdump": ("cuobjdump", "cuobjdump", "bin/cuobjdump"),
          "nvdisasm": ("nvdisasm", "nvdisasm", "bin/nvdisasm"), "cudart": ("cudart", "cudart", "include"),
          "cupti": ("cupti", "cupti", "include"), "cupti-lib": ("cupti", "cupti", "lib")}


def redist_dir(component: str, version: str) -> str:
    return f"cuda_{component}-linux-x86_64-{version}-archive"


def redist_url(component: str, version: str) -> str:
    return ("https://developer.download.nvidia.com/compute/cuda/redist/"
            f"cuda_{component}/linux-x86_64/{redist_dir(component, version)}.tar.xz")


def downloads(branch: Branch) -> dict[str, Tarball]:
    """Every URL setup.py downloads from on this branch (x86_64, glibc > 2.28), with a stand-in archive."""
    llvm_top = f"llvm-{branch.llvm_hash[:8]}-ubuntu-x64"
    out = {f"{LLVM_BUILDS}{llvm_top}.tar.gz": tarball_with({
        f"{llvm_top}/lib/cmake/mlir/MLIRConfig.cmake": b"# stand-in\n",
        f"{llvm_top}/include/llvm/Config/llvm-config.h": b"// stand-in\n"})}
    out[JSON_URL] = json_zip()  # the same zip as triton-cpu's world: one file upstream, shared in ~/.triton/json
    if isinstance(branch.nvidia, str):  # main: one version for every tool, and pybind11 from its tag
        out["https://github.com/pybind/pybind11/archive/refs/tags/v2.11.1.tar.gz"] = tarball_with(
            {"pybind11-2.11.1/include/pybind11/pybind11.h": b"// stand-in\n"})
        versions = dict.fromkeys(CONDA_TOOLS, branch.nvidia)
    else:
        versions = dict(branch.nvidia)
    if branch.triton in ("3.1", "3.2"):
        for name, package in CONDA_TOOLS.items():
            out[conda_url(package, versions[name])] = _conda_package(package)
    else:
        for component, key, _ in REDIST.values():
            if key in versions:
                out[redist_url(component, versions[key])] = _redist_archive(component, versions[key])
    return out


def aipu_downloads() -> dict[str, Tarball]:
    top = "llvm-a66376b0-ubuntu-x64-clang16-lld16"
    return {AIPU_LLVM: tarball_with({f"{top}/python_packages/mlir_core/mlir/__init__.py": b"",
                                     f"{top}/lib/cmake/mlir/MLIRConfig.cmake": b"# stand-in\n"})}


def _conda_package(package: str) -> Tarball:
    """A conda package: its files at the top (bin/, include/, lib/) beside info/."""
    files = {"info/index.json": json.dumps({"name": package}).encode(), "include/stand-in.h": b"// stand-in\n"}
    tool = {"cuda-nvcc": "ptxas", "cuda-cuobjdump": "cuobjdump", "cuda-nvdisasm": "nvdisasm"}.get(package)
    if tool:
        files[f"bin/{tool}"] = b"#!/bin/sh\necho 'Cuda compilation tools, V12.4.99'\n"
    if package == "cuda-cupti":
        files["lib/libcupti.so"] = b"stand-in"
    return tarball_with(files, mode="w:bz2", executable=tuple(f for f in files if f.startswith("bin/")))


def _redist_archive(component: str, version: str) -> Tarball:
    top = redist_dir(component, version)
    files = {f"{top}/include/stand-in.h": b"// stand-in\n", f"{top}/LICENSE": b"stand-in\n"}
    tool = {"nvcc": "ptxas", "cuobjdump": "cuobjdump", "nvdisasm": "nvdisasm"}.get(component)
    if tool:
        files[f"{top}/bin/{tool}"] = f"#!/bin/sh\necho 'Cuda compilation tools, V{version}'\n".encode()
    if component == "cupti":
        files[f"{top}/lib/libcupti.so"] = b"stand-in"
    return tarball_with(files, mode="w:xz", executable=tuple(f for f in files if "/bin/" in f))


def expected_tools(branch: Branch, triton_home: Path, home: Path) -> list[Path]:
    """Where download_and_copy() looks before downloading: <cache>/nvidia/<name>/<src> (main's cache is under
    HOME, later branches' under TRITON_HOME)."""
    if branch.triton == "3.1":
        cache = home / ".triton" / "nvidia"
        return [cache / "ptxas/bin/ptxas", cache / "cuobjdump/bin/cuobjdump", cache / "nvdisasm/bin/nvdisasm",
                cache / "cudacrt/include", cache / "cudart/include", cache / "cupti/include"]
    cache = triton_home / ".triton" / "nvidia"
    if branch.triton == "3.2":
        return [cache / "ptxas/bin/ptxas", cache / "cuobjdump/bin/cuobjdump", cache / "nvdisasm/bin/nvdisasm",
                cache / "cudacrt/include", cache / "cudart/include", cache / "cupti/include", cache / "cupti/lib"]
    assert isinstance(branch.nvidia, dict)
    return [cache / component / redist_dir(component, branch.nvidia[key]) / src
            for component, key, src in REDIST.values() if key in branch.nvidia]


@dataclass
class FlagTreeWorld:
    root: Path
    server: LoopbackHTTPServer
    gitconfig: Path  # protocol.file allowed; https://github.com/ -> <root>/bare/
    commits: dict[str, str] = field(default_factory=dict)  # branch name (and "flir") -> fixture commit
    served: dict[str, Tarball] = field(default_factory=dict)  # real URL -> stand-in

    @property
    def mirrors(self) -> str:
        """FLAGTREE_CPU_MIRRORS: each real download host -> /<host>/ on the loopback server."""
        return " ".join(f"https://{host}/={self.server.base_url}/{host}/" for host in HOSTS)

    def serve(self, url: str, tarball: Tarball) -> None:
        self.served[url] = tarball
        self.server.serve("/" + url.removeprefix("https://"), tarball.data)

    def downloaded(self, since: int = 0) -> list[str]:
        """The real URLs the server was asked for (GET), from request number ``since`` on."""
        return ["https://" + r.path.lstrip("/") for r in self.server.requests[since:] if r.method == "GET"]


def build_flagtree_world(root: Path, server: LoopbackHTTPServer, only: tuple[str, ...] = ()) -> FlagTreeWorld:
    """The world; ``only`` (keys of BRANCHES, e.g. ``("3_6",)``) builds just those branches and skips aipu's flir,
    for a test that sets up one variant (the README walk-through)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "home").mkdir(exist_ok=True)
    build_config = root / "build.gitconfig"
    build_config.write_text('[protocol "file"]\n\tallow = always\n[init]\n\tdefaultBranch = main\n')
    env = git_env(root / "home", build_config)
    redirect = root / "world.gitconfig"
    redirect.write_text('[protocol "file"]\n\tallow = always\n'
                        f'[url "{(root / "bare").as_uri()}/"]\n\tinsteadOf = https://github.com/\n')
    world = FlagTreeWorld(root, server, redirect)

    tree = root / "work" / "FlagTree"
    tree.mkdir(parents=True)
    git("init", "--quiet", cwd=tree, env=env)
    for key, branch in BRANCHES.items():
        if only and key not in only:
            continue
        if not world.commits:  # the first branch built: the unborn one git init made
            git("symbolic-ref", "HEAD", f"refs/heads/{branch.name}", cwd=tree, env=env)
        elif branch.name != "main":
            git("checkout", "--quiet", "--orphan", branch.name, cwd=tree, env=env)
            git("rm", "-r", "-q", "--cached", ".", cwd=tree, env=env)
            git("clean", "-fdq", cwd=tree, env=env)
        write_branch(tree, branch)
        world.commits[branch.name] = commit_all(tree, f"FlagTree {branch.name} (Triton {branch.triton})", env)
        for url, tarball in downloads(branch).items():
            world.serve(url, tarball)
    if "main" in world.commits:
        git("checkout", "--quiet", "main", cwd=tree, env=env)
    publish_bare(tree, root / "bare" / "flagos-ai" / "FlagTree.git", env)
    if only:
        return world

    flir = root / "work" / "flir"
    flir.mkdir(parents=True)
    git("init", "--quiet", cwd=flir, env=env)
    (flir / "CMakeLists.txt").write_text("# flir stand-in\n")
    world.commits["flir"] = commit_all(flir, "flir", env)
    publish_bare(flir, root / "bare" / "flagos-ai" / "flir.git", env)
    for url, tarball in aipu_downloads().items():
        world.serve(url, tarball)
    return world


def _reads(branch: Branch) -> str:
    """The version files the real setup.py opens, as it names them (a recipe probe looks for them)."""
    nvidia = "nvidia-toolchain-version.txt" if isinstance(branch.nvidia, str) else "nvidia-toolchain-version.json"
    return f'# reads os.path.join(get_base_dir(), "cmake", "llvm-hash.txt") and "{nvidia}"\n'


def write_branch(tree: Path, branch: Branch) -> None:
    files = {"cmake/llvm-hash.txt": branch.llvm_hash + "\n",
             "python/requirements.txt": "\n".join(branch.requirements) + "\n",
             ("python/setup.py" if branch.setup_in_python else "setup.py"): SETUP_PY + _reads(branch),
             "python/triton/__init__.py": f"__version__ = '{branch.triton}.0'\n",
             "python/tutorials/01-vector-add.py": "raise SystemExit('needs a GPU')\n"}
    if isinstance(branch.nvidia, str):
        files["cmake/nvidia-toolchain-version.txt"] = branch.nvidia + "\n"
        files["cmake/pybind11-version.txt"] = "2.11.1\n"
    else:
        files["cmake/nvidia-toolchain-version.json"] = json.dumps(branch.nvidia, indent=2) + "\n"
        files["cmake/json-version.txt"] = "v3.11.3\n"
    for backend in ("nvidia", "amd", *branch.extra_backends):
        files[f"third_party/{backend}/backend/compiler.py"] = f"# {backend} backend stand-in\n"
    for rel, text in files.items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
