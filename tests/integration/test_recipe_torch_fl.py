"""The bundled `torch-fl` recipe (flagos-ai/PyTorch-Plugin-FL, variants cuda, metax, ascend) through the real
CLI, on the loopback world of tests/support/worlds/torch_fl.py: a fixture checkout whose setup.py and scripts
record what they received, fake toolkits pointed at with FLAGTREE_CPU_TOOLCHAIN_<NAME>, a stand-in vendor
torch and real triton-ascend wheels. No accelerator is here, so every hardware-only check must be skipped with
its reason, and run (and be judged) once its needs are met."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from tests.conftest import REPO_ROOT
from tests.support.envelope import error_of, result_of
from tests.support.worlds.torch_fl import (
    CUDA_ASSETS,
    MACA_TORCH_LIBS,
    TorchFlWorld,
    build_torch_fl_world,
    installed_driver,
    pip_install,
    records,
    target_venv,
)

HOSTS = REPO_ROOT / "tests" / "fixtures" / "hosts"
BUILD_COMMANDS = {"editable_wheel", "build_ext"}


@dataclass
class TorchFl:
    """A workspace for the bundled recipe on the world, its target interpreter and the build record."""

    world: TorchFlWorld
    root: Path
    python: Path
    record: Path
    monkeypatch: pytest.MonkeyPatch

    def run(self, *args: str, variant: str | None = None, sets: tuple[str, ...] = ()) -> Result:
        argv = ["-w", str(self.root), "--recipe", "torch-fl", *(("--variant", variant) if variant else ())]
        for assignment in (f"sources.torch-fl.commit={self.world.commit}", *sets):
            argv += ["--set", assignment]
        return CliRunner().invoke(app, [*argv, *args])

    def build(self, *args: str, variant: str) -> Result:
        # this host has no NVIDIA, MetaX or Ascend driver: build's preflight (doctor's host rules, which stop it with
        # exit 7: test_build_without_the_driver_stops_at_the_preflight) is set aside; the build's staging is tested
        return self.run("build", "--ignore-host", "--python", str(self.python), *args, variant=variant)

    def validate(self, *args: str, variant: str) -> dict[str, dict[str, Any]]:
        result = self.run("validate", "--json", "--python", str(self.python), *args, variant=variant)
        return {r["kernel"]: r for r in result_of(result.stdout)["results"]}

    def provide(self, *toolchains: str) -> None:
        """This host's copy of each toolchain, through its per-host override variable."""
        for name in toolchains:
            variable = "FLAGTREE_CPU_TOOLCHAIN_" + name.upper().replace("-", "_")
            self.monkeypatch.setenv(variable, str(self.world.toolchains[name]))

    @property
    def checkout(self) -> Path:
        return self.root / "PyTorch-Plugin-FL"

    def records(self) -> list[dict]:
        return records(self.record)

    def runs(self) -> list[str]:
        """What ran, in order: setup.py's build commands, the bundling and patch scripts."""
        out = []
        for r in self.records():
            argv = r["argv"]
            if BUILD_COMMANDS & set(argv[1:]):
                out.append("setup.py " + next(a for a in argv[1:] if a in BUILD_COMMANDS))
            elif argv[0].endswith(("bundle_maca_libtorch.sh", "patch_triton_ascend.py")):
                out.append(Path(argv[0]).name)
        return out

    def env_of(self, run: str) -> dict[str, str]:
        [entry] = [r for r in self.records() if run in " ".join(r["argv"])]
        return entry["env"]


@pytest.fixture(scope="module")
def tfw(tmp_path_factory: pytest.TempPathFactory) -> TorchFlWorld:
    return build_torch_fl_world(tmp_path_factory.mktemp("torch-fl-world"))


@pytest.fixture
def tf(tfw: TorchFlWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> TorchFl:
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tfw.gitconfig))
    monkeypatch.setenv("FIXTURE_BUILD_RECORD", str(tmp_path / "record.jsonl"))
    # this host has no NVIDIA driver as far as the checks can tell, even where the test machine has one
    path = [d for d in os.environ["PATH"].split(os.pathsep) if d and not (Path(d) / "nvidia-smi").exists()]
    monkeypatch.setenv("PATH", os.pathsep.join(path))
    return TorchFl(tfw, tmp_path / "ws", target_venv(tmp_path / "venv", tfw), tmp_path / "record.jsonl", monkeypatch)


