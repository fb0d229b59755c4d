"""`Idempotency-Key` on `/_iceberg`'s mutations (Iceberg REST 1.11): each mutation route's handler
wrapped (`idempotent_routes`) so that a retry with the key of a finalized request gets its answer.

Only a request that sends the header is touched (GET and HEAD never are). The key is claimed in
the store (`IdempotencyKeys`) right after the handler has authenticated the caller, in the same
trip to a worker thread (`KeyClaim`, run by `CatalogAuthentication` as `AFTER_AUTHENTICATION`):
a key is the caller's own (one caller's answer never replays to another), and a refusal of the
caller (401, 403) is not the key's. A key already finalized stops the handler there (`Decided`)
and its answer is replayed; one in progress makes the request wait for it; one bound to another
request is a 422. Otherwise the handler runs, and its answer (its refusals too, rendered by the
mount's error model here, so that a replay is the same bytes) is kept when the rules say it is
final (`share_store.catalog.idempotency.storable`). The handler runs shielded from the request's
cancellation, and its answer is kept by a task of its own as the answer goes: a client that cuts
the connection after the server committed (the uncertain commit the key is for) still finds its
answer kept.
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

from share_store.catalog.access import Principal
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
from share_store.catalog.idempotency_keys import IdempotencyKeys
from sharing_server.auth.catalog_callers import AFTER_AUTHENTICATION
from sharing_server.http.iceberg_errors import MISSING, error_answer
from sharing_server.observability.audit import audit_fields

log = logging.getLogger(__name__)

Endpoint = Callable[[Request], Awaitable[Response]]

#: Routes that change nothing a retry could duplicate, or are not the catalog's own mutations:
#: the token endpoint (OAuth2, not Iceberg), metrics reports (dropped), the remote signers (these,
#: and any route named `*_sign`: the spec declares no key on `sign` or `reportMetrics`).
NOT_MUTATIONS = frozenset(
    {"warehouse_oauth", "warehouse_table_metrics", "warehouse_s3_sign", "warehouse_not_served"}
)
MUTATING_METHODS = frozenset({"POST", "PUT", "DELETE", "PATCH"})
#: Between two looks at a key in progress.
POLL_SECONDS = 0.05


class Decided(Exception):
    """Raised by a key's claim where its handler authenticates: the request does not run (its
    answer is replayed, it waits for the key's request in progress, or it is refused)."""

    def __init__(self, outcome: str, answer: Answer | None) -> None:
        super().__init__(outcome)
        self.outcome = outcome
        self.answer = answer


class KeyClaim:
    """One request's key: claimed (`__call__`) in the worker thread where its handler has just
    authenticated the caller, before the handler does anything else."""

    def __init__(
        self, keys: IdempotencyKeys, key: str, method: str, route: str, target: str, body: str
    ) -> None:
        self.keys, self.key = keys, key
        self.method, self.route, self.target, self.body = method, route, target, body
        self.binding: Binding | None = None
        #: The claim's id once claimed: the request runs, and its answer is kept under it.
        self.claim: str | None = None

    def __call__(self, principal: Principal) -> None:
        if self.claim is not None:
            return  # claimed already (a handler that checks its caller twice, or a rerun)
        self.binding = Binding(caller_id(principal.key), self.method, self.route, self.target, self.body)
        outcome, found = self.keys.claim(self.key, self.binding)
        if outcome == CLAIM:
            assert isinstance(found, str)
            self.claim = found
            return
        raise Decided(outcome, found if isinstance(found, Answer) else None)


