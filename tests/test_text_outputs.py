"""The table, plain and history outputs read at 3 a.m., as rules over generated reports
(no golden files): each problem told once, no trailing spaces, one duration style, since
only with history, broker-wide rows that no host can be mistaken for, --problems, and a
history legend that shows the glyphs it draws."""

from __future__ import annotations

import io
import random
import re
from datetime import UTC, datetime, timedelta

import pytest
from rich.console import Console

from fleetcheck.config import SAFE_NAME, HostConfig
from fleetcheck.core.model import BROKER_WIDE, Report, Result, Standing, Status
from fleetcheck.parse.duration import format_duration
from fleetcheck.render import FIRST_SEEN, plain, table
from fleetcheck.render import history as render_history
from tests.standing import recorded

NOW = datetime(2026, 1, 15, 3, 0, tzinfo=UTC)


def iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def fleet(n_hosts: int, seed: int, with_state: bool | None = None) -> Report:
    """A generated fleet: every host has three checks with varied statuses and summaries; half
    of the rows have history (since before now), some are first seen now."""
    rng = random.Random(seed)
    rows = []
    for check in ("queue_depth", "live_hash", "broker"):
        rows.append((check, None))
    for i in range(n_hosts):
        for check in ("clients", "logs", "routes"):
            rows.append((check, f"host-{i:02d}"))
    # a host literally named like the broker: must never be mistaken for the broker-wide rows
    rows.append(("clients", "broker"))
    state = rng.random() < 0.7 if with_state is None else with_state
    results = []
    for n, (check, host) in enumerate(rows):
        status = rng.choice([Status.OK, Status.OK, Status.WARN, Status.CRIT, Status.UNKNOWN])
        words = " ".join(
            rng.choice(["depth", "stale", "route", "eth0", "x" * rng.randint(1, 30)])
            for _ in range(rng.randint(2, 40))
        )
        summary = f"problem {n} of {check}: {words}"
        since = None
        if state:
            since = iso(NOW - timedelta(seconds=rng.choice([0, 0, 45, 192, 9060, 300000])))
        row = Result(check, host, status, summary)
        results.append(row if since is None else (row, Standing(since)))
    return recorded(iso(NOW), 0.56, results)


def table_text(report: Report, width: int, problems: bool = False, color: bool = False) -> str:
    out = io.StringIO()
    table.render(report, Console(file=out, width=width, force_terminal=color), problems)
    return out.getvalue()


def outputs(report: Report, problems: bool = False) -> dict[str, str]:
    return {
        "plain": plain.render(report, problems, columns=100),
        "plain-narrow": plain.render(report, problems, columns=50),
        "table": table_text(report, 120, problems),
        "table-narrow": table_text(report, 70, problems),
        "table-color": table_text(report, 120, problems, color=True),
    }


