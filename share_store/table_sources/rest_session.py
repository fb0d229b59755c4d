"""pyiceberg's REST catalog with a deadline on every request it sends.

pyiceberg sends without a timeout, so a catalog that accepts connections but
never answers would hold the request's worker thread, and the recipient, for
good. With one, the recipient gets a 503 within seconds. Loaded through
pyiceberg's `py-catalog-impl` (see `CatalogRegistry.catalog`); this module
imports pyiceberg, so it is imported only when a REST catalog is used.
"""

from __future__ import annotations

from typing import Any

from pyiceberg.catalog.rest import RestCatalog
from requests import PreparedRequest, Response, Session
from requests.adapters import BaseAdapter

#: Seconds allowed to connect, and to wait for the next bytes of an answer (a
#: catalog may read the table's metadata from storage before it answers).
CONNECT_TIMEOUT = "rest.connect-timeout"
READ_TIMEOUT = "rest.read-timeout"
DEFAULT_CONNECT_TIMEOUT = 2.0
DEFAULT_READ_TIMEOUT = 10.0


def bound(adapter: BaseAdapter, timeout: tuple[float, float]) -> None:
    """Make `adapter` apply `timeout` to every request sent without one."""
    send = adapter.send

    def send_with_timeout(request: PreparedRequest, **kwargs: Any) -> Response:
        if kwargs.get("timeout") is None:
            kwargs["timeout"] = timeout
        return send(request, **kwargs)

    adapter.send = send_with_timeout  # type: ignore[method-assign]


class BoundedRestCatalog(RestCatalog):
    def _create_session(self) -> Session:
        # Every session pyiceberg makes comes from here, the one that fetches the
        # catalog's config at construction included; adapters it mounts (SigV4's)
        # are mounted by then.
        session = super()._create_session()
        timeout = (
            float(self.properties.get(CONNECT_TIMEOUT, DEFAULT_CONNECT_TIMEOUT)),
            float(self.properties.get(READ_TIMEOUT, DEFAULT_READ_TIMEOUT)),
        )
        for adapter in session.adapters.values():
            bound(adapter, timeout)
        return session
