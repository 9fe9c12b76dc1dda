"""Settings from environment variables, each with a default (12-factor).

Each field declares, beside its type and default, the variable it is read from and what it
means (:class:`Var`). That declaration is the only one: :func:`read_env` reads the variables it
names, and :func:`markdown_table` renders the tables that ``domino settings`` prints and the
README shows.
"""

from __future__ import annotations

import os
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

import msgspec

from engine.search import DEFAULT_BUDGET_MS

T = TypeVar("T", bound=msgspec.Struct)

DEFAULT_DATA_DIR = ".domino/redis"
"""Where an embedded Redis keeps its append-only file, relative to the working directory."""
DEFAULT_ARCHIVE = ".domino/archive"
"""Where finished matches are archived, relative to the working directory."""


@dataclass(frozen=True, slots=True)
class Var:
    """How a setting is read and documented: its environment variable, what it means, and,
    for a setting whose default is None, what leaving the variable unset does."""

    name: str
    meaning: str
    unset: str | None = None


def variables(cls: type[msgspec.Struct]) -> dict[str, Var]:
    """Each field of ``cls`` and the :class:`Var` it declares, in field order; raises TypeError
    for a field that declares none, or that has no default to document."""
    return {field.name: _var(cls, field) for field in msgspec.structs.fields(cls)}


def env_names(cls: type[msgspec.Struct]) -> dict[str, str]:
    """Each field of ``cls`` and the environment variable it is read from."""
    return {field: var.name for field, var in variables(cls).items()}


def markdown_table(cls: type[msgspec.Struct]) -> str:
    """The variables of ``cls`` as a Markdown table: name, default and meaning (with the
    choices of a setting that has a fixed set of values), in field order."""
    rows = ["| variable | default | meaning |", "| --- | --- | --- |"]
    for field in msgspec.structs.fields(cls):
        var = _var(cls, field)
        meaning = var.meaning + _choices(field.type)
        rows.append(f"| `{var.name}` | {default_text(field.default, var)} | {meaning} |")
    return "\n".join(rows)


def default_text(default: Any, var: Var) -> str:
    """A default as the tables show it: booleans as the 1 or 0 to set, strings in backticks,
    None as what an unset variable does."""
    if default is None:
        return f"unset: {var.unset}"
    if isinstance(default, bool):
        return str(int(default))
    if isinstance(default, str):
        return f"`{default}`"
    if isinstance(default, float):
        return f"{default:g}"
    return str(default)


def _var(cls: type[msgspec.Struct], field: msgspec.structs.FieldInfo) -> Var:
    declared = [m for m in getattr(field.type, "__metadata__", ()) if isinstance(m, Var)]
    where = f"{cls.__name__}.{field.name}"
    if len(declared) != 1:
        raise TypeError(f"{where} declares {len(declared)} Var, not one")
    var = declared[0]
    if field.default is msgspec.NODEFAULT:
        raise TypeError(f"{where} has no default: every setting has one")
    if field.default is None and var.unset is None:
        raise TypeError(f"{where} defaults to None: its Var must say what unset means")
    return var


def _choices(annotated: Any) -> str:
    """`` (`a`, `b` or `c`)`` for a Literal setting, else nothing."""
    kind = typing.get_args(annotated)[0]
    if typing.get_origin(kind) is not Literal:
        return ""
    names = [f"`{choice}`" for choice in typing.get_args(kind)]
    return f" ({', '.join(names[:-1])} or {names[-1]})"


def read_env(cls: type[T], environ: Mapping[str, str] | None, error: type[ValueError]) -> T:
    """Build ``cls`` from the environment variables its fields name (unset or empty: the
    field's default); raise ``error`` naming the variable that holds a bad value.
    Booleans read 1/0/true/false."""
    environ = os.environ if environ is None else environ
    names = env_names(cls)
    raw = {field: environ[var] for field, var in names.items() if environ.get(var, "") != ""}
    try:
        return msgspec.convert(raw, cls, strict=False)
    except msgspec.ValidationError as e:
        field = str(e).rpartition("$.")[2].rstrip("`")
        raise error(f"bad setting {names.get(field, field)}: {e}") from None


