"""FEP phase 1: triton's version fits, the cpu backend is registered and libtriton has exactly the expected
TLE builder methods.

Run by hand with the build's Python: python backend.py [--expect '{"triton_version": "==3.3.*"}']
"""

import re

from _common import NOT_FLAGTREE, expectations, finish

FEP_METHODS = [
    "create_cpu_flash_attn_decode", "create_cpu_fused_decode_step", "create_cpu_fused_mlp",
    "create_cpu_fused_transformer_layer", "create_cpu_neon_sdot", "create_cpu_rms_norm", "create_cpu_sdot_gemv",
    "create_cpu_sdot_gemv_fused_bf16", "create_cpu_sdot_pack_weights", "create_cpu_swiglu",
]
WRONG_TRITON = ("uninstall it and rebuild (pip uninstall -y triton && flagtree-cpu build --force), or pass --python "
                "with the build's interpreter")


def main() -> None:
    expect = expectations({"triton_version": None, "backends": ["cpu"], "builder_prefix": "create_cpu_",
                           "builder_methods": FEP_METHODS})
    import triton
    import triton._C.libtriton as libtriton
    from triton.backends import backends

    builder = libtriton.ir.builder(libtriton.ir.context())
    found = sorted(m for m in dir(builder) if m.startswith(expect["builder_prefix"]))
    missing = sorted(set(expect["builder_methods"]) - set(found))
    extra = sorted(set(found) - set(expect["builder_methods"]))
    absent = [b for b in expect["backends"] if b not in backends]
    print(f"triton {triton.__version__}; backends: {', '.join(sorted(backends))}; {len(found)} "
          f"{expect['builder_prefix']}* methods")
    problems = []
    if absent:
        problems.append(f"backend(s) not registered: {', '.join(absent)}")
    if missing:
        problems.append(f"missing builder methods: {', '.join(missing)}")
    if extra:
        problems.append(f"unexpected builder methods: {', '.join(extra)}")
    message, fix = "; ".join(problems), _fix(absent, missing, extra) if problems else ""
    wanted = expect["triton_version"]
    if not problems and wanted and not version_fits(wanted, triton.__version__):
        message = (f"triton {triton.__version__} does not satisfy {wanted}: this interpreter has another triton "
                   "than FlagTree's")
        fix = WRONG_TRITON
    finish("backend", not message, f"triton {triton.__version__}, {len(found)} TLE ops", message, fix,
           triton_version=triton.__version__, backends=sorted(backends), builder_methods=found,
           missing=missing, extra=extra)


def _fix(absent: list, missing: list, extra: list) -> str:
    if not absent and not missing and extra:
        return ("libtriton has TLE ops the recipe does not list: flagtree-cpu is at another commit than the recipe "
                "expects — check `flagtree-cpu sync`, or update the check's `with: builder_methods`")
    if not absent:
        return ("libtriton was built without (all of) flagtree-cpu's TLE ops: bring sources and links to the recipe "
                "(flagtree-cpu sync && flagtree-cpu link), then flagtree-cpu build --force")
    return NOT_FLAGTREE


def version_fits(wanted: str, found: str) -> bool:
    """``found`` satisfies the range ``wanted`` (pre-releases and local versions included)."""
    try:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet
        from packaging.version import InvalidVersion, Version
    except ImportError:  # the target interpreter need not have packaging
        return _fits_without_packaging(wanted, found)
    try:
        return SpecifierSet(wanted).contains(Version(found), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return False


_CLAUSE = re.compile(r"\s*(==|!=|>=|<=|>|<|~=)\s*([0-9][0-9.]*)(\.\*)?\s*")


def _release(text: str) -> tuple:
    return tuple(int(p) for p in text.strip(".").split(".") if p)


def _fits_without_packaging(wanted: str, found: str) -> bool:
    """==X.Y.*, ==, !=, >=, <=, >, < and ~= on the release numbers: enough for the ranges recipes pin."""
    head = re.match(r"\s*v?([0-9]+(?:\.[0-9]+)*)", found)
    if head is None:
        return False
    have = _release(head.group(1))
    for clause in wanted.split(","):
        match = _CLAUSE.fullmatch(clause)
        if match is None:
            return False
        op, number, star = match.group(1), _release(match.group(2)), bool(match.group(3))
        width = max(len(have), len(number))
        padded, want = have + (0,) * (width - len(have)), number + (0,) * (width - len(number))
        if star:
            ok = have[:len(number)] == number if op == "==" else have[:len(number)] != number if op == "!=" else False
        elif op == "~=":
            ok = padded >= want and have[:len(number) - 1] == number[:-1]
        else:
            ok = {"==": padded == want, "!=": padded != want, ">=": padded >= want, "<=": padded <= want,
                  ">": padded > want, "<": padded < want}[op]
        if not ok:
            return False
    return True


if __name__ == "__main__":
    main()
