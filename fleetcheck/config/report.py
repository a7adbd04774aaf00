"""What `fleetcheck config check` prints: the file problems, then the validated config as
the patrol will read it (broker, patrol, checks, each host's effective settings and where
each inherited one comes from)."""

from __future__ import annotations

from fleetcheck.config.files import check_files, effective
from fleetcheck.config.tables import FleetConfig


def config_report(fleet: FleetConfig, elsewhere: bool = False) -> tuple[str, list[str], int]:
    """(the text for stdout, the lines for stderr, the exit code): 3 with no text when a file
    the config names is an error, else 0."""
    from fleetcheck.parse.duration import format_duration
    from fleetcheck.transport.redis import redact_url

    problems = check_files(fleet, elsewhere)
    warnings = [
        f"fleetcheck: {'error' if p.error else 'warning'}: {p.text(fleet.path)}" for p in problems
    ]
    if any(p.error for p in problems):
        return "", warnings, 3
    lines = [f"config: {fleet.path}: valid"]
    b = fleet.broker
    where = redact_url(b.url) if b.url else b.address
    extra = [f"user {b.username}"] if b.username else []
    if b.password_env:
        extra.append(f"password from ${b.password_env}")
    elif b.password_file:
        extra.append(f"password from {b.password_file}")
    if b.ca_file:
        extra.append(f"CA {b.ca_file}")
    lines.append(
        f"broker: {where} (connect timeout {format_duration(b.connect_timeout)}"
        + "".join(f", {x}" for x in extra)
        + ")"
    )
    lines.append(
        f"patrol: every {format_duration(fleet.patrol.every)}, deadline "
        f"{format_duration(fleet.patrol.deadline)}"
    )
    lines.append(f"checks: {', '.join(fleet.checks) or '(none)'}")
    if fleet.notes:
        lines.append("durations written as bare numbers:")
        lines.extend(f"  {note}" for note in fleet.notes)
    if fleet.inventory:
        lines.append("inventory:")
        lines.extend(f"  {line}" for line in inventory_lines(fleet))
    lines.append(f"hosts ({len(fleet.hosts)}):")
    for h in fleet.hosts:
        values = effective(h)
        shown = " ".join(f"{key}={setting_text(value)}" for key, value, _ in values)
        lines.append(f"  {h.name}: {shown}")
        if h.origin:
            lines.append(f"    from {h.origin}")
        inherited: dict[str, list[str]] = {}
        for key, _, where in values:
            if where not in ("", "hosts"):
                inherited.setdefault(where, []).append(key)
        if inherited:
            lines.append(
                "    "
                + "; ".join(f"from [{w}]: {', '.join(keys)}" for w, keys in inherited.items())
            )
    return "\n".join(lines), warnings, 0


def setting_text(value: object) -> str:
    """A per-host value as `config check` lists it: lists comma-joined, unset as '-'."""
    if value is None or value == ():
        return "-"
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def inventory_lines(fleet: FleetConfig) -> list[str]:
    """Each [[inventory]] source: how many hosts it gave, or why it failed and what is used
    instead; then the hosts it reported that cannot be used, one line each."""
    from fleetcheck.core.safe_text import one_line
    from fleetcheck.parse.duration import format_duration

    out: list[str] = []
    for st in fleet.inventory:
        if st.error is None:
            out.append(f"{st.label}: {len(st.hosts)} hosts")
        elif st.cached_at is not None:
            age = format_duration(st.age_s) if st.age_s is not None else "unknown age"
            out.append(
                f"{st.label}: FAILED: {st.error}; using its last good list "
                f"({len(st.hosts)} hosts, {age} old)"
            )
        else:
            out.append(f"{st.label}: FAILED: {st.error}; no earlier list to use")
        out.extend(f"  {p}" for p in st.problems)
    return [one_line(x) for x in out]
