"""`normalise_ip`'s IPv4 shortcut against the implementation it replaced (ipaddress), on
generated text. CLIENT LIST has one reader now, held to the field-by-field reading in
test_clientlist."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fleetcheck.parse import clientlist


# ---------------------------------------------------------------- addresses
def normalise_ip_by_ipaddress(text: str) -> str:
    """normalise_ip before its IPv4 fast path and cache: ipaddress for every address."""
    import ipaddress

    text = text.strip().strip("[]")
    try:
        ip = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return text
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


@settings(max_examples=1000, deadline=None)
@given(
    st.one_of(
        st.text(st.sampled_from("0123456789.:abcdefx[]% \x00１"), max_size=20),
        st.tuples(*[st.integers(0, 300)] * 4).map(lambda t: ".".join(map(str, t))),
        st.ip_addresses().map(str),
    )
)
def test_normalise_ip_equals_ipaddress_on_any_text(text: str) -> None:
    assert clientlist.normalise_ip(text) == normalise_ip_by_ipaddress(text)
