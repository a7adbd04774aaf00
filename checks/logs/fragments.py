"""The shell fragments the logs check sends in each host's one gathered exec: a file's stat
and tail, a journal query compacted on the host, the host's zone for `tz = "auto"`.

Kept apart from the judging: what runs on the host is POSIX sh with every output bounded, and
reads best next to nothing else. The parsers of what they print are parse/logtail.py and
parse/journal.py."""

from __future__ import annotations

from shlex import quote

from fleetcheck.core.hostfacts import LogSpec


def log_fragment(spec: LogSpec) -> str:
    """POSIX sh printing `stat MTIME SIZE` then `tail` and the last `tail_bytes` of the file,
    or one `state ...` line. The path is shell-quoted; GNU and BSD stat are both tried."""
    assert spec.path is not None
    p = quote(spec.path)
    n = int(spec.tail_bytes)
    return (
        "LC_ALL=C; export LC_ALL\n"
        f"p={p}\n"
        "if s=$(stat -L -c '%Y %s' -- \"$p\" 2>&1); then :\n"
        "elif s2=$(stat -L -f '%m %z' -- \"$p\" 2>/dev/null); then s=$s2\n"
        "else printf 'state error %s\\n' \"$s\" | head -c 400; exit 0; fi\n"
        "if [ ! -f \"$p\" ]; then echo 'state not-regular'; exit 0; fi\n"
        "if [ ! -r \"$p\" ]; then echo 'state denied'; exit 0; fi\n"
        "printf 'stat %s\\ntail\\n' \"$s\"\n"
        f'tail -c {n} -- "$p"'
    )


JOURNAL_BYTES_PER_ENTRY = 4096  # bound on what one journal query may print, per entry asked
JOURNAL_MAX_BYTES = 2 * 1024 * 1024


# On the host, awk keeps the newest entry whole (its MESSAGE is the evidence), shrinks each
# other error entry (PRIORITY <= 3) to `e REALTIME PRIORITY`, drops the rest and ends with
# `n COUNT`: a healthy journal costs the client two lines, not ~350 bytes per entry. The
# anchors match only a key, never text inside a JSON string (where quotes are escaped).
_JOURNAL_COMPACT = (
    "awk 'n==0 && /^[{]/ {print; n=1; next} "
    '/^[{].*[}]$/ {n++; p=""; '
    'if (match($0, /[{,]"PRIORITY":"[0-9]"/)) p=substr($0, RSTART+13, 1); '
    'if (p != "" && p+0 <= 3 && match($0, /[{,]"__REALTIME_TIMESTAMP":"[0-9]+"/)) '
    'print "e " substr($0, RSTART+25, RLENGTH-26) " " p; next} '
    '/^[{]/ {next} {print} END {print "n " n+0}\''
)


def journal_fragment(spec: LogSpec) -> str:
    """POSIX sh: the newest `entries` matching entries, newest first, as JSON (PRIORITY and
    MESSAGE only), stderr merged, then `@@rc N`, compacted by _JOURNAL_COMPACT; when none
    matched, the whole journal's newest entry after `@@any` (an empty journal vs a unit that
    never logged). Newest first under `head -c`, so a cut loses the oldest. systemd before 236
    lacks --output-fields: asked again without."""
    args = ["--no-pager", "-r", "-o", "json"]
    if spec.journal_dir is not None:
        args.append("--directory=" + spec.journal_dir)
    select = []
    if spec.journal is not None:
        select += ["-u", spec.journal]
    select += list(spec.journal_match)
    q = " ".join(quote(a) for a in args)
    sel = " ".join(quote(a) for a in select)
    limit = min(spec.journal_entries * JOURNAL_BYTES_PER_ENTRY, JOURNAL_MAX_BYTES)
    return (
        "LC_ALL=C; export LC_ALL\n"
        "command -v journalctl >/dev/null 2>&1 || { echo 'state no-journalctl'; exit 0; }\n"
        "f=--output-fields=PRIORITY,MESSAGE\n"
        f'jn() {{ {{ journalctl {q} $f "$@" 2>&1; echo "@@rc $?"; }} | head -c {limit}; }}\n'
        f"out=$(jn -n {int(spec.journal_entries)} {sel})\n"
        'case "$out" in *"unrecognized option"*output-fields*) '
        f"f=; out=$(jn -n {int(spec.journal_entries)} {sel});; esac\n"
        f"printf '%s\\n' \"$out\" | {_JOURNAL_COMPACT}\n"
        'case "$out" in "{"*|*"\n{"*) ;; *) echo @@any; jn -n 1 ;; esac'
    )


ZONE_FRAGMENT = (
    "LC_ALL=C; export LC_ALL\n"
    "printf 'TZ=%s\\n' \"${TZ-}\"\n"
    "printf 'offset=%s\\n' \"$(date +%z 2>/dev/null)\"\n"
    "lt=$(readlink /etc/localtime 2>/dev/null); printf 'localtime=%s\\n' \"$lt\"\n"
    "et=''; [ -r /etc/timezone ] && et=$(head -n 1 /etc/timezone 2>/dev/null | head -c 100)\n"
    "printf 'etc_timezone=%s\\n' \"$et\"\n"
    'if [ -z "${TZ-}$lt$et" ] && command -v timedatectl >/dev/null 2>&1; then\n'
    "  printf 'timedatectl=%s\\n' \"$(timedatectl show -p Timezone --value 2>/dev/null)\"\n"
    "fi"
)
