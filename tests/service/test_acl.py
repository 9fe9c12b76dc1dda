"""Redis ACL users per role (services/redis/acl.py) on real servers, Redis 7.0 and 6.2: what
each role's credentials may not do, CONFIG refused to everyone, and whole matches played by
processes that each sign in as their own role, with no permission missing."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import redis
from domino_sdk import Bot, View, register
from domino_sdk.model import Move

from engine.rules import Rules
from services.cli.supervisor import Stack
from services.config import Settings
from services.redis import acl
from services.redis.servers import bundled_server_binary, private_server, server_version
from services.store.keys import Keys
from tests.gateway.conftest import PLAY_LIMITS, create, free_port, join, wait_healthy
from tests.service.conftest import wait_until_over
from tests.service.test_hosted_matches import create as create_house
from tests.support.cli import run_domino

pytestmark = pytest.mark.service

PREFIX = "acl"
KEYS = Keys(PREFIX, 4)


def _binaries() -> dict[str, str]:
    found = {}
    if system := shutil.which("redis-server"):
        found["system"] = system
    if bundled := bundled_server_binary():
        found["bundled-6.2"] = bundled
    return found


@dataclass(frozen=True)
class Served:
    """A private server with the roles' users: its admin URL and each user's."""

    admin: str
    users: dict[str, str]

    def client(self, user: str) -> redis.Redis:
        return redis.Redis.from_url(self.users[user] if user != acl.ADMIN else self.admin)


@pytest.fixture(scope="module", params=list(_binaries().values()), ids=list(_binaries()))
def served(request: pytest.FixtureRequest) -> Iterator[Served]:
    """A private server (each version at hand) with every role's user for the prefix."""
    passwords = acl.new_passwords(acl.users())
    with private_server(
        appendfsync="no",
        binary=request.param,
        password=secrets.token_urlsafe(24),
        users=acl.config_lines(PREFIX, passwords, server_version(request.param)),
    ) as admin:
        yield Served(admin, {u: acl.url_for(admin, u, p) for u, p in passwords.items()})


def test_each_role_names_its_keys_under_the_prefix_taken_literally() -> None:
    rules = acl.rules(acl.BOTS, "a*b", "random")
    keys = [r for r in rules if r.startswith("~")]
    assert keys and all(k.startswith("~a\\*b:") for k in keys)
    assert "~a\\*b:{p*}:turns:random" in keys
    assert not any(":m:" in k or k.endswith(":log") for k in keys)  # no match log, no log
    assert not any("config" in r for r in rules)


def test_a_bots_user_names_its_pool_and_no_other_name_is_a_user() -> None:
    assert set(acl.users(["random"])) == {
        "referee",
        "bots-random",
        "projector",
        "gateway",
        "operator",
    }
    assert acl.config_lines(PREFIX, {"bots-random": "pw"})[0].startswith("user bots-random on #")
    for bad in ("bots-", "bots-a*", "nobody"):
        with pytest.raises(ValueError):
            acl.setuser_lines(PREFIX, {bad: None})
    with pytest.raises(ValueError):
        acl.users(["a b"])


def test_rules_a_server_version_refuses_are_left_out() -> None:
    def named(version: tuple[int, int] | None) -> bool:
        return "+client|setinfo" in acl.rules(acl.REFEREE, PREFIX, version=version)

    assert not named(None) and not named((7, 0)) and named((7, 2)) and named((6, 2))


def test_a_bot_workers_credentials_cannot_read_a_match_log_or_write_outside_its_role(
    served: Served,
) -> None:
    match = KEYS.match("m-1")
    with served.client(acl.ADMIN) as admin:
        admin.xadd(match, {"__data__": "{}"}, id="0-1")
    with served.client("bots-random") as bot:
        for read in (
            lambda: bot.xrange(match),
            lambda: bot.xrange(KEYS.log(0)),
            lambda: bot.hgetall(KEYS.lobby_match("m-1")),
            lambda: bot.xrange(KEYS.turns(0, "greedy")),  # another pool's turns
            lambda: bot.set(KEYS.seat_token("0" * 64), "x"),
            lambda: bot.set("elsewhere", "x"),
            lambda: bot.eval("return redis.call('XRANGE', KEYS[1], '-', '+')", 1, match),
        ):
            with pytest.raises(redis.exceptions.NoPermissionError):
                read()
        # what it is for: its pool's turns, the commands it answers with
        assert bot.xadd(KEYS.turns(0, "random"), {"__data__": "{}"})
        assert bot.xadd(KEYS.commands(0), {"__data__": "{}"})


def test_the_referees_credentials_reach_no_account_token_or_lobby_record(
    served: Served,
) -> None:
    with served.client("referee") as referee:
        for key in (
            KEYS.account("a-1"),
            KEYS.account_token("0" * 64),
            KEYS.seat_token("0" * 64),
            KEYS.lobby_match("m-1"),
            KEYS.accounts,
        ):
            with pytest.raises(redis.exceptions.NoPermissionError):
                referee.exists(key)
        assert referee.xlen(KEYS.match("m-1")) >= 0
        with pytest.raises(redis.exceptions.NoPermissionError):
            referee.flushall()


def test_config_is_refused_to_every_user_even_the_servers_own(served: Served) -> None:
    for user in [acl.ADMIN, *served.users]:
        with served.client(user) as client:
            with pytest.raises(redis.ResponseError):
                client.config_get("dir")
            with pytest.raises(redis.ResponseError):
                client.config_set("dir", "/tmp")


