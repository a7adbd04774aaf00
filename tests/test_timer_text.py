"""Issue 22 items 7 and 8: what `timer` writes into the units and the crontab line.

7: a config path (or run option) with a newline, another control or a backslash is refused,
   `%` is doubled in Description= (a specifier there); systemd-analyze verify reads the rest.
8: a URL with a secret (user:password, a query, a heartbeat's path) is refused with the fix,
   not copied into ExecStart= and the crontab line, where `systemctl show` and `ps` show it.

Every test named item7/item8 fails on the code before the fix (the units were written, exit 0,
with the text injected or the secret in ExecStart=).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetcheck import timer
from tests.test_timer import FLEETCHECK, clean, cli, config, verify

INJECTED = "x\n[Service]\nExecStartPre=touch pwned"  # a directory name: no slash


def odd_config(tmp_path: Path, dirname: str) -> Path:
    where = tmp_path / dirname
    where.mkdir()
    return config(where)


def one_line_refusal(proc: object, *needles: str) -> str:
    assert proc.returncode == 3, (proc.stdout, proc.stderr)  # type: ignore[attr-defined]
    err: str = proc.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert proc.stdout == ""  # type: ignore[attr-defined]
    for needle in needles:
        assert needle in err, err
    return err


def test_item7_newline_in_the_config_path_is_refused(tmp_path: Path) -> None:
    path = odd_config(tmp_path, INJECTED)
    target = tmp_path / "units"
    target.mkdir()
    proc = cli("timer", "-c", str(path), "--install", "--dir", str(target))
    err = one_line_refusal(proc, "config path", "control character or line break")
    assert "\\n[Service]\\nExecStartPre" in err  # named, escaped
    assert list(target.iterdir()) == []
    with pytest.raises(timer.UnitTextError):
        timer.build(str(path), 900, 60, command=[FLEETCHECK])


@pytest.mark.parametrize("char", ["\r", "\x1b", "\t", "\x85", "\u2028", "\x7f"])
def test_item7_any_control_in_a_path_or_run_option_is_refused(tmp_path: Path, char: str) -> None:
    with pytest.raises(timer.UnitTextError, match="control character or line break"):
        timer.build(str(tmp_path / f"a{char}b.toml"), 900, 60, command=[FLEETCHECK])
    with pytest.raises(timer.UnitTextError, match="a run option"):
        timer.build(
            str(config(tmp_path)),
            900,
            60,
            run_args=["--textfile", f"/var/lib/x{char}y.prom"],
            command=[FLEETCHECK],
        )


def test_item7_backslash_in_the_config_path_is_refused(tmp_path: Path) -> None:
    """systemd does not unescape Description=; a trailing backslash continues the line."""
    path = odd_config(tmp_path, "ends\\")
    proc = cli("timer", "-c", str(path))
    one_line_refusal(proc, "backslash")


def test_item7_percent_in_the_config_path_is_literal_to_systemd(tmp_path: Path) -> None:
    """`%n` in Description= would be the unit's name: doubled, and verify reads both units."""
    path = odd_config(tmp_path, "fleet %n $HOME; it's")
    units = timer.build(str(path), 900, 60, command=[FLEETCHECK])
    timer.install(units, str(tmp_path))
    proc = verify(tmp_path, "fleetcheck.service", "fleetcheck.timer")
    assert proc.returncode == 0 and clean(proc) == "", clean(proc)
    description = [x for x in units.service.splitlines() if x.startswith("Description=")]
    assert description == [f"Description=fleetcheck patrol of {str(path).replace('%', '%%')}"]
    timer_description = [x for x in units.timer.splitlines() if x.startswith("Description=")]
    assert timer_description == [
        f"Description=fleetcheck patrol every 15m00s ({str(path).replace('%', '%%')})"
    ]
    # one line each, no key but ours: the path started no line of its own
    keys = [x.split("=", 1)[0] for x in units.service.splitlines() if "=" in x]
    assert keys.count("ExecStart") == 1 and "ExecStartPre" not in keys
    assert "\\%n" in units.crontab  # cron's own % escape


# ------------------------------------------------------------------ item 8: secrets in URLs
@pytest.mark.parametrize(
    ("run_args", "needle", "secret"),
    [
        (
            ["--alertmanager", "http://user:hunter2@127.0.0.1:9093"],
            "user name or password",
            "hunter2",
        ),
        (["--alertmanager", "http://127.0.0.1:9093/?token=hunter2"], "query", "hunter2"),
        (["--heartbeat", "https://127.0.0.1/ping/5a1b-hunter2"], "has a path", "hunter2"),
        (["--heartbeat", "http://127.0.0.1:8080/?key=hunter2"], "query", "hunter2"),
        (["--heartbeat", "http://:hunter2@127.0.0.1:8080/"], "user name or password", "hunter2"),
    ],
)
def test_item8_a_secret_in_a_url_is_refused_with_the_fix(
    tmp_path: Path, run_args: list[str], needle: str, secret: str
) -> None:
    target = tmp_path / "units"
    target.mkdir()
    proc = cli(
        "timer", "-c", str(config(tmp_path)), "--install", "--dir", str(target), "--", *run_args
    )
    key = run_args[0].lstrip("-")
    err = one_line_refusal(proc, needle, "/etc/default/fleetcheck", f"[outputs] {key}_env")
    assert secret not in err  # never repeated
    assert list(target.iterdir()) == []


def test_item8_urls_without_secrets_are_still_written(tmp_path: Path) -> None:
    args = ["--alertmanager", "http://127.0.0.1:9093", "--heartbeat", "http://127.0.0.1:8080/"]
    proc = cli("timer", "-c", str(config(tmp_path)), "--", *args)
    assert proc.returncode == 0, proc.stderr
    assert "--alertmanager http://127.0.0.1:9093 --heartbeat http://127.0.0.1:8080/" in proc.stdout
