"""The Redis tier over TLS and as an ACL user, against a real redis-server with TLS on loopback (certificates made here)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from kvcontract import LookupResult
from kvcontract.assembly import build_tier
from kvcontract.config import KVContractConfig, RedisTierConfig
from kvcontract.testing import example_identity
from kvcontract.tiers import RedisTier
from kvcontract.tiers.integrity import SecretFileError
from kvcontract.tiers.redis.client import RedisAccess, RedisUnavailableError
from kvcontract.tiers.remote_tier import RemoteTierOptions
from tests.required_parts import skip_unless_required
from tests.tiers.redis.support import HOST, RedisServer, fill, free_port, job_counter, key, load, pattern, settle, store

PASSWORD = "tier-secret-7"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _make_certificates(directory: Path) -> None:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, all signed by the CA."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
             "-days", "2", "-subj", "/CN=kvcontract test CA", cwd=directory)  # fmt: skip
    (directory / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    for name in ("server", "client"):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                 "-subj", f"/CN={HOST}", cwd=directory)  # fmt: skip
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.pem", "-days", "2", "-extfile", "san.ext", cwd=directory)  # fmt: skip


class TlsServer:
    """A redis-server with a plain port (for the test's own commands) and a TLS port that wants client certificates,
    and an ACL user ``tier`` with a password."""

    def __init__(self, directory: Path) -> None:
        self.certs = directory / "certs"
        self.certs.mkdir(parents=True)
        _make_certificates(self.certs)
        self.tls_port = free_port()
        self.server = RedisServer(
            directory / "redis",
            "--tls-port", str(self.tls_port),
            "--tls-cert-file", str(self.certs / "server.pem"),
            "--tls-key-file", str(self.certs / "server.key"),
            "--tls-ca-cert-file", str(self.certs / "ca.pem"),
            "--tls-auth-clients", "yes",
            "--user", "tier", "on", f">{PASSWORD}", "~*", "&*", "+@all",
        )  # fmt: skip

    @property
    def url(self) -> str:
        return f"rediss://{HOST}:{self.tls_port}/0"

    def access(self, password: str = PASSWORD, *, client_certificate: bool = True) -> RedisAccess:
        return RedisAccess(
            username="tier",
            password=password,
            tls_ca_file=self.certs / "ca.pem",
            tls_cert_file=self.certs / "client.pem" if client_certificate else None,
            tls_key_file=self.certs / "client.key" if client_certificate else None,
        )


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsServer]:
    if shutil.which("openssl") is None:
        skip_unless_required("redis", "the openssl command is not on PATH: it makes the TLS test's certificates")
    server = TlsServer(tmp_path_factory.mktemp("tls"))
    yield server
    server.server.stop()


def _tier(server: TlsServer, host: torch.Tensor, access: RedisAccess) -> RedisTier:
    return RedisTier(
        host,
        identity=example_identity(int(host.shape[1])),
        url=server.url,
        socket_timeout=5.0,
        connect_timeout=5.0,
        access=access,
        options=RemoteTierOptions(namespace="tls", io_threads=2, lookup_timeout=10.0),
    )


def test_a_tier_stores_and_loads_over_tls_as_an_acl_user(tls_server: TlsServer, host: torch.Tensor) -> None:
    tier = _tier(tls_server, host, tls_server.access())
    try:
        jobs = job_counter()
        fill(host, [0], [8])
        assert store(tier, jobs, [key(1)], [0]).success
        assert settle(tier, key(1)) is LookupResult.HIT
        assert load(tier, jobs, [key(1)], [3]).success and torch.equal(host[3], pattern(8))
        clients = str(tls_server.server.command("CLIENT", "LIST"))
        assert "user=tier" in clients, "the tier logged in as the ACL user"
    finally:
        tier.shutdown()


@pytest.mark.parametrize("fault", ["wrong password", "no client certificate", "plain url"])
def test_a_tier_that_cannot_log_in_or_shake_hands_is_one_clear_error(
    tls_server: TlsServer, host: torch.Tensor, fault: str
) -> None:
    access = tls_server.access("wrong" if fault == "wrong password" else PASSWORD)
    if fault == "no client certificate":
        access = tls_server.access(client_certificate=False)
    url = f"redis://{HOST}:{tls_server.tls_port}/0" if fault == "plain url" else tls_server.url
    with pytest.raises(RedisUnavailableError, match="cannot reach"):
        RedisTier(host, identity=example_identity(int(host.shape[1])), url=url, access=access,
                  socket_timeout=2.0, connect_timeout=2.0)  # fmt: skip


def test_build_tier_reads_the_password_file_and_the_tls_options(
    tls_server: TlsServer, host: torch.Tensor, tmp_path: Path
) -> None:
    password = tmp_path / "password"
    password.write_text(PASSWORD + "\n")
    password.chmod(0o644)
    settings = {
        "url": tls_server.url,
        "username": "tier",
        "password_file": password,
        "tls_ca_file": tls_server.certs / "ca.pem",
        "tls_cert_file": tls_server.certs / "client.pem",
        "tls_key_file": tls_server.certs / "client.key",
        "socket_timeout": 5.0,
        "connect_timeout": 5.0,
    }
    config = KVContractConfig.model_validate({"manager": {"kind": "tiering"}})
    identity = example_identity(int(host.shape[1]))
    with pytest.raises(SecretFileError, match=f"chmod 600 {password}"):
        build_tier(RedisTierConfig.model_validate(settings), config, host, identity=identity)
    password.chmod(0o600)
    tier = build_tier(RedisTierConfig.model_validate(settings), config, host, identity=identity)
    try:
        assert isinstance(tier, RedisTier) and tier.healthy
        assert PASSWORD not in repr(tls_server.access())
    finally:
        tier.shutdown()
