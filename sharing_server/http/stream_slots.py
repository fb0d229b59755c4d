"""Caps on file listings streaming at once: per token, and for the whole process.

Rate limits count requests as they arrive; a stream is held until its client has
taken the last byte, which a slow or stalled client can put off until the send
timeout. Meanwhile it keeps its buffers, its reader's state and a connection, so
how many are open at once is capped too. A token beyond its cap gets 429; beyond
the process's cap, 503; both with Retry-After, since streams end within seconds
(or at the send timeout). Like the rate limits, caps hold per process.
"""

from __future__ import annotations

import threading
from collections import Counter

from share_store.errors import RateLimited
from sharing_server.http.errors import ServerBusy

# Most streams end within a second; a client told to wait that long retries soon enough.
RETRY_AFTER = 1


class StreamSlots:
    """The streams open now; a `per_token` or `per_process` of 0 turns that cap off."""

    def __init__(self, per_token: int, per_process: int) -> None:
        self.per_token = per_token
        self.per_process = per_process
        self.open_count = 0
        self._by_token: Counter[str] = Counter()
        # Streams open in worker threads (where requests are authenticated) and close on the event loop.
        self._lock = threading.Lock()

    def stream(self) -> Stream:
        """A stream not counted yet: it counts once `open`, when its token is known."""
        return Stream(self)

    def _open(self, token_id: str) -> None:
        with self._lock:
            # The token's cap first: a token over it is told so, whatever the server's load.
            if self.per_token and self._by_token[token_id] >= self.per_token:
                raise RateLimited(
                    f"This token has its most responses streaming at once ({self.per_token}): "
                    f"retry after {RETRY_AFTER} s.",
                    RETRY_AFTER,
                )
            if self.per_process and self.open_count >= self.per_process:
                raise ServerBusy(
                    f"The server is streaming its most responses at once ({self.per_process}): "
                    f"retry after {RETRY_AFTER} s.",
                    RETRY_AFTER,
                )
            self._by_token[token_id] += 1
            self.open_count += 1

    def _close(self, token_id: str) -> None:
        with self._lock:
            self.open_count -= 1
            self._by_token[token_id] -= 1
            if not self._by_token[token_id]:
                del self._by_token[token_id]


class Stream:
    """One stream's place among the open ones: taken by `open`, given back by `close`."""

    def __init__(self, slots: StreamSlots) -> None:
        self._slots = slots
        self._token_id: str | None = None

    def open(self, token_id: str) -> None:
        """Count the stream for its token and the process: RateLimited or ServerBusy beyond a cap."""
        assert self._token_id is None, "a stream opens once"
        self._slots._open(token_id)
        self._token_id = token_id

    def close(self) -> None:
        """Give the place back, if the stream had one; closing again does nothing."""
        if self._token_id is not None:
            self._slots._close(self._token_id)
            self._token_id = None
