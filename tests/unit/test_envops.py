"""Environment operations: each op, their order, the change records (sourcing with bash itself: tests/integration/
test_env_ops.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from flagtree_cpu_build.envops import (
    EnvLayer,
    SourceScriptError,
    apply_layers,
    apply_ops,
)
from flagtree_cpu_build.recipe import CommandEnv, EnvOps, SourceScript

BASE = {"HOME": "/home/edge", "PATH": "/usr/bin:/bin"}


def no_source(*_args: object) -> dict[str, str]:
    raise AssertionError("nothing is sourced here")


def fake_source(result: Mapping[str, str | None]):
    """A sourcer that changes the environment as a script would: names to values, None removes."""
    seen: list[tuple[Path, tuple[str, ...], dict[str, str]]] = []

    def run(script: Path, args: Sequence[str], env: Mapping[str, str], cwd: Path | None) -> dict[str, str]:
        seen.append((script, tuple(args), dict(env)))
        out = dict(env)
        for name, value in result.items():
            if value is None:
                out.pop(name, None)
            else:
                out[name] = value.replace("$PATH", env.get("PATH", ""))
        return out

    run.seen = seen  # type: ignore[attr-defined]
    return run


def changes_of(applied) -> dict[str, tuple[str, str | None]]:
    return {c.name: (c.action, c.new) for c in applied.changes}


# --- unset ------------------------------------------------------------------------------------------


def test_unset_removes_names_and_globs() -> None:
    inherited = {**BASE, "LLVM_SYSPATH": "/a", "LLVM_LIBRARY_DIR": "/b", "CUDA_HOME": "/c", "JAVA_HOME": "/j",
                 "MY_LLVM_X": "kept"}
    applied = apply_ops(EnvOps(unset=("LLVM_*", "*_HOME")), inherited, source=no_source)
    assert applied.env == {**BASE, "MY_LLVM_X": "kept"}
    assert changes_of(applied) == {"LLVM_SYSPATH": ("dropped", None), "LLVM_LIBRARY_DIR": ("dropped", None),
                                   "CUDA_HOME": ("dropped", None), "JAVA_HOME": ("dropped", None)}
    assert applied.changes[0].describe() == "LLVM_SYSPATH dropped (was '/a')"


def test_unset_of_an_absent_variable_says_nothing() -> None:
    applied = apply_ops(EnvOps(unset=("NOT_THERE", "NONE_*")), BASE, source=no_source)
    assert applied.env == BASE and applied.changes == ()


def test_unset_then_set_is_an_override_and_the_same_value_is_no_change() -> None:
    ops = EnvOps(unset=("LLVM_*",), set={"LLVM_SYSPATH": "/new"})
    changed = apply_ops(ops, {**BASE, "LLVM_SYSPATH": "/old"}, source=no_source)
    assert [c.describe() for c in changed.changes] == ["LLVM_SYSPATH overridden: '/old' -> '/new'"]
    assert changed.changes[0].by == "env.set"
    same = apply_ops(ops, {**BASE, "LLVM_SYSPATH": "/new"}, source=no_source)
    assert same.changes == () and same.env["LLVM_SYSPATH"] == "/new"


# --- set and if_command -----------------------------------------------------------------------------


def test_set_records_new_and_overridden_values() -> None:
    applied = apply_ops(EnvOps(set={"A": "1", "CC": "gcc-12"}), {**BASE, "CC": "gcc"}, source=no_source)
    assert changes_of(applied) == {"A": ("set", "1"), "CC": ("overridden", "gcc-12")}
    assert applied.named == ("A", "CC")


def test_if_command_sets_only_when_the_command_is_on_the_path_so_far() -> None:
    asked: list[tuple[str, str]] = []

    def lookup(command: str, path: str) -> bool:
        asked.append((command, path))
        return command == "ccache"

    ops = EnvOps(set={"PATH": "/opt/tools/bin:/usr/bin"},
                 if_command=(CommandEnv(command="ccache", set={"USE_CCACHE": "1"}),
                             CommandEnv(command="sccache", set={"USE_SCCACHE": "1"})))
    applied = apply_ops(ops, BASE, has_command=lookup, source=no_source, path_prefix="/venv/bin")
    assert applied.env["USE_CCACHE"] == "1" and "USE_SCCACHE" not in applied.env
    # looked up on the PATH after `set`, with the target Python's bin in front (where the build looks)
    assert asked == [("ccache", "/venv/bin:/opt/tools/bin:/usr/bin"), ("sccache", "/venv/bin:/opt/tools/bin:/usr/bin")]
    assert {c.name: c.by for c in applied.changes}["USE_CCACHE"] == "env.if_command[0]"


def test_if_command_runs_after_set_so_it_wins() -> None:
    ops = EnvOps(set={"CCACHE": "off"}, if_command=(CommandEnv(command="ccache", set={"CCACHE": "on"}),))
    applied = apply_ops(ops, BASE, has_command=lambda c, p: True, source=no_source)
    assert applied.env["CCACHE"] == "on"


# --- prepend and append -----------------------------------------------------------------------------


def test_prepend_puts_entries_first_in_order_and_moves_present_ones() -> None:
    ops = EnvOps(prepend={"PATH": ("/opt/a/bin", "/usr/bin", "/opt/a/bin")})
    applied = apply_ops(ops, {"PATH": "/bin:/usr/bin:/usr/local/bin"}, source=no_source)
    assert applied.env["PATH"] == "/opt/a/bin:/usr/bin:/bin:/usr/local/bin"
    (change,) = applied.changes
    assert (change.action, change.front, change.back) == ("prepended", ("/opt/a/bin", "/usr/bin"), ())
    assert change.describe() == "PATH starts with /opt/a/bin:/usr/bin"


def test_prepend_of_what_is_already_first_changes_nothing() -> None:
    applied = apply_ops(EnvOps(prepend={"PATH": ("/usr/bin",)}), BASE, source=no_source)
    assert applied.env == BASE and applied.changes == ()


def test_append_adds_at_the_end_without_repeating() -> None:
    ops = EnvOps(append={"LD_LIBRARY_PATH": ("/opt/a/lib", "/usr/lib", "/opt/b/lib")})
    applied = apply_ops(ops, {"LD_LIBRARY_PATH": "/usr/lib"}, source=no_source)
    assert applied.env["LD_LIBRARY_PATH"] == "/usr/lib:/opt/a/lib:/opt/b/lib"
    (change,) = applied.changes
    assert (change.action, change.back) == ("appended", ("/opt/a/lib", "/opt/b/lib"))
    assert change.describe() == "LD_LIBRARY_PATH ends with /opt/a/lib:/opt/b/lib"


@pytest.mark.parametrize("inherited", [{}, {"LD_LIBRARY_PATH": ""}])
def test_an_unset_or_empty_variable_gets_just_the_entries(inherited: dict[str, str]) -> None:
    ops = EnvOps(prepend={"LD_LIBRARY_PATH": ("/opt/a/lib",)}, append={"LD_LIBRARY_PATH": ("/opt/z/lib",)})
    applied = apply_ops(ops, inherited, source=no_source)
    assert applied.env["LD_LIBRARY_PATH"] == "/opt/a/lib:/opt/z/lib"  # no empty entry (the current folder)
    (change,) = applied.changes
    assert (change.front, change.back) == (("/opt/a/lib",), ("/opt/z/lib",))
    assert change.describe() == "LD_LIBRARY_PATH starts with /opt/a/lib and ends with /opt/z/lib"


def test_prepend_after_unset_starts_from_nothing_and_counts_as_set() -> None:
    ops = EnvOps(unset=("LD_LIBRARY_PATH",), prepend={"LD_LIBRARY_PATH": ("/opt/a/lib",)})
    applied = apply_ops(ops, {"LD_LIBRARY_PATH": "/old/lib"}, source=no_source)
    assert applied.env["LD_LIBRARY_PATH"] == "/opt/a/lib"
    assert changes_of(applied) == {"LD_LIBRARY_PATH": ("overridden", "/opt/a/lib")}


def test_prepend_works_on_a_value_set_earlier_in_the_same_ops() -> None:
    ops = EnvOps(set={"PYTHONPATH": "/src"}, prepend={"PYTHONPATH": ("/first",)})
    applied = apply_ops(ops, BASE, source=no_source)
    assert applied.env["PYTHONPATH"] == "/first:/src"
    assert changes_of(applied) == {"PYTHONPATH": ("set", "/first:/src")}


def test_path_prefix_comes_last_and_is_not_a_named_variable() -> None:
    applied = apply_ops(EnvOps(prepend={"PATH": ("/opt/a/bin",)}), BASE, source=no_source, path_prefix="/venv/bin")
    assert applied.env["PATH"] == "/venv/bin:/opt/a/bin:/usr/bin:/bin"
    assert applied.changes[0].front == ("/venv/bin", "/opt/a/bin")
    assert applied.named == ("PATH",)
    plain = apply_ops(EnvOps(), BASE, source=no_source, path_prefix="/venv/bin")
    assert plain.named == () and plain.changes[0].describe() == "PATH starts with /venv/bin"


# --- the order and the layers -----------------------------------------------------------------------


def test_the_documented_order_unset_source_set_if_command_prepend_append() -> None:
    sourcer = fake_source({"FROM_SCRIPT": "s", "CC": "script-cc", "STALE_X": "back"})
    ops = EnvOps(unset=("STALE_*",), source=(SourceScript(script="/opt/vendor/set_env.sh"),),
                 set={"CC": "gcc-12"}, if_command=(CommandEnv(command="x", set={"CC": "clang"}),),
                 prepend={"PATH": ("/p",)}, append={"PATH": ("/q",)})
    applied = apply_ops(ops, {**BASE, "STALE_Y": "gone"}, source=sourcer, has_command=lambda c, p: True,
                        workdir=Path("/w"))
    env = applied.env
    assert "STALE_Y" not in sourcer.seen[0][2]  # unset before the script runs
    assert env["STALE_X"] == "back"  # the script may set what unset removed
    assert env["CC"] == "clang"  # set after source, if_command after set
    assert env["PATH"] == "/p:/usr/bin:/bin:/q"


def test_later_layers_see_earlier_ones() -> None:
    layers = [EnvLayer(EnvOps(set={"A": "1"}, prepend={"PATH": ("/a",)}), "build.env"),
              EnvLayer(EnvOps(unset=("A",), prepend={"PATH": ("/b",)}), "toolchains.x.env")]
    applied = apply_layers(layers, {**BASE, "A": "0"}, source=no_source)
    assert "A" not in applied.env and applied.env["PATH"] == "/b:/a:/usr/bin:/bin"
    by = {c.name: (c.action, c.by) for c in applied.changes}
    assert by == {"A": ("dropped", "toolchains.x.env.unset"), "PATH": ("prepended", "toolchains.x.env.prepend")}


# --- source (without bash) --------------------------------------------------------------------------


def test_source_takes_over_the_scripts_environment_including_removals() -> None:
    sourcer = fake_source({"ASCEND_HOME": "/opt/ascend", "PATH": "/opt/ascend/bin:$PATH", "CUDA_HOME": None,
                           "PWD": "/elsewhere", "SHLVL": "2", "_": "/usr/bin/env", "BASH_FUNC_f%%": "() { :; }"})
    ops = EnvOps(source=(SourceScript(script="set_env.sh", args=("--quiet",)),))
    applied = apply_ops(ops, {**BASE, "CUDA_HOME": "/usr/local/cuda", "PWD": "/here"}, source=sourcer,
                        workdir=Path("/w"), key="toolchains.ascend.env")
    assert sourcer.seen[0][:2] == (Path("/w/set_env.sh"), ("--quiet",))  # relative to the workdir
    env = applied.env
    assert env["ASCEND_HOME"] == "/opt/ascend" and "CUDA_HOME" not in env
    assert env["PATH"] == "/opt/ascend/bin:/usr/bin:/bin"
    assert env["PWD"] == "/here" and "SHLVL" not in env and "_" not in env  # bash's own are not taken over
    assert "BASH_FUNC_f%%" not in env
    changes = {c.name: c for c in applied.changes}
    assert (changes["ASCEND_HOME"].action, changes["ASCEND_HOME"].by) == ("sourced", "/w/set_env.sh")
    assert changes["CUDA_HOME"].action == "dropped"
    # a script extending PATH keeps the inherited part apart (the stamp must not hold this machine's PATH)
    assert (changes["PATH"].action, changes["PATH"].front) == ("prepended", ("/opt/ascend/bin",))
    (record,) = applied.sourced
    assert record.key == "toolchains.ascend.env.source[0]" and record.script == "/w/set_env.sh"
    assert record.to_json() == {"script": "/w/set_env.sh", "key": "toolchains.ascend.env.source[0]",
                                "set": {"ASCEND_HOME": "/opt/ascend", "PATH": "/opt/ascend/bin:/usr/bin:/bin"},
                                "unset": ["CUDA_HOME"]}


def test_a_script_that_replaces_a_value_is_recorded_as_sourced() -> None:
    sourcer = fake_source({"PATH": "/only/this"})
    applied = apply_ops(EnvOps(source=(SourceScript(script="/s.sh"),)), BASE, source=sourcer)
    (change,) = applied.changes
    assert (change.action, change.old, change.new) == ("sourced", "/usr/bin:/bin", "/only/this")
    assert change.describe() == "PATH='/only/this' from /s.sh (was '/usr/bin:/bin')"


def test_a_missing_script_names_the_path_the_key_and_what_provides_it(tmp_path: Path) -> None:
    layer = EnvLayer(EnvOps(source=(SourceScript(script=str(tmp_path / "cann/set_env.sh")),)),
                     "toolchains.cann.env", "install CANN 8.0 (see the vendor's guide)")
    with pytest.raises(SourceScriptError) as caught:
        apply_layers([layer], BASE)  # the real runner: it looks for the file before starting bash
    error = caught.value
    assert str(tmp_path / "cann/set_env.sh") in error.message
    assert "toolchains.cann.env.source[0]" in error.message and "does not exist" in error.message
    assert error.fix == "install CANN 8.0 (see the vendor's guide)"
    assert error.exit_code == 5 and error.kind == "build"
    relative = EnvOps(source=(SourceScript(script="scripts/env.sh"),))
    with pytest.raises(SourceScriptError, match="scripts/env.sh") as caught:
        apply_ops(relative, BASE, workdir=tmp_path, key="build.env")
    assert str(tmp_path / "scripts/env.sh") in caught.value.message
    assert "correct the path in the recipe's build.env.source[0]" in (caught.value.fix or "")
