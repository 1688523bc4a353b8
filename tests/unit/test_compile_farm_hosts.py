"""The compile farm's pure parts: the hosts as the user writes them, and how a helper's answer is judged."""

from __future__ import annotations

import pytest

from flagtree_cpu_build.compile_farm import configured, missing_programs
from flagtree_cpu_build.farm_hosts import CompileFarmError, FarmHost, parse_hosts
from flagtree_cpu_build.farm_probe import Compiler, judge, request

GCC = Compiler("/usr/bin/g++", "12.2.0", "aarch64")


def test_hosts_read_as_distcc_reads_them_with_ports_and_limits_made_explicit() -> None:
    hosts = parse_hosts("10.0.0.5/8  build2:3633,lzo\thelper-a,helper-b")
    assert hosts == (FarmHost("10.0.0.5", 3632, 8), FarmHost("build2", 3633, 4, lzo=True),
                     FarmHost("helper-a", 3632, 4), FarmHost("helper-b", 3632, 4))
    assert [h.spec() for h in hosts] == ["10.0.0.5:3632/8", "build2:3633/4,lzo", "helper-a:3632/4", "helper-b:3632/4"]


@pytest.mark.parametrize(("text", "says"), [
    ("", "no host"), ("@helper", "ssh host"), ("helper,cpp", "pump mode"), ("helper,auth", "GSS-API"),
    ("localhost", "this machine"), ("127.0.0.1/4", "this machine"), ("--randomize", "a distcc option"),
    ("h:70000", "port 70000"), ("h/999", "limit 999"), ("h h", "named twice"), ("h;rm -rf /", "is not HOST"),
    ("x" * 5000, "at most 4096"), (" ".join(f"h{i}" for i in range(65)), "at most 64"),
])
def test_words_distcc_would_misread_are_refused_with_the_word_and_a_fix(text: str, says: str) -> None:
    with pytest.raises(CompileFarmError) as caught:
        parse_hosts(text, "--compile-farm")
    assert says in caught.value.message and caught.value.fix and caught.value.exit_code == 2


def test_a_local_daemon_with_a_port_is_a_host() -> None:
    assert parse_hosts("127.0.0.1:3700/2") == (FarmHost("127.0.0.1", 3700, 2),)


def test_the_option_beats_the_variable_beats_the_recipe() -> None:
    env = {"FLAGTREE_CPU_COMPILE_FARM": "b"}
    assert configured("a", env, "c") == ("a", "--compile-farm")
    assert configured(None, env, "c") == ("b", "FLAGTREE_CPU_COMPILE_FARM")
    assert configured(None, {}, "c") == ("c", "the recipe's build.compile_farm")
    assert configured(" ", {}, None) is None


def test_without_ccache_on_the_build_path_the_farm_says_why(tmp_path) -> None:
    assert "ccache is not on the build's PATH" in (missing_programs({"PATH": str(tmp_path)}) or "")


def _answer(stat: int = 0, serr: bytes = b"", obj: bytes = b"") -> bytes:
    def tok(name: bytes, n: int) -> bytes:
        return name + b"%08x" % n
    return (tok(b"DONE", 1) + tok(b"STAT", stat) + tok(b"SERR", len(serr)) + serr + tok(b"SOUT", 0)
            + (tok(b"DOTO", len(obj)) + obj if not stat else b""))


def _elf(machine: int, comment: bytes = b"GCC: (Debian 12.2.0-14) 12.2.0") -> bytes:
    header = b"\x7fELF\x02\x01\x01" + b"\0" * 11 + machine.to_bytes(2, "little")
    return header + b"\0" * 40 + comment + b"\0"


def test_an_object_for_this_board_from_the_same_gcc_is_accepted() -> None:
    assert judge(_answer(obj=_elf(183)), GCC) is None


def test_an_x86_64_helpers_own_compiler_is_refused_with_the_cross_compiler_advice() -> None:
    why = judge(_answer(obj=_elf(62)), GCC) or ""
    assert "for x86_64, not for this aarch64 board" in why and "cross compiler" in why


def test_another_gcc_version_is_refused() -> None:
    assert "has gcc 12.3.0" in (judge(_answer(obj=_elf(183, b"GCC: (x) 12.3.0")), GCC) or "")


@pytest.mark.parametrize(("answer", "says"), [
    (b"", "closed the connection without answering"),
    (b"HTTP/1.1 400 Bad Request\r\n", "not as distccd"),
    (_answer(obj=_elf(183))[:30], "half-way"),
    (_answer(stat=256, serr=b"g++: fatal error: no input"), "could not run /usr/bin/g++: g++: fatal error"),
    (_answer(obj=b"MZ not an elf object at all"), "not an ELF object"),
    (b"DONE00000001STAT0000zzzz", "not as distccd"),
])
def test_a_helper_that_answers_wrong_is_refused_with_what_it_said(answer: bytes, says: str) -> None:
    assert says in (judge(answer, GCC) or "")


def test_the_probe_sends_the_compiler_path_ccache_hands_distcc() -> None:
    sent = request("/usr/bin/aarch64-linux-gnu-g++")
    assert sent.startswith(b"DIST00000001ARGC00000005ARGV0000001e/usr/bin/aarch64-linux-gnu-g++")
