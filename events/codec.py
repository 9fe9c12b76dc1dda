"""JSON and MessagePack codecs for envelopes, events and commands, with typed decode errors.

Decoders are built once per process and reused (msgspec's fast path). An envelope of the
current schema decodes on that path; one of another schema is read as plain data and brought
to the current one by :mod:`events.upcast`, or refused there (``SchemaTooNew``) when a newer
release wrote it: every reader of a stored shape goes through here.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, TypeVar

import msgspec

from events.envelope import SCHEMA, CommandEnvelope, Envelope
from events.errors import DecodeError as DecodeError
from events.errors import SchemaTooNew
from events.model import AnyCommand, AnyEvent
from events.upcast import Raw, upcast
from events.wire import Rejected, TurnMessage

Format = Literal["json", "msgpack"]
T = TypeVar("T")
S = TypeVar("S", Envelope, CommandEnvelope)
T_co = TypeVar("T_co", covariant=True)


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
        self._plain: _Decoder[Any] = _union_decoder(fmt, Any)

    def encode(self, message: msgspec.Struct) -> bytes:
        """Encode any message (envelope, event, command, rejection, view)."""
        return self._encoder.encode(message)

    def decode_envelope(self, data: bytes) -> Envelope:
        """Decode a stored event envelope of any schema this reader knows, in the current
        shape; raise SchemaTooNew (a DecodeError) for a newer schema and DecodeError if it
        is not one."""
        return self._decode_stored(self._envelope, Envelope, "event", data)

    def decode_command_envelope(self, data: bytes) -> CommandEnvelope:
        """Decode a command envelope of any schema this reader knows, in the current shape;
        raise SchemaTooNew (a DecodeError) for a newer schema and DecodeError if it is not
        one."""
        return self._decode_stored(self._command_envelope, CommandEnvelope, "command", data)

    def _decode_stored(self, decoder: _Decoder[S], typ: type[S], field: str, data: bytes) -> S:
        """The typed fast path for the current schema; anything else (an older shape, a newer
        schema, or no envelope at all) is read again as plain data and upcast or refused."""
        try:
            message = decoder.decode(data)
        except (msgspec.ValidationError, msgspec.DecodeError) as e:
            failed: Exception = e
        else:
            if message.schema == SCHEMA:
                return message
            failed = DecodeError(f"schema {message.schema} read as the current shape")
        try:
            raw = self._plain.decode(data)
        except msgspec.DecodeError:
            raw = None
        if not isinstance(raw, dict) or raw.get("schema", SCHEMA) == SCHEMA:
            raise _typed(failed) from None
        return _convert(upcast(raw, field), typ)

    def decode_event(self, data: bytes) -> AnyEvent:
        """Decode a bare event; raise DecodeError if it is not one."""
        return _decode(self._event, data)

    def decode_command(self, data: bytes) -> AnyCommand:
        """Decode a bare command; raise DecodeError if it is not one."""
        return _decode(self._command, data)

    def decode_turn(self, data: bytes) -> TurnMessage:
        """Decode a turn message for a bot; raise SchemaTooNew when a newer release wrote it
        and DecodeError if it is not one."""
        turn = _decode(self._turn, data)
        if turn.schema > SCHEMA:
            raise SchemaTooNew(turn.schema, SCHEMA)
        return turn

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
    except (msgspec.ValidationError, msgspec.DecodeError) as e:
        raise _typed(e) from None


def _typed(error: Exception) -> DecodeError:
    """The DecodeError to raise for what msgspec raised."""
    if isinstance(error, DecodeError):
        return error
    if isinstance(error, msgspec.ValidationError):
        return DecodeError(f"invalid message: {error}")
    return DecodeError(f"malformed data: {error}")


def _convert(raw: Raw, typ: type[S]) -> S:
    try:
        return msgspec.convert(raw, typ)
    except msgspec.ValidationError as e:
        raise DecodeError(f"invalid message after upcasting: {e}") from None


JSON = Codec("json")
MSGPACK = Codec("msgpack")
