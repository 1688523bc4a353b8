"""The loopback world for the bundled `torch-fl` recipe (flagos-ai/PyTorch-Plugin-FL, variants cuda, metax,
ascend), with no accelerator, SDK or vendor torch on the machine.

``build_torch_fl_world(root)`` makes, once per test module:

- ``bare/flagos-ai/PyTorch-Plugin-FL.git`` from ``fixtures/projects/torch-fl`` (branch main), and
  ``world.gitconfig`` whose one prefix rule ``url.file:///…/bare/.insteadOf = https://github.com/`` sends the
  recipe's real URL there. The real pin cannot exist here: runs pass ``sources.torch-fl.commit``.
- fake pre-provisioned toolchains, each with the files the recipe's ``expect`` names (``toolchains[name]``,
  pointed at with FLAGTREE_CPU_TOOLCHAIN_<NAME>): a CUDA toolkit, a CUDA torch's folder (with a
  libtorch_cpu.so the staging step must leave behind), /opt/maca with cu-bridge's cucc, the MetaX-forked
  libtorch, and a CANN toolkit whose ``set_env.sh`` exports ASCEND_* and prepends its folders, like CANN's.
- ``tools/bin``: a ``patchelf`` that answers --version and records its arguments (the MetaX bundling step
  needs one); ``tools/nvidia/nvidia-smi``: a driver tool, for a host where the CUDA checks' ``needs`` hold.
- a stand-in torch 2.10.0+cpu (a folder a .pth adds to a target venv: the vendor's "preinstalled" torch),
  and triton-ascend wheels 3.2.0 and 3.2.1 (real wheels, pip-installed offline) whose
  ``triton/backends/ascend/driver.py`` still imports torch_npu, as the stock package does.

``target_venv(dir, world, torch=True)`` is a target interpreter for the fixture build (tests/support/venvs.py
``build_venv``: no pip run, milliseconds) with pytest and, unless told otherwise, the stand-in torch.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.gitworld import PROJECTS, Repo, commit_all, git, git_env, publish_bare, write_redirect_config
from tests.support.venvs import TOOLS, build_venv, packed_wheel, site_packages

URL = "https://github.com/flagos-ai/PyTorch-Plugin-FL.git"
TORCH_VERSION = "2.10.0+cpu"
# The MetaX-forked libtorch files the recipe's maca-torch toolchain expects (set_env_metax.sh's list).
MACA_TORCH_LIBS = ("libc10.so", "libtorch_cpu.so", "libtorch.so", "libtorch_global_deps.so", "libtorch_python.so",
                   "libc10_cuda.so", "libtorch_cuda.so", "libtorch_cuda_linalg.so")
# What stage-cuda-assets copies out of a CUDA torch's lib/ (set_env_cuda.sh's patterns present here).
CUDA_ASSETS = ("libc10_cuda.so", "libtorch_cuda.so", "libtorch_cuda_linalg.so", "libcaffe2_nvrtc.so")
STOCK_DRIVER = '''"""triton-ascend {version}: backends/ascend/driver.py (stand-in)"""


def get_current_device():
    import torch_npu
    return torch.npu.current_device()

class NPUUtils(object):
    pass
'''
CANN_SET_ENV = '''# stand-in for CANN's set_env.sh: exports where the toolkit is and prepends its folders
_here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export ASCEND_TOOLKIT_HOME="${_here}/latest"
export ASCEND_HOME_PATH="${ASCEND_TOOLKIT_HOME}"
export ASCEND_OPP_PATH="${ASCEND_TOOLKIT_HOME}/opp"
export LD_LIBRARY_PATH="${ASCEND_TOOLKIT_HOME}/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="${ASCEND_TOOLKIT_HOME}/bin:${PATH}"
unset _here
'''
PATCHELF = '''#!/bin/sh
# stand-in patchelf: a version for pip's system_command check; other calls are recorded
if [ "$1" = "--version" ]; then echo "patchelf 0.18.0"; exit 0; fi
echo "$*" >> "{log}"
'''


@dataclass
class TorchFlWorld:
    root: Path
    bare: Path
    commit: str
    gitconfig: Path
    git_env: dict[str, str]
    toolchains: dict[str, Path] = field(default_factory=dict)
    tools: Path = Path()  # patchelf
    nvidia: Path = Path()  # nvidia-smi
    torch_site: Path = Path()
    wheels: dict[str, Path] = field(default_factory=dict)  # triton-ascend version -> wheel

    @property
    def patchelf_log(self) -> Path:
        return self.root / "patchelf.log"


def build_torch_fl_world(root: Path) -> TorchFlWorld:
    root.mkdir(parents=True, exist_ok=True)
    (root / "home").mkdir(exist_ok=True)
    build_config = root / "build.gitconfig"
    build_config.write_text('[protocol "file"]\n\tallow = always\n[init]\n\tdefaultBranch = main\n')
    env = git_env(root / "home", build_config)
    repo = Repo("torch-fl", root / "bare" / "flagos-ai" / "PyTorch-Plugin-FL.git")
    work = root / "work" / "PyTorch-Plugin-FL"
    work.mkdir(parents=True)
    git("init", "--quiet", cwd=work, env=env)
    shutil.copytree(PROJECTS / "torch-fl", work, dirs_exist_ok=True)
    commit = commit_all(work, "torch_fl fixture", env)
    repo.bare.parent.mkdir(parents=True)
    publish_bare(work, repo.bare, env)
    gitconfig = write_redirect_config(root)
    world = TorchFlWorld(root, repo.bare, commit, gitconfig, git_env(root / "home", gitconfig))
    _fake_toolchains(world)
    _fake_tools(world)
    world.torch_site = _standin_torch(root / "site" / "torch")
    world.wheels = {v: _triton_ascend_wheel(root / "wheels", v) for v in ("3.2.0", "3.2.1")}
    return world


def _touch(path: Path, text: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _fake_toolchains(world: TorchFlWorld) -> None:
    tc = world.root / "toolchains"
    cuda = tc / "cuda-12.4"
    _touch(cuda / "include" / "cuda_runtime.h", "/* stand-in */\n")
    _touch(cuda / "bin" / "nvcc", "#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.48'\n")
    (cuda / "bin" / "nvcc").chmod(0o755)  # the recipe reads the toolkit's version from `nvcc --version`
    cuda_torch = tc / "vendor-python" / "site-packages" / "torch"
    for name in (*CUDA_ASSETS, "libtorch_cpu.so"):
        _touch(cuda_torch / "lib" / name, f"stand-in {name}\n")
    maca = tc / "maca"
    _touch(maca / "tools" / "cu-bridge" / "bin" / "cucc")
    for folder in ("bin", "mxgpu_llvm/bin", "lib", "tools/cu-bridge/lib"):
        (maca / folder).mkdir(parents=True, exist_ok=True)
    maca_torch = tc / "vendor-libtorch"
    for name in MACA_TORCH_LIBS:
        _touch(maca_torch / "lib" / name, f"stand-in MetaX {name}\n")
    cann = tc / "Ascend" / "ascend-toolkit"
    _touch(cann / "set_env.sh", CANN_SET_ENV)
    for name in ("lib64/libascendcl.so", "lib64/libopapi.so", "include/aclnn_base.h"):
        _touch(cann / "latest" / name)
    (cann / "latest" / "bin").mkdir(exist_ok=True)
    world.toolchains = {"cuda": cuda, "cuda-torch": cuda_torch, "maca": maca, "maca-torch": maca_torch,
                        "cann": cann}


def _fake_tools(world: TorchFlWorld) -> None:
    world.tools = world.root / "tools" / "bin"
    _touch(world.tools / "patchelf", PATCHELF.replace("{log}", str(world.patchelf_log)))
    world.nvidia = world.root / "tools" / "nvidia"
    _touch(world.nvidia / "nvidia-smi", "#!/bin/sh\necho 'NVIDIA-SMI stand-in'\n")
    for tool in (world.tools / "patchelf", world.nvidia / "nvidia-smi"):
        tool.chmod(0o755)


def _standin_torch(folder: Path) -> Path:
    """torch 2.10.0+cpu as a folder for a .pth: a package and its dist-info (what pip and importlib read)."""
    _touch(folder / "torch" / "__init__.py", f'__version__ = "{TORCH_VERSION}"\n')
    info = folder / f"torch-{TORCH_VERSION}.dist-info"
    _touch(info / "METADATA", f"Metadata-Version: 2.1\nName: torch\nVersion: {TORCH_VERSION}\n")
    _touch(info / "INSTALLER", "vendor\n")
    _touch(info / "RECORD", "")
    return folder


def _triton_ascend_wheel(folder: Path, version: str) -> Path:
    """A real (hand-packed) wheel of triton-ascend: the `triton` package with backends/ascend/driver.py."""
    return packed_wheel(folder, "triton-ascend", version, {
        "triton/__init__.py": f'__version__ = "{version}"\n',
        "triton/backends/__init__.py": "",
        "triton/backends/ascend/__init__.py": "",
        "triton/backends/ascend/driver.py": STOCK_DRIVER.format(version=version),
        f"triton_ascend-{version}.dist-info/top_level.txt": "triton\n",
    })


def target_venv(path: Path, world: TorchFlWorld, *, torch: bool = True) -> Path:
    """A target interpreter for the fixture build: pip, setuptools, wheel, pytest linked in, and the stand-in
    torch on a .pth unless ``torch`` is False (a vendor environment without its torch)."""
    python = build_venv(path, [*TOOLS, "pytest"])
    if torch:
        (site_packages(python) / "vendor-torch.pth").write_text(f"{world.torch_site}\n")
    return python


def pip_install(python: Path, wheel: Path) -> None:
    """`pip install --force-reinstall` of a local wheel, offline (a reinstall of triton-ascend)."""
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--force-reinstall",
                    "--disable-pip-version-check", str(wheel)], check=True, capture_output=True, text=True)


def installed_driver(python: Path) -> Path:
    return site_packages(python) / "triton" / "backends" / "ascend" / "driver.py"


def records(path: Path) -> list[dict]:
    """The JSON lines setup.py and the scripts appended (argv, cwd, env)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]
