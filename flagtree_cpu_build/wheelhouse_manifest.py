"""Reading a wheelhouse's manifest as its attacker would write it.

Anyone who can write the wheelhouse folder — or, over plain HTTP, anyone on the path — writes the manifest, and
its names become paths (the wheel's file in the workspace, ``build --wheel DIR/<original>``), URLs (the wheel's
download), a pip argument and log lines. So before anything uses an entry, all of it is checked: every field's
type down to list elements and nested objects, every name is a bare wheel file name that is the entry's own
wheel, numbers are in range, text is printable, nesting is shallow; the optional ``pins_key`` (64 hex digits)
and ``pins`` (an object) come together (older manifests have neither, and stay readable). The JSON itself must
read one way only: no duplicate keys (two readers could take different ones), no NaN or Infinity. The file is
read only when it is a regular file, and only up to ``MAX_MANIFEST_BYTES``. One bad entry makes the whole manifest
damaged: an error naming the entry and the field (readers warn and build here; publishing stops and leaves it as
it is).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from packaging.utils import parse_wheel_filename

from . import strict_json
from .errors import ArtifactError
from .regular_file import NotRegularFile, TooLarge, read_capped

MANIFEST = "flagtree-cpu-wheelhouse.json"
SCHEMA = "flagtree-cpu/wheelhouse/v1"
MAX_MANIFEST_BYTES = 32 << 20  # a manifest lists wheels; a file or server sending more is not serving one
MAX_WHEEL_BYTES = 1 << 36  # 64 GiB: larger than any wheel (torch's are ~2.5 GB)
MAX_DEPTH = 32  # nesting inside an entry; a build key is about 4 deep
MAX_TEXT = 256  # recipe, variant, class fields: names, not essays
_HEX64 = re.compile(r"[0-9a-f]{64}")
_WHEEL_CHARS = re.compile(r"[A-Za-z0-9_.+!-]{1,250}\.whl")  # what a wheel file name is made of: no separators
_SHOWN_BUILT_ON = ("host", "arch", "glibc", "python", "at")


class DamagedManifest(ArtifactError):
    """The manifest is not one flagtree-cpu wrote (or it was cut short, or it is not a regular file)."""


def move_aside(where: str) -> str:
    return (f"move it aside (mv {where} {where}.damaged) and publish again: the wheels in wheels/ stay, and "
            "each publish lists its own")


def read_local_manifest(folder: Path) -> list[dict[str, Any]]:
    """The wheels the manifest in ``folder`` lists; [] when there is none."""
    path = folder / MANIFEST
    try:
        data = read_capped(path, MAX_MANIFEST_BYTES)
    except FileNotFoundError:
        return []
    except NotRegularFile as err:
        raise DamagedManifest(f"the wheelhouse manifest {path} is not a regular file ({err.kind}); it was not "
                              "read", fix=move_aside(str(path))) from None
    except TooLarge:
        raise DamagedManifest(f"the wheelhouse manifest {path} has more than {MAX_MANIFEST_BYTES} bytes, more than "
                              "any wheelhouse manifest; it was not read", fix=move_aside(str(path))) from None
    except OSError as err:
        raise DamagedManifest(f"the wheelhouse manifest {path} cannot be read ({err.strerror or err})",
                              fix=f"check its permissions: ls -l {path}") from None
    return parse_manifest(data, str(path))


def parse_manifest(data: str | bytes, where: str) -> list[dict[str, Any]]:
    """The manifest's wheels, every entry checked; a damaged manifest is an error naming ``where``."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as err:
        raise DamagedManifest(f"the wheelhouse manifest {where} is not UTF-8 text ({err})", fix=move_aside(where)) \
            from None
    document = _strict_json(text, where)
    if not isinstance(document, dict) or document.get("schema") != SCHEMA or not isinstance(
            document.get("wheels"), list):
        raise DamagedManifest(f"the wheelhouse manifest {where} is not a {SCHEMA} document", fix=move_aside(where))
    wheels: list[Any] = document["wheels"]
    problems = [f"{_label(i, w)}: {p}" for i, w in enumerate(wheels) for p in entry_problems(w)]
    if problems:
        raise DamagedManifest(f"the wheelhouse manifest {where} has a malformed entry: {problems[0]}"
                              + (f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""),
                              details=tuple(problems[:20]), fix=move_aside(where))
    for wheel in wheels:  # shown, never compared: what is not printable text is left out
        wheel["built_on"] = _shown_built_on(wheel.get("built_on"))
    return wheels


