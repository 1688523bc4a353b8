"""installer.py's pure parts: each pip option as uv spells it, pip's variables carried over to uv's, the pip
settings uv would not honour, and the choice's order (option, environment, recipe). Finding and running a real uv
is tests/integration/test_installer.py's."""

from __future__ import annotations

from pathlib import Path

import pytest

from flagtree_cpu_build.errors import UsageError
from flagtree_cpu_build.installer import PIP, Installer, InstallFlags, choose, pip_settings

UV = Installer("uv", "uv 0.13.9", Path("/opt/uv/bin/uv"), "0.13.9")
PY = Path("/ws/.venv/bin/python")


def test_every_pip_option_the_tool_uses_has_its_uv_spelling() -> None:
    flags = InstallFlags(index_url="http://127.0.0.1:1/simple/", find_links=Path("/w"), no_index=True,
                         constraints=Path("/c.txt"), no_deps=True, reinstall=True, no_build_isolation=True,
                         require_hashes=True)
    assert PIP.install_argv(PY, ["a", "b>=1"], flags) == [
        str(PY), "-m", "pip", "install", "--no-deps", "--force-reinstall", "--no-build-isolation",
        "--require-hashes", "a", "b>=1", "--no-index", "--find-links", "/w", "--index-url",
        "http://127.0.0.1:1/simple/", "-c", "/c.txt"]
    assert UV.install_argv(PY, ["a", "b>=1"], flags) == [
        "/opt/uv/bin/uv", "pip", "install", "--python", str(PY), "--no-deps", "--reinstall", "--no-build-isolation",
        "--require-hashes", "a", "b>=1", "--no-index", "--find-links", "/w", "--index-url",
        "http://127.0.0.1:1/simple/", "-c", "/c.txt"]


def test_a_plain_install_is_the_bare_command_of_each() -> None:
    assert PIP.install_argv(PY, ["x"]) == [str(PY), "-m", "pip", "install", "x"]
    assert UV.install_argv(PY, ["x"]) == ["/opt/uv/bin/uv", "pip", "install", "--python", str(PY), "x"]
    assert UV.uninstall_argv(PY, ["triton"]) == ["/opt/uv/bin/uv", "pip", "uninstall", "--python", str(PY), "triton"]
    assert PIP.uninstall_argv(PY, ["triton"])[:6] == [str(PY), "-m", "pip", "uninstall", "-y",
                                                      "--disable-pip-version-check"]


def test_pips_variables_reach_uv_under_uvs_names_and_a_uv_variable_the_user_set_wins() -> None:
    base = {"PIP_INDEX_URL": "http://127.0.0.1:1/simple/", "PIP_FIND_LINKS": "/w", "PIP_NO_INDEX": "yes",
            "PIP_TIMEOUT": "3", "PIP_RETRIES": "0", "UV_EXTRA_INDEX_URL": "mine", "PIP_EXTRA_INDEX_URL": "theirs"}
    env = UV.env(base)
    assert (env["UV_INDEX_URL"], env["UV_FIND_LINKS"]) == ("http://127.0.0.1:1/simple/", "/w")
    assert (env["UV_HTTP_TIMEOUT"], env["UV_HTTP_RETRIES"], env["UV_EXTRA_INDEX_URL"]) == ("3", "0", "mine")
    assert env["UV_INDEX_STRATEGY"] == "unsafe-best-match"  # pip's choice across indexes, not uv's first-index
    assert "UV_INDEX_STRATEGY" not in UV.env({"PIP_INDEX_URL": "x"})
    assert PIP.env(base) == base  # pip reads its own


def test_pip_no_index_becomes_uvs_option_as_uv_has_no_variable_for_it() -> None:
    no_index = Installer("uv", "uv", Path("/opt/uv/bin/uv"), "0.13.9", no_index=True)
    assert no_index.install_argv(PY, ["x"])[-2:] == ["x", "--no-index"]
    assert no_index.install_argv(PY, ["x"], InstallFlags(no_index=True)).count("--no-index") == 1
    assert "--no-index" not in Installer("pip", "pip", no_index=True).install_argv(PY, ["x"])  # pip reads its own


def test_pip_settings_uv_ignores_are_named(tmp_path: Path) -> None:
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = http://mirror.invalid/simple\n")
    assert pip_settings({"PIP_CONFIG_FILE": str(conf)}) == [f"pip configuration file {conf} ([global] index-url)"]
    assert pip_settings({"PIP_CONFIG_FILE": "/dev/null", "PIP_INDEX_URL": "x", "PIP_NO_INDEX": "1",
                         "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_CERT": "/etc/ssl/ca.pem"}) == []
    assert pip_settings({"PIP_CONFIG_FILE": "/dev/null", "PIP_PRE": "1"}) == ["$PIP_PRE"]
    home = tmp_path / "home"
    (home / ".config" / "pip").mkdir(parents=True)
    (home / ".config" / "pip" / "pip.conf").write_text("[global]\nfind-links = /mnt/wheels\ncert = /ca.pem\n")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pip.conf").write_text("[install]\npre = true\n")
    (home / ".pip").mkdir()
    (home / ".pip" / "pip.conf").write_text("[global]\ncert = /etc/ssl/certs/ca-certificates.crt\ntimeout = 60\n")
    found = pip_settings({"HOME": str(home), "XDG_CONFIG_DIRS": str(tmp_path / "none")}, venv / "bin" / "python")
    # /etc/pip.conf may exist on the machine running this: only the files made here are judged
    assert [f for f in found if str(tmp_path) in f] == [
        f"pip configuration file {home / '.config' / 'pip' / 'pip.conf'} ([global] find-links)",
        f"pip configuration file {venv / 'pip.conf'} ([install] pre)"]


def test_a_pip_configuration_that_is_a_fifo_or_garbage_counts_whole_without_blocking(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "pip.conf"
    os.mkfifo(fifo)  # nobody writes to it: reading it would wait for ever
    [said] = pip_settings({"PIP_CONFIG_FILE": str(fifo)})
    assert said.startswith(f"pip configuration file {fifo} (unreadable")
    garbage = tmp_path / "garbage.conf"
    garbage.write_bytes(b"no section header\n\xff\xfe")
    [said] = pip_settings({"PIP_CONFIG_FILE": str(garbage)})
    assert said.startswith(f"pip configuration file {garbage} (unreadable")


def test_pip_is_chosen_without_looking_for_uv_and_the_choice_says_where_it_came_from() -> None:
    # no process may start here (the unit guard): choosing pip never runs `uv --version`
    assert choose("pip", "uv", {}).why == "pip (--installer)"
    assert choose(None, "uv", {"FLAGTREE_CPU_INSTALLER": "PIP"}).why == "pip ($FLAGTREE_CPU_INSTALLER)"
    assert choose(None, "pip", {}, recipe_file="r.yaml").why == "pip (python.installer of r.yaml)"


def test_an_installer_name_that_is_none_of_the_three_is_a_usage_error() -> None:
    with pytest.raises(UsageError) as caught:
        choose(None, None, {"FLAGTREE_CPU_INSTALLER": "conda"})
    assert "$FLAGTREE_CPU_INSTALLER 'conda' is not an installer" in caught.value.message
    assert caught.value.exit_code == 2
