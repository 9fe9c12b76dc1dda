"""Host and Origin checks on requests that change something, on real gateway processes: another
site's page cannot post in a visitor's name, a name rebound to the gateway's address is not
answered, and a gateway listening beyond loopback must be told which names it answers for."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from tests.gateway.conftest import PLAY_LIMITS, Gateways, create, free_port, join
from tests.gateway.test_openapi_accounts import Spec

pytestmark = [pytest.mark.service]

MATCH = {"seats": [None, None], "rules": {"players": 2}}


@pytest.fixture(scope="module")
def named(gateways: Gateways) -> Iterator[str]:
    """A gateway that answers for domino.test only, and takes posts from one other site."""
    env = {
        **PLAY_LIMITS,
        "DOMINO_GATEWAY_ALLOWED_HOSTS": "domino.test",
        "DOMINO_GATEWAY_ALLOWED_ORIGINS": "https://bots.example",
    }
    with gateways.spawned("gateway-named", free_port(), env) as url:
        yield url


def refused(r: httpx.Response, code: str) -> None:
    assert r.status_code == 403, r.text
    assert r.json()["error"] == code, r.text


def test_a_post_from_another_sites_page_is_refused(gateways: Gateways) -> None:
    api = f"{gateways.url}/api/v1"
    for origin in ("http://evil.example", "null", f"http://127.0.0.1:{free_port()}"):
        refused(
            httpx.post(f"{api}/matches", json=MATCH, headers={"origin": origin}),
            "origin_not_allowed",
        )
    # the gateway's own pages post with its own origin; a client that is no browser sends none
    own = gateways.url.removeprefix("http://")
    r = httpx.post(f"{api}/matches", json=MATCH, headers={"origin": f"http://{own}"})
    assert r.status_code == 201, r.text
    assert httpx.post(f"{api}/matches", json=MATCH).status_code == 201


def test_a_body_with_no_content_type_from_another_site_is_refused(gateways: Gateways) -> None:
    """A page may post a body with no Content-Type without asking first: its Origin stops it."""
    r = httpx.post(
        f"{gateways.url}/api/v1/matches",
        content=b'{"seats": [null, null], "rules": {"players": 2}}',
        headers={"origin": "https://evil.example"},
    )
    refused(r, "origin_not_allowed")


def test_moves_and_deletes_from_another_origin_are_refused_before_anything_else(
    gateways: Gateways,
) -> None:
    match_id = create(gateways.url, [None, None], rules={"players": 2})
    seat, token = join(gateways.url, match_id)
    base = f"{gateways.url}/api/v1/matches/{match_id}"
    evil = {"origin": "https://evil.example", "authorization": f"Bearer {token}"}
    r = httpx.post(
        f"{base}/seats/{seat}/moves",
        json={"type": "pass"},
        headers={**evil, "idempotency-key": "k"},
    )
    refused(r, "origin_not_allowed")
    refused(httpx.delete(base, headers=evil), "origin_not_allowed")
    refused(httpx.post(f"{base}/join", json={}, headers=evil), "origin_not_allowed")


def test_the_refusals_are_the_ones_the_openapi_document_lists(
    gateways: Gateways, named: str
) -> None:
    spec = Spec(gateways.url)
    evil = {"origin": "https://evil.example"}
    match_id = create(gateways.url, [None, None], rules={"players": 2})
    m = "/api/v1/matches/{match_id}"
    for path, method, asked in (
        ("/api/v1/matches", "post", "/api/v1/matches"),
        (m, "delete", f"/api/v1/matches/{match_id}"),
        (f"{m}/join", "post", f"/api/v1/matches/{match_id}/join"),
        ("/api/v1/accounts", "post", "/api/v1/accounts"),
        ("/api/v1/seeks/{seek_id}", "delete", "/api/v1/seeks/s-1"),
    ):
        r = httpx.request(method, f"{gateways.url}{asked}", json={}, headers=evil)
        spec.check(path, method, r, 403, "origin_not_allowed")
    r = httpx.post(f"{named}/api/v1/matches", json=MATCH)
    spec.check("/api/v1/matches", "post", r, 403, "host_not_allowed")


def test_reads_are_answered_whatever_their_origin(gateways: Gateways) -> None:
    r = httpx.get(f"{gateways.url}/api/v1/matches", headers={"origin": "https://evil.example"})
    assert r.status_code == 200, r.text


def test_a_gateway_with_allowed_hosts_answers_posts_for_those_hosts_only(named: str) -> None:
    api = f"{named}/api/v1"
    port = named.rpartition(":")[2]
    refused(httpx.post(f"{api}/matches", json=MATCH), "host_not_allowed")  # Host: 127.0.0.1
    rebound = {"host": "attacker.example", "origin": "http://attacker.example"}
    refused(httpx.post(f"{api}/matches", json=MATCH, headers=rebound), "host_not_allowed")
    for host in ("domino.test", f"domino.test:{port}", "DOMINO.test"):
        r = httpx.post(f"{api}/matches", json=MATCH, headers={"host": host})
        assert r.status_code == 201, (host, r.text)
    # its own origin, and the one other site allowed; no other
    for origin, status in (
        ("https://domino.test", 201),
        ("https://bots.example", 201),
        ("https://bots.example.evil", 403),
        ("https://evil.example", 403),
    ):
        r = httpx.post(
            f"{api}/matches", json=MATCH, headers={"host": "domino.test", "origin": origin}
        )
        assert r.status_code == status, (origin, r.text)
    # reads are not checked: probes and spectators reach it by any name
    assert httpx.get(f"{named}/healthz").status_code == 200


def test_a_gateway_listening_beyond_loopback_with_no_allowed_hosts_does_not_start(
    gateways: Gateways,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOMINO_GATEWAY_ALLOWED_")}
    env["REDIS_URL"] = gateways.redis_url
    command = [sys.executable, "-m", "services.cli.main", "gateway", "--host", "0.0.0.0"]
    done = subprocess.run(
        [*command, "--port", str(free_port())], env=env, capture_output=True, timeout=60
    )
    assert done.returncode != 0
    assert b"DOMINO_GATEWAY_ALLOWED_HOSTS" in done.stderr + done.stdout