class IdempotentEndpoint:
    """One route's handler, keyed: see the module's docstring."""

    def __init__(self, endpoint: Endpoint, route: str, keys: IdempotencyKeys, missing: str) -> None:
        self.endpoint = endpoint
        self.route = route
        self.keys = keys
        self.missing = missing
        self._pending: set[asyncio.Future[None]] = set()

    async def __call__(self, request: Request) -> Response:
        raw = request.headers.get(HEADER)
        if raw is None or request.method not in MUTATING_METHODS:
            return await self.endpoint(request)
        key = parse_key(raw)
        query = request.url.query
        target = request.url.path + ("?" + query if query else "")
        claim = KeyClaim(
            self.keys, key, request.method, self.route, target, body_digest(await request.body())
        )
        request.scope[AFTER_AUTHENTICATION] = claim
        run = asyncio.ensure_future(self._run(request, claim))
        # A cancelled request (the client gone, the server stopping) leaves `run` to finish and
        # keep its answer: the uncertain commit's retry finds it.
        run.add_done_callback(_retrieved)
        return await asyncio.shield(run)

    async def _run(self, request: Request, claim: KeyClaim) -> Response:
        deadline = asyncio.get_running_loop().time() + WAIT_SECONDS
        while True:
            try:
                response = await self._answer(request)
            except Decided as decided:
                # The audit line says what the key did: a provider tells retries from requests.
                audit_fields(request)["idempotency_key"] = decided.outcome
                if decided.outcome == REPLAY:
                    assert decided.answer is not None
                    replayed = {**decided.answer.headers, "Idempotent-Replayed": "true"}
                    return Response(decided.answer.body, decided.answer.status, headers=replayed)
                if decided.outcome == REUSED:
                    raise IdempotencyKeyReused(
                        f"this {HEADER} was used for another request (another route, target or body)"
                    ) from None
                await self._wait(claim, deadline)  # WAIT: then the handler again, claim or replay
                continue
            except BaseException:
                if claim.claim is not None and claim.binding is not None:  # a bug's 500: not kept
                    with contextlib.suppress(Exception):
                        caller, held = claim.binding.caller, claim.claim
                        await run_in_threadpool(self.keys.release, caller, claim.key, held)
                raise
            break
        if claim.claim is None or claim.binding is None:
            return response  # refused before its caller was known (a 401): not the key's
        audit_fields(request)["idempotency_key"] = "ran"
        caller, key, held = claim.binding.caller, claim.key, claim.claim
        body = getattr(response, "body", None)
        if storable(response.status_code) and isinstance(body, bytes):
            answer = Answer(response.status_code, kept_headers(response.headers), body)
            keep: Callable[[], None] = partial(self.keys.finish, caller, key, held, answer)
        else:
            keep = partial(self.keys.release, caller, key, held)
        # Kept while the answer goes, not before it: until it is, the key is in progress, so a
        # retry that comes first waits for it and replays it; a process that dies meanwhile
        # had sent its answer (or its client retries once the claim is abandoned).
        self._keeping(keep)
        return response

    async def _answer(self, request: Request) -> Response:
        """The handler's answer, its refusals rendered by the mount's error model (so that a
        replay is the same bytes); a claim's `Decided` goes up as it is."""
        try:
            return await self.endpoint(request)
        except Decided:
            raise
        except Exception as error:
            rendered = await error_answer(request, error, self.missing)
            if rendered is None:
                raise
            return rendered

    async def _wait(self, claim: KeyClaim, deadline: float) -> None:
        """Until the key's request in progress has its answer kept (or gives the key back)."""
        loop = asyncio.get_running_loop()
        assert claim.binding is not None
        while loop.time() < deadline:
            await asyncio.sleep(POLL_SECONDS)
            outcome, _ = await run_in_threadpool(self.keys.peek, claim.key, claim.binding)
            if outcome != WAIT:
                return
        raise KeyInProgress(f"the request of this {HEADER} is still in progress", WAIT_SECONDS)

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


def takes_key(route: str, method: str) -> bool:
    """Whether the route's handler takes an `Idempotency-Key` for `method` (its OpenAPI spec says so
    too: `sharing_server.openapi.catalog_idempotency`)."""
    signer = route.endswith("_sign")
    return method in MUTATING_METHODS and route not in NOT_MUTATIONS and not signer


def idempotent_routes(
    routes: Sequence[BaseRoute], keys: IdempotencyKeys, not_found: Mapping[str, str]
) -> list[BaseRoute]:
    """`routes` with every mutation's handler keyed (`not_found`: a 404's type by route name, as
    the mount's error model has it)."""
    keyed: list[BaseRoute] = []
    for route in routes:
        methods = set(route.methods or ()) if isinstance(route, Route) else set()
        if not isinstance(route, Route) or not any(takes_key(route.name, method) for method in methods):
            keyed.append(route)
            continue
        endpoint = IdempotentEndpoint(route.endpoint, route.name, keys, not_found.get(route.name, MISSING))
        # The bound method, so that Starlette calls it with a request (an object it would take
        # for an ASGI app).
        keyed.append(Route(route.path, endpoint.__call__, methods=sorted(methods), name=route.name))
    return keyed