def _strict_json(text: str, where: str) -> Any:
    try:
        return strict_json.loads(text)
    except strict_json.NotStrictJSON as err:
        raise DamagedManifest(f"the wheelhouse manifest {where} is not strict JSON ({err})", fix=move_aside(where)) \
            from None
    except (ValueError, RecursionError) as err:  # RecursionError: nesting deeper than any manifest
        raise DamagedManifest(f"the wheelhouse manifest {where} is not JSON ({err})", fix=move_aside(where)) from None


# --- one entry ------------------------------------------------------------------------------------------------


def entry_problems(entry: Any) -> list[str]:
    """What is wrong with one manifest entry (empty: nothing), each naming its field."""
    if not isinstance(entry, dict):
        return [f"is {_type(entry)}, not an object"]
    problems = _structure_problems(entry)
    for field in ("sha256", "stamp", "class_id"):
        if not (isinstance(entry.get(field), str) and _HEX64.fullmatch(entry[field])):
            problems.append(f"{field} {_shown(entry.get(field))} is not 64 lowercase hex digits")
    size = entry.get("size")
    if type(size) is not int or not 0 < size <= MAX_WHEEL_BYTES:
        problems.append(f"size {_shown(size)} is not a whole number of bytes from 1 to {MAX_WHEEL_BYTES}")
    problems += _text_problem(entry, "recipe", optional=False) + _text_problem(entry, "variant", optional=True)
    if not isinstance(entry.get("key"), dict):
        problems.append(f"key is {_type(entry.get('key'))}, not an object")
    problems += _class_problems(entry.get("class"))
    return problems + _pins_problems(entry) + _name_problems(entry)


def _pins_problems(entry: dict[str, Any]) -> list[str]:
    """``pins_key`` and ``pins`` (the lock's pins a build was made from: install-only boards find it by them) come
    together or not at all: manifests published before them, or of a build whose checkout the lock did not
    describe exactly, have neither."""
    if "pins_key" not in entry and "pins" not in entry:
        return []
    problems = []
    if not (isinstance(entry.get("pins_key"), str) and _HEX64.fullmatch(entry["pins_key"])):
        problems.append(f"pins_key {_shown(entry.get('pins_key'))} is not 64 lowercase hex digits")
    if not isinstance(entry.get("pins"), dict):
        problems.append(f"pins is {_type(entry.get('pins'))}, not an object")
    return problems


def _structure_problems(entry: dict[str, Any]) -> list[str]:
    """Nesting deeper than MAX_DEPTH (a recursive reader would overflow) or text with no UTF-8 form (lone
    surrogates: text no UTF-8 file or log can hold)."""
    problems = []
    for field, value in entry.items():
        stack = [(value, 1)]
        while stack:
            item, depth = stack.pop()
            if depth > MAX_DEPTH:
                problems.append(f"{field} is nested deeper than {MAX_DEPTH} levels")
                break
            texts = [item] if isinstance(item, str) else list(item) if isinstance(item, dict) else []
            if any(not _encodable(t) for t in texts):
                problems.append(f"{field} holds text that is not valid Unicode")
                break
            children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
            stack.extend((child, depth + 1) for child in children)
    return problems


def _class_problems(klass: Any) -> list[str]:
    if not isinstance(klass, dict):
        return [f"class is {_type(klass)}, not an object"]
    problems = _text_problem(klass, "arch", optional=False, prefix="class.")
    features = klass.get("cpu_features")
    if not isinstance(features, list) or not all(isinstance(f, str) and _printable(f) for f in features):
        problems.append(f"class.cpu_features {_shown(features)} is not a list of names")
    bits = klass.get("sve_vector_bits")
    if bits is not None and (type(bits) is not int or not 0 <= bits <= 65536):
        problems.append(f"class.sve_vector_bits {_shown(bits)} is not a number of bits (or null)")
    for field in ("glibc", "python"):
        problems += _text_problem(klass, field, optional=True, prefix="class.")
    return problems