def unfold(text: str) -> str:
    """Table text with the box drawing and the folding undone: the words, one space apart."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return " ".join(re.sub(r"[│┃┏┓┗┛┡┩└┘┳┻╇┴┬─━]", " ", text).split())


SEEDS = range(12)


@pytest.mark.parametrize("seed", SEEDS)
def test_no_problem_text_appears_twice(seed: int) -> None:
    report = fleet(8, seed)
    for name, text in outputs(report).items():
        flat = unfold(text) if name.startswith("table") else " ".join(text.split())
        for r in report.results:
            told = " ".join(r.summary.split())
            if name == "table-narrow":  # folded cells: every summary's first words, once
                told = " ".join(told.split()[:3])
            assert flat.count(told) == 1, (name, r.summary)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("problems", [False, True])
def test_no_line_ends_in_a_space(seed: int, problems: bool) -> None:
    for name, text in outputs(fleet(8, seed), problems).items():
        bad = [
            line
            for line in text.splitlines()
            if re.sub(r"\x1b\[[0-9;]*m", "", line) != re.sub(r"\x1b\[[0-9;]*m", "", line).rstrip()
        ]
        assert not bad, (name, bad[:3])


@pytest.mark.parametrize("seed", SEEDS)
def test_problem_lines_after_the_table_one_per_place_within_the_width(seed: int) -> None:
    report = fleet(8, seed)
    bad_places = {r.host or BROKER_WIDE for r in report.results if r.status is not Status.OK}
    lines = plain.render(report, columns=60).splitlines()
    blank = [i for i, line in enumerate(lines) if not line]
    block = lines[blank[0] + 1 : blank[1]]  # between the table and the footer
    heads = [line for line in block if not line.startswith(" ")]
    assert sorted(h.split(None, 1)[1].rsplit(":", 1)[0].split(": ")[0] for h in heads) == sorted(
        bad_places
    )
    ranks = [Status.parse(h.split()[0]).rank for h in heads]
    assert ranks == sorted(ranks, reverse=True)  # worst first
    assert all(len(line) <= 60 for line in block)
    header = ["STATUS", "HOST", "CHECK"] + (
        ["SINCE"] if any(report.standing_of(r).since for r in report.results) else []
    )
    assert lines[0].split() == [*header, "SUMMARY"]  # the table first, the summary last


def test_problems_shows_only_the_rows_not_ok_and_the_counts() -> None:
    report = fleet(8, 3)
    counts = report.counts()
    assert counts["OK"] and sum(counts.values()) > counts["OK"]
    for name, text in outputs(report, problems=True).items():
        flat = unfold(text) if name.startswith("table") else " ".join(text.split())
        for r in report.results:
            shown = " ".join(r.summary.split()[:3]) in flat
            assert shown is (r.status is not Status.OK), (name, r.status, r.summary)
        footer = [line for line in text.splitlines() if " rows: " in line][0]
        assert f"{len(report.results)} rows: " in footer, (name, footer)  # rows, not checks
        for label, n in counts.items():
            if n:
                assert f"{n} {label}" in footer, (name, footer)


def test_problems_on_an_all_ok_fleet_says_so() -> None:
    report = Report(iso(NOW), 0.1, (Result("broker", None, Status.OK, "fine"),))
    assert "no problems: every row is OK" in plain.render(report, problems=True)
    assert "fine" not in plain.render(report, problems=True)


def plain_rows(text: str) -> list[dict[str, str]]:
    """The plain table's rows as {column: cell}, cut at the header's column starts."""
    header, _, *lines = text.split("\n\n")[0].splitlines()
    names = header.split()
    starts = [header.index(n) for n in names] + [None]
    rows: list[dict[str, str]] = []
    for line in lines:
        if not line[: starts[-2]].strip():  # the summary wrapped: its next line
            rows[-1]["SUMMARY"] += " " + line.strip()
            continue
        rows.append({n: line[starts[i] : starts[i + 1]].strip() for i, n in enumerate(names)})
    return rows


def test_broker_wide_rows_cannot_be_mistaken_for_a_host() -> None:
    assert not SAFE_NAME.fullmatch(BROKER_WIDE)
    with pytest.raises(ValueError, match="use only letters"):
        HostConfig(name=BROKER_WIDE)
    report = fleet(3, 1, with_state=False)
    rows = plain_rows(plain.render(report, columns=200))
    assert sorted(r["CHECK"] for r in rows if r["HOST"] == BROKER_WIDE) == sorted(
        r.check for r in report.results if r.host is None
    )
    assert [r["CHECK"] for r in rows if r["HOST"] == "broker"] == ["clients"]  # the host
    text = plain.render(report) + table_text(report, 100)
    assert "(broker)" not in text


DURATION = re.compile(r"^(?:\d+(?:\.\d)?s|\d+m\d\ds|\d+h\d\dm|\d+d\d+h)$")


@pytest.mark.parametrize("seed", SEEDS)
def test_since_only_with_history_in_one_duration_style(seed: int) -> None:
    report = fleet(6, seed, with_state=True)
    text = plain.render(report, columns=300)
    by_summary = {" ".join(r.summary.split()): r for r in report.results}
    for line in plain_rows(text):
        since = line["SINCE"]
        r = by_summary[line["SUMMARY"]]
        since_text = report.standing_of(r).since or ""
        age = (NOW - datetime.fromisoformat(since_text.replace("Z", "+00:00"))).total_seconds()
        if age > 0:
            assert since == format_duration(age) and DURATION.match(since), line
        elif r.status is Status.OK:
            assert since == "", line
        else:
            assert since == FIRST_SEEN, line
    # the problem lines: "(for <duration>)" or "(first seen now)", never a zero age
    for what in re.findall(r"\(for ([^)]*)\)", text):
        assert DURATION.match(what) and what not in ("0s", "0.0s"), what
    assert "for 0" not in text


def test_a_first_round_says_first_seen_now() -> None:
    row = Result("clients", "mini", Status.CRIT, "no broker connections")
    report = recorded(iso(NOW), 0.5, [(row, Standing(iso(NOW)))])
    for name, text in outputs(report).items():
        assert FIRST_SEEN in text, name
        assert "CRIT for" not in text and "0.5s" not in text.split("patrol")[0], name


def test_no_state_no_since_column() -> None:
    report = fleet(4, 2, with_state=False)
    assert "SINCE" not in plain.render(report) and FIRST_SEEN not in plain.render(report)


def test_the_host_is_named_once_per_row() -> None:
    report = Report(
        iso(NOW), 0.5, (Result("clients", "mini", Status.CRIT, "no broker connections"),)
    )
    for text in outputs(report).values():
        row = [line for line in unfold(text).split("CRIT") if "no broker connections" in line][0]
        assert row.count("mini") == 1, row


# ------------------------------------------------------------------ history grid
def history_rounds(statuses: list[Status]) -> list[object]:
    from fleetcheck.rounds.history import Round

    return [
        Round(NOW + timedelta(minutes=15 * i), s, {"mini": s, BROKER_WIDE: Status.OK}, {})
        for i, s in enumerate(statuses)
    ]


@pytest.mark.parametrize("terminal", [True, False])
def test_history_legend_glyphs_are_the_drawn_glyphs(terminal: bool) -> None:
    statuses = [Status.OK, Status.WARN, Status.UNKNOWN, Status.CRIT, Status.OK]
    rounds = history_rounds(statuses)
    lines = [("mini", statuses), (BROKER_WIDE, [Status.OK] * 5)]
    out = io.StringIO()
    console = Console(
        file=out, width=200, force_terminal=terminal, color_system="truecolor" if terminal else None
    )
    render_history.render(rounds, lines, console)
    text = out.getvalue()
    plain_text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    legend = dict(
        (label, glyph) for glyph, label in re.findall(r"(\S)=(OK|WARN|UNKNOWN|CRIT)", plain_text)
    )
    assert set(legend) == {"OK", "WARN", "UNKNOWN", "CRIT"}
    row = [line for line in plain_text.splitlines() if line.startswith("mini")][0]
    drawn = row.split()[1]
    assert drawn == "".join(legend[s.label] for s in statuses)
    assert not any(line.endswith(" ") for line in plain_text.splitlines())
    if terminal:  # colour and weight grow with severity: CRIT bold red, OK dim
        styles = {s: render_history.STYLE[s] for s in Status}
        assert "bold" in styles[Status.CRIT] and "dim" in styles[Status.OK]
        crit = render_history.CELL[Status.CRIT]
        assert re.search(r"\x1b\[1;31m" + crit, text) or re.search(r"\x1b\[1;[0-9;]*m" + crit, text)


def test_history_prominence_follows_severity() -> None:
    """Taller block for a worse status (the terminal glyphs are the lower-block series)."""
    heights = " ▁▂▃▄▅▆▇█"
    order = sorted(Status, key=lambda s: s.rank)
    assert [heights.index(render_history.CELL[s]) for s in order] == sorted(
        heights.index(render_history.CELL[s]) for s in order
    )
    assert len({render_history.CELL[s] for s in Status}) == 4
    assert len({render_history.PLAIN[s] for s in Status}) == 4
