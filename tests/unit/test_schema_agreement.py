"""The JSON Schema (`flagtree-cpu recipe schema`) and the loader agree: every invalid fixture, every valid
one, every bundled recipe goes through both, and each disagreement is named. The few rules JSON Schema cannot
state are listed below with the reason, so a new one cannot slip in unnoticed.

The schema judges the file as an editor sees it: the YAML data, a version 1 file in the version 2 form
`flagtree-cpu recipe upgrade` writes (the schema leaves the version 1 layout undescribed, as the loader upgrades
it in memory)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.errors import RecipeError
from flagtree_cpu_build.recipe import loader
from flagtree_cpu_build.recipe.files import bundled_dir, load_recipe_file, parse_recipe
from flagtree_cpu_build.recipe.json_schema import recipe_json_schema
from flagtree_cpu_build.recipe.upgrade import upgrade_data
from tests.support.corpus import CORPUS, VALID

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = bundled_dir("recipes") / "recipe.schema.json"
MODELINE = "# yaml-language-server: $schema=./recipe.schema.json"

# The YAML layer's rules: a document the loader refuses before it is data, so there is nothing for a JSON Schema
# to judge (an editor's YAML parser reports syntax errors and duplicate keys itself; the limits are ours).
YAML_RULES = {
    "16-duplicate-yaml-key": "duplicate keys (PyYAML keeps the last; the loader refuses)",
    "17-yaml-syntax-error": "not YAML",
    "28-alias-bomb": "the expanded-size limit on aliases",
    "29-recursive-alias": "an alias inside the value it names",
    "30-deep-nesting": "the nesting limit",
    "31-complex-key": "a key that is a list or mapping",
    "32-custom-tag": "a YAML tag beyond plain data",
    "33-python-object-tag": "a YAML tag beyond plain data",
    "34-impossible-date": "a timestamp YAML cannot read",
    "35-merge-not-a-mapping": "a YAML merge key of the wrong kind",
}
# Rules only the loader enforces: each needs something a JSON Schema does not have.
CROSS_FIELD = "compares one key with others elsewhere in the recipe"
FILES = "needs the file system (patch files, what a path resolves to)"
PRESETS = "needs the bundled preset library"
ENGINE = "needs a parser JSON Schema does not have"
PATHS = "needs path arithmetic (.. and {placeholders} resolved against the workdir)"
PLACEHOLDERS = "needs the placeholder catalogue and the recipe's own names"
LOADER_ONLY = {
    "05-url-without-scheme": ENGINE + " (URL scheme and host)",
    "06-duplicate-link-path": CROSS_FIELD + " (two links, one path)",
    "07-link-target-absolute": PATHS,
    "08-link-target-outside-root": PATHS,
    "09-link-path-escapes-root": PATHS,
    "10-source-path-escapes-workdir": PATHS,
    "11-unknown-placeholder": PLACEHOLDERS,
    "15-links-root-unknown-source": CROSS_FIELD + " (a source name)",
    "19-bad-requirement": ENGINE + " (PEP 508, through packaging)",
    "20-placeholder-unknown-source": PLACEHOLDERS,
    "22-source-cycle": CROSS_FIELD + " (the `inside` chain)",
    "23-nested-without-inside": CROSS_FIELD + " (one source's path inside another's)",
    "25-artifact-pin-unknown-source": CROSS_FIELD + " (a source name)",
    "36-variant-default-unknown": CROSS_FIELD + " (a variant name)",
    "37-when-unknown-variant": CROSS_FIELD + " (a variant name)",
    "38-when-arch-not-a-host": CROSS_FIELD + " (platform.host.arch)",
    "41-sha256-and-digest-disagree": CROSS_FIELD + " (sha256 against digest.sha256)",
    "42-source-script-escapes-workdir": PATHS,
    "43-step-empty-command": "a class-level rule of Step, not yet stated in the schema",
    "45-check-without-a-kind": "a class-level rule of Check (exactly one kind), not yet stated in the schema",
    "46-check-with-two-kinds": "a class-level rule of Check (exactly one kind), not yet stated in the schema",
    "47-check-unknown-preset": PRESETS,
    "48-preset-unknown-parameter": PRESETS,
    "49-preset-missing-parameter": PRESETS,
    "50-wheel-check-checks-nothing": "a class-level rule of WheelCheck, not yet stated in the schema",
    "51-pytest-unknown-count": "a class-level rule of Expect, not yet stated in the schema",
    "52-bad-regex-in-expect": ENGINE + " (Python regular expressions)",
    "53-source-pin-two-rules": CROSS_FIELD + " (regex and json_path together)",
    "55-file-artifact-with-root": CROSS_FIELD + " (kind: file with root)",
    "56-root-strip-and-find": CROSS_FIELD + " (strip and find together)",
    "57-env-placeholder-with-format": PLACEHOLDERS,
    "59-variant-overlay-invalid": "a variant's overlay is judged once merged into the recipe",
    "60-compiler-family-unknown": "a class-level rule of the compiler requirement, not yet stated in the schema",
    "61-device-not-under-dev": "a class-level rule of the device requirement, not yet stated in the schema",
    "62-patch-from-unknown-source": FILES,
    "63-env-from-file-escapes-workdir": PATHS,
    "64-compile-cache-url-with-a-space": ENGINE + " (ccache's URL rules)",
    "65-compile-cache-bad-percent-escape": ENGINE + " (ccache's URL rules)",
    "66-compile-cache-password-ccache-drops": ENGINE + " (ccache's URL rules)",
}


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = recipe_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def loader_accepts(path: Path) -> bool:
    try:
        load_recipe_file(path)
    except RecipeError:
        return False
    return True


def schema_errors(validator: jsonschema.Draft202012Validator, path: Path) -> list[str] | None:
    """The schema's complaints about the file as data (None: the YAML layer refuses it first)."""
    loaded = loader.load(path.read_text(), str(path))
    if loaded.problems:
        return None
    data = loaded.data
    if isinstance(data, dict) and data.get("schema_version") == 1:
        data = upgrade_data(data)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(data)]


