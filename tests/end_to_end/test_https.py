"""HTTPS: `serve` with a certificate; the real client verifies it against a CA made here."""

from __future__ import annotations

import datetime as dt
import ipaddress
import subprocess
import sys
import time
from pathlib import Path

import delta_sharing
import httpx
import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from sharing_server.app import create_app
from sharing_server.auth.profiles import write_profile
from testbed.seaweed import free_port, upload_tree
from tests.conftest import TESTDATA_BUCKET, Deployment
from tests.live_server import LiveServer


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_certificates(directory: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a server certificate for 127.0.0.1 signed by it."""
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("sharing test CA"))
        .issuer_name(_name("sharing test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    certificate = (
        x509.CertificateBuilder()
        .subject_name(_name("127.0.0.1"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False
        )
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_path, cert_path, key_path = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return ca_path, cert_path, key_path


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    return make_certificates(tmp_path_factory.mktemp("tls"))


def test_client_reads_over_verified_https(
    s3: Deployment, testdata: Path, certificates, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca, cert, key = certificates
    upload_tree(s3.seaweed.client(), testdata / "cdf-table", TESTDATA_BUCKET, "https/cdf-table")
    s3.share_tables("tls", {"t": "https/cdf-table"})
    port = free_port()
    app = create_app(s3.store, s3.storage, s3.secret, s3.config.prefix)
    with LiveServer(app, port, certfile=str(cert), keyfile=str(key)) as server:
        endpoint = f"{server.url}/delta-sharing"
        _, secret = s3.store.create_token("tls", dt.timedelta(hours=1), "tls")
        profile = tmp_path / "tls.share"
        write_profile(profile, endpoint, secret, None)
        # Unverified, the client's HTTP stack refuses the server (asked directly: the client
        # itself would retry a failed handshake for a minute and a half)...
        with pytest.raises(requests.exceptions.SSLError):
            requests.get(f"{endpoint}/shares", timeout=5)
        # ...and trusting our CA it reads both formats and the change data feed.
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(ca))
        url = f"{profile}#tls.default.t"
        assert len(delta_sharing.load_as_pandas(url)) == 9
        assert len(delta_sharing.load_as_pandas(url, use_delta_format=True)) == 9
        assert len(delta_sharing.load_table_changes_as_pandas(url, starting_version=0)) > 0
        assert httpx.get(f"{endpoint}/shares", verify=str(ca)).status_code == 401


def test_serve_command_with_certificate(tmp_path: Path, certificates) -> None:
    ca, cert, key = certificates
    port = free_port()
    env = {
        "SHARING_SERVER_DATA_DIR": str(tmp_path / "data"),
        "SHARING_SERVER_PORT": str(port),
        "PATH": "/usr/bin:/bin",
    }
    log = (tmp_path / "serve.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "sharing_server", "serve", "--certfile", str(cert), "--keyfile", str(key)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        for _ in range(100):
            try:
                response = httpx.get(f"https://127.0.0.1:{port}/healthz", verify=str(ca), timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        assert response.status_code == 200
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()
    assert f"https://127.0.0.1:{port}/delta-sharing" in (tmp_path / "serve.log").read_text()
