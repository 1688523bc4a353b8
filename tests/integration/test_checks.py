"""The generic check runner end to end: a small schema-2 recipe written here, `flagtree-cpu validate`
run on it with this test's own interpreter. Commands judged by exit status, output patterns and pytest's
counts; an import with a version range; wheels whose ELF objects are inspected without unpacking them;
checks skipped by `where: target` on another host and by `when: {variant}`."""

from __future__ import annotations

import json
import platform
import struct
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from tests.support.envelope import result_of

HOST = platform.machine()


def elf_header(machine: int) -> bytes:
    """A valid ELF64 little-endian header for a shared object: all the wheel check reads."""
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    return ident + struct.pack("<HHIQQQIHHHHHH", 3, machine, 1, 0, 64, 0, 0, 64, 56, 0, 64, 0, 0)


RISCV64, X86_64 = 243, 62


def make_wheel(folder: Path, name: str, members: dict[str, bytes]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in members.items():
            archive.writestr(member, data)
    return path


class Checks:
    """A workspace folder and a recipe file of the given checks."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ws = root / "ws"
        self.ws.mkdir(parents=True, exist_ok=True)

    def recipe(self, checks: list[dict[str, Any]], **extra: Any) -> Path:
        data: dict[str, Any] = {"schema_version": 2, "name": "checks-fixture", "platform": {"host": {"arch": [HOST]}},
                                "sources": {}, "checks": checks}
        for key, value in extra.items():
            data[key] = value if not isinstance(value, dict) else {**data.get(key, {}), **value}
        path = self.root / "checks-fixture.yaml"
        path.write_text(json.dumps(data, indent=1))  # JSON is YAML
        return path

    def validate(self, checks: list[dict[str, Any]], *args: str, **extra: Any) -> Result:
        recipe = self.recipe(checks, **extra)
        return CliRunner().invoke(app, ["-w", str(self.ws), "--recipe", str(recipe), "validate", "--json",
                                        "--python", sys.executable, *args])


@pytest.fixture
def checks(tmp_path: Path) -> Checks:
    return Checks(tmp_path)


def rows(result: Result) -> dict[str, dict[str, Any]]:
    document = result_of(result.stdout)
    assert document["schema"] == "flagtree-cpu/validate/v1", document
    return {r["kernel"]: r for r in document["results"]}


PY = "{python}"


def test_a_command_is_judged_by_exit_status_output_and_absent_patterns(checks: Checks) -> None:
    say = [PY, "-c", "import os; print('hello', os.environ['FROM_RUNTIME'], os.environ['FROM_CHECK'])"]
    result = checks.validate([
        {"name": "says-hello", "argv": say, "env": {"set": {"FROM_CHECK": "two"}},
         "expect": {"output": r"^hello one two$", "absent": "Traceback"}},
        {"name": "exit-3", "argv": [PY, "-c", "raise SystemExit(3)"], "expect": {"exit": 3}},
        {"name": "wrong-exit", "argv": [PY, "-c", "print('last words'); raise SystemExit(2)"]},
        {"name": "wrong-output", "argv": [PY, "-c", "print('goodbye')"], "expect": {"output": "hel+o"}},
        {"name": "forbidden", "argv": [PY, "-c", "print('fine'); print('WARNING: slow path')"],
         "expect": {"absent": "WARNING.*path"}, "required": False},
    ], runtime={"env": {"set": {"FROM_RUNTIME": "one"}}})
    assert result.exit_code == 6, result.stderr
    found = rows(result)
    assert {name: r["status"] for name, r in found.items()} == {
        "says-hello": "pass", "exit-3": "pass", "wrong-exit": "fail", "wrong-output": "fail", "forbidden": "fail"}
    assert found["wrong-exit"]["message"] == "exit status 2, expected 0"
    assert found["wrong-exit"]["fix"].startswith("read the check's output: ") and found["wrong-exit"]["log"]
    assert "last words" in Path(found["wrong-exit"]["log"]).read_text()
    assert found["wrong-output"]["message"] == "no output matches /hel+o/ (last line: goodbye)"
    assert found["forbidden"]["message"] == ("the output has /WARNING.*path/, which must not occur: "
                                             "WARNING: slow path")
    assert found["forbidden"]["required"] is False
    assert json.loads(result.stdout)["error"]["message"] == "2 required validation checks failed"  # not the optional


def test_pytest_counts_pass_and_fail(checks: Checks) -> None:
    tests = checks.ws / "test_tiny.py"
    tests.write_text("def test_one():\n    assert True\n\n\ndef test_two():\n    assert 1 + 1 == 2\n")
    run_pytest = [PY, "-m", "pytest", "-p", "no:cacheprovider", "test_tiny.py"]
    result = checks.validate([
        {"name": "tiny-suite", "argv": run_pytest, "expect": {"pytest": {"passed": 2, "failed": 0}}},
        {"name": "tiny-suite-q", "argv": [*run_pytest, "-q"], "expect": {"pytest": {"passed": 2, "skipped": 0}}},
        {"name": "wants-three", "argv": run_pytest, "expect": {"pytest": {"passed": 3}}},
        {"name": "no-summary", "argv": [PY, "-c", "print('ran nothing')"], "expect": {"pytest": {"passed": 1}}},
    ])
    assert result.exit_code == 6
    found = rows(result)
    assert found["tiny-suite"]["status"] == "pass" and found["tiny-suite"]["figure"] == "2 passed"
    assert found["tiny-suite"]["details"]["pytest"] == {"passed": 2}
    assert found["tiny-suite-q"]["status"] == "pass"
    assert found["wants-three"]["status"] == "fail"
    assert found["wants-three"]["message"] == "pytest counts passed=3 expected, saw passed=2"
    assert found["no-summary"]["message"].startswith("no pytest summary in the output")


def test_an_import_is_judged_against_a_version_range(checks: Checks) -> None:
    (checks.ws / "fixturemod.py").write_text("__version__ = '1.4.2'\n")  # importable: checks run in the workdir
    result = checks.validate([
        {"name": "fits", "import": {"module": "fixturemod", "version": ">=1.4,<2"}},
        {"name": "too-old", "import": {"module": "fixturemod", "version": ">=2"}},
        {"name": "absent", "import": {"module": "no_such_module_here"}},
    ])
    assert result.exit_code == 6
    found = rows(result)
    assert found["fits"]["status"] == "pass" and found["fits"]["figure"] == "fixturemod 1.4.2"
    assert found["too-old"]["status"] == "fail"
    assert found["too-old"]["message"].startswith("fixturemod 1.4.2, expected >=2")
    assert found["absent"]["status"] == "fail"
    assert "cannot import no_such_module_here" in found["absent"]["message"]
    assert "No module named 'no_such_module_here'" in found["absent"]["message"]


def test_wheel_objects_are_judged_by_their_elf_machine(checks: Checks) -> None:
    dist = checks.ws / "dist"
    make_wheel(dist / "good", "pkg-1.0-cp311-cp311-linux_riscv64.whl", {
        "pkg/__init__.py": b"", "pkg/_core.so": elf_header(RISCV64) + bytes(200),
        "pkg/libs/libhelper.so.1": elf_header(RISCV64), "pkg/data.bin": b"\x7fEL"})
    make_wheel(dist / "bad", "pkg-1.0-cp311-cp311-linux_riscv64.whl", {
        "pkg/_core.so": elf_header(RISCV64), "pkg/_oops.so": elf_header(X86_64)})
    result = checks.validate([
        {"name": "good-wheel", "wheel": {"path": "{workdir}/dist/good/*.whl", "arch": "riscv64",
                                         "forbid": ["x86_64"], "tags": ["linux_riscv64"]}},
        {"name": "bad-wheel", "wheel": {"path": "dist/bad/*.whl", "forbid": ["x86_64"]}},
        {"name": "bad-arch", "wheel": {"path": "dist/bad/*.whl", "arch": "riscv64"}},
        {"name": "wrong-tag", "wheel": {"path": "dist/good/*.whl", "tags": ["linux_aarch64"]}},
        {"name": "no-wheel", "wheel": {"path": "dist/none/*.whl", "arch": "riscv64"}},
    ])
    assert result.exit_code == 6
    found = rows(result)
    good = found["good-wheel"]
    assert good["status"] == "pass", good
    assert good["figure"] == "1 wheel, 2 ELF objects (riscv64)"
    assert good["details"]["wheels"]["pkg-1.0-cp311-cp311-linux_riscv64.whl"] == {
        "pkg/_core.so": "riscv64", "pkg/libs/libhelper.so.1": "riscv64"}
    assert found["bad-wheel"]["status"] == "fail"
    assert "pkg/_oops.so (x86_64)" in found["bad-wheel"]["message"]
    assert "pkg/_core.so" not in found["bad-wheel"]["message"]
    assert "1 object(s) not for riscv64: pkg/_oops.so (x86_64)" in found["bad-arch"]["message"]
    assert found["wrong-tag"]["message"] == ("pkg-1.0-cp311-cp311-linux_riscv64.whl is tagged linux_riscv64, "
                                             "not linux_aarch64")
    assert found["no-wheel"]["message"] == f"no wheel matches {checks.ws / 'dist/none/*.whl'}"


def test_target_checks_are_skipped_on_another_host_and_when_selects_a_variant(checks: Checks) -> None:
    other = "riscv64" if HOST != "riscv64" else "x86_64"
    result = checks.validate([
        {"name": "runs-the-product", "argv": [PY, "-c", "raise SystemExit(1)"]},  # where: target by default
        {"name": "inspects-it", "where": "host", "argv": [PY, "-c", "print('ok')"]},
        {"name": "only-for-b", "argv": [PY, "-c", "raise SystemExit(1)"], "where": "host",
         "when": {"variant": ["b"]}},
    ], platform={"host": {"arch": [HOST]}, "target": {"arch": other}}, variant="a",
        variants={"a": {"description": "the default"}, "b": {"description": "another"}})
    assert result.exit_code == 0, result.stdout + result.stderr
    document = result_of(result.stdout)
    assert document["variant"] == "a"
    found = rows(result)
    assert found["runs-the-product"]["status"] == "skip"
    assert found["runs-the-product"]["message"] == f"runs on {other}; this host is {HOST}"
    assert found["inspects-it"]["status"] == "pass"
    assert "only-for-b" not in found  # another variant's check is not this variant's: not run, not reported


def test_a_crash_is_explained_by_the_recipes_diagnosis_and_sigill_by_the_target(checks: Checks) -> None:
    result = checks.validate([
        {"name": "frob", "argv": [PY, "-c", "print('the frobnicator exploded'); raise SystemExit(1)"]},
        {"name": "illegal", "argv": [PY, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGILL)"]},
        {"name": "missing-program", "argv": ["no-such-program-here", "--version"]},
    ], diagnosis={"run": [{"id": "frobnicator", "pattern": "frobnicator exploded", "cause": "the frobnicator broke",
                           "fix": "replace the frobnicator"}]},
        platform={"host": {"arch": [HOST]}, "target": {"cpu_features": ["frob2"]}})
    assert result.exit_code == 6
    found = rows(result)
    assert found["frob"]["details"]["signature"] == "frobnicator"
    assert found["frob"]["message"] == "the frobnicator broke (exit status 1, expected 0)"
    assert found["frob"]["fix"] == "replace the frobnicator"
    assert found["missing-program"]["message"] == ("cannot start it: no-such-program-here: No such file or "
                                                   "directory")
    assert found["illegal"]["figure"] == "SIGILL"
    assert found["illegal"]["message"] == ("killed by SIGILL (illegal instruction): this CPU lacks an instruction "
                                           "the code uses (the recipe's target needs frob2)")


def test_hazards_warn_and_only_and_list_work(checks: Checks, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIXTURE_INTERPRET", "yes")
    runtime = {"hazards": [{"name": "FIXTURE_INTERPRET", "matches": "(?i)1|yes", "why": "nothing real runs",
                            "fix": "unset it"}]}
    spec = [{"name": "one", "argv": [PY, "-c", "print(1)"]}, {"name": "two", "argv": [PY, "-c", "print(2)"]}]
    result = checks.validate(spec, "--check", "two", runtime=runtime)
    assert result.exit_code == 0, result.stderr
    document = result_of(result.stdout)
    assert document["warnings"] == ["FIXTURE_INTERPRET=yes: nothing real runs; unset it"]
    assert list(rows(result)) == ["two"]
    listed = CliRunner().invoke(app, ["-w", str(checks.ws), "--recipe", str(checks.recipe(spec)), "validate",
                                      "--list", "--json"])
    assert listed.exit_code == 0
    assert [(c["name"], c["kind"], c["required"]) for c in result_of(listed.stdout)["checks"]] == [
        ("one", "argv", True), ("two", "argv", True)]
    assert "flagtree/backend" in [p["preset"] for p in result_of(listed.stdout)["presets"]]


def test_an_unknown_preset_is_a_recipe_error_and_no_checks_is_said(checks: Checks) -> None:
    unknown = checks.validate([{"uses": "flagtree/vector-ad"}])
    assert unknown.exit_code == 2
    assert "there is no preset 'flagtree/vector-ad'" in unknown.stdout + unknown.stderr
    assert "did you mean 'flagtree/vector-add'" in unknown.stdout + unknown.stderr
    none = checks.validate([])
    assert none.exit_code == 2
    assert "recipe checks-fixture has no checks" in none.stdout + none.stderr


def test_a_file_the_runtime_env_reads_that_is_missing_fails_validation_with_its_key(checks: Checks) -> None:
    spec = [{"name": "one", "argv": [PY, "-c", "print(1)"]}]
    result = checks.validate(spec, runtime={"env": {"from_file": {"APP_VERSION": "app/VERSION"}}})
    assert result.exit_code == 6, result.stdout  # validation failed, not a build error
    error = json.loads(result.stdout)["error"]
    assert "runtime.env.from_file.APP_VERSION" in error["message"] and "VERSION" in error["message"]


def test_a_checks_own_env_file_that_is_missing_fails_that_check_only(checks: Checks) -> None:
    (checks.ws / "VERSION").write_text(" 3.6.0+spacemit.a5 \n")
    spec = [{"name": "reads-it", "argv": [PY, "-c", "import os; print(os.environ['V'])"],
             "env": {"from_file": {"V": "VERSION"}}, "expect": {"output": r"^3\.6\.0\+spacemit\.a5$"}},
            {"name": "missing", "argv": [PY, "-c", "print(1)"], "env": {"from_file": {"V": "NOT-THERE"}}},
            {"name": "after", "argv": [PY, "-c", "print(1)"]}]
    result = checks.validate(spec)
    assert result.exit_code == 6
    found = rows(result)
    assert found["reads-it"]["status"] == "pass" and found["after"]["status"] == "pass"
    assert found["missing"]["status"] == "fail" and "NOT-THERE" in json.dumps(found["missing"])
