"""The bundled `flagtree` recipe (FlagTree's six protected branches, NVIDIA and AMD, and aipu on 3.3) against its
loopback world (tests/support/worlds/flagtree.py): every variant resolves to its branch and plans on this
machine; for each branch, `sync` passes the recipe's consistency rules against the branch's own files, `fetch`
publishes every NVIDIA tool where that branch's setup.py looks before downloading, `lock` records them and
`bundle create` packs them; `build --offline` on a fresh workspace lists every missing input of every variant.

The recipe is the bundled file; `--set` changes only the commit (a fixture cannot have the real one). Nothing is
built: the fixture setup.py exits at once if anything ran it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.recipe import resolve, select_variants
from flagtree_cpu_build.recipe.files import load_recipe
from flagtree_cpu_build.recipe.placeholder_checks import PLACEHOLDERS
from flagtree_cpu_build.source_reads import read_all
from tests.support.envelope import result_of
from tests.support.hermetic import make_hermetic
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import Tarball
from tests.support.venvs import make_venv
from tests.support.worlds.flagtree import (
    AIPU_LLVM,
    BRANCHES,
    LLVM_BUILDS,
    FlagTreeWorld,
    aipu_downloads,
    build_flagtree_world,
    downloads,
    expected_tools,
    write_branch,
)

NVIDIA_AMD = [f"{key}-{backend}" for key in BRANCHES for backend in ("nvidia", "amd")]
VARIANTS = [*NVIDIA_AMD, "3_3-aipu"]
# One workspace per branch (the amd variant of a branch has the same overlay; see the first test) and aipu.
CHAINS = [f"{key}-nvidia" for key in BRANCHES] + ["3_3-aipu"]
MACHINE = ("resources.disk=[]", "resources.memory_gb=0")


def branch_of(variant: str):
    return BRANCHES[variant.split("-")[0]]


@dataclass
class World:
    world: FlagTreeWorld
    root: Path


@pytest.fixture(scope="module")
def flagtree_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("flagtree")
    server = LoopbackHTTPServer()
    try:
        yield World(build_flagtree_world(root / "world", server), root)
    finally:
        server.close()


@pytest.fixture
def here(flagtree_world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    """A fresh HOME and TRITON_HOME for this test (main's setup.py caches under HOME, later ones under
    TRITON_HOME), the git redirect and the download mirrors."""
    (tmp_path / "home").mkdir()
    make_hermetic(monkeypatch, tmp_path / "home")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(flagtree_world.world.gitconfig))
    monkeypatch.setenv("TRITON_HOME", str(tmp_path / "triton-home"))
    monkeypatch.setenv("FLAGTREE_CPU_MIRRORS", flagtree_world.world.mirrors)
    return flagtree_world


def run(world: FlagTreeWorld, ws: Path, variant: str, *args: str, sets: tuple[str, ...] = ()) -> Result:
    argv = ["-w", str(ws), "--recipe", "flagtree", "--variant", variant,
            "--set", f"sources.flagtree.commit={world.commits[branch_of(variant).name]}"]
    for assignment in (*MACHINE, *sets):
        argv += ["--set", assignment]
    return CliRunner().invoke(app, [*argv, *args])


def urls_for(variant: str) -> set[str]:
    """The URLs the variant's branch downloads from (written out by the world from the branch's files)."""
    urls = set(downloads(branch_of(variant)))
    if variant.endswith("-aipu"):
        urls = {u for u in urls if not u.startswith(LLVM_BUILDS)} | set(aipu_downloads())
    return urls


def served_for(world: FlagTreeWorld, variant: str) -> dict[str, Tarball]:
    """The stand-ins the world serves for them."""
    return {url: world.served[url] for url in urls_for(variant)}


# --- the recipe itself: each variant is its branch ---------------------------------------------------------


def resolved(variant: str, root: Path, glibc: str | None = "2.35"):
    """The variant on an x86_64 host with this glibc, its values read from its branch's own files (written out by
    the world, as sync would leave them) and filled in, as fetch sees it."""
    recipe = select_variants(load_recipe("flagtree", variant=variant), "ubuntu", "x86_64", glibc)
    write_branch(root / "FlagTree", branch_of(variant))
    reads = read_all(recipe, root, None)
    assert not reads.problems and not reads.waiting, (reads.problems, reads.waiting)
    values = {name: str(root / name) for name in PLACEHOLDERS}
    return resolve(recipe, root, values, {}, reads.by_marker())


@pytest.mark.parametrize("variant", VARIANTS)
def test_each_variant_resolves_to_its_branch_and_downloads_what_its_setup_py_would(variant: str,
                                                                                   tmp_path: Path) -> None:
    recipe = resolved(variant, tmp_path)
    branch = branch_of(variant)
    assert recipe.sources["flagtree"].ref == branch.name
    llvm = recipe.artifacts["llvm"]
    if variant.endswith("-aipu"):
        assert llvm.url == AIPU_LLVM
    else:  # documents/install.md's step 1.2 for this Triton version, the hash read from cmake/llvm-hash.txt
        assert llvm.url == f"{LLVM_BUILDS}llvm-{branch.llvm_hash[:8]}-ubuntu-x64.tar.gz"
        assert llvm.path == f"{tmp_path}/triton_home/.triton/llvm/llvm-{branch.llvm_hash[:8]}-ubuntu-x64"
    # every NVIDIA tool at the version its branch's cmake/nvidia-toolchain-version file gives it
    assert {a.url for a in recipe.artifacts.values()} == urls_for(variant)
    # "For Triton 3.1, 3.2, 3.3, you need to enter the python directory to build"
    cwd = recipe.build.cwd
    assert cwd.endswith("/python") == branch.setup_in_python, cwd
    backend = recipe.build.env.set.get("FLAGTREE_BACKEND")
    assert backend == ("aipu" if variant.endswith("-aipu") else None)
    if not variant.endswith("-aipu"):
        assert "FLAGTREE_BACKEND" in recipe.build.env.unset  # "unset FLAGTREE_BACKEND": nvidia and amd


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_value_a_branch_keeps_in_its_files_is_read_from_them_not_copied(variant: str) -> None:
    """No hand copies: each download's version comes from the branch's own file through {match} (only aipu's vendor
    LLVM, whose name setup_helper.py writes out, and main's json, whose URL main's setup.py writes out, are
    literal), the prerequisites come from python/requirements.txt, and the recipe has no `# v3:` notes left."""
    recipe = load_recipe("flagtree", variant=variant)
    literal = {"llvm"} if variant.endswith("-aipu") else set()
    if variant.startswith("3_1"):
        literal.add("json")
    for name, artifact in recipe.artifacts.items():
        if name in literal:
            continue
        assert "{match" in artifact.url, (name, artifact.url)  # main's and 3.2's conda folders are not versioned
        rules = artifact.matches if isinstance(artifact.matches, tuple) else (artifact.matches,)
        assert all(rule.source == "flagtree" and rule.file.startswith("cmake/") for rule in rules), name
    files = [entry.requirements_file for entry in recipe.python.build if getattr(entry, "requirements_file", None)]
    assert [(f.source, f.file) for f in files] == [("flagtree", "python/requirements.txt")]
    text = (Path(__file__).resolve().parents[2] / "recipes" / "flagtree.yaml").read_text()
    assert "# v3:" not in text


@pytest.mark.parametrize("variant", VARIANTS)
def test_shared_caches_are_published_shared(variant: str) -> None:
    """~/.triton/llvm (one LLVM per hash side by side) and ~/.triton/nvidia/<tool>/ are Triton's caches, shared by
    every checkout: reused when the digests fit, never replaced nor cleaned."""
    recipe = load_recipe("flagtree", variant=variant)
    for name, artifact in recipe.artifacts.items():
        if "/.triton/" in artifact.path:
            assert artifact.publish == "shared", name
        else:  # aipu's vendor LLVM under ~/.flagtree/aipu: FlagTree's own folder, not Triton's cache
            assert (variant, name, artifact.publish) == ("3_3-aipu", "llvm", "own")


@pytest.mark.parametrize(("variant", "glibc", "suffix"), [
    ("3_1-nvidia", "2.35", "ubuntu-x64"), ("3_1-nvidia", "2.28", "almalinux-x64"),
    ("3_1-nvidia", "2.17", "centos-x64"), ("3_5-amd", "2.17", "centos-x64"), ("3_5-amd", "2.18", "almalinux-x64"),
    ("3_6-nvidia", "2.29", "ubuntu-x64"), ("3_6-nvidia", "2.28", "almalinux-x64"),
    ("3_6-nvidia", "2.17", "almalinux-x64"),  # 3.6's setup.py has no centos rule any more
    ("3_3-aipu", "2.17", "ubuntu-x64-clang16-lld16"),  # the vendor LLVM has one build
], ids=str)
def test_the_llvm_follows_the_branch_setup_py_glibc_rule(variant: str, glibc: str, suffix: str,
                                                         tmp_path: Path) -> None:
    llvm = resolved(variant, tmp_path, glibc).artifacts["llvm"]
    name = f"llvm-{branch_of(variant).llvm_hash[:8]}-{suffix}"
    assert llvm.path.endswith(f"/{name}"), llvm.path
    if not variant.endswith("-aipu"):
        assert llvm.url == f"{LLVM_BUILDS}{name}.tar.gz"


@pytest.mark.parametrize("variant", VARIANTS)
def test_torch_comes_before_the_build_and_its_triton_is_removed(variant: str) -> None:
    """install.md: "First install PyTorch, then pip uninstall -y triton": a CUDA torch from PyPI depends on triton,
    so installed after the build it would replace FlagTree's; before it, python.uninstall removes its triton."""
    recipe = load_recipe("flagtree", variant=variant)
    names = [getattr(entry, "requirement", entry) for entry in recipe.python.build]
    assert "torch" in names
    assert "torch" not in [getattr(entry, "requirement", entry) for entry in recipe.python.runtime]
    assert recipe.python.uninstall == ("triton",)