def synced(tf: TorchFl, variant: str) -> TorchFl:
    result = tf.run("sync", variant=variant)
    assert result.exit_code == 0, result.stderr
    assert "compatibility checks | ok      | 4 passed" in result.stderr  # the recipe's probes hold on the fixture
    return tf


# --- cuda ---------------------------------------------------------------------------------------------------


def test_cuda_stages_the_cuda_torch_libraries_and_builds_with_the_toolkit_env(tf: TorchFl, monkeypatch) -> None:
    synced(tf, "cuda").provide("cuda", "cuda-torch")
    monkeypatch.setenv("CPATH", "/user/include")
    monkeypatch.setenv("LD_LIBRARY_PATH", "/user/lib")
    monkeypatch.setenv("ACCELERATOR", "metax")  # a stale shell: the recipe's variant wins
    result = tf.build(variant="cuda")
    assert result.exit_code == 0, result.stderr
    assert "step stage-cuda-assets (pre-build): + rm -rf .libtorch_cuda_assets" in result.stderr
    assert tf.runs() == ["setup.py editable_wheel"]
    env = tf.env_of("editable_wheel")
    cuda, cuda_torch = tf.world.toolchains["cuda"], tf.world.toolchains["cuda-torch"]
    assert (env["ACCELERATOR"], env["CUDA_KERNEL"], env["FLAGGEMS_KERNEL"], env["FLAGGEMS_PYTHON"]) == (
        "cuda", "1", "0", "1")
    assert env["CUDA_HOME"] == env["CUDA_PATH"] == str(cuda)
    # prepends keep what the user had, behind the toolkit's folders
    assert env["CPATH"] == f"{cuda}/include:/user/include"
    assert env["LD_LIBRARY_PATH"] == f"{cuda}/lib64:/user/lib"
    assert env["LIBRARY_PATH"].split(":")[:2] == [f"{cuda}/targets/x86_64-linux/lib/stubs", f"{cuda}/lib64"]
    assert env["FLAGOS_CUDA_ASSETS_DIR"] == str(tf.checkout / ".libtorch_cuda_assets")
    assert int(env["FLAGOS_BUILD_JOBS"]) >= 1 and env["PATH"].split(":")[0] == str(tf.python.parent)
    # the CUDA torch's CUDA libraries were staged and bundled; its libtorch_cpu.so was not
    bundled = {p.name for p in (tf.checkout / "torch_fl" / "lib").iterdir()}
    assert bundled == {*CUDA_ASSETS, "libtorch_fl.so"} and (cuda_torch / "lib" / "libtorch_cpu.so").exists()
    assert tf.build(variant="cuda").stderr.count("up to date") == 1
    # the staged libraries are part of the result: gone, they are staged again
    (tf.checkout / ".libtorch_cuda_assets" / "libtorch_cuda.so").unlink()
    restaged = tf.build(variant="cuda")
    assert "what the steps create is missing: step stage-cuda-assets" in restaged.stderr
    assert (tf.checkout / ".libtorch_cuda_assets" / "libtorch_cuda.so").exists()

    # no GPU here: what runs without one passes, the hardware-only checks are skipped with the reason
    rows = tf.validate(variant="cuda")
    assert {k: r["status"] for k, r in rows.items() if not k.startswith(("metax", "ascend"))} == {
        "prerequisites": "pass", "import": "pass", "device-count": "pass", "unit-tests": "pass",
        "cuda-devices": "skip", "cuda-main-ops": "skip"}
    assert rows["unit-tests"]["figure"] == "25 passed"
    assert rows["cuda-devices"]["message"] == "needs command nvidia-smi (absent on this host)"
    # another variant's checks are not this variant's: they are not in its report at all
    assert not [k for k in rows if k.startswith(("metax", "ascend"))], rows

    # a driver on PATH: the hardware checks run, and fail for the reason the device gives ...
    monkeypatch.setenv("PATH", f"{tf.world.nvidia}:{os.environ['PATH']}")
    rows = tf.validate("--check", "cuda-devices", "--check", "cuda-main-ops", variant="cuda")
    assert rows["cuda-devices"]["status"] == "fail" and "flagos device is unavailable" in rows["cuda-devices"][
        "message"] + rows["cuda-devices"]["fix"] + str(rows["cuda-devices"]["details"])
    assert "doctor --variant" in rows["cuda-devices"]["fix"]  # the recipe's own diagnosis
    assert rows["cuda-main-ops"]["status"] == "fail"
    # ... and pass once it reports devices
    monkeypatch.setenv("FIXTURE_FLAGOS_DEVICES", "2")
    rows = tf.validate("--check", "cuda-devices", "--check", "cuda-main-ops", variant="cuda")
    assert rows["cuda-devices"]["status"] == rows["cuda-main-ops"]["status"] == "pass", rows


