"""Path parameters and headers the gateway reads from outside are parsed strictly, on a real
gateway process: numbers of thousands of digits (which int() refuses) and lengths past what
any value takes are answered with typed 4xx errors, never a 500."""

from __future__ import annotations

import socket

import httpx
import pytest

from tests.gateway.conftest import Gateways, create, join

pytestmark = [pytest.mark.service]

HUGE = "9" * 5000  # int() refuses more than 4300 digits


def test_a_seat_of_thousands_of_digits_is_no_seat_on_every_method(gateways: Gateways) -> None:
    match_id = create(gateways.url, [None, None], rules={"players": 2})
    _, token = join(gateways.url, match_id)
    base = f"{gateways.url}/api/v1/matches/{match_id}/seats"
    auth = {"authorization": f"Bearer {token}", "idempotency-key": "k1"}
    for method, path in (
        ("GET", f"{base}/{HUGE}/stream"),
        ("POST", f"{base}/{HUGE}/moves"),
        ("PUT", f"{base}/{HUGE}/moves"),
        ("HEAD", f"{base}/{HUGE}/stream"),
        ("GET", f"{base}/12345/stream"),
    ):
        r = httpx.request(method, path, headers=auth, json={"type": "pass"})
        assert r.status_code == 404, (method, path[-20:], r.status_code, r.text[:200])


def test_a_content_length_of_thousands_of_digits_is_a_bad_request(gateways: Gateways) -> None:
    host, port = gateways.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(
            b"POST /api/v1/matches HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: " + HUGE.encode() + b"\r\n\r\n"
        )
        answer = s.recv(4096)
    status = int(answer.split(b" ", 2)[1])
    assert 400 <= status < 500, answer[:300]


def test_list_and_stream_parameters_past_their_lengths_are_422_or_400(
    gateways: Gateways,
) -> None:
    api = f"{gateways.url}/api/v1"
    match_id = create(gateways.url, [None, None], rules={"players": 2})
    for path, params, status in (
        ("/matches", {"limit": HUGE}, 422),
        ("/matches", {"status": "finished", "cursor": f"1:{'m' * 5000}"}, 422),
        ("/matches", {"player": "p" * 5000}, 422),
        (f"/matches/{match_id}/stream", {"after": HUGE}, 400),
        (f"/matches/{match_id}/replay", {"seat": HUGE}, 422),
        ("/ratings", {"family": "f" * 5000}, 422),
    ):
        r = httpx.get(f"{api}{path}", params=params)
        assert r.status_code == status, (path, list(params), r.status_code, r.text[:200])
    r = httpx.get(f"{api}/matches/{match_id}/stream", headers={"last-event-id": HUGE})
    assert r.status_code == 400, r.text[:200]
    r = httpx.get(f"{api}/players/{'k' * 5000}")
    assert r.status_code == 404, r.text[:200]
