"""Executor-side GETs of presigned URLs: whole files or byte ranges, retried with backoff.

Object stores and the sharing server answer 429 and 5xx when busy; a Spark
task should wait and try again rather than fail the job. An expired or
revoked URL (403, or 400 with an expired signature) is not retried here: it
raises `ExpiredUrl` so the reader can ask the server for fresh URLs.
"""

from __future__ import annotations

import io
import random
import threading
import time
from collections.abc import Callable

import requests
import urllib3

#: Statuses worth another try: throttling and server-side failures.
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
ATTEMPTS = 6
FIRST_DELAY_S = 0.2
MAX_DELAY_S = 10.0
TIMEOUT_S = (10.0, 120.0)  # connect, read

_local = threading.local()


class FetchError(OSError):
    """A URL that could not be read, after retries."""


class ExpiredUrl(FetchError):
    """The storage refused the URL's signature: it has expired or been revoked."""


def _session() -> requests.Session:
    # One pooled session per thread: keep-alive across the files of a task.
    session = getattr(_local, "session", None)
    if session is None:
        session = _local.session = requests.Session()
    return session


def _delay(attempt: int, retry_after: str | None) -> float:
    if retry_after and retry_after.isdigit():
        return min(float(retry_after), MAX_DELAY_S)
    base = min(FIRST_DELAY_S * 2**attempt, MAX_DELAY_S)
    # Jitter, so that tasks throttled together do not retry together.
    return base * (0.5 + random.random() / 2)  # noqa: S311


def _redacted(url: str) -> str:
    """The URL without its query string, which holds the signature."""
    return url.split("?", 1)[0]


def get(url: str, start: int | None = None, length: int | None = None) -> bytes:
    """The bytes of `url`, or of `length` bytes from `start`; retried on throttling and 5xx."""
    headers = {}
    if start is not None:
        end = "" if length is None else str(start + length - 1)
        headers["Range"] = f"bytes={start}-{end}"
    last = ""
    for attempt in range(ATTEMPTS):
        try:
            with _session().get(url, headers=headers, timeout=TIMEOUT_S, stream=True) as response:
                status = response.status_code
                # One read of the raw stream: half the CPU of requests' 10 KB chunks.
                content = response.raw.read(decode_content=True) if status in (200, 206) else b""
                text = "" if content else response.text
        except (requests.ConnectionError, requests.Timeout, urllib3.exceptions.HTTPError) as error:
            last = f"{type(error).__name__}: {error}"
            time.sleep(_delay(attempt, None))
            continue
        if status in RETRY_STATUSES:
            last = f"HTTP {status}"
            time.sleep(_delay(attempt, response.headers.get("Retry-After")))
            continue
        if status == 403 or (status == 400 and "expired" in text.lower()):
            raise ExpiredUrl(f"{_redacted(url)}: HTTP {status} (the URL has expired or was revoked)")
        if status not in (200, 206):
            raise FetchError(f"{_redacted(url)}: HTTP {status}: {text[:300]}")
        if status == 200 and start is not None:
            # The server ignored the range and sent the whole object.
            content = content[start : None if length is None else start + length]
        if length is not None and len(content) != length:
            last = f"{len(content)} bytes instead of {length}"
            time.sleep(_delay(attempt, None))
            continue
        return content
    raise FetchError(f"{_redacted(url)}: gave up after {ATTEMPTS} attempts ({last})")


class RangeFile(io.RawIOBase):
    """A remote file of known size, read by `read(start, length)`, for Parquet readers that seek."""

    def __init__(self, read: Callable[[int, int], bytes], size: int) -> None:
        super().__init__()
        self.read_range = read
        self.size = size
        self.position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence]
        self.position = max(0, base + offset)
        return self.position

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        wanted = min(len(buffer), self.size - self.position)
        if wanted <= 0:
            return 0
        data = self.read_range(self.position, wanted)
        memoryview(buffer)[: len(data)] = data
        self.position += len(data)
        return len(data)
