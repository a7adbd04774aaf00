"""Authentication as OpenSSH does it with public keys: the configured key files (each parsed
once while unchanged), then the agent's keys unless IdentitiesOnly, each offered in turn.

Refused authentication is one line listing what was tried and why each key could not be
(missing, unreadable, encrypted: load it into the agent), and what the server allows. The
agent is spoken to over our own socket under the connect budget: a hung agent cannot hang
the patrol."""

from __future__ import annotations

import os
import socket
import time
from typing import TYPE_CHECKING, Any

from fleetcheck.core.errors import TransportError
from fleetcheck.transport.filecache import ParsedFiles
from fleetcheck.transport.ssh.lazy import load_paramiko
from fleetcheck.transport.ssh.util import describe, quiet_close

if TYPE_CHECKING:
    from fleetcheck.config import SshConfig
    from fleetcheck.transport.ssh.budget import Budget
    from fleetcheck.transport.ssh.target import Target


def _parse_key(path: str) -> Any:
    return load_paramiko().PKey.from_path(path)


# an RSA key costs milliseconds to load: once per patrol, not once per host; a missing file
# raises (its reason is part of the refused-authentication line)
_private_keys: ParsedFiles[Any] = ParsedFiles(_parse_key, missing_ok=False)


def _load_key(path: str) -> tuple[Any | None, str]:
    """The private key at `path` (parsed once while the file is unchanged) or None and the
    reason."""
    paramiko = load_paramiko()

    try:
        return _private_keys.get(path), ""
    except FileNotFoundError:
        return None, f"{path}: no such file"
    except PermissionError:
        return None, f"{path}: permission denied"
    except paramiko.PasswordRequiredException:
        return None, f"{path}: encrypted (load it into the agent)"
    except Exception as e:
        # paramiko leaves most encrypted keys to cryptography, whose TypeError says so only
        # in prose: the file itself tells
        if _encrypted_key_file(path):
            return None, f"{path}: encrypted (load it into the agent)"
        return None, f"{path}: unreadable key ({describe(e)})"


def _encrypted_key_file(path: str) -> bool:
    """Whether the private key file at `path` is passphrase-protected: an OpenSSH-format key
    whose cipher is not `none`, or a PEM key marked ENCRYPTED (PKCS#8 or the old Proc-Type)."""
    import base64

    try:
        with open(path, "rb") as f:
            text = f.read(1 << 20)
    except OSError:
        return False
    if b"-----BEGIN ENCRYPTED PRIVATE KEY-----" in text or b"Proc-Type: 4,ENCRYPTED" in text:
        return True
    begin, end = b"-----BEGIN OPENSSH PRIVATE KEY-----", b"-----END OPENSSH PRIVATE KEY-----"
    if begin not in text or end not in text:
        return False
    body = text.split(begin, 1)[1].split(end, 1)[0]
    try:
        blob = base64.b64decode(b"".join(body.split()), validate=True)
    except ValueError:
        return False
    magic = b"openssh-key-v1\0"
    if not blob.startswith(magic) or len(blob) < len(magic) + 4:
        return False
    size = int.from_bytes(blob[len(magic) : len(magic) + 4], "big")
    cipher = blob[len(magic) + 4 : len(magic) + 4 + size]
    return cipher != b"none"


def authenticate(transport: Any, target: Target, cfg: SshConfig, budget: Budget, who: str) -> None:
    load_paramiko()

    tried: list[str] = []
    problems: list[str] = []
    candidates: list[tuple[str, Any]] = []
    for path in target.identity_files:
        key, problem = _load_key(path)
        if key is None:
            problems.append(problem)
        else:
            candidates.append((f"{path} ({key.get_name()} {key.fingerprint})", key))
    agent: Any = None
    use_agent = cfg.use_agent and not target.identities_only
    if use_agent:
        budget.stage = f"asking the ssh agent for keys for {who}"
        agent_keys: tuple[Any, ...] = ()
        try:
            agent, agent_keys = _agent_keys(budget)
        except Exception as e:
            if budget.expired or budget.deadline - time.monotonic() < 0.05:
                raise budget.timeout_error() from None
            problems.append(f"agent: {describe(e)}")
        else:
            if not agent_keys:
                sock_set = os.environ.get("SSH_AUTH_SOCK")
                problems.append("agent: no keys" if sock_set else "no agent")
        for key in agent_keys:
            candidates.append((f"agent key {key.get_name()} {key.fingerprint}", key))
        budget.stage = f"authenticating to {who} as {target.user}"
    if not target.identity_files and not use_agent:
        problems.append("no identity_file and use_agent = false")
    try:
        _try_keys(transport, target, budget, who, candidates, tried, problems)
    finally:
        if agent is not None:
            quiet_close(agent._conn)  # its socket is ours: never left open for the patrol


def _agent_keys(budget: Budget) -> tuple[Any, tuple[Any, ...]]:
    """The agent (paramiko's AgentSSH over OUR socket) and its keys. paramiko.Agent()
    connects and reads without any timeout (a hung agent hung the patrol); here the socket
    has the budget's timeout and the watchdog closes it when the budget runs out."""
    from paramiko.agent import AgentSSH

    path = os.environ.get("SSH_AUTH_SOCK")
    if not path:
        return None, ()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    budget.guard(sock)
    sock.settimeout(budget.left() + 0.5)  # the watchdog closes it first, naming the stage
    try:
        sock.connect(path)
        agent: Any = AgentSSH()
        agent._connect(sock)
    except BaseException:
        quiet_close(sock)
        raise
    return agent, tuple(agent.get_keys())


def _try_keys(
    transport: Any,
    target: Target,
    budget: Budget,
    who: str,
    candidates: list[tuple[str, Any]],
    tried: list[str],
    problems: list[str],
) -> None:
    paramiko = load_paramiko()
    allowed: list[str] | None = None
    for label, key in candidates:
        if budget.expired:
            raise budget.timeout_error()
        try:
            transport.auth_publickey(target.user, key)
        except paramiko.BadAuthenticationType as e:
            allowed = list(e.allowed_types)
            break
        except paramiko.AuthenticationException:
            tried.append(label)
            continue
        except paramiko.SSHException as e:
            if budget.expired:
                raise budget.timeout_error() from None
            raise TransportError(f"authentication to {who} failed: {describe(e)}") from None
        if transport.is_authenticated():
            return
    if budget.expired:
        raise budget.timeout_error()
    parts = []
    if tried:
        parts.append("tried " + "; ".join(tried))
    parts.extend(problems)
    if allowed is not None:
        parts.append(f"server allows only {', '.join(allowed) or 'nothing'}")
    raise TransportError(
        f"authentication refused by {who} for user {target.user}"
        + (f" ({'; '.join(parts)})" if parts else "")
    )
