"""The archive on an S3-compatible object store (boto3: ``pip install 'domino-service[s3]'``).

Each match is the object ``<prefix>/ab/cd/<id>.jsonl.gz`` (see
:func:`services.store.archive.object_name`), and its document ``….json`` beside it. A put is
checked by reading the object back; credentials and region come from wherever boto3 finds
them (environment, its config files, an instance role). boto3 blocks, so each call runs in a
thread.
"""

from __future__ import annotations

import asyncio
from typing import Any

from services.store.archive import (
    EXTRA,
    SUFFIX,
    Archive,
    ArchiveError,
    check_page,
    match_of,
    object_name,
    player_folder,
)


class S3Archive(Archive):
    """Archived matches as objects of ``bucket`` under ``prefix``."""

    def __init__(self, bucket: str, prefix: str = "", *, endpoint: str | None = None) -> None:
        try:
            import boto3
        except ImportError:  # pragma: no cover - depends on the install
            raise ArchiveError(
                "an s3:// archive needs boto3: pip install 'domino-service[s3]'"
            ) from None
        if not bucket:
            raise ArchiveError("an s3:// archive names its bucket: s3://bucket/prefix")
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.endpoint = endpoint
        self._client: Any = boto3.session.Session().client("s3", endpoint_url=endpoint)

    def describe(self) -> str:
        """The bucket and prefix (and the endpoint when not AWS's)."""
        where = f"s3://{self.bucket}/{self.prefix}"
        return where if self.endpoint is None else f"{where} at {self.endpoint}"

    def key(self, match_id: str, suffix: str = SUFFIX) -> str:
        """The object key of a match's log (or, with ``suffix`` EXTRA, of its document)."""
        name = object_name(match_id) + suffix
        return f"{self.prefix}/{name}" if self.prefix else name

    async def put(self, match_id: str, log: bytes, extra: bytes | None = None) -> None:
        """Put the objects, then read the log back and compare; a store that refuses or
        cannot be reached is an ArchiveError too."""
        try:
            await asyncio.to_thread(self._put, match_id, log, extra)
        except ArchiveError:
            raise
        except Exception as e:
            raise ArchiveError(f"match {match_id!r} not archived in {self.describe()}: {e}") from e

    def _put(self, match_id: str, log: bytes, extra: bytes | None) -> None:
        key = self.key(match_id)
        if extra is not None:
            self._client.put_object(Bucket=self.bucket, Key=self.key(match_id, EXTRA), Body=extra)
        there = self._get(key)
        if there is not None:
            if there != log:
                raise ArchiveError(f"match {match_id!r} is archived already with another log")
            return
        self._client.put_object(Bucket=self.bucket, Key=key, Body=log)
        if self._get(key) != log:
            raise ArchiveError(f"archived log of {match_id!r} does not read back as written")

    def _get(self, key: str) -> bytes | None:
        try:
            reply = self._client.get_object(Bucket=self.bucket, Key=key)
        except self._client.exceptions.NoSuchKey:
            return None
        except Exception as e:  # a 404 from a store that does not say NoSuchKey
            if _status(e) == 404:
                return None
            raise
        body: bytes = reply["Body"].read()
        return body

    async def get(self, match_id: str) -> bytes | None:
        """The log object's bytes, None without one."""
        return await asyncio.to_thread(self._get, self.key(match_id))

    async def extra(self, match_id: str) -> bytes | None:
        """The document object's bytes, None without one."""
        return await asyncio.to_thread(self._get, self.key(match_id, EXTRA))

    async def ids(self) -> list[str]:
        """Every match whose log object is under the prefix."""
        return await asyncio.to_thread(self._ids)

    def _ids(self) -> list[str]:
        out: list[str] = []
        pages = self._client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=f"{self.prefix}/" if self.prefix else ""
        )
        for page in pages:
            for item in page.get("Contents", ()):
                match_id = match_of(str(item["Key"]).rpartition("/")[2])
                if match_id is not None:
                    out.append(match_id)
        return out

    def page_key(self, identity: str, page: str = "") -> str:
        """The object key of a player's page (without ``page``: the prefix of its pages)."""
        name = f"{player_folder(identity)}/{check_page(page) + EXTRA if page else ''}"
        return f"{self.prefix}/{name}" if self.prefix else name

    async def put_page(self, identity: str, page: str, data: bytes) -> None:
        """Put the page's object (a store that refuses is an ArchiveError)."""
        key = self.page_key(identity, page)
        try:
            await asyncio.to_thread(self._client.put_object, Bucket=self.bucket, Key=key, Body=data)
        except Exception as e:
            raise ArchiveError(f"page {key!r} not written in {self.describe()}: {e}") from e

    async def pages(self, identity: str) -> list[str]:
        """The page objects under the player's prefix."""
        folder = self.page_key(identity)

        def names() -> list[str]:
            out: list[str] = []
            pages = self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=folder
            )
            for listed in pages:
                for item in listed.get("Contents", ()):
                    name = str(item["Key"])[len(folder) :]
                    if name.endswith(EXTRA):
                        out.append(name[: -len(EXTRA)])
            return sorted(out)

        return await asyncio.to_thread(names)

    async def page(self, identity: str, page: str) -> bytes | None:
        """The page object's bytes, None without one."""
        return await asyncio.to_thread(self._get, self.page_key(identity, page))


def _status(error: Exception) -> int | None:
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return int(status) if status is not None else None
    return None