def test_a_stranger_without_the_password_is_refused(served: Served) -> None:
    port = redis.connection.parse_url(served.admin)["port"]
    with redis.Redis(port=port) as stranger, pytest.raises(redis.AuthenticationError):
        stranger.ping()


class FirstLegal(Bot):
    """Plays the first legal move."""

    def choose(self, view: View) -> Move:
        return view.legal[0]


def test_whole_matches_play_to_the_end_with_each_process_on_its_own_user(
    served: Served, tmp_path: Path
) -> None:
    """Referee, bot workers, projector (archiving at once) and gateway each sign in as their
    role; house matches, one played by an outside bot through the gateway and one by an
    account's seek (after rotating its token) end, every finished match is archived, and no
    process met a missing permission."""
    port = free_port()
    settings = Settings(
        redis_url=served.users[acl.OPERATOR.name],
        prefix=PREFIX,
        partitions=KEYS.partitions,
        log_level="info",
        archive=str(tmp_path / "archive"),
        archive_after_s=1.0,
        dedupe_keep_s=0.5,
        trim_every_s=0.2,
    )
    logs = tmp_path / "logs"
    with served.client(acl.ADMIN) as admin:
        admin.acl_log_reset()
    stack = Stack(
        served.users[acl.OPERATOR.name],
        settings,
        pools={"random": 1, "greedy": 1},
        log_dir=logs,
        gateway=True,
        users=served.users,
    )
    gateway_env = {
        **PLAY_LIMITS,  # a seek is filled with a house bot after 2 s
        "DOMINO_GATEWAY_PORT": str(port),
        "DOMINO_GATEWAY_HOST": "127.0.0.1",
    }
    with contextlib.ExitStack() as running:
        running.callback(stack.stop)
        stack.gateway = False
        stack.start()
        gateway = stack.spawn("gateway", "gateway", env=gateway_env)
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, gateway)
        operator = settings.redis_url or ""
        house = create_house(
            operator,
            settings,
            [(Rules.make("express", players=2), ["greedy", "random"])] * 3,
        )
        wait_until_over(operator, settings, house)  # read before they are archived
        outside = create(url, ["random", None], rules={"players": 2, "target": 40})
        _, token = join(url, outside, name="outside")
        ended = FirstLegal().run(url, token)
        assert ended is not None
        # an account: registered, seeking, matched (with a house bot), its feed told the end
        account = asyncio.run(register(url, f"acl{secrets.token_hex(4)}"))
        # its token rotated: the gateway announces the old one's end and follows the stream
        rotated = httpx.post(
            f"{url}/api/v1/account/token", headers={"Authorization": f"Bearer {account.token}"}
        )
        assert rotated.status_code == 200, rotated.text
        account_token = rotated.json()["token"]
        finished = FirstLegal().run_account(url, account_token, seek="express-2p", games=1)
        assert len(finished) == 1
        assert httpx.get(f"{url}/api/v1/matches/{outside}").status_code == 200
        deadline = time.monotonic() + 30
        while len(list((tmp_path / "archive").rglob("*.jsonl.gz"))) < 5:
            assert time.monotonic() < deadline, f"not archived; refused: {_denials(served)}"
            time.sleep(0.2)
        assert httpx.get(f"{url}/api/v1/matches/{outside}/replay").status_code == 200
        assert not stack.check(), f"exited: {stack.check()}"
    denied = _denials(served)
    assert not denied, denied
    for log in logs.glob("*.log"):
        text = log.read_text(errors="replace")
        assert "NOPERM" not in text, f"{log.name}: {_around(text, 'NOPERM')}"


def _denials(served: Served) -> list[str]:
    """What the server's ACL log holds: each user, command or key refused."""
    with served.client(acl.ADMIN) as admin:
        entries = admin.acl_log()
    return [f"{e['username']}: {e['reason']} {e['object']}" for e in entries]


def _around(text: str, word: str, width: int = 600) -> str:
    at = text.find(word)
    return text[max(0, at - width) : at + width]


def test_domino_acl_prints_setuser_lines_a_redis_takes(served: Served) -> None:
    """An operator of an external Redis creates the users from ``domino acl``'s lines (here
    under other names, beside the fixture's), then gives each a password."""
    done = run_domino("acl", "--prefix", PREFIX, "--pools", "random", env=os.environ)
    assert done.returncode == 0, done.stderr
    lines = [line.split() for line in done.stdout.splitlines() if line.startswith("ACL SETUSER")]
    assert {words[2] for words in lines} == {
        "referee",
        "bots-random",
        "projector",
        "gateway",
        "operator",
    }
    with served.client(acl.ADMIN) as admin:
        for words in lines:
            admin.execute_command(*words[:2], f"copy-{words[2]}", *words[3:])
            admin.execute_command("ACL", "SETUSER", f"copy-{words[2]}", ">pw")
    port = redis.connection.parse_url(served.admin)["port"]
    with redis.Redis(port=port, username="copy-operator", password="pw") as copy:
        assert copy.set(f"{PREFIX}:x", "1")
        with pytest.raises(redis.exceptions.NoPermissionError):
            copy.set("other:x", "1")
    with (
        redis.Redis(port=port, username="copy-bots-random", password="pw") as copy,
        pytest.raises(redis.exceptions.NoPermissionError),
    ):
        copy.xrange(KEYS.match("m-1"))
