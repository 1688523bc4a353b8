"""Schema version 2: variants (overlays, --variant), version 1 read in memory, and the comment-keeping rewrite."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.errors import RecipeError
from flagtree_cpu_build.recipe import schema as rs
from flagtree_cpu_build.recipe.files import bundled_dir, load_recipe_file, parse_recipe, recipe_variants
from flagtree_cpu_build.recipe.upgrade import to_current, upgrade_path
from flagtree_cpu_build.recipe.upgrade_text import UpgradeError, upgrade_text
from tests.support.corpus import CORPUS, VALID, corpus_cases
from tests.support.v1_moves import moved_to_cmake

V1_FILE = VALID / "flagtree-cpu-arm64.v1.yaml"
V1_TEXT = V1_FILE.read_text()
BUNDLED = bundled_dir("recipes") / "flagtree-cpu-arm64.yaml"

MULTI = """\
schema_version: 2
name: multi
variant: cpu
variants:
  cpu:
    description: the CPU backend
  npu:
    description: Ascend
    overlay:
      description: on an NPU
      build:
        env:
          set: {BACKEND: npu}
          unset: null
  broken:
    overlay:
      build:
        mode: editabel
platform:
  host:
    arch: [aarch64]
sources:
  main:
    url: https://example.invalid/main.git
    ref: main
build:
  cwd: "{sources.main.path}"
  argv: [make, "BACKEND={variant}"]
  env:
    unset: [LLVM_*]
    set: {BACKEND: cpu, KEEP: "1"}
