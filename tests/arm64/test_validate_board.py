"""validate on the (emulated) aarch64 board with what PyPI really serves there: triton 3.5.0 (the first
release with an aarch64 wheel; its interpreter runs the kernels) and torch 2.10.0, the last CPU-only
aarch64 build — installed by the project's own [test] extra, which is the first thing checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.arm64.machine import MODELS, VENV, Machine, model_id, report_line
from tests.support.envelope import result_of

PYTHON = str(VENV / "bin" / "python")


def test_the_test_extra_resolves_to_the_cpu_torch_on_aarch64(machine: Machine) -> None:
    """`pip install .[test]` on an aarch64 board (emu.sh does it) gets PyPI's CPU torch: no CUDA build, no
    nvidia-* packages (torch 2.11 and later are the CUDA 13 build there)."""
    listed = machine.run([PYTHON, "-m", "pip", "list", "--format=freeze"], cpu="neoverse-n2")
    assert listed.returncode == 0, listed
    names = {line.split("==")[0].lower(): line.split("==")[-1] for line in listed.stdout.splitlines() if "==" in line}
    assert names.get("torch") == "2.10.0" and names.get("triton") == "3.5.0", names
    assert not [n for n in names if n.startswith(("nvidia-", "cuda-"))], sorted(names)
    cuda = machine.run([PYTHON, "-c", "import torch; print(torch.__version__, torch.version.cuda)"],
                       cpu="neoverse-n2")
    assert cuda.stdout.split() == ["2.10.0+cpu", "None"], cuda


@pytest.mark.parametrize("cpu", MODELS, ids=[model_id(m) for m in MODELS])
def test_validate_runs_the_ordinary_kernels_for_real_on_aarch64(machine: Machine, board_tmp: Path,
                                                                cpu: str) -> None:
    """The recipe pins torch==2.10.0+cpu; PyPI's aarch64 wheel says 2.10.0 in its metadata and 2.10.0+cpu in
    torch.__version__: it is that build, so the prerequisites pass and the kernels run. vector-add and
    softmax pass in Triton's interpreter; the FlagTree-only checks fail and say it is not FlagTree's build."""
    inside = machine.inside(board_tmp)
    ran = machine.tool("-w", str(inside / "ws"), "validate", "--python", PYTHON, "--json", cpu=cpu,
                       home=inside, env={"TRITON_INTERPRET": "1"}, timeout=900)
    assert ran.returncode == 6, ran  # the FlagTree-only checks fail: this is not FlagTree's triton
    rows = {c["kernel"]: c for c in result_of(ran.stdout)["results"]}
    prerequisites = rows["prerequisites"]
    assert prerequisites["status"] == "pass", prerequisites
    assert "2.10.0+cpu" in prerequisites["figure"], prerequisites
    for kernel in ("vector-add", "softmax"):
        assert rows[kernel]["status"] == "pass", rows[kernel]
    # the FlagTree-only checks fail with the fix that applies: this triton is not FlagTree's at all
    for flagtree_only in ("backend", "tle-rms-norm"):
        row = rows[flagtree_only]
        assert row["status"] == "fail" and "3.5.0" in row["figure"], row
        assert "not FlagTree's CPU build" in row["fix"] and "flagtree-cpu link" not in row["fix"], row
    report_line("validate", f"{cpu} | exit {ran.returncode} | "
                + ", ".join(f"{name} {row['status']}" for name, row in rows.items()) + f" | {ran.seconds:.1f} s")
