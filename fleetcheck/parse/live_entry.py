"""Values of the live hash, read (pure): a JSON object naming when the match started and,
optionally, which host runs it. A start that is missing or unreadable is a problem, never a
guess. The fast path (one compiled regex for the usual shape) must read every value exactly as
json does; tests prove it against `read_entry_json`."""

from __future__ import annotations

import json
import re
from datetime import tzinfo
from typing import Any

from fleetcheck.parse.instant import MS_THRESHOLD, parse_instant

OWNER_MAX = 64  # characters of an owner name we keep

Reading = tuple[float | None, str | None, str | None]  # (started_at, problem, owner)
# a value the JSON parser cannot take (nested too deep): one entry unreadable, never the
# whole scan failing (one worker could otherwise hide every zombie)
UNREADABLE = "unreadable: nested too deep for the JSON parser"

_decode_json = json.JSONDecoder().decode
_MISSING = object()


def read_entry_json(
    value: bytes | str,
    started_field: str = "started_at",
    owner_field: str | None = "host",
    assume_tz: tzinfo | None = None,
) -> Reading:
    """The reference reading of one value, through json. The fast path must agree with it."""
    try:
        doc = _decode_json(value.decode("utf-8") if isinstance(value, bytes) else value)
    except (ValueError, UnicodeDecodeError):
        return None, "not JSON", None
    except RecursionError:  # nested deeper than the parser goes: this entry alone
        return None, UNREADABLE, None
    if type(doc) is not dict:
        return None, f"not a JSON object ({type(doc).__name__})", None
    owner = _owner(doc.get(owner_field)) if owner_field else None
    raw = doc.get(started_field, _MISSING)
    if raw is _MISSING:
        return None, f"no {started_field}", owner
    return _started(raw, owner, started_field, assume_tz)


def _owner(raw: object) -> str | None:
    if type(raw) is str and raw:
        return raw.strip()[:OWNER_MAX] or None
    return None


def _started(raw: Any, owner: str | None, started_field: str, assume_tz: tzinfo | None) -> Reading:
    if (type(raw) is float or type(raw) is int) and 0 <= raw < MS_THRESHOLD:
        return float(raw), None, owner  # plain epoch seconds: the common case, no NaN here
    try:
        return parse_instant(raw, assume_tz), None, owner
    except ValueError as e:  # parse_instant also refuses ints too large for a float
        return None, f"{started_field}: {e}", owner


# The fast path. A value written the usual way (one flat JSON object of plain ASCII strings,
# numbers, true/false/null, with the start as a number or a string) is read by one compiled
# regex instead of json; anything else falls back to json. The regex accepts only valid JSON
# whose decoding is known exactly: strings without escapes, control characters or non-ASCII
# bytes (their bytes are their text), nothing nested, the start key exactly once (the other
# keys exclude it), the owner key at most once before and once after it (json keeps the last,
# so does `finish`), JSON's own whitespace and number grammar, no NaN or Infinity.
_WS = rb"[ \t\n\r]*"
_CHARS = rb"[\x20\x21\x23-\x5b\x5d-\x7e]"  # printable ASCII except the quote and the backslash
_STR = rb'"' + _CHARS + rb'*"'
_DIGITS = rb"(?:0|[1-9][0-9]{0,30})(?:\.[0-9]{1,30})?(?:[eE][-+]?[0-9]{1,3})?"
_SIMPLE_NAME = re.compile(_CHARS + rb"+")
# line_pattern's and Columns' number: possessive (a valid line never needs a digit back)
_LINE_DIGITS = rb"(?:0|[1-9][0-9]{0,30}+)(?:\.[0-9]{1,30}+)?+(?:[eE][-+]?[0-9]{1,3}+)?+"
# field names Columns takes: no quote, colon, comma, brace or space, so every one of those
# in a value of its shape is the shape's own
_COLUMN_NAME = re.compile(rb"[A-Za-z0-9_.-]+")


