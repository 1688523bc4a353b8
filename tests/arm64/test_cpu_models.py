"""doctor on real (emulated) aarch64 CPU models, and a real Armv9 program built with the recipe's flags.

For each QEMU CPU model of the matrix, `flagtree-cpu doctor --json` runs inside the board and its CPU
verdicts are compared with what the model is (EMULATION.md measured each). Then the board's own gcc-12
compiles a program with FlagTree's flags and it is run under every model: it computes the right numbers
exactly where doctor said the CPU can run FlagTree's code, dies with SIGILL where doctor said features are
missing, and prints wrong numbers where doctor said the SVE vector length is not 128-bit.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.arm64.machine import ARMV9_128, MODELS, Machine, Ran, model_id, report_line
from tests.support.envelope import result_of

PROGRAM = Path(__file__).parent / "programs" / "armv9_probe.c"
FLAGS = ["-O2", "-march=armv9-a+sve2+i8mm+bf16", "-msve-vector-bits=128"]  # the recipe's compiler flags

# what each model must get from doctor: (cpu.features, cpu.sve-length), and words the verdict must carry
EXPECTED = {
    "neoverse-n1": ("fail", "skip", ["lacks", "sve2", "i8mm", "bf16"]),
    "neoverse-v1": ("fail", "fail", ["lacks sve2"]),
    "neoverse-n2": ("ok", "ok", []),
    "max,sve128=on": ("ok", "ok", []),
    "max": ("ok", "fail", []),
}
_doctor_runs: dict[str, Ran] = {}


def doctor_of(machine: Machine, cpu: str, home: Path) -> Ran:
    """doctor --json on the board under ``cpu`` (once per model; the other tests reuse the verdicts)."""
    if cpu not in _doctor_runs:
        _doctor_runs[cpu] = machine.tool("-w", str(home / "ws"), "doctor", "--json", "--offline", cpu=cpu,
                                         home=home)
    return _doctor_runs[cpu]


def checks(run: Ran) -> dict[str, dict]:
    return {c["id"]: c for c in result_of(run.stdout)["checks"]}


@pytest.fixture(scope="module")
def board_home(machine: Machine) -> Path:
    home = machine.host_path("/tmp/tier/cpu-models-home")
    home.mkdir(parents=True, exist_ok=True)
    return machine.inside(home)


@pytest.mark.parametrize("cpu", MODELS, ids=[model_id(m) for m in MODELS])
def test_doctor_judges_each_cpu_model(machine: Machine, board_home: Path, cpu: str) -> None:
    run = doctor_of(machine, cpu, board_home)
    assert run.returncode in (0, 7), run
    found = checks(run)
    features, length, words = EXPECTED[cpu]
    assert found["host.arch"]["status"] == "ok", run
    assert found["cpu.features"]["status"] == features, found["cpu.features"]
    assert found["cpu.sve-length"]["status"] == length, found["cpu.sve-length"]
    for word in words:
        assert word in found["cpu.features"]["detail"], found["cpu.features"]
    # the real gcc-12 of the board takes FlagTree's -march whatever the CPU model (it only compiles)
    assert found["toolchain.compiler"]["status"] == "ok", found["toolchain.compiler"]
    assert "armv9-a+sve2+i8mm+bf16" in found["toolchain.compiler"]["detail"]
    if features == "fail":
        assert "SIGILL" in found["cpu.features"]["detail"] or "illegal instruction" in found["cpu.features"]["detail"]
        assert found["cpu.features"]["fix"], found["cpu.features"]
    _record_verdict(cpu, found, run)


def test_sve_length_comes_from_prctl_when_the_kernel_file_is_absent(machine: Machine, board_home: Path) -> None:
    """Under QEMU /proc/sys/abi/sve_default_vector_length does not exist (the kernel is x86): the length is
    asked of the process itself, so 512-bit `max` fails the 128-bit requirement and says why, with a fix
    that can work here (not the echo into /proc/sys/abi)."""
    assert not machine.host_path("/proc/sys/abi/sve_default_vector_length").exists()
    wide = checks(doctor_of(machine, "max", board_home))["cpu.sve-length"]
    assert "512" in wide["detail"] and "wrong" in wide["detail"], wide
    assert "sve_default_vector_length" not in wide["fix"].split("#")[0] or "QEMU_CPU" in wide["fix"], wide
    assert "sve128=on" in wide["fix"] or "128-bit" in wide["fix"], wide
    right = checks(doctor_of(machine, "max,sve128=on", board_home))["cpu.sve-length"]
    assert "128" in right["detail"] and "prctl" in right["detail"], right
    v1 = checks(doctor_of(machine, "neoverse-v1", board_home))["cpu.sve-length"]
    assert "256" in v1["detail"], v1


QEMU72 = "/usr/local/lib/qemu-7.2/qemu-aarch64-static"  # bookworm's QEMU, kept in the rootfs by emu.sh


def test_doctor_trusts_uname_and_auxv_when_the_emulator_passes_the_hosts_cpuinfo_through(
        machine: Machine, board_home: Path) -> None:
    """QEMU 7.2 shows the aarch64 program the x86 host's /proc/cpuinfo ("AuthenticAMD ... AMD EPYC") while
    uname says aarch64 and the auxiliary vector has the Arm features. doctor used to call the CPU "an x86_64
    CPU" and fail cpu.features; it now goes by uname and HWCAP, and says the two disagreed."""
    python = ["/opt/venv/bin/python"]
    leaked = machine.run([QEMU72, "-cpu", "max,sve128=on", *python, "-c",
                          "import platform; t = open('/proc/cpuinfo').read(); "
                          "print(platform.machine(), 'vendor_id' in t, 'CPU implementer' in t)"], cpu="max,sve128=on")
    assert leaked.returncode == 0, leaked
    assert leaked.stdout.split() == ["aarch64", "True", "False"], f"QEMU 7.2 no longer leaks the host cpuinfo: {leaked}"
    run = machine.run([QEMU72, "-cpu", "max,sve128=on", *python, "-m", "flagtree_cpu_build", "-w",
                       str(board_home / "ws72"), "doctor", "--json", "--offline"], cpu="max,sve128=on", home=board_home)
    found = checks(run)
    assert found["host.arch"]["status"] == "ok", found["host.arch"]
    features = found["cpu.features"]
    assert features["status"] != "fail" and "x86_64 CPU" not in features["detail"], features
    assert "sve2" in features["detail"] and "HWCAP" in features["detail"], features
    assert "x86_64" in features["detail"] and "uname" in features["detail"], features  # says what it overruled
    report_line("doctor", f"QEMU 7.2 max,sve128=on | exit {run.returncode} | {features['status']}: "
                f"{features['detail'][:160]}")


