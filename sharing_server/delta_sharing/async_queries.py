"""The protocol's async queries (2026-07): `asyncquery=true` on `/query`, polled by `queryId`.

A client that says `asyncquery=true` sends an idempotency key with its
`/query`. The query is made (or found, for the same caller, table and key) in
the store, and run in a worker thread of its own. If its answer starts within
the budget, the client gets it at once, as a synchronous client would; if not,
it gets `{"queryStatus": {"queryId", "status": "pending"}}` and the work goes on.
A poll (`POST …/queries/{queryId}`) then answers the lines once the work is
done, or `pending` again, or `failed` with the protocol's error.

The work is warming: the snapshot replayed, a restricted table's derived files
built. A poll makes its lines again from what the work left warm, with its own
`maxFiles` and `pageToken`, so what a row holds is the query's parameters and
pinned version, never its answer, and a poll on another replica (which shares
the store, not the memory) answers too: it warms its own caches first if it
must, within the same budget.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor, wait
from datetime import datetime, timedelta
from itertools import chain, islice
from typing import Any

from share_store.errors import (
    DerivationPending,
    InvalidParameter,
    NotFound,
    RateLimited,
    ShareStoreError,
)
from share_store.model import SharedTable, Token
from share_store.persistence.async_queries import (
    FAILED,
    READY,
    AsyncQuery,
    AsyncQueryStore,
    parameters_hash,
)
from sharing_server.delta_sharing.capabilities import Capabilities
from sharing_server.delta_sharing.queries import TableQueries
from sharing_server.delta_sharing.requests import QueryRequest
from sharing_server.delta_sharing.responses import TableResponse

#: How long a query and its key are kept: Delta Sharing's Spark client gives up after 600 s.
QUERY_LIFETIME = timedelta(hours=1)
#: A caller's pending queries at most; more are refused (429) until some finish or expire.
MAX_PENDING_PER_CALLER = 32
#: Queries warming at once in this process at most; past it a query stays pending until a poll.
MAX_RUNNING = 32
#: Queries whose work finished here, remembered so that their polls answer at once.
MAX_WARM = 4096
#: A query id is ours (a UUID); anything longer is refused before the store is asked.
MAX_QUERY_ID_CHARS = 64


def caller_of(token: Token) -> str:
    """Whose queries a token's are: a named recipient's survive its tokens' rotation."""
    if token.recipient_id:
        return f"recipient:{token.recipient_id}"
    if token.oauth_client_id:
        return f"oauth:{token.oauth_client_id}"
    return f"token:{token.id}"


def parameters_of(
    request: QueryRequest, capabilities: Capabilities, file_id_hash: str | None
) -> dict[str, Any]:
    """What a query reads and how it answers: the same key with other parameters is another query."""
    fields = dataclasses.asdict(dataclasses.replace(request, idempotency_key=None))
    fields["predicate_hints"] = list(request.predicate_hints)
    return {
        "request": fields,
        "formats": list(capabilities.response_formats),
        "features": sorted(capabilities.reader_features),
        "endStreamAction": capabilities.include_end_stream_action,
        "fileIdHash": file_id_hash,
    }


def request_of(parameters: dict[str, Any]) -> tuple[QueryRequest, Capabilities, str | None]:
    """A stored query's request, capabilities and `fileidhash` as its submission gave them."""
    fields = dict(parameters["request"])
    fields["predicate_hints"] = tuple(fields["predicate_hints"])
    capabilities = Capabilities(
        response_formats=tuple(parameters["formats"]),
        reader_features=frozenset(parameters["features"]),
        include_end_stream_action=bool(parameters["endStreamAction"]),
        async_query=True,
    )
    return QueryRequest(**fields), capabilities, parameters["fileIdHash"]


def status_response(query_id: str, status: str, error: dict[str, str] | None = None) -> TableResponse:
    """A `queryStatus` line: `pending`, or `failed` with the protocol's error. Version 0 in the
    header: the JVM client requires one on every answer (the reference sends 0 too)."""
    line: dict[str, Any] = {"queryId": query_id, "status": status}
    if error:
        line["errorCode"] = error["errorCode"]
        line["errorMessage"] = error["message"]
    return TableResponse(0, "parquet", iter([{"queryStatus": line}]), echo_async_query=True)


