"""Failed admin-token attempts, limited per client address and in all: `SignInThrottle`; and the
admin token's one check, `AdminToken`.

The console's sign-in, the admin API and the writable catalog (`/_iceberg`) take
the admin token. Wrong tokens are counted in a sliding window, per client address
and over all addresses. An address at its own limit is refused (429,
`Retry-After`) without its token being looked at, until its oldest failure leaves
the window. While all addresses together are at the overall limit, every address
that has failed within the window is refused too, but an address that has not is
still let try: others' failures never lock the provider out, and a wrong token
from a new address is one more failure, after which it is refused as well. A right
token is never counted, and the window is a minute, so a provider signing in from
an address that did not fail is unaffected and one from an address that did waits
a minute at most.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

from share_store.authentication.tokens import matches_hash
from share_store.errors import RateLimited

WINDOW_SECONDS = 60.0
PER_ADDRESS = 10
GLOBAL = 100
#: Addresses remembered at once; the least recently failed are forgotten first.
MAX_ADDRESSES = 10_000


class SignInThrottle:
    def __init__(
        self,
        per_address: int = PER_ADDRESS,
        overall: int = GLOBAL,
        window: float = WINDOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_address, self.overall, self.window = per_address, overall, window
        self._clock = clock
        self._by_address: OrderedDict[str, deque[float]] = OrderedDict()
        self._all: deque[float] = deque()
        self._lock = threading.Lock()

    def _trim(self, failures: deque[float], now: float) -> None:
        while failures and failures[0] <= now - self.window:
            failures.popleft()

    def check(self, address: str) -> None:
        """RateLimited while `address` has failed too often within the window, or has failed at all
        while everyone together has."""
        now = self._clock()
        with self._lock:
            self._trim(self._all, now)
            mine = self._by_address.get(address)
            if mine is not None:
                self._trim(mine, now)
            if not mine:
                # Never refused for others' failures: an attacker failing from many addresses must
                # not lock the provider out. Its token is looked at; a wrong one is a failure.
                return
            if len(mine) >= self.per_address:
                wait = mine[0] + self.window - now
                raise RateLimited(self._message("from this address", wait), wait)
            if len(self._all) >= self.overall:
                # Free again when everyone is below the limit, or this address's failures are gone.
                wait = min(self._all[0], mine[-1]) + self.window - now
                raise RateLimited(self._message("on this server", wait), wait)

    def failed(self, address: str) -> None:
        now = self._clock()
        with self._lock:
            mine = self._by_address.pop(address, None) or deque()
            mine.append(now)
            self._by_address[address] = mine  # most recently failed last
            while len(self._by_address) > MAX_ADDRESSES:
                self._by_address.popitem(last=False)
            self._all.append(now)

    @staticmethod
    def _message(where: str, wait: float) -> str:
        return f"too many wrong admin tokens {where}: retry after {math.ceil(max(wait, 1))} s"


class AdminToken:
    """The admin token, known by its hash: the one check the admin API, the console's sign-in and the
    own warehouses' API make, throttled by one `SignInThrottle` for all three."""

    def __init__(self, token_hash: str | None, throttle: SignInThrottle | None = None) -> None:
        self.token_hash = token_hash
        self.throttle = throttle or SignInThrottle()

    @property
    def enabled(self) -> bool:
        return self.token_hash is not None

    def matches(self, token: str, address: str, notes: dict[str, Any]) -> bool:
        """Whether `token` is the admin token (by hash, in constant time). `RateLimited` while
        `address` failed too often, or failed at all while everyone did. A refusal or a failure is
        put in `notes` (the request's audit line), never the token."""
        if self.token_hash is None:
            return False
        try:
            self.throttle.check(address)
        except RateLimited:
            notes["sign_in"] = "throttled"
            raise
        if matches_hash(token, self.token_hash):
            return True
        self.throttle.failed(address)
        notes["sign_in"] = "failed"
        return False
