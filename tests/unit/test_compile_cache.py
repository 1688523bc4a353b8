"""The shared compile cache's pure parts: URLs, where the URL comes from, ccache's variables and statistics."""

from __future__ import annotations

import pytest

from flagtree_cpu_build.compile_cache import (
    COUNTERS,
    ENV_VAR,
    CacheUrl,
    CompileCacheUrlError,
    cache_env,
    configured,
    parse_stats,
    parse_url,
    stats_delta,
    summarize,
    unsuitable,
)


@pytest.mark.parametrize(("url", "host", "port"), [
    ("redis://127.0.0.1:6390", "127.0.0.1", 6390),
    ("redis://cache.lan", "cache.lan", 6379),
    ("redis://cache.lan:6379/2", "cache.lan", 6379),
    ("http://cache.lan/ccache", "cache.lan", 80),
    ("https://cache.lan:8443/ccache/", "cache.lan", 8443),
])
def test_parse_url_finds_host_and_port(url: str, host: str, port: int) -> None:
    parsed = parse_url(url)
    assert (parsed.host, parsed.port, parsed.url) == (host, port, url)


@pytest.mark.parametrize(("url", "says"), [
    ("cache.lan:6379", "ccache stores only in"),
    ("ftp://cache.lan", "ccache stores only in"),
    ("redis://", "names no host"),
    ("redis://cache.lan/ccache", "database number"),
    ("redis://cache.lan:port", "is not a URL"),
    ("redis://cache.lan|connect-timeout=50", "attributes"),
])
def test_parse_url_refuses_what_ccache_would_not_take(url: str, says: str) -> None:
    with pytest.raises(CompileCacheUrlError, match=says) as caught:
        parse_url(url)
    assert caught.value.exit_code == 2


def test_a_password_is_not_shown() -> None:
    assert parse_url("redis://:s3cret@cache.lan:6379").shown == "redis://***@cache.lan:6379"
    assert parse_url("redis://cache.lan:6379").shown == "redis://cache.lan:6379"


def test_command_line_beats_environment_beats_recipe() -> None:
    env = {ENV_VAR: "redis://env:1"}
    assert configured("redis://cli:1", env, "redis://recipe:1") == ("redis://cli:1", "--compile-cache")
    assert configured(None, env, "redis://recipe:1") == ("redis://env:1", ENV_VAR)
    assert configured(None, {}, "redis://recipe:1") == ("redis://recipe:1", "the recipe's build.compile_cache")
    assert configured(None, {ENV_VAR: " "}, None) is None


def test_ccache_4_7_gets_remote_storage_a_namespace_and_a_base_dir() -> None:
    url = parse_url("redis://127.0.0.1:6390")
    assert cache_env(url, (4, 7, 5), "flagtree-cpu-arm64", "/ws", {}) == {
        "CCACHE_REMOTE_STORAGE": "redis://127.0.0.1:6390", "CCACHE_NAMESPACE": "flagtree-cpu-arm64",
        "CCACHE_BASEDIR": "/ws"}


def test_older_ccache_gets_secondary_storage_and_a_users_base_dir_stays() -> None:
    url = parse_url("redis://127.0.0.1:6390")
    assert cache_env(url, (4, 5), "r", "/ws", {"CCACHE_BASEDIR": "/home"}) == {
        "CCACHE_SECONDARY_STORAGE": "redis://127.0.0.1:6390"}


def test_ccache_without_remote_storage_is_unsuitable() -> None:
    assert unsuitable(None, None) == "ccache is not on the build's PATH"
    assert "needs ccache >= 4.4" in (unsuitable("/usr/bin/ccache", (4, 2, 1)) or "")
    assert unsuitable("/usr/bin/ccache", (4, 4)) is None


def test_print_stats_is_parsed_and_subtracted() -> None:
    before = parse_stats("cache_miss\t3\nremote_storage_hit\t1\nstats_updated_timestamp\t1700000000\n")
    after = parse_stats("cache_miss\t3\nremote_storage_hit\t9\ndirect_cache_hit\t9\nnot a counter\n")
    delta = stats_delta(before, after)
    assert set(delta) == set(COUNTERS)
    assert (delta["remote_storage_hit"], delta["direct_cache_hit"], delta["cache_miss"]) == (8, 9, 0)


def _delta(**counts: int) -> dict[str, int]:
    return {name: counts.get(name, 0) for name in COUNTERS}


def test_summary_says_how_many_compilations_came_from_the_shared_cache() -> None:
    shown = CacheUrl("redis://h:1", "redis", "h", 1).shown
    assert summarize(shown, _delta(direct_cache_hit=12, remote_storage_hit=12)) == (
        "compile cache redis://h:1: 12 of 12 compilations from the shared cache (100 %)")
    assert summarize(shown, _delta(cache_miss=3, direct_cache_hit=1, local_storage_hit=1)) == (
        "compile cache redis://h:1: 0 of 4 compilations from the shared cache (0 %), 1 from the local ccache")
    assert summarize(shown, _delta()) == "compile cache redis://h:1: the build compiled nothing through ccache"


def test_ccache_4_4_counter_names_read_as_4_7_ones() -> None:
    stats = parse_stats("secondary_storage_hit\t5\nsecondary_storage_error\t1\nprimary_storage_hit\t2\n")
    assert (stats["remote_storage_hit"], stats["remote_storage_error"], stats["local_storage_hit"]) == (5, 1, 2)
