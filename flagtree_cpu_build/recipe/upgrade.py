"""Schema versions 1 and 2 -> 3. Version 2 -> 3 only changes the number (version 3 adds keys and changes
none); version 1 -> 2 is the same recipe in the general form, below.

``to_current`` is what the loader calls so every older recipe keeps working, with a one-line notice.
``upgrade_data`` converts loaded v1 data (plain dicts) into v2 data; the loader calls it so every v1
recipe keeps working, with a one-line notice. ``upgrade_text`` (in ``upgrade_text``) rewrites a v1 file as v2 text for
`flagtree-cpu recipe upgrade`: top-level sections the conversion leaves alone are copied line for line,
comments included; a changed section is written anew, keeping the comment lines above it.

What changes (everything else is the same key in both versions):

* ``platform.arch`` (one list: where it builds *and* runs) -> ``platform.host.arch``; ``cpu_features``
  and ``sve_vector_bits`` -> ``platform.target``. Version 1 hard-coded FlagTree's Armv9 host rules for
  every recipe; a v1 recipe whose hosts include aarch64 keeps them, now written out as
  ``platform.host.requires`` (GCC 12 / Clang 14 with the armv9-a flag, an OpenMP runtime).
* ``build.env`` / ``offline_env`` / ``unset_env`` / ``env_if_command`` -> env operations
  (``env: {set, unset, if_command}``); ``runtime.env`` -> ``runtime.env.set``.
* ``artifacts.*.strip_components`` -> ``root.strip``.
* ``resources.workdir_disk_gb`` / ``triton_home_disk_gb`` -> ``resources.disk``.
* ``validation.<kernel>`` -> ``checks: [{uses: flagtree/<kernel>, with: ...}]``.
"""

from __future__ import annotations

import copy
from typing import Any

_KERNELS = ("backend", "tle-rms-norm", "vector-add", "softmax", "decode-e2e")
_CHECK_KEYS = ("required", "timeout")

# What version 1's engine checked on every aarch64 host, whatever the recipe said (doctor's
# toolchain.compiler and toolchain.openmp): kept for v1 recipes, as data.
_V1_ARM_COMPILER = {
    "env": "CXX", "default": "c++", "min": {"gcc": 12, "clang": 14},
    "flags": ["-march=armv9-a+sve2+i8mm+bf16"],
    "why": "FlagTree's CMake adds -march=armv9-a+sve2+i8mm+bf16 on aarch64",
    "fix": "apt-get install -y gcc-12 g++-12 && export CC=gcc-12 CXX=g++-12",
}
_V1_OPENMP = {
    "name": "OpenMP runtime", "any_of": ["libgomp.so", "libomp.so"], "compiler_env": "CC",
    "why": "JIT-compiled kernels link it", "fix": "apt-get install -y libomp-dev libgomp1",
}


def to_current(data: dict[str, Any]) -> dict[str, Any]:
    """Recipe data of any supported version as the current version's data (a new dict)."""
    if data.get("schema_version") == 1:
        data = upgrade_data(data)
    return v2_to_v3(data)


def v2_to_v3(data: dict[str, Any]) -> dict[str, Any]:
    """Version 3 only adds keys (values read from sources, named builds, FetchContent inputs, computed
    placeholders, host and toolchain versions, artifact ownership): a version 2 recipe means the same as
    version 3, so only the number changes."""
    return {**data, "schema_version": 3}


def upgrade_data(data: dict[str, Any]) -> dict[str, Any]:
    """v1 recipe data -> v2 recipe data (a new dict; unknown keys are carried over for the validator)."""
    old = copy.deepcopy(data)
    new: dict[str, Any] = {}
    for key, value in old.items():
        if key == "schema_version":
            new[key] = 2
        elif key == "platform" and isinstance(value, dict):
            new[key] = _platform(value)
        elif key == "artifacts" and isinstance(value, dict):
            new[key] = {name: _artifact(a) for name, a in value.items()}
        elif key == "build" and isinstance(value, dict):
            new[key] = _build(value)
        elif key == "runtime" and isinstance(value, dict):
            new[key] = _runtime(value)
        elif key == "resources" and isinstance(value, dict):
            new[key] = _resources(value)
        elif key == "validation" and isinstance(value, dict):
            new["checks"] = _checks(value)
        else:
            new[key] = value
    return new