def _text_problem(where: dict[str, Any], field: str, *, optional: bool, prefix: str = "") -> list[str]:
    value = where.get(field)
    if (value is None and optional) or (isinstance(value, str) and _printable(value)):
        return []
    return [f"{prefix}{field} {_shown(value)} is not {'null or ' if optional else ''}a printable name of at most "
            f"{MAX_TEXT} characters"]


def _name_problems(entry: dict[str, Any]) -> list[str]:
    """``file`` is wheels/<its wheel's bare name> with the build tag naming the entry's stamp and class;
    ``original`` (the name the build gave the wheel) a bare name of the same wheel."""
    file = entry.get("file")
    name = file[len("wheels/"):] if isinstance(file, str) and file.startswith("wheels/") else None
    wrong = bare_wheel_name_problem(name) if name is not None else "is not wheels/<a wheel file name>"
    if wrong:
        return [f"file {_shown(file)} {wrong}"]
    assert name is not None
    parsed = parse_wheel_filename(name)
    problems = []
    if all(isinstance(entry.get(k), str) for k in ("stamp", "class_id")):
        tag = f".{entry['stamp'][:12]}.{entry['class_id'][:8]}"
        if not parsed[2] or parsed[2][1] != tag:
            problems.append(f"file {_shown(file)} does not carry the build tag <number>{tag} of its stamp and class")
    if "original" in entry:
        original = entry["original"]
        wrong = bare_wheel_name_problem(original)
        if wrong:
            problems.append(f"original {_shown(original)} {wrong}")
        else:
            theirs = parse_wheel_filename(original)
            if (theirs[0], theirs[1], theirs[3]) != (parsed[0], parsed[1], parsed[3]):
                problems.append(f"original {_shown(original)} is not the wheel {name} is (name, version and tags)")
    return problems


def bare_wheel_name_problem(name: Any) -> str | None:
    """Why ``name`` is not a bare wheel file name (None: it is one): no folder, no leading dot, nothing but the
    characters wheel names use, and a name pip parses."""
    if not isinstance(name, str):
        return f"is {_type(name)}, not a file name"
    if not _WHEEL_CHARS.fullmatch(name) or name.startswith("."):
        return "is not a bare wheel file name (no folders, no leading dot, only letters, digits and _.+!-)"
    try:
        parse_wheel_filename(name)
    except ValueError as err:  # InvalidWheelFilename, InvalidVersion
        return f"is not a wheel file name ({err})"
    return None


def build_number(file: str) -> int:
    """The leading number of a published wheel's build tag (0 for the ``0.<stamp>.<class>`` tags of wheelhouses
    published before build numbers): what pip orders builds of one version by, and so does the tool."""
    try:
        build = parse_wheel_filename(file.rsplit("/", 1)[-1])[2]
    except ValueError:
        return 0
    return build[0] if build else 0


# --- showing what a manifest says ---------------------------------------------------------------------------


def _shown_built_on(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        return {}
    shown: dict[str, Any] = {k: value[k] for k in _SHOWN_BUILT_ON if isinstance(value.get(k), str)
                             and _printable(value[k])}
    compilers = value.get("compilers")
    if isinstance(compilers, dict) and all(isinstance(v, str) and _printable(v) and _printable(k)
                                           for k, v in compilers.items()):
        shown["compilers"] = compilers
    return shown


def shown(value: Any, limit: int = 80) -> str:
    """A manifest's value for a log line: printable text as it is, anything else escaped (no newline or escape
    sequence reaches a terminal or a CI log), long values cut."""
    text = value if isinstance(value, str) and _printable(value) else repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _shown(value: Any) -> str:
    return shown(value if not isinstance(value, str) else repr(value), 100)


def _printable(text: str) -> bool:
    return 0 < len(text) <= MAX_TEXT and text.isprintable()


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _type(value: Any) -> str:
    return "null" if value is None else f"a {type(value).__name__}"


def _label(index: int, entry: Any) -> str:
    file = entry.get("file") if isinstance(entry, dict) else None
    return f"wheels[{index}] ({file})" if isinstance(file, str) and _WHEEL_CHARS.fullmatch(file.split("/")[-1]) \
        and file.count("/") == 1 else f"wheels[{index}]"
