"""The --json envelope's schema: a valid JSON Schema that knows every error code the tool can raise."""

from __future__ import annotations

import jsonschema

from flagtree_cpu_build import errors
from flagtree_cpu_build.cli.envelope import ENVELOPE_SCHEMA, ERROR_CODES, crash_json, envelope, exit_json
from flagtree_cpu_build.errors import FlagtreeCpuError, Interrupted, RecipeError, RecipeProblem, Terminated


def every_error_class() -> list[type[FlagtreeCpuError]]:
    found, todo = [], [FlagtreeCpuError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return found


def test_the_schema_is_valid_and_names_every_error_code_with_its_exit_code() -> None:
    jsonschema.Draft202012Validator.check_schema(ENVELOPE_SCHEMA)
    assert any(cls.__module__ == errors.__name__ for cls in every_error_class())
    for cls in every_error_class():
        assert cls.kind in ERROR_CODES, cls
        assert str(int(cls.exit_code)) in ERROR_CODES[cls.kind].split(":")[0].split(", "), cls


def test_envelopes_of_every_kind_of_error_validate() -> None:
    validator = jsonschema.Draft202012Validator(ENVELOPE_SCHEMA)
    recipe = RecipeError("r.yaml", [RecipeProblem("r.yaml", 3, "name", "bad name", "rename it")])
    # a RecipeError of any kind carries problems, not one message: `recipe` below stands for them all
    failures = [cls("it failed", fix="do this", details=("a line",)) for cls in every_error_class()
                if not issubclass(cls, RecipeError) and cls is not Interrupted]
    failures += [recipe, Interrupted("sync"), Interrupted("setup", cause=Terminated(15)),
                 errors.BuildError("the build failed", log="/w/logs/build.log",
                                   diagnosis={"signature": "oom", "cause": "out of memory", "line": 7,
                                              "excerpt": ["killed"]})]
    for error in failures:
        validator.validate(envelope("sync", None, error.to_json()))
    validator.validate(envelope("recipe list", {"recipes": []}, None))
    validator.validate(envelope(None, None, crash_json(ZeroDivisionError("boom"))))
    validator.validate(envelope("status", {"items": []}, exit_json(9)))
    assert not validator.is_valid(envelope("status", None, None) | {"ok": False})  # not ok needs an error
    assert not validator.is_valid(envelope("status", None, exit_json(9)) | {"ok": True})
