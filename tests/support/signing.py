"""Signed bundles for tests: real SSH keys (ssh-keygen), allowed-signers files, and bundles taken apart and
put back together the way an attacker would — with tarfile, json, yaml and hashlib, not the tool's own code,
so a forgery is judged independently of the code that reads it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from typer.testing import Result

from tests.support.cli import Workspace, new_workspace
from tests.support.envelope import error_of, result_of
from tests.support.gitworld import GitWorld
from tests.support.hermetic import make_hermetic
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import TOP, llvm_tarball

MANIFEST = "flagtree-cpu-bundle.json"
SIGNATURE = "flagtree-cpu-bundle.sig"
NAMESPACE = "flagtree-cpu-bundle"


def make_key(folder: Path, name: str, passphrase: str = "") -> Path:
    """A new ed25519 key pair ``folder/name`` (and ``name.pub``), comment ``name``; the private key's path."""
    folder.mkdir(parents=True, exist_ok=True)
    key = folder / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-C", name, "-f", str(key)],
                   check=True, capture_output=True, stdin=subprocess.DEVNULL)
    return key


def fingerprint(key: Path) -> str:
    """``SHA256:...`` of a key, as ssh-keygen -l prints it."""
    out = subprocess.run(["ssh-keygen", "-l", "-f", str(key)], check=True, capture_output=True, text=True).stdout
    return out.split()[1]


def allowed_line(principal: str, key: Path, options: str = "") -> str:
    """The allowed-signers line trusting ``key`` (its .pub) as ``principal``."""
    keytype, blob = Path(f"{key}.pub").read_text().split()[:2]
    return " ".join(part for part in (principal, options, keytype, blob) if part) + "\n"


def sign(key: Path, data: bytes) -> bytes:
    """An SSH signature of ``data`` in the bundles' namespace, by ssh-keygen itself."""
    return subprocess.run(["ssh-keygen", "-Y", "sign", "-f", str(key), "-n", NAMESPACE], input=data, check=True,
                          capture_output=True).stdout


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Parts:
    """A bundle file taken apart: the manifest (parsed), the signature (or None) and the other members in order."""

    manifest: dict
    manifest_bytes: bytes
    signature: bytes | None
    members: list[tuple[str, bytes]] = field(default_factory=list)

    @classmethod
    def of(cls, path: Path) -> Parts:
        with tarfile.open(path) as tar:
            infos = tar.getmembers()
            data = [(i.name, tar.extractfile(i).read()) for i in infos]  # type: ignore[union-attr]
        (first, head), rest = data[0], data[1:]
        assert first == MANIFEST, first
        signature = None
        if rest and rest[0][0] == SIGNATURE:
            signature, rest = rest[0][1], rest[1:]
        return cls(json.loads(head), head, signature, rest)

    def data(self, name: str) -> bytes:
        return dict(self.members)[name]

    def replace_member(self, old: str, new: str, data: bytes) -> None:
        """Member ``old`` becomes ``new`` holding ``data``, in the file and in the manifest (size and sha256)."""
        self.members = [(new, data) if name == old else (name, body) for name, body in self.members]
        for member in self.manifest["members"]:
            if member["name"] == old:
                member.update(name=new, size=len(data), sha256=sha256(data))

    def reseal(self) -> None:
        """The manifest's digest computed again (its canonical JSON without the digest), and its bytes remade."""
        body = {k: v for k, v in self.manifest.items() if k != "digest"}
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
        self.manifest["digest"] = sha256(canonical.encode())
        self.manifest_bytes = (json.dumps(self.manifest, indent=1, sort_keys=True, ensure_ascii=False)
                               + "\n").encode()

    def write(self, dest: Path) -> Path:
        with tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as tar:
            entries = [(MANIFEST, self.manifest_bytes)]
            if self.signature is not None:
                entries.append((SIGNATURE, self.signature))
            for name, data in [*entries, *self.members]:
                info = tarfile.TarInfo(name)
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
        return dest


def plant_llvm(bundle: Path, dest: Path, planted: bytes, *, signature: str | Path = "keep") -> Path:
    """The attack of issue 26: ``bundle`` with its LLVM member swapped for ``planted``, the member's sha256 (and
    name, which is its sha256), the lock's digest and the manifest's digest recomputed, repacked. The signature is
    kept as it was ("keep"), removed ("strip"), or made again with the attacker's own key (a Path)."""
    parts = Parts.of(bundle)
    [artifact] = [m for m in parts.manifest["members"] if m["kind"] == "artifact"]
    old_sha, new_sha = artifact["sha256"], sha256(planted)
    artifact["meta"]["digest"] = {"sha256": new_sha}
    parts.replace_member(artifact["name"], f"artifacts/{new_sha}", planted)
    for member in [m for m in parts.manifest["members"] if m["kind"] == "lock"]:
        lock = yaml.safe_load(parts.data(member["name"]))
        for entry in lock.get("artifacts", {}).values():
            if entry["sha256"] == old_sha:
                entry.update(sha256=new_sha, size=len(planted))
        parts.replace_member(member["name"], member["name"], yaml.safe_dump(lock, sort_keys=False).encode())
    parts.reseal()
    if signature == "strip":
        parts.signature = None
    elif isinstance(signature, Path):
        parts.signature = sign(signature, parts.manifest_bytes)
    return parts.write(dest)


