"""Environment operations for real: scripts sourced by bash, `env` and `env --build` on a user recipe that
unsets, sources and prepends, and a fixture build that receives (and is stamped with) what they made."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.envops import EnvLayer, SourceScriptError, apply_layers, apply_ops, source_script
from flagtree_cpu_build.recipe import EnvOps, SourceScript
from tests.integration.test_build import BuildWorkspace, bws  # noqa: F401  (the fixture)
from tests.support.envelope import error_of, result_of

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="sourcing needs bash")

# --- sourcing with bash -----------------------------------------------------------------------------


def test_sourcing_a_real_script(tmp_path: Path) -> None:
    script = tmp_path / "set_env.sh"
    script.write_text('echo "chatter on stdout"\necho "chatter on stderr" >&2\n'
                      'export A=1\nexport PATH="/opt/vendor/bin:$PATH"\nunset B\nhelper=not-exported\n'
                      'export ARGS="$*"\ncd /\n')
    ops = EnvOps(source=(SourceScript(script="set_env.sh", args=("one", "two words")),), set={"AFTER": "$A"})
    inherited = {"PATH": "/usr/bin:/bin", "B": "2", "HOME": str(tmp_path), "KEEP": "x"}
    applied = apply_ops(ops, inherited, workdir=tmp_path, key="build.env")
    env = applied.env
    assert env["A"] == "1" and "B" not in env and env["KEEP"] == "x"
    assert env["PATH"] == "/opt/vendor/bin:/usr/bin:/bin"
    assert env["ARGS"] == "one two words"
    assert "helper" not in env  # not exported by the script: a build from the user's shell would not see it
    assert not {"PWD", "SHLVL", "_", "OLDPWD"} & set(env)  # bash's own, not inherited here
    assert env["AFTER"] == "$A"  # set is literal text
    (record,) = applied.sourced
    assert record.changed == {"PATH": "/opt/vendor/bin:/usr/bin:/bin", "B": None, "A": "1", "ARGS": "one two words"}
    changes = {c.name: (c.action, c.front) for c in applied.changes}
    assert changes["PATH"] == ("prepended", ("/opt/vendor/bin",)) and changes["B"] == ("dropped", ())


def test_a_real_script_sees_the_environment_so_far(tmp_path: Path) -> None:
    (tmp_path / "s.sh").write_text('export SEEN="${STALE:-none}/${EARLY:-none}"\n')
    layers = [EnvLayer(EnvOps(set={"EARLY": "yes"}), "build.env"),
              EnvLayer(EnvOps(unset=("STALE",), source=(SourceScript(script=str(tmp_path / "s.sh")),)), "t.env")]
    applied = apply_layers(layers, {"PATH": "/usr/bin:/bin", "STALE": "old"})
    assert applied.env["SEEN"] == "none/yes"


def test_a_failing_script_reports_the_key_and_its_last_lines(tmp_path: Path) -> None:
    script = tmp_path / "broken.sh"
    script.write_text('echo "looking for the driver"\necho "error: driver 23.0 not found" >&2\nreturn 3\n')
    with pytest.raises(SourceScriptError) as caught:
        apply_ops(EnvOps(source=(SourceScript(script=str(script)),)), {"PATH": "/usr/bin:/bin"},
                  key="toolchains.npu.env")
    error = caught.value
    assert error.message == f"toolchains.npu.env.source[0]: sourcing {script} failed (exit status 3)"
    assert "error: driver 23.0 not found" in error.details and "looking for the driver" in error.details
    assert error.exit_code == 5


def test_a_script_that_exits_or_hangs_is_reported(tmp_path: Path) -> None:
    exits = tmp_path / "exits.sh"
    exits.write_text("export A=1\nexit 0\n")
    with pytest.raises(SourceScriptError, match="calls `exit`"):
        source_script(exits, (), {"PATH": "/usr/bin:/bin"}, tmp_path)
    hangs = tmp_path / "hangs.sh"
    hangs.write_text("sleep 30\n")
    with pytest.raises(SourceScriptError, match="did not finish within 0.5 s"):
        source_script(hangs, (), {"PATH": "/usr/bin:/bin"}, tmp_path, timeout_s=0.5)


def test_what_a_script_prints_is_not_its_environment(tmp_path: Path) -> None:
    script = tmp_path / "s.sh"
    script.write_text("printf 'X=not-this\\0Y=nor-this\\n'\nexport MULTI=\"line one\nline two\"\n")
    env = source_script(script, (), {"PATH": "/usr/bin:/bin"}, tmp_path)
    assert env["MULTI"] == "line one\nline two" and "X" not in env and "Y" not in env


# --- `env` on a user recipe -------------------------------------------------------------------------

RECIPE = """\
schema_version: 2
name: env-ops-demo
platform:
  host: {{arch: [x86_64, aarch64, riscv64]}}
