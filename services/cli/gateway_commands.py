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
    import msgspec
    import uvicorn  # imported here: every other subcommand starts faster without it

    from services.cli.args import CliError
    from services.config import ConfigError, Settings
    from services.gateway.app import create_app
    from services.gateway.config import GatewayConfigError, GatewaySettings
    from services.gateway.connections import Limits, Proxies, ensure_files, protocol_with
    from services.gateway.sockets import frame_limit
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
    config = msgspec.structs.replace(config, host=host, port=port)
    try:
        app = create_app(settings, config)
    except GatewayConfigError as e:
        raise CliError(str(e)) from None
    tune_gc()  # as every other service: many small objects per request, few that live on
    ensure_files(config.max_connections)
    limits = Limits(
        config.idle_s,
        config.head_s,
        config.body_s,
        config.max_connections,
        config.max_connections_per_address,
        Proxies.of(config.trusted_proxies),
    )
    uvicorn.run(
        app,
        host=host,
        port=port,
        loop="uvloop",
        # httptools, with deadlines on what clients send and a cap on connections
        # (services/gateway/connections.py says what uvicorn does not do on its own)
        http=protocol_with(limits),
        # the seat's socket (services/gateway/sockets.py): a frame a little over the body
        # limit is answered with an error frame, one far over it closes the socket (1009)
        ws="websockets-sansio",
        ws_max_size=frame_limit(config.max_body_bytes),
        lifespan="on",
        access_log=False,
        # the client's address is the peer's, unless the peer is a proxy named as trusted:
        # then it is the one that proxy put in X-Forwarded-For (deploy/nginx/)
        proxy_headers=bool(config.trusted_proxies),
        forwarded_allow_ips=config.trusted_proxies or None,
        server_header=False,
        log_level="warning",
        timeout_graceful_shutdown=2,
    )
    return 0
