"""The stamp shapes of the systems operators run, one entry each: a name, a pattern, its
quirks and a sample line.

The facts (which systems write which shape, where the stamp sits, which fields are unpadded,
which fraction separator they use) were learnt from the systems' documentation and the sample
lines of lnav's format definitions (tstack/lnav, src/formats/*.json); the code is ours. Order
matters: when two formats read the same lines, the earlier, more specific one names the
shape (a `klog` line is not reported as a generic one). Pure data plus compiled patterns."""

from __future__ import annotations

import re
from dataclasses import dataclass

from fleetcheck.parse.logformats.fields import compiled

# the pieces the patterns share (group names: see fields.py)
_MON = r"(?P<b>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_DOW = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_HMS = r"(?P<H>\d{2}):(?P<M>\d{2}):(?P<S>\d{2})"
_FRAC = r"(?:[.,](?P<f>\d{1,9}))?"
_OFFSET = r"(?P<z>Z|[+-]\d{2}(?::?\d{2})?)"
# zone abbreviations a line may name; kept as text (ambiguous: IST is India, Israel, Ireland)
ZONE_ABBREVIATIONS = (
    "EST EDT CST CDT MST MDT PST PDT AKST AKDT HST CET CEST EET EEST WET WEST BST IST MSK "
    "JST KST AEST AEDT ACST ACDT AWST NZST NZDT SGT HKT"
).split()
_ZN = r"(?P<zn>" + "|".join(ZONE_ABBREVIATIONS) + r")"
_ZONE = r"(?:\s?(?P<z>Z|UTC|GMT|[+-]\d{2}(?::?\d{2})?)(?![\w:])|\s" + _ZN + r"(?!\w))?"
_ISO_DATE = r"(?P<Y>\d{4})(?P<sep>[-/])(?P<m>\d{2})(?P=sep)(?P<d>\d{2})"
# a pattern's `{NAME}`: one of these pieces
_PIECES = {"MON": _MON, "DOW": _DOW, "HMS": _HMS, "FRAC": _FRAC, "OFFSET": _OFFSET, "ZN": _ZN}
_PIECES |= {"ZONE": _ZONE, "ISO_DATE": _ISO_DATE}


@dataclass(frozen=True)
class LogFormat:
    """One stamp shape. `strong`: specific enough to trust on a single line; a weak one (a
    bare run of digits, a date without a year) must read several lines of the tail first."""

    name: str
    title: str  # who writes it, for the evidence and the docs
    pattern: re.Pattern[str]
    sample: str  # a line in this format (from its documentation; the docs list these)
    quirks: tuple[str, ...] = ()
    strong: bool = True
    date_known: bool = True  # False: a time of day only


def _f(
    name: str,
    title: str,
    pattern: str,
    sample: str,
    *quirks: str,
    strong: bool = True,
    date_known: bool = True,
) -> LogFormat:
    regex = compiled(pattern, _PIECES)
    return LogFormat(name, title, regex, sample, quirks, strong, date_known)


