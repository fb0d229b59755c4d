"""Failed admin-token attempts, limited per client address and in all: `SignInThrottle`.

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

from starlette.requests import HTTPConnection

from share_store.tokens import matches_hash
from sharing_server.http.errors import RateLimited
from sharing_server.observability.audit import audit_fields

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


def admin_token_matches(connection: HTTPConnection, token: str, token_hash: str) -> bool:
    """Whether `token` is the admin token (by hash, in constant time): the one check the admin API,
    the console's sign-in and the writable catalog make. `RateLimited` while its address failed too
    often, or failed at all while everyone did; each refusal is noted in the audit line, never the
    token."""
    throttle: SignInThrottle = connection.app.state.sign_in_throttle
    address = connection.client.host if connection.client else ""
    try:
        throttle.check(address)
    except RateLimited:
        audit_fields(connection)["sign_in"] = "throttled"
        raise
    if matches_hash(token, token_hash):
        return True
    throttle.failed(address)
    audit_fields(connection)["sign_in"] = "failed"
    return False