INVALID = sorted(CORPUS.glob("*.yaml"))
VALID_FILES = sorted(VALID.glob("*.yaml")) + sorted(bundled_dir("recipes").glob("*.yaml"))


def test_every_listed_fixture_exists() -> None:
    names = {p.stem for p in INVALID}
    assert set(YAML_RULES) | set(LOADER_ONLY) <= names, sorted((set(YAML_RULES) | set(LOADER_ONLY)) - names)


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_an_invalid_fixture_is_refused_by_both_or_its_rule_is_listed(validator, path: Path) -> None:
    assert not loader_accepts(path), f"{path.name}: the loader accepts an invalid fixture"
    errors = schema_errors(validator, path)
    if path.stem in YAML_RULES:
        assert errors is None, f"{path.name} is listed as a YAML-layer rule but reads as data"
    elif path.stem in LOADER_ONLY:
        assert errors == [], (f"{path.name}: the schema now refuses it ({errors}); remove it from LOADER_ONLY "
                              f"({LOADER_ONLY[path.stem]})")
    else:
        assert errors, f"{path.name}: the loader refuses it, the schema accepts it, and no loader-only rule is listed"


@pytest.mark.parametrize("path", VALID_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_valid_recipe_is_accepted_by_both(validator, path: Path) -> None:
    assert loader_accepts(path), path
    assert schema_errors(validator, path) == [], path


# Each value breaks a bound the field spec states; the schema always refused them, the loader did not.
OUT_OF_RANGE = ["platform.target.sve_vector_bits=100", "resources.memory_gb=-1", "build.memory_per_job_gb=0",
                "resources.disk.0.gb=-5", "artifacts.llvm.root.strip=-1", "artifacts.llvm.size=0"]


@pytest.mark.parametrize("assignment", OUT_OF_RANGE)
def test_a_value_out_of_its_range_is_refused_by_both(validator, assignment: str) -> None:
    path = bundled_dir("recipes") / "flagtree-cpu-arm64.yaml"
    with pytest.raises(RecipeError) as caught:
        parse_recipe(path.read_text(), str(path), [assignment])
    key = assignment.split("=")[0].replace(".0.", "[0].")
    assert any(p.key == key and "out of range" in p.message for p in caught.value.problems), caught.value.problems
    loaded = loader.load(path.read_text(), str(path))
    from flagtree_cpu_build.recipe.overrides import apply_override

    apply_override(loaded, assignment)
    assert list(validator.iter_errors(loaded.data)), assignment


def test_the_committed_schema_is_what_the_code_generates() -> None:
    assert json.loads(COMMITTED.read_text()) == recipe_json_schema(), (
        f"{COMMITTED} is stale: run `flagtree-cpu recipe schema -o {COMMITTED.relative_to(ROOT)}`")


def test_every_bundled_recipe_names_the_committed_schema_on_its_first_line() -> None:
    for path in bundled_dir("recipes").glob("*.yaml"):
        assert path.read_text().splitlines()[0] == MODELINE, path


def test_schema_output_option_writes_the_file_stdout_would_show(tmp_path: Path) -> None:
    target = tmp_path / "recipe.schema.json"
    result = CliRunner().invoke(app, ["recipe", "schema", "-o", str(target)])
    assert result.exit_code == 0, result.output
    assert result.stdout == "" and str(target) in result.stderr
    assert target.read_text() == COMMITTED.read_text()


def test_schema_output_into_a_missing_folder_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["recipe", "schema", "-o", str(tmp_path / "no" / "such" / "s.json")])
    assert result.exit_code == 2, result.output
    assert "cannot write the schema to" in result.stderr and "fix:" in result.stderr
    assert not (tmp_path / "no").exists()
