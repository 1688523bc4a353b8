"""The README and the documentation site stay true: the annotated recipe is valid, the commands the guides
describe exist, CI runs the README's test command, the build troubleshooting table is the diagnosis table, and
every troubleshooting row quotes a message the code can print."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.recipe.files import load_recipe_file

ROOT = Path(__file__).resolve().parent.parent.parent
README = (ROOT / "README.md").read_text()
GUIDES = ROOT / "docs" / "guides"


def guide(name: str) -> str:
    return (GUIDES / name).read_text()


def test_the_annotated_example_recipe_is_valid(tmp_path: Path) -> None:
    section = guide("recipes.md").split("## The recipe format", 1)[1]
    example = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    (tmp_path / "patches").mkdir()
    (tmp_path / "patches" / "fix-something.patch").write_text("")  # the example names one
    path = tmp_path / "example.yaml"
    path.write_text(example)
    recipe = load_recipe_file(path)
    # every kind of check, variants and env operations are in the example (so the reference shows them)
    assert {c.label for c in recipe.checks} >= {"backend", "vector-add-tutorial", "unit-tests", "imports",
                                                "wheel-is-riscv"}
    assert set(recipe.variants) == {"cuda", "ascend"} and recipe.build.env.unset
    assert recipe.sources["flagtree-cpu"].filter == "blob:none"


def test_ci_runs_the_readme_test_command() -> None:
    assert re.search(r"^make test +# .*the whole test suite", README, re.M)
    assert re.search(r"^make test$", (ROOT / ".ci/run").read_text(), re.M)


def test_ci_builds_the_site_strictly() -> None:
    assert re.search(r"^make docs\b", (ROOT / ".ci/run").read_text(), re.M)
    assert re.search(r"^\tmkdocs build --strict|^\t\$\(BIN\)/mkdocs build --strict", (ROOT / "Makefile").read_text(),
                     re.M)


def test_every_command_the_guides_describe_exists() -> None:
    headings = [h for page in sorted(GUIDES.glob("*.md"))
                for h in re.findall(r"^## `([\w ]+?)(?: \[|`)", page.read_text(), re.M)]
    assert {"setup", "status", "recipe list", "sync", "link", "build", "env", "lock", "clean"} <= set(headings)
    for command in headings:
        assert CliRunner().invoke(app, [*command.split(), "--help"]).exit_code == 0, command


def test_the_build_troubleshooting_table_is_the_diagnosis_table() -> None:
    from flagtree_cpu_build.diagnose import markdown_table

    text = guide("build.md")
    section = text.split("<!-- diagnosis:start", 1)[1].split("-->", 1)[1].split("<!-- diagnosis:end -->")[0]
    assert section.strip() == markdown_table().strip(), "regenerate it: python -m flagtree_cpu_build.diagnose"


def test_every_doctor_check_is_documented() -> None:
    from flagtree_cpu_build.doctor import all_checks

    reference = (ROOT / "docs" / "reference" / "doctor-checks.md").read_text()
    for check in all_checks():
        assert f"| `{check.id}` | {check.area} | {check.title} |" in reference, check.id


# --- the troubleshooting guide quotes only what the tool prints ---------------------------------------------------

GAP = "\x00"  # where a value is filled in (an f-string field) or left out (`...` in the guide)


def words(text: str) -> list[str]:
    """The text as lower-case words, a GAP kept as a word of its own: a run of words never spans a gap."""
    return re.findall(r"[a-z0-9_./+-]+|\x00", text.lower())


def printable_words() -> str:
    """What the tool can print, as one space-separated stream of words: its sources with every f-string field
    a gap and the seam between adjacent string literals closed, the CLI library's own messages (click's,
    vendored in typer) and the emulated tier's script."""
    import typer

    files = [*sorted((ROOT / "flagtree_cpu_build").rglob("*.py")), *sorted(Path(typer.__file__).parent.rglob("*.py")),
             ROOT / "tests" / "arm64" / "emu.sh"]
    text = "\n".join(f.read_text(encoding="utf-8") for f in files)
    text = re.sub(r"[\"']\s*\n\s*(?:rf|fr|f|r)?[\"']", "", text)  # "one " \n f"string" -> one string
    # a field is a gap, but the text it may hold ({'wrong version: ' if plain else ''}) is kept between gaps
    text = re.sub(r"\{([^{}\n]*)\}", lambda m: " ".join([GAP, *re.findall(r"'([^']*)'", m[1]), GAP]), text)
    text = re.sub(r"\$\w+|\$\{\w+\}", GAP, text)
    return " " + " ".join(words(text)) + " "


def quoted_messages() -> list[str]:
    rows = [line for line in guide("troubleshooting.md").splitlines() if line.startswith("| `")]
    return [m for row in rows for m in re.findall(r"`([^`]+)`", row.split(" | ")[0])]


def printed(message: str, printable: str) -> bool:
    """Some 4 consecutive words of the message are in what the tool prints, or the words that open (or close) a
    stretch of it, at least 2, are what the tool prints before (or after) a value it fills in: the guide quotes an
    example value there (`unknown placeholder {wrokdir}`) or writes `...`; or a whole stretch of 3 words or more
    follows such a value (`... asked for credentials`)."""
    for piece in (words(p) for p in re.split(r"\.\.\.|…", message)):
        runs = [" ".join(piece[i:i + 4]) for i in range(len(piece) - 3)]
        if any(f" {run} " in printable for run in runs):
            return True
        for size in range(2, len(piece) + 1):
            if f" {' '.join(piece[:size])} {GAP} " in printable:
                return True
        if len(piece) >= 3 and f" {GAP} {' '.join(piece)} " in printable:  # a message that ends with the piece
            return True
    return False


def test_every_troubleshooting_row_quotes_a_message_the_tool_prints() -> None:
    printable = printable_words()
    never_printed = [m for m in quoted_messages() if not printed(m, printable)]
    assert never_printed == [], "docs/guides/troubleshooting.md quotes messages the code never prints"


def test_a_message_the_tool_never_prints_is_caught() -> None:
    printable = printable_words()
    assert printed("the workspace ... is in use by another flagtree-cpu run (build, pid N)", printable)
    assert not printed("this folder is inside the workspace ...", printable)  # the row this check removed
