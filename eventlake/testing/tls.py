"""A throwaway certificate authority and a broker certificate for 127.0.0.1, made with
``openssl``: for testing clients' TLS settings against a real broker."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TlsFiles:
    #: The CA's certificate (PEM): what clients trust (``kafka.ssl_ca_location``).
    ca: Path
    #: The broker's unencrypted PKCS#8 key, its certificate and the CA's, in one PEM file.
    keystore: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_tls_files(folder: Path, days: int = 2) -> TlsFiles:
    """A new CA and a certificate it signs for ``127.0.0.1`` and ``localhost``."""
    folder.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
             "-out", "ca.pem", "-days", str(days), "-subj", "/CN=eventlake test CA",
             cwd=folder)  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "broker.key",
             "-out", "broker.csr", "-subj", "/CN=127.0.0.1", cwd=folder)  # fmt: skip
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "broker.pem", "-days", str(days),
             "-extfile", "san.ext", cwd=folder)  # fmt: skip
    _openssl("pkcs8", "-topk8", "-nocrypt", "-in", "broker.key", "-out", "broker.p8",
             cwd=folder)  # fmt: skip
    keystore = folder / "keystore.pem"
    keystore.write_text("".join(
        (folder / name).read_text() for name in ("broker.p8", "broker.pem", "ca.pem")
    ))  # fmt: skip
    keystore.chmod(0o600)
    return TlsFiles(folder / "ca.pem", keystore)
