"""Test certificates made with the ``openssl`` command line: a CA, a server certificate for
127.0.0.1 and localhost (subjectAltName), client certificates, and a second CA whose client
certificate the broker must refuse.

``make_pki(directory)`` writes the files and returns their paths; the keystores are PEM files
holding the private key followed by the certificate chain, as ``ssl.keystore.location`` takes
them. EC P-256 keys: quick to make and to use. Must not import josefk.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

KEY_PASSWORD = "server-key-secret"


@dataclass(frozen=True)
class Pki:
    ca: Path  # the CA certificate: the truststore of broker and clients
    server_keystore: Path  # key + server certificate + CA
    server_cert: Path
    server_key: Path
    server_key_encrypted: Path  # the same key, encrypted with KEY_PASSWORD
    other_server_keystore: Path  # another server certificate of the same CA (reload tests)
    alice_cert: Path  # CN=alice,OU=eng,O=josefk, signed by the CA
    alice_key: Path
    mallory_cert: Path  # CN=mallory, signed by the other CA
    mallory_key: Path
    other_ca: Path


def _openssl(*args: str | Path, cwd: Path) -> None:
    subprocess.run(["openssl", *map(str, args)], cwd=cwd, check=True, capture_output=True)


def _key(path: Path) -> None:
    curve = "ec_paramgen_curve:P-256"
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", curve, "-out", path, cwd=path.parent)


def _ca(directory: Path, name: str, subject: str) -> tuple[Path, Path]:
    key, cert = directory / f"{name}.key", directory / f"{name}.pem"
    _key(key)
    _openssl(
        "req", "-x509", "-new", "-key", key, "-out", cert, "-days", "30", "-subj", subject,
        cwd=directory,
    )  # fmt: skip
    return cert, key


def _signed(
    directory: Path, name: str, subject: str, ca: tuple[Path, Path], extensions: str
) -> tuple[Path, Path]:
    key, csr, cert = directory / f"{name}.key", directory / f"{name}.csr", directory / f"{name}.pem"
    ext = directory / f"{name}.ext"
    ext.write_text(extensions)
    _key(key)
    _openssl("req", "-new", "-key", key, "-out", csr, "-subj", subject, cwd=directory)
    _openssl(
        "x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial",
        "-out", cert, "-days", "30", "-extfile", ext, cwd=directory,
    )  # fmt: skip
    return cert, key


def make_pki(directory: Path) -> Pki:
    directory = directory.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    ca = _ca(directory, "ca", "/O=josefk/CN=josefk test CA")
    other_ca = _ca(directory, "other-ca", "/O=elsewhere/CN=another CA")
    server_ext = (
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
        "extendedKeyUsage=serverAuth\nkeyUsage=digitalSignature\n"
    )
    client_ext = "extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature\n"
    server = _signed(directory, "server", "/O=josefk/CN=localhost", ca, server_ext)
    server2 = _signed(directory, "server2", "/O=josefk/OU=rotated/CN=localhost", ca, server_ext)
    alice = _signed(directory, "alice", "/O=josefk/OU=eng/CN=alice", ca, client_ext)
    mallory = _signed(directory, "mallory", "/O=elsewhere/CN=mallory", other_ca, client_ext)
    keystores = []
    for name, (cert, key) in (("server", server), ("server2", server2)):
        keystore = directory / f"{name}-keystore.pem"
        keystore.write_text(key.read_text() + cert.read_text() + ca[0].read_text())
        keystores.append(keystore)
    encrypted = directory / "server-encrypted.key"
    _openssl(
        "pkey", "-in", server[1], "-aes256", "-passout", f"pass:{KEY_PASSWORD}", "-out", encrypted,
        cwd=directory,
    )  # fmt: skip
    return Pki(
        ca=ca[0],
        server_keystore=keystores[0],
        server_cert=server[0],
        server_key=server[1],
        server_key_encrypted=encrypted,
        other_server_keystore=keystores[1],
        alice_cert=alice[0],
        alice_key=alice[1],
        mallory_cert=mallory[0],
        mallory_key=mallory[1],
        other_ca=other_ca[0],
    )
