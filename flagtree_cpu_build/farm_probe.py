"""Can a farm host compile for this board? Asked in distcc's own protocol, every host at once, under one deadline.

A TCP connect proves little: a distccd that accepts and never answers would make each compilation wait for
DISTCC_IO_TIMEOUT before distcc compiles it here. So the probe sends each host what distcc will send through
ccache: a real compile job (protocol 1: ``DIST``, ``ARGC``/``ARGV``, ``DOTI``) of a one-line unit with the very
compiler path ccache hands distcc (ccache passes its absolute path, which distcc neither rewrites nor checks), and
reads ``DONE``/``STAT``/``SERR``/``SOUT``/``DOTO``. The object it returns says what the helper's compiler is: its
ELF machine must be this board's (an x86_64 helper's own ``/usr/bin/g++`` makes x86_64 objects for an aarch64
board, which would only fail at the link), and the ``GCC: (...) X.Y.Z`` it records must be this compiler's version.
distccd closes the connection without a word when it does not ``--allow`` the client or the compiler is not in its
whitelist (``/usr/lib/distcc``): both are said.

Raw sockets, not download.py: distcc speaks its own protocol over TCP, no HTTP.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass

from .farm_hosts import FarmHost
from .interrupts import start_thread

DEADLINE_S = 3.0  # a one-line compile on a helper: tens of milliseconds; a loaded helper is still far below
MAX_ANSWER = 1 << 20  # a hostile server's endless answer is cut here (a tiny object is about 1 KiB)
UNIT = b"int flagtree_cpu_farm_probe;\n"
ELF_MACHINES = {"x86_64": 62, "aarch64": 183, "riscv64": 243, "ppc64le": 21, "s390x": 22, "armv7l": 40}


@dataclass(frozen=True)
class Compiler:
    """The compiler a build's ccache hands distcc, as this board has it."""

    path: str  # absolute: what ccache puts in distcc's argv
    version: str | None  # ``-dumpfullversion`` (gcc); None: not asked or not gcc
    arch: str  # this board's machine (``uname -m``)


@dataclass(frozen=True)
class HostAnswer:
    host: FarmHost
    problem: str | None  # None: it compiled the unit for this board
    seconds: float = 0.0


def probe_all(hosts: tuple[FarmHost, ...], compiler: Compiler, deadline_s: float = DEADLINE_S) -> list[HostAnswer]:
    """Every host asked at once; a host that has not answered by the deadline is one that did not answer."""
    box: dict[int, HostAnswer] = {}
    deadline = time.monotonic() + deadline_s
    threads = [threading.Thread(target=_ask_into, args=(box, i, host, compiler, deadline), daemon=True,
                                name=f"farm-probe-{host.address}") for i, host in enumerate(hosts)]
    for thread in threads:
        start_thread(thread)
    for thread in threads:  # each ends by itself at the deadline: its socket's timeouts never pass it
        thread.join(max(0.0, deadline - time.monotonic()) + 0.5)
    late = f"did not answer a one-line compile within {deadline_s:g} s"
    return [box.get(i, HostAnswer(host, late, deadline_s)) for i, host in enumerate(hosts)]


def _ask_into(box: dict[int, HostAnswer], index: int, host: FarmHost, compiler: Compiler, deadline: float) -> None:
    started = time.monotonic()
    try:
        problem = ask(host, compiler, deadline)
    except Exception as err:  # noqa: BLE001 - a probe that fails in an unforeseen way is a host not to use
        problem = f"the probe failed ({type(err).__name__}: {err})"
    box[index] = HostAnswer(host, problem, time.monotonic() - started)


def _left(deadline: float) -> float:
    return max(0.001, deadline - time.monotonic())


def ask(host: FarmHost, compiler: Compiler, deadline: float) -> str | None:
    """None when ``host`` compiled the probe unit for this board before ``deadline``; else why not, in words that
    follow "HOST:PORT "."""
    try:
        sock = socket.create_connection((host.host, host.port), timeout=_left(deadline))
    except TimeoutError:
        return "did not accept a connection in time"
    except ConnectionRefusedError:
        return "refuses connections (is distccd running there, on this port?)"
    except socket.gaierror as err:
        return f"does not resolve ({err.strerror or err})"
    except OSError as err:
        return f"cannot be reached ({err.strerror or err})"
    try:
        sock.settimeout(_left(deadline))
        sock.sendall(request(compiler.path))
        answer = _read_all(sock, deadline)
    except TimeoutError:
        return "accepts connections but did not answer a one-line compile in time"
    except (ConnectionResetError, BrokenPipeError):
        answer = b""
    except OSError as err:
        return f"the connection failed ({err.strerror or err})"
    finally:
        sock.close()
    return judge(answer, compiler)


