"""Issue 28 item 4: the [broker] keys of a Sentinel deployment with TLS and its own ACL user,
each misuse one error naming the key."""

from __future__ import annotations

import pytest

from fleetcheck.config import BrokerConfig, InvalidValue

S = {"sentinels": ("127.0.0.1:26379",), "service": "mymaster"}


@pytest.mark.parametrize(
    "kw, key, message",
    [
        ({"url": "redis://h", "tls": True}, "tls", "goes with sentinels"),
        ({"url": "redis://h", "sentinel_password_env": "X"}, "sentinel_password_env", "sentinels"),
        ({**S, "sentinel_username": "u"}, "sentinel_username", "goes with sentinel_password_env"),
        ({**S, "ca_file": "/ca"}, "ca_file", "tls = true with sentinels"),
    ],
)
def test_misuse_names_the_key(kw: dict, key: str, message: str) -> None:
    with pytest.raises(InvalidValue) as info:
        BrokerConfig(**kw)
    assert info.value.key == key and message in info.value.message


def test_sentinel_tls_and_acl_user_accepted() -> None:
    cfg = BrokerConfig(**S, tls=True, ca_file="/ca", sentinel_username="u",
                       sentinel_password_env="SP")  # fmt: skip
    assert cfg.tls and cfg.sentinel_username == "u"
