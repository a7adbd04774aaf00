"""The harness's cases: a known_hosts file (a template over fleet.Keys), the target host,
port, HostKeyAlias, jump host and StrictHostKeyChecking, and what the real OpenSSH 9.2
client does with them (asserted on every run, so the corpus cannot drift from the oracle).

Scenarios from OpenSSH's regress/cert-hostkey.sh, knownhosts.sh and keygen-knownhosts.sh,
sshd(8)'s SSH_KNOWN_HOSTS FILE FORMAT and the rules of hostfile.c / sshconnect.c /
sshconnect2.c (check_host_key, order_hostkeyalgs). `documented` marks a case where
fleetcheck refuses on purpose although ssh connects (it is strict: no TOFU); docs/ssh.md
lists each one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tests.ssh_diff_hostkeys.fleet import Keys

CONNECT, REFUSE = "connect", "refuse"
OTHER = "198.18.254.254"  # a name no lab host has


@dataclass(frozen=True)
class Case:
    id: str
    family: str
    known_hosts: Callable[[Keys], str]
    openssh: str  # what `ssh -o BatchMode=yes` does: CONNECT or REFUSE
    target: str = "multi"
    port: int = 22
    alias: str | None = None
    jump: bool = False
    strict: str = "yes"
    documented: str | None = None  # why fleetcheck refuses where ssh connects
    security: str | None = None  # the issue-23 security item this case pins


TOFU_NEW = "an unknown key is never trusted on first sight (no TOFU; `accept_new` adds it)"
TOFU_CHANGED = "a changed key is CRIT (ssh connects with password auth and forwarding off)"
TOFU_REVOKED = "a @revoked key is CRIT (ssh connects with password auth and forwarding off)"
CASES: list[Case] = [
    # ------------------------------------------------------------ plain
    Case("plain-ed25519", "plain", lambda k: f"{k.addr} {k.ed}\n", CONNECT),
    Case("plain-ecdsa-only", "plain", lambda k: f"{k.addr} {k.ec}\n", CONNECT),
    Case("plain-rsa-only", "plain", lambda k: f"{k.addr} {k.rsa}\n", CONNECT),
    Case("plain-wrong-ed25519", "plain", lambda k: f"{k.addr} {k.ed2}\n", REFUSE),
    Case("plain-empty-file", "plain", lambda k: "", REFUSE),
    Case("plain-other-host-only", "plain", lambda k: f"{OTHER} {k.ed}\n", REFUSE),
    Case("plain-in-name-list", "plain", lambda k: f"web1,{k.addr},web2 {k.ed}\n", CONNECT),
    Case("plain-comment-after-key", "plain", lambda k: f"{k.addr} {k.ed} root@box\n", CONNECT),
    Case("plain-leading-blanks-tabs", "plain", lambda k: f" \t{k.addr}\t{k.ed}\n", CONNECT),
    Case(
        "plain-type-name-upper-case",
        "plain",
        lambda k: f"{k.addr} SSH-ED25519 {k.ed.split()[1]}\n",
        REFUSE,
    ),
    Case(
        "plain-type-disagrees-with-blob",
        "plain",
        lambda k: f"{k.addr} ecdsa-sha2-nistp256 {k.ed.split()[1]}\n",
        REFUSE,
    ),
    Case(
        "plain-two-same-type-second-right",
        "plain",
        lambda k: f"{k.addr} {k.ed2}\n{k.addr} {k.ed}\n",
        CONNECT,
    ),
    Case(
        "plain-trailing-data-in-blob", "plain", lambda k: f"{k.addr} {k.trailing(k.ed)}\n", REFUSE
    ),
    # ------------------------------------------------------------ hashed
    Case("hashed", "hashed", lambda k: f"{k.hash(k.addr)} {k.ed}\n", CONNECT),
    Case("hashed-wrong-key", "hashed", lambda k: f"{k.hash(k.addr)} {k.ed2}\n", REFUSE),
    Case("hashed-other-name", "hashed", lambda k: f"{k.hash(OTHER)} {k.ed}\n", REFUSE),
    Case(
        "hashed-with-port",
        "hashed",
        lambda k: f"{k.hash(f'[{k.addr}]:2222')} {k.ed}\n",
        CONNECT,
        port=2222,
    ),
    Case("hashed-in-a-list", "hashed", lambda k: f"{k.hash(k.addr)},web1 {k.ed}\n", REFUSE),
    Case(
        "hashed-bad-salt-skipped",
        "hashed",
        lambda k: f"|1|!!!|x= {k.ed2}\n{k.addr} {k.ed}\n",
        CONNECT,
    ),
    Case(
        "hashed-revoked",
        "hashed",
        lambda k: f"{k.addr} {k.ed}\n@revoked {k.hash(k.addr)} {k.ed}\n",
        REFUSE,
    ),
    # ------------------------------------------------------------ ports
    Case("port-bracketed", "ports", lambda k: f"[{k.addr}]:2222 {k.ed}\n", CONNECT, port=2222),
    Case(
        "port-plain-line-non-default-port",
        "ports",
        lambda k: f"{k.addr} {k.ed}\n",
        CONNECT,
        port=2222,
    ),
    Case("port-plain-line-wrong-key", "ports", lambda k: f"{k.addr} {k.ed2}\n", REFUSE, port=2222),
    Case(
        "port-bracketed-wrong-plain-right",
        "ports",
        lambda k: f"[{k.addr}]:2222 {k.ed2}\n{k.addr} {k.ed}\n",
        REFUSE,
        port=2222,
    ),
    Case("port-other-port", "ports", lambda k: f"[{k.addr}]:2200 {k.ed}\n", REFUSE, port=2222),
    Case("port-bracketed-22", "ports", lambda k: f"[{k.addr}]:22 {k.ed}\n", REFUSE),
    Case(
        "port-plain-ecdsa-line-non-default",
        "ports",
        lambda k: f"{k.addr} {k.ec}\n",
        REFUSE,
        port=2222,
    ),
    Case(
        "port-revoked-for-bare-name-only",
        "ports",
        lambda k: f"[{k.addr}]:2222 {k.ed}\n@revoked {k.addr} {k.ed}\n",
        CONNECT,
        port=2222,
    ),
    Case(
        "port-plain-rsa-line-non-default",
        "ports",
        lambda k: f"{k.addr} {k.rsa}\n{k.addr} {k.ed}\n",
        CONNECT,
        port=2222,
    ),
    # ------------------------------------------------------------ wildcards
    Case("wild-star", "wildcards", lambda k: f"198.18.* {k.ed}\n", CONNECT),
    Case("wild-question-mark", "wildcards", lambda k: f"{k.addr[:-1]}? {k.ed}\n", CONNECT),
    Case(
        "wild-bracketed-question",
        "wildcards",
        lambda k: f"[{k.addr[:-1]}?]:2222 {k.ed}\n",
        CONNECT,
        port=2222,
    ),
    Case(
        "wild-bracketed-star",
        "wildcards",
        lambda k: f"[198.18.*]:2222 {k.ed}\n",
        CONNECT,
        port=2222,
    ),
    Case(
        "wild-star-non-default-port",
        "wildcards",
        lambda k: f"198.18.* {k.ed}\n",
        CONNECT,
        port=2222,
    ),
    Case("wild-everything", "wildcards", lambda k: f"* {k.ed}\n", CONNECT),
    Case("wild-no-match", "wildcards", lambda k: f"10.* {k.ed}\n", REFUSE),
    Case("wild-char-class-is-literal", "wildcards", lambda k: f"198.18.[0-9]* {k.ed}\n", REFUSE),
    Case("wild-star-wrong-key", "wildcards", lambda k: f"198.18.* {k.ed2}\n", REFUSE),
    # ------------------------------------------------------------ negation
    Case("neg-excludes-host", "negation", lambda k: f"198.18.*,!{k.addr} {k.ed}\n", REFUSE),
    Case("neg-excludes-other", "negation", lambda k: f"198.18.*,!{OTHER} {k.ed}\n", CONNECT),
    Case("neg-alone", "negation", lambda k: f"!{k.addr} {k.ed}\n", REFUSE),
    Case("neg-first", "negation", lambda k: f"!{k.addr},198.18.* {k.ed}\n", REFUSE),
    Case(
        "neg-hides-wrong-line",
        "negation",
        lambda k: f"*,!{k.addr} {k.ed2}\n{k.addr} {k.ed}\n",
        CONNECT,
    ),
    Case("neg-wildcard", "negation", lambda k: f"{k.addr},!198.18.* {k.ed}\n", REFUSE),
    # ------------------------------------------------------------ several keys, order
    Case(
        "order-rsa-right-ed25519-wrong",
        "key order",
        lambda k: f"{k.addr} {k.rsa}\n{k.addr} {k.ed2}\n",
        REFUSE,
        security="preference order",
    ),
    Case(
        "order-ed25519-wrong-rsa-right",
        "key order",
        lambda k: f"{k.addr} {k.ed2}\n{k.addr} {k.rsa}\n",
        REFUSE,
    ),
    Case(
        "order-ed25519-right-rsa-wrong",
        "key order",
        lambda k: f"{k.addr} {k.ed}\n{k.addr} {k.rsa2}\n",
        CONNECT,
    ),
    Case(
        "order-rsa-wrong-ed25519-right",
        "key order",
        lambda k: f"{k.addr} {k.rsa2}\n{k.addr} {k.ed}\n",
        CONNECT,
    ),
    Case(
        "order-ecdsa-right-rsa-wrong",
        "key order",
        lambda k: f"{k.addr} {k.ec}\n{k.addr} {k.rsa2}\n",
        CONNECT,
    ),
    Case(
        "order-rsa-wrong-ecdsa-right",
        "key order",
        lambda k: f"{k.addr} {k.rsa2}\n{k.addr} {k.ec}\n",
        CONNECT,
        security="preference order (false CRIT)",
    ),
    Case(
        "order-rsa-right-ecdsa-wrong",
        "key order",
        lambda k: f"{k.addr} {k.rsa}\n{k.addr} {k.ec2}\n",
        REFUSE,
    ),
    Case(
        "order-all-three-right",
        "key order",
        lambda k: f"{k.addr} {k.rsa}\n{k.addr} {k.ec}\n{k.addr} {k.ed}\n",
        CONNECT,
    ),
    Case(
        "order-all-three-ed25519-wrong",
        "key order",
        lambda k: f"{k.addr} {k.rsa}\n{k.addr} {k.ec}\n{k.addr} {k.ed2}\n",
        REFUSE,
    ),
    Case(
        "order-ecdsa-and-rsa-right",
        "key order",
        lambda k: f"{k.addr} {k.rsa}\n{k.addr} {k.ec}\n",
        CONNECT,
    ),
    # ------------------------------------------------------------ markers
    Case(
        "marker-cert-authority-upper-case",
        "markers",
        lambda k: f"@CERT-AUTHORITY * {k.ca}\n",
        REFUSE,
        target="c_ok",
        security="marker case",
    ),
    Case(
        "marker-revoked-upper-case",
        "markers",
        lambda k: f"{k.addr} {k.ed}\n@REVOKED * {k.ed}\n",
        CONNECT,
    ),
    Case("marker-unknown-skips-line", "markers", lambda k: f"@bogus {k.addr} {k.ed}\n", REFUSE),
    Case(
        "marker-unknown-other-lines-fine",
        "markers",
        lambda k: f"@bogus x y\n{k.addr} {k.ed}\n",
        CONNECT,
    ),
    Case(
        "marker-two-markers",
        "markers",
        lambda k: f"@revoked @cert-authority * {k.ed}\n{k.addr} {k.ed}\n",
        CONNECT,
    ),
    Case(
        "marker-tab-separated",
        "markers",
        lambda k: f"@revoked\t*\t{k.ed}\n{k.addr} {k.ed}\n",
        CONNECT,
    ),
    Case(
        "marker-cert-authority-for-plain-host",
        "markers",
        lambda k: f"@cert-authority * {k.ed}\n",
        REFUSE,
    ),
    # ------------------------------------------------------------ revoked
    Case("revoked-key", "revoked", lambda k: f"{k.addr} {k.ed}\n@revoked * {k.ed}\n", REFUSE),
    Case("revoked-key-only-line", "revoked", lambda k: f"@revoked {k.addr} {k.ed}\n", REFUSE),
    Case(
        "revoked-first-line-of-a-type",
        "revoked",
        # a type whose first line is @revoked is not preferred (order_hostkeyalgs): the
        # server is asked for RSA first and its RSA key is fine
        lambda k: f"{k.addr} {k.ed}\n{k.addr} {k.rsa}\n@revoked * {k.ed}\n",
        CONNECT,
    ),
    Case(
        "revoked-other-type-fine",
        "revoked",
        lambda k: f"{k.addr} {k.rsa}\n@revoked * {k.ed}\n",
        CONNECT,
    ),
    Case(
        "revoked-unlisted-type-fine",
        "revoked",
        lambda k: f"{k.addr} {k.ed}\n@revoked * {k.rsa}\n",
        CONNECT,
    ),
    Case(
        "revoked-pattern-elsewhere",
        "revoked",
        lambda k: f"{k.addr} {k.ed}\n@revoked 10.* {k.ed}\n",
        CONNECT,
    ),
    Case(
        "revoked-certified-key",
        "revoked",
        lambda k: f"@cert-authority * {k.ca}\n@revoked * {k.ck('c_ok')}\n",
        REFUSE,
        target="c_ok",
    ),
    Case(
        "revoked-ca",
        "revoked",
        lambda k: f"@cert-authority * {k.ca}\n@revoked * {k.ca}\n",
        REFUSE,
        target="c_ok",
    ),
    Case(
        "revoked-ca-without-cert-authority",
        "revoked",
        lambda k: f"{k.c('c_ok')} {k.ck('c_ok')}\n@revoked * {k.ca}\n",
        REFUSE,
        target="c_ok",
        security="revoked CA without cert-authority",
    ),
    Case(
        "revoked-ca-nothing-else",
        "revoked",
        lambda k: f"@revoked * {k.ca}\n",
        REFUSE,
        target="c_ok",
    ),
    # ------------------------------------------------------------ certificates
    Case(
        "cert-valid",
        "certificates",
        lambda k: f"@cert-authority * {k.ca}\n",
        CONNECT,
        target="c_ok",
    ),
    Case(
        "cert-ca-pattern-list",
        "certificates",
        lambda k: f"@cert-authority 10.*,198.18.* {k.ca}\n",
        CONNECT,
        target="c_ok",
    ),
    Case(
        "cert-no-principals",
        "certificates",
        lambda k: f"@cert-authority * {k.ca}\n",
        CONNECT,
        target="c_noprinc",
    ),
    Case(
        "cert-expired",
        "certificates",
        lambda k: f"@cert-authority * {k.ca}\n",
        REFUSE,
        target="c_expired",
    ),
    Case(
        "cert-expired-plain-listed",
        "certificates",
        lambda k: f"@cert-authority * {k.ca}\n{k.c('c_expired')} {k.ck('c_expired')}\n",
        CONNECT,
        target="c_expired",
    ),
    Case(
        "cert-not-yet-valid",
        "certificates",
        lambda k: f"@cert-authority * {k.ca}\n",
        REFUSE,
        target="c_future",
    ),
    Case(
        "cert-not-yet-valid-plain-listed",
        "certificates",
        lambda k: f"@cert-authority * {k.ca}\n{k.c('c_future')} {k.ck('c_future')}\n",
        CONNECT,
        target="c_future",
    ),
    Case(
        "cert-wrong-principal",
        "certificates",
        lambda k: f"@cert-authority * {k.ca}\n",
        REFUSE,
        target="c_wrongp",
    ),
    Case(
        "cert-wrong-principal-plain-listed",
        "certificates",
        lambda k: f"@cert-authority * {k.ca}\n{k.c('c_wrongp')} {k.ck('c_wrongp')}\n",
        CONNECT,
        target="c_wrongp",
    ),
    Case(
        "cert-critical-options",
        "certificates",
        lambda k: f"@cert-authority * {k.ca}\n",
        REFUSE,
        target="c_crit",
        security="critical options",
    ),
    Case(
        "cert-critical-options-plain-listed",
        "certificates",
        lambda k: f"@cert-authority * {k.ca}\n{k.c('c_crit')} {k.ck('c_crit')}\n",
        CONNECT,
        target="c_crit",
    ),
    Case(
        "cert-user-cert-as-host-cert",
        "certificates",
        lambda k: f"@cert-authority * {k.ca}\n",
        REFUSE,
        target="c_user",
    ),
    Case(
        "cert-user-cert-plain-listed",
        "certificates",
        lambda k: f"@cert-authority * {k.ca}\n{k.c('c_user')} {k.ck('c_user')}\n",
        CONNECT,
        target="c_user",
    ),
    Case(
        "cert-sha1-ca-signature",
        "certificates",
        lambda k: f"@cert-authority * {k.ca_rsa}\n",
        REFUSE,
        target="c_sha1",
    ),
    Case(
        "cert-sha1-plain-listed",
        "certificates",
        lambda k: f"@cert-authority * {k.ca_rsa}\n{k.c('c_sha1')} {k.ck('c_sha1')}\n",
        CONNECT,
        target="c_sha1",
    ),
    Case(
        "cert-unlisted-ca",
        "certificates",
        lambda k: f"@cert-authority * {k.ca_other}\n",
        REFUSE,
        target="c_ok",
    ),
    Case(
        "cert-unlisted-ca-plain-listed",
        "certificates",
        lambda k: f"@cert-authority * {k.ca_other}\n{k.c('c_ok')} {k.ck('c_ok')}\n",
        CONNECT,
        target="c_ok",
    ),
    Case(
        "cert-ca-for-other-hosts",
        "certificates",
        lambda k: f"@cert-authority 10.* {k.ca}\n",
        REFUSE,
        target="c_ok",
    ),
    Case(
        "cert-ca-as-plain-key",
        "certificates",
        lambda k: f"{k.c('c_ok')} {k.ca}\n",
        REFUSE,
        target="c_ok",
    ),
    Case(
        "cert-plain-key-only",
        "certificates",
        lambda k: f"{k.c('c_ok')} {k.ck('c_ok')}\n",
        CONNECT,
        target="c_ok",
    ),
    Case(
        "cert-valid-plain-line-wrong",
        "certificates",
        lambda k: f"@cert-authority * {k.ca}\n{k.c('c_ok')} {k.ed2}\n",
        CONNECT,
        target="c_ok",
    ),
    Case(
        "cert-alias-principal",
        "certificates",
        lambda k: f"@cert-authority certalias {k.ca}\n",
        CONNECT,
        target="c_ok",
        alias="certalias",
    ),
    Case(
        "cert-alias-capitalised",
        "certificates",
        lambda k: f"@cert-authority certalias {k.ca}\n",
        CONNECT,
        target="c_ok",
        alias="CertAlias",
    ),
    Case(
        "cert-alias-not-a-principal",
        "certificates",
        lambda k: f"@cert-authority * {k.ca}\n",
        REFUSE,
        target="c_ok",
        alias="other-alias",
    ),
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

BY_ID = {c.id: c for c in CASES}
assert len(BY_ID) == len(CASES), "duplicate case ids"
