"""Schema version 1 -> 2: the same recipe in the general form.

``upgrade_data`` converts loaded v1 data (plain dicts) into v2 data; the loader calls it so every v1
recipe keeps working, with a one-line notice. ``upgrade_text`` rewrites a v1 file as v2 text for
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
import re
from dataclasses import dataclass, field
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
    return (f"note: {recipe.file} is schema version {recipe.upgraded_from}, read as version 2; "
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


# --- the file rewrite ------------------------------------------------------------------------------------


class UpgradeError(Exception):
    """The rewritten text does not read back as the upgraded recipe: a bug in the rewrite, never the user's."""


def upgrade_text(text: str) -> str:
    """A v1 recipe file's text as v2, keeping what can be kept.

    A mapping is split into blocks, one per key (a block also owns the blank and comment lines right above
    its key). A block the upgrade leaves alone is copied line for line; a block that only moves (`unset_env`
    -> `env.unset`, `env` -> `env.set`) is copied, indented and renamed; a changed mapping is rewritten key
    by key the same way; anything else is written anew by PyYAML with the comment lines of what it replaces
    just above it, so no comment is lost. ``schema_version: 1`` becomes 2 in place.

    The result is read back and compared with ``upgrade_data`` of the original; raises UpgradeError when
    they differ (after trying a plain rewrite with every comment on top)."""
    import yaml

    old = yaml.safe_load(text)
    if not isinstance(old, dict) or old.get("schema_version") != 1:
        raise ValueError("upgrade_text takes a schema version 1 recipe")
    new = upgrade_data(old)
    lines = text.splitlines()
    candidates = []
    try:
        body = _Rewrite(old).mapping(lines, 0, 2, old, new, (), (), ())
    except _Unfit:
        body = None
    if body is not None:
        candidates.append(body)
    candidates.append(_plain(lines, new))
    for candidate in candidates:
        result = "\n".join(candidate).rstrip("\n") + "\n"
        try:
            if yaml.safe_load(result) == new:
                return result
        except yaml.YAMLError:
            continue
    raise UpgradeError("the rewritten recipe does not read back as the upgraded one")


class _Unfit(Exception):
    """A layout the line-keeping rewrite does not follow (the caller writes the value anew)."""


@dataclass
class _Block:
    key: Any
    v1_path: tuple[Any, ...]  # where its value is in the v1 data
    value: Any  # that value
    ind: int  # indentation of its key line
    lead: list[str] = field(default_factory=list)  # blank and comment lines right above the key
    lines: list[str] = field(default_factory=list)  # the key line and every line under it

    @property
    def inline(self) -> bool:
        """Whether the key line carries the value itself (`root: {strip: 1}`) rather than lines below."""
        rest = self.lines[0][self.ind:][_KEY_RE.match(self.lines[0][self.ind:]).end():].strip()  # type: ignore[union-attr]
        return bool(rest) and not rest.startswith("#")

    @property
    def comments(self) -> list[str]:
        return [x.strip() for x in self.lead + self.lines[1:] if x.strip().startswith("#")]

    def placed(self, ind: int, key: Any) -> list[str]:
        """Its lines with the key at indentation ``ind`` and named ``key``."""
        shift = ind - self.ind
        if shift < 0:
            raise _Unfit
        first = self.lines[0][self.ind:]
        match = _KEY_RE.match(first)
        assert match is not None
        if key != self.key:
            first = str(key) + first[match.end(1):]
        moved = [(" " * shift + x) if x.strip() else x for x in self.lead + self.lines[1:]]
        return moved[:len(self.lead)] + [" " * ind + first] + moved[len(self.lead):]


_KEY_RE = re.compile(r"(\"(?:[^\"\\]|\\.)*\"|'(?:[^']|'')*'|[^\s#'\"{\[&*!|>%@`,-][^#]*?|-[^\s#][^#]*?)\s*:(?=\s|$)")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _is_comment(line: str) -> bool:
    return not line.strip() or line.lstrip().startswith("#")


def _key_at(line: str, ind: int) -> tuple[bool, Any]:
    """Whether a line opens a key at indentation ``ind``, and that key as YAML reads it."""
    import yaml

    if _indent(line) != ind or _is_comment(line):
        return False, None
    match = _KEY_RE.match(line[ind:])
    if not match:
        return False, None
    try:
        return True, yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        return False, None


