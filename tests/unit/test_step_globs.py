"""A step's `creates` and `inputs` may name files outside its folder with a placeholder (a step that installs
into an artifact's tree: zlib into the RISC-V toolchain's sysroot)."""

from __future__ import annotations

from pathlib import Path

from flagtree_cpu_build.recipe.files import parse_recipe
from flagtree_cpu_build.recipe.placeholder_checks import PLACEHOLDERS
from flagtree_cpu_build.recipe.resolve import resolve
from flagtree_cpu_build.steps import matching

RECIPE = """\
schema_version: 2
name: cross
platform: {host: {arch: [x86_64]}, target: {arch: riscv64}}
sources:
  app: {url: https://example.invalid/app.git, ref: main}
artifacts:
  toolchain: {url: https://example.invalid/tc.tar.xz, path: "{workdir}/toolchain"}
steps:
  - name: zlib-into-sysroot
    phase: pre-build
    cwd: "{workdir}/zlib"
    run: [[make, install]]
    inputs: [configure]
    creates: ["{artifacts.toolchain.path}/sysroot/usr/lib/libz.a"]
build: {cwd: "{sources.app.path}", argv: [make]}
"""


def test_creates_takes_placeholders_and_absolute_globs(tmp_path: Path) -> None:
    recipe = parse_recipe(RECIPE, "cross.yaml")
    values = {name: f"<{name}>" for name in PLACEHOLDERS} | {"workdir": str(tmp_path)}
    [step] = resolve(recipe, tmp_path, values, {}).steps
    lib = tmp_path / "toolchain" / "sysroot" / "usr" / "lib"
    assert step.creates == (f"{lib}/libz.a",) and step.cwd == f"{tmp_path}/zlib"
    assert matching(Path(step.cwd), step.creates[0]) == []
    lib.mkdir(parents=True)
    (lib / "libz.a").write_bytes(b"!<arch>\n")
    assert matching(Path(step.cwd), step.creates[0]) == [lib / "libz.a"]
    assert matching(Path(step.cwd), f"{lib}/*.so") == []


def test_relative_globs_stay_relative_to_the_steps_folder(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "a.txt").write_text("a")
    assert matching(tmp_path, "config/*.txt") == [tmp_path / "config" / "a.txt"]
