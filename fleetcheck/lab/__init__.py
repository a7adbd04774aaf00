"""The lab: a real fleet on this machine for `fleetcheck demo`, the tests (tests/lab.py adds
what only they plant) and the benchmarks; docs/CONTRIBUTING.md ("The lab") tells how it works.

One job per module: `system` (prerequisites, commands, waiting, ports, sweeping dead labs),
`base` (a lab host, the bookkeeping and teardown), `broker` (redis-server), `hosts`
(namespaces, veths and sshd), `workers` (simulated workers, the rater and the config),
`behaviours` (workers that speak), `fleet` (the Lab put together), `demo` (the command).
"""

from fleetcheck.lab.base import LabHost
from fleetcheck.lab.fleet import Lab
from fleetcheck.lab.system import missing_prerequisites

__all__ = ["Lab", "LabHost", "missing_prerequisites"]