@pytest.mark.parametrize("variant", VARIANTS)
def test_triton_build_ut_off_goes_through_cmake_where_setup_py_reads_the_variable(variant: str) -> None:
    """setup.py reads TRITON_APPEND_CMAKE_ARGS on 3.2+; main's does not, so main has no cmake block."""
    cmake = load_recipe("flagtree", variant=variant).build.cmake
    if variant.startswith("3_1"):
        assert cmake is None
    else:
        assert cmake.args_env == "TRITON_APPEND_CMAKE_ARGS" and dict(cmake.define) == {"TRITON_BUILD_UT": "OFF"}


@pytest.mark.parametrize("key", list(BRANCHES))
def test_the_amd_variant_builds_what_the_nvidia_one_does(key: str) -> None:
    """FlagTree builds both default backends into one libtriton; the variants differ in the GPU check only."""
    nvidia, amd = (load_recipe("flagtree", variant=f"{key}-{b}") for b in ("nvidia", "amd"))
    assert (nvidia.sources, nvidia.artifacts, nvidia.build, nvidia.python) == \
        (amd.sources, amd.artifacts, amd.build, amd.python)
    assert checks_of(nvidia) - checks_of(amd) == {"vector-add-cuda"}
    assert checks_of(amd) - checks_of(nvidia) == {"vector-add-rocm"}


