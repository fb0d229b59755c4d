"""Where a page token is made: paging of file listings (`/query`, `/changes`) with `maxFiles`.

A page token carries the table, the version (or latest version) the first
page was read at, a checksum of the request's parameters and the offset of
the next line, signed so that a recipient can neither forge nor alter one.
Every page repeats the head lines, so a client can check that the protocol
and metadata did not change between pages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any, Generic, TypeVar

from share_store.errors import InvalidParameter
from share_store.signing.token_codec import TokenCodec
from sharing_server.delta_sharing.requests import MAX_PAGE_FILES
from sharing_server.http.ndjson import single_lines

PAGE_TOKEN_TTL_MS = 3 * 24 * 3600 * 1000
T = TypeVar("T")
_END: Any = object()

#: A protocol line, or file lines already encoded (see `line_templates`, `LineBlock`).
Line = dict[str, Any] | bytes


@dataclass
class Paging:
    """Where a page starts and how many lines after the head it may hold."""

    offset: int = 0
    size: int | None = None
    token_payload: dict[str, Any] | None = None


def decode_token(codec: TokenCodec, token: str, what: str, table_id: str, now_ms: int) -> dict[str, Any]:
    """The payload of a page or refresh token, refused if altered, expired or another table's."""
    try:
        payload = codec.decode(token)
    except ValueError as error:
        raise InvalidParameter(f"Error decoding the {what}: {error}") from None
    if payload.get("t") != table_id:
        raise InvalidParameter(f"The table specified in the {what} does not match the table being queried.")
    if int(payload.get("e", 0)) < now_ms:
        raise InvalidParameter(f"The {what} has expired. Please restart the query.")
    return payload


class PageOf(Generic[T]):
    """One page of a listing's entries, cut before they are encoded.

    A later page skips the earlier pages' files: skipped as entries, they are
    never signed (skipped as lines, every earlier file was signed again, each
    page, and counted in the audit's bytes). Whether more files follow is learnt
    from the next entry, which is not encoded either.
    """

    def __init__(self, entries: Iterable[T], offset: int, size: int | None) -> None:
        self._entries = iter(entries)
        self.offset = offset
        self.size = size

    def __iter__(self) -> Iterator[T]:
        return islice(self._entries, self.offset, None if self.size is None else self.offset + self.size)

    def more(self) -> bool:
        """Whether an entry follows the page (asked once the page is listed)."""
        return next(self._entries, _END) is not _END


class Pager:
    """Cuts file listings into pages and makes the tokens that resume them."""

    def __init__(self, secret: bytes) -> None:
        self.tokens = TokenCodec(secret, "query-page")

    def start(
        self, table_id: str, token: str | None, checksum: str, max_files: int | None, now_ms: int
    ) -> Paging:
        """The page a request asks for: the first, or the one its page token resumes."""
        size = min(max_files, MAX_PAGE_FILES) if max_files else None
        if not token:
            return Paging(0, size)
        payload = decode_token(self.tokens, token, "page token", table_id, now_ms)
        if payload.get("c") != checksum:
            raise InvalidParameter(
                "Query parameter mismatch detected for the next page query. The query parameter "
                "cannot change when querying the next page results."
            )
        return Paging(int(payload["o"]), size, payload)

    def lines(
        self,
        head: Sequence[Line],
        body: Iterator[Line],
        paging: Paging,
        page_state: dict[str, Any] | None,
        now_ms: int,
        end_fields: Callable[[], dict[str, Any]],
        later_state: Callable[[], dict[str, Any]] | None = None,
        cut: PageOf[Any] | None = None,
    ) -> Iterator[Line]:
        """Head lines, one page of body lines, then the endStreamAction unless `page_state` is None.

        `page_state` goes into the next page's token, with what `later_state`
        adds once the page's lines are made; `end_fields` likewise adds fields
        to the endStreamAction (URL expiries are known only then). With `cut`,
        `body` holds the page's lines alone, made from `cut`'s entries.
        """
        yield from head
        emitted = 0
        has_more = False
        if paging.size is not None or paging.offset:
            body = single_lines(body)  # counted line by line
        if cut is not None:
            for line in body:
                yield line
                emitted += 1
            has_more = paging.size is not None and cut.more()
        elif paging.size is None:  # one page of everything: no line to count
            yield from islice(body, paging.offset, None)
        else:
            for line in islice(body, paging.offset, paging.offset + paging.size + 1):
                if emitted == paging.size:
                    has_more = True
                    break
                yield line
                emitted += 1
        if page_state is None:
            return
        end: dict[str, Any] = {}
        if has_more:
            state = page_state | (later_state() if later_state else {})
            state |= {"o": paging.offset + emitted, "e": now_ms + PAGE_TOKEN_TTL_MS}
            end["nextPageToken"] = self.tokens.encode(state)
        end.update(end_fields())
        yield {"endStreamAction": end}
