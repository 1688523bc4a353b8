"""Artifact variants chosen by a value read from a source's file (`when: {match: {NAME: RANGE}}`), compared as a
version: Triton's setup.py downloads `cuda_crt` from CUDA 13 on and `cuda_nvcc` before, with another folder inside.
First match wins; each variant may give its own `root`. A value that is no version is a failure naming it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration.test_source_reads import Kit
from tests.integration.test_source_reads import kit as kit  # noqa: F401 (the fixture)
from tests.support.envelope import result_of

RULE = {"source": "triton", "file": "cmake/nvidia-toolchain-version.json", "json_path": "cudacrt", "as": "cudacrt"}
NEW = {"crt/targets/x86_64-linux/include/crt/host_config.h": b"// crt 13\n"}
OLD = {"nvcc/include/crt/host_config.h": b"// nvcc 12\n"}


def write(kit: Kit, **change: Any) -> None:
    kit.write({"url": kit.base + "cuda_nvcc-{match.cudacrt}.tar.gz", "path": "tools/cuda-crt",
               "root": {"strip": 2}, "matches": RULE,
               "variants": [{"when": {"match": {"cudacrt": ">=13"}},
                             "url": kit.base + "cuda_crt-{match.cudacrt}.tar.gz", "root": {"strip": 4}}], **change})


def test_the_variant_whose_range_holds_for_the_version_read_is_fetched_with_its_own_root(kit: Kit) -> None:
    kit.serve("cuda_crt-13.0.48.tar.gz", NEW)
    kit.serve("cuda_nvcc-12.8.93.tar.gz", OLD)
    write(kit)
    dry = kit.run("fetch", "--dry-run", json_out=True)  # the file is not there yet: the choice waits for it
    [item] = [i for i in result_of(dry.stdout)["items"] if i["area"] == "artifacts"]
    assert "cmake/nvidia-toolchain-version.json" in json.dumps(item), item
    assert "cuda_nvcc-" not in item["detail"], item
    kit.checkout("cmake/nvidia-toolchain-version.json", json.dumps({"cudacrt": "13.0.48"}))
    result = kit.run("fetch")
    assert result.exit_code == 0, result.stderr
    assert (kit.ws / "tools/cuda-crt/crt/host_config.h").read_text() == "// crt 13\n"
    assert kit.lock()["reads"]["artifacts.llvm.match.cudacrt"]["value"] == "13.0.48"
    kit.checkout("cmake/nvidia-toolchain-version.json", json.dumps({"cudacrt": "12.8.93"}))
    result = kit.run("fetch")
    assert result.exit_code == 0, result.stderr
    assert (kit.ws / "tools/cuda-crt/crt/host_config.h").read_text() == "// nvcc 12\n"


def test_a_value_that_is_no_version_is_a_failure_naming_it_and_the_file(kit: Kit) -> None:
    write(kit)
    kit.checkout("cmake/nvidia-toolchain-version.json", json.dumps({"cudacrt": "trunk"}))
    result = kit.run("fetch")
    assert result.exit_code == 4, result.output
    text = " ".join(result.stderr.split())
    assert "'trunk'" in text and "artifacts.llvm.variants[0].when.match.cudacrt" in text, text
    assert "cmake/nvidia-toolchain-version.json" in text and "is not a version" in text, text
    assert not (kit.ws / "tools/cuda-crt").exists()


@pytest.mark.parametrize("variant, said, where", [
    ({"when": {"match": {"cudacrtt": ">=13"}}}, "did you mean 'cudacrt'?", "variants[0].when.match"),
    ({"when": {"match": {"cudacrt": "=>13"}}}, "=>13", "variants[0].when.match.cudacrt"),
])
def test_a_match_condition_that_cannot_work_is_a_located_recipe_problem(kit: Kit, variant: dict[str, Any],
                                                                        said: str, where: str) -> None:
    kit.write({"url": kit.base + "x-{match.cudacrt}.tar.gz", "path": "tools/x", "matches": RULE,
               "variants": [variant]})
    result = kit.run("recipe", "validate", str(kit.recipe))
    assert result.exit_code == 2 and said in result.output and f"artifacts.llvm.{where}" in result.output, \
        result.output


def test_a_match_condition_outside_artifact_variants_is_a_located_recipe_problem(kit: Kit) -> None:
    kit.write({"url": kit.base + "x.tar.gz", "path": "tools/x"},
              source={"url": "https://example.invalid/t.git", "ref": "main",
                      "patches": [{"file": "p.patch", "from": "triton", "when": {"match": {"v": ">=1"}}}]})
    result = kit.run("recipe", "validate", str(kit.recipe))
    assert result.exit_code == 2 and "sources.triton.patches[0].when.match" in result.output, result.output
    assert "only in an artifact's variants" in result.output
