"""A table endpoint's response: its version header, format and lines, paged and ended as asked.

Every file listing (`/query`, streaming, `/changes`) starts by checking the
page it is asked for (`ResponsePages.start`) and ends by cutting its lines to
that page, with the next page's token or an `endStreamAction` where one is
due (`ResponsePages.respond`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sharing_server.delta_sharing.capabilities import Capabilities
from sharing_server.delta_sharing.encoding import LineEncoder
from sharing_server.delta_sharing.paging import Line, PageOf, Pager, Paging
from sharing_server.delta_sharing.requests import ChangesRequest, QueryRequest


@dataclass(frozen=True)
class TableResponse:
    """A response ready to stream: its version header, format and lines."""

    version: int
    response_format: str
    lines: Iterator[Line]
    echo_end_stream_action: bool = False
    file_id_hash: str | None = None  # echoed in the response's `fileidhash` header
    #: The bytes of the data files the lines handed out, once they are made.
    file_bytes: Callable[[], int] | None = None
    #: Whether the lines after the first chunk are made from memory alone: no storage
    #: read, no predicate hint to evaluate (which may take its whole time budget).
    from_memory: bool = False
    #: Whether the lines come in record batches' blocks (a streamed snapshot's, see
    #: `streamed_lines`), which hold several chunks' worth at a time anyway.
    in_blocks: bool = False
    #: Echo `asyncquery=true`: the answer to an async query (its lines, or its status).
    echo_async_query: bool = False


@dataclass(frozen=True)
class PageRequest:
    """The page of a file listing a request asks for, as the response tail needs it."""

    table_id: str
    checksum: str  # of the parameters that shape the file list; page tokens pin it
    max_files: int | None
    capabilities: Capabilities
    file_id_hash: str | None
    now_ms: int
    paging: Paging

    @property
    def resumed(self) -> dict[str, Any] | None:
        """The page token's payload when this page resumes an earlier one."""
        return self.paging.token_payload

    @property
    def cuts(self) -> bool:
        """Whether the listing is cut to a page (`maxFiles`, or a later page of one)."""
        return self.paging.size is not None or bool(self.paging.offset)


class ResponsePages:
    """Pages of file listings: checked as a request starts, cut as its response ends."""

    def __init__(self, secret: bytes) -> None:
        self.pager = Pager(secret)

    def start(
        self,
        table_id: str,
        request: QueryRequest | ChangesRequest,
        capabilities: Capabilities,
        file_id_hash: str | None,
    ) -> PageRequest:
        """The page a file listing asks for, its page token (if any) checked."""
        now_ms = int(time.time() * 1000)
        checksum = request.checksum()
        paging = self.pager.start(table_id, request.page_token, checksum, request.max_files, now_ms)
        return PageRequest(table_id, checksum, request.max_files, capabilities, file_id_hash, now_ms, paging)

    def respond(
        self,
        page: PageRequest,
        version: int,
        encoder: LineEncoder,
        head: Sequence[Line],
        body: Iterator[Line],
        pinned: dict[str, Any],
        wants_end: bool = False,
        end_fields: Callable[[], dict[str, Any]] | None = None,
        later_state: Callable[[], dict[str, Any]] | None = None,
        cut: PageOf[Any] | None = None,
    ) -> TableResponse:
        """One page of `body` after `head`, ending with an endStreamAction when one is due.

        `pinned` is what later pages must keep reading at (a version, or the
        latest version of a range); it goes into the next page's token, with
        what `later_state` adds once the page is made. With `cut`, `body` is the
        page's lines alone (see `paging.PageOf`).
        """

        def all_end_fields() -> dict[str, Any]:
            fields = end_fields() if end_fields else {}
            if encoder.min_expiration is not None:
                fields["minUrlExpirationTimestamp"] = encoder.min_expiration
            return fields

        capabilities = page.capabilities
        ends = wants_end or capabilities.include_end_stream_action or page.max_files is not None
        page_state = {"t": page.table_id, **pinned, "c": page.checksum} if ends else None
        lines = self.pager.lines(
            head, body, page.paging, page_state, page.now_ms, all_end_fields, later_state, cut
        )
        return TableResponse(
            version,
            encoder.format,
            lines,
            capabilities.include_end_stream_action,
            page.file_id_hash,
            encoder.served_bytes,
        )
