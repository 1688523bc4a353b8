"""What every script of this library shares: its expectations (--expect JSON) and its result line."""

from __future__ import annotations

import argparse
import json
import sys
import time

MARKER = "FLAGTREE_CPU_RESULT "  # the check runner reads the last line that starts with it
_START = time.monotonic()

# a kernel that compiled but computes wrong numbers: the sources or links are not the recipe's
MISCOMPILED = ("a wrong result from a kernel that compiled: bring the sources to the recipe's pins and rebuild "
               "(flagtree-cpu sync && flagtree-cpu link && flagtree-cpu build --force); if it persists, report it "
               "with the log")

# the interpreter's triton is another one (PyPI's, say): nothing FlagTree-specific can work in it
NOT_FLAGTREE = ("this interpreter's triton is not FlagTree's CPU build: flagtree-cpu build (it installs into the "
                "target venv), or pass --python with the interpreter FlagTree was built into")


def expectations(defaults: dict) -> dict:
    """The recipe's parameters for this script (from --expect), over its own defaults."""
    parser = argparse.ArgumentParser(description=sys.modules["__main__"].__doc__)
    parser.add_argument("--expect", default="{}", help="JSON object of expectations (default: the FEP's)")
    parser.add_argument("--model", default=None, help="model folder (decode-e2e only)")
    args = parser.parse_args()
    merged = {**defaults, **json.loads(args.expect)}
    if args.model:
        merged["model"] = args.model
    return merged


def finish(kernel: str, passed: bool | None, figure: str, message: str = "", fix: str = "",
           **details: object) -> None:
    """Print the verdict for a person, then the machine-readable line; exit 0 pass, 1 fail, 0 skip."""
    status = "skip" if passed is None else ("pass" if passed else "fail")
    print(f"{kernel}: {status.upper()} — {figure}{(' — ' + message) if message else ''}")
    if fix:
        print(f"fix: {fix}")
    result = {"kernel": kernel, "status": status, "figure": figure, "message": message, "fix": fix,
              "seconds": round(time.monotonic() - _START, 3), "details": details}
    print(MARKER + json.dumps(result, default=str), flush=True)
    sys.exit(1 if passed is False else 0)
