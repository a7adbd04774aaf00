"""`fleetcheck serve`: the read-only web console, optionally patrolling every --every."""

import os
import sys
from typing import TYPE_CHECKING, Annotated, Any

from fleetcheck.cli.app import app, command
from fleetcheck.cli.common import (
    ConfigOpt,
    DurationArg,
    EveryOpt,
    HistoryOpt,
    Opt,
    UsageFailure,
    duration_opt,
    load_fleet,
    patrol_interval,
    round_keeper,
)

if TYPE_CHECKING:
    from fleetcheck.transport.keep import Keeper


def _env_opt(option: str, what: str) -> Any:
    return Opt(option, metavar="VAR", help=f"Env var holding {what} to require.")


@command(app, "serve")
def serve_cmd(
    config: ConfigOpt = None,
    listen: Annotated[
        str,
        Opt("--listen", metavar="ADDR:PORT", help="Where to listen (default loopback only)."),
    ] = "127.0.0.1:8470",
    history: HistoryOpt = None,
    window: Annotated[
        DurationArg, duration_opt("--window", "How much history the charts show, e.g. 7d.")
    ] = "7d",  # type: ignore[assignment]  # converted by duration
    every: EveryOpt = None,
    token_env: Annotated[str | None, _env_opt("--token-env", "a bearer token")] = None,
    basic_auth_env: Annotated[str | None, _env_opt("--basic-auth-env", "USER:PASSWORD")] = None,
) -> None:
    """A read-only web console over the state the patrols write: grid, rows, charts,
    /report.json, /metrics and /healthz (503 when rounds stop)."""
    import signal
    import threading

    from fleetcheck.console import charts as console_charts
    from fleetcheck.console import server as serve
    from fleetcheck.console import source as console_mod
    from fleetcheck.rounds import state as state_mod

    fleet = load_fleet(config)
    try:
        host, port = serve.parse_listen(listen)
        window_s = window.seconds or 0.0
    except ValueError as e:
        raise UsageFailure(str(e)) from None
    interval = patrol_interval(fleet, every)
    secrets = _secrets(token_env, basic_auth_env)
    default_state, default_history = state_mod.default_paths(fleet.path)
    history_path = history or default_history
    app_console = serve.Console(
        source=console_mod.Source(
            history_path,
            warn=lambda text: print(f"fleetcheck: warning: {text}", file=sys.stderr, flush=True),
        ),
        every=interval or fleet.patrol.every,
        window=window_s,
        window_text=window.text,
        focus=console_charts.config_focus(fleet),
        auth=serve.Auth(secrets["token"], secrets["basic"]),
    )
    from fleetcheck.console import wsgi  # waitress: imported by serve only, never by a patrol

    wsgi.raise_fd_limit()  # before the cap is derived from it: idle clients cost an fd each
    try:
        server = wsgi.make_server(serve.App(app_console), host, port)
    except (OSError, ValueError) as e:
        text = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise UsageFailure(f"--listen {listen}: {text}") from None
    stop = threading.Event()
    keeper: Keeper | None = None
    if interval is not None:
        from fleetcheck.core import registry, runner
        from fleetcheck.rounds import patrol

        items = runner.plan(fleet, registry.available())
        outputs = patrol.Outputs(state=default_state, history=history_path)
        keeper = round_keeper(fleet, interval)
        serve.start_patrols(lambda: patrol.one_round(fleet, items, outputs, keeper), interval, stop)
    bound_host, bound_port = str(server.effective_host), str(server.effective_port)
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    print(f"fleetcheck serve: http://{shown}:{bound_port}/ (history {history_path})", flush=True)
    if not app_console.auth.required and host not in ("127.0.0.1", "::1", "localhost"):
        print(
            f"fleetcheck: warning: listening on {listen} without --token-env/--basic-auth-env",
            file=sys.stderr,
        )

    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    try:
        server.run()  # returns on SIGINT or SIGTERM, its workers stopped
    except KeyboardInterrupt:
        pass  # raised outside waitress's loop
    finally:
        stop.set()
        server.shut()
        if keeper is not None:
            keeper.close()  # a round still running closes what it hands back


def _secrets(token_env: str | None, basic_auth_env: str | None) -> dict[str, str | None]:
    """The console's token and USER:PASSWORD, read from the environment variables named (never
    from the command line, where `ps` shows them)."""
    secrets: dict[str, str | None] = {"token": None, "basic": None}
    for key, var, option in (
        ("token", token_env, "--token-env"),
        ("basic", basic_auth_env, "--basic-auth-env"),
    ):
        if var is None:
            continue
        value = os.environ.get(var, "")
        if not value:
            raise UsageFailure(f"{option} {var}: the environment variable is unset or empty")
        if key == "basic" and ":" not in value:
            raise UsageFailure(f"{option} {var}: expected USER:PASSWORD")
        secrets[key] = value
    return secrets
