"""ASGI middleware around every request: security headers, limits, audit and metrics.

Order, outermost first: `SecurityHeaders` (every response, errors included),
`Observe` (sees every status, 429 and 413 included), `ConnectionGuard`
(`sharing_server.http.connections`: framing, body and send deadlines), `RequestLimits`.
Refusals made here are answered directly, since the app's exception handlers
sit further in.
"""

from __future__ import annotations

import math
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from share_store.errors import MalformedRequest, RateLimited, ShareStoreError
from sharing_server import paths
from sharing_server.http.errors import RequestTooLarge, share_store_error
from sharing_server.http.rate_limits import RateLimiter
from sharing_server.observability.activity import ActivityRecorder
from sharing_server.observability.audit import AuditLog, current_fields
from sharing_server.observability.metrics import Metrics
from sharing_server.observability.redaction import redact_path

# Probes and scrapes are never limited or audited: they would drown the log.
UNOBSERVED_PATHS = frozenset({paths.HEALTHZ, paths.METRICS})
DEFAULT_CSP = b"default-src 'none'; frame-ancestors 'none'"


class ForwardedHeaders:
    """Behind `hops` trusted proxies, the client address and scheme they saw, not theirs.

    Each proxy appends the address it received from to X-Forwarded-For, so the
    entry `hops` from the right is the last one a trusted proxy wrote; anything
    left of it came from the client and is not to be believed. (Hypercorn's
    ProxyFixMiddleware does this too, but deep-copies the whole scope.)
    """

    def __init__(self, app: ASGIApp, hops: int) -> None:
        self.app = app
        self.hops = hops

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            forwarded = [a.strip() for a in headers.get(b"x-forwarded-for", b"").decode("latin-1").split(",")]
            forwarded = [address for address in forwarded if address]
            if len(forwarded) >= self.hops:
                scope = {**scope, "client": (forwarded[-self.hops], 0)}
            proto = headers.get(b"x-forwarded-proto", b"").decode("latin-1").split(",")[-1].strip().lower()
            if proto in ("http", "https"):
                scope = {**scope, "scheme": proto}
        await self.app(scope, receive, send)


class SecurityHeaders:
    """Headers every response carries; protocol bodies are data, never pages."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                given = {name.lower() for name, _ in headers}
                headers.append((b"x-content-type-options", b"nosniff"))
                headers.append((b"x-frame-options", b"DENY"))
                # The console's pages set a policy and a referrer policy of their own.
                for name, value in (
                    (b"referrer-policy", b"no-referrer"),
                    (b"content-security-policy", DEFAULT_CSP),
                ):
                    if name not in given:
                        headers.append((name, value))
                if scope.get("scheme") == "https":
                    headers.append((b"strict-transport-security", b"max-age=31536000"))
                if b"cache-control" not in given:
                    headers.append((b"cache-control", b"no-store"))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _route_name(scope: Scope) -> str:
    endpoint = scope.get("endpoint")
    return getattr(endpoint, "__name__", "unmatched") if endpoint is not None else "unmatched"


class Observe:
    """Times each request, counts its bytes, then writes its audit line and metrics."""

    def __init__(
        self, app: ASGIApp, audit: AuditLog, metrics: Metrics, activity: ActivityRecorder | None = None
    ) -> None:
        self.app = app
        self.audit = audit
        self.metrics = metrics
        self.activity = activity

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in UNOBSERVED_PATHS:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        # Before routing, which may rewrite it; a signing grant or an activation code in it never
        # reaches the audit line or the console's activity.
        path = redact_path(scope["path"])
        request_id = uuid.uuid4().hex[:16]
        fields: dict[str, Any] = {}
        # A state of this request's own: servers pass a copy of the lifespan state,
        # but nothing obliges them to, and audit fields must never mix requests.
        scope["state"] = {**scope.get("state", {}), "audit": fields}
        context = current_fields.set(fields)
        outcome = {"status": 500, "bytes": 0}

        async def observed_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                outcome["status"] = message["status"]
                message["headers"] = [*message.get("headers", []), (b"x-request-id", request_id.encode())]
            elif message["type"] == "http.response.body":
                outcome["bytes"] += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, observed_send)
        finally:
            current_fields.reset(context)
            seconds = time.perf_counter() - started
            route = _route_name(scope)
            fields["bytes"] = outcome["bytes"]
            if outcome["status"] >= 500 and "error_code" not in fields:
                fields["error_code"] = "INTERNAL_ERROR"
            self.metrics.observe(route, scope["method"], outcome["status"], seconds, fields)
            record = {
                "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
                "request_id": request_id,
                "client": (scope.get("client") or ("", 0))[0],
                "method": scope["method"],
                # Never the query string: local file URLs carry their signature there.
                "path": path,
                "route": route,
                "status": outcome["status"],
                "duration_ms": round(seconds * 1000, 2),
                **fields,
            }
            self.audit.write(record)
            if self.activity is not None:
                self.activity.offer(path, record)


class RequestLimits:
    """Refusals made before the app: several credentials, too many requests, too large a body.

    Several Authorization headers get 400, requests over a rate limit 429 with
    Retry-After, and bodies over `max_body_bytes` 413.
    """

    def __init__(self, app: ASGIApp, limiter: RateLimiter, metrics: Metrics, max_body_bytes: int) -> None:
        self.app = app
        self.limiter = limiter
        self.metrics = metrics
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in UNOBSERVED_PATHS:
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        authorizations = [value for name, value in scope["headers"] if name == b"authorization"]
        if len(authorizations) > 1:
            # The limits and authentication must read the same credential: with several
            # headers, which one each would take is a matter of implementation.
            message = "send one Authorization header, not several"
            await self._refuse(scope, receive, send, MalformedRequest(message))
            return
        refused = self.limiter.check(authorizations[0].decode("latin-1") if authorizations else None)
        if refused is not None:
            limit, wait = refused
            self.metrics.rate_limited.labels(limit).inc()
            retry_after = max(1, math.ceil(wait))
            what = "this token's" if limit == "token" else "the server's"
            message = f"{what} request rate limit is exceeded: retry after {retry_after} s"
            await self._refuse(scope, receive, send, RateLimited(message, retry_after))
            return
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body_bytes):
            await self._refuse(scope, receive, send, RequestTooLarge(self._too_large()))
            return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise RequestTooLarge(self._too_large())
            return message

        await self.app(scope, limited_receive, send)

    def _too_large(self) -> str:
        return f"the request body exceeds the limit of {self.max_body_bytes} bytes"

    @staticmethod
    async def _refuse(scope: Scope, receive: Receive, send: Send, error: ShareStoreError) -> None:
        # Answered here, outside the app: its exception handlers sit further in.
        response = await share_store_error(Request(scope, receive), error)
        await response(scope, receive, send)