def _token(name: bytes, value: int) -> bytes:
    return name + b"%08x" % value


def request(compiler_path: str) -> bytes:
    argv = [compiler_path, "-c", "flagtree_cpu_farm_probe.ii", "-o", "flagtree_cpu_farm_probe.o"]
    words = b"".join(_token(b"ARGV", len(a.encode())) + a.encode() for a in argv)
    return _token(b"DIST", 1) + _token(b"ARGC", len(argv)) + words + _token(b"DOTI", len(UNIT)) + UNIT


def _read_all(sock: socket.socket, deadline: float) -> bytes:
    """Until the server closes (distccd closes after DOTO), MAX_ANSWER bytes, or the deadline (TimeoutError when
    nothing whole came)."""
    answer = bytearray()
    while len(answer) < MAX_ANSWER:
        sock.settimeout(_left(deadline))
        chunk = sock.recv(min(65536, MAX_ANSWER - len(answer)))
        if not chunk:
            break
        answer += chunk
        if _complete(bytes(answer)):
            break
    return bytes(answer)


_NUMBERS, _PAYLOADS = (b"DONE", b"STAT"), (b"SERR", b"SOUT", b"DOTO")


def _tokens(answer: bytes) -> dict[bytes, bytes | int] | None:
    """DONE and STAT (numbers), SERR, SOUT and DOTO (their bytes), as far as the answer goes (``b"short"`` when it
    stops inside a token); None when it is not distcc's protocol."""
    found: dict[bytes, bytes | int] = {}
    at = 0
    while at < len(answer):
        head = answer[at:at + 12]
        name = head[:4]
        if name not in _NUMBERS + _PAYLOADS or (at == 0 and name != b"DONE"):
            return None
        if len(head) < 12:
            return found | {b"short": 1}
        try:
            value = int(head[4:], 16)
        except ValueError:
            return None
        at += 12
        if name in _NUMBERS:
            found[name] = value
            continue
        payload = answer[at:at + value]
        if len(payload) < value:
            return found | {b"short": 1}
        found[name] = payload
        at += value
    return found


def _complete(answer: bytes) -> bool:
    tokens = _tokens(answer)  # a failed compile ends with SOUT (no object); the server closes after it
    return tokens is not None and b"short" not in tokens and b"DOTO" in tokens


def _said(data: bytes) -> str:
    text = " ".join("".join(c for c in data.decode("utf-8", "replace") if c.isprintable() or c == " ").split())
    return text if len(text) <= 160 else text[:157] + "..."


def judge(answer: bytes, compiler: Compiler) -> str | None:
    if not answer:
        return (f"closed the connection without answering: distccd does that when it does not --allow this machine, "
                f"or when {compiler.path} is not in its compiler whitelist (/usr/lib/distcc)")
    tokens = _tokens(answer)
    if tokens is None:
        return f"answered {_said(answer[:40])!r}, not as distccd"
    if b"short" in tokens:
        return "stopped answering half-way through a one-line compile"
    if tokens.get(b"STAT"):
        err = _said(tokens.get(b"SERR", b"") or b"")  # type: ignore[arg-type]
        return f"could not run {compiler.path}" + (f": {err}" if err else f" (status {tokens[b'STAT']})")
    if b"DOTO" not in tokens:
        return "stopped answering half-way through a one-line compile"
    return object_problem(tokens[b"DOTO"], compiler)  # type: ignore[arg-type]


def object_problem(obj: bytes, compiler: Compiler) -> str | None:
    """Why the helper's object is not one this board's compiler would make: another machine, another gcc."""
    if obj[:4] != b"\x7fELF" or len(obj) < 20:
        return "returned something that is not an ELF object"
    machine = int.from_bytes(obj[18:20], "little" if obj[5] == 1 else "big")
    wanted = ELF_MACHINES.get(compiler.arch)
    if wanted is not None and machine != wanted:
        found = next((a for a, m in ELF_MACHINES.items() if m == machine), f"ELF machine {machine}")
        return (f"compiles {compiler.path} for {found}, not for this {compiler.arch} board: the helper needs a "
                f"{compiler.arch} cross compiler at that path (see the README's compile farm section)")
    if compiler.version:
        marker = obj.find(b"GCC: (")
        if marker >= 0:
            recorded = obj[marker:obj.find(b"\0", marker)].decode("ascii", "replace").split()
            theirs = recorded[-1] if recorded else ""
            if theirs != compiler.version:
                return (f"has gcc {_said(theirs.encode())} at {compiler.path}, this board gcc {compiler.version}: "
                        "objects of another compiler version are not the ones this build would make")
    return None
