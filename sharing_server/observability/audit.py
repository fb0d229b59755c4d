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
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from typing import Any

from starlette.requests import HTTPConnection

from sharing_server.http.ndjson import LineBlock

logger = logging.getLogger("sharing_server.observability.audit")
FILE_ACTIONS = frozenset({"file", "add", "remove", "cdf"})
#: The audit fields of the request being served. Worker threads (`run_in_threadpool`)
#: run in a copy of the request's context, so they see the same dictionary.
current_fields: ContextVar[dict[str, Any] | None] = ContextVar("audit_fields", default=None)


def note(**fields: Any) -> None:
    """Add `fields` to the audit record of the request being served, if any."""
    record = current_fields.get()
    if record is not None:
        record.update(fields)


def audit_fields(connection: HTTPConnection) -> dict[str, Any]:
    """The mutable audit record of the request being served."""
    return connection.scope.setdefault("state", {}).setdefault("audit", {})


def counting_files(
    lines: Iterable[dict[str, Any] | bytes],
    fields: dict[str, Any],
    file_bytes: Callable[[], int] | None = None,
) -> Iterator[dict[str, Any] | bytes]:
    """Pass protocol lines through, counting the file actions among them as they stream.

    Lines already encoded (bytes) are file lines: only those are pre-encoded.
    `file_bytes` tells, once the lines end, the size of the data files they
    handed out (the encoder adds them up as it signs each one).
    """
    fields["files"] = 0
    try:
        for line in lines:
            if type(line) is LineBlock:
                fields["files"] += line.lines
            elif isinstance(line, bytes) or next(iter(line)) in FILE_ACTIONS:
                fields["files"] += 1
            yield line
    finally:
        if file_bytes is not None:
            fields["file_bytes"] = file_bytes()


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
