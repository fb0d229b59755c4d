"""Which failures mean "storage or a catalog cannot be reached right now".

Those become `StorageUnavailable` (503 TEMPORARILY_UNAVAILABLE): the same
request may succeed as is once the service is back. Libraries report an outage
in their own ways (botocore and urllib3 with their own exception trees, pyarrow
and requests with `OSError`, pyiceberg's REST client with `ServerError`, a SQL
catalog with SQLAlchemy's `OperationalError`), so they are recognised here, in
one place. Nothing derived from a failed read may be cached: every cache in the
readers is filled only after a read succeeded.
"""

from __future__ import annotations

import errno
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from botocore.exceptions import ClientError, HTTPClientError, IncompleteReadError
from botocore.exceptions import ConnectionError as BotoConnectionError
from urllib3.exceptions import HTTPError as Urllib3Error

from share_store.errors import ShareStoreError, StorageUnavailable

# `OSError`s that name a wrong object, not an unreachable service: retrying
# later would not help, so they must not read as "temporarily unavailable".
NOT_OUTAGES = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)

NETWORK_ERRORS = (OSError, Urllib3Error, BotoConnectionError, HTTPClientError, IncompleteReadError)

DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
SQLITE_FULL = 13  # sqlite3.SQLITE_FULL, as `sqlite3.Error.sqlite_errorcode` gives it


def client_error_is_outage(error: ClientError) -> bool:
    """S3 answering 5xx (SlowDown, InternalError, ServiceUnavailable) is down for now, not refusing."""
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return isinstance(status, int) and status >= 500


def disk_full(error: BaseException) -> bool:
    """Whether `error`, or an error it stems from, says a disk, quota or file size limit is full.

    Not an outage: the service is there, and retrying will not help until
    someone frees space. Recognised by errno, by SQLite's SQLITE_FULL and by
    PostgreSQL's disk_full (53100), through the chain of causes and the DBAPI
    error SQLAlchemy wraps (`orig`).
    """
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        link = pending.pop()
        if link is None or id(link) in seen:
            continue
        seen.add(id(link))
        if isinstance(link, OSError) and link.errno in DISK_FULL_ERRNOS:
            return True
        # Extended SQLite codes keep the primary code in their low byte.
        if (getattr(link, "sqlite_errorcode", 0) or 0) & 0xFF == SQLITE_FULL:
            return True
        if getattr(link, "sqlstate", None) == "53100":
            return True
        orig = getattr(link, "orig", None)
        pending += [link.__cause__, link.__context__, orig if isinstance(orig, BaseException) else None]
    return False


def is_outage(error: BaseException) -> bool:
    if isinstance(error, (ShareStoreError, *NOT_OUTAGES)) or disk_full(error):
        return False
    if isinstance(error, NETWORK_ERRORS):
        return True
    if isinstance(error, ClientError):
        return client_error_is_outage(error)
    # Only modules already loaded can have raised their errors: no import just to check.
    pyiceberg = sys.modules.get("pyiceberg.exceptions")
    if pyiceberg is not None and isinstance(error, pyiceberg.ServerError):
        return True
    sql = sys.modules.get("sqlalchemy.exc")
    # `TimeoutError`: no pooled connection came free in time, for the database is slow or away.
    return sql is not None and isinstance(error, sql.OperationalError | sql.InterfaceError | sql.TimeoutError)


@contextmanager
def outages_unavailable(what: str) -> Iterator[None]:
    """Re-raise an outage inside the block as `StorageUnavailable` naming `what`; nothing else changes."""
    try:
        yield
    except Exception as error:
        if is_outage(error):
            raise StorageUnavailable(f"{what} is unreachable; try again later") from error
        raise