def checks_of(recipe) -> set[str]:
    """The checks this variant runs (a check's `when: {variant: [...]}` names the variants)."""
    return {c.name for c in recipe.checks if c.when is None or recipe.variant in c.when.variant}


# --- plans on this machine ---------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_setup_dry_run_plans_the_branch_its_downloads_and_its_build(here: World, tmp_path: Path,
                                                                    variant: str) -> None:
    world = here.world
    before = len(world.server.requests)
    result = run(world, tmp_path / "ws", variant, "--json", "setup", "--dry-run")
    # exit 7: the plan is complete and says setup would stop at preflight (the aipu SDK is not on this machine)
    assert result.exit_code == (7 if variant.endswith("-aipu") else 0), result.stderr
    plan = result_of(result.stdout)
    assert plan["variant"] == variant and plan["changes_nothing"] is True
    items = {(i["area"], i["subject"]): i for i in plan["items"]}
    source = items[("sources", "flagtree")]
    assert source["pin"] == world.commits[branch_of(variant).name] and source["will"] == "created"
    # the versions are read from the branch's files after sync: the plan names the file (the URLs they make are
    # the first test's)
    recipe = load_recipe("flagtree", variant=variant)
    planned = {i["subject"]: i for i in plan["items"] if i["area"] == "artifacts"}
    assert set(planned) == set(recipe.artifacts)
    for name, item in planned.items():
        assert item["url"] == recipe.artifacts[name].url
        if "{match" in item["url"]:
            assert "read from flagtree's cmake/" in item["detail"] and "after sync" in item["detail"], item
    assert items[("build", "build")]["will"] == "created"
    preflight = {c["id"]: c for c in plan["preflight"]["checks"]}
    assert preflight["host.arch"]["status"] == "ok"
    if variant.endswith("-aipu"):  # the vendor SDK is a pre-provisioned toolchain: named, with where to put it
        assert preflight["toolchain.provisioned"]["status"] == "fail"
        assert "aipu-sdk" in preflight["toolchain.provisioned"]["detail"]
        assert "FLAGTREE_CPU_TOOLCHAIN_AIPU_SDK" in preflight["toolchain.provisioned"]["fix"]
    else:
        assert preflight["toolchain.provisioned"]["status"] == "skip"
    assert world.downloaded(before) == [] and not (tmp_path / "ws" / "FlagTree").exists()