@pytest.fixture(scope="module")
def probe_binary(machine: Machine) -> Path:
    """The Armv9 program compiled on the board by its own gcc-12 with the recipe's flags."""
    folder = machine.host_path("/tmp/tier/armv9-probe")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "armv9_probe.c").write_text(PROGRAM.read_text())
    inside = machine.inside(folder)
    # compiling needs no SVE at run time: any model will do
    built = machine.run(["gcc-12", *FLAGS, "-o", "armv9_probe", "armv9_probe.c"], cpu="neoverse-n1", cwd=inside)
    assert built.returncode == 0, built
    return inside / "armv9_probe"


def expected_output() -> str:
    """What the program prints on a CPU with 128-bit SVE, SVE2, i8mm and bf16 (computed here, not recorded)."""
    n = 32
    add = sum(i + 1000 for i in range(n))

    def sqrdmulh(a: int, b: int) -> int:
        return max(-(2**31), min(2**31 - 1, (2 * a * b + 2**31) >> 32))

    x = [1 << 30, 1 << 29, -(1 << 30), 12345]
    y = [1 << 30, 1 << 30, 1 << 30, 1 << 20]
    m1 = [i + 1 for i in range(16)]
    m2 = [(i % 3) - 1 for i in range(16)]
    mmla = [sum(m1[i * 8 + k] * m2[j * 8 + k] for k in range(8)) for i in range(2) for j in range(2)]
    bfdot = [1.0 * 3.0 + 2.0 * 3.0] * 4
    return (f"add {add}\n"
            f"sqrdmulh {' '.join(str(sqrdmulh(a, b)) for a, b in zip(x, y, strict=True))}\n"
            f"smmla {' '.join(map(str, mmla))}\n"
            f"bfdot {' '.join(f'{v:g}' for v in bfdot)}\n")


@pytest.mark.parametrize("cpu", MODELS, ids=[model_id(m) for m in MODELS])
def test_armv9_program_is_right_exactly_where_doctor_says_it_can_run(machine: Machine, board_home: Path,
                                                                     probe_binary: Path, cpu: str) -> None:
    found = checks(doctor_of(machine, cpu, board_home))
    safe = found["cpu.features"]["status"] == "ok" and found["cpu.sve-length"]["status"] == "ok"
    run = machine.run([str(probe_binary)], cpu=cpu)
    if safe:
        assert cpu in ARMV9_128
        assert run.returncode == 0 and run.stdout == expected_output(), run
    elif found["cpu.features"]["status"] == "fail":  # doctor predicted an illegal instruction
        assert run.returncode in (-signal.SIGILL, 128 + signal.SIGILL), run
    else:  # the features are there, the vector length is not 128-bit: it runs, and it is wrong
        assert found["cpu.sve-length"]["status"] == "fail"
        assert run.returncode == 0 and run.stdout != expected_output(), run
    _record_program(cpu, run)


# --- the per-model verdict table the tier prints at the end (and the closing note quotes) ---------------

def _record_verdict(cpu: str, found: dict[str, dict], run: Ran) -> None:
    row = " | ".join(f"{found[k]['status']}: {found[k]['detail'][:100]}" for k in ("cpu.features", "cpu.sve-length"))
    report_line("doctor", f"{cpu} | exit {run.returncode} | {row} | {run.seconds:.1f} s")


def _record_program(cpu: str, run: Ran) -> None:
    outcome = "SIGILL" if run.returncode in (-signal.SIGILL, 128 + signal.SIGILL) else (
        "right" if run.stdout == expected_output() else f"WRONG ({run.stdout.splitlines()[0] if run.stdout else ''})")
    report_line("program", f"{cpu} | exit {run.returncode} | {outcome}")
