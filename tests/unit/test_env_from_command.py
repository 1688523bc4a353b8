"""`env.from_command` (issue 29, item 5): a variable's value from a command's output, its rules judged on made-up
answers (the real commands, their time limit and their output cap are in tests/integration/test_values.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from flagtree_cpu_build.envops import EnvCommandError, EnvFileError, EnvLayer, apply_layers
from flagtree_cpu_build.errors import RecipeError
from flagtree_cpu_build.proc import Capped
from flagtree_cpu_build.recipe import EnvOps
from flagtree_cpu_build.recipe.environment import CommandValue
from flagtree_cpu_build.recipe.files import parse_recipe
from tests.unit.test_computed_placeholders import RECIPE

NVCC = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 12.8, V12.8.61\n"


class Answers:
    """A stand-in for running the command: what each program "prints", and what each run was given."""

    def __init__(self, **answers: Capped) -> None:
        self.answers = answers
        self.runs: list[tuple[tuple[str, ...], dict[str, str], str]] = []

    def __call__(self, argv: Sequence[str], env: Mapping[str, str], _cwd: Path | None, path: str) -> Capped:
        self.runs.append((tuple(argv), dict(env), path))
        if argv[0] not in self.answers:
            raise FileNotFoundError(2, "not found", argv[0])
        return self.answers[argv[0]]


def said(text: str | bytes, code: int = 0) -> Capped:
    return Capped(code, text.encode() if isinstance(text, str) else text, "")


def apply(ops: EnvOps, answers: Answers, inherited: dict[str, str] | None = None, **kwargs: object):
    return apply_layers([EnvLayer(ops, "build.env")], inherited or {"PATH": "/usr/bin"}, command=answers,
                        **kwargs)  # type: ignore[arg-type]


def test_the_value_is_the_output_stripped_or_the_regex_group() -> None:
    answers = Answers(nvcc=said(NVCC), hostname=said("  builder-7\n"))
    ops = EnvOps(from_command={
        "CUDA_VERSION": CommandValue(argv=("nvcc", "--version"), regex=r"release ([0-9.]+)"),
        "CUDA_RELEASE": CommandValue(argv=("nvcc", "--version"), regex=r"V[0-9.]+"),
        "BUILDER": CommandValue(argv=("hostname",))})
    applied = apply(ops, answers)
    assert (applied.env["CUDA_VERSION"], applied.env["CUDA_RELEASE"], applied.env["BUILDER"]) == (
        "12.8", "V12.8.61", "builder-7")
    assert {c.name: c.by for c in applied.changes}["CUDA_VERSION"] == "build.env.from_command"


def test_it_runs_after_set_and_from_file_in_that_environment_with_the_target_bin_searched_first() -> None:
    answers = Answers(tool=said("v"))
    ops = EnvOps(set={"EARLY": "1"}, from_command={"V": CommandValue(argv=("tool",))},
                 prepend={"PATH": ("/late/bin",)})
    apply(ops, answers, path_prefix="/venv/bin")
    [(argv, env, path)] = answers.runs
    assert env["EARLY"] == "1" and env["PATH"] == "/usr/bin"  # prepend comes after it
    assert path == "/venv/bin:/usr/bin"


@pytest.mark.parametrize(("answer", "message"), [
    (said("boom", 3), "build.env.from_command.V: `nvcc --version` failed (exit status 3)"),
    (Capped(None, b"", "", timed_out=True), "build.env.from_command.V: `nvcc --version` did not finish within 60 s"),
    (Capped(None, b"x" * 100, "", over_limit=True),
     "build.env.from_command.V: `nvcc --version` printed more than 64 KiB, too long for an environment variable"),
    (said("no version here\n"), "build.env.from_command.V: the output of `nvcc --version` has no match for "
                                "'release ([0-9.]+)'"),
    (said(b"release 1\0"), "build.env.from_command.V: `nvcc --version` printed a NUL byte"),
    (said(b"release \xff"), "build.env.from_command.V: `nvcc --version` printed text that is not UTF-8"),
])
def test_a_command_that_gives_no_value_is_a_build_error_naming_key_and_command(answer: Capped, message: str) -> None:
    ops = EnvOps(from_command={"V": CommandValue(argv=("nvcc", "--version"), regex=r"release ([0-9.]+)")})
    with pytest.raises(EnvCommandError) as caught:
        apply(ops, Answers(nvcc=answer))
    assert caught.value.message.startswith(message), caught.value.message
    assert caught.value.exit_code == 5 and caught.value.fix
    assert isinstance(caught.value, EnvFileError)  # the build plan and checks already report those as theirs


def test_a_missing_program_names_the_path_searched_and_the_layers_advice() -> None:
    ops = EnvOps(from_command={"V": CommandValue(argv=("nvcc", "--version"))})
    with pytest.raises(EnvCommandError) as caught:
        apply_layers([EnvLayer(ops, "toolchains.cuda.env", "install CUDA 12.8")], {"PATH": "/usr/bin"},
                     command=Answers())
    assert caught.value.message == "toolchains.cuda.env.from_command.V runs nvcc, which is not on PATH (/usr/bin)"
    assert caught.value.fix == "install CUDA 12.8"


@pytest.mark.parametrize(("entry", "message"), [
    ("{V: {argv: []}}", "build.env.from_command.V.argv: the command is empty"),
    ("{V: {argv: [nvcc], regex: 'release ('}}", "build.env.from_command.V.regex: 'release (' is not a regular"),
    ("{9V: {argv: [nvcc]}}", "build.env.from_command.9V: '9V' is not an environment variable name"),
    ("{V: {argv: [nvcc, '{pyton}']}}", "build.env.from_command.V.argv[1]: unknown placeholder {pyton}"),
])
def test_a_wrong_entry_is_a_located_recipe_problem(entry: str, message: str) -> None:
    with pytest.raises(RecipeError) as caught:
        parse_recipe(RECIPE, "t.yaml", [f"build.env.from_command={entry}"])
    found = [f"{p.key}: {p.message}" for p in caught.value.problems]
    assert any(f.startswith(message) for f in found), found
