"""The bundled FlagTree recipe, rewritten in schema version 2, behaves as the version 1 recipe did.

``tests/fixtures/golden-v1/`` holds what the version 1 engine printed for the version 1 recipe,
captured before the rewrite (paths normalized): `recipe show --json`, `env --build --json`,
`env --json`, the fixture FlagTree build's environment and log header, and `doctor --json --sysroot`
on every board snapshot (compared in tests/unit/test_doctor_snapshots.py). Here the new engine on the
new recipe must give the same answers; what has moved since is moved in the old data by ``tests.support.v1_moves``,
which says exactly what moved and checks that nothing else did.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.recipe import Recipe
from flagtree_cpu_build.recipe import schema as rs
from flagtree_cpu_build.recipe.files import load_recipe
from flagtree_cpu_build.recipe.schema import Context
from flagtree_cpu_build.recipe.upgrade import to_current
from tests.integration.test_build import BuildWorkspace, bws  # noqa: F401  (the fixture)
from tests.support.v1_moves import moved_to_cmake

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden-v1"

# What only version 2 can say: FlagTree knowledge that version 1 kept in the engine's code
# (doctor's texts and hazards, the diagnosis table) and now lives in the recipe.
V2_ONLY = {
    ("platform", "host", "why"), ("platform", "host", "advice"), ("platform", "target", "why"),
    ("platform", "target", "machines"), ("build", "hazards"), ("runtime", "notes"), ("runtime", "only_with"),
    ("runtime", "hazards"), ("diagnosis",),
}


# What version 3 reads instead of copying: the LLVM's hash comes from FlagTree's cmake/llvm-hash.txt after sync
# ({match}), which gives a66376b0 at the pinned commit, and the probe that guarded the copied value is gone.
READ_HASH = "a66376b0"


def _as_read(data: dict[str, Any]) -> dict[str, Any]:
    """The v3 recipe with the value it reads filled in: what version 1 wrote by hand."""
    return json.loads(json.dumps(data).replace("{match}", READ_HASH))


def _without_hash_probe(data: dict[str, Any]) -> dict[str, Any]:
    data = json.loads(json.dumps(data))
    probes = data["sources"]["flagtree"]["probes"]
    data["sources"]["flagtree"]["probes"] = [p for p in probes if p["file"] != "cmake/llvm-hash.txt"]
    return data


def _drop(data: dict[str, Any], paths: set[tuple[str, ...]]) -> dict[str, Any]:
    data = json.loads(json.dumps(data))
    for path in paths:
        holder = data
        for key in path[:-1]:
            holder = holder[key]
        holder.pop(path[-1], None)
    return data


def _v2_data(v1_data: dict[str, Any]) -> dict[str, Any]:
    ctx = Context(facts={"sources": set(v1_data["sources"]), "artifacts": set(v1_data["artifacts"]),
                         "host_arches": ("aarch64",)})
    recipe = rs.convert(to_current(v1_data), Recipe, ctx)
    assert not ctx.problems, ctx.problems
    return rs.to_data(recipe)


def _comparable(data: dict[str, Any], workdir: str, home: str) -> dict[str, Any]:
    """Paths of the machine that printed it normalized; lists the old output sorted put in one order."""
    text = json.dumps(data).replace(workdir, "<workdir>").replace(home, "<home>")
    # the upgrade writes version 1's disk estimates with placeholders, which `show` then fills in
    text = text.replace("{workdir}", "<workdir>").replace("{triton_home}", "<home>")
    data = json.loads(text)
    for name in ("MAX_JOBS", "TRITON_PARALLEL_LINK_JOBS"):
        data["build"]["env"]["set"][name] = "<n>"
    data["checks"] = sorted(data["checks"], key=lambda c: c["uses"])
    for check in data["checks"]:  # version 1 printed unset kernel settings as null
        check["with"] = {k: v for k, v in check["with"].items() if v is not None}
    data["resources"]["disk"] = sorted(data["resources"]["disk"], key=lambda d: d["label"])
    return data


def test_recipe_show_of_the_v2_recipe_is_the_v1_recipe_upgraded(tmp_path: Path) -> None:
    golden = json.loads((GOLDEN / "recipe-show.json").read_text())
    old_workdir = golden["context"].split("workdir ")[1].split(" on ")[0]
    old_home = golden["recipe"]["build"]["env"]["TRITON_APPEND_CMAKE_ARGS"].split("=")[1].rsplit("/", 1)[0]
    result = CliRunner().invoke(app, ["-w", str(tmp_path / "ws"), "recipe", "show", "flagtree-cpu-arm64", "--json"])
    assert result.exit_code == 0, result.stderr
    new = json.loads(result.stdout)["result"]["recipe"]
    new = _comparable(new, str(tmp_path / "ws"), os.environ["HOME"])
    upgraded = _comparable(moved_to_cmake(_v2_data(golden["recipe"])), old_workdir, old_home)
    assert _drop(_as_read(new), V2_ONLY) == _drop(_without_hash_probe(upgraded), V2_ONLY)
    # and what only v2 says is there: the hard-coded FlagTree rules of version 1, as data
    assert new["platform"]["host"]["requires"]["compilers"][0]["flags"] == ["-march=armv9-a+sve2+i8mm+bf16"]
    assert {s["id"] for s in new["diagnosis"]["build"]} == {"install-permission", "nvidia-download",
                                                            "compiler-too-old", "flagtree-offline-on"}


def test_the_v1_file_still_loads_as_the_same_recipe() -> None:
    v1 = load_recipe(str(Path(__file__).resolve().parents[1] / "fixtures" / "recipes" / "valid"
                         / "flagtree-cpu-arm64.v1.yaml"))
    v2 = load_recipe("flagtree-cpu-arm64")
    assert v1.upgraded_from == 1 and v2.upgraded_from is None
    assert _drop(_without_hash_probe(moved_to_cmake(rs.to_data(v1))), V2_ONLY) == \
        _drop(_as_read(rs.to_data(v2)), V2_ONLY)


def _normalized(text: str, bws: BuildWorkspace, tmp_path: Path) -> str:  # noqa: F811
    for old, new in ((str(bws.python), "<python>"), (str(bws.ws.root), "<workdir>"), (str(tmp_path), "<tmp>"),
                     (os.environ["HOME"], "<home>")):
        text = text.replace(old, new)
    return text


@pytest.mark.parametrize("args,golden", [(("env", "--build", "--json"), "env-build.json"),
                                         (("env", "--json"), "env-run.json")])
def test_env_prints_what_it_printed_for_the_v1_recipe(bws: BuildWorkspace, tmp_path: Path,  # noqa: F811
                                                      args: tuple[str, ...], golden: str) -> None:
    result = bws.ws.run(*args, "--python", str(bws.python))
    assert result.exit_code == 0, result.stderr
    new = json.loads(_normalized(json.dumps(json.loads(result.stdout)["result"]), bws, tmp_path))
    old = json.loads((GOLDEN / golden).read_text())
    for data in (new, old):  # the machine's own PATH, job counts and ccache are not the recipe's doing
        settings = data.get("set", {})
        settings.pop("TRITON_BUILD_WITH_CCACHE", None)  # set by the recipe's if_command only where ccache is
        if "PATH" in settings:
            settings["PATH"] = settings["PATH"].split(os.pathsep)[0]
        for name in ("MAX_JOBS", "TRITON_PARALLEL_LINK_JOBS"):
            if name in settings:
                settings[name] = "<n>"
    assert {k: new.get(k) for k in old} == old