FORMATS: tuple[LogFormat, ...] = (
    _f(
        "syslog-rfc5424",
        "syslog RFC 5424 (rsyslog, syslog-ng)",
        r"^<\d{1,3}>\d{1,2} (?P<ts>" + _ISO_DATE + r"T" + _HMS + _FRAC + _OFFSET + r")\s",
        "<30>1 2026-11-29T02:21:00.123456+01:00 box rater 42 - - tick",
        "offset in the line",
    ),
    _f(
        "cri",
        "CRI container log (containerd, CRI-O: /var/log/pods)",
        r"^(?P<ts>" + _ISO_DATE + r"T" + _HMS + _FRAC + _OFFSET + r") (?:stdout|stderr) [FP] ",
        "2026-11-29T02:21:00.123456789Z stdout F tick",
        "nanoseconds",
        "offset in the line",
    ),
    _f(
        "docker-timestamps",
        "Docker (docker logs --timestamps)",
        r"^(?P<ts>" + _ISO_DATE + r"T" + _HMS + r"\.(?P<f>\d{9})" + _OFFSET + r") ",
        "2026-11-29T02:21:00.123456789Z tick",
        "nanoseconds",
        "offset in the line",
    ),
    _f(
        "env-logger",
        "Rust env_logger",
        r"^\[(?P<ts>" + _ISO_DATE + r"T" + _HMS + _FRAC + _OFFSET + r")\s+"
        r"(?:TRACE|DEBUG|INFO|WARN|ERROR)\s+[^\]]*\]",
        "[2026-11-29T02:21:00Z INFO  rater] tick",
        "offset in the line",
    ),
    _f(
        "klog",
        "Go klog / glog (Kubernetes components)",
        r"^[IWEF](?P<ts>(?P<m>\d{2})(?P<d>\d{2}) " + _HMS + r"\.(?P<f>\d{6}))\s+\d+ [^ :]+:\d+\]",
        "I1129 02:21:00.123456    4242 main.go:42] tick",
        "no year",
    ),
    _f(
        "klog-year",
        "glog with the year",
        r"^[IWEF](?P<ts>(?P<Y>\d{4})(?P<m>\d{2})(?P<d>\d{2}) " + _HMS + r"\.(?P<f>\d{6}))\s+\d+ ",
        "I20261129 02:21:00.123456    4242 main.go:42] tick",
    ),
    _f(
        "nginx-error",
        "nginx error log",
        r"^(?P<ts>(?P<Y>\d{4})/(?P<m>\d{2})/(?P<d>\d{2}) " + _HMS + r") "
        r"\[(?:emerg|alert|crit|error|warn|notice|info|debug)\] \d+#\d+:",
        "2026/11/29 02:21:00 [error] 42#42: *1 connect() failed",
    ),
    _f(
        "go-log",
        "Go log package (log.LstdFlags)",
        r"^(?P<ts>(?P<Y>\d{4})/(?P<m>\d{2})/(?P<d>\d{2}) " + _HMS + r"(?:\.(?P<f>\d{6}))?)(?= )",
        "2026/11/29 02:21:00 listening on :8080",
    ),
    _f(
        "apache-error",
        "Apache error log",
        r"^\[(?P<ts>{DOW} {MON} (?P<d>\d{2}) {HMS}{FRAC} (?P<Y>\d{4}))\] \[",
        "[Sun Nov 29 02:21:00.123456 2026] [core:error] [pid 42] AH00037: x",
    ),
    _f(
        "common-log",
        "nginx / Apache access log (common and combined)",
        r"\[(?P<ts>(?P<d>\d{2})/" + _MON + r"/(?P<Y>\d{4}):" + _HMS + r" (?P<z>[+-]\d{4}))\]",
        '198.18.0.9 - - [29/Nov/2026:02:21:00 +0100] "GET / HTTP/1.1" 200 612',
        "offset in the line",
    ),
    _f(
        "java-util-logging",
        "Java java.util.logging (SimpleFormatter)",
        r"^(?P<ts>" + _MON + r" (?P<d>\d{1,2}), (?P<Y>\d{4}) (?P<H>\d{1,2}):(?P<M>\d{2}):"
        r"(?P<S>\d{2}) (?P<p>AM|PM))(?= )",
        "Nov 29, 2026 2:21:00 AM org.example.Main run",
        "unpadded hour",
        "AM/PM",
    ),
    _f(
        "python-logging",
        "Python logging / log4j %d (comma milliseconds)",
        r"^(?P<ts>(?P<Y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2}) " + _HMS + r",(?P<f>\d{3}))(?= )",
        "2026-11-29 02:21:00,123 INFO rater: tick",
        "comma fraction",
    ),
    _f(
        "logback",
        "logback / log4j2 / Spring Boot (dot milliseconds)",
        r"^(?P<ts>(?P<Y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})[ T]{HMS}\.(?P<f>\d{3})(?:{OFFSET})?)"
        r"\s+(?:\[[^\]]*\]\s+)?(?:TRACE|DEBUG|INFO|WARN|ERROR)\b",
        "2026-11-29 02:21:00.123  INFO 42 --- [main] o.e.App : tick",
    ),
    _f(
        "logback-time",
        "logback's default pattern (a time of day only)",
        r"^(?P<ts>" + _HMS + r"\.(?P<f>\d{3})) \[[^\]]+\] (?:TRACE|DEBUG|INFO|WARN|ERROR)\b",
        "02:21:00.123 [main] INFO  o.e.App - tick",
        "no date",
        strong=False,
        date_known=False,
    ),
    _f(
        "iso8601",
        "ISO 8601 / RFC 3339 anywhere on the line",
        r"(?<!\d)(?P<ts>{ISO_DATE}(?:T|\s+)(?P<H>\d{1,2}):(?P<M>\d{2})(?::(?P<S>\d{2}){FRAC})?{ZONE})",
        "2026-11-29T02:21:00.123+01:00 level=info msg=tick",
        "offset optional",
        "comma or dot fraction",
    ),
    _f(
        "redis",
        "Redis / Valkey server log",
        r"^\d+:[XCSM] (?P<ts>(?P<d>\d{1,2}) {MON}(?: (?P<Y>\d{4}))? {HMS}\.(?P<f>\d{3})) [.*#-] ",
        "42:M 29 Nov 2026 02:21:00.123 * Ready to accept connections",
    ),
    _f(
        "ctime",
        "ctime / asctime (Sun Nov 29 02:21:00 2026)",
        r"(?<!\w)(?P<ts>(?:{DOW}\s+)?{MON}\s+(?P<d>\d{1,2})\s+{HMS}{FRAC}(?:\s{ZN})?"
        r"\s+(?P<Y>\d{4}))(?![\d:])",
        "Sun Nov 29 02:21:00 2026 rater started",
    ),
    _f(
        "day-month-year",
        "day month year (RFC 2822, HTTP dates)",
        r"(?<!\w)(?P<ts>(?P<d>\d{1,2})[ -]{MON}[ -](?P<Y>\d{4})[ :]{HMS}{FRAC}{ZONE})",
        "Date: Sun, 29 Nov 2026 02:21:00 GMT",
    ),
    _f(
        "syslog-rfc3164",
        "syslog RFC 3164 (rsyslog's traditional format, journalctl's short output)",
        r"(?<!\w)(?P<ts>" + _MON + r"\s+(?P<d>\d{1,2})\s+" + _HMS + _FRAC + r")(?![\d:])",
        "Nov 29 02:21:00 box rater[42]: tick",
        "no year",
        "space-padded day",
    ),
    _f(
        "logcat",
        "Android logcat (threadtime)",
        r"^(?P<ts>(?P<m>\d{2})-(?P<d>\d{2}) " + _HMS + r"\.(?P<f>\d{3}))\s+\d+\s+\d+ [VDIWEFA] ",
        "11-29 02:21:00.123  1702  2395 D WindowManager: tick",
        "no year",
    ),
    _f(
        "yymmdd-hhmmss",
        "YYMMDD HHMMSS (Hadoop HDFS)",
        r"^(?P<ts>(?P<y>\d{2})(?P<m>\d{2})(?P<d>\d{2}) (?P<H>\d{2})(?P<M>\d{2})(?P<S>\d{2}))"
        r"(?= )",
        "261129 022100 148 INFO dfs.DataNode: tick",
        "two-digit year",
        strong=False,
    ),
    _f(
        "yy/mm/dd",
        "yy/MM/dd HH:mm:ss (Spark, log4j %d{yy/MM/dd})",
        r"^(?P<ts>(?P<y>\d{2})/(?P<m>\d{2})/(?P<d>\d{2}) " + _HMS + r")(?= )",
        "26/11/29 02:21:00 INFO executor.Executor: tick",
        "two-digit year",
        strong=False,
    ),
    _f(
        "yyyymmdd-unpadded",
        "yyyyMMdd-H:m:s:SSS with unpadded fields (HealthApp)",
        r"^(?P<ts>(?P<Y>\d{4})(?P<m>\d{2})(?P<d>\d{2})-(?P<H>\d{1,2}):(?P<M>\d{1,2}):"
        r"(?P<S>\d{1,2}):(?P<ms>\d{1,3}))(?=\|| )",
        "20261129-2:21:0:6|Step_LSC|30002312|tick",
        "unpadded fields",
        "milliseconds after a colon",
        strong=False,
    ),
    _f(
        "bracket-mm.dd",
        "[MM.dd HH:mm:ss] (Proxifier)",
        r"^\[(?P<ts>(?P<m>\d{2})\.(?P<d>\d{2}) " + _HMS + r")\]",
        "[11.29 02:21:00] chrome.exe - proxy:5070 open through proxy",
        "no year",
        strong=False,
    ),
    _f(
        "epoch",
        "epoch seconds or milliseconds starting the line (squid, tcpdump -tt)",
        r"^\s*\[?(?P<e>\d{10}|\d{13})(?:\.(?P<f>\d{1,9}))?(?!\d)",
        "1795918860.250 42 198.18.0.9 TCP_MISS/200 612 GET http://x/",
        "zone-free",
    ),
    _f(
        "epoch-field",
        "epoch seconds or milliseconds in a leading field (BGL, HPC, Thunderbird)",
        r"^(?:\S+\s+){1,5}?(?P<e>\d{10}|\d{13})(?:\.(?P<f>\d{1,9}))?(?!\S)",
        "- 1795918860 2026.11.29 R02-M1-N0 RAS KERNEL INFO tick",
        "zone-free",
        strong=False,
    ),
)

BY_NAME = {f.name: f for f in FORMATS}
