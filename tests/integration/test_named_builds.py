"""Several builds in one recipe, for real: a framework built from source (its wheel installed by `install_wheels`)
before the compiler that needs it, each with its own stamp; `build --only`; status showing each; gate checks
(`before: build`) that stop the build with their words.

The world (built once for the module): two bare repositories, ``framework`` and ``compiler``, each holding
``make.py``, which appends its name to a record file (so a test sees which commands ran, in which order) and
writes what its build makes: the framework a wheel in ``dist/``, the compiler ``out/product.txt`` (or a wheel).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from tests.support.envelope import error_of, result_of
from tests.support.gitworld import commit_all, git, git_env, publish_bare
from tests.support.venvs import build_venv, site_packages

MAKE = '''\
import base64, hashlib, os, sys, zipfile

record, what = sys.argv[1], sys.argv[2]
with open(record, "a") as f:
    f.write(what + "\\n")


def wheel(folder, name):
    info = name + "-1.0.dist-info"
    members = {name + "/__init__.py": "BUILT = %r\\n" % open("VERSION").read().strip(),
               info + "/METADATA": "Metadata-Version: 2.1\\nName: " + name + "\\nVersion: 1.0\\n",
               info + "/WHEEL": "Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"}
    lines = []
    for path, text in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        lines.append("%s,sha256=%s,%d" % (path, digest, len(text.encode())))
    members[info + "/RECORD"] = "\\n".join(lines + [info + "/RECORD,,"]) + "\\n"
    os.makedirs(folder, exist_ok=True)
    with zipfile.ZipFile(os.path.join(folder, name + "-1.0-py3-none-any.whl"), "w") as archive:
        for path, text in members.items():
            archive.writestr(path, text)


if what == "framework":
    wheel("dist", "fwdemo")
elif what == "compiler":
    os.makedirs("out", exist_ok=True)
    with open("out/product.txt", "w") as f:
        f.write("built\\n")
elif what == "compiler-wheel":
    wheel(sys.argv[3], "compdemo")
'''

RECIPE = """\
schema_version: 2
name: two-builds
platform:
  host: {{arch: [x86_64, aarch64, riscv64]}}
sources:
  framework: {{url: "{framework}", ref: main, path: framework}}
  compiler: {{url: "{compiler}", ref: main, path: compiler}}
builds:
  framework:
    cwd: "{{sources.framework.path}}"
    argv: ["{{python}}", make.py, "{{workdir}}/record.txt", framework]
    inputs: {{sources: [framework]}}
    products: ["dist/*.whl"]
    install_wheels: ["dist/*.whl"]
build:
  needs: [framework]
  cwd: "{{sources.compiler.path}}"
  argv: ["{{python}}", make.py, "{{workdir}}/record.txt", compiler]
  wheel_argv: ["{{python}}", make.py, "{{workdir}}/record.txt", compiler-wheel, "{{wheel_dir}}"]
  inputs: {{sources: [compiler]}}
  products: [out/product.txt]
checks:
  - name: gate
    argv: ["{{python}}", -c, "import os, sys; sys.exit(3 if os.path.exists('{{workdir}}/gate-closed') else 0)"]
    before: build
"""


@pytest.fixture(scope="module")
def recipe_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("named-builds")
    env = git_env(root)
    urls = {}
    for name in ("framework", "compiler"):
        work = root / "work" / name
        work.mkdir(parents=True)
        git("init", "--quiet", "-b", "main", cwd=work, env=env)
        (work / "make.py").write_text(MAKE)
        (work / "VERSION").write_text(f"{name} 1\n")
        commit_all(work, f"{name} 1", env)
        publish_bare(work, root / f"{name}.git", env)
        urls[name] = (root / f"{name}.git").as_uri()
    recipe = root / "two-builds.yaml"
    recipe.write_text(RECIPE.format(**urls))
    return recipe


class Bench:
    def __init__(self, recipe: Path, root: Path):
        self.recipe, self.ws = recipe, root / "ws"
        self.python = build_venv(root / "venv", ["pip"])

    def run(self, *args: str) -> Result:
        return CliRunner().invoke(app, ["-r", str(self.recipe), "-w", str(self.ws), *args])

    def build(self, *args: str) -> Result:
        return self.run("build", "--ignore-host", "--python", str(self.python), *args)

    def ran(self) -> list[str]:
        record = self.ws / "record.txt"
        return record.read_text().split() if record.exists() else []

    def touch(self, source: str) -> None:
        """A local change in a source's checkout: its stamp input changes."""
        (self.ws / source / "VERSION").write_text(f"{source} 2\n")


@pytest.fixture
def bench(recipe_file: Path, tmp_path: Path) -> Bench:
    bench = Bench(recipe_file, tmp_path)
    result = bench.run("sync")
    assert result.exit_code == 0, result.stderr
    return bench


def actions(result: Result) -> dict[str, str]:
    return {a["subject"]: a["status"] for a in result_of(result.stdout)["actions"]}


