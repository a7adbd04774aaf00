"""The test lab lives in fleetcheck.lab (the demo uses it too); tests import it from here."""

from fleetcheck.lab import (  # noqa: F401
    REGISTRY,
    SSHD,
    Lab,
    LabHost,
    free_port,
    incident_live_hash,
    journal_export,
    missing_prerequisites,
    port_open,
    run,
    sweep_orphans,
    wait_for,
    write_journal,
)
