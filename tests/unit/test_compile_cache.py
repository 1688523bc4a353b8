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
    ("redis://cache.lan:port", "port is not a number"),
    ("redis://cache.lan|connect-timeout=50", "attributes"),
])
def test_parse_url_refuses_what_ccache_would_not_take(url: str, says: str) -> None:
    with pytest.raises(CompileCacheUrlError, match=says) as caught:
        parse_url(url)
    assert caught.value.exit_code == 2


def test_a_password_is_not_shown() -> None:
    assert parse_url("redis://s3cret@cache.lan:6379").shown == "redis://***@cache.lan:6379"
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
        "CCACHE_REMOTE_STORAGE": "redis://127.0.0.1:6390|connect-timeout=250|operation-timeout=1000",
        "CCACHE_NAMESPACE": "flagtree-cpu-arm64", "CCACHE_BASEDIR": "/ws"}


def test_older_ccache_gets_secondary_storage_and_a_users_base_dir_stays() -> None:
    url = parse_url("redis://127.0.0.1:6390")
    assert cache_env(url, (4, 5), "r", "/ws", {"CCACHE_BASEDIR": "/home"}) == {
        "CCACHE_SECONDARY_STORAGE": "redis://127.0.0.1:6390|connect-timeout=250|operation-timeout=1000"}


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


# --- what ccache 4.7.5 would accept and then fail every compile on (each form tried by hand with `ccache g++ -c`) --


@pytest.mark.parametrize(("url", "says"), [
    ("redis://cache lan:6379", "a space"),  # ccache splits its remote_storage at spaces: "URL scheme must not be empty"
    ("http://cache.lan/ccache dir", "a space"),
    ("http://cache.lan/a%zzb", "'%zz' is not a percent escape"),  # "Invalid percent encoding"
    ("redis://pa%2@cache.lan", "credentials hold a '%' that is not a percent escape"),
    ("http://cache.lan/\u00e9t\u00e9", "not ASCII"),  # "Path '/été' ... is invalid"
    ("http://cache.lan/a{b}", "'{'"),
    ("redis://cache.lan:0", "port"),  # "port must be between 1 and 65535"
    ("redis://ex%41mple.lan", "host"),  # "Host address ... is invalid"
    ("redis://cache.lan/1?db=2", "query"),
    ("http://cache.lan/ccache#part", "fragment"),
])
def test_parse_url_refuses_what_ccache_would_take_and_then_fail_every_compile_on(url: str, says: str) -> None:
    with pytest.raises(CompileCacheUrlError, match=says) as caught:
        parse_url(url)
    assert caught.value.exit_code == 2
    assert "redis://[[USER:]PASSWORD@]HOST[:PORT][/DB]" in (caught.value.fix or "")
    assert "http://[USER:PASSWORD@]HOST[:PORT][/PATH]" in (caught.value.fix or "")


def test_a_redis_password_after_an_empty_user_name_is_refused_because_ccache_would_drop_it() -> None:
    # ccache splits the user info at ':' and sends no AUTH when the part before it is empty
    with pytest.raises(CompileCacheUrlError, match="sends no password") as caught:
        parse_url("redis://:s3cret@cache.lan:6379")
    assert "redis://s3cret" not in str(caught.value) and "s3cret" not in (caught.value.fix or "")
    assert "redis://PASSWORD@cache.lan:6379" in (caught.value.fix or "")


def test_a_redis_password_with_an_encoded_colon_is_refused_because_ccache_would_split_it() -> None:
    with pytest.raises(CompileCacheUrlError, match="splits") as caught:
        parse_url("redis://pa%3Ass@cache.lan")
    assert "default:PASSWORD" in (caught.value.fix or "")


def test_http_credentials_without_a_password_are_refused_because_ccache_fails_every_compile_on_them() -> None:
    # ccache 4.7.5: "Expected username:password in URL but got "token"" and the compile exits 1
    with pytest.raises(CompileCacheUrlError, match="USER:PASSWORD"):
        parse_url("http://token@cache.lan/ccache")


@pytest.mark.parametrize("url", [
    "redis://s3cret@cache.lan:6379/notadb",
    "redis://user:s3cret@cache lan:6379",
    "http://user:s3cret@cache.lan/a%zz",
    "ftp://user:s3cret@cache.lan/",
    "redis://user:s3cr/et@cache.lan",  # a '/' in a password ends the host part early
])
def test_a_refused_url_never_shows_its_password(url: str) -> None:
    with pytest.raises(CompileCacheUrlError) as caught:
        parse_url(url)
    assert "s3cr" not in caught.value.message and "s3cr" not in (caught.value.fix or "")
    assert "***@" in caught.value.message


def test_credentials_are_hidden_wherever_the_url_is_shown() -> None:
    from flagtree_cpu_build.cache_url import redact

    assert parse_url("redis://user:s3cret@cache.lan:6379").shown == "redis://***@cache.lan:6379"
    assert parse_url("http://user:s3cret@cache.lan/c").shown == "http://***@cache.lan/c"
    assert redact("CCACHE_REMOTE_STORAGE=redis://s3cret@cache.lan:6379|operation-timeout=1000") == (
        "CCACHE_REMOTE_STORAGE=redis://***@cache.lan:6379|operation-timeout=1000")
    assert redact("http://cache.lan/c") == "http://cache.lan/c"


@pytest.mark.parametrize(("url", "version", "says"), [
    ("https://cache.lan/ccache", (4, 7, 5), "needs ccache 4.13 or newer"),
    ("rediss://cache.lan:6380", (4, 7, 5), "needs ccache 4.13 or newer"),
    ("https://cache.lan/ccache", (4, 13, 0), "ccache-storage-https"),
])
def test_tls_schemes_need_a_ccache_with_a_storage_helper(url: str, version: tuple[int, ...], says: str) -> None:
    from flagtree_cpu_build.cache_url import ccache_refuses

    why = ccache_refuses(parse_url(url), version, helper=None)
    assert why is not None and says in why
    if version < (4, 13):
        assert "4.7.5" in why  # which ccache it has


def test_plain_schemes_and_a_tls_scheme_with_its_helper_are_usable() -> None:
    from flagtree_cpu_build.cache_url import ccache_refuses

    assert ccache_refuses(parse_url("redis://cache.lan"), (4, 4), helper=None) is None
    assert ccache_refuses(parse_url("http://cache.lan/c"), (4, 7, 5), helper=None) is None
    assert ccache_refuses(parse_url("https://cache.lan/c"), (4, 13, 1), helper="/usr/bin/ccache-storage-https") is None


def test_ccache_gets_short_timeouts_for_the_server() -> None:
    env = cache_env(parse_url("redis://127.0.0.1:6390"), (4, 7, 5), "r", None, {})
    storage, *attributes = env["CCACHE_REMOTE_STORAGE"].split("|")
    assert storage == "redis://127.0.0.1:6390"
    timeouts = dict(a.split("=") for a in attributes)
    assert 0 < int(timeouts["connect-timeout"]) <= 500 and 0 < int(timeouts["operation-timeout"]) <= 2000
    old = cache_env(parse_url("redis://127.0.0.1:6390"), (4, 5), "r", None, {})
    assert old["CCACHE_SECONDARY_STORAGE"].split("|")[1:] == attributes