def _platform(value: dict[str, Any]) -> dict[str, Any]:
    host: dict[str, Any] = {}
    target: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for key, item in value.items():
        if key in ("os", "arch"):
            host[key] = item
        elif key in ("cpu_features", "sve_vector_bits"):
            target[key] = item
        else:
            rest[key] = item  # unknown: left where it was, so the validator names it
    arches = host.get("arch")
    if isinstance(arches, list):
        compiler = dict(_V1_ARM_COMPILER)
        if "aarch64" not in arches:  # version 1 probed the flag only on aarch64 hosts
            del compiler["flags"]
        host["requires"] = {"compilers": [compiler], "libraries": [_V1_OPENMP]}
    out: dict[str, Any] = {"host": host}
    if target:
        out["target"] = target
    out.update(rest)
    return out


def _artifact(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        if key == "strip_components":
            out["root"] = {"strip": item}
        else:
            out[key] = item
    return out


def _env_ops(env: Any, unset: Any = None, if_command: Any = None) -> dict[str, Any]:
    ops: dict[str, Any] = {}
    if unset is not None:
        ops["unset"] = unset
    if env is not None:
        ops["set"] = env
    if if_command is not None:
        ops["if_command"] = [{"command": c.get("command"), "set": c.get("env")} if isinstance(c, dict) else c
                             for c in if_command] if isinstance(if_command, list) else if_command
    return ops


def _build(value: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    env = _env_ops(value.get("env"), value.get("unset_env"), value.get("env_if_command"))
    for key, item in value.items():
        if key in ("env", "unset_env", "env_if_command"):
            if "env" not in out and env:
                out["env"] = env
        elif key == "offline_env":
            out[key] = {"set": item}
        else:
            out[key] = item
    return out


def _runtime(value: dict[str, Any]) -> dict[str, Any]:
    return {key: ({"set": item} if key == "env" else item) for key, item in value.items()}


def _resources(value: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    disk = []
    for key, item in value.items():
        if key == "workdir_disk_gb":
            disk.append({"path": "{workdir}", "gb": item, "label": "workdir"})
        elif key == "triton_home_disk_gb":
            disk.append({"path": "{triton_home}/.triton", "gb": item, "label": "~/.triton"})
        else:
            out[key] = item
    if disk:
        out = {"disk": disk, **out}
    return out


def _checks(value: dict[str, Any]) -> list[Any]:
    timeout = value.get("timeout")
    checks: list[Any] = []
    for key, item in value.items():
        if key == "timeout":
            continue
        if key not in _KERNELS or not (item is None or isinstance(item, dict)):
            checks.append({"uses": f"flagtree/{key}"})  # the validator names the unknown preset
            continue
        settings = dict(item or {})
        check: dict[str, Any] = {"uses": f"flagtree/{key}"}
        for name in _CHECK_KEYS:
            if name in settings:
                value = settings.pop(name)
                if value is not None:  # null: version 1's "the validation default"
                    check[name] = value
        if key == "decode-e2e" and "required" not in check:
            check["required"] = False  # v1's default for this kernel
        if "timeout" not in check and timeout is not None and timeout != 600:
            check["timeout"] = timeout
        if settings:
            check["with"] = settings
        checks.append(check)
    return checks


# --- the notice ----------------------------------------------------------------------------------------------


_NOTED: Any = None  # WeakKeyDictionary[UI, set[str]]: the files each command's UI was told about


def upgrade_notice(recipe: Any) -> str | None:
    """The one line that tells a user their file is read as an older schema version, or None."""
    if recipe.upgraded_from is None:
        return None
    return (f"note: {recipe.file} is schema version {recipe.upgraded_from}, read as version 3; "
            f"`flagtree-cpu recipe upgrade {recipe.file}` rewrites it")


def note_upgraded(ui: Any, recipe: Any) -> None:
    """Show ``upgrade_notice`` on stderr, once per command (a command may load its recipe more than once)."""
    global _NOTED
    import weakref

    notice = upgrade_notice(recipe)
    if notice is None:
        return
    if _NOTED is None:
        _NOTED = weakref.WeakKeyDictionary()
    shown = _NOTED.setdefault(ui, set())
    if recipe.file not in shown:
        shown.add(recipe.file)
        ui.info(notice)


# --- where a v1 key went ----------------------------------------------------------------------------


def upgrade_path(path: tuple[str | int, ...], data: dict[str, Any]) -> tuple[str | int, ...]:
    """The v2 key path of v1 key path ``path`` in v1 data ``data`` (unchanged where the key did not move).

    The loader records the file line of every v1 key; mapping them onto the upgraded data lets a problem
    found after the upgrade still name the line (and quote the text) the user wrote."""
    if len(path) < 2:
        return ("checks",) if path == ("validation",) else path
    head, key, rest = path[0], path[1], path[2:]
    if head == "platform":
        if key in ("os", "arch"):
            return ("platform", "host", key, *rest)
        if key in ("cpu_features", "sve_vector_bits"):
            return ("platform", "target", key, *rest)
    elif head == "artifacts" and rest[:1] == ("strip_components",):
        return ("artifacts", key, "root", "strip", *rest[1:])
    elif head == "build":
        if key in ("env", "offline_env") and rest:
            return ("build", key, "set", *rest)
        if key == "unset_env":
            return ("build", "env", "unset", *rest)
        if key == "env_if_command":
            if len(rest) >= 2 and rest[1] == "env":
                return ("build", "env", "if_command", rest[0], "set", *rest[2:])
            return ("build", "env", "if_command", *rest)
    elif head == "runtime" and key == "env" and rest:
        return ("runtime", "env", "set", *rest)
    elif head == "resources" and key in ("workdir_disk_gb", "triton_home_disk_gb"):
        resources = data.get("resources")
        disk = [k for k in resources if k in ("workdir_disk_gb", "triton_home_disk_gb")] \
            if isinstance(resources, dict) else [key]
        return ("resources", "disk", disk.index(key), "gb", *rest)
    elif head == "validation":
        validation = data.get("validation")
        if key == "timeout" or not isinstance(validation, dict):
            return path  # applies to every check: no one place in v2
        index = [k for k in validation if k != "timeout"].index(key)
        if not rest:
            return ("checks", index)
        if rest[0] in _CHECK_KEYS:
            return ("checks", index, *rest)
        return ("checks", index, "with", *rest)
    return path


def upgrade_positions(positions: dict[Any, Any], data: dict[str, Any]) -> dict[Any, Any]:
    """``positions`` (v1 key path -> where it is written) re-keyed by the v2 paths of ``upgrade_data(data)``."""
    moved = {}
    for path, position in positions.items():
        try:
            moved[upgrade_path(path, data)] = position
        except (ValueError, TypeError):  # a malformed v1 layout: keep the path, the validator names it
            moved[path] = position
    return moved


def moved_key_problem(path: tuple[str | int, ...], data: dict[str, Any]) -> tuple[str, str] | None:
    """(message, fix) for an unknown key at ``path`` of a version 2 file that is a version 1 name, e.g.
    ``build.unset_env`` (now ``build.env.unset``); None for any other key. Without this the did-you-mean
    would guess from spelling alone (unset_env -> offline_env)."""
    from .loader import format_path

    try:
        moved = upgrade_path(path, data)
    except (ValueError, TypeError):
        return None
    if moved == path:
        return None
    return (f"unknown key {path[-1]!r}: that is version 1's name; version 2 writes it as {format_path(moved)}",
            "move it there, or write the recipe as version 1 and run `flagtree-cpu recipe upgrade FILE`")

