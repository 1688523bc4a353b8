"""A loopback world for the bundled spine-triton-riscv64 recipe.

Real bare git repositories where GitHub keeps them, reached through one user-style insteadOf rule:

  spacemit-com/spine-triton.git   one commit (the recipe's pin is replaced by it with --set): VERSION_NUMBER,
                                  patch/triton.patch, cmake/linux_riscv64.toolchain.cmake, backend/, and the
                                  `triton` submodule recorded as the real one is (.gitmodules url on GitHub,
                                  `branch =` the gitlink)
  triton-lang/triton.git          `pinned` (the gitlink: an unpatched Triton 3.6 setup.py stand-in) and a later
                                  `tip` on main, so "pinned" is not "tip"

and the recipe's four downloads as stand-in tarballs with the real file names (packed here from
tests/fixtures/projects/spine-triton-tarballs, modes and times fixed so the digests are stable), to be served
by the loopback HTTP server at the real URLs' paths. ``SpineWorld.serve`` returns the --set arguments that point
the recipe's artifacts at the server and give it the stand-ins' md5 (and zlib's sha256).
"""

from __future__ import annotations

import gzip
import io
import lzma
import platform
import shutil
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from tests.support.gitworld import commit_all, git, git_env, publish_bare
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import Tarball

PROJECTS = Path(__file__).resolve().parents[2] / "fixtures" / "projects"
TARBALL_TREES = PROJECTS / "spine-triton-tarballs"
RECIPE = "spine-triton-riscv64"

SPINE_TRITON_URL = "https://github.com/spacemit-com/spine-triton.git"
TRITON_URL = "https://github.com/triton-lang/triton.git"

# name in the recipe -> (the recipe's URL, the folder under spine-triton-tarballs, the digest the recipe states)
DOWNLOADS = {
    "toolchain": ("https://github.com/spacemit-com/toolchain/releases/download/v1.1.2/"
                  "spacemit-toolchain-linux-glibc-x86_64-v1.1.2.tar.xz", "toolchain", "md5"),
    "speir": ("https://github.com/spacemit-com/spine-mlir/releases/download/0.5.5/spine-mlir-riscv64-0.5.5.tar.gz",
              "speir", "md5"),
    "llvm": ("https://github.com/spacemit-com/spine-mlir/releases/download/"
             "llvm-675f09ac6cde422544562ec4ff3a449f2c4ca36a/"
             "llvm-675f09ac6cde422544562ec4ff3a449f2c4ca36a-20260323-release-cross.tar.gz", "llvm", "md5"),
    "zlib": ("https://github.com/madler/zlib/releases/download/v1.3.1/zlib-1.3.1.tar.gz", "zlib", "sha256"),
}

# The build prerequisites without cmake: the fixture build runs no CMake, and a test machine may have none
# (pip would then try to download it).
PREREQUISITES = "python.build=[setuptools, wheel, pybind11, {requirement: ninja, system_command: ninja}]"
# What the fixture build's target venv needs (tests.support.venvs.build_venv links them in).
TOOLS = ["pip", "setuptools", "wheel", "pybind11", "ninja"]


# --- tarballs ---------------------------------------------------------------------------------------------


