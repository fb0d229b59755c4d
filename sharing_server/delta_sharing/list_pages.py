"""Pages of the protocol's lists (`/shares`, `/schemas`, `/tables`, `/all-tables`), read from the store
one page at a time.

A page token carries the list it belongs to and the key of the last item shown
(a share's name, a schema's, a table's schema and name, all lower-cased as the
store orders them), signed by the server; the next page is read after that key
with the store's index. A page of 100 of a 1,000-table share then costs what a
page of a 100-table share does, not the whole list sliced.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from starlette.requests import Request

from share_store.errors import InvalidParameter
from share_store.signing.token_codec import TokenCodec
from sharing_server.delta_sharing.requests import parse_max_results

T = TypeVar("T")


@dataclass(frozen=True)
class ListPage:
    """Where a page starts (after `after`, None from the start) and how many items it holds."""

    scope: str
    max_results: int
    after: Any

    @property
    def fetch(self) -> int:
        """Items to read: one past the page, to learn whether another follows."""
        return self.max_results + 1


def list_page(codec: TokenCodec, request: Request, scope: str) -> ListPage:
    """The page a list request asks for; a token of another list, or altered, is refused."""
    max_results = parse_max_results(request.query_params.get("maxResults"))
    token = request.query_params.get("pageToken")
    if not token:
        return ListPage(scope, max_results, None)
    try:
        payload = codec.decode(token)
    except ValueError:
        raise InvalidParameter("invalid 'nextPageToken'") from None
    if payload.get("s") != scope or "k" not in payload:
        raise InvalidParameter("invalid 'nextPageToken'")
    after = payload["k"]
    return ListPage(scope, max_results, tuple(after) if isinstance(after, list) else after)


def page_body(
    codec: TokenCodec,
    page: ListPage,
    rows: Sequence[T],
    key_of: Callable[[T], Any],
    item_of: Callable[[T], dict[str, Any]],
) -> dict[str, Any]:
    """The response of a page read with `page.fetch` rows: its items, and a token if more follow."""
    shown = rows[: page.max_results]
    body: dict[str, Any] = {}
    if shown:
        body["items"] = [item_of(row) for row in shown]
    if len(rows) > page.max_results:
        last = key_of(shown[-1]) if shown else page.after
        body["nextPageToken"] = codec.encode({"s": page.scope, "k": last})
    return body