def fast_pattern(started_field: str, owner_field: str | None) -> re.Pattern[bytes] | None:
    """The regex of the common value shape; None when a field name cannot be matched byte for
    byte (it would need escapes or is not ASCII). Groups: owner before the start, the start
    as a number (never negative: json reads -0 as the int 0), as a string, owner after."""
    if owner_field == started_field:
        return None
    names = []
    for name in (started_field, owner_field):
        if name is None:
            continue
        raw = name.encode("utf-8")
        if not _SIMPLE_NAME.fullmatch(raw):
            return None
        names.append(re.escape(raw))
    not_ours = b"".join(rb"(?!" + n + rb'")' for n in names)
    other = rb'"' + not_ours + _CHARS + rb'*"' + _WS + rb":" + _WS
    other += rb"(?:" + _STR + rb"|-?" + _DIGITS + rb"|true|false|null)"
    sep = _WS + rb"," + _WS
    others = rb"(?:" + sep + other + rb")*"
    start = rb'"' + names[0] + rb'"' + _WS + rb":" + _WS
    start += rb"(?:(" + _DIGITS + rb')|"(' + _CHARS + rb'*)")'
    if owner_field:
        owner = rb'"' + names[1] + rb'"' + _WS + rb":" + _WS + rb'"(' + _CHARS + rb'*)"'
    else:
        owner = rb"(?!)()"  # never matches; keeps the group numbers
    # others, then an owner (json keeps the last one), others, the start, others, an owner
    body = b"".join(
        [rb"(?:", other, sep, rb")*", rb"(?:", owner, others, sep, rb")?"]
        + [start, others, rb"(?:", sep, owner, others, rb")?"]
    )
    return re.compile(_WS + rb"\{" + _WS + body + _WS + rb"\}" + _WS)


def line_pattern(started_field: str, owner_field: str | None) -> re.Pattern[bytes] | None:
    """The narrowest common shape, run by findall over a whole reply's values joined by
    newlines: `{"started_at": <number>, "host": "<text>"}`, the owner optional, spaces after
    `:` and `,` optional (json.dumps and JSON.stringify). Two groups: the number and the
    owner. A line of any other shape still matches, with both groups empty (the caller reads
    it in full). The language is a subset of fast_pattern's, with a non-empty owner, so an
    empty group always means it did not take part."""
    if fast_pattern(started_field, owner_field) is None:
        return None
    start = re.escape(started_field.encode())
    if owner_field:
        owner = rb'(?:, ?"' + re.escape(owner_field.encode()) + rb'": ?"(' + _CHARS + rb'++)")?'
    else:
        owner = rb"(?:(?!)(x))?"  # never takes part; keeps the group
    shape = rb'\{"' + start + rb'": ?(' + _LINE_DIGITS + rb")" + owner + rb"\}"
    return re.compile(rb"^(?:" + shape + rb")$|^.*$", re.MULTILINE)


# json.loads skips these, then reads a value only from one of these bytes or words: a value
# starting otherwise (or empty) is not JSON
_JSON_SPACE = b" \t\n\r"
_JSON_FIRST = frozenset(bytes([c]) for c in b'{["-0123456789')
_JSON_WORDS = (b"null", b"true", b"false", b"NaN", b"Infinity")
_NOT_JSON: Reading = (None, "not JSON", None)


