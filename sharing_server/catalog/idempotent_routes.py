"""`Idempotency-Key` on `/_iceberg`'s mutations (Iceberg REST 1.11): each mutation route's handler
wrapped (`idempotent_routes`) so that a retry with the key of a finalized request gets its answer.

Only a request that sends the header is touched (GET and HEAD never are). Its caller is
authenticated first (a key is the caller's own: one caller's answer never replays to another),
then the key is claimed in the store (`IdempotencyKeys`); the handler runs, and its answer (its
refusals too, rendered by the mount's error model here, so that a replay is the same bytes) is
kept when the rules say it is final (`share_store.catalog.idempotency.storable`). The handler and
the keeping run shielded from the request's cancellation: a client that cuts the connection after
the server committed (the uncertain commit the key is for) still finds its answer kept.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from share_store.catalog.idempotency import (
    CLAIM,
    HEADER,
    REPLAY,
    REUSED,
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
from sharing_server.auth.catalog_callers import CatalogAuthentication
from sharing_server.http.iceberg_errors import MISSING, error_answer

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

    async def __call__(self, request: Request) -> Response:
        raw = request.headers.get(HEADER)
        if raw is None or request.method not in MUTATING_METHODS:
            return await self.endpoint(request)
        key = parse_key(raw)
        principal = await self.authentication.caller(request)
        query = request.url.query
        binding = Binding(
            caller_id(principal.key),
            request.method,
            self.route,
            request.url.path + ("?" + query if query else ""),
            body_digest(await request.body()),
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT_SECONDS
        while True:
            outcome, found = await run_in_threadpool(self.keys.claim, key, binding)
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
            if outcome == REUSED:
                raise IdempotencyKeyReused(
                    f"this {HEADER} was used for another request (another route, target or body)"
                )
            if loop.time() >= deadline:
                raise KeyInProgress(f"the request of this {HEADER} is still in progress", WAIT_SECONDS)
            await asyncio.sleep(POLL_SECONDS)

    async def _run(self, request: Request, key: str, caller: str, claim: str) -> Response:
        try:
            try:
                response = await self.endpoint(request)
            except Exception as error:
                rendered = await error_answer(request, error, self.missing)
                if rendered is None:
                    raise
                response = rendered
            body = getattr(response, "body", None)
            if storable(response.status_code) and isinstance(body, bytes):
                answer = Answer(response.status_code, kept_headers(response.headers), body)
                await run_in_threadpool(self.keys.finish, caller, key, claim, answer)
            else:
                await run_in_threadpool(self.keys.release, caller, key, claim)
            return response
        except BaseException:
            # Nothing kept: a retry runs again (the store unreachable, say, or a bug's 500).
            with contextlib.suppress(Exception):
                await run_in_threadpool(self.keys.release, caller, key, claim)
            raise


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
