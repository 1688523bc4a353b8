"""The validation kernels flagtree-cpu knows: name, the recipe field that configures it, its script in
``kernels/`` and what it proves. Read by the validate stage and by its plan (which kernels a recipe runs)."""

from __future__ import annotations

from dataclasses import dataclass
from difflib import get_close_matches
from pathlib import Path
from typing import Any

from .errors import UsageError
from .recipe import Recipe

KERNELS_DIR = Path(__file__).resolve().parent / "kernels"


@dataclass(frozen=True)
class KernelInfo:
    name: str  # as on the command line and in the recipe
    field: str  # attribute of recipe.validation
    script: str  # file in kernels/
    proves: str  # for --list and the README
    imports: tuple[str, ...] = ("torch",)  # run-time distributions it cannot start without


CATALOG: tuple[KernelInfo, ...] = (
    KernelInfo("backend", "backend", "backend.py",
               "FEP phase 1: triton imports, its version fits, 'cpu' is a registered backend and libtriton's builder "
               "has exactly the recipe's create_cpu_* methods", imports=()),
    KernelInfo("tle-rms-norm", "tle_rms_norm", "tle_rms_norm.py",
               "FEP phase 2: a @triton.jit kernel calling tle_ops.rms_norm matches a float reference"),
    KernelInfo("vector-add", "vector_add", "vector_add.py",
               "an ordinary @triton.jit kernel compiles and runs through the cpu backend, exactly"),
    KernelInfo("softmax", "softmax", "softmax.py",
               "a second ordinary kernel (masked loads, reductions, exp) within tolerance"),
    KernelInfo("decode-e2e", "decode_e2e", "decode_e2e.py",
               "FEP phase 3 (optional, needs --model): a short greedy decode reaches a tokens/s floor"),
)



def kernel_info(name: str) -> KernelInfo:
    for info in CATALOG:
        if info.name == name:
            return info
    close = get_close_matches(name, [k.name for k in CATALOG], n=1)
    raise UsageError(f"there is no validation kernel {name!r}" + (f"; did you mean {close[0]!r}?" if close else ""),
                     fix="flagtree-cpu validate --list shows the kernels: " + ", ".join(k.name for k in CATALOG))


def configured(recipe: Recipe) -> list[tuple[KernelInfo, Any]]:
    """The kernels the recipe configures, in FEP order, with their settings."""
    if recipe.validation is None:
        return []
    return [(info, getattr(recipe.validation, info.field)) for info in CATALOG
            if getattr(recipe.validation, info.field) is not None]
