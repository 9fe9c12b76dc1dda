"""``domino gateway``: serve the gateway with uvicorn (uvloop, httptools)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``gateway`` subcommand."""
    p = sub.add_parser("gateway", help="serve the HTTP gateway for external bots (needs REDIS_URL)")
    p.add_argument("--host", help="address to listen on (default: DOMINO_GATEWAY_HOST)")
    p.add_argument("--port", type=int, help="port to listen on (default: DOMINO_GATEWAY_PORT)")
    p.set_defaults(func=cmd_gateway)


def cmd_gateway(args: argparse.Namespace) -> int:
    """Serve until SIGINT or SIGTERM."""
    import uvicorn  # imported here: every other subcommand starts faster without it

    from services.cli.args import CliError
    from services.config import ConfigError, Settings
    from services.gateway.app import create_app
    from services.gateway.config import GatewayConfigError, GatewaySettings
    from services.logs import configure
    from services.redis.apps import tune_gc

    try:
        settings = Settings.from_env()
        config = GatewaySettings.from_env()
    except (ConfigError, GatewayConfigError) as e:
        raise CliError(str(e)) from None
    if not settings.redis_url:
        raise CliError("set REDIS_URL (or use 'domino up', which starts everything)")
    configure(settings.log_level, settings.log_format, service="gateway")
    host = args.host or config.host
    port = args.port if args.port is not None else config.port
    app = create_app(settings, config)
    tune_gc()  # as every other service: many small objects per request, few that live on
    uvicorn.run(
        app,
        host=host,
        port=port,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        access_log=False,
        proxy_headers=False,  # run it behind a proxy that sets them, and say so, if needed
        server_header=False,
        log_level="warning",
        timeout_graceful_shutdown=2,
    )
    return 0