class ConfigError(ValueError):
    """Raised when an environment variable holds a value the setting cannot take."""


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """Every setting of the services, each with its variable and meaning."""

    redis_url: Annotated[
        str | None, Var("REDIS_URL", "the Redis to use", unset="an embedded server")
    ] = None
    cluster: Annotated[
        bool,
        Var(
            "DOMINO_REDIS_CLUSTER",
            "1 if `REDIS_URL` is a Redis Cluster node (unset, each process asks the server)",
        ),
    ] = False
    durability: Annotated[
        Literal["primary", "replica"],
        Var(
            "DOMINO_DURABILITY",
            "when a move counts as done: once its master has it, or (`replica`) once a replica"
            " has it too (WAIT), so that a failover loses no acknowledged move",
        ),
    ] = "primary"
    replica_wait_ms: Annotated[
        int,
        Var(
            "DOMINO_REPLICA_WAIT_MS",
            "with `DOMINO_DURABILITY=replica`, how long an append waits for a replica to confirm",
        ),
    ] = 1000
    prefix: Annotated[str, Var("DOMINO_PREFIX", "prefix of every key")] = "dom"
    partitions: Annotated[
        int,
        Var("DOMINO_PARTITIONS", "partitions of commands, logs and turns (fixed for a deployment)"),
    ] = 8
    appendfsync: Annotated[
        Literal["everysec", "always", "no"],
        Var("DOMINO_APPENDFSYNC", "durability of the embedded Redis"),
    ] = "everysec"
    data_dir: Annotated[
        str | None,
        Var(
            "DOMINO_DATA_DIR",
            "where the embedded Redis keeps its files",
            unset=f"`{DEFAULT_DATA_DIR}`",
        ),
    ] = None
    log_level: Annotated[
        Literal["debug", "info", "warning", "error"],
        Var("DOMINO_LOG_LEVEL", "the least severe log lines written"),
    ] = "info"
    log_format: Annotated[
        Literal["console", "json"],
        Var("DOMINO_LOG_FORMAT", "log lines for people, or one JSON object a line"),
    ] = "console"
    batch: Annotated[int, Var("DOMINO_BATCH", "most messages a service reads at once")] = 500
    overlap: Annotated[
        int,
        Var("DOMINO_OVERLAP", "batches a referee or bot worker handles side by side"),
    ] = 2
    max_deliveries: Annotated[
        int,
        Var("DOMINO_MAX_DELIVERIES", "deliveries of a failing message before it is dead-lettered"),
    ] = 5
    claim_idle_ms: Annotated[
        int,
        Var("DOMINO_CLAIM_IDLE_MS", "pending this long, a message is claimed by another consumer"),
    ] = 5000
    lease_ms: Annotated[
        int,
        Var(
            "DOMINO_LEASE_MS",
            "a process's hold on its partitions lasts this long unrenewed, in every role that"
            " shares them by lease (referees, bot workers, projectors, archivers: `domino status`"
            " lists them)",
        ),
    ] = 10000
    stall_ms: Annotated[
        int,
        Var(
            "DOMINO_STALL_MS",
            "a gap this long in the checks of a partition's deadlines (Redis paused, its"
            " referee stalled or gone) is not charged to the players: every deadline still"
            " running there is pushed back by it",
        ),
    ] = 1000
    watch_ms: Annotated[
        int,
        Var(
            "DOMINO_WATCH_MS",
            "a live match that has not moved this long is checked, and its turn sent again",
        ),
    ] = 10000
    search_budget_ms: Annotated[
        float, Var("DOMINO_SEARCH_BUDGET_MS", "thinking time per move of the `search` bots")
    ] = DEFAULT_BUDGET_MS
    search_samples: Annotated[
        int,
        Var(
            "DOMINO_SEARCH_SAMPLES",
            "most deals a `search` bot tries a move, whatever the budget left (0: as many as"
            " the budget allows); with a budget it never reaches, it plays as strongly on any"
            " machine, however loaded",
        ),
    ] = 0
    bot_pace_ms: Annotated[
        int,
        Var(
            "DOMINO_BOT_PACE_MS",
            "house bots wait this long before answering their turns: a pace people can watch"
            " (`domino demo` sets 100)",
        ),
    ] = 0
    max_command_bytes: Annotated[
        int, Var("DOMINO_MAX_COMMAND_BYTES", "larger commands are rejected unread")
    ] = 16384
    metrics_port: Annotated[
        int,
        Var(
            "DOMINO_METRICS_PORT",
            "port of the process's `/metrics`, `/healthz` and `/readyz` (0: none; `domino up`"
            " gives its k-th process this port + k)",
        ),
    ] = 0
    metrics_host: Annotated[
        str, Var("DOMINO_METRICS_HOST", "address the metrics port listens on")
    ] = "127.0.0.1"
    archive: Annotated[
        str | None,
        Var(
            "DOMINO_ARCHIVE",
            "where finished matches go after `DOMINO_ARCHIVE_AFTER_S`: a directory shared by"
            " every process, or `s3://bucket/prefix` (an S3-compatible store; the `s3` extra)",
            unset=f"`{DEFAULT_ARCHIVE}`",
        ),
    ] = None
    archive_s3_endpoint: Annotated[
        str | None,
        Var(
            "DOMINO_ARCHIVE_S3_ENDPOINT",
            "the S3-compatible server of an `s3://` archive",
            unset="AWS's, as boto3 finds it",
        ),
    ] = None
    archive_after_s: Annotated[
        float,
        Var(
            "DOMINO_ARCHIVE_AFTER_S",
            "a finished match stays in Redis this long, then moves to the archive (0: never)",
        ),
    ] = 3600.0
    dedupe_keep_s: Annotated[
        float,
        Var(
            "DOMINO_DEDUPE_KEEP_S",
            "a finished match's command ids are kept this long, so a late retry of its last"
            " moves is still answered as replayed",
        ),
    ] = 300.0
    log_keep_s: Annotated[
        float,
        Var(
            "DOMINO_LOG_KEEP_S",
            "the notification log keeps at least this much of its latest history, beyond"
            " what every projection has read",
        ),
    ] = 60.0
    trim_every_s: Annotated[
        float,
        Var(
            "DOMINO_TRIM_EVERY_S",
            "how often streams are trimmed and finished matches archived",
        ),
    ] = 5.0
    compact_every_s: Annotated[
        float,
        Var(
            "DOMINO_COMPACT_EVERY_S",
            "how often the results of archived matches are folded into the compacted ratings"
            " table and leave Redis (0: never)",
        ),
    ] = 60.0
    compact_margin_s: Annotated[
        float,
        Var(
            "DOMINO_COMPACT_MARGIN_S",
            "a result is compacted only once every partition's ratings have passed its end by"
            " this much (the referees' clocks against Redis's, and an end's way to the log)",
        ),
    ] = 60.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read the settings from ``environ`` (default: the process environment); raises
        ConfigError naming a variable whose value the setting cannot take."""
        settings = read_env(cls, environ, ConfigError)
        if min(settings.partitions, settings.batch, settings.overlap, settings.max_deliveries) < 1:
            raise ConfigError(
                "DOMINO_PARTITIONS, DOMINO_BATCH, DOMINO_OVERLAP and DOMINO_MAX_DELIVERIES"
                " must be ≥ 1"
            )
        if settings.watch_ms < 100:
            raise ConfigError("DOMINO_WATCH_MS must be at least 100 (a tenth of a second)")
        if settings.stall_ms < 300:
            raise ConfigError(
                "DOMINO_STALL_MS must be at least 300: the deadlines are checked every 50 ms,"
                " and their last check is written every 250 ms"
            )
        if settings.search_budget_ms <= 0 or settings.search_samples < 0:
            raise ConfigError("DOMINO_SEARCH_BUDGET_MS is > 0 and DOMINO_SEARCH_SAMPLES ≥ 0")
        if not 0 <= settings.bot_pace_ms <= 60_000:
            raise ConfigError("DOMINO_BOT_PACE_MS is 0 to 60000 milliseconds")
        if not 0 <= settings.metrics_port <= 65535:
            raise ConfigError("DOMINO_METRICS_PORT is a port: 0 to 65535 (0: none)")
        if min(settings.archive_after_s, settings.dedupe_keep_s, settings.log_keep_s) < 0:
            raise ConfigError(
                "DOMINO_ARCHIVE_AFTER_S, DOMINO_DEDUPE_KEEP_S and DOMINO_LOG_KEEP_S are ≥ 0"
            )
        if not 0.05 <= settings.trim_every_s <= 3600:
            raise ConfigError("DOMINO_TRIM_EVERY_S is 0.05 to 3600 seconds")
        if settings.compact_every_s < 0 or settings.compact_margin_s < 0:
            raise ConfigError("DOMINO_COMPACT_EVERY_S and DOMINO_COMPACT_MARGIN_S are ≥ 0")
        return settings

    def archive_at(self) -> str:
        """Where the archive is: the setting, else the default directory."""
        return self.archive or DEFAULT_ARCHIVE


ENV: dict[str, str] = env_names(Settings)
"""Each setting and the environment variable it is read from."""