@dataclasses.dataclass
class _Run:
    """A query's work in a worker thread: its first page's response, its first lines made."""

    future: Future[tuple[TableResponse, list[Any]]]
    #: Nobody waits for the result any longer: its lines are closed once it is made.
    abandoned: bool = False


def _close(result: tuple[TableResponse, list[Any]]) -> None:
    lines = result[0].lines
    close = getattr(lines, "close", None)
    if close is not None:
        close()


def _close_when_done(future: Future[tuple[TableResponse, list[Any]]]) -> None:
    if not future.cancelled() and future.exception() is None:
        _close(future.result())


class AsyncQueries:
    """Async `/query`s: submitted, worked on in the background, polled from any replica."""

    def __init__(
        self,
        queries: TableQueries,
        rows: AsyncQueryStore,
        budget_seconds: float,
        workers: int = 2,
    ) -> None:
        self.queries = queries
        self.rows = rows
        self.budget = budget_seconds
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="async-query")
        self._lock = threading.Lock()
        self._running: dict[str, _Run] = {}
        self._warm: OrderedDict[str, None] = OrderedDict()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- submission and polls --------------------------------------------------------------

    def submit(
        self,
        token: Token,
        table: SharedTable,
        request: QueryRequest,
        capabilities: Capabilities,
        file_id_hash: str | None,
    ) -> TableResponse:
        """The answer to an async `/query`: its lines if they start within the budget, else `pending`."""
        key = request.idempotency_key
        if key is None:
            raise InvalidParameter("idempotency_key is required for async query (send idempotencyKey).")
        caller = caller_of(token)
        parameters = parameters_of(request, capabilities, file_id_hash)
        if self.rows.pending(caller) >= MAX_PENDING_PER_CALLER:
            raise RateLimited(
                f"Too many async queries pending: at most {MAX_PENDING_PER_CALLER}; poll them or wait.",
                retry_after=10,
            )
        query, _ = self.rows.submit(
            caller, table.id, key, parameters, self._pinned(table, request), QUERY_LIFETIME
        )
        if query.parameters_hash != parameters_hash(parameters):
            raise InvalidParameter(
                "This idempotencyKey was given to another query of this table with other parameters: "
                "send a new key for a new query."
            )
        return self._answer(query, table, request, capabilities, file_id_hash, token.expires_at, polled=False)

    def poll(
        self, token: Token, table: SharedTable, query_id: str, max_files: int | None, page_token: str | None
    ) -> TableResponse:
        """`POST …/queries/{queryId}`: the query's lines (this page of them), or its status."""
        query = self.rows.get(query_id) if len(query_id) <= MAX_QUERY_ID_CHARS else None
        # Another caller's query, or another table's, is as absent as one never made.
        if query is None or query.caller != caller_of(token) or query.table_id != table.id:
            raise NotFound(f"query '{query_id[:MAX_QUERY_ID_CHARS]}' not found")
        submitted, capabilities, file_id_hash = request_of(query.parameters)
        request = dataclasses.replace(
            submitted,
            max_files=max_files if max_files is not None else submitted.max_files,
            page_token=page_token,
            # A refresh token is asked for or given on the first page alone (the protocol refuses
            # either later).
            include_refresh_token=submitted.include_refresh_token and page_token is None,
            refresh_token=submitted.refresh_token if page_token is None else None,
        )
        request.validate()
        return self._answer(query, table, request, capabilities, file_id_hash, token.expires_at, polled=True)

    # -- the work ------------------------------------------------------------------------

    def _pinned(self, table: SharedTable, request: QueryRequest) -> int | None:
        """The version a query of the latest snapshot reads, fixed when it is made: its retries and
        polls answer that version, whatever is committed meanwhile."""
        latest = (
            request.version is None
            and request.timestamp is None
            and request.starting_version is None
            and request.refresh_token is None
            and request.page_token is None
        )
        return self.queries.table_version(table, None) if latest else None

    def _answer(
        self,
        query: AsyncQuery,
        table: SharedTable,
        request: QueryRequest,
        capabilities: Capabilities,
        file_id_hash: str | None,
        until: datetime | None,
        polled: bool,
    ) -> TableResponse:
        """The query's lines if its work is done here or gets done within the budget, else its
        status. A submission whose work fails at once is answered the error, as a synchronous
        query is; a poll, the `failed` status the work stored."""
        if query.status == FAILED:
            return status_response(query.id, FAILED, query.error)
        with self._lock:
            run = self._running.get(query.id)
            owned = run is None
            if run is None:
                if query.id in self._warm:
                    self._warm.move_to_end(query.id)
                    return self._direct(query, table, request, capabilities, file_id_hash, until)
                if len(self._running) >= MAX_RUNNING:
                    self._sweep()
                if len(self._running) >= MAX_RUNNING:
                    return status_response(query.id, "pending")
                run = _Run(
                    self._pool.submit(self._work, query, table, request, capabilities, file_id_hash, until)
                )
                self._running[query.id] = run
        done, _ = wait([run.future], timeout=self.budget)
        if not done:
            if owned:
                run.abandoned = True
                run.future.add_done_callback(_close_when_done)
            return status_response(query.id, "pending")
        with self._lock:
            self._running.pop(query.id, None)
        error = run.future.exception()
        if isinstance(error, DerivationPending):
            return status_response(query.id, "pending")  # the build goes on; a poll looks again
        if isinstance(error, ShareStoreError) and error.status_code < 500 and polled:
            return status_response(
                query.id, FAILED, {"errorCode": error.error_code, "message": error.message}
            )
        if error is not None:
            raise error  # an outage is answered as one (not stored: see `_work`)
        with self._lock:
            self._remember_warm(query.id)
        if owned and not run.abandoned:
            response, first = run.future.result()
            return _async(dataclasses.replace(response, lines=chain(first, response.lines)))
        return self._direct(query, table, request, capabilities, file_id_hash, until)

    def _sweep(self) -> None:
        """Under the lock: forget the runs that ended and that no poll came for, so that they do not
        hold places; those that succeeded are remembered as warm."""
        for query_id, run in list(self._running.items()):
            if run.future.done():
                del self._running[query_id]
                if not run.future.cancelled() and run.future.exception() is None:
                    self._remember_warm(query_id)

    def _remember_warm(self, query_id: str) -> None:
        self._warm[query_id] = None
        self._warm.move_to_end(query_id)
        while len(self._warm) > MAX_WARM:
            self._warm.popitem(last=False)

    def _work(
        self,
        query: AsyncQuery,
        table: SharedTable,
        request: QueryRequest,
        capabilities: Capabilities,
        file_id_hash: str | None,
        until: datetime | None,
    ) -> tuple[TableResponse, list[Any]]:
        """In a worker thread: the query's response, its first lines made (protocol, metadata, a
        file: what waits on the snapshot's replay and a restricted table's derived files)."""
        try:
            response = self.queries.query(
                table, request, capabilities, file_id_hash, at_version=query.version, token_expires_at=until
            )
            first = list(islice(response.lines, 3))
        except DerivationPending:
            raise
        except ShareStoreError as error:
            if error.status_code < 500:
                # What the client did or the table is (a version gone, a refusal) stays so: stored,
                # every poll on every replica answers it. An outage is not stored: a poll retries.
                self.rows.settle(query.id, FAILED, {"errorCode": error.error_code, "message": error.message})
            raise
        self.rows.settle(query.id, READY)
        return response, first

    def _direct(
        self,
        query: AsyncQuery,
        table: SharedTable,
        request: QueryRequest,
        capabilities: Capabilities,
        file_id_hash: str | None,
        until: datetime | None,
    ) -> TableResponse:
        """The lines of a query whose work is done here: made now, from what it left warm."""
        return _async(
            self.queries.query(
                table, request, capabilities, file_id_hash, at_version=query.version, token_expires_at=until
            )
        )


def _async(response: TableResponse) -> TableResponse:
    return dataclasses.replace(response, echo_async_query=True)