class Columns:
    """The exact writer shapes `{"started_at": <number>, "host": "<text>"}` (json.dumps's
    spacing, or JSON.stringify's none), cut out of a whole reply at once: one `finditer` over
    the newline-joined values proves the lines of the shape and finds the few others, then
    one `replace` and one `split` cut them into number, owner, number, owner, ... The cut is
    exact: neither a number, an owner (printable ASCII without quote or backslash) nor a
    field name (letters, digits, `_.-`) holds a separator, so they occur only where the shape
    puts them."""

    ODD_MAX = 32  # more lines of other shapes than this in one reply: not this reader's job

    def __init__(self, started_field: str, owner_field: str, colon: bytes, comma: bytes) -> None:
        start, owner = re.escape(started_field.encode()), re.escape(owner_field.encode())
        line = rb'\{"' + start + rb'"' + colon + _LINE_DIGITS + comma + rb'"' + owner + rb'"'
        line += colon + rb'"' + _CHARS + rb'*+"\}'
        # a run of lines of the shape, then one line of another shape (group 1) or the end:
        # it matches (maybe empty) wherever it starts, so finditer's matches tile the text
        self.runs = re.compile(rb"(?:" + line + rb"\n)*+(?:([^\n]*+)\n)?")
        self.prefix = b'{"' + started_field.encode() + b'"' + colon
        self.sep = comma + b'"' + owner_field.encode() + b'"' + colon + b'"'
        self.next = b'"}\n' + self.prefix

    def split(
        self, values: list[bytes], joined: bytes
    ) -> tuple[list[int], list[bytes], list[bytes]] | None:
        """(indexes of the values not of the shape, the others' numbers, their owners), or
        None when more than ODD_MAX are not. `joined`: the values joined by newlines, none
        holding a newline (so lines are values)."""
        odd: list[int] = []
        line, at, text = 0, 0, joined + b"\n"
        for m in self.runs.finditer(text):
            start = m.start(1)
            if start < 0:
                break
            line += text.count(b"\n", at, start)
            odd.append(line)
            line, at = line + 1, m.end()
            if len(odd) > self.ODD_MAX:
                return None
        if odd:
            values = list(values)
            for i in reversed(odd):
                del values[i]
            if not values:
                return odd, [], []
            joined = b"\n".join(values)
        parts = joined.replace(self.next, self.sep).split(self.sep)
        if len(parts) != 2 * len(values):  # cannot happen: the lines are values, proven
            return None
        parts[0] = parts[0][len(self.prefix) :]
        parts[-1] = parts[-1][:-2]
        return odd, parts[0::2], parts[1::2]


def columns(started_field: str, owner_field: str | None) -> tuple[Columns, ...]:
    """The whole-reply shapes for these field names (none without an owner field or when a
    name is not plain: letters, digits, `_.-`): json.dumps's `": "`/`", "` first, then the
    compact `":"`/`","`."""
    if owner_field is None or owner_field == started_field:
        return ()
    if not all(_COLUMN_NAME.fullmatch(n.encode("utf-8")) for n in (started_field, owner_field)):
        return ()
    return (
        Columns(started_field, owner_field, b": ", b", "),
        Columns(started_field, owner_field, b":", b","),
    )


class EntryReader:
    """Reads live-hash values exactly as read_entry_json does, through the fast path where a
    value has the common shape. One per scan: it memoises owner names."""

    def __init__(
        self,
        started_field: str = "started_at",
        owner_field: str | None = "host",
        assume_tz: tzinfo | None = None,
    ) -> None:
        self.started_field = started_field
        self.owner_field = owner_field or None
        self.assume_tz = assume_tz
        self.pattern = fast_pattern(started_field, self.owner_field)
        self.lines = line_pattern(started_field, self.owner_field)
        self.columns = columns(started_field, self.owner_field)
        self._owners: dict[bytes | None, str | None] = {None: None}

    def __call__(self, value: bytes | str) -> Reading:
        got = self.fast(value)
        if got is None:
            if type(value) is bytes:
                head = value.lstrip(_JSON_SPACE)[:8]
                if head[:1] not in _JSON_FIRST and not head.startswith(_JSON_WORDS):
                    return _NOT_JSON  # json's own verdict, without building its exception
            return read_entry_json(value, self.started_field, self.owner_field, self.assume_tz)
        return got

    def fast(self, value: bytes | str) -> Reading | None:
        """The fast path alone: None when the value does not have the common shape."""
        if self.pattern is None or type(value) is not bytes:
            return None
        m = self.pattern.fullmatch(value)
        return None if m is None else self.finish(*m.groups())

    def owner_of(self, raw: bytes | None) -> str | None:
        """The owner a matched owner string names (its bytes are its text), memoised."""
        try:
            return self._owners[raw]
        except KeyError:
            assert raw is not None
            owner = _owner(raw.decode("ascii"))
            if len(self._owners) < 4096:
                self._owners[raw] = owner
            return owner

    def finish(
        self,
        owner_before: bytes | None,
        number: bytes | None,
        text: bytes | None,
        owner_after: bytes | None,
    ) -> Reading:
        """The reading of a matched value, from the regex groups."""
        owner = self.owner_of(owner_after if owner_after is not None else owner_before)
        raw: Any
        if number is not None:  # json's type: an int unless there is a fraction or exponent
            raw = int(number) if number.isascii() and number.isdigit() else float(number)
        else:
            assert text is not None
            raw = text.decode("ascii")
        return _started(raw, owner, self.started_field, self.assume_tz)
