"""The presets library: named, parameterised checks a recipe opts into with ``uses: LIBRARY/NAME``.

A preset is a script run in the target interpreter with its parameters as ``--expect JSON``; it ends
with one ``FLAGTREE_CPU_RESULT {json}`` line and judges itself (version ranges, fixes included), so the
check runner knows nothing about any preset. The ``flagtree`` library holds the Arm64 FEP's kernels;
this module holds only their declarations — what each proves and which parameters it takes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from difflib import get_close_matches
from pathlib import Path
from typing import Any

PRESETS_DIR = Path(__file__).resolve().parent
REQUIRED: Any = object()  # a parameter without a default
# a script's verdict line starts with this (each library's _common.py spells it too: the scripts run in the
# target interpreter, which cannot import this package)
RESULT_MARKER = "FLAGTREE_CPU_RESULT "


@dataclass(frozen=True)
class Param:
    doc: str
    default: Any = REQUIRED


@dataclass(frozen=True)
class Preset:
    name: str  # LIBRARY/NAME
    script: str  # relative to this folder
    proves: str
    parameters: dict[str, Param] = field(default_factory=dict)
    imports: tuple[str, ...] = ("torch",)  # run-time distributions it cannot start without
    needs_model: bool = False  # skipped without --model, which it then receives

    @property
    def path(self) -> Path:
        return PRESETS_DIR / self.script

    def settings(self, given: dict[str, Any]) -> dict[str, Any]:
        """The parameters the script receives: the recipe's over the defaults."""
        return {**{k: p.default for k, p in self.parameters.items() if p.default is not REQUIRED}, **given}


_FEP_METHODS = [
    "create_cpu_flash_attn_decode", "create_cpu_fused_decode_step", "create_cpu_fused_mlp",
    "create_cpu_fused_transformer_layer", "create_cpu_neon_sdot", "create_cpu_rms_norm", "create_cpu_sdot_gemv",
    "create_cpu_sdot_gemv_fused_bf16", "create_cpu_sdot_pack_weights", "create_cpu_swiglu",
]

PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("flagtree/backend", "flagtree/backend.py",
           "FEP phase 1: triton imports, its version fits, the backends are registered and libtriton's builder "
           "has exactly the listed methods with the prefix",
           {"triton_version": Param("expected triton.__version__ range"),
            "backends": Param("backends that must be registered", ["cpu"]),
            "builder_prefix": Param("prefix of the builder methods to compare", "create_cpu_"),
            "builder_methods": Param("exact set of builder methods with that prefix", _FEP_METHODS)},
           imports=()),
    Preset("flagtree/tle-rms-norm", "flagtree/tle_rms_norm.py",
           "FEP phase 2: a @triton.jit kernel calling tle_ops.rms_norm matches a float reference",
           {"dtype": Param("element type: bfloat16, float16 or float32", "bfloat16"),
            "dim": Param("vector length D", 128), "eps": Param("epsilon", 1e-6),
            "max_error": Param("largest accepted absolute error", 0.0625)}),
    Preset("flagtree/vector-add", "flagtree/vector_add.py",
           "an ordinary @triton.jit kernel compiles and runs through the backend, exactly",
           {"size": Param("number of elements", 98432)}),
    Preset("flagtree/softmax", "flagtree/softmax.py",
           "a second ordinary kernel (masked loads, reductions, exp) within tolerance",
           {"rows": Param("rows", 64), "cols": Param("columns", 781),
            "tolerance": Param("largest accepted absolute error", 1e-5)}),
    Preset("flagtree/decode-e2e", "flagtree/decode_e2e.py",
           "FEP phase 3 (needs --model): a short greedy decode reaches a tokens/s floor",
           {"max_new_tokens": Param("tokens to generate", 32),
            "min_tokens_per_s": Param("throughput floor, if any", None)},
           needs_model=True),
)}


def preset_problems(name: str, given: dict[str, Any]) -> list[tuple[str | None, str, str]]:
    """(parameter or None for the preset itself, message, fix) for a recipe's `uses:` and `with:`."""
    preset = PRESETS.get(name)
    if preset is None:
        close = get_close_matches(name, list(PRESETS), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return [(None, f"there is no preset {name!r}{hint}", "presets are: " + ", ".join(PRESETS))]
    problems: list[tuple[str | None, str, str]] = []
    for key in given:
        if key not in preset.parameters:
            close = get_close_matches(key, list(preset.parameters), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append((key, f"preset {name} has no parameter {key!r}{hint}",
                             "its parameters: " + ", ".join(preset.parameters)))
    for key, param in preset.parameters.items():
        if param.default is REQUIRED and key not in given:
            problems.append((None, f"preset {name} needs the parameter {key!r} ({param.doc})",
                             f"add it under `with:`, e.g. with: {{{key}: ...}}"))
        elif key in given and param.default not in (REQUIRED, None) and given[key] is not None \
                and not _same_kind(param.default, given[key]):
            problems.append((key, f"{key} should be {_kind(param.default)}, got {given[key]!r}",
                             f"the default is {param.default!r}"))
    return problems


def _same_kind(default: Any, value: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, (int, float)):
        return isinstance(value, (int, float))
    return isinstance(value, type(default))


def _kind(value: Any) -> str:
    return {bool: "true or false", int: "a number", float: "a number", str: "text", list: "a list"}.get(
        type(value), type(value).__name__)


def preset(name: str) -> Preset:
    return PRESETS[name]
