"""Every corpus case: the real `ssh` and fleetcheck, same sshd, same known_hosts. They agree
(a refusal agrees with a refusal of the same kind: revoked, changed, or unknown), or the case
is a documented refusal (ssh connects, fleetcheck refuses on purpose). Never does fleetcheck
connect where ssh refuses. What ssh does is asserted too: the corpus states the oracle."""

from __future__ import annotations

import pytest

from tests.ssh_diff_hostkeys.corpus import BY_ID, CASES, CONNECT, REFUSE, Case
from tests.ssh_diff_hostkeys.fleet import Outcome, category

Outcomes = dict[str, Outcome | BaseException]


def check_case(outcome: Outcome | BaseException, case: Case) -> None:
    if isinstance(outcome, BaseException):
        raise outcome
    (ssh_ok, ssh_err), (our_ok, our_why) = outcome
    ssh_tail = " | ".join(ssh_err.strip().splitlines()[-3:])
    assert (CONNECT if ssh_ok else REFUSE) == case.openssh, (
        f"the corpus says ssh would {case.openssh}, it did not: {ssh_tail}"
    )
    if our_ok and not ssh_ok:
        pytest.fail(f"fleetcheck connected where OpenSSH refused ({ssh_tail})")
    if case.documented:
        assert ssh_ok and not our_ok, f"documented refusal no longer one: ours {our_why!r}"
        return
    assert our_ok == ssh_ok, f"OpenSSH connected, fleetcheck refused: {our_why}"
    if not ssh_ok:
        assert category(our_why, ours=True) == category(ssh_err, ours=False), (
            f"both refuse, for different reasons: ours {our_why!r}, ssh {ssh_tail!r}"
        )


@pytest.mark.lab
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case_agrees_with_openssh(outcomes: Outcomes, case: Case) -> None:
    check_case(outcomes[case.id], case)


# ---------------------------------------------------------------- the security items
# Issue 23's security items, one test each, on their corpus case. Each of these seven FAILED
# on the code before the fix (checked by putting back known_hosts.py, hostkeys.py and
# handshake.py of 057231a: fleetcheck connected, or raised a false CRIT, where OpenSSH did
# otherwise; 29 of the corpus cases disagreed then).


def _security(outcomes: Outcomes, case_id: str) -> None:
    case = BY_ID[case_id]
    assert case.security, case_id
    check_case(outcomes[case_id], case)


@pytest.mark.lab
def test_certificate_with_critical_options_is_refused(outcomes: Outcomes) -> None:
    _security(outcomes, "cert-critical-options")


@pytest.mark.lab
def test_upper_case_cert_authority_marker_is_ignored(outcomes: Outcomes) -> None:
    _security(outcomes, "marker-cert-authority-upper-case")


@pytest.mark.lab
def test_revoked_ca_counts_without_a_cert_authority_line(outcomes: Outcomes) -> None:
    _security(outcomes, "revoked-ca-without-cert-authority")


@pytest.mark.lab
def test_openssh_preference_order_decides_the_key_checked(outcomes: Outcomes) -> None:
    _security(outcomes, "order-rsa-right-ed25519-wrong")
    _security(outcomes, "order-rsa-wrong-ecdsa-right")


@pytest.mark.lab
def test_host_key_alias_gets_no_port(outcomes: Outcomes) -> None:
    _security(outcomes, "alias-no-port-added")


@pytest.mark.lab
def test_host_key_alias_is_lower_cased(outcomes: Outcomes) -> None:
    _security(outcomes, "alias-hashed-as-written")


@pytest.mark.lab
def test_cr_only_line_endings_are_one_line(outcomes: Outcomes) -> None:
    _security(outcomes, "cr-only-host-on-second-line")
