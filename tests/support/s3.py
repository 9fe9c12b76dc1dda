"""An S3-compatible server for the archive's tests: moto's standalone server (``moto_server``,
from the dev extra) on a free loopback port, with a fresh bucket per test."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
"""What moto accepts; the processes a test starts get them in their environment."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def s3_server() -> Iterator[str]:
    """Run ``moto_server`` on 127.0.0.1 until the block ends; yield its endpoint URL."""
    binary = shutil.which("moto_server") or str(Path(sys.executable).with_name("moto_server"))
    port = _free_port()
    process = subprocess.Popen(
        [binary, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **CREDENTIALS},
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(endpoint, timeout=1.0)
                break
            except httpx.HTTPError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.1)
        yield endpoint
    finally:
        process.terminate()
        process.wait(10)


def new_bucket(endpoint: str) -> str:
    """Create a bucket of its own on the server; return its name."""
    import boto3

    name = f"archive-{uuid.uuid4().hex[:12]}"
    client = boto3.session.Session(
        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        region_name=CREDENTIALS["AWS_DEFAULT_REGION"],
    ).client("s3", endpoint_url=endpoint)
    client.create_bucket(Bucket=name)
    return name
