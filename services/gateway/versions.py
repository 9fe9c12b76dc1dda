"""Which version of the protocol a request speaks, and the version every answer states.

A client names the version it speaks in the ``Domino-Protocol`` header (a whole number, written
without a sign, a point or a leading zero: ``1``); a request without it is taken as the
current version, :data:`~services.gateway.protocol.PROTOCOL` — curl, browsers and the
gateway's own pages send none. A request naming a version this gateway does not speak, or
something that is no version, is refused before anything else is looked at: a 400
``unsupported_protocol`` with the versions it speaks, so no answer — a stream least of all —
is ever written in a version its client would misread. Every answer, refusals included,
carries the header with the version it is in (:data:`STATED`).

400 rather than 426 Upgrade Required: 426 is HTTP's own protocol switch (it must name one in an
``Upgrade`` header, which proxies act on), and it would be wrong for a client newer than the
gateway, or one whose header is malformed; 400 is what every client and proxy treats as "this
request, as sent, will not be served", and the SDK does not retry it.
"""

from __future__ import annotations

from starlette.types import Scope

from services.gateway.http import ApiError
from services.gateway.protocol import PROTOCOL, PROTOCOL_HEADER, SPOKEN

HEADER = PROTOCOL_HEADER.lower().encode()
STATED = (HEADER, str(PROTOCOL).encode())
"""The header every answer carries: the version it is in."""
_SPOKEN = {str(version).encode(): version for version in SPOKEN}
_LONGEST = 8
"""The most of a refused header a message quotes back."""


def refusal(scope: Scope) -> ApiError | None:
    """Why a request may not be served in any version this gateway speaks (400
    ``unsupported_protocol``), or None when it may: it names one of them, or none."""
    named = [value for name, value in scope["headers"] if name == HEADER]
    if not named:
        return None
    asked = b", ".join(named)  # a header sent twice is one list (RFC 9110 5.3): no version
    if asked in _SPOKEN:
        return None
    return ApiError(400, "unsupported_protocol", _why(asked), supported=list(SPOKEN))


def _why(asked: bytes) -> str:
    """What the refusal says to do, for a client older or newer than the gateway, or one whose
    header is no version."""
    spoken = f"version {SPOKEN[0]}" if len(SPOKEN) == 1 else f"versions {_listed(SPOKEN)}"
    text = asked.decode("latin-1")
    if not _is_version(text):
        quoted = repr(text if len(text) <= _LONGEST else text[:_LONGEST] + "...")
        return (
            f"{PROTOCOL_HEADER}: {quoted} is no version of the protocol: this gateway speaks "
            f"{spoken}; name one, or send no {PROTOCOL_HEADER} header for version {PROTOCOL}"
        )
    version = int(text)
    if version > SPOKEN[-1]:
        return (
            f"this gateway speaks {spoken} of the protocol, older than the {version} your "
            f"client speaks: use a client of version {SPOKEN[-1]} (a domino-sdk that speaks "
            f"it), or a gateway that speaks {version}"
        )
    return (
        f"this gateway speaks {spoken} of the protocol, not {version}: upgrade your client "
        "(pip install -U domino-sdk, for the Python SDK)"
    )


def _is_version(text: str) -> bool:
    """Whether ``text`` is a version as the protocol writes one: a whole number, no sign, no
    point, no leading zero (``01`` and ``1.0`` are not ``1``)."""
    return text.isascii() and text.isdigit() and len(text) <= 6 and str(int(text)) == text


def _listed(versions: tuple[int, ...]) -> str:
    return ", ".join(str(v) for v in versions[:-1]) + f" and {versions[-1]}"
