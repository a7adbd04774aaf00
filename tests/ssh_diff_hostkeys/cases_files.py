"""Cases about files and settings: line endings and garbage, HostKeyAlias, jump hosts,
StrictHostKeyChecking."""

from __future__ import annotations

from tests.ssh_diff_hostkeys.case import (
    CONNECT,
    OTHER,
    REFUSE,
    TOFU_CHANGED,
    TOFU_NEW,
    TOFU_REVOKED,
    Case,
)

FILE_CASES: list[Case] = [
    # ------------------------------------------------------------ line endings, garbage
    Case("crlf", "line endings", lambda k: f"{k.addr} {k.ed}\r\n", CONNECT),
    Case(
        "crlf-with-comment",
        "line endings",
        lambda k: f"# c\r\n{k.addr} {k.ed} root@box\r\n",
        CONNECT,
    ),
    Case(
        "cr-only-host-on-second-line",
        "line endings",
        lambda k: f"{OTHER} {k.ed2}\r{k.addr} {k.ed}\r",
        REFUSE,
        security="CR-only line endings",
    ),
    Case(
        "cr-only-host-on-first-line",
        "line endings",
        lambda k: f"{k.addr} {k.ed}\r{OTHER} {k.ed2}\r",
        REFUSE,
    ),
    Case(
        "cr-only-comment-absorbs",
        "line endings",
        lambda k: f"{k.addr} {k.ed} c\r{OTHER} {k.ed2}\r",
        CONNECT,
    ),
    Case("no-final-newline", "line endings", lambda k: f"{k.addr} {k.ed}", CONNECT),
    Case("utf8-bom", "line endings", lambda k: f"\ufeff{k.addr} {k.ed}\n", REFUSE),
    Case(
        "garbage-lines",
        "garbage",
        lambda k: (
            "garbage\n\x01\x02 bin ary\nonlytwo fields\n"
            f"{k.addr} ssh-ed25519 AAAA!!!\n{k.addr} {k.ed}\n"
        ),
        CONNECT,
    ),
    Case(
        "garbage-only",
        "garbage",
        lambda k: f"{k.addr}\n{k.addr} ssh-ed25519\n{k.addr} ssh-ed25519 #x\n",
        REFUSE,
    ),
    Case("garbage-truncated-base64", "garbage", lambda k: f"{k.addr} {k.ed[:-4]}\n", REFUSE),
    Case(
        "garbage-bad-line-then-wrong",
        "garbage",
        lambda k: f"{k.addr} ssh-ed25519 AAAA\n{k.addr} {k.ed2}\n",
        REFUSE,
    ),
    # ------------------------------------------------------------ HostKeyAlias
    Case(
        "alias-plain", "HostKeyAlias", lambda k: f"web-alias {k.ed}\n", CONNECT, alias="web-alias"
    ),
    Case(
        "alias-no-port-added",
        "HostKeyAlias",
        lambda k: f"web-alias {k.ed}\n",
        CONNECT,
        port=2222,
        alias="web-alias",
        security="HostKeyAlias port",
    ),
    Case(
        "alias-bracketed-line-not-used",
        "HostKeyAlias",
        lambda k: f"[web-alias]:2222 {k.ed}\n",
        REFUSE,
        port=2222,
        alias="web-alias",
    ),
    Case(
        "alias-lower-cased",
        "HostKeyAlias",
        lambda k: f"web-alias {k.ed}\n",
        CONNECT,
        alias="Web-Alias",
    ),
    Case(
        "alias-hashed-capitalised",
        "HostKeyAlias",
        lambda k: f"{k.hash('web-alias')} {k.ed}\n",
        CONNECT,
        alias="Web-Alias",
    ),
    Case(
        "alias-hashed-as-written",
        "HostKeyAlias",
        lambda k: f"{k.hash('Web-Alias')} {k.ed}\n",
        REFUSE,
        alias="Web-Alias",
        security="HostKeyAlias case",
    ),
    Case(
        "alias-address-line-ignored",
        "HostKeyAlias",
        lambda k: f"{k.addr} {k.ed}\n",
        REFUSE,
        alias="web-alias",
    ),
    Case(
        "alias-wrong-key",
        "HostKeyAlias",
        lambda k: f"web-alias {k.ed2}\n{k.addr} {k.ed}\n",
        REFUSE,
        alias="web-alias",
    ),
    # ------------------------------------------------------------ jump hosts
    Case(
        "jump-both-known",
        "jump hosts",
        lambda k: f"{k.jaddr} {k.jed}\n{k.addr} {k.ed}\n",
        CONNECT,
        jump=True,
    ),
    Case("jump-unknown", "jump hosts", lambda k: f"{k.addr} {k.ed}\n", REFUSE, jump=True),
    Case(
        "jump-wrong-key",
        "jump hosts",
        lambda k: f"{k.jaddr} {k.ed2}\n{k.addr} {k.ed}\n",
        REFUSE,
        jump=True,
    ),
    Case(
        "jump-revoked",
        "jump hosts",
        lambda k: f"{k.jaddr} {k.jed}\n{k.addr} {k.ed}\n@revoked {k.jaddr} {k.jed}\n",
        REFUSE,
        jump=True,
    ),
    Case("jump-target-unknown", "jump hosts", lambda k: f"{k.jaddr} {k.jed}\n", REFUSE, jump=True),
    Case(
        "jump-target-wrong-key",
        "jump hosts",
        lambda k: f"{k.jaddr} {k.jed}\n{k.addr} {k.ed2}\n",
        REFUSE,
        jump=True,
    ),
    Case(
        "jump-target-port-plain-line",
        "jump hosts",
        lambda k: f"{k.jaddr} {k.jed}\n{k.addr} {k.ed}\n",
        CONNECT,
        port=2222,
        jump=True,
    ),
    Case(
        "jump-target-alias",
        "jump hosts",
        lambda k: f"{k.jaddr} {k.jed}\nweb-alias {k.ed}\n",
        CONNECT,
        alias="web-alias",
        jump=True,
    ),
    # ------------------------------------------------------------ StrictHostKeyChecking
    Case("strict-accept-new-unknown", "strictness", lambda k: "", CONNECT, strict="accept-new"),
    Case(
        "strict-accept-new-changed",
        "strictness",
        lambda k: f"{k.addr} {k.ed2}\n",
        REFUSE,
        strict="accept-new",
    ),
    Case("strict-ask-unknown", "strictness", lambda k: "", REFUSE, strict="ask"),
    Case(
        "strict-no-unknown", "strictness", lambda k: "", CONNECT, strict="no", documented=TOFU_NEW
    ),
    Case(
        "strict-no-changed",
        "strictness",
        lambda k: f"{k.addr} {k.ed2}\n",
        CONNECT,
        strict="no",
        documented=TOFU_CHANGED,
    ),
    Case(
        "strict-no-revoked",
        "strictness",
        lambda k: f"@revoked * {k.ed}\n",
        CONNECT,
        strict="no",
        documented=TOFU_REVOKED,
    ),
    Case("strict-no-known", "strictness", lambda k: f"{k.addr} {k.ed}\n", CONNECT, strict="no"),
]
