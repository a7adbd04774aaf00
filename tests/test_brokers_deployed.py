"""Issue 28 item 4: brokers as deployed. Sentinel with its own password and ACL user, TLS to
the sentinel and to the master it names (real redis-sentinel and redis-server with TLS);
a Redis Cluster (three real `redis-server --cluster-enabled yes` nodes joined by redis-cli)
refused in one line naming what to point fleetcheck at."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from fleetcheck.lab.system import free_port, wait_for
from tests.cli import fleetcheck
from tests.conftest import _require_lab
from tests.servers import Server, fleet_toml
from tests.test_broker_tls import make_ca, make_cert

pytestmark = pytest.mark.lab


def need(*programs: str) -> None:
    if any(shutil.which(p) is None for p in programs):
        _require_lab()
        pytest.skip(f"needs {', '.join(programs)}")


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, Path]:
    need("openssl", "redis-server")
    ca = make_ca(tmp_path, "ca")
    key, crt = make_cert(tmp_path, "server", ca, "IP:127.0.0.1, DNS:localhost")
    key.chmod(0o600)
    return {"ca": ca[1], "key": key, "crt": crt}


def tls_lines(pki: dict[str, Path]) -> str:
    return (
        f"tls-cert-file {pki['crt']}\ntls-key-file {pki['key']}\n"
        f"tls-ca-cert-file {pki['ca']}\ntls-auth-clients optional\ntls-replication yes\n"
    )


def rows(tmp_path: Path, broker: str, env: dict[str, str]) -> tuple[list[dict], str]:
    conf = tmp_path / "hosts.toml"
    conf.write_text(fleet_toml(broker, checks="[checks.broker]\n[checks.clients]\n",
                               extra='environment_file = ""'))  # fmt: skip
    proc = fleetcheck("run", "-c", str(conf), "-f", "json", "--no-state", env=env)
    assert "Traceback" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout)["results"], proc.stderr


def test_sentinel_with_password_acl_user_and_tls(tmp_path: Path, pki: dict[str, Path]) -> None:
    need("redis-sentinel")
    master_conf = tls_lines(pki) + "requirepass master-pw\n"
    master_conf += "user fc on >fc-pw ~* &* +@all\n"
    with ExitStack() as stack:
        master = stack.enter_context(Server(binary="redis-server", tls=True, config=master_conf))
        sentinel_conf = (
            tls_lines(pki)
            + f"sentinel monitor mymaster 127.0.0.1 {master.port} 1\n"
            + "sentinel auth-pass mymaster master-pw\n"
            + "sentinel resolve-hostnames no\n"
            + "requirepass sentinel-default-pw\n"
            + "user sfc on >sentinel-pw ~* &* +@all\n"
        )
        sentinel = stack.enter_context(
            Server(binary="redis-sentinel", tls=True, sentinel=True, config=sentinel_conf)
        )

        def knows_master() -> bool:
            proc = subprocess.run(
                ["redis-cli", "--tls", "--cacert", str(pki["ca"]), "-p", str(sentinel.port),
                 "--user", "sfc", "--pass", "sentinel-pw", "--no-auth-warning",
                 "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"],
                capture_output=True, text=True,
            )  # fmt: skip
            return str(master.port) in proc.stdout

        wait_for(knows_master, 20, "the sentinel to know its master")
        broker = (
            f'sentinels = ["127.0.0.1:{sentinel.port}"]\nservice = "mymaster"\ntls = true\n'
            f'ca_file = "{pki["ca"]}"\nusername = "fc"\npassword_env = "FC_T_MASTER_PW"\n'
            'sentinel_username = "sfc"\nsentinel_password_env = "FC_T_SENTINEL_PW"'
        )
        env = {"FC_T_MASTER_PW": "fc-pw", "FC_T_SENTINEL_PW": "sentinel-pw"}
        got, _ = rows(tmp_path, broker, env)
        statuses = {r["check"]: r for r in got}
        assert statuses["broker"]["status"] == "OK", statuses["broker"]
        assert (
            f"master 127.0.0.1:{master.port} (via sentinel mymaster)"
            in (statuses["broker"]["summary"])
        )
        assert statuses["clients"]["status"] != "UNKNOWN", statuses["clients"]
        # the sentinel's password wrong: one line, no secret
        got, _ = rows(tmp_path, broker, {**env, "FC_T_SENTINEL_PW": "nope"})
        assert all(r["status"] == "UNKNOWN" for r in got)
        assert "no master from the sentinels" in got[0]["summary"]
        assert "nope" not in json.dumps(got)


def _cluster_port() -> int:
    """A free port whose cluster bus (port + 10000) is free too: Redis refuses a cluster
    node above 55535."""
    while True:
        port = free_port()
        if port > 55535:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[list[Server]]:
    need("redis-server", "redis-cli")
    with ExitStack() as stack:
        nodes = [
            stack.enter_context(
                Server(
                    port=_cluster_port(),
                    args=[
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        str(tmp_path / f"nodes-{i}.conf"),
                    ],
                    binary="redis-server",
                )  # fmt: skip
            )
            for i in range(3)
        ]
        subprocess.run(
            ["redis-cli", "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in nodes),
             "--cluster-replicas", "0", "--cluster-yes"],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip

        def ok() -> bool:
            info = nodes[0].client().execute_command("CLUSTER", "INFO").decode()
            return "cluster_state:ok" in info

        wait_for(ok, 30, "the cluster to be ok")
        yield nodes


def test_cluster_is_refused_in_one_line(tmp_path: Path, cluster: list[Server]) -> None:
    got, stderr = rows(tmp_path, f'url = "{cluster[0].url}"', {})
    assert got and all(r["status"] == "UNKNOWN" for r in got), got
    summaries = {r["summary"] for r in got}
    assert len(summaries) == 1, summaries
    (summary,) = summaries
    assert summary.startswith(f"broker 127.0.0.1:{cluster[0].port} is a node of a Redis/Valkey ")
    assert "point [broker] url at a standalone server" in summary
    conf = tmp_path / "hosts.toml"
    proc = fleetcheck("doctor", "-c", str(conf))
    assert proc.returncode == 3
    assert len([line for line in proc.stdout.splitlines() if "Cluster" in line]) == 1, proc.stdout