class _Rewrite:
    def __init__(self, v1: dict[str, Any]):
        self.v1 = v1

    def split(self, lines: list[str], ind: int, old: dict[Any, Any], v1_path: tuple[Any, ...]
              ) -> tuple[list[str], list[_Block]]:
        """The lines before the first key, and one block per key at indentation ``ind``."""
        head: list[str] = []
        blocks: list[_Block] = []
        for line in lines:
            opens, key = _key_at(line, ind)
            if not opens:
                (blocks[-1].lines if blocks else head).append(line)
                continue
            above = blocks[-1].lines if blocks else head
            lead: list[str] = []
            while len(above) > (1 if blocks else 0) and _is_comment(above[-1]) and (
                    not above[-1].strip() or _indent(above[-1]) <= ind):
                lead.insert(0, above.pop())
            if key not in old:
                raise _Unfit
            blocks.append(_Block(key, v1_path + (key,), old[key], ind, lead, [line]))
        if [b.key for b in blocks] != list(old):
            raise _Unfit
        return head, blocks

    def landing(self, block: _Block, path: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """Where under v2 ``path`` the block's value lands: () for ``path`` itself, (KEY,) for its key KEY,
        (KEY, SUB) for a key inside KEY; None when elsewhere."""
        try:
            moved = upgrade_path(block.v1_path, self.v1)
        except (ValueError, TypeError):
            moved = block.v1_path
        if moved[:len(path)] != path:
            return None
        return moved[len(path):]

    def mapping(self, lines: list[str], ind: int, step: int, old: dict[Any, Any], new: dict[Any, Any],
                path: tuple[Any, ...], v1_path: tuple[Any, ...], inherited: tuple[_Block, ...]) -> list[str]:
        """The v2 lines of the mapping ``new`` (at v2 ``path``), whose v1 form ``old`` (at ``v1_path``) is
        written in ``lines`` at indentation ``ind``; ``inherited`` are blocks of other v1 keys that move into it."""
        head, blocks = self.split(lines, ind, old, v1_path)
        homes: dict[Any, list[tuple[_Block, tuple[Any, ...]]]] = {}
        strays: list[_Block] = []
        for block in blocks + list(inherited):
            where = self.landing(block, path)
            if not where or where[0] not in new:
                strays.append(block)
            else:
                homes.setdefault(where[0], []).append((block, where[1:]))
        out = list(head)
        for key, value in new.items():
            if strays:  # what has no place in v2 keeps its comments, above the first key
                out += [" " * ind + c for b in strays for c in b.comments]
                strays = []
            out += self.entry(key, value, homes.get(key, []), ind, step, path)
        return out

    def entry(self, key: Any, value: Any, mine: list[tuple[_Block, tuple[Any, ...]]], ind: int, step: int,
              path: tuple[Any, ...]) -> list[str]:
        """The lines of v2 key ``key``, made from the v1 blocks that land in it."""
        itself = [b for b, rest in mine if rest == ()]
        inside = [(b, rest) for b, rest in mine if rest != ()]
        try:
            if len(itself) == 1 and not inside and itself[0].value == value:
                return itself[0].placed(ind, key)  # unchanged, perhaps moved or renamed
            if len(itself) == 1 and path == () and key == "schema_version" and len(itself[0].lines) == 1:
                line, n = re.subn(r"^(schema_version\s*:\s*)1(?=\s*(#|$))", r"\g<1>2", itself[0].lines[0])
                if n:
                    return itself[0].lead + [line]
            if len(itself) == 1 and isinstance(itself[0].value, dict) and isinstance(value, dict) \
                    and not itself[0].inline and itself[0].ind == ind and all(len(r) >= 1 for _, r in inside):
                block = itself[0]
                body = block.lines[1:]
                child = next((_indent(x) for x in body if not _is_comment(x)), None)
                if child is not None and child > ind:
                    return block.lead + block.lines[:1] + self.mapping(
                        body, child, child - ind, block.value, value, path + (key,), block.v1_path,
                        tuple(b for b, _ in inside))
            if not itself and isinstance(value, dict) and [r for _, r in inside] == [(k,) for k in value] \
                    and all(b.value == value[r[0]] for b, r in inside):
                out = [" " * ind + f"{key}:"]  # the v1 keys, one level down (env -> env.set)
                for block, rest in inside:
                    out += block.placed(ind + step, rest[0])
                return out
        except _Unfit:
            pass
        first = mine[0][0].lead if mine else []
        out = [""] if first and not first[0].strip() else []  # the blank line that separated it stays
        out += [" " * ind + c for b, _ in mine for c in b.comments]
        return out + [" " * ind + x for x in _dump({key: value}).splitlines()]


def _plain(lines: list[str], new: dict[str, Any]) -> list[str]:
    """The last resort: every comment line on top, then the upgraded recipe as PyYAML writes it."""
    comments = [x.strip() for x in lines if x.strip().startswith("#")]
    return comments + ([""] if comments else []) + _dump(new).splitlines()


def _dump(data: Any) -> str:
    import yaml

    class Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:  # a value written twice reads better than &id001
            return True

        def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
            super().increase_indent(flow, False)  # list items indented under their key, as people write them

    return yaml.dump(data, Dumper=Dumper, sort_keys=False, default_flow_style=False, width=100, allow_unicode=True)