def build_items(bench: Bench) -> dict[str, dict]:
    result = bench.run("status", "--json", "--python", str(bench.python))
    assert result.exit_code in (0, 3), result.stderr  # status exits non-zero while something is not current
    return {i["subject"]: i for i in result_of(result.stdout)["items"] if i["area"] == "build"}


def test_builds_run_in_needs_order_and_the_framework_wheel_is_installed(bench: Bench) -> None:
    result = bench.build("--json")
    assert result.exit_code == 0, result.stderr
    assert bench.ran() == ["framework", "compiler"]
    assert actions(result) == {"framework": "created", "build": "created"}
    assert (site_packages(bench.python) / "fwdemo" / "__init__.py").read_text() == "BUILT = 'framework 1'\n"
    stamps = bench.ws / ".flagtree-cpu"  # the recipe state folder of a workspace with one recipe
    framework_stamp = json.loads((stamps / "build-framework-editable.json").read_text())
    compiler_stamp = json.loads((stamps / "build-editable.json").read_text())
    assert set(framework_stamp["components"]["sources"]) == {"framework"}  # its own inputs only
    assert compiler_stamp["components"]["needs"]["framework"]["sources"] == framework_stamp["components"]["sources"]
    again = bench.build("--json")
    assert again.exit_code == 0, again.stderr
    assert actions(again) == {"framework": "ok", "build": "ok"} and bench.ran() == ["framework", "compiler"]


def test_a_changed_compiler_reruns_only_the_compiler(bench: Bench) -> None:
    assert bench.build().exit_code == 0
    bench.touch("compiler")
    items = build_items(bench)
    assert (items["framework"]["state"], items["build"]["state"]) == ("ok", "stale")
    result = bench.build("--json")
    assert result.exit_code == 0, result.stderr
    assert actions(result) == {"framework": "ok", "build": "updated"}
    assert bench.ran() == ["framework", "compiler", "compiler"]


def test_a_changed_framework_reruns_the_compiler_that_needs_it(bench: Bench) -> None:
    assert bench.build().exit_code == 0
    bench.touch("framework")
    items = build_items(bench)
    assert (items["framework"]["state"], items["build"]["state"]) == ("stale", "stale")
    assert any(r.startswith("needs.framework.sources.framework.local_changes changed")
               for r in items["build"]["reasons"])
    result = bench.build("--json")
    assert result.exit_code == 0, result.stderr
    assert actions(result) == {"framework": "updated", "build": "updated"}
    assert bench.ran() == ["framework", "compiler", "framework", "compiler"]
    assert "framework 2" in (site_packages(bench.python) / "fwdemo" / "__init__.py").read_text()


def test_a_framework_rebuilt_from_the_same_inputs_does_not_rerun_the_compiler(bench: Bench) -> None:
    assert bench.build().exit_code == 0
    for wheel in (bench.ws / "framework" / "dist").glob("*.whl"):
        wheel.unlink()  # its product is gone: it runs again, from the same inputs
    result = bench.build("--json")
    assert result.exit_code == 0, result.stderr
    assert actions(result) == {"framework": "updated", "build": "ok"}
    assert bench.ran() == ["framework", "compiler", "framework"]


def test_only_runs_that_build_and_those_it_needs(bench: Bench) -> None:
    result = bench.build("--only", "framework", "--json")
    assert result.exit_code == 0, result.stderr
    assert actions(result) == {"framework": "created"} and bench.ran() == ["framework"]
    items = build_items(bench)
    assert (items["framework"]["state"], items["build"]["state"]) == ("ok", "missing")
    result = bench.build("--only", "build", "--json")
    assert result.exit_code == 0, result.stderr
    assert actions(result) == {"framework": "ok", "build": "created"} and bench.ran() == ["framework", "compiler"]


def test_only_with_an_unknown_name_says_the_builds_there_are(bench: Bench) -> None:
    result = bench.build("--only", "framwork", "--json")
    assert result.exit_code == 2, result.stderr
    error = error_of(result.stdout)
    assert "no build named 'framwork'" in error["message"] and "framework" in error["message"]
    assert bench.ran() == []


def test_install_wheels_matching_nothing_stops_the_build_naming_the_key(bench: Bench) -> None:
    result = bench.run("--set", "builds.framework.install_wheels=[wheels/*.whl]", "build", "--ignore-host",
                       "--python", str(bench.python), "--json")
    assert result.exit_code == 5, result.stderr
    error = error_of(result.stdout)
    assert error["message"].startswith("builds.framework.install_wheels[0] (recipe ")
    assert "'wheels/*.whl' matched no wheel in " + str(bench.ws / "framework") in error["message"]
    assert bench.ran() == ["framework"]  # the compiler did not run
    assert not (site_packages(bench.python) / "fwdemo").exists()


