"""Two helpers every stage of the SSH transport shares: closing what may already be broken
without a second error hiding the first, and an exception as the one line an operator reads."""

from __future__ import annotations

from typing import Any


def quiet_close(obj: Any) -> None:
    """Close `obj`, ignoring its complaints: it is being closed because something failed."""
    try:
        obj.close()
    except Exception:
        pass


def describe(e: BaseException) -> str:
    """The first line of `e` (at most 200 characters); a bare EOF says who closed it."""
    text = str(e).strip().splitlines()
    msg = text[0] if text else ""
    if isinstance(e, EOFError) or not msg:
        return f"connection closed by the remote side ({type(e).__name__})"
    return msg[:200]
