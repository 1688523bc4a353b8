"""Who a bundle comes from: the trust policy of this machine, and the verdict on one bundle.

Checksums (the manifest's sha256 of every member, and its own digest) prove a bundle was not damaged on the
way; anyone who can write the file can recompute them. Origin is proven two ways, each optional:

- a signature (``signature``) checked against **trusted keys**: an OpenSSH allowed-signers file, taken from
  ``--trusted-keys FILE``, else ``$FLAGTREE_CPU_TRUSTED_KEYS``, else ``$XDG_CONFIG_HOME/flagtree-cpu/
  allowed_signers`` when it exists (the first found wins; the others are not read). Where trusted keys are
  configured, a bundle that is unsigned, signed by a key not in the file, or signed by a principal the file does
  not allow to sign bundles (``namespaces=``, ``valid-before``) is refused (BundleUntrusted, exit 4);
- ``--expect-digest SHA256``: the sha256 of the whole bundle file (what ``sha256sum`` prints), carried to the
  board out of band; any other file is refused (exit 4).

Where neither is configured the verdict says so — "integrity only (checksums); not authenticated" — and, for a
signed bundle, who signed it (unverified: a key anyone could have made). A signature that does not match the
manifest is refused whatever the policy: it is proof the manifest was changed after it was signed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..invocation import elsewhere
from ..regular_file import NotRegularFile, read_regular
from ..workspace import user_config_dir
from .errors import BundleUntrusted
from .reading import Head
from .signature import NAMESPACE, Checker, KeygenMissing, PublicKey, Signature, public_key_line

TRUST_ENV = "FLAGTREE_CPU_TRUSTED_KEYS"
ALLOWED_SIGNERS = "allowed_signers"  # the file's name in the user's config folder
MAX_ALLOWED_BYTES = 1024 * 1024
NOT_AUTHENTICATED = "integrity only (checksums); not authenticated"
README = "see the README: Who made a bundle"
HOW_TO_TRUST = (f"configure the keys bundles must be signed with: --trusted-keys FILE, {TRUST_ENV}=FILE or "
                f"~/.config/flagtree-cpu/{ALLOWED_SIGNERS} (an OpenSSH allowed-signers file; see the README: "
                "Who made a bundle), or pass --expect-digest SHA256")
_KEY = re.compile(r"(?:^|\s)((?:ssh|ecdsa|sk|rsa)-[A-Za-z0-9.@-]+)\s+([A-Za-z0-9+/]+={0,2})(?=\s|$)")


@dataclass(frozen=True)
class AllowedSigner:
    line: int
    principals: str  # as the file writes them: "alice@example.com" or "alice,bob"
    key: PublicKey

    def describe(self) -> str:
        return f"{self.principals} ({self.key.describe()})"


@dataclass(frozen=True)
class TrustedKeys:
    path: Path
    source: str  # which setting named it: "--trusted-keys", the environment variable, or the user's config
    text: str  # what was read, handed to ssh-keygen as it is
    signers: tuple[AllowedSigner, ...]

    def where(self) -> str:
        return f"{self.path} (from {self.source})"

    def looked_for(self) -> tuple[str, ...]:
        return tuple(f"trusted: {s.describe()}" for s in self.signers)

    def to_json(self) -> dict[str, Any]:
        return {"file": str(self.path), "from": self.source,
                "keys": [{"principals": s.principals, "key": s.key.fingerprint, "type": s.key.keytype}
                         for s in self.signers]}


@dataclass(frozen=True)
class Trust:
    """This run's policy: the trusted keys (None: not configured) and the file's expected sha256."""

    keys: TrustedKeys | None = None
    expect_sha256: str | None = None


def trusted_keys(option: Path | None, environ: Mapping[str, str]) -> TrustedKeys | None:
    """The trusted keys this run uses: the option's, else the environment's, else the user's config file when it
    exists. A file named by the option or the environment must exist (UsageError otherwise)."""
    if option is not None:
        return read_allowed_signers(option.expanduser(), "--trusted-keys")
    if environ.get(TRUST_ENV):
        return read_allowed_signers(Path(environ[TRUST_ENV]).expanduser(), TRUST_ENV)
    config = user_config_dir(environ) / ALLOWED_SIGNERS
    if os.path.lexists(config):
        return read_allowed_signers(config, "the user's config")
    return None


def read_allowed_signers(path: Path, source: str) -> TrustedKeys:
    """The allowed-signers file ``path``, read (a regular file, at most MAX_ALLOWED_BYTES, UTF-8) and each line
    understood: ``principals [options] keytype base64 [comment]``. UsageError (exit 2) naming file and line."""
    fix = (f"make it an OpenSSH allowed-signers file (ssh-keygen(1), ALLOWED SIGNERS), one line per key: "
           f"PRINCIPAL KEYTYPE KEY, e.g. echo \"builder@site $(cat KEY.pub)\" > {path} ({README})")
    try:
        raw = read_regular(path, MAX_ALLOWED_BYTES)
    except FileNotFoundError:
        raise UsageError(f"the trusted keys file {path} (from {source}) does not exist", fix=fix) from None
    except IsADirectoryError:
        raise UsageError(f"the trusted keys {path} (from {source}) are a folder, not a file", fix=fix) from None
    except NotRegularFile as exc:
        raise UsageError(f"the trusted keys {path} (from {source}) are not a regular file ({exc.kind})",
                         fix=fix) from None
    except PermissionError:
        raise UsageError(f"the trusted keys file {path} (from {source}) cannot be read (permission denied)",
                         fix=f"make it readable: chmod a+r {path}") from None
    if len(raw) > MAX_ALLOWED_BYTES:
        raise UsageError(f"the trusted keys file {path} (from {source}) is larger than {MAX_ALLOWED_BYTES} bytes; "
                         "it is not an allowed-signers file", fix=fix)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"the trusted keys file {path} (from {source}) is not text (UTF-8)", fix=fix) from None
    signers = tuple(_signers(text, path, fix))
    if not signers:
        raise UsageError(f"the trusted keys file {path} (from {source}) names no key: every bundle would be refused",
                         fix=fix)
    return TrustedKeys(path, source, text, signers)


def _signers(text: str, path: Path, fix: str) -> list[AllowedSigner]:
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        principals = line.split()[0] if not line.startswith('"') else line[:line.find('"', 1) + 1]
        match = _KEY.search(line, len(principals))
        key = public_key_line(f"{match.group(1)} {match.group(2)}") if match else None
        if match is None or key is None or key.keytype != match.group(1) or not principals.strip('"'):
            raise UsageError(f"{path}:{number} is not an allowed-signers line (principals [options] keytype key): "
                             f"{line[:80]!r}", fix=fix)
        found.append(AllowedSigner(number, principals.strip('"'), key))
    return found


# --- the verdict on one bundle -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Authenticity:
    """What was proven about a bundle's origin (integrity is proven by reading it: it verified, or it was
    refused)."""

    signer: PublicKey | None = None  # the key the signature says made it (None: unsigned)
    principal: str | None = None  # who the trusted keys say that key is (only when verified)
    verified: bool = False  # the signature checked against the trusted keys
    checked: bool = True  # False: a signature nobody asked to verify, not checked (ssh-keygen is not installed)
    keys: TrustedKeys | None = None
    expected: str | None = None  # --expect-digest
    sha256: str | None = None  # the file's, when it was computed

    @property
    def authenticated(self) -> bool:
        return self.verified or (self.expected is not None and self.sha256 == self.expected)

    def summary(self) -> str:
        proofs = []
        if self.verified:
            proofs.append(f"signed by {self.principal} ({self.signer.describe() if self.signer else '?'}), a trusted "
                          f"key in {self.keys.where() if self.keys else '?'}")
        if self.expected is not None and self.sha256 == self.expected:
            proofs.append(f"its sha256 is the expected {self.expected}")
        if proofs:
            return "authenticated: " + "; and ".join(proofs)
        if self.signer is not None:
            unchecked = "" if self.checked else "; the signature itself was not checked: ssh-keygen is not installed"
            return (f"{NOT_AUTHENTICATED}: signed by {self.signer.describe()}, unverified (no trusted keys are "
                    f"configured, so anyone's key would do){unchecked}")
        return f"{NOT_AUTHENTICATED}: the bundle is not signed, and no trusted keys are configured"

    def to_json(self) -> dict[str, Any]:
        signature = None if self.signer is None else {
            "key": self.signer.fingerprint, "type": self.signer.keytype, "principal": self.principal,
            "verified": self.verified, "checked": self.checked, "namespace": NAMESPACE}
        digest = None if self.expected is None else {"expected": self.expected, "sha256": self.sha256,
                                                     "matched": self.sha256 == self.expected}
        return {"authenticated": self.authenticated, "summary": self.summary(), "signature": signature,
                "trusted_keys": self.keys.to_json() if self.keys else None, "digest": digest}


def authenticate(path: Path, head: Head, trust: Trust) -> Authenticity:
    """The verdict on ``head``'s signature under ``trust`` (before any member is read); BundleUntrusted when the
    policy refuses it, or when the signature does not match the manifest."""
    keys, signature = trust.keys, head.signature
    if signature is None:
        if keys is not None:
            raise BundleUntrusted(f"{path} is not signed, and trusted keys are configured in {keys.where()}: an "
                                  "unsigned bundle is refused, and nothing of it is used", details=keys.looked_for(),
                                  fix="ask its maker for a signed bundle ("
                                  f"{elsewhere('bundle', 'create', '--sign', 'KEY', '-o', 'FILE')}; {README})")
        return Authenticity(expected=trust.expect_sha256)
    with Checker(signature, head.raw, (keys.path, keys.text) if keys else None) as checker:
        if keys is not None:
            principal = _trusted_principal(path, signature, keys, checker)
            return Authenticity(signer=signature.key, principal=principal, verified=True, keys=keys,
                                expected=trust.expect_sha256)
        try:
            matched = checker.matches()
        except KeygenMissing:  # nobody asked for authenticity here: say what was not checked, and go on
            return Authenticity(signer=signature.key, checked=False, expected=trust.expect_sha256)
        if not matched.ok:
            raise _changed(path, signature, None, matched.said)
        return Authenticity(signer=signature.key, expected=trust.expect_sha256)


def _trusted_principal(path: Path, signature: Signature, keys: TrustedKeys, checker: Checker) -> str:
    """The principal ``keys`` give the signature's key, once ssh-keygen verified the signature as theirs; else
    BundleUntrusted saying which of the ways it failed: unknown key, a line that rules it out, changed bytes."""
    found = checker.principals()
    listed = [s.principals for s in keys.signers if s.key.blob == signature.key.blob]
    if not found.principals and listed:  # its line rules it out: expired, not yet valid
        raise _not_allowed(path, signature, keys, ", ".join(listed), found.said)
    if not found.principals:
        raise BundleUntrusted(
            f"{path} is signed by {signature.key.describe()}, which is not a trusted key in {keys.where()}; the "
            "bundle is refused, and nothing of it is used", details=keys.looked_for(),
            fix="ask the bundle's maker which key they sign with (ssh-keygen -lf KEY.pub prints its fingerprint); "
            f"add it to {keys.path} only if it is theirs")
    verdicts = [checker.verify(principal) for principal in found.principals]
    good = next((v for v in verdicts if v.ok), None)
    if good is not None:
        return good.principals[0]
    who = ", ".join(found.principals)
    if not checker.matches().ok:
        raise _changed(path, signature, who, verdicts[0].said)
    raise _not_allowed(path, signature, keys, who, verdicts[0].said)


def _not_allowed(path: Path, signature: Signature, keys: TrustedKeys, who: str, said: str) -> BundleUntrusted:
    return BundleUntrusted(
        f"{path} is signed by {who} ({signature.key.describe()}), but {keys.where()} does not allow that key to "
        f"sign bundles now: {said}", details=keys.looked_for(),
        fix=f"the key's line in {keys.path} must allow the namespace {NAMESPACE!r} (namespaces=\"{NAMESPACE}\", or no "
        "namespaces option) and be valid now (valid-after/valid-before); or ask for a bundle signed by another key")


def _changed(path: Path, signature: Signature, who: str | None, said: str) -> BundleUntrusted:
    signer = f"{who} ({signature.key.describe()})" if who else signature.key.describe()
    return BundleUntrusted(f"{path} carries a signature by {signer} that does not match its manifest: the manifest "
                           "was changed after it was signed (or the signature was taken from another bundle); the "
                           "bundle is refused, and nothing of it is used",
                           details=(f"ssh-keygen: {said}",),
                           fix="get the bundle again from its maker, over a path you trust")


def check_digest(path: Path, verdict: Authenticity, sha256: str | None) -> Authenticity:
    """``verdict`` with the file's sha256; BundleUntrusted when it is not the expected one."""
    verdict = replace(verdict, sha256=sha256)
    if verdict.expected is not None and sha256 != verdict.expected:
        raise BundleUntrusted(f"{path} is not the bundle expected: its sha256 differs from --expect-digest; it is "
                              "refused, and nothing of it is used",
                              details=(f"expected sha256 {verdict.expected}", f"got sha256      {sha256}"),
                              fix=f"copy the bundle again from its source, and compare: sha256sum {path}")
    return verdict
