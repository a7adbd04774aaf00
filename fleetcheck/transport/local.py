"""`ssh = "local"`: the same commands on this machine, without SSH."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time

from fleetcheck.core.errors import TransportError
from fleetcheck.transport.shell import ExecResult


class LocalShell:
    def run(self, command: str, timeout: float, max_bytes: int) -> ExecResult:
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                ["/bin/sh", "-c", command],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as e:
            raise TransportError(f"cannot run /bin/sh locally: {e.strerror}") from None
        assert proc.stdout is not None and proc.stderr is not None
        out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
        bufs: dict[int, bytearray] = {out_fd: bytearray(), err_fd: bytearray()}
        truncated = False
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        sel.register(proc.stderr, selectors.EVENT_READ)
        deadline = start + timeout
        open_streams = 2
        timed_out = False
        try:
            while open_streams:
                left = deadline - time.monotonic()
                if left <= 0:
                    timed_out = True
                    break
                for key, _ in sel.select(min(left, 0.5)):
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        sel.unregister(key.fileobj)
                        open_streams -= 1
                        continue
                    buf = bufs[key.fd]
                    room = max_bytes - len(buf)
                    if len(chunk) > room:
                        truncated = True
                        chunk = chunk[: max(room, 0)]
                    buf.extend(chunk)
            if timed_out:
                kill_group(proc)
                rc = None
            else:
                try:
                    rc = proc.wait(timeout=max(deadline - time.monotonic(), 0.05))
                except subprocess.TimeoutExpired:
                    kill_group(proc)
                    rc = None
        finally:
            sel.close()
            proc.stdout.close()
            proc.stderr.close()
        return ExecResult(
            rc=rc,
            stdout=bytes(bufs[out_fd]),
            stderr=bytes(bufs[err_fd]),
            truncated=truncated,
            duration_s=time.monotonic() - start,
        )

    def close(self) -> None:
        pass


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group `proc` leads (started with start_new_session) and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:  # gone already
        pass
    proc.wait()
