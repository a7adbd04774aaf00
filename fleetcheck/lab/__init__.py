"""The lab: a real fleet on this machine, for the tests, the benchmarks and `fleetcheck demo`.

Network namespaces play the fleet's machines, joined by veth pairs to a bridge in the root
namespace; each has an address in 198.18.0.0/15 (reserved for benchmarking; no other
non-loopback address is ever used), its own OpenSSH sshd (keys generated per lab, known_hosts
written for the test) and, on request, simulated workers holding broker connections from its
address. The broker is a real redis-server listening on the bridge address.

Everything a lab starts is torn down by `close()`, also on failure; labs whose owning process
died (a killed test run) are swept when the next lab starts. Needs root, iproute2,
redis-server and sshd; `Lab(netns=False)` needs only redis-server and makes `ssh = "local"`
hosts whose workers connect from 127.0.0.x addresses (the demo's fallback).

One job per module: `system` (prerequisites, commands, waiting, ports, sweeping dead labs),
`base` (a lab host, the bookkeeping and teardown), `broker` (redis-server and the rater),
`hosts` (namespaces, veths and sshd), `workers` (simulated workers and the config),
`behaviours` (workers that speak), `fleet` (the Lab put together). What only tests plant (host
faults, journals, incidents) is in tests/lab.py.
"""

from fleetcheck.lab.base import LabHost
from fleetcheck.lab.fleet import Lab
from fleetcheck.lab.system import (
    REGISTRY,
    SSHD,
    free_port,
    kill_namespace,
    missing_prerequisites,
    port_open,
    run,
    server_binary,
    sweep_orphans,
    wait_for,
)

__all__ = [
    "REGISTRY",
    "SSHD",
    "Lab",
    "LabHost",
    "free_port",
    "kill_namespace",
    "missing_prerequisites",
    "port_open",
    "run",
    "server_binary",
    "sweep_orphans",
    "wait_for",
]
