"""What a reader raises when bytes are not a message it may read."""

from __future__ import annotations


class DecodeError(ValueError):
    """Raised when bytes are not a valid message: malformed data, an unknown type tag, a missing
    field or a wrong type. The message says which."""


class SchemaTooNew(DecodeError):
    """Raised when a message was written in a schema newer than this reader's (a process of the
    next release wrote it): it is refused, never read as if it were the current shape."""

    def __init__(self, schema: int, known: int) -> None:
        super().__init__(
            f"schema {schema} is newer than this reader's ({known}): a newer release wrote it, "
            "and only a process of that release may read it"
        )
        self.schema = schema


class UnknownSchema(DecodeError):
    """Raised when a message carries a schema older than any upcaster reaches, or one that is
    not a schema number at all."""