"""


# --- variants ---------------------------------------------------------------------------------------


def test_the_default_variant_is_the_recipes_own() -> None:
    recipe = parse_recipe(MULTI, "m.yaml")
    assert recipe.variant == "cpu"
    assert recipe.description == ""
    assert recipe.build.env.set == {"BACKEND": "cpu", "KEEP": "1"}
    assert recipe.build.env.unset == ("LLVM_*",)
    assert recipe_variants(recipe) == ["cpu", "broken", "npu"]  # the default first


def test_an_overlay_merges_key_by_key_and_null_removes_a_key() -> None:
    recipe = parse_recipe(MULTI, "m.yaml", variant="npu")
    assert recipe.variant == "npu"
    assert recipe.description == "on an NPU"  # text replaces
    assert recipe.build.env.set == {"BACKEND": "npu", "KEEP": "1"}  # mappings merge
    assert recipe.build.env.unset == ()  # null removes
    assert recipe.build.argv == ("make", "BACKEND={variant}")  # untouched keys stay
    assert recipe.digest != parse_recipe(MULTI, "m.yaml").digest


def test_an_unknown_variant_is_a_usage_error_listing_the_variants() -> None:
    """--variant names what the file lacks: the command line is wrong (exit 2), not a problem in the recipe file."""
    from flagtree_cpu_build.errors import UsageError

    with pytest.raises(UsageError) as info:
        parse_recipe(MULTI, "m.yaml", variant="nppu")
    assert not isinstance(info.value, RecipeError) and info.value.exit_code == 2
    assert "--variant nppu: recipe m.yaml has no variant 'nppu' (did you mean 'npu'?)" in info.value.message
    assert "broken, cpu, npu" in info.value.fix


def test_a_problem_inside_an_overlay_is_reported_at_the_overlays_line() -> None:
    with pytest.raises(RecipeError) as info:
        parse_recipe(MULTI, "m.yaml", variant="broken")
    [problem] = info.value.problems
    assert problem.key == "build.mode" and "'editabel' is not one of" in problem.message
    assert MULTI.splitlines()[problem.line - 1].strip() == "mode: editabel"


@pytest.fixture
def multi(tmp_path) -> str:
    path = tmp_path / "multi.yaml"
    path.write_text(MULTI)
    return str(path)


def test_variant_option_picks_the_variant_for_recipe_show(multi: str) -> None:
    result = CliRunner().invoke(app, ["--recipe", multi, "recipe", "show", "--raw", "--variant", "npu"])
    assert result.exit_code == 0, result.stderr
    assert yaml.safe_load(result.stdout)["build"]["env"]["set"]["BACKEND"] == "npu"
    assert "# variant: npu (of broken, cpu, npu; --variant NAME picks another)" in result.stdout
    shown = CliRunner().invoke(app, ["--json", "recipe", "show", multi, "--raw"], env={"FLAGTREE_CPU_VARIANT": "npu"})
    assert shown.exit_code == 0, shown.stderr
    document = json.loads(shown.stdout)["result"]
    assert (document["variant"], document["variants"]) == ("npu", ["broken", "cpu", "npu"])


def test_an_unknown_variant_option_exits_2_with_the_list(multi: str) -> None:
    for argv in (["recipe", "show", multi, "--raw", "--variant", "gpu"],
                 ["--variant", "gpu", "recipe", "validate", multi]):
        result = CliRunner().invoke(app, argv)
        assert result.exit_code == 2, result.stderr
        assert f"error: --variant gpu: recipe {multi} has no variant 'gpu'" in result.stderr
        assert "fix: use --variant with one of: broken, cpu, npu" in result.stderr
        assert "problem" not in result.stderr  # not reported as a problem in the recipe file
        assert result.stdout == ""


def test_recipe_validate_checks_the_default_and_every_variant(multi: str) -> None:
    result = CliRunner().invoke(app, ["recipe", "validate", multi])
    assert result.exit_code == 2
    assert f"{multi}: variant cpu of recipe multi is valid" in result.stderr  # the default first
    assert f"{multi}: variant npu of recipe multi is valid" in result.stderr
    assert "variant broken of recipe" in result.stderr and "'editabel' is not one of" in result.stderr
    only = CliRunner().invoke(app, ["--json", "recipe", "validate", multi, "--variant", "npu"])
    assert only.exit_code == 0, only.stderr
    results = json.loads(only.stdout)["result"]["results"]
    assert [(r["variant"], r["ok"]) for r in results] == [("npu", True)]
    every = CliRunner().invoke(app, ["--json", "recipe", "validate", multi])
    assert every.exit_code == 2
    document = json.loads(every.stdout)
    assert [(r["variant"], r["ok"]) for r in document["result"]["results"]] == [
        ("cpu", True), ("broken", False), ("npu", True)]
    assert document["error"]["code"] == "recipe"


# --- version 1, read in memory ----------------------------------------------------------------------------

# What only version 2 carries: knowledge version 1 kept in the engine's code.
V2_ONLY = (("platform", "host", "why"), ("platform", "host", "advice"), ("platform", "target", "why"),
           ("platform", "target", "machines"), ("build", "hazards"), ("runtime", "notes"), ("runtime", "only_with"),
           ("runtime", "hazards"), ("diagnosis",))


def _without_v2_only(data: dict[str, Any]) -> dict[str, Any]:
    data = json.loads(json.dumps(data))
    for path in V2_ONLY:
        holder = data
        for key in path[:-1]:
            holder = holder[key]
        holder.pop(path[-1])
    for group in ("compilers", "libraries", "devices", "commands"):
        for requirement in data["platform"]["host"]["requires"][group]:
            requirement.pop("why")
            requirement.pop("fix")
    return data


def test_the_v1_flagtree_recipe_read_in_memory_is_the_bundled_v2_recipe() -> None:
    v1 = load_recipe_file(V1_FILE)
    v2 = load_recipe_file(BUNDLED)
    assert (v1.upgraded_from, v2.upgraded_from) == (1, None)
    # v3 reads the LLVM's hash from FlagTree's cmake/llvm-hash.txt ({match}: a66376b0 at the pinned commit) where
    # v1 copied it, and drops the probe that guarded the copy
    read = json.loads(json.dumps(rs.to_data(v2)).replace("{match}", "a66376b0"))
    old = moved_to_cmake(rs.to_data(v1))
    old["sources"]["flagtree"]["probes"] = [p for p in old["sources"]["flagtree"]["probes"]
                                            if p["file"] != "cmake/llvm-hash.txt"]
    assert _without_v2_only(old) == _without_v2_only(read)


def test_v1_problems_name_the_v1_line_and_quote_the_v1_text() -> None:
    text = V1_TEXT.replace('TRITON_BUILD_PROTON: "OFF"', "TRITON_BUILD_PROTON: OFF")
    with pytest.raises(RecipeError) as info:
        parse_recipe(text, "v1.yaml")
    [problem] = info.value.problems
    assert "YAML reads OFF as false" in problem.message
    assert text.splitlines()[problem.line - 1].strip() == "TRITON_BUILD_PROTON: OFF"


def test_v1_key_paths_map_to_their_v2_places() -> None:
    data = yaml.safe_load(V1_TEXT)
    assert upgrade_path(("platform", "arch", 0), data) == ("platform", "host", "arch", 0)
    assert upgrade_path(("platform", "sve_vector_bits"), data) == ("platform", "target", "sve_vector_bits")
    assert upgrade_path(("build", "unset_env", 1), data) == ("build", "env", "unset", 1)
    assert upgrade_path(("build", "env_if_command", 0, "env"), data) == ("build", "env", "if_command", 0, "set")
    assert upgrade_path(("runtime", "env", "X"), data) == ("runtime", "env", "set", "X")
    assert upgrade_path(("resources", "triton_home_disk_gb"), data) == ("resources", "disk", 1, "gb")
    assert upgrade_path(("validation", "softmax", "rows"), data) == ("checks", 3, "with", "rows")
    assert upgrade_path(("validation", "decode-e2e", "required"), data) == ("checks", 4, "required")
    assert upgrade_path(("sources", "flagtree", "url"), data) == ("sources", "flagtree", "url")


def test_a_v1_key_in_a_v2_file_says_where_it_went() -> None:
    text = BUNDLED.read_text().replace("  memory_per_job_gb: 2.0", "  unset_env: [LLVM_*]\n  memory_per_job_gb: 2.0")
    with pytest.raises(RecipeError) as info:
        parse_recipe(text, "v2.yaml")
    [problem] = info.value.problems
    assert "version 1's name; version 2 writes it as build.env.unset" in problem.message
    assert "offline_env" not in problem.message  # the spelling-only guess would mislead


# --- the rewrite -------------------------------------------------------------------------------------------------


def _comment_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip().startswith("#")]


def test_upgrade_text_reads_back_as_the_in_memory_upgrade() -> None:
    upgraded = upgrade_text(V1_TEXT)
    assert yaml.safe_load(upgraded) == to_current(yaml.safe_load(V1_TEXT))
    assert rs.to_data(parse_recipe(upgraded, "new.yaml")) == rs.to_data(parse_recipe(V1_TEXT, "old.yaml"))
    assert upgraded.splitlines()[6] == "schema_version: 3"  # in place, below the header comments


def test_upgrade_text_keeps_every_comment_and_the_unchanged_sections_verbatim() -> None:
    upgraded = upgrade_text(V1_TEXT)
    kept = _comment_lines(upgraded)
    assert all(comment in kept for comment in _comment_lines(V1_TEXT))
    # whole top-level sections the upgrade does not touch are copied line for line
    for section in ("system_packages", "sources", "links", "python"):
        start = V1_TEXT.index(f"\n{section}:")
        end = V1_TEXT.index("\n\n", start + 1)
        assert V1_TEXT[start:end] in upgraded, section
    # inside changed sections, the unchanged keys keep their comments in place (inline ones too)
    assert "  memory_gb: 7  # GiB the kernel reports" in upgraded
    assert '  argv: ["{python}", -m, pip, install, -e, python/, --no-build-isolation, -v]' in upgraded
    assert '    unset: ["LLVM_*", TRITON_OFFLINE_BUILD, FLAGTREE_OFFLINE_BUILD_DIR]' in upgraded
    assert "    set:\n      FLAGTREE_BACKEND: cpu\n      # setup.py reads this" in upgraded
    assert "\nchecks:\n  - uses: flagtree/backend\n" in upgraded and "\nvalidation:" not in upgraded


@pytest.mark.parametrize("text", [
    "schema_version: 1  # old\nname: flow\nplatform: {arch: [x86_64], cpu_features: [avx2]}\n"
    "sources: {main: {url: 'https://example.invalid/m.git', ref: main}}\n",
    "schema_version: 1\nname: anchors\nplatform:\n  arch: &arches [aarch64]\nsources:\n  main:\n"
    "    url: https://example.invalid/m.git\n    ref: main\nbuild:\n  cwd: '{workdir}'\n  argv: [make]\n"
    "  env:\n    A: x\n  unset_env: [B]\nvalidation:\n  vector-add: {size: 8}\n  timeout: 30\n",
    "---\n# only a header\nschema_version: 1\nname: minimal\nplatform:\n  arch: [aarch64]\n  # after\n"
    "sources:\n  main:\n    url: https://example.invalid/m.git\n    ref: main\n",
])
def test_upgrade_text_handles_other_layouts(text: str) -> None:
    upgraded = upgrade_text(text)
    assert yaml.safe_load(upgraded) == to_current(yaml.safe_load(text))
    assert all(comment in _comment_lines(upgraded) for comment in _comment_lines(text))
    assert parse_recipe(upgraded, "u.yaml").schema_version == 3


def test_upgrade_text_refuses_a_current_recipe() -> None:
    with pytest.raises(ValueError):
        upgrade_text(BUNDLED.read_text())
    assert issubclass(UpgradeError, Exception)


@pytest.mark.parametrize("line", ["schema_version: 2", "schema_version: 2  # kept", "schema_version:   2"])
def test_a_v2_file_becomes_v3_by_its_version_line_alone(line: str) -> None:
    v2 = BUNDLED.read_text().replace("schema_version: 3", line, 1)
    upgraded = upgrade_text(v2)
    before, after = v2.splitlines(), upgraded.splitlines()
    assert len(before) == len(after)
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert len(changed) == 1, changed
    assert changed[0][1].startswith("schema_version:") and changed[0][1].split("#")[0].strip().endswith("3")
    assert rs.to_data(parse_recipe(upgraded, "new.yaml")) == rs.to_data(parse_recipe(v2, "old.yaml"))
    assert parse_recipe(v2, "old.yaml").upgraded_from == 2


def test_a_v2_file_in_flow_style_is_rewritten_with_its_comments_on_top() -> None:
    text = ("# my recipe\n{schema_version: 2, name: flow, platform: {host: {arch: [x86_64]}},\n"
            " sources: {main: {url: 'https://example.invalid/m.git', ref: main}}}\n")
    upgraded = upgrade_text(text)
    assert upgraded.startswith("# my recipe\n")
    assert yaml.safe_load(upgraded) == {**yaml.safe_load(text), "schema_version": 3}


def test_the_corpus_has_v2_cases() -> None:
    v2 = [c for c in corpus_cases() if "\nschema_version: 2\n" in c.path.read_text()]
    assert len(v2) >= 15, [c.id for c in v2]
    assert CORPUS.is_dir()
