"""What can be checked of deploy/ without Docker: every command the files run is a real
``domino`` subcommand with real options, and every setting they pass is one the service
reads."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from services.cli.main import build_parser
from services.config import ENV
from services.gateway.config import ENV as GATEWAY_ENV

pytestmark = pytest.mark.service

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    return data


def domino_services() -> dict[str, dict[str, Any]]:
    return {name: s for name, s in compose()["services"].items() if "build" in s}


def test_every_compose_command_is_a_real_domino_subcommand_with_real_options() -> None:
    parser = build_parser()
    services = domino_services()
    assert {"referee", "bots-random", "bots-greedy", "projector", "gateway"} <= set(services)
    for name, service in services.items():
        try:
            parser.parse_args(service["command"])
        except SystemExit:
            pytest.fail(f"{name}: 'domino {' '.join(service['command'])}' is not a valid command")


def test_every_setting_compose_passes_is_one_the_service_reads() -> None:
    known = set(ENV.values()) | set(GATEWAY_ENV.values())
    for name, service in domino_services().items():
        assert set(service["environment"]) <= known, name


def test_compose_runs_redis_with_aof_and_two_referees() -> None:
    services = compose()["services"]
    command = services["redis"]["command"]
    assert command[command.index("--appendonly") + 1] == "yes"
    assert command[command.index("--appendfsync") + 1] in ("everysec", "always")
    assert services["referee"]["deploy"]["replicas"] == 2
    url = services["referee"]["environment"]["REDIS_URL"]
    assert re.fullmatch(r"redis://redis:6379/\d+", url)


def _instruction(dockerfile: str, name: str) -> list[str]:
    lines = [line for line in dockerfile.splitlines() if line.startswith(name + " ")]
    assert len(lines) == 1, name
    value: list[str] = json.loads(lines[0][len(name) + 1 :])
    return value


def test_the_image_runs_the_domino_console_script_and_copies_what_exists() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert _instruction(dockerfile, "ENTRYPOINT") == ["domino"]
    assert project["scripts"]["domino"] == "services.cli.main:main"
    build_parser().parse_args(_instruction(dockerfile, "CMD"))
    for line in dockerfile.splitlines():
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (ROOT / source).exists(), source
    locked = (DEPLOY / "requirements.lock").read_text()
    for requirement in ("faststream", "redis", "msgspec", "structlog"):
        assert re.search(rf"^{requirement}==", locked, re.M), requirement
