"""A variant is a named overlay of the recipe: it changes the build env, the artifacts and the checks,
and the workspace records which variant it was set up for (lock file, reports)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from flagtree_cpu_build.recipe.files import bundled_dir
from tests.support.cli import new_workspace
from tests.support.gitworld import GitWorld
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import llvm_tarball

VARIANTS = """
variant: plain
variants:
  plain:
    description: the recipe as it is
  alt:
    description: another LLVM build, another backend value, one check
    overlay:
      artifacts:
        llvm:
          url: "{alt_url}"
          path: "{{triton_home}}/.triton/llvm/llvm-a66376b0-alt"
      build:
        env:
          set: {{FLAGTREE_BACKEND: alt, ALT_ONLY: "1"}}
          unset: null
      checks:
        - uses: flagtree/vector-add
          with: {{size: 64}}
"""


def test_a_variant_changes_env_artifacts_and_checks_and_is_recorded_in_the_lock(
        world: GitWorld, tmp_path: Path, http_server: LoopbackHTTPServer) -> None:
    plain_url = http_server.serve("/llvm/llvm-a66376b0-ubuntu-arm64.tar.gz", llvm_tarball(seed=1).data)
    alt_url = http_server.serve("/alt/llvm-a66376b0-alt.tar.gz", llvm_tarball(seed=2).data)
    recipe = tmp_path / "ft-variants.yaml"
    text = (bundled_dir("recipes") / "flagtree-cpu-arm64.yaml").read_text()
    text = text.replace("https://oaitriton.blob.core.windows.net/public/llvm-builds/llvm-{match}-ubuntu-arm64.tar.gz",
                        plain_url)
    recipe.write_text(text + VARIANTS.format(alt_url=alt_url))
    ws = new_workspace(world, tmp_path / "ws")
    # a workspace is set up for one variant (another one there is refused: test_workspace_recipe), so the
    # variant alt gets a workspace of its own
    ws_alt = new_workspace(world, tmp_path / "ws-alt")

    def run(*args: str, variant: str | None = None):
        extra = ("--variant", variant) if variant else ()
        result = (ws_alt if variant == "alt" else ws).run("-r", str(recipe), *extra, *args)
        assert result.exit_code == 0, result.stderr
        return result

    lock = ws.root / ".flagtree-cpu" / "lock.yaml"
    # the default variant: the recipe as written
    run("sync"), run("fetch")
    assert yaml.safe_load(lock.read_text())["variant"] == "plain"
    plain_env = json.loads(run("env", "--build", "--json").stdout)["result"]
    assert plain_env["set"]["FLAGTREE_BACKEND"] == "cpu" and "ALT_ONLY" not in plain_env["set"]
    plain_checks = [c["name"] for c in json.loads(run("validate", "--list", "--json").stdout)["result"]["checks"]]
    assert plain_checks == ["backend", "tle-rms-norm", "vector-add", "softmax", "decode-e2e"]
    # --variant alt: its own LLVM (a second tree, published beside the first), env and checks
    run("sync", variant="alt"), run("fetch", variant="alt")
    locked = yaml.safe_load((ws_alt.root / ".flagtree-cpu" / "lock.yaml").read_text())
    assert locked["variant"] == "alt" and locked["artifacts"]["llvm"]["url"] == alt_url
    assert (Path(json.loads(run("recipe", "show", "--json", variant="alt").stdout)["result"]["recipe"]["artifacts"]
                 ["llvm"]["path"]) / "version.txt").read_text() == alt_url
    alt_env = json.loads(run("env", "--build", "--json", variant="alt").stdout)["result"]
    assert alt_env["set"]["FLAGTREE_BACKEND"] == "alt" and alt_env["set"]["ALT_ONLY"] == "1"
    assert "LLVM_SYSPATH" in alt_env["set"] and alt_env["set"]["LLVM_SYSPATH"].endswith("llvm-a66376b0-alt")
    alt_list = json.loads(run("validate", "--list", "--json", variant="alt").stdout)["result"]["checks"]
    assert [c["name"] for c in alt_list] == ["vector-add"]
    # status names the variant it looked at
    assert json.loads(run("status", "--json", variant="alt").stdout)["result"]["variant"] == "alt"


def test_an_unknown_variant_is_a_usage_error_listing_the_variants(world: GitWorld, tmp_path: Path) -> None:
    recipe = tmp_path / "ft-variants.yaml"
    recipe.write_text((bundled_dir("recipes") / "flagtree-cpu-arm64.yaml").read_text()
                      + VARIANTS.format(alt_url="https://example.invalid/llvm-a66376b0-alt.tar.gz"))
    ws = new_workspace(world, tmp_path / "ws")
    result = ws.run("-r", str(recipe), "--variant", "alto", "status")
    assert result.exit_code == 2
    assert "no variant 'alto'" in result.stderr and "did you mean 'alt'" in result.stderr
    assert "plain" in result.stderr and not (tmp_path / "ws").exists()
