"""What has moved in the bundled flagtree-cpu-arm64 recipe since version 1, said exactly, for the tests that compare
it with the version 1 file (tests/unit/test_recipe_v2.py, tests/integration/test_v2_equivalence.py)."""

from __future__ import annotations

import json
from typing import Any


def moved_to_cmake(v1: dict[str, Any]) -> dict[str, Any]:
    """The version 1 recipe with what has moved since, moved: the install prefix it threaded through
    TRITON_APPEND_CMAKE_ARGS by hand is `build.cmake.define` (the engine appends it to the same variable, so the
    build gets the very value: test_v2_equivalence.py's test_env_prints_what_it_printed_for_the_v1_recipe), and
    an inherited TRITON_APPEND_CMAKE_ARGS is unset instead of overwritten. Nothing else may differ."""
    data = json.loads(json.dumps(v1))
    build = data["build"]
    value = build["env"]["set"].pop("TRITON_APPEND_CMAKE_ARGS")
    name, _, prefix = value.partition("=")
    assert name == "-DCMAKE_INSTALL_PREFIX" and prefix and " " not in prefix, value  # that one argument only
    assert build.get("cmake") is None, build["cmake"]
    build["cmake"] = {"args_env": "TRITON_APPEND_CMAKE_ARGS", "define": {"CMAKE_INSTALL_PREFIX": prefix},
                      "fetchcontent": {}}
    build["env"]["unset"] = [*build["env"]["unset"], "TRITON_APPEND_CMAKE_ARGS"]
    return data
