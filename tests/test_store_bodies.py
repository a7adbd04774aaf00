"""A stored row's body: `store.recorded_of` is `recorded(result.to_dict())`, and
`store.body_encoder` writes the text `json.dumps` writes, for any value a row can hold."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetcheck.core.model import Result, Status
from fleetcheck.rounds import store

_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(),
    st.just(datetime(2026, 11, 29, tzinfo=UTC)),
    st.just(Path("/var/log/w.log")),
)
_value = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.text(max_size=8), _value, max_size=6))
def test_the_encoder_writes_what_json_dumps_writes(body: dict[str, Any]) -> None:
    want = json.dumps(body, separators=(",", ":"), default=str)
    encode = store.body_encoder()
    assert encode(body) == want
    assert encode(body) == want  # and again: one encoder for a whole round


def test_the_encoder_refuses_a_circular_value_as_json_does() -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    encode = store.body_encoder()
    with pytest.raises(ValueError, match="Circular reference"):
        encode({"metrics": loop})
    assert encode({"a": [1, 2]}) == '{"a":[1,2]}'  # the next body as ever


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(list(Status)),
    st.one_of(st.none(), st.text(max_size=6)),
    st.dictionaries(st.text(max_size=5), st.integers() | st.floats() | st.text(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
    st.one_of(st.none(), st.text(max_size=6)),
)
def test_a_body_from_a_result_is_the_recorded_row(
    status: Status, host: str | None, metrics: dict[str, Any], limits: dict[str, Any],
    since: str | None,
) -> None:  # fmt: skip
    row = Result(
        "clients", host, status, "3 connections", metrics=metrics, limits=limits,
        evidence={"lines": ["x"]}, since=since, headline="n",
    )  # fmt: skip
    got = store.recorded_of(row)
    assert got == store.recorded(row.to_dict())
    assert list(got) == list(store.recorded(row.to_dict()))