def test_a_wheel_an_earlier_build_left_is_passed_over_and_said(bench: Bench) -> None:
    """A pin moved and dist/ still holds the old wheel: the one this run wrote is installed, the old one named."""
    assert bench.build().exit_code == 0
    old = bench.ws / "framework" / "dist" / "fwdemo-0.9-py3-none-any.whl"
    shutil.copy(bench.ws / "framework" / "dist" / "fwdemo-1.0-py3-none-any.whl", old)
    bench.touch("framework")
    result = bench.build()
    assert result.exit_code == 0, result.stderr
    assert f"passing over {old}, an earlier build's wheel" in result.stderr
    assert "framework 2" in (site_packages(bench.python) / "fwdemo" / "__init__.py").read_text()


def test_two_wheels_of_one_distribution_this_build_wrote_are_refused_before_pip_runs(bench: Bench) -> None:
    assert bench.build().exit_code == 0
    # a command that writes two wheels of fwdemo (next to the one the first build left)
    two = ("builds.framework.argv=[\"{python}\", -c, \"import shutil as s; w = 'dist/fwdemo-'; "
           "[s.copy(w + '1.0-py3-none-any.whl', w + v + '-py3-none-any.whl') for v in ('0.8', '0.7')]\"]")
    result = bench.run("--set", two, "build", "--ignore-host", "--python", str(bench.python), "--json")
    assert result.exit_code == 5, result.stderr
    error = error_of(result.stdout)
    assert "matched 3 wheels of fwdemo (2 of them written by this build): pip installs one" in error["message"]


def test_a_failing_gate_check_stops_the_build_with_its_words(bench: Bench) -> None:
    (bench.ws / "gate-closed").write_text("")
    result = bench.build("--json")
    assert result.exit_code == 5, result.stderr
    error = error_of(result.stdout)
    assert error["message"].startswith("gate check gate failed; the build did not run: ")
    assert bench.ran() == ["framework"]  # the gate guards `build` only
    assert not (bench.ws / "compiler" / "out").exists()
    (bench.ws / "gate-closed").unlink()
    result = bench.build("--json")
    assert result.exit_code == 0, result.stderr
    assert actions(result) == {"framework": "ok", "build": "created"}


def test_an_up_to_date_build_runs_no_gate(bench: Bench) -> None:
    assert bench.build().exit_code == 0
    (bench.ws / "gate-closed").write_text("")
    result = bench.build("--json")
    assert result.exit_code == 0, result.stderr
    assert actions(result) == {"framework": "ok", "build": "ok"}


def test_a_published_compiler_fits_another_workspace_only_with_the_same_framework(recipe_file: Path,
                                                                                  tmp_path: Path) -> None:
    wheelhouse = tmp_path / "wheelhouse"
    benches = []
    for name in ("publisher", "same", "other"):
        bench = Bench(recipe_file, tmp_path / name)
        assert bench.run("sync").exit_code == 0
        benches.append(bench)
    publisher, same, other = benches
    result = publisher.build("--publish", str(wheelhouse), "--json")
    assert result.exit_code == 0, result.stderr
    assert publisher.ran() == ["framework", "compiler-wheel"]
    # another workspace with the same framework: the framework is built there, the compiler taken
    result = same.build("--wheelhouse", str(wheelhouse), "--json")
    assert result.exit_code == 0, result.stderr
    assert same.ran() == ["framework"]
    compiler = result_of(result.stdout)["actions"][-1]
    assert compiler["subject"] == "build" and compiler["wheelhouse"]["wheelhouse"] == str(wheelhouse)
    # one whose framework differs: the published compiler was built against another one, so it is built here
    other.touch("framework")
    result = other.build("--wheelhouse", str(wheelhouse), "--json")
    assert result.exit_code == 0, result.stderr
    assert other.ran() == ["framework", "compiler"]
    assert "needs.framework.sources.framework.local_changes" in result.stderr


def test_an_offline_build_lists_the_missing_inputs_of_every_build_at_once(recipe_file: Path, tmp_path: Path) -> None:
    bench = Bench(recipe_file, tmp_path)  # never synced
    result = bench.build("--offline", "--json")
    assert result.exit_code == 5, result.stderr
    error = error_of(result.stdout)
    assert error["message"] == "2 inputs of an offline build are missing; nothing was run"
    assert [d.split(":")[0] for d in error["details"]] == ["source framework", "source compiler"]
    assert bench.ran() == []


def test_the_dry_run_plans_each_build(recipe_file: Path, tmp_path: Path) -> None:
    bench = Bench(recipe_file, tmp_path)
    result = bench.run("setup", "--dry-run", "--json", "--python", str(bench.python))
    assert result.exit_code == 0, result.stderr
    items = [i for i in result_of(result.stdout)["items"] if i["area"] == "build"]
    assert [(i["subject"], i["will"], i["reason"]) for i in items] == [
        ("framework", "created", "no previous build"), ("build", "created", "no previous build")]


def test_only_a_build_before_the_final_one_with_publish_is_a_usage_error(bench: Bench, tmp_path: Path) -> None:
    result = bench.build("--only", "framework", "--publish", str(tmp_path / "wheelhouse"), "--json")
    assert result.exit_code == 2, result.stderr
    assert error_of(result.stdout)["message"] == "--publish is for the final build 'build'; --only framework does " \
        "not run it"
    assert bench.ran() == []