def pack(folder: Path, *, xz: bool = False, plain_modes: tuple[str, ...] = (), extra: dict[str, bytes] | None = None
         ) -> Tarball:
    """``folder``'s contents as a deterministic tarball: sorted members, fixed times and owners, 0755 for
    executables and folders, 0644 otherwise (and for members under ``plain_modes``: published without their
    executable bits, as some release tarballs are). ``extra`` adds members (a tampered copy)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for path in sorted(folder.rglob("*")):
            name = path.relative_to(folder).as_posix()
            info = tarfile.TarInfo(name)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 1_700_000_000, 0, 0, "", ""
            if path.is_dir():
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
                continue
            data = path.read_bytes()
            executable = path.stat().st_mode & 0o111 and not name.startswith(plain_modes)
            info.mode, info.size = (0o755 if executable else 0o644), len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, data in (extra or {}).items():
            info = tarfile.TarInfo(name)
            info.mtime, info.mode, info.size = 1_700_000_000, 0o644, len(data)
            tar.addfile(info, io.BytesIO(data))
    data = raw.getvalue()
    return Tarball(lzma.compress(data, format=lzma.FORMAT_XZ) if xz else gzip.compress(data, mtime=0))


@dataclass(frozen=True)
class Download:
    name: str  # the recipe's artifact name
    url: str  # the recipe's (real) URL; served at the same path
    algorithm: str  # the digest the recipe states: md5 or sha256
    tarball: Tarball

    @property
    def path(self) -> str:
        return urlparse(self.url).path

    @property
    def digest(self) -> str:
        return getattr(self.tarball, self.algorithm)

    def digest_set(self) -> str:
        key = "digest.md5" if self.algorithm == "md5" else "sha256"
        return f"artifacts.{self.name}.{key}={self.digest}"


def stand_in_downloads() -> dict[str, Download]:
    downloads = {}
    for name, (url, folder, algorithm) in DOWNLOADS.items():
        plain = ("spine-mlir-riscv64-0.5.5/install/bin/",) if name == "speir" else ()
        tarball = pack(TARBALL_TREES / folder, xz=url.endswith(".xz"), plain_modes=plain)
        downloads[name] = Download(name, url, algorithm, tarball)
    return downloads


def tampered_toolchain() -> Tarball:
    """The toolchain tarball with one member more: what a compromised mirror would serve."""
    return pack(TARBALL_TREES / "toolchain", xz=True,
                extra={"spacemit-toolchain-linux-glibc-x86_64-v1.1.2/bin/backdoor": b"#!/bin/sh\n"})


# --- git --------------------------------------------------------------------------------------------------






def _work_tree(work: Path, project: str, env: dict[str, str]) -> Path:
    tree = work / project
    shutil.copytree(PROJECTS / project, tree)
    git("init", "--quiet", cwd=tree, env=env)
    return tree


@dataclass
class SpineWorld:
    root: Path
    gitconfig: Path  # protocol.file allowed; https://github.com/ -> <root>/bare/
    commit: str  # spine-triton's fixture commit (replaces the recipe's pin)
    gitlink: str  # the triton commit spine-triton records
    triton_tip: str  # a later triton commit nobody pinned
    downloads: dict[str, Download] = field(default_factory=stand_in_downloads)

    def bare(self, owner_name: str) -> Path:
        return self.root / "bare" / f"{owner_name}.git"

    def serve(self, server: LoopbackHTTPServer) -> tuple[str, ...]:
        """Serve every stand-in at its real path; the --set arguments pointing the recipe there."""
        sets = []
        for download in self.downloads.values():
            url = server.serve(download.path, download.tarball.data)
            sets += [f"artifacts.{download.name}.url={url}", download.digest_set()]
        return tuple(sets)


def build_spine_world(root: Path) -> SpineWorld:
    root.mkdir(parents=True, exist_ok=True)
    (root / "home").mkdir(exist_ok=True)
    build_config = root / "build.gitconfig"
    build_config.write_text('[protocol "file"]\n\tallow = always\n[init]\n\tdefaultBranch = main\n')
    env = git_env(root / "home", build_config)
    work, bare = root / "work", root / "bare"

    triton = _work_tree(work, "spine-triton-triton", env)
    gitlink = commit_all(triton, "triton: the commit spine-triton pins", env)
    (triton / "README.md").write_text("# triton fixture\n\nA later commit on main nobody pinned.\n")
    triton_tip = commit_all(triton, "triton: later", env)
    publish_bare(triton, bare / "triton-lang" / "triton.git", env)

    spine = _work_tree(work, "spine-triton", env)
    git("submodule", "add", "--quiet", (bare / "triton-lang" / "triton.git").as_uri(), "triton", cwd=spine, env=env)
    git("checkout", "--quiet", gitlink, cwd=spine / "triton", env=env)
    # as the real .gitmodules: the GitHub URL (reached through insteadOf) and the gitlink repeated as `branch`
    git("config", "-f", ".gitmodules", "submodule.triton.url", TRITON_URL, cwd=spine, env=env)
    git("config", "-f", ".gitmodules", "submodule.triton.branch", gitlink, cwd=spine, env=env)
    commit = commit_all(spine, "spine-triton: fixture", env)
    publish_bare(spine, bare / "spacemit-com" / "spine-triton.git", env)

    gitconfig = root / "world.gitconfig"
    gitconfig.write_text('[protocol "file"]\n\tallow = always\n'
                         f'[url "{bare.as_uri()}/"]\n\tinsteadOf = https://github.com/\n')
    return SpineWorld(root, gitconfig, commit, gitlink, triton_tip)


# --- a workspace on the world -------------------------------------------------------------------------------


def host_sets() -> tuple[str, ...]:
    """The recipe builds on x86_64; elsewhere these tests claim this host (the cross rules stay the same)."""
    here = platform.machine()
    return () if here == "x86_64" else (f"platform.host.arch=[{here}]",)


@dataclass
class SpineWorkspace:
    """A workspace running the bundled recipe, unmodified except its pin (the real commit cannot exist here),
    where the downloads come from and their digests, and the fixture-friendly prerequisites."""

    world: SpineWorld
    root: Path
    always_set: tuple[str, ...] = ()

    def argv(self, *args: str, sets: tuple[str, ...] = ()) -> list[str]:
        argv = ["-w", str(self.root), "--recipe", RECIPE, "--set", f"sources.spine-triton.commit={self.world.commit}"]
        for assignment in (*host_sets(), PREREQUISITES, *self.always_set, *sets):
            argv += ["--set", assignment]
        return [*argv, *args]

    def run(self, *args: str, sets: tuple[str, ...] = ()) -> Result:
        return CliRunner().invoke(app, self.argv(*args, sets=sets))

    @property
    def spine_triton(self) -> Path:
        return self.root / "spine-triton"

    @property
    def triton(self) -> Path:
        return self.spine_triton / "triton"

    def artifact(self, name: str) -> Path:
        return self.root / {"toolchain": "toolchain", "speir": "speir_installed", "llvm": "llvm_installed",
                            "zlib": "zlib-1.3.1"}[name]
