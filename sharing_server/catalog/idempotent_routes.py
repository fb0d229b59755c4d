"""`Idempotency-Key` on `/_iceberg`'s mutations (Iceberg REST 1.11): each mutation route's handler
wrapped (`idempotent_routes`) so that a retry with the key of a finalized request gets its answer.

Only a request that sends the header is touched (GET and HEAD never are). Its caller is
authenticated first (a key is the caller's own: one caller's answer never replays to another),
then the key is claimed in the store (`IdempotencyKeys`); the handler runs, and its answer (its
refusals too, rendered by the mount's error model here, so that a replay is the same bytes) is
kept when the rules say it is final (`share_store.catalog.idempotency.storable`). The handler runs
shielded from the request's cancellation, and its answer is kept by a task of its own as the
answer goes: a client that cuts the connection after the server committed (the uncertain commit
the key is for) still finds its answer kept. The caller is authenticated and the key claimed in
one trip to a worker thread, and the handler's own check of the caller reuses that one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from share_store.catalog.idempotency import (
    CLAIM,
    HEADER,
    REPLAY,
    REUSED,
    WAIT,
    WAIT_SECONDS,
    Answer,
    Binding,
    IdempotencyKeyReused,
    KeyInProgress,
    body_digest,
    caller_id,
    kept_headers,
    parse_key,
    storable,
)
from share_store.persistence.idempotency_keys import IdempotencyKeys
from sharing_server.auth.catalog_callers import AUTHENTICATED, CatalogAuthentication, credentials_of
from sharing_server.http.iceberg_errors import MISSING, error_answer

log = logging.getLogger(__name__)

Endpoint = Callable[[Request], Awaitable[Response]]

#: Routes that change nothing a retry could duplicate, or are not the catalog's own mutations:
#: the token endpoint (OAuth2, not Iceberg), metrics reports (dropped), the remote signers (by
#: name, and any route ending in `/sign`: the spec declares no key on `sign` or `reportMetrics`).
NOT_MUTATIONS = frozenset(
    {"warehouse_oauth", "warehouse_table_metrics", "warehouse_s3_sign", "warehouse_not_served"}
)
MUTATING_METHODS = frozenset({"POST", "PUT", "DELETE", "PATCH"})
#: Between two looks at a key in progress.
POLL_SECONDS = 0.05


class IdempotentEndpoint:
    """One route's handler, keyed: see the module's docstring."""

    def __init__(
        self,
        endpoint: Endpoint,
        route: str,
        keys: IdempotencyKeys,
        authentication: CatalogAuthentication,
        missing: str,
    ) -> None:
        self.endpoint = endpoint
        self.route = route
        self.keys = keys
        self.authentication = authentication
        self.missing = missing
        self._pending: set[asyncio.Future[None]] = set()

    async def __call__(self, request: Request) -> Response:
        raw = request.headers.get(HEADER)
        if raw is None or request.method not in MUTATING_METHODS:
            return await self.endpoint(request)
        key = parse_key(raw)
        credentials = await credentials_of(request)
        query = request.url.query
        target = request.url.path + ("?" + query if query else "")
        body_sha256 = body_digest(credentials.body)

        def authenticate_and_claim() -> tuple[Binding, str, str | Answer | None]:
            # One trip to a worker thread: the caller first (the key is its own), then its key.
            principal = self.authentication.callers.authenticate(credentials)
            request.scope[AUTHENTICATED] = principal  # the handler's own check reuses it
            binding = Binding(caller_id(principal.key), request.method, self.route, target, body_sha256)
            return (binding, *self.keys.claim(key, binding))

        binding, outcome, found = await run_in_threadpool(authenticate_and_claim)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT_SECONDS
        while True:
            if outcome == WAIT:
                if loop.time() >= deadline:
                    raise KeyInProgress(f"the request of this {HEADER} is still in progress", WAIT_SECONDS)
                await asyncio.sleep(POLL_SECONDS)
                outcome, found = await run_in_threadpool(self.keys.claim, key, binding)
                continue
            if outcome == CLAIM:
                assert isinstance(found, str)
                run = asyncio.ensure_future(self._run(request, key, binding.caller, found))
                # A cancelled request (the client gone) leaves `run` to finish and keep the answer.
                run.add_done_callback(_retrieved)
                return await asyncio.shield(run)
            if outcome == REPLAY:
                assert isinstance(found, Answer)
                replayed = {**found.headers, "Idempotent-Replayed": "true"}
                return Response(found.body, found.status, headers=replayed)
            assert outcome == REUSED
            raise IdempotencyKeyReused(
                f"this {HEADER} was used for another request (another route, target or body)"
            )

    async def _run(self, request: Request, key: str, caller: str, claim: str) -> Response:
        try:
            try:
                response = await self.endpoint(request)
            except Exception as error:
                rendered = await error_answer(request, error, self.missing)
                if rendered is None:
                    raise
                response = rendered
        except BaseException:
            # Nothing kept: a retry runs again (the store unreachable, say, or a bug's 500).
            with contextlib.suppress(Exception):
                await run_in_threadpool(self.keys.release, caller, key, claim)
            raise
        body = getattr(response, "body", None)
        if storable(response.status_code) and isinstance(body, bytes):
            answer = Answer(response.status_code, kept_headers(response.headers), body)
            keep: Callable[[], None] = partial(self.keys.finish, caller, key, claim, answer)
        else:
            keep = partial(self.keys.release, caller, key, claim)
        # Kept while the answer goes, not before it: until it is, the key is in progress, so a
        # retry that comes first waits for it and replays it; a process that dies meanwhile
        # had sent its answer (or its client retries once the claim is abandoned).
        self._keeping(keep)
        return response

    def _keeping(self, keep: Callable[[], None]) -> None:
        task = asyncio.ensure_future(run_in_threadpool(keep))
        self._pending.add(task)  # held: the loop keeps only weak references to its tasks
        task.add_done_callback(self._kept)

    def _kept(self, task: asyncio.Future[None]) -> None:
        self._pending.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("an idempotency key's answer was not kept", exc_info=task.exception())


def _retrieved(run: asyncio.Future[Response]) -> None:
    # Its error was the request's to answer; once the request is gone, nobody reads it.
    if not run.cancelled():
        run.exception()


def idempotent_routes(
    routes: Sequence[BaseRoute],
    keys: IdempotencyKeys,
    authentication: CatalogAuthentication,
    not_found: Mapping[str, str],
) -> list[BaseRoute]:
    """`routes` with every mutation's handler keyed (`not_found`: a 404's type by route name, as
    the mount's error model has it)."""
    keyed: list[BaseRoute] = []
    for route in routes:
        methods = set(route.methods or ()) if isinstance(route, Route) else set()
        if (
            not isinstance(route, Route)
            or route.name in NOT_MUTATIONS
            or route.path.endswith("/sign")
            or not methods & MUTATING_METHODS
        ):
            keyed.append(route)
            continue
        endpoint = IdempotentEndpoint(
            route.endpoint, route.name, keys, authentication, not_found.get(route.name, MISSING)
        )
        # The bound method, so that Starlette calls it with a request (an object it would take
        # for an ASGI app).
        keyed.append(Route(route.path, endpoint.__call__, methods=sorted(methods), name=route.name))
    return keyed
