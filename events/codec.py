"""JSON and MessagePack codecs for envelopes, events and commands, with typed decode errors.

Decoders are built once per process and reused (msgspec's fast path).
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, TypeVar

import msgspec

from events.envelope import CommandEnvelope, Envelope
from events.model import AnyCommand, AnyEvent
from events.wire import Rejected, TurnMessage

Format = Literal["json", "msgpack"]
T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class DecodeError(ValueError):
    """Raised when bytes are not a valid message: malformed data, an unknown type tag, a missing
    field or a wrong type. The message says which."""


class Codec:
    """Encode and decode every message of the system in one format."""

    def __init__(self, fmt: Format = "json") -> None:
        if fmt not in ("json", "msgpack"):
            raise ValueError(f"unknown format {fmt!r}: use json or msgpack")
        self.format = fmt
        self._encoder: msgspec.json.Encoder | msgspec.msgpack.Encoder = (
            msgspec.json.Encoder() if fmt == "json" else msgspec.msgpack.Encoder()
        )
        self._envelope: _Decoder[Envelope] = _decoder(fmt, Envelope)
        self._command_envelope: _Decoder[CommandEnvelope] = _decoder(fmt, CommandEnvelope)
        self._event: _Decoder[AnyEvent] = _union_decoder(fmt, AnyEvent)
        self._command: _Decoder[AnyCommand] = _union_decoder(fmt, AnyCommand)
        self._turn: _Decoder[TurnMessage] = _decoder(fmt, TurnMessage)
        self._rejected: _Decoder[Rejected] = _decoder(fmt, Rejected)

    def encode(self, message: msgspec.Struct) -> bytes:
        """Encode any message (envelope, event, command, rejection, view)."""
        return self._encoder.encode(message)

    def decode_envelope(self, data: bytes) -> Envelope:
        """Decode a stored event envelope; raise DecodeError if it is not one."""
        return _decode(self._envelope, data)

    def decode_command_envelope(self, data: bytes) -> CommandEnvelope:
        """Decode a command envelope; raise DecodeError if it is not one."""
        return _decode(self._command_envelope, data)

    def decode_event(self, data: bytes) -> AnyEvent:
        """Decode a bare event; raise DecodeError if it is not one."""
        return _decode(self._event, data)

    def decode_command(self, data: bytes) -> AnyCommand:
        """Decode a bare command; raise DecodeError if it is not one."""
        return _decode(self._command, data)

    def decode_turn(self, data: bytes) -> TurnMessage:
        """Decode a turn message for a bot; raise DecodeError if it is not one."""
        return _decode(self._turn, data)

    def decode_rejected(self, data: bytes) -> Rejected:
        """Decode a rejection sent back to a command's sender; raise DecodeError otherwise."""
        return _decode(self._rejected, data)


class _Decoder(Protocol[T_co]):
    def decode(self, buf: bytes, /) -> T_co: ...


def _decoder(fmt: Format, typ: type[T]) -> _Decoder[T]:
    if fmt == "json":
        return msgspec.json.Decoder(typ)
    return msgspec.msgpack.Decoder(typ)


def _union_decoder(fmt: Format, union: object) -> _Decoder[Any]:
    """A decoder for a tagged union of structs (a type mypy cannot take as ``type[T]``; the
    caller names what it decodes)."""
    if fmt == "json":
        return msgspec.json.Decoder(union)
    return msgspec.msgpack.Decoder(union)


def _decode(decoder: _Decoder[T], data: bytes) -> T:
    try:
        return decoder.decode(data)
    except msgspec.ValidationError as e:
        raise DecodeError(f"invalid message: {e}") from None
    except msgspec.DecodeError as e:
        raise DecodeError(f"malformed data: {e}") from None


JSON = Codec("json")
MSGPACK = Codec("msgpack")