# --- the bundles of the loopback world, and a board to use them on ------------------------------------------


LLVM_PATH = f"/public/llvm-builds/{TOP}.tar.gz"
PLANTED = llvm_tarball(seed=666)  # the attacker's LLVM: same layout, other bytes
COMMANDS = (("bundle", "verify"), ("bundle", "import"), ("setup", "--offline", "--skip-build", "--ignore-host",
                                                         "--bundle"))


@dataclass
class Made:
    root: Path
    sets: tuple[str, ...]
    ws: Workspace  # the connected machine's workspace the bundles were made from
    maker: Path  # the key the signed bundle is signed with
    attacker: Path  # a key nobody trusts
    unsigned: Path  # made without --sign: a v1 bundle as every earlier version wrote it
    signed: Path  # made with --sign maker
    created: dict = field(default_factory=dict)  # bundle create --json of the signed one
    env: dict[str, str] = field(default_factory=dict)  # the environment it was made in

    @contextmanager
    def connected(self, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
        """The workspace the bundles were made from, in the environment they were made in (for one more
        `bundle create`: its sources and the LLVM tarball are in that home's caches)."""
        with monkeypatch.context() as mp:
            for name in list(os.environ):
                mp.delenv(name)
            for name, value in self.env.items():
                mp.setenv(name, value)
            yield self.ws

    def create_process(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        """`bundle create ARGS` of the connected workspace as a real process in a session of its own: it has no
        controlling terminal, as under cron or CI (ssh-keygen cannot ask for a passphrase there), and no ssh-agent
        unless ``env`` names one."""
        base = {k: v for k, v in self.env.items() if k != "SSH_AUTH_SOCK"}
        return subprocess.Popen([sys.executable, "-m", "flagtree_cpu_build", *self.ws.argv("bundle", "create", *args)],
                                env={**base, **(env or {})}, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)


@contextmanager
def bundles_of_world(git_world: GitWorld, root: Path) -> Iterator[Made]:
    """Two bundles of the loopback world made by the real `bundle create` in a home of their own under ``root``,
    one unsigned and one signed (``--sign``) with the key ``maker``; the keys of the tests beside them."""
    (root / "home").mkdir()
    server = LoopbackHTTPServer()
    try:
        with pytest.MonkeyPatch.context() as mp:
            make_hermetic(mp, root / "home")
            mp.setenv("GIT_CONFIG_GLOBAL", str(git_world.gitconfig))
            url = server.serve(LLVM_PATH, llvm_tarball().data)
            sets = (f"artifacts.llvm.url={url}", "python.build=[]", "python.runtime=[]", "checks=[]")
            ws = new_workspace(git_world, root / "ws", always_set=sets)
            made = Made(root, sets, ws, make_key(root / "keys", "maker"), make_key(root / "keys", "attacker"),
                        root / "unsigned.bundle", root / "signed.bundle")
            result = ws.run("bundle", "create", "-o", str(made.unsigned))
            assert result.exit_code == 0, result.stderr
            created = ws.run("--json", "bundle", "create", "--sign", str(made.maker), "-o", str(made.signed))
            assert created.exit_code == 0, created.stderr
            made.created = result_of(created.stdout)
            made.env = dict(os.environ)
            yield made
    finally:
        server.close()


@dataclass
class Board:
    """A fresh workspace on a machine without network, and what the tool may write there."""

    ws: Workspace

    def run(self, *args: str) -> Result:
        return self.ws.run(*args)

    def trust(self, *lines: str, where: str = "config") -> Path:
        """Trusted keys as an allowed-signers file in the user's config folder (``where="config"``), or beside
        it (for --trusted-keys or the environment)."""
        config = Path(os.environ["XDG_CONFIG_HOME"]) / "flagtree-cpu"
        path = config / "allowed_signers" if where == "config" else config.parent / f"{where}-allowed"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(lines))
        return path

    def written(self) -> list[str]:
        """Everything in the workspace, the download cache and Triton's LLVM folder (a refused bundle: none)."""
        home = Path.home()
        tops = (self.ws.root, home / ".cache" / "flagtree-cpu", home / ".triton")
        return sorted(str(p) for top in tops if top.exists() for p in top.rglob("*"))


def published_clang() -> bytes:
    return (Path.home() / ".triton" / "llvm" / TOP / "bin" / "clang").read_bytes()


def refused(result: Result, command: tuple[str, ...]) -> dict:
    """The error of a run that must have refused the bundle with exit 4."""
    assert result.exit_code == 4, (command, result.exit_code, result.stderr)
    return error_of(result.stdout)