sources:
  app:
    url: {url}
    ref: main
    commit: 0123456789abcdef0123456789abcdef01234567
    path: app
toolchains:
  vendor:
    path: {vendor}
    fix: install the vendor SDK into {vendor}
    env:
      source: ["{{toolchains.vendor.path}}/set_env.sh"]
      prepend: {{LD_LIBRARY_PATH: ["{{toolchains.vendor.path}}/lib"]}}
build:
  cwd: "{{sources.app.path}}"
  argv: ["{{python}}", -c, "pass"]
  env:
    unset: ["STALE_*"]
    set: {{MODE: cpu}}
    prepend: {{PATH: ["{{workdir}}/tools/bin"]}}
runtime:
  env:
    set: {{MODE: cpu}}
    append: {{PYTHONPATH: ["{{sources.app.path}}/python"]}}
"""
SCRIPT = 'export VENDOR_HOME="{vendor}"\nexport PATH="{vendor}/bin:$PATH"\nunset DROP_ME\n'


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    (vendor / "set_env.sh").write_text(SCRIPT.format(vendor=vendor))
    recipe = tmp_path / "demo.yaml"
    recipe.write_text(RECIPE.format(url=(tmp_path / "app.git").as_uri(), vendor=vendor))
    monkeypatch.setenv("STALE_A", "1")
    monkeypatch.setenv("DROP_ME", "x")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    return recipe, vendor


def cli(recipe: Path, workdir: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["-r", str(recipe), "-w", str(workdir), *args])


def test_env_build_json_shows_what_each_op_did(demo: tuple[Path, Path], tmp_path: Path) -> None:
    recipe, vendor = demo
    ws, python = tmp_path / "ws", tmp_path / "venv" / "bin" / "python"
    result = cli(recipe, ws, "env", "--build", "--json", "--python", str(python))
    assert result.exit_code == 0, result.stderr
    document = result_of(result.stdout)
    assert document["kind"] == "build"
    assert document["set"] == {
        "MODE": "cpu",
        "PATH": f"{python.parent}:{vendor}/bin:{ws}/tools/bin:/usr/bin:/bin",
        "VENDOR_HOME": str(vendor),
        "LD_LIBRARY_PATH": f"{vendor}/lib",
    }
    assert sorted(document["unset"]) == ["DROP_ME", "STALE_A"]
    changes = {c["name"]: c for c in document["changes"]}
    assert changes["STALE_A"]["action"] == "dropped" and changes["STALE_A"]["by"] == "build.env.unset"
    assert changes["DROP_ME"]["by"] == f"{vendor}/set_env.sh"
    assert changes["PATH"]["action"] == "prepended"
    assert changes["PATH"]["front"] == [str(python.parent), f"{vendor}/bin", f"{ws}/tools/bin"]
    assert (changes["VENDOR_HOME"]["action"], changes["VENDOR_HOME"]["new"]) == ("sourced", str(vendor))
    assert document["sourced"] == [{"script": f"{vendor}/set_env.sh", "key": "toolchains.vendor.env.source[0]",
                                    "set": {"VENDOR_HOME": str(vendor),
                                            "PATH": f"{vendor}/bin:{ws}/tools/bin:/usr/bin:/bin"},
                                    "unset": ["DROP_ME"]}]
    assert "inherited STALE_A dropped (was '1')" in result.stderr


def test_env_prints_the_runtime_exports_a_shell_can_eval(demo: tuple[Path, Path], tmp_path: Path) -> None:
    recipe, vendor = demo
    ws = tmp_path / "ws"
    result = cli(recipe, ws, "env")
    assert result.exit_code == 0, result.stderr
    assert f"from {vendor}/set_env.sh (toolchains.vendor.env.source[0]): 3 variables changed" in result.stderr
    assert result.stdout.splitlines() == [
        "unset DROP_ME",
        "export MODE=cpu",
        f"export PYTHONPATH={ws}/app/python",
        f"export LD_LIBRARY_PATH={vendor}/lib",
        f"export PATH={vendor}/bin:/usr/bin:/bin",
        f"export VENDOR_HOME={vendor}",
    ]
    # and bash agrees: evaluating it gives the environment the ops describe
    shown = (tmp_path / "exports.sh")
    shown.write_text(result.stdout + 'printf "%s|%s|%s" "$PATH" "${DROP_ME-gone}" "$MODE"\n')
    env = source_script(shown, (), {"PATH": "/usr/bin:/bin", "DROP_ME": "x"}, tmp_path)
    assert env["PATH"] == f"{vendor}/bin:/usr/bin:/bin" and "DROP_ME" not in env and env["MODE"] == "cpu"


def test_a_missing_vendor_script_names_it_the_key_and_the_fix(demo: tuple[Path, Path], tmp_path: Path) -> None:
    recipe, vendor = demo
    (vendor / "set_env.sh").unlink()
    for args in (("env", "--json"), ("env", "--build", "--json")):
        result = cli(recipe, tmp_path / "ws", *args)
        assert result.exit_code == 5, result.stdout
        error = error_of(result.stdout)
        assert error["message"] == (f"toolchains.vendor.env.source[0] sources {vendor}/set_env.sh, "
                                    "which does not exist")
        assert error["fix"] == (f"install the vendor SDK into {vendor} (or point FLAGTREE_CPU_TOOLCHAIN_VENDOR at "
                                "this host's copy)")


def test_a_toolchain_override_moves_the_script_too(demo: tuple[Path, Path], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    recipe, vendor = demo
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "set_env.sh").write_text("export VENDOR_HOME=elsewhere\n")
    monkeypatch.setenv("FLAGTREE_CPU_TOOLCHAIN_VENDOR", str(other))
    result = cli(recipe, tmp_path / "ws", "env", "--json")
    assert result.exit_code == 0, result.stdout
    assert result_of(result.stdout)["set"]["VENDOR_HOME"] == "elsewhere"


# --- a real build -----------------------------------------------------------------------------------


def test_the_build_gets_the_ops_and_a_changed_script_rebuilds(bws: BuildWorkspace, tmp_path: Path,  # noqa: F811
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "vendor-env.sh"
    script.write_text('export VENDOR_FLAG=1\nexport PATH="/opt/vendor-a/bin:$PATH"\nunset DROP_ME\n')
    monkeypatch.setenv("DROP_ME", "x")
    monkeypatch.setenv("OLD_VENDOR_X", "stale")
    sets = (f"build.env.source=[{script}]", "build.env.unset=[LLVM_*, OLD_VENDOR_*]",
            "build.env.prepend.LD_LIBRARY_PATH=[/opt/vendor-a/lib]")
    result = bws.build(sets=sets)
    assert result.exit_code == 0, result.stderr
    [entry] = [r for r in bws.build_records() if "editable_wheel" in r["argv"]]
    env = entry["env"]
    assert env["VENDOR_FLAG"] == "1" and "DROP_ME" not in env and "OLD_VENDOR_X" not in env
    assert env["PATH"].split(os.pathsep)[:2] == [str(bws.python.parent), "/opt/vendor-a/bin"]
    assert env["LD_LIBRARY_PATH"].split(os.pathsep)[0] == "/opt/vendor-a/lib"
    assert env["FLAGTREE_BACKEND"] == "cpu"  # the recipe's own set still applies after the script
    [log] = sorted((bws.ws.root / "logs").glob("build-*.log"))
    header = log.read_text().split("\n\n")[0]
    assert f"# VENDOR_FLAG='1' from {script}" in header
    assert f"# PATH starts with {bws.python.parent}:/opt/vendor-a/bin" in header
    assert "# LD_LIBRARY_PATH starts with /opt/vendor-a/lib" in header
    again = bws.build(sets=sets)
    assert "up to date" in again.stderr, again.stderr
    script.write_text('export VENDOR_FLAG=2\nexport PATH="/opt/vendor-a/bin:$PATH"\n')
    changed = bws.build(sets=sets)
    assert changed.exit_code == 0, changed.stderr
    assert "env.VENDOR_FLAG changed: 1 -> 2" in changed.stderr
    stamp = json.loads((bws.ws.root / ".flagtree-cpu" / "build-editable.json").read_text())
    assert stamp["components"]["env"]["PATH"] == "/opt/vendor-a/bin:$PATH"  # not this machine's own PATH
