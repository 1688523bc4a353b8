"""SSH signatures of bundles: the one module that runs ``ssh-keygen`` (through ``proc``) for them.

Why OpenSSH's signatures (``ssh-keygen -Y``, PROTOCOL.sshsig): they work offline, ssh-keygen is on every Linux
machine, keys are the ones people already manage, and who may sign is an ``allowed_signers`` file that
``ssh-keygen`` itself reads (principals, key, ``namespaces=``, ``valid-after``/``valid-before``). A signature
is made over the manifest's exact bytes in the namespace ``NAMESPACE``; the manifest lists every member's
sha256 and size, so a valid signature authenticates the whole bundle.

The signature travels inside the bundle: the member ``SIGNATURE_NAME``, right after the manifest. Everything
in it is hostile until checked: its size is capped (``MAX_SIGNATURE_BYTES``) before it is read, and its
armour and structure (magic, version, key, namespace) are parsed here before any of it reaches ssh-keygen,
which then runs in a private temporary folder with argv lists only.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..digest import hash_bytes
from ..errors import ArtifactError, UsageError
from ..proc import Completed, TimedOut, capture
from ..regular_file import NotRegularFile, read_regular
from .errors import BundleDamaged

NAMESPACE = "flagtree-cpu-bundle"  # a signature made for git commits or files cannot pass for a bundle's
SIGNATURE_NAME = "flagtree-cpu-bundle.sig"  # the archive's second member, when the bundle is signed
MAX_SIGNATURE_BYTES = 16 * 1024  # an RSA-16384 signature with its key is ~6 KB; ed25519 ~300 bytes
MAX_KEY_BYTES = 64 * 1024  # a private key file is a few KB
_ARMOUR = re.compile(rb"-----BEGIN SSH SIGNATURE-----\n([A-Za-z0-9+/=\n]+)-----END SSH SIGNATURE-----\n?")
_LABELS = {"ssh-ed25519": "ED25519", "ssh-rsa": "RSA", "ssh-dss": "DSA", "sk-ssh-ed25519@openssh.com": "ED25519-SK",
           "sk-ecdsa-sha2-nistp256@openssh.com": "ECDSA-SK"}
_KEYGEN_FIX = "install OpenSSH's client tools (apt-get install openssh-client), which bring ssh-keygen"


class KeygenMissing(UsageError):
    """ssh-keygen is not on PATH (a minimal image without openssh-client)."""


@dataclass(frozen=True)
class PublicKey:
    keytype: str  # "ssh-ed25519"
    blob: bytes  # the key in SSH wire format

    @property
    def fingerprint(self) -> str:
        """``SHA256:...``, as ``ssh-keygen -l`` prints it."""
        raw = bytes.fromhex(hash_bytes(self.blob))
        return "SHA256:" + base64.b64encode(raw).decode().rstrip("=")

    def describe(self) -> str:
        label = _LABELS.get(self.keytype) or ("ECDSA" if self.keytype.startswith("ecdsa-") else self.keytype)
        return f"{label} key {self.fingerprint}"

    @classmethod
    def from_blob(cls, blob: bytes) -> PublicKey:
        """ValueError when ``blob`` does not start with a key type."""
        keytype = _Wire(blob).string().decode("ascii")
        if not re.fullmatch(r"[a-z0-9][a-z0-9.@-]{2,60}", keytype):
            raise ValueError(f"{keytype[:40]!r} is not an SSH key type")
        return cls(keytype, blob)


@dataclass(frozen=True)
class Signature:
    armoured: bytes  # the member's bytes, as ssh-keygen reads them
    key: PublicKey  # the key that made it (as the signature says: not yet trusted)
    namespace: str


@dataclass(frozen=True)
class SigningKey:
    path: Path
    key: PublicKey | None  # None: a private key in a format whose public half we cannot read unlocked
    encrypted: bool


class _Wire:
    """SSH wire-format reading: uint32 lengths and strings, every length checked against what is left."""

    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def uint32(self) -> int:
        if self.at + 4 > len(self.data):
            raise ValueError("it ends inside a length")
        self.at += 4
        return int.from_bytes(self.data[self.at - 4:self.at], "big")

    def string(self) -> bytes:
        size = self.uint32()
        if size > len(self.data) - self.at:
            raise ValueError(f"a field of {size} bytes does not fit in what is left ({len(self.data) - self.at})")
        self.at += size
        return self.data[self.at - size:self.at]


def parse_signature(raw: bytes, origin: str) -> Signature:
    """The signature member's bytes, checked: an armoured SSHSIG, version 1, in the bundles' namespace.
    Anything else is BundleDamaged naming ``origin``."""
    def damaged(why: str) -> BundleDamaged:
        return BundleDamaged(f"{origin}: the bundle's signature member {SIGNATURE_NAME} is not an SSH signature of "
                             f"a bundle: {why}")
    match = _ARMOUR.fullmatch(raw)
    if match is None:
        raise damaged("it is not one armoured SSH signature (-----BEGIN SSH SIGNATURE----- ... -----END ...)")
    try:
        data = base64.b64decode(match.group(1).replace(b"\n", b""), validate=True)
        wire = _Wire(data)
        if data[:6] != b"SSHSIG":
            raise ValueError("its magic is not SSHSIG")
        wire.at = 6
        if (version := wire.uint32()) != 1:
            raise ValueError(f"it is version {version}; ssh-keygen writes version 1")
        key = PublicKey.from_blob(wire.string())
        namespace = wire.string().decode("utf-8")
        for _field in ("reserved", "hash algorithm", "signature"):
            wire.string()
        if wire.at != len(data):
            raise ValueError(f"{len(data) - wire.at} bytes follow the signature")
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise damaged(str(exc)) from None
    if namespace != NAMESPACE:
        raise damaged(f"it was made for the namespace {namespace[:60]!r}, not {NAMESPACE!r} (a signature of "
                      "something else)")
    return Signature(raw, key, namespace)


# --- signing -------------------------------------------------------------------------------------------------


def signing_key(path: Path) -> SigningKey:
    """``path`` checked as a key ``sign`` can use, before any work: UsageError (exit 2) with the fix for a key
    that is missing, unreadable, not an SSH private key, too open, or locked by a passphrase nobody can type
    (no terminal, and no ssh-agent holding it)."""
    shown = str(path)
    make = (f"make one: ssh-keygen -t ed25519 -f {shown} (then give {shown}.pub to the boards: see the README, "
            "Who made a bundle)")
    try:
        text = read_regular(path, MAX_KEY_BYTES)
    except FileNotFoundError:
        raise UsageError(f"the signing key {shown} does not exist", fix=make) from None
    except IsADirectoryError:
        raise UsageError(f"the signing key {shown} is a folder, not a key file", fix=make) from None
    except NotRegularFile as exc:
        raise UsageError(f"the signing key {shown} is not a regular file ({exc.kind})", fix=make) from None
    except PermissionError:
        raise UsageError(f"the signing key {shown} cannot be read (permission denied)",
                         fix="run as the key's owner, or give a key you can read: --sign KEY") from None
    if len(text) > MAX_KEY_BYTES or b"PRIVATE KEY-----" not in text:
        public = text.startswith((b"ssh-", b"ecdsa-", b"sk-"))
        raise UsageError(f"the signing key {shown} is not an SSH private key" +
                         (" (it is a public key: --sign takes the private one, the file without .pub)" if public
                          else ""), fix=make)
    probe = _ssh_keygen(["-y", "-P", "", "-f", shown], timeout_s=30)  # -P "": never asks for a passphrase
    key = _openssh_public_key(text) or _beside(path)
    if probe.returncode == 0:
        return SigningKey(path, key or _public_line(probe.stdout), encrypted=False)
    said = _said(probe.stderr)
    if "bad permissions" in said:
        raise UsageError(f"ssh-keygen refuses the signing key {shown}: others can read it ({said})",
                         fix=f"chmod 600 {shown}")
    if "passphrase" not in said:
        raise UsageError(f"ssh-keygen cannot use {shown} as a signing key: {said}", fix=make)
    if not _has_terminal() and not (key is not None and _agent_holds(key)):
        raise UsageError(f"the signing key {shown} is protected by a passphrase, and there is no terminal to ask "
                         "for it (nor an ssh-agent holding the key)",
                         fix=f"load it into ssh-agent first (eval $(ssh-agent) && ssh-add {shown}), or run bundle "
                         "create in a terminal")
    return SigningKey(path, key, encrypted=True)


def sign(key: SigningKey, data: bytes) -> Signature:
    """An SSH signature of ``data`` (the manifest's bytes) by ``key``; ssh-keygen asks for a passphrase on the
    terminal when the key has one (and no agent holds it). A failure is UsageError: nothing was written."""
    # a person may be typing a passphrase: minutes, not the seconds a query gets
    done = _ssh_keygen(["-Y", "sign", "-f", str(key.path), "-n", NAMESPACE], input=data, timeout_s=600)
    if done.returncode != 0:
        raise UsageError(f"ssh-keygen could not sign with {key.path}: {_said(done.stderr)}; no bundle was written",
                         fix="check the key and its passphrase (ssh-keygen -y -f KEY prints its public key when "
                         "it can be used), then run bundle create again")
    return parse_signature(done.stdout.encode(), f"the signature just made with {key.path}")


# --- checking ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """What ssh-keygen said: ``ok``, and its own words (the temporary file names replaced by the real ones)."""

    ok: bool
    said: str
    principals: tuple[str, ...] = ()


class Checker:
    """ssh-keygen's checks of one signature, in a private temporary folder (removed on leaving): the signature
    and a copy of the allowed-signers text we read (so ssh-keygen judges exactly what our messages show)."""

    def __init__(self, signature: Signature, data: bytes, allowed: tuple[Path, str] | None = None):
        self.signature, self.data, self.allowed = signature, data, allowed

    def __enter__(self) -> Checker:
        self.folder = Path(tempfile.mkdtemp(prefix="flagtree-cpu-signature-"))
        self.sig = self.folder / SIGNATURE_NAME
        self.sig.write_bytes(self.signature.armoured)
        if self.allowed is not None:
            self.allowed_copy = self.folder / "allowed_signers"
            self.allowed_copy.write_text(self.allowed[1])
        return self

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def _said(self, text: str) -> str:
        said = _said(text).replace(str(self.sig), SIGNATURE_NAME)
        return said.replace(str(self.allowed_copy), str(self.allowed[0])) if self.allowed else said

    def matches(self) -> Check:
        """Whether the signature is the key's over these bytes (who the key is, is not asked)."""
        done = _ssh_keygen(["-Y", "check-novalidate", "-n", NAMESPACE, "-s", str(self.sig)], input=self.data)
        return Check(done.returncode == 0, self._said(done.stderr + done.stdout))

    def principals(self) -> Check:
        """The principals the allowed signers give the signature's key (none: the key is not there)."""
        done = _ssh_keygen(["-Y", "find-principals", "-f", str(self.allowed_copy), "-s", str(self.sig)])
        found = tuple(line.strip() for line in done.stdout.splitlines() if line.strip())
        return Check(done.returncode == 0 and bool(found), self._said(done.stderr), found)

    def verify(self, principal: str) -> Check:
        """ssh-keygen's verdict: the signature is ``principal``'s, over these bytes, in our namespace, valid now."""
        done = _ssh_keygen(["-Y", "verify", "-f", str(self.allowed_copy), "-I", principal, "-n", NAMESPACE,
                            "-s", str(self.sig)], input=self.data)
        return Check(done.returncode == 0, self._said(done.stderr + done.stdout), (principal,))


# --- ssh-keygen and keys -------------------------------------------------------------------------------------


def _ssh_keygen(args: list[str], *, input: bytes | None = None, timeout_s: float = 60) -> Completed:
    try:
        return capture(["ssh-keygen", *args], input=input, timeout_s=timeout_s)
    except FileNotFoundError:
        raise KeygenMissing("ssh-keygen is not installed: bundle signatures are made and checked with it",
                            fix=_KEYGEN_FIX) from None
    except TimedOut:
        raise ArtifactError(f"ssh-keygen {args[0]} {args[1] if len(args) > 1 else ''} did not answer in "
                            f"{timeout_s:g} s", fix="run the command again; `ssh-keygen -V` shows whether it "
                            "works here") from None


def _said(text: str) -> str:
    """ssh-keygen's stderr as one line, without its banners of @ signs."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("@")]
    return "; ".join(lines)[:500] or "no reason given"


def _openssh_public_key(text: bytes) -> PublicKey | None:
    """The public key stored unencrypted in an OpenSSH-format private key (readable without the passphrase)."""
    match = re.search(rb"-----BEGIN OPENSSH PRIVATE KEY-----\n([A-Za-z0-9+/=\n]+)-----END", text)
    if match is None:
        return None
    try:
        wire = _Wire(base64.b64decode(match.group(1).replace(b"\n", b"")))
        if wire.data[:15] != b"openssh-key-v1\0":
            return None
        wire.at = 15
        for _field in ("cipher", "kdf", "kdf options"):
            wire.string()
        if wire.uint32() < 1:
            return None
        return PublicKey.from_blob(wire.string())
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return None


def _beside(path: Path) -> PublicKey | None:
    """The public key in ``KEY.pub`` (what ssh-keygen wrote beside a private key in a format that hides it)."""
    with contextlib.suppress(OSError, UnicodeDecodeError):
        return _public_line(read_regular(f"{path}.pub", MAX_KEY_BYTES)[:MAX_KEY_BYTES].decode())
    return None


def _public_line(line: str) -> PublicKey | None:
    """``ssh-ed25519 AAAA... comment`` as a key (None when it is not one)."""
    parts = line.split()
    with contextlib.suppress(ValueError, binascii.Error, UnicodeDecodeError, IndexError):
        return PublicKey.from_blob(base64.b64decode(parts[1], validate=True))
    return None


def _has_terminal() -> bool:
    """Whether ssh-keygen could ask for a passphrase: it asks on the controlling terminal, never on stdin."""
    try:
        os.close(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY))
    except OSError:
        return False
    return True


def _agent_holds(key: PublicKey) -> bool:
    if not os.environ.get("SSH_AUTH_SOCK"):
        return False
    try:
        listed = capture(["ssh-add", "-L"], timeout_s=10)
    except (FileNotFoundError, TimedOut):
        return False
    return any(k is not None and k.blob == key.blob for k in map(_public_line, listed.stdout.splitlines()))


def public_key_line(line: str) -> PublicKey | None:
    """A key as an allowed-signers or .pub line writes it (type, base64): for messages that list trusted keys."""
    return _public_line(line)