def test_checks_fail_for_their_own_reasons(tf: TorchFl, monkeypatch: pytest.MonkeyPatch) -> None:
    synced(tf, "cuda").provide("cuda", "cuda-torch")
    assert tf.build(variant="cuda").exit_code == 0
    monkeypatch.setenv("FIXTURE_TORCH_FL_FAIL_TEST", "1")
    rows = tf.validate("--check", "unit-tests", variant="cuda")
    assert rows["unit-tests"]["status"] == "fail"
    assert "passed=25, failed=0 expected" in rows["unit-tests"]["message"], rows["unit-tests"]
    monkeypatch.delenv("FIXTURE_TORCH_FL_FAIL_TEST")
    # a broken install: the native library is gone
    (tf.checkout / "torch_fl" / "lib" / "libtorch_fl.so").unlink()
    rows = tf.validate("--check", "import", "--check", "device-count", variant="cuda")
    assert rows["import"]["status"] == rows["device-count"]["status"] == "fail"
    assert "libtorch_fl.so: cannot open shared object file" in str(rows["import"])
    # and the build knows its product is missing
    again = tf.build(variant="cuda")
    assert again.exit_code == 0 and "build products are missing" in again.stderr


# --- metax --------------------------------------------------------------------------------------------------


def test_metax_builds_in_three_stages_with_cu_bridge_first_on_the_users_path(tf: TorchFl, monkeypatch) -> None:
    synced(tf, "metax").provide("maca", "maca-torch")
    user_path = f"{tf.world.tools}:{os.environ['PATH']}"  # the user's own PATH, with a patchelf on it
    monkeypatch.setenv("PATH", user_path)
    monkeypatch.setenv("LD_LIBRARY_PATH", "/user/lib")
    result = tf.build(variant="metax")
    assert result.exit_code == 0, result.stderr
    # set_env_metax.sh's order: native libraries in place, the forked libtorch bundled, then the install
    assert tf.runs() == ["setup.py build_ext", "bundle_maca_libtorch.sh", "setup.py editable_wheel"]
    maca, maca_torch = tf.world.toolchains["maca"], tf.world.toolchains["maca-torch"]
    for run in ("build_ext", "bundle_maca_libtorch.sh", "editable_wheel"):
        env = tf.env_of(run)
        assert env["PATH"] == ":".join([str(tf.python.parent), f"{maca}/tools/cu-bridge/bin", f"{maca}/mxgpu_llvm/bin",
                                        f"{maca}/bin", user_path]), run
        assert env["LD_LIBRARY_PATH"].startswith(f"{maca}/lib:{maca}/tools/cu-bridge/lib:")
        assert env["LD_LIBRARY_PATH"].endswith(":/opt/mxdriver/lib:/user/lib")
        assert env["METAX_PATH"] == env["MACA_PATH"] == str(maca)
        assert env["FLAGOS_MACA_TORCH_LIB"] == f"{maca_torch}/lib"
        assert (env["ACCELERATOR"], env["FLAGOS_METAX_BOXING"], env["FLAGOS_WHEEL_LOCAL"]) == (
            "metax", "1", "metax3.8.0")
    assert sorted(p.name for p in (tf.checkout / "torch_fl" / "lib_maca").iterdir()) == sorted(MACA_TORCH_LIBS)
    assert len(tf.world.patchelf_log.read_text().splitlines()) >= len(MACA_TORCH_LIBS)
    # run time: the same SDK folders, and the boxing switch torch_fl's import needs
    runtime = result_of(tf.run("env", "--json", variant="metax").stdout)
    assert runtime["set"]["FLAGOS_METAX_BOXING"] == "1"
    rows = tf.validate(variant="metax")
    assert rows["import"]["status"] == rows["unit-tests"]["status"] == "pass"
    assert rows["metax-devices"]["message"] == "needs /dev/mxcd (absent on this host)"
    assert rows["metax-ops"]["status"] == "skip" and not [k for k in rows if k.startswith(("cuda", "ascend"))]


