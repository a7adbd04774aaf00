"""Built-in checks, one module per check; installed as fleetcheck.checks (see pyproject)."""
