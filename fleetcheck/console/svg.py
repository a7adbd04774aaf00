"""Server-rendered SVG for the console: line charts and a row's status strip.

Inline SVG needs no script and no network access from the browser (ops networks are often
air-gapped), survives a restrictive Content-Security-Policy (only presentation attributes,
no `style=`), and prints. Every line also differs by dash pattern and carries its label at its
end, so the charts read without colour; the palette is Okabe-Ito (colour-blind safe).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime
from html import escape

from fleetcheck.core.model import Status
from fleetcheck.parse.duration import format_duration

PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"]
DASHES = ["", "6 3", "2 3", "8 3 2 3", "1 2", "10 4"]
REFERENCE = "#B00020"

STATUS_FILL = {
    Status.OK: "#2E7D32",
    Status.WARN: "#B26A00",
    Status.UNKNOWN: "#6A1B9A",
    Status.CRIT: "#C62828",
}
# bar height as a share of the strip: reads without colour (as `fleetcheck history`'s cells)
STATUS_HEIGHT = {Status.OK: 1.0, Status.WARN: 0.7, Status.UNKNOWN: 0.45, Status.CRIT: 0.2}


def _a(value: object) -> str:
    return escape(str(value), quote=True)


def _svg(kind: str, width: int, height: int, label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="{kind}" role="img" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'aria-label="{_a(label)}">'
    )


SECOND_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600]
SECOND_STEPS += [43200, 86400, 172800, 604800]


def nice_ticks(top: float, n: int = 5, seconds: bool = False) -> list[float]:
    """0 and round steps up to at least `top`: 1, 2, 5 x 10^k, or for durations whole
    seconds, minutes, hours and days."""
    if top <= 0 or not math.isfinite(top):
        return [0.0, 1.0]
    raw = top / n
    if seconds and raw <= SECOND_STEPS[-1]:
        step = float(next(s for s in SECOND_STEPS if s >= raw))
    else:
        mag = 10 ** math.floor(math.log10(raw))
        step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    count = math.ceil(top / step - 1e-9)
    return [i * step for i in range(count + 1)]


def format_count(v: float) -> str:
    if abs(v) >= 1e6:
        return f"{v:.3g}"
    return f"{v:.0f}" if abs(v - round(v)) < 1e-9 or abs(v) >= 100 else f"{v:.2g}"


def line_chart(
    title: str,
    series: list[tuple[str, list[tuple[float, float]], bool]],
    t0: float,
    t1: float,
    y_format: Callable[[float], str] = format_count,
    width: int = 760,
    height: int = 260,
) -> str:
    """An SVG line chart: (label, [(unix time, value)], is_reference) per line."""
    left, right, top, bottom = 64, 150, 12, 34
    pw, ph = width - left - right, height - top - bottom
    values = [v for _, pts, _ in series for _, v in pts if math.isfinite(v)]
    out = [_svg("chart", width, height, title), f"<title>{escape(title)}</title>"]
    if not values:
        out.append(
            f'<text x="{width / 2:.0f}" y="{height / 2:.0f}" text-anchor="middle" '
            'fill="#555">no data in this window</text></svg>'
        )
        return "".join(out)
    if t1 <= t0:
        t0, t1 = t0 - 60, t0 + 60
    ticks = nice_ticks(max(values) * 1.05, seconds=y_format is format_duration)
    ymax = ticks[-1] or 1.0

    def x(t: float) -> float:
        return left + (t - t0) / (t1 - t0) * pw

    def y(v: float) -> float:
        return top + ph - min(max(v, 0.0), ymax) / ymax * ph

    for tv in ticks:
        yy = y(tv)
        out.append(
            f'<line x1="{left}" y1="{yy:.1f}" x2="{left + pw}" y2="{yy:.1f}" stroke="#ddd"/>'
            f'<text x="{left - 6}" y="{yy + 4:.1f}" text-anchor="end" font-size="11" '
            f'fill="#333">{escape(y_format(tv))}</text>'
        )
    n_x = 5
    tick_format = "%H:%M:%S" if t1 - t0 < 3600 else "%m-%d %H:%M"
    for i in range(n_x + 1):
        t = t0 + (t1 - t0) * i / n_x
        label = datetime.fromtimestamp(t, UTC).strftime(tick_format)
        anchor = "start" if i == 0 else "end" if i == n_x else "middle"
        out.append(
            f'<line x1="{x(t):.1f}" y1="{top + ph}" x2="{x(t):.1f}" y2="{top + ph + 4}" '
            f'stroke="#333"/><text x="{x(t):.1f}" y="{top + ph + 17}" font-size="11" '
            f'text-anchor="{anchor}" fill="#333">{label}</text>'
        )
    out.append(
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>'
        f'<text x="{left + pw}" y="{height - 2}" font-size="10" text-anchor="end" '
        'fill="#555">UTC</text>'
    )
    labels: list[tuple[float, str]] = []  # (wanted y, svg text without y)
    for i, (label, pts, reference) in enumerate(series):
        pts = sorted((t, v) for t, v in pts if math.isfinite(v))
        if not pts:
            continue
        colour = REFERENCE if reference else PALETTE[i % len(PALETTE)]
        dash = "4 4" if reference else DASHES[i % len(DASHES)]
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        path = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in pts)
        out.append(
            f'<polyline points="{path}" fill="none" stroke="{colour}" '
            f'stroke-width="{1.5 if reference else 2}"{dash_attr}>'
            f"<title>{escape(label)}</title></polyline>"
        )
        if len(pts) == 1:
            t, v = pts[0]
            out.append(f'<circle cx="{x(t):.1f}" cy="{y(v):.1f}" r="3" fill="{colour}"/>')
        last = y_format(pts[-1][1])
        labels.append(
            (
                y(pts[-1][1]) + 4,
                f'<text x="{left + pw + 6}" y="{{y:.1f}}" font-size="11" fill="{colour}">'
                f"{escape(label)} {escape(last)}</text>",
            )
        )
    spots = spread_labels([w for w, _ in labels], 12, top + 8, height - 4)
    for ly, (_, text) in zip(spots, labels, strict=True):
        out.append(text.replace("{y:.1f}", f"{ly:.1f}", 1))
    out.append("</svg>")
    return "".join(out)


def spread_labels(wanted: list[float], gap: float, low: float, high: float) -> list[float]:
    """Label positions near `wanted`, at least `gap` apart, within [low, high] when they fit."""
    order = sorted(range(len(wanted)), key=lambda i: wanted[i])
    placed = [0.0] * len(wanted)
    prev = low - gap
    for i in order:
        prev = max(wanted[i], prev + gap)
        placed[i] = prev
    overflow = (prev - high) if order else 0.0
    if overflow > 0:  # pull the stack up from the bottom edge
        nxt = high + gap
        for i in reversed(order):
            nxt = min(placed[i], nxt - gap)
            placed[i] = max(nxt, low)
    return placed


def status_strip(
    points: list[tuple[float, Status | None, str]], t0: float, t1: float, width: int = 760
) -> str:
    """One bar per round, its height and colour by status (height alone tells them apart)."""
    height, top = 56, 4
    ph = height - top - 18
    out = [_svg("strip", width, height, "status per round")]
    if not points:
        out.append('<text x="8" y="30" fill="#555">no rounds in this window</text></svg>')
        return "".join(out)
    if t1 <= t0:
        t0, t1 = t0 - 60, t0 + 60
    bar = max(1.0, min(12.0, width / max(1, len(points)) - 1))
    for t, status, summary in points:
        xx = (t - t0) / (t1 - t0) * (width - bar)
        when = datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        if status is None:
            out.append(
                f'<rect x="{xx:.1f}" y="{top + ph - 1}" width="{bar:.1f}" height="1" '
                f'fill="#bbb"><title>{when}: not checked</title></rect>'
            )
            continue
        h = ph * STATUS_HEIGHT[status]
        out.append(
            f'<rect x="{xx:.1f}" y="{top + ph - h:.1f}" width="{bar:.1f}" height="{h:.1f}" '
            f'fill="{STATUS_FILL[status]}"><title>{when}: {status.label} '
            f"{escape(summary)}</title></rect>"
        )
    for i, (t, _, _) in enumerate((points[0], points[-1])):
        label = datetime.fromtimestamp(t, UTC).strftime("%m-%d %H:%M UTC")
        out.append(
            f'<text x="{0 if i == 0 else width}" y="{height - 3}" font-size="11" '
            f'text-anchor="{"start" if i == 0 else "end"}" fill="#333">{label}</text>'
        )
    out.append("</svg>")
    return "".join(out)