def test_metax_without_the_vendor_torch_stops_before_anything_runs(tf: TorchFl, tmp_path: Path, monkeypatch) -> None:
    synced(tf, "metax").provide("maca", "maca-torch")
    monkeypatch.setenv("PATH", f"{tf.world.tools}:{os.environ['PATH']}")
    bare = target_venv(tmp_path / "bare-venv", tf.world, torch=False)
    result = tf.run("build", "--ignore-host", "--json", "--python", str(bare), variant="metax")
    assert result.exit_code == 5
    error = error_of(result.stdout)
    text = " ".join([error["message"], error["fix"], *error["details"]])
    assert "torch>=2.10,<2.11 must be provided by the vendor's installer" in text, error
    assert "never installs python.preinstalled packages with pip" in text
    assert tf.records() == []  # neither a step nor setup.py ran
    assert not list((bare.parent.parent / "lib").glob("python*/site-packages/torch"))  # never pip-installed


# --- ascend -------------------------------------------------------------------------------------------------


def test_ascend_sources_cann_unsets_cuda_and_patches_the_installed_triton_ascend(tf: TorchFl, monkeypatch) -> None:
    synced(tf, "ascend").provide("cann")
    monkeypatch.setenv("CUDA_HOME", "/usr/local/cuda")
    monkeypatch.setenv("CUDA_PATH", "/usr/local/cuda")
    monkeypatch.setenv("LD_LIBRARY_PATH", "/user/lib")
    # triton-ascend is the vendor's: without it nothing runs
    refused = tf.build(variant="ascend")
    assert refused.exit_code == 5 and "triton-ascend" in refused.stderr and tf.records() == []

    pip_install(tf.python, tf.world.wheels["3.2.0"])
    cache = Path(os.environ["HOME"]) / ".triton" / "cache"
    (cache / "old-kernel").mkdir(parents=True)
    (cache / "old-kernel" / "kernel.so").write_text("compiled against the unpatched driver\n")
    result = tf.build(variant="ascend")
    assert result.exit_code == 0, result.stderr
    assert "inherited CUDA_HOME dropped" in result.stderr
    assert tf.runs() == ["setup.py editable_wheel", "patch_triton_ascend.py"]
    cann = tf.world.toolchains["cann"]
    for run in ("editable_wheel", "patch_triton_ascend.py"):
        env = tf.env_of(run)
        assert "CUDA_HOME" not in env and "CUDA_PATH" not in env, run
        # what set_env.sh exported, sourced with its real path; the user's LD_LIBRARY_PATH stays behind
        assert env["ASCEND_TOOLKIT_HOME"] == env["ASCEND_HOME_PATH"] == env["ASCEND_HOME"] == f"{cann}/latest"
        assert env["LD_LIBRARY_PATH"] == f"{cann}/latest/lib64:/user/lib"
        assert (env["ACCELERATOR"], env["ASCEND_KERNEL"], env["CUDA_KERNEL"], env["FLAGGEMS_PYTHON"]) == (
            "ascend", "1", "0", "1")
    driver = installed_driver(tf.python).read_text()
    assert "_flagos_raw_stream" in driver and "    # import torch_npu  # patched for torch_fl" in driver
    assert not cache.exists()  # kernels compiled before the patch are gone
    assert "step patch-triton-ascend (post-install): + rm -rf " + str(cache) in result.stderr

    assert "up to date" in tf.build(variant="ascend").stderr and len(tf.runs()) == 2
    # a reinstall of the same triton-ascend undoes the patch: the step's verify mark is gone, so the build runs
    # again by itself and the patch is put back
    pip_install(tf.python, tf.world.wheels["3.2.0"])
    assert "_flagos_raw_stream" not in installed_driver(tf.python).read_text()
    again = tf.build(variant="ascend")
    assert again.exit_code == 0, again.stderr
    assert ("step patch-triton-ascend: triton-ascend's triton/backends/ascend/driver.py does not hold "
            "'_flagos_raw_stream'") in again.stderr
    assert tf.runs()[-1] == "patch_triton_ascend.py" and "_flagos_raw_stream" in installed_driver(tf.python).read_text()
    assert "up to date" in tf.build(variant="ascend").stderr
    # another triton-ascend version is another input of the build: the next build re-applies the patch by itself
    pip_install(tf.python, tf.world.wheels["3.2.1"])
    upgraded = tf.build(variant="ascend")
    assert upgraded.exit_code == 0, upgraded.stderr
    assert "triton-ascend" in upgraded.stderr.split("building because", 1)[1].splitlines()[0], upgraded.stderr
    assert tf.runs()[-1] == "patch_triton_ascend.py" and "_flagos_raw_stream" in installed_driver(tf.python).read_text()

    rows = tf.validate(variant="ascend")
    assert rows["import"]["status"] == rows["unit-tests"]["status"] == "pass"
    assert rows["ascend-devices"]["message"] == "needs /dev/davinci_manager (absent on this host)"
    runtime = result_of(tf.run("env", "--json", variant="ascend").stdout)
    assert runtime["set"]["FLAGOS_DISABLE_CUDA_ASSETS"] == "1" and "CUDA_HOME" in runtime["unset"]


