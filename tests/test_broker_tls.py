"""rediss:// against a real redis-server with TLS (Debian's build has it; Valkey's wheel does
not, so this file always uses redis-server), certificates made here with `openssl`: the right
CA is OK, a wrong CA and a host-name mismatch are each a one-line UNKNOWN, `check_hostname =
false` accepts the mismatch, and mutual TLS sends the client certificate."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli import fleetcheck
from tests.conftest import _require_lab
from tests.servers import Server, fleet_toml

pytestmark = pytest.mark.lab


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_ca(d: Path, name: str) -> tuple[Path, Path]:
    key, crt = d / f"{name}.key", d / f"{name}.crt"
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
            str(crt), "-days", "2", "-subj", f"/CN={name}")  # fmt: skip
    return key, crt


def make_cert(d: Path, name: str, ca: tuple[Path, Path], san: str) -> tuple[Path, Path]:
    key, csr, crt = d / f"{name}.key", d / f"{name}.csr", d / f"{name}.crt"
    ext = d / f"{name}.ext"
    ext.write_text(f"subjectAltName = {san}\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
            "-subj", f"/CN={name}")  # fmt: skip
    openssl("x509", "-req", "-in", str(csr), "-CA", str(ca[1]), "-CAkey", str(ca[0]),
            "-CAcreateserial", "-out", str(crt), "-days", "2", "-extfile", str(ext))  # fmt: skip
    return key, crt


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if shutil.which("openssl") is None or shutil.which("redis-server") is None:
        _require_lab()  # fails under FLEETCHECK_REQUIRE_LAB, skips elsewhere
        pytest.skip("openssl and redis-server needed")
    d = tmp_path_factory.mktemp("pki")
    ca = make_ca(d, "ca")
    wrong = make_ca(d, "wrong-ca")
    server = make_cert(d, "server", ca, "IP:127.0.0.1, DNS:localhost")
    client = make_cert(d, "client", ca, "DNS:fleetcheck")
    for key in d.glob("*.key"):
        key.chmod(0o600)
    return {
        "ca": ca[1],
        "wrong_ca": wrong[1],
        "server_key": server[0],
        "server_crt": server[1],
        "client_key": client[0],
        "client_crt": client[1],
    }


@pytest.fixture(scope="module")
def tls_server(pki: dict[str, Path]) -> Iterator[Server]:
    args = ["--bind", "127.0.0.1 127.0.0.2", "--tls-cert-file", str(pki["server_crt"]),
            "--tls-key-file", str(pki["server_key"]), "--tls-ca-cert-file", str(pki["ca"]),
            "--tls-auth-clients", "optional"]  # fmt: skip
    with Server(args, binary="redis-server", tls=True) as server:
        yield server


def broker_row(tmp_path: Path, broker: str) -> dict:
    cfg = tmp_path / "hosts.toml"
    cfg.write_text(fleet_toml(broker))
    proc = fleetcheck("run", "-c", str(cfg), "--format", "json", "--no-state")
    assert "Traceback" not in proc.stderr, proc.stderr
    (row,) = json.loads(proc.stdout)["results"]
    return row


def test_right_ca(tmp_path: Path, tls_server: Server, pki: dict[str, Path]) -> None:
    url = f"rediss://127.0.0.1:{tls_server.port}/0"
    row = broker_row(tmp_path, f'url = "{url}"\nca_file = "{pki["ca"]}"')
    assert row["status"] == "OK", row
    # the valkeys:// alias and an upper-case scheme reach the same TLS broker
    url = f"VALKEYS://127.0.0.1:{tls_server.port}/0"
    assert broker_row(tmp_path, f'url = "{url}"\nca_file = "{pki["ca"]}"')["status"] == "OK"


def test_wrong_ca(tmp_path: Path, tls_server: Server, pki: dict[str, Path]) -> None:
    url = f"rediss://127.0.0.1:{tls_server.port}/0"
    row = broker_row(tmp_path, f'url = "{url}"\nca_file = "{pki["wrong_ca"]}"')
    assert row["status"] == "UNKNOWN"
    assert row["summary"].startswith(f"broker 127.0.0.1:{tls_server.port} unreachable: ")
    assert "certificate verify failed" in row["summary"] and "\n" not in row["summary"]


def test_hostname_mismatch(tmp_path: Path, tls_server: Server, pki: dict[str, Path]) -> None:
    url = f"rediss://127.0.0.2:{tls_server.port}/0"  # the certificate names 127.0.0.1 only
    row = broker_row(tmp_path, f'url = "{url}"\nca_file = "{pki["ca"]}"')
    assert row["status"] == "UNKNOWN"
    assert row["summary"].startswith(f"broker 127.0.0.2:{tls_server.port} unreachable: ")
    assert "mismatch" in row["summary"] and "\n" not in row["summary"]
    row = broker_row(tmp_path, f'url = "{url}"\nca_file = "{pki["ca"]}"\ncheck_hostname = false')
    assert row["status"] == "OK", row


def test_mutual_tls(tmp_path: Path, pki: dict[str, Path]) -> None:
    args = ["--tls-cert-file", str(pki["server_crt"]), "--tls-key-file", str(pki["server_key"]),
            "--tls-ca-cert-file", str(pki["ca"]), "--tls-auth-clients", "yes"]  # fmt: skip
    with Server(args, binary="redis-server", tls=True) as server:
        url = f"rediss://127.0.0.1:{server.port}/0"
        broker = f'url = "{url}"\nca_file = "{pki["ca"]}"'
        row = broker_row(tmp_path, broker)
        assert row["status"] == "UNKNOWN", row  # no client certificate: refused
        row = broker_row(
            tmp_path,
            broker + f'\ncert_file = "{pki["client_crt"]}"\nkey_file = "{pki["client_key"]}"',
        )
        assert row["status"] == "OK", row