def test_a_provisioned_aipu_sdk_passes_preflight(here: World, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    sdk = tmp_path / "AI610-SDK-dev-4.0.7"
    (sdk / "AI610-SDK-1002" / "simulator" / "bin").mkdir(parents=True)
    (sdk / "AI610-SDK-1012" / "Linux-driver").mkdir(parents=True)
    monkeypatch.setenv("FLAGTREE_CPU_TOOLCHAIN_AIPU_SDK", str(sdk))
    result = run(here.world, tmp_path / "ws", "3_3-aipu", "--json", "setup", "--dry-run")
    preflight = {c["id"]: c for c in result_of(result.stdout)["preflight"]["checks"]}
    assert preflight["toolchain.provisioned"]["status"] == "ok", preflight["toolchain.provisioned"]
    env = run(here.world, tmp_path / "ws", "3_3-aipu", "env", "--build")
    assert env.exit_code == 0, env.stderr
    assert f"ZHOUYI_LINUX_DRIVER_HOME={sdk}/AI610-SDK-1012/Linux-driver" in env.stdout.replace("'", "")
    assert "FLAGTREE_BACKEND=aipu" in env.stdout.replace("'", "")


def test_a_toolchain_fix_that_names_its_variable_is_not_told_it_twice(here: World, tmp_path: Path) -> None:
    """The recipe's aipu-sdk fix names FLAGTREE_CPU_TOOLCHAIN_AIPU_SDK itself: preflight and build say it once."""
    sets: tuple[str, ...] = ()
    plan = run(here.world, tmp_path / "ws", "3_3-aipu", "--json", "setup", "--dry-run", sets=sets)
    preflight = {c["id"]: c for c in result_of(plan.stdout)["preflight"]["checks"]}
    assert preflight["toolchain.provisioned"]["fix"].count("FLAGTREE_CPU_TOOLCHAIN_AIPU_SDK") == 1
    built = run(here.world, tmp_path / "ws", "3_3-aipu", "build", "--offline", sets=sets)
    assert built.exit_code == 5
    line = next(x for x in built.stderr.splitlines() if "toolchain aipu-sdk" in x)
    assert line.count("FLAGTREE_CPU_TOOLCHAIN_AIPU_SDK") == 1, line


# --- sync, fetch, lock, bundle per branch --------------------------------------------------------------------


@pytest.mark.parametrize("variant", CHAINS)
def test_sync_fetch_lock_and_bundle_each_branch(here: World, tmp_path: Path, variant: str) -> None:
    world, ws, branch = here.world, tmp_path / "ws", branch_of(variant)
    before = len(world.server.requests)
    synced = run(world, ws, variant, "sync")
    # sync runs each artifact's `matches` rule against the branch's own llvm-hash.txt and NVIDIA version file
    assert synced.exit_code == 0, synced.stderr
    assert (ws / "FlagTree" / "cmake" / "llvm-hash.txt").read_text().strip() == branch.llvm_hash
    fetched = run(world, ws, variant, "fetch")
    assert fetched.exit_code == 0, fetched.stderr
    assert set(world.downloaded(before)) == urls_for(variant)
    # every NVIDIA tool is where download_and_copy() looks before it downloads: the build downloads nothing
    home, triton_home = tmp_path / "home", tmp_path / "triton-home"
    missing = [str(p) for p in expected_tools(branch, triton_home, home) if not p.exists()]
    assert missing == []
    # the LLVM and json are Triton's shared trees under TRITON_HOME on every branch (main's setup.py would cache
    # under HOME, but LLVM_SYSPATH and JSON_SYSPATH name these, so it never looks there)
    if not variant.endswith("-aipu"):
        llvm = triton_home / ".triton" / "llvm" / f"llvm-{branch.llvm_hash[:8]}-ubuntu-x64"
        # setup.py trusts the folder when version.txt holds exactly the URL
        assert (llvm / "version.txt").read_text() == f"{LLVM_BUILDS}{llvm.name}.tar.gz"
        assert (llvm / "lib" / "cmake" / "mlir" / "MLIRConfig.cmake").is_file()
    else:
        assert (home / ".flagtree" / "aipu" / "llvm-a66376b0-ubuntu-x64-clang16-lld16" / "python_packages").is_dir()
        assert (ws / "FlagTree" / "third_party" / "flir" / "CMakeLists.txt").is_file()
    assert (triton_home / ".triton" / "json" / "include" / "nlohmann" / "json.hpp").is_file()

    locked = run(world, ws, variant, "lock")
    assert locked.exit_code == 0, locked.stderr
    lock = yaml.safe_load((ws / ".flagtree-cpu" / "lock.yaml").read_text())
    recorded = {entry["url"]: entry["sha256"] for entry in lock["artifacts"].values()}
    assert recorded == {url: tarball.sha256 for url, tarball in served_for(world, variant).items()}
    assert lock["sources"]["flagtree"]["commit"] == world.commits[branch.name]
    # ... and every value read from the branch's files, at the commit it was read from
    reads = {key: entry["value"] for key, entry in lock["reads"].items()}
    if not variant.endswith("-aipu"):
        assert reads["artifacts.llvm.match"] == branch.llvm_hash[:8]
        assert lock["reads"]["artifacts.llvm.match"]["commit"] == world.commits[branch.name]
    if isinstance(branch.nvidia, dict):
        assert reads["artifacts.cupti.match"] == branch.nvidia["cupti"]
    else:
        assert reads["artifacts.cupti.match"] == branch.nvidia

    bundle = tmp_path / "flagtree.bundle"
    # no Python prerequisites: wheels need an index (test_bundle_create covers them); this is about the branch's
    # sources and downloads
    made = run(world, ws, variant, "--json", "bundle", "create", "-o", str(bundle),
               sets=("python.build=[]", "python.runtime=[]"))
    assert made.exit_code == 0, made.stderr
    members = result_of(made.stdout)["members"]
    assert members["artifact"] == len(served_for(world, variant)) and members["git"] >= 1
    assert bundle.is_file()


# --- offline builds ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_offline_build_on_a_fresh_workspace_lists_every_missing_input(here: World, tmp_path: Path,
                                                                      variant: str) -> None:
    bare = make_venv(tmp_path / "bare-venv", with_pip=False)
    ws, before = tmp_path / "ws", len(here.world.server.requests)
    result = run(here.world, ws, variant, "build", "--offline", "--python", str(bare))
    assert result.exit_code == 5, result.stderr
    text = " ".join(result.stderr.split())
    assert "inputs of an offline build are missing; nothing was run" in text
    assert f"source flagtree: not checked out at {ws}/FlagTree" in text
    recipe = load_recipe("flagtree", variant=variant)
    for name, artifact in recipe.artifacts.items():
        if "{match" in artifact.url:  # its version is in the branch's file, which is not checked out
            rule = artifact.matches[0] if isinstance(artifact.matches, tuple) else artifact.matches
            assert f"artifact {name}: read from flagtree's {rule.file} after sync" in text, name
        else:
            assert f"artifact {name}: not published and verified at" in text, name
    assert "torch: missing" in text  # the build prerequisites: torch first (install.md)
    # and those python/requirements.txt names, which only the branch's checkout can say
    at = next(i for i, e in enumerate(recipe.python.build) if e.requirements_file is not None)
    assert f"python.build[{at}]: read from python/requirements.txt of source flagtree after sync" in text
    assert here.world.downloaded(before) == [] and not ws.joinpath("FlagTree").exists()