# --- what is missing ---------------------------------------------------------------------------------------------


def test_a_missing_toolchain_is_refused_with_its_fix_and_offline_lists_every_missing_input(
        tf: TorchFl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{tf.world.tools}:{os.environ['PATH']}")
    # nothing synced, no MetaX SDK, no forked libtorch: one refusal lists all of them
    result = tf.build("--offline", variant="metax")
    assert result.exit_code == 5, result.stderr
    assert "inputs of an offline build are missing; nothing was run" in result.stderr
    assert "source torch-fl:" in result.stderr and "flagtree-cpu sync" in result.stderr
    assert "toolchain maca (variant metax): /opt/maca is missing" in result.stderr
    assert "export FLAGTREE_CPU_TOOLCHAIN_MACA=" in result.stderr and "developer.metax-tech.com" in result.stderr
    assert "toolchain maca-torch (variant metax): /opt/vendor-libtorch is missing" in result.stderr
    assert tf.records() == [] and not tf.checkout.exists()
    # ascend: CANN's set_env.sh cannot be sourced yet, and the list still names the source and the toolkit
    ascend = tf.build("--offline", variant="ascend")
    assert ascend.exit_code == 5, ascend.stderr
    assert "source torch-fl:" in ascend.stderr
    assert "toolchain cann (variant ascend): /usr/local/Ascend/ascend-toolkit is missing" in ascend.stderr
    assert "FLAGTREE_CPU_TOOLCHAIN_CANN" in ascend.stderr
    # and on a machine without a target interpreter yet, none is made
    fresh = tf.run("build", "--ignore-host", "--offline", "--python", str(tmp_path / "no-venv" / "bin" / "python"),
                   variant="ascend")
    assert fresh.exit_code == 5 and "toolchain cann (variant ascend)" in fresh.stderr
    assert not (tmp_path / "no-venv").exists()
    # a copy elsewhere without the files the recipe expects is missing too
    synced(tf, "metax")
    partial = tmp_path / "maca-partial"
    (partial / "bin").mkdir(parents=True)
    monkeypatch.setenv("FLAGTREE_CPU_TOOLCHAIN_MACA", str(partial))
    tf.provide("maca-torch")
    half = tf.build(variant="metax")
    assert half.exit_code == 5 and f"{partial}/tools/cu-bridge/bin/cucc is missing" in half.stderr
    assert tf.records() == []


def test_setup_skip_build_prepares_the_sources_where_no_device_is(tf: TorchFl) -> None:
    result = tf.run("setup", "--skip-build", "--python", str(tf.python), variant="ascend")
    assert result.exit_code == 0, result.stderr
    assert (tf.checkout / "scripts" / "patch_triton_ascend.py").exists() and tf.records() == []
    # the full setup stops at preflight, naming the device and the toolkit, each with its fix
    full = tf.run("setup", "--python", str(tf.python), variant="ascend")
    assert full.exit_code == 7
    assert "host.devices: no /dev/davinci_manager" in full.stderr
    assert "toolchain.provisioned: toolchain cann (recipe variant ascend): missing" in full.stderr
    assert "setup --skip-build" in full.stderr and tf.records() == []


# --- doctor -------------------------------------------------------------------------------------------------------


def doctor(*args: str) -> dict[str, dict]:
    result = CliRunner().invoke(app, ["--recipe", "torch-fl", *args[:2], "doctor", "--json", "--offline", *args[2:]])
    return {f["id"]: f for f in result_of(result.stdout)["checks"]}


def test_doctor_gives_each_variant_its_own_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = ("-w", str(tmp_path / "ws"))
    # a shell left with another accelerator: a hand-run build would build that one
    monkeypatch.setenv("ACCELERATOR", "ascend")
    stale = doctor("--variant", "cuda", "--check", "workspace.build-env", *ws)["workspace.build-env"]
    assert stale["status"] == "warn" and "ACCELERATOR=ascend" in stale["detail"], stale
    assert "--variant" in stale["fix"]
    monkeypatch.delenv("ACCELERATOR")
    # the x86_64 host snapshot: no Armv9 rule, the Ascend device named (a snapshot has no /dev)
    board = doctor("--variant", "ascend", "--sysroot", str(HOSTS / "x86_64-debian"), *ws)
    assert board["host.arch"]["status"] == "ok" and board["cpu.features"]["status"] == "ok"
    assert board["host.devices"]["status"] == "skip" and "/dev/davinci_manager" in board["host.devices"]["detail"]
    # this machine: no Ascend device, no CANN toolkit -- each its own finding, with its fix
    here = doctor("--variant", "ascend", "--check", "host.devices", "--check", "toolchain.provisioned", *ws)
    assert here["host.devices"]["status"] == "fail"
    assert "no /dev/davinci_manager" in here["host.devices"]["detail"]
    assert "--device=/dev/davinci_manager" in here["host.devices"]["fix"]
    assert here["toolchain.provisioned"]["status"] == "fail"
    assert "toolchain cann (recipe variant ascend): missing /usr/local/Ascend/ascend-toolkit" in here[
        "toolchain.provisioned"]["detail"]
    assert "FLAGTREE_CPU_TOOLCHAIN_CANN" in here["toolchain.provisioned"]["fix"]
    metax = doctor("--variant", "metax", "--check", "host.devices", "--check", "toolchain.provisioned", *ws)
    assert "no /dev/mxcd" in metax["host.devices"]["detail"]
    assert "toolchain maca " in metax["toolchain.provisioned"]["detail"]
    assert "toolchain maca-torch " in metax["toolchain.provisioned"]["detail"]
    # an Arm server: the cuda and metax variants build on x86_64 only, ascend builds there
    graviton = HOSTS / "graviton4-neoverse-v2"
    cuda_arm = doctor("--variant", "cuda", "--sysroot", str(graviton), "--check", "host.arch", *ws)["host.arch"]
    assert cuda_arm["status"] == "fail" and "builds on x86_64" in cuda_arm["detail"]
    assert "libtorch_cuda.so" in cuda_arm["detail"]  # the variant's own why
    ascend_arm = doctor("--variant", "ascend", "--sysroot", str(graviton), "--check", "host.arch", *ws)
    assert ascend_arm["host.arch"]["status"] == "ok"


def test_doctor_names_the_vendor_package_the_interpreter_lacks(tf: TorchFl) -> None:
    """python.preinstalled: doctor (and setup's preflight) says which vendor package is missing, never pip."""
    ws = ("-w", str(tf.root))
    checked = ("--check", "python.preinstalled", "--python", str(tf.python))
    lacking = doctor("--variant", "ascend", *ws, *checked)["python.preinstalled"]
    assert lacking["status"] == "fail" and "triton-ascend: missing" in lacking["detail"], lacking
    assert "vendor's installer" in lacking["fix"] and "never pip" in lacking["fix"]
    pip_install(tf.python, tf.world.wheels["3.2.0"])
    there = doctor("--variant", "ascend", *ws, *checked)["python.preinstalled"]
    assert there["status"] == "ok" and "triton-ascend" in there["detail"], there
    assert doctor("--variant", "cuda", *ws, *checked)["python.preinstalled"]["status"] == "skip"  # lists none


def test_build_without_the_driver_stops_at_the_preflight(tf: TorchFl) -> None:
    # doctor's rule for the cuda variant (nvidia-smi on PATH) blocks the build: build says so first, as setup does
    path = [d for d in os.environ["PATH"].split(os.pathsep) if d and not (Path(d) / "nvidia-smi").exists()]
    tf.monkeypatch.setenv("PATH", os.pathsep.join(path))
    result = tf.run("build", "--python", str(tf.python), variant="cuda")
    assert result.exit_code == 7, result.stderr
    said = " ".join(result.stderr.split())
    assert "host.commands: no nvidia-smi on PATH" in said and "--ignore-host" in said
    assert tf.records() == []
