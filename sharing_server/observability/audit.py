"""The audit log: one JSON line per request, saying who read what, and nothing secret.

Handlers add what they learn (token id, share, table, version, files returned)
to the request's audit fields; `Observe` writes the line when the response
has been sent, with status, bytes and duration. Code that knows nothing of
requests (building an Iceberg snapshot) adds to the fields of the request it
serves through `note`, which finds them in a context variable. Paths are logged without
their query string, and tokens only by id, so no secret or signed URL can
reach the log.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import sys
from contextvars import ContextVar
from typing import Any

from starlette.requests import HTTPConnection

from share_store.errors import Unauthenticated

logger = logging.getLogger("sharing_server.observability.audit")
#: The audit fields of the request being served. Worker threads (`run_in_threadpool`)
#: run in a copy of the request's context, so they see the same dictionary.
current_fields: ContextVar[dict[str, Any] | None] = ContextVar("audit_fields", default=None)


def note(**fields: Any) -> None:
    """Add `fields` to the audit record of the request being served, if any."""
    record = current_fields.get()
    if record is not None:
        record.update(fields)


#: The token id recorded for a bearer token no token holds.
UNKNOWN_TOKEN = "unknown"  # noqa: S105 - a marker, not a secret


def audit_fields(connection: HTTPConnection) -> dict[str, Any]:
    """The mutable audit record of the request being served."""
    return connection.scope.setdefault("state", {}).setdefault("audit", {})


def note_refused_token(connection: HTTPConnection, error: Unauthenticated) -> None:
    """Name a revoked or expired token in the audit line (its id, never its secret); an unknown one
    is said to be unknown, so that a provider sees who keeps calling with a dead token."""
    fields = audit_fields(connection)
    if error.token_id is not None:
        fields.setdefault("token_id", error.token_id)
        if error.share:
            fields.setdefault("share", error.share)
    elif connection.headers.get("authorization"):
        fields.setdefault("token_id", UNKNOWN_TOKEN)


class AuditLog:
    """Writes audit records to stdout ("-"), a file (reopened when rotated away), or nowhere ("off")."""

    def __init__(self, destination: str) -> None:
        self.enabled = destination != "off"
        self._logger = logging.getLogger(f"{logger.name}.{id(self)}")
        self._logger.propagate = False
        self._logger.setLevel(logging.INFO)
        if not self.enabled:
            return
        handler: logging.Handler
        if destination == "-":
            handler = logging.StreamHandler(sys.stdout)
        else:
            handler = logging.handlers.WatchedFileHandler(destination, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(message)s"))
        self._logger.addHandler(handler)

    def write(self, record: dict[str, Any]) -> None:
        if self.enabled:
            self._logger.info(json.dumps(record, separators=(",", ":"), default=str))

    def close(self) -> None:
        for handler in list(self._logger.handlers):
            handler.close()
            self._logger.removeHandler(handler)
