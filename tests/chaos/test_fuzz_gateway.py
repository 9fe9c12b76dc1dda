"""The gateway fuzzed from its own OpenAPI document (Schemathesis), on a real running gateway
in front of a real stack: whatever a request holds, the answer is never a 5xx, its status,
content type, headers and body are the ones the document declares for it, and it comes
within seconds (no hang).

The short run (a fixed seed, a few examples an operation) is part of ``make test``;
``make chaos`` runs many more (DOMINO_FUZZ_EXAMPLES, DOMINO_FUZZ_SEED).
"""

from __future__ import annotations

import json
import os

import httpx
import hypothesis
import pytest
import schemathesis
from schemathesis import Case

from services.gateway.openapi import openapi
from services.gateway.protocol import API
from tests.gateway.conftest import Gateways

pytestmark = [pytest.mark.chaos]

EXAMPLES = int(os.environ.get("DOMINO_FUZZ_EXAMPLES", "5"))
SEED = int(os.environ.get("DOMINO_FUZZ_SEED", "1"))
ANSWER_S = 10.0
"""Longer than any answer may take: the gateway waits 5 s at most for the referee."""


REFUSALS = [400, 401, 403, 404, 405, 406, 409, 413, 415, 422, 428, 429]
"""What a request off the document may be answered (413: a body over the gateway's limit)."""
schema = schemathesis.openapi.from_dict(
    openapi(),
    config=schemathesis.Config.from_dict(
        {"checks": {"negative_data_rejection": {"expected-statuses": REFUSALS}}}
    ),
)
"""The gateway's document, as it builds it: the served one is the same (checked below)."""


@schema.parametrize()
@hypothesis.settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(hypothesis.HealthCheck),
    database=None,
)
@hypothesis.seed(SEED)
def test_no_request_makes_the_gateway_fail_hang_or_answer_off_its_document(
    case: Case, gateways: Gateways
) -> None:
    """Every operation of the document, positive and negative examples: no 5xx, the answer
    as documented, within ANSWER_S."""
    case.call_and_validate(
        base_url=gateways.url,
        timeout=ANSWER_S,
        # a request the schema allows may still be refused for what it means (an unknown
        # match, no seats, a name taken): only its answer is held to the document
        excluded_checks=[schemathesis.checks.positive_data_acceptance],
    )


def test_the_fuzzed_document_is_the_one_the_gateway_serves(gateways: Gateways) -> None:
    """The fuzzer reads the document from the code that serves it; they are one."""
    served = httpx.get(f"{gateways.url}{API}/openapi.json", timeout=10).json()
    assert served == json.loads(json.dumps(openapi()))


# -- what the fuzzer found, each kept -----------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/matches?player=", "/ratings?family=", "/matches?family=", "/matches?status="]
)
def test_an_empty_query_value_is_refused_as_the_document_says_not_taken_as_absent(
    gateways: Gateways, path: str
) -> None:
    """``?player=`` listed every match and ``?family=`` the Express ratings: an empty value was
    dropped as if the parameter were absent, though the document allows no empty one."""
    r = httpx.get(f"{gateways.url}{API}{path}", timeout=10)
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "invalid_query"


@pytest.mark.parametrize(
    ("path", "methods"),
    [
        ("/matches", {"GET", "POST"}),
        ("/matches/m-0", {"GET", "DELETE"}),
        ("/account/token", {"POST", "DELETE"}),
        ("/challenges", {"GET", "POST"}),
    ],
)
def test_a_405_names_in_allow_every_method_of_its_path(
    gateways: Gateways, path: str, methods: set[str]
) -> None:
    """RFC 9110: a 405 lists the methods the resource supports. Where a path has one route per
    method, only the first route's were named (``Allow: GET, HEAD`` for /matches)."""
    r = httpx.request("PATCH", f"{gateways.url}{API}{path}", timeout=10)
    assert r.status_code == 405, r.text
    allowed = {m.strip() for m in r.headers["allow"].split(",")}
    assert methods <= allowed and allowed <= methods | {"HEAD"}, r.headers["allow"]


@pytest.mark.parametrize("what", ["stream", "moves"])
def test_a_seat_that_is_no_number_is_a_404_the_document_declares(
    gateways: Gateways, what: str
) -> None:
    """The seat's paths take a whole number; any other is no path at all (404 ``not_found``),
    which the document did not say for either."""
    url = f"{gateways.url}{API}/matches/m-0/seats/zero/{what}"
    r = httpx.request("GET" if what == "stream" else "POST", url, timeout=10)
    assert (r.status_code, r.json()["error"]) == (404, "not_found")
    operation = openapi()["paths"][f"{API}/matches/{{match_id}}/seats/{{seat}}/{what}"]
    answer = operation["get" if what == "stream" else "post"]["responses"]["404"]
    codes = answer["content"]["application/json"]["schema"]["allOf"][1]
    assert "not_found" in codes["properties"]["error"]["enum"]


def test_a_player_key_with_a_line_break_is_a_404_the_document_declares(
    gateways: Gateways,
) -> None:
    """Found with seed 2: a key with a line break matches no route (``{key:path}`` stops at
    it), so the 404 is ``not_found``, which the document did not list for the path."""
    r = httpx.get(f"{gateways.url}{API}/players/a%0Ab", timeout=10)
    assert (r.status_code, r.json()["error"]) == (404, "not_found")
    answer = openapi()["paths"][f"{API}/players/{{key}}"]["get"]["responses"]["404"]
    codes = answer["content"]["application/json"]["schema"]["allOf"][1]
    assert "not_found" in codes["properties"]["error"]["enum"]
