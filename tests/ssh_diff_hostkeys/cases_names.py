"""Cases about names: plain, hashed, ports, wildcards, negation."""

from __future__ import annotations

from tests.ssh_diff_hostkeys.case import CONNECT, OTHER, REFUSE, Case

NAME_CASES: list[Case] = [
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
    Case("wild-star", "wildcards", lambda k: f"{k.star} {k.ed}\n", CONNECT),
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
        lambda k: f"[{k.star}]:2222 {k.ed}\n",
        CONNECT,
        port=2222,
    ),
    Case(
        "wild-star-non-default-port",
        "wildcards",
        lambda k: f"{k.star} {k.ed}\n",
        CONNECT,
        port=2222,
    ),
    Case("wild-everything", "wildcards", lambda k: f"* {k.ed}\n", CONNECT),
    Case("wild-no-match", "wildcards", lambda k: f"10.* {k.ed}\n", REFUSE),
    Case("wild-char-class-is-literal", "wildcards", lambda k: f"{k.net}.[0-9]* {k.ed}\n", REFUSE),
    Case("wild-star-wrong-key", "wildcards", lambda k: f"{k.star} {k.ed2}\n", REFUSE),
    # ------------------------------------------------------------ negation
    Case("neg-excludes-host", "negation", lambda k: f"{k.star},!{k.addr} {k.ed}\n", REFUSE),
    Case("neg-excludes-other", "negation", lambda k: f"{k.star},!{OTHER} {k.ed}\n", CONNECT),
    Case("neg-alone", "negation", lambda k: f"!{k.addr} {k.ed}\n", REFUSE),
    Case("neg-first", "negation", lambda k: f"!{k.addr},{k.star} {k.ed}\n", REFUSE),
    Case(
        "neg-hides-wrong-line",
        "negation",
        lambda k: f"*,!{k.addr} {k.ed2}\n{k.addr} {k.ed}\n",
        CONNECT,
    ),
    Case("neg-wildcard", "negation", lambda k: f"{k.addr},!{k.star} {k.ed}\n", REFUSE),
]
