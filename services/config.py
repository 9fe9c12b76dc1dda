"""Settings from environment variables, each with a documented default (12-factor).

| variable | default | meaning |
| --- | --- | --- |
| REDIS_URL | (unset: an embedded redis-server) | the Redis to use |
| DOMINO_REDIS_CLUSTER | 0 | 1 if REDIS_URL is a Redis Cluster node |
| DOMINO_PREFIX | dom | prefix of every key |
| DOMINO_PARTITIONS | 8 | partitions of commands, logs and turns; fixed for a deployment |
| DOMINO_APPENDFSYNC | everysec | durability of an embedded Redis: everysec, always or no |
| DOMINO_DATA_DIR | (a temporary directory) | where an embedded Redis keeps its files |
| DOMINO_LOG_LEVEL | info | debug, info, warning or error |
| DOMINO_LOG_FORMAT | console | console, or json for one JSON object a line |
| DOMINO_BATCH | 500 | most messages a service reads at once |
| DOMINO_MAX_DELIVERIES | 5 | deliveries of a failing message before it is dead-lettered |
| DOMINO_CLAIM_IDLE_MS | 5000 | pending this long, a message is claimed by another consumer |
| DOMINO_LEASE_MS | 10000 | a referee's hold on its partitions lasts this long unrenewed |
| DOMINO_SEARCH_BUDGET_MS | 20 | thinking time per move of the search bots |
| DOMINO_MAX_COMMAND_BYTES | 16384 | larger commands are rejected unread |
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal, TypeVar

import msgspec

ENV: dict[str, str] = {
    "redis_url": "REDIS_URL",
    "cluster": "DOMINO_REDIS_CLUSTER",
    "prefix": "DOMINO_PREFIX",
    "partitions": "DOMINO_PARTITIONS",
    "appendfsync": "DOMINO_APPENDFSYNC",
    "data_dir": "DOMINO_DATA_DIR",
    "log_level": "DOMINO_LOG_LEVEL",
    "log_format": "DOMINO_LOG_FORMAT",
    "batch": "DOMINO_BATCH",
    "max_deliveries": "DOMINO_MAX_DELIVERIES",
    "claim_idle_ms": "DOMINO_CLAIM_IDLE_MS",
    "lease_ms": "DOMINO_LEASE_MS",
    "search_budget_ms": "DOMINO_SEARCH_BUDGET_MS",
    "max_command_bytes": "DOMINO_MAX_COMMAND_BYTES",
}
"""Each setting and the environment variable it is read from."""


T = TypeVar("T")


def read_env(
    cls: type[T],
    variables: Mapping[str, str],
    environ: Mapping[str, str] | None,
    error: type[ValueError],
) -> T:
    """Build ``cls`` from the environment variables named for its fields (unset or empty:
    the field's default); raise ``error`` naming the variable that holds a bad value.
    Booleans read 1/0/true/false."""
    environ = os.environ if environ is None else environ
    raw = {field: environ[var] for field, var in variables.items() if environ.get(var, "") != ""}
    try:
        return msgspec.convert(raw, cls, strict=False)
    except msgspec.ValidationError as e:
        field = str(e).rpartition("$.")[2].rstrip("`")
        name = variables.get(field, field)
        raise error(f"bad setting {name}: {e}") from None


class ConfigError(ValueError):
    """Raised when an environment variable holds a value the setting cannot take."""


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """Every setting of the services; see the module docstring for the variables."""

    redis_url: str | None = None
    cluster: bool = False
    prefix: str = "dom"
    partitions: int = 8
    appendfsync: Literal["everysec", "always", "no"] = "everysec"
    data_dir: str | None = None
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["console", "json"] = "console"
    batch: int = 500
    max_deliveries: int = 5
    claim_idle_ms: int = 5000
    lease_ms: int = 10000
    search_budget_ms: float = 20.0
    max_command_bytes: int = 16384

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read the settings from ``environ`` (default: the process environment)."""
        settings = read_env(cls, ENV, environ, ConfigError)
        if settings.partitions < 1 or settings.batch < 1 or settings.max_deliveries < 1:
            raise ConfigError(
                "DOMINO_PARTITIONS, DOMINO_BATCH and DOMINO_MAX_DELIVERIES must be ≥ 1"
            )
        return settings
